package containerd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
)

// TestTaskLostAnswer: a task create or start whose answer is lost (the
// connection broke after the daemon acted, or before it did, or it
// answered UNAVAILABLE) is neither failed nor blindly sent again:
// Tasks/Get says what happened, and the call succeeds with exactly one
// task created, started once. A task that started and already exited
// counts as started. A create cut off while the daemon still creates
// (Tasks/Get says NotFound until it ends, and a second create meets its
// bundle) waits for the first to end, or to abort, and creates no task
// twice.
func TestTaskLostAnswer(t *testing.T) {
	create := func(ctx context.Context, e *Engine) (uint32, error) {
		return e.taskCreate(ctx, "web", containerdapi.TaskSpec{}, 0)
	}
	start := func(ctx context.Context, e *Engine) (uint32, error) {
		return e.taskStart(ctx, "web")
	}
	cases := []struct {
		name         string
		call         func(context.Context, *Engine) (uint32, error)
		created      bool   // the task is there, created, before the call
		fault        string // of the call's first attempt: "after" (acted, then the connection broke), "before", "unavailable", "creating" (cut while the daemon creates)
		exits        bool   // a started task exits at once
		gone         bool   // the task is deleted behind the engine's back after the fault
		aborts       bool   // a create cut while creating is not carried out
		leftover     bool   // an earlier create, cut while creating, is still being undone
		bundleGone   bool   // and removes the bundle under the new create's shim
		logGone      bool   // and removes the bundle under the new create's runc
		shimPathGone bool   // and removes the bundle as the new create's shim starts
		forever      bool   // a create cut while creating never ends (the client's request bound is 500 ms)
		within       string // the bound the settling of a create that never ends is given up at, if not 500ms
		unknown      int    // after the fault, this many Tasks/Get answer the task's status UNKNOWN (a busy shim)
		noStart      bool   // the task is never started
		wantCalls    string // the calls made; a regular expression for "creating"
		wantState    string
		wantErr      bool
	}{
		{name: "create, cut while creating", call: create, fault: "creating", wantCalls: `^Create Get( Create Get)+ Get$`, wantState: "created"},
		{name: "create, cut while creating, aborted", call: create, fault: "creating", aborts: true, wantCalls: `^Create Get( Create Get)* Create$`, wantState: "created"},
		{name: "create, cut while creating, never settled", call: create, fault: "creating", forever: true, wantCalls: `^Create Get( Create Get)+$`, wantState: "creating", wantErr: true},
		{name: "create, cut while creating, not settled within the caller's bound", call: func(ctx context.Context, e *Engine) (uint32, error) {
			return e.taskCreate(ctx, "web", containerdapi.TaskSpec{}, 200*time.Millisecond)
		}, fault: "creating", forever: true, within: "200ms", wantCalls: `^Create Get( Create Get)+$`, wantState: "creating", wantErr: true},
		{name: "create, an earlier create's cleanup under way", call: create, leftover: true, aborts: true, wantCalls: `^Create Get( Create Get)* Create$`, wantState: "created"},
		{name: "create, an earlier create's cleanup removes the bundle under the shim", call: create, leftover: true, bundleGone: true, aborts: true, wantCalls: `^Create Get( Create Get)* Create$`, wantState: "created"},
		{name: "create, an earlier create's cleanup removes the bundle under runc", call: create, leftover: true, logGone: true, aborts: true, wantCalls: `^Create Get( Create Get)* Create$`, wantState: "created"},
		{name: "create, an earlier create's cleanup removes the bundle as the shim starts", call: create, leftover: true, shimPathGone: true, aborts: true, wantCalls: `^Create Get( Create Get)* Create$`, wantState: "created"},
		{name: "create, cut while creating, seen, then undone", call: create, fault: "undone", wantCalls: `^Create Get Get Create$`, wantState: "created"},
		{name: "create, lost after acting", call: create, fault: "after", wantCalls: "Create Get Get", wantState: "created"},
		{name: "create, lost after acting, unknown a while", call: create, fault: "after", unknown: 2, wantCalls: "Create Get Get Get Get", wantState: "created"},
		{name: "create, lost before acting", call: create, fault: "before", wantCalls: "Create Get Create", wantState: "created"},
		{name: "create, unavailable", call: create, fault: "unavailable", wantCalls: "Create Get Create", wantState: "created"},
		{name: "create, answered", call: create, wantCalls: "Create", wantState: "created"},
		{name: "create, already there", call: create, created: true, wantCalls: "Create", wantState: "created", wantErr: true},
		{name: "start, lost after acting", call: start, created: true, fault: "after", wantCalls: "Start Get", wantState: "running"},
		{name: "start, lost after acting, exited", call: start, created: true, fault: "after", exits: true, wantCalls: "Start Get", wantState: "stopped"},
		{name: "start, lost before acting", call: start, created: true, fault: "before", wantCalls: "Start Get Start", wantState: "running"},
		{name: "start, lost after acting, unknown a while", call: start, created: true, fault: "after", unknown: 2, wantCalls: "Start Get Get Get", wantState: "running"},
		{name: "start, lost before acting, unknown a while", call: start, created: true, fault: "before", unknown: 1, wantCalls: "Start Get Get Start", wantState: "running"},
		{name: "start, lost before acting, unknown throughout", call: start, created: true, fault: "before", unknown: 100, noStart: true,
			wantCalls: "Start" + strings.Repeat(" Get", 1+engine.Repeats), wantState: "created", wantErr: true},
		{name: "start, unavailable, unknown throughout", call: start, created: true, fault: "unavailable", unknown: 100, noStart: true,
			wantCalls: "Start" + strings.Repeat(" Get", 1+engine.Repeats), wantState: "created", wantErr: true},
		{name: "start, unavailable", call: start, created: true, fault: "unavailable", wantCalls: "Start Get Start", wantState: "running"},
		{name: "start, lost, task gone", call: start, created: true, fault: "before", gone: true, wantCalls: "Start Get", wantErr: true},
		{name: "start, no task", call: start, wantCalls: "Start", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var calls []string
			state, creates, starts := "", 0, 0
			if tc.created {
				state = "created"
			}
			faulted := false
			var creatingUntil time.Time // while the cut create goes on
			var undoAt time.Time        // when a cut create's task is undone
			unknown := 0
			if tc.leftover {
				state, creatingUntil = "creating", time.Now().Add(300*time.Millisecond)
			}
			e := engineOn(t, func(w http.ResponseWriter, r *http.Request) {
				method := methodOf(r)
				mu.Lock()
				defer mu.Unlock()
				calls = append(calls, method)
				if state == "creating" && time.Now().After(creatingUntil) {
					state = ""
					if !tc.aborts {
						state, creates = "created", creates+1
					}
				}
				if !undoAt.IsZero() && time.Now().After(undoAt) {
					state, undoAt = "", time.Time{}
				}
				fault := ""
				if method != "Get" && !faulted {
					fault, faulted, unknown = tc.fault, true, tc.unknown
				}
				if method == "Get" && unknown > 0 && state != "" {
					// containerd 2.2.1 when the shim's State misses its
					// 2 s: the task, status UNKNOWN.
					unknown--
					answerWith(t, w, r, `{"process":{"container_id":"web","id":"web","pid":42}}`)
					return
				}
				if state == "creating" {
					// containerd 2.2.1: the task is not there until its
					// create ends, and its bundle is.
					switch {
					case method == "Get":
						failWith(w, containerdapi.NotFound, "no running task found: task web not found")
					case method == "Create" && tc.bundleGone:
						// Seen on containerd 2.2.1 under load: the
						// new shim's working directory, the bundle, went.
						failWith(w, containerdapi.Unknown, "failed to start shim: start failed: io.containerd.runc.v2: getwd: no such file or directory: exit status 1")
					case method == "Create" && tc.shimPathGone:
						// Seen on containerd 2.2.1 under load: the
						// bundle went before the shim's path was
						// written into it.
						failWith(w, containerdapi.Unknown, "failed to start shim: start failed: open /run/containerd/io.containerd.runtime.v2.task/tinkerbell/web/shim-binary-path: no such file or directory")
					case method == "Create" && tc.logGone:
						// Seen on containerd 2.2.1 under load: runc's log
						// file went with the bundle.
						failWith(w, containerdapi.Unknown, "failed to create shim task: OCI runtime create failed: unable to retrieve OCI runtime error (open /run/containerd/io.containerd.runtime.v2.task/tinkerbell/web/log.json: no such file or directory): runc did not terminate successfully: exit status 1")
					case method == "Create" && tc.leftover:
						failWith(w, containerdapi.Unknown, "failed to create shim task: OCI runtime create failed: runc create failed: container with given ID already exists")
					case method == "Create":
						failWith(w, containerdapi.Unknown, "mkdir /run/containerd/io.containerd.runtime.v2.task/tinkerbell/web: file exists")
					}
					return
				}
				switch fault {
				case "creating":
					state, creatingUntil = "creating", time.Now().Add(300*time.Millisecond)
					if tc.forever {
						creatingUntil = time.Now().Add(time.Hour)
					}
					panic(http.ErrAbortHandler)
				case "undone":
					// Created, then undone as the cut reaches the daemon.
					state, undoAt = "created", time.Now().Add(150*time.Millisecond)
					panic(http.ErrAbortHandler)
				case "before":
					if tc.gone {
						state = ""
					}
					panic(http.ErrAbortHandler)
				case "unavailable":
					failWith(w, containerdapi.Unavailable, "the daemon is busy")
					return
				}
				var msg string
				switch method {
				case "Create":
					if state != "" {
						failWith(w, containerdapi.AlreadyExists, "task web: already exists")
						return
					}
					state, creates = "created", creates+1
					msg = `{"container_id":"web","pid":42}`
				case "Start":
					if state != "created" {
						failWith(w, containerdapi.FailedPrecondition, "task web: not created")
						return
					}
					state, starts = "running", starts+1
					if tc.exits {
						state = "stopped"
					}
					msg = `{"pid":42}`
				case "Get":
					status := map[string]int{"created": 1, "running": 2, "stopped": 3}[state]
					if status == 0 {
						failWith(w, containerdapi.NotFound, "task web: not found")
						return
					}
					msg = fmt.Sprintf(`{"process":{"container_id":"web","id":"web","pid":42,"status":%d}}`, status)
				}
				if fault == "after" {
					panic(http.ErrAbortHandler) // the daemon did it; the answer never came
				}
				answerWith(t, w, r, msg)
			})
			if tc.forever {
				e.C.RequestTimeout = 500 * time.Millisecond
			}
			began := time.Now()
			pid, err := tc.call(testCtx(t), e)
			if took := time.Since(began); tc.forever && took > 5*time.Second {
				t.Errorf("the call took %v, want it given up soon after its request's time, 500 ms, is spent", took)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.wantErr != (err != nil) || !tc.wantErr && pid != 42 {
				t.Errorf("call = %d, %v; want pid 42, error %v", pid, err, tc.wantErr)
			}
			if within := cmp.Or(tc.within, "500ms"); tc.forever && (!errors.Is(err, errUnsettled) || !strings.Contains(err.Error(), "not settled within "+within)) {
				t.Errorf("call = %v, want it given up, not settled, once %s is spent", err, within)
			}
			if !tc.forever && errors.Is(err, errUnsettled) {
				t.Errorf("call = %v, want it not counted as unsettled", err)
			}
			if tc.noStart && (err == nil || !strings.Contains(err.Error(), "UNKNOWN")) {
				t.Errorf("call = %v; want it failed, saying the task stayed UNKNOWN", err)
			}
			pattern := strings.HasPrefix(tc.wantCalls, "^")
			if got := strings.Join(calls, " "); !pattern && got != tc.wantCalls || pattern && !regexp.MustCompile(tc.wantCalls).MatchString(got) {
				t.Errorf("calls %q, want %q", got, tc.wantCalls)
			}
			wantCreates, wantStarts := 0, 0
			if !tc.created && !tc.wantErr {
				wantCreates = 1
			}
			if tc.created && !tc.wantErr && !tc.noStart {
				wantStarts = 1
			}
			if state != tc.wantState || creates != wantCreates || starts != wantStarts {
				t.Errorf("task %q, created %d times, started %d times; want %q, %d, %d", state, creates, starts, tc.wantState, wantCreates, wantStarts)
			}
		})
	}
}

// TestTaskLostOnAndOn: a task create or start whose answer is lost on
// every attempt, the task not there or not started after each, is sent
// engine.Repeats times more, then fails; the pause before the nth sending
// again is n times 50 ms at least.
func TestTaskLostOnAndOn(t *testing.T) {
	cases := []struct {
		name   string
		call   func(context.Context, *Engine) (uint32, error)
		method string
		get    func(w http.ResponseWriter, r *http.Request) // the answer to Tasks/Get
	}{
		{"create", func(ctx context.Context, e *Engine) (uint32, error) {
			return e.taskCreate(ctx, "web", containerdapi.TaskSpec{}, 0)
		}, "Create", func(w http.ResponseWriter, r *http.Request) {
			failWith(w, containerdapi.NotFound, "task web not found")
		}},
		{"start", func(ctx context.Context, e *Engine) (uint32, error) { return e.taskStart(ctx, "web") },
			"Start", func(w http.ResponseWriter, r *http.Request) {
				answerWith(t, w, r, `{"process":{"container_id":"web","id":"web","status":1}}`)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var sent []time.Time
			e := engineOn(t, func(w http.ResponseWriter, r *http.Request) {
				method := methodOf(r)
				if method == "Get" {
					tc.get(w, r)
					return
				}
				if method != tc.method {
					t.Errorf("unexpected call %s", r.URL.Path)
				}
				mu.Lock()
				sent = append(sent, time.Now())
				mu.Unlock()
				failWith(w, containerdapi.Unavailable, "the daemon is busy")
			})
			_, err := tc.call(testCtx(t), e)
			mu.Lock()
			defer mu.Unlock()
			if !errors.Is(err, containerdapi.ErrUnavailable) || len(sent) != 1+engine.Repeats {
				t.Fatalf("%s sent %d times, then %v; want %d times, then UNAVAILABLE", tc.method, len(sent), err, 1+engine.Repeats)
			}
			for n := 1; n < len(sent); n++ {
				if gap := sent[n].Sub(sent[n-1]); gap < time.Duration(n)*50*time.Millisecond {
					t.Errorf("sent again for the %d. time %v after the last, want %v at least", n, gap, time.Duration(n)*50*time.Millisecond)
				}
			}
		})
	}
}

// TestTaskCallsNotSent: a create or start that never reached the daemon
// (its socket is not there) lost no answer: it fails as it is, without
// asking the daemon what became of it.
func TestTaskCallsNotSent(t *testing.T) {
	e := New(&containerdapi.Client{Socket: t.TempDir() + "/containerd.sock", WaitForEngine: -1})
	_, cerr := e.taskCreate(testCtx(t), "web", containerdapi.TaskSpec{}, 0)
	_, serr := e.taskStart(testCtx(t), "web")
	for _, err := range []error{cerr, serr} {
		var te *containerdapi.TransportError
		if !errors.As(err, &te) || strings.Contains(err.Error(), "then asking") || errors.Is(err, errUnsettled) {
			t.Errorf("got %v; want the dial's transport error alone", err)
		}
	}
}

// TestCreateContainerLost: a lease, snapshot or container create whose
// answer is lost is sent again, and AlreadyExists then means that the
// first did the work: the lease is taken, the snapshot's mounts read,
// and a container with the same labels adopted; one with other labels
// is a real conflict. A create lost on every attempt fails as lost, after
// engine.Repeats more; a create the daemon refuses is not sent again.
func TestCreateContainerLost(t *testing.T) {
	lost := reply{broken: func() bool { return true }}
	exists := reply{code: containerdapi.AlreadyExists, status: "already exists"}
	labels := map[string]string{LabelName: "web"}
	cases := []struct {
		name       string
		replies    map[string][]reply
		wantErr    func(error) bool // nil: none
		wantCounts map[string]int
		wantMounts string // the source of the mounts returned
	}{
		{name: "lease, lost", replies: map[string][]reply{"Leases/Create": {lost, exists}},
			wantCounts: map[string]int{"Leases/Create": 2, "Snapshots/Prepare": 1, "Snapshots/Mounts": 0, "Containers/Create": 1}, wantMounts: "prepared"},
		{name: "lease, unavailable", replies: map[string][]reply{"Leases/Create": {{code: containerdapi.Unavailable, status: "busy"}, {msg: `{"lease":{"id":"waitdaemon-web"}}`}}},
			wantCounts: map[string]int{"Leases/Create": 2, "Snapshots/Prepare": 1, "Containers/Create": 1}, wantMounts: "prepared"},
		{name: "snapshot, lost", replies: map[string][]reply{"Snapshots/Prepare": {lost, exists}},
			wantCounts: map[string]int{"Leases/Create": 1, "Snapshots/Prepare": 2, "Snapshots/Mounts": 1, "Containers/Create": 1}, wantMounts: "mounted"},
		{name: "container, lost, same labels", replies: map[string][]reply{"Containers/Create": {lost, exists}},
			wantCounts: map[string]int{"Containers/Create": 2, "Containers/Get": 1}, wantMounts: "prepared"},
		{name: "container, lost, other labels", replies: map[string][]reply{
			"Containers/Create": {lost, exists},
			"Containers/Get":    {{msg: `{"container":{"id":"web","labels":{"` + LabelName + `":"other"}}}`}},
		}, wantErr: func(err error) bool { return errors.Is(err, containerdapi.ErrAlreadyExists) }, wantCounts: map[string]int{"Containers/Create": 2, "Containers/Get": 1}},
		{name: "container, lost on and on", replies: map[string][]reply{"Containers/Create": {lost}},
			wantErr: engine.IsLost, wantCounts: map[string]int{"Containers/Create": 1 + engine.Repeats, "Containers/Get": 0}},
		{name: "snapshot, refused", replies: map[string][]reply{"Snapshots/Prepare": {{code: containerdapi.Unknown, status: "no space left on device"}}},
			wantErr: func(err error) bool { return err != nil && !engine.IsLost(err) }, wantCounts: map[string]int{"Snapshots/Prepare": 1, "Containers/Create": 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			replies := map[string][]reply{
				"Leases/Create":     {{msg: `{"lease":{"id":"waitdaemon-web"}}`}},
				"Leases/Delete":     {{msg: `{}`}},
				"Snapshots/Prepare": {{msg: `{"mounts":[{"type":"overlay","source":"prepared"}]}`}},
				"Snapshots/Mounts":  {{msg: `{"mounts":[{"type":"overlay","source":"mounted"}]}`}},
				"Containers/Create": {{msg: `{"container":{"id":"web"}}`}},
				"Containers/Get":    {{msg: `{"container":{"id":"web","labels":{"` + LabelName + `":"web"}}}`}},
			}
			for m, rs := range tc.replies {
				replies[m] = rs
			}
			e, d := newFake(t, replies)
			p := &planned{ID: "web", Image: "docker.io/library/x:1", Labels: labels, Runtime: containerdapi.RuncV2, Snapshotter: "overlayfs", SnapshotKey: "web"}
			mounts, err := e.createContainer(testCtx(t), p, []byte(`{}`), "sha256:p")
			switch {
			case tc.wantErr == nil && err != nil:
				t.Errorf("createContainer() = %v, want it done", err)
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Errorf("createContainer() = %v, not the error wanted", err)
			case tc.wantErr == nil && (len(mounts) != 1 || mounts[0].Source != tc.wantMounts):
				t.Errorf("mounts %+v, want the one from %s", mounts, tc.wantMounts)
			}
			for m, n := range tc.wantCounts {
				if got := d.count(m); got != n {
					t.Errorf("%s called %d times, want %d", m, got, n)
				}
			}
		})
	}
}

// TestPullLeaseLost: a pull whose lease create lost its answer is pulled
// again, under a lease of its own, and succeeds.
func TestPullLeaseLost(t *testing.T) {
	e, d := newFake(t, map[string][]reply{
		"Leases/Create":     {{broken: func() bool { return true }}, {msg: `{"lease":{"id":"l2"}}`}},
		"Leases/Delete":     {{msg: `{}`}},
		"Transfer/Transfer": {{msg: `{}`}},
	})
	ref, err := imageref.Parse("x:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Pull(testCtx(t), ref, nil, nil); err != nil {
		t.Errorf("Pull() = %v, want it pulled again", err)
	}
	if l, tr := d.count("Leases/Create"), d.count("Transfer/Transfer"); l != 2 || tr != 1 {
		t.Errorf("%d lease creates, %d transfers; want 2 and 1", l, tr)
	}
}

// TestStartRetryRefused: a start sent again after a lost answer that the
// daemon refuses, the task still created, fails: only a lost answer is
// sent again.
func TestStartRetryRefused(t *testing.T) {
	e, d := newFake(t, map[string][]reply{
		"Tasks/Start": {{broken: func() bool { return true }}, {code: containerdapi.Unknown, status: "cannot start"}, {msg: `{"pid":42}`}},
		"Tasks/Get":   {{msg: `{"process":{"container_id":"web","status":1}}`}},
	})
	_, err := e.taskStart(testCtx(t), "web")
	if err == nil || !strings.Contains(err.Error(), "(the task is created)") || d.count("Tasks/Start") != 2 {
		t.Errorf("taskStart() = %v after %d starts; want it failed after 2, the task created", err, d.count("Tasks/Start"))
	}
}

// TestPullStartsAgain: a pull that breaks off (its answer lost, or
// UNAVAILABLE) is pulled again (each pull of the client makes side
// streams of its own: containerdapi.TestPullCredentials), after a pause;
// one broken off on and on, Repeats times more, then fails; a refusal is
// not pulled again.
func TestPullStartsAgain(t *testing.T) {
	broken := reply{broken: func() bool { return true }}
	unavailable := reply{code: containerdapi.Unavailable, status: "restarting"}
	for _, tc := range []struct {
		name      string
		transfers []reply
		wantErr   bool
		want      int
	}{
		{"answer lost", []reply{broken, {msg: `{}`}}, false, 2},
		{"unavailable", []reply{unavailable, {msg: `{}`}}, false, 2},
		{"unavailable on and on", []reply{unavailable}, true, 1 + engine.Repeats},
		{"refused", []reply{{code: containerdapi.Unknown, status: "401 Unauthorized"}}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, d := newFake(t, map[string][]reply{
				"Leases/Create":     {{msg: `{"lease":{"id":"l"}}`}},
				"Leases/Delete":     {{msg: `{}`}},
				"Transfer/Transfer": tc.transfers,
			})
			ref, err := imageref.Parse("x:1")
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			err = e.Pull(testCtx(t), ref, nil, nil)
			reqs := d.requests("Transfer/Transfer")
			if (err != nil) != tc.wantErr || len(reqs) != tc.want {
				t.Fatalf("Pull() = %v after %d transfers; want error %v after %d", err, len(reqs), tc.wantErr, tc.want)
			}
			if len(reqs) > 1 && time.Since(began) < 50*time.Millisecond {
				t.Errorf("pulled again after %v; want a pause of 50 ms at least", time.Since(began))
			}
		})
	}
}
