package containerdapi_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestRetryStatus runs calls against daemons that answer a sequence of
// statuses (the last one repeats): UNAVAILABLE is retried for calls safe
// to repeat, a few times; other statuses never are.
func TestRetryStatus(t *testing.T) {
	get := func(c *containerdapi.Client) error { _, err := c.ContainerGet(shortCtx(t), "web"); return err }
	start := func(c *containerdapi.Client) error { _, err := c.TaskStart(shortCtx(t), "web"); return err }
	cases := []struct {
		name      string
		call      func(*containerdapi.Client) error
		codes     []containerdapi.Code
		wantTries int
		wantCode  containerdapi.Code // OK: success
	}{
		{name: "unavailable unavailable ok", call: get, codes: []containerdapi.Code{14, 14, 0}, wantTries: 3},
		{name: "persistent unavailable", call: get, codes: []containerdapi.Code{14}, wantTries: 5, wantCode: containerdapi.Unavailable},
		// Not sent again: Tasks/Get is asked, and answers a task of no
		// known status (containerd's UNKNOWN, a busy shim), again and
		// again: it may have started, and is never started twice; the
		// start fails, as one that did not start (see TestTaskLostAnswer).
		{name: "unavailable on a start", call: start, codes: []containerdapi.Code{14, 0}, wantTries: 2 + containerdapi.MaxRetries, wantCode: containerdapi.Unavailable},
		{name: "not found", call: get, codes: []containerdapi.Code{5, 0}, wantTries: 1, wantCode: containerdapi.NotFound},
		{name: "unknown", call: get, codes: []containerdapi.Code{2, 0}, wantTries: 1, wantCode: containerdapi.Unknown},
		{name: "deadline exceeded", call: get, codes: []containerdapi.Code{4, 0}, wantTries: 1, wantCode: containerdapi.DeadlineExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got hits
			c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				readRequest(t, r)
				n := got.add()
				code := tc.codes[min(n, len(tc.codes))-1]
				if code != containerdapi.OK {
					fail(w, code, "answer "+string(rune('0'+n)))
					return
				}
				answer(w, sub(1, str(1, "web")))
			})
			err := tc.call(c)
			var apiErr *containerdapi.Error
			switch {
			case tc.wantCode == containerdapi.OK && err != nil:
				t.Errorf("error %v, want success", err)
			case tc.wantCode != containerdapi.OK && (!errors.As(err, &apiErr) || apiErr.Code != tc.wantCode):
				t.Errorf("error %v, want code %v", err, tc.wantCode)
			}
			if got.count() != tc.wantTries {
				t.Errorf("%d tries, want %d", got.count(), tc.wantTries)
			}
		})
	}
}

// TestWaitForEngine: a socket that appears late (a daemon starting) is
// waited for within WaitForEngine; with no wait, or past it, the call
// fails as a transport error naming the socket.
func TestWaitForEngine(t *testing.T) {
	cases := []struct {
		name    string
		wait    time.Duration
		appear  time.Duration // when the daemon starts listening; 0: never
		refused bool          // a socket file that refuses connections first
		wantErr bool
	}{
		{name: "appears within the wait", wait: 3 * time.Second, appear: 300 * time.Millisecond},
		{name: "refused, then up", wait: 3 * time.Second, appear: 300 * time.Millisecond, refused: true},
		{name: "never", wait: 300 * time.Millisecond, wantErr: true},
		{name: "no wait", wait: -1, appear: 300 * time.Millisecond, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			sock := filepath.Join(dir, "containerd.sock")
			if tc.refused {
				// A socket file nobody listens on: ECONNREFUSED.
				l, err := net.Listen("unix", sock)
				if err != nil {
					t.Fatal(err)
				}
				l.(*net.UnixListener).SetUnlinkOnClose(false)
				l.Close()
			}
			if tc.appear > 0 {
				timer := time.AfterFunc(tc.appear, func() {
					real := rr.ServeH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						readRequest(t, r)
						answer(w, str(1, "v2.2.1"))
					}))
					os.Remove(sock)
					if err := os.Symlink(real, sock); err != nil {
						t.Error(err)
					}
				})
				t.Cleanup(func() { timer.Stop() })
			}
			c := &containerdapi.Client{Socket: sock, WaitForEngine: tc.wait}
			start := time.Now()
			v, err := c.Version(shortCtx(t))
			if tc.wantErr {
				var te *containerdapi.TransportError
				if !errors.As(err, &te) || te.Socket != sock || !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ECONNREFUSED) {
					t.Errorf("Version() error = %v, want a transport error on %s: no such file or refused", err, sock)
				}
				if tc.wait < 0 && time.Since(start) > 200*time.Millisecond {
					t.Errorf("with no wait, the call took %v", time.Since(start))
				}
				return
			}
			if err != nil || v.Version != "v2.2.1" {
				t.Errorf("Version() = %+v, %v; want v2.2.1 once the daemon is up", v, err)
			}
		})
	}
}

// TestCreateAdopts: a create whose answer is lost is sent again; when the
// retry meets AlreadyExists, a container with the same labels is ours and
// the create succeeds; one with other labels is a real conflict.
func TestCreateAdopts(t *testing.T) {
	want := map[string]string{"org.waitdaemon.action": "a1"}
	cases := []struct {
		name      string
		lose      bool              // the first create's answer is lost
		there     map[string]string // the labels of the container already there
		wantErr   bool
		wantCalls string
	}{
		{name: "lost answer, same labels", lose: true, there: want, wantCalls: "Create Create Get"},
		{name: "lost answer, other labels", lose: true, there: map[string]string{"org.waitdaemon.action": "a2"}, wantErr: true, wantCalls: "Create Create Get"},
		{name: "conflict at once", there: want, wantErr: true, wantCalls: "Create"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls []string
			var n hits
			c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				readRequest(t, r)
				method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
				calls = append(calls, method)
				switch {
				case method == "Create" && n.add() == 1 && tc.lose:
					panic(http.ErrAbortHandler) // the daemon did it; the answer never came
				case method == "Create":
					fail(w, containerdapi.AlreadyExists, `container "web": already exists`)
				case method == "Get":
					var labels [][]byte
					for k, v := range tc.there {
						labels = append(labels, sub(2, str(1, k), str(2, v)))
					}
					answer(w, sub(1, str(1, "web"), cat(labels...)))
				}
			})
			got, err := c.ContainerCreate(shortCtx(t), containerdapi.Container{ID: "web", Labels: want})
			if tc.wantErr != (err != nil) || tc.wantErr && !errors.Is(err, containerdapi.ErrAlreadyExists) || !tc.wantErr && got.ID != "web" {
				t.Errorf("ContainerCreate() = %+v, %v; want error %v (AlreadyExists)", got, err, tc.wantErr)
			}
			if strings.Join(calls, " ") != tc.wantCalls {
				t.Errorf("calls %q, want %q", strings.Join(calls, " "), tc.wantCalls)
			}
		})
	}
}

// TestBrokenConnection: a call whose connection breaks is retried when it
// is safe to repeat; a task create is not sent again, but Tasks/Get finds
// its task (see TestTaskLostAnswer), and a call not safe to repeat with
// nothing to ask fails as a transport error.
func TestBrokenConnection(t *testing.T) {
	cases := []struct {
		name      string
		call      func(context.Context, *containerdapi.Client) error
		wantTries int
		wantErr   bool
	}{
		{name: "get", call: func(ctx context.Context, c *containerdapi.Client) error {
			_, err := c.ContainerGet(ctx, "web")
			return err
		}, wantTries: 2},
		// The task Tasks/Get finds has no known status: asked for again
		// while so, then once more after a pause to see that it stays.
		{name: "task create", call: func(ctx context.Context, c *containerdapi.Client) error {
			_, err := c.TaskCreate(ctx, "web", containerdapi.TaskSpec{})
			return err
		}, wantTries: 3 + containerdapi.MaxRetries},
		{name: "lease create", call: func(ctx context.Context, c *containerdapi.Client) error {
			_, err := c.LeaseCreate(ctx, "web", time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
			return err
		}, wantTries: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n hits
			c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				readRequest(t, r)
				if n.add() == 1 {
					panic(http.ErrAbortHandler)
				}
				answer(w, sub(1, str(1, "web")))
			})
			err := tc.call(shortCtx(t), c)
			var te *containerdapi.TransportError
			if tc.wantErr != (err != nil) || tc.wantErr && !errors.As(err, &te) {
				t.Errorf("error %v, want a transport error: %v", err, tc.wantErr)
			}
			if n.count() != tc.wantTries {
				t.Errorf("%d tries, want %d", n.count(), tc.wantTries)
			}
		})
	}
}

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
	create := func(ctx context.Context, c *containerdapi.Client) (uint32, error) {
		return c.TaskCreate(ctx, "web", containerdapi.TaskSpec{})
	}
	start := func(ctx context.Context, c *containerdapi.Client) (uint32, error) {
		return c.TaskStart(ctx, "web")
	}
	cases := []struct {
		name         string
		call         func(context.Context, *containerdapi.Client) (uint32, error)
		created      bool   // the task is there, created, before the call
		fault        string // of the call's first attempt: "after" (acted, then the connection broke), "before", "unavailable", "creating" (cut while the daemon creates)
		exits        bool   // a started task exits at once
		gone         bool   // the task is deleted behind the client's back after the fault
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
		{name: "create, cut while creating, not settled within the caller's bound", call: func(ctx context.Context, c *containerdapi.Client) (uint32, error) {
			return c.TaskCreate(ctx, "web", containerdapi.TaskSpec{SettleWithin: 200 * time.Millisecond})
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
			wantCalls: "Start" + strings.Repeat(" Get", 1+containerdapi.MaxRetries), wantState: "created", wantErr: true},
		{name: "start, unavailable, unknown throughout", call: start, created: true, fault: "unavailable", unknown: 100, noStart: true,
			wantCalls: "Start" + strings.Repeat(" Get", 1+containerdapi.MaxRetries), wantState: "created", wantErr: true},
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
			c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				readRequest(t, r)
				method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
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
					answer(w, sub(1, str(1, "web"), str(2, "web"), varint(3, 42)))
					return
				}
				if state == "creating" {
					// containerd 2.2.1: the task is not there until its
					// create ends, and its bundle is.
					switch {
					case method == "Get":
						fail(w, containerdapi.NotFound, "no running task found: task web not found")
					case method == "Create" && tc.bundleGone:
						// Seen on containerd 2.2.1 under load: the
						// new shim's working directory, the bundle, went.
						fail(w, containerdapi.Unknown, "failed to start shim: start failed: io.containerd.runc.v2: getwd: no such file or directory: exit status 1")
					case method == "Create" && tc.shimPathGone:
						// Seen on containerd 2.2.1 under load: the
						// bundle went before the shim's path was
						// written into it.
						fail(w, containerdapi.Unknown, "failed to start shim: start failed: open /run/containerd/io.containerd.runtime.v2.task/tinkerbell/web/shim-binary-path: no such file or directory")
					case method == "Create" && tc.logGone:
						// Seen on containerd 2.2.1 under load: runc's log
						// file went with the bundle.
						fail(w, containerdapi.Unknown, "failed to create shim task: OCI runtime create failed: unable to retrieve OCI runtime error (open /run/containerd/io.containerd.runtime.v2.task/tinkerbell/web/log.json: no such file or directory): runc did not terminate successfully: exit status 1")
					case method == "Create" && tc.leftover:
						fail(w, containerdapi.Unknown, "failed to create shim task: OCI runtime create failed: runc create failed: container with given ID already exists")
					case method == "Create":
						fail(w, containerdapi.Unknown, "mkdir /run/containerd/io.containerd.runtime.v2.task/tinkerbell/web: file exists")
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
					fail(w, containerdapi.Unavailable, "the daemon is busy")
					return
				}
				var msg []byte
				switch method {
				case "Create":
					if state != "" {
						fail(w, containerdapi.AlreadyExists, "task web: already exists")
						return
					}
					state, creates = "created", creates+1
					msg = cat(str(1, "web"), varint(2, 42))
				case "Start":
					if state != "created" {
						fail(w, containerdapi.FailedPrecondition, "task web: not created")
						return
					}
					state, starts = "running", starts+1
					if tc.exits {
						state = "stopped"
					}
					msg = varint(1, 42)
				case "Get":
					status := map[string]uint64{"created": 1, "running": 2, "stopped": 3}[state]
					if status == 0 {
						fail(w, containerdapi.NotFound, "task web: not found")
						return
					}
					msg = sub(1, str(1, "web"), str(2, "web"), varint(3, 42), varint(4, status))
				}
				if fault == "after" {
					panic(http.ErrAbortHandler) // the daemon did it; the answer never came
				}
				answer(w, msg)
			})
			if tc.forever {
				c.RequestTimeout = 500 * time.Millisecond
			}
			began := time.Now()
			pid, err := tc.call(shortCtx(t), c)
			if took := time.Since(began); tc.forever && took > 5*time.Second {
				t.Errorf("the call took %v, want it given up soon after its request's time, 500 ms, is spent", took)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.wantErr != (err != nil) || !tc.wantErr && pid != 42 {
				t.Errorf("call = %d, %v; want pid 42, error %v", pid, err, tc.wantErr)
			}
			if within := cmp.Or(tc.within, "500ms"); tc.forever && (!errors.Is(err, containerdapi.ErrUnsettled) || !strings.Contains(err.Error(), "not settled within "+within)) {
				t.Errorf("call = %v, want it given up, not settled, once %s is spent", err, within)
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

// varint encodes a varint field.
func varint(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

// TestPrepareAndLeaseAdopt: a lease create or a snapshot prepare whose
// answer was lost is sent again, and AlreadyExists then means that the
// first did the work: the lease is returned, and the snapshot's mounts
// read. AlreadyExists to a first attempt is the daemon's answer.
func TestPrepareAndLeaseAdopt(t *testing.T) {
	calls := map[string]func(context.Context, *containerdapi.Client) error{
		"Create": func(ctx context.Context, c *containerdapi.Client) error {
			l, err := c.LeaseCreate(ctx, "l1", time.Time{})
			if err == nil && l.ID != "l1" {
				return fmt.Errorf("lease %q, want l1", l.ID)
			}
			return err
		},
		"Prepare": func(ctx context.Context, c *containerdapi.Client) error {
			m, err := c.SnapshotPrepare(ctx, "overlayfs", "k1", "sha256:p")
			if err == nil && (len(m) != 1 || m[0].Type != "overlay") {
				return fmt.Errorf("mounts %+v, want the snapshot's one overlay", m)
			}
			return err
		},
	}
	for method, call := range calls {
		for _, lose := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, answer lost %v", method, lose), func(t *testing.T) {
				var seen []string
				var n hits
				c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
					readRequest(t, r)
					m := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
					seen = append(seen, m)
					switch {
					case m == method && n.add() == 1 && lose:
						panic(http.ErrAbortHandler) // done; the answer never came
					case m == method:
						fail(w, containerdapi.AlreadyExists, "already exists")
					case m == "Mounts":
						answer(w, sub(1, str(1, "overlay"), str(2, "overlay")))
					}
				})
				err := call(shortCtx(t), c)
				if lose && err != nil || !lose && !errors.Is(err, containerdapi.ErrAlreadyExists) {
					t.Errorf("error %v; want none after a lost answer, AlreadyExists at once", err)
				}
				want := []string{method}
				if lose {
					want = append(want, method)
					if method == "Prepare" {
						want = append(want, "Mounts")
					}
				}
				if !slices.Equal(seen, want) {
					t.Errorf("calls %q, want %q", seen, want)
				}
			})
		}
	}
}

// TestRetryWaits: a call sent again after UNAVAILABLE waits between the
// attempts, at least the 50 ms the backoff starts at: a daemon that is
// busy is not asked again in a loop.
func TestRetryWaits(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		readRequest(t, r)
		mu.Lock()
		defer mu.Unlock()
		if at = append(at, time.Now()); len(at) == 1 {
			fail(w, containerdapi.Unavailable, "busy")
			return
		}
		answer(w, sub(1, str(1, "web")))
	})
	if _, err := c.ContainerGet(shortCtx(t), "web"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 2 || at[1].Sub(at[0]) < 50*time.Millisecond {
		t.Errorf("attempts at %v, want two, 50 ms apart at least", at)
	}
}

// TestTaskLostOnAndOn: a task create or start whose answer is lost on
// every attempt, the task not there or not started after each, is sent
// MaxRetries times more, then fails; the pause before the nth sending
// again is n times 50 ms at least.
func TestTaskLostOnAndOn(t *testing.T) {
	cases := []struct {
		name   string
		call   func(context.Context, *containerdapi.Client) (uint32, error)
		method string
		get    func(w http.ResponseWriter) // the answer to Tasks/Get
	}{
		{"create", func(ctx context.Context, c *containerdapi.Client) (uint32, error) {
			return c.TaskCreate(ctx, "web", containerdapi.TaskSpec{})
		}, "Create", func(w http.ResponseWriter) { fail(w, containerdapi.NotFound, "task web not found") }},
		{"start", func(ctx context.Context, c *containerdapi.Client) (uint32, error) { return c.TaskStart(ctx, "web") },
			"Start", func(w http.ResponseWriter) { answer(w, sub(1, str(1, "web"), str(2, "web"), varint(4, 1))) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var sent []time.Time
			c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				readRequest(t, r)
				if strings.HasSuffix(r.URL.Path, "/Get") {
					tc.get(w)
					return
				}
				if !strings.HasSuffix(r.URL.Path, "/"+tc.method) {
					t.Errorf("unexpected call %s", r.URL.Path)
				}
				mu.Lock()
				sent = append(sent, time.Now())
				mu.Unlock()
				fail(w, containerdapi.Unavailable, "the daemon is busy")
			})
			_, err := tc.call(shortCtx(t), c)
			mu.Lock()
			defer mu.Unlock()
			if !errors.Is(err, containerdapi.ErrUnavailable) || len(sent) != 1+containerdapi.MaxRetries {
				t.Fatalf("%s sent %d times, then %v; want %d times, then UNAVAILABLE", tc.method, len(sent), err, 1+containerdapi.MaxRetries)
			}
			for n := 1; n < len(sent); n++ {
				if gap := sent[n].Sub(sent[n-1]); gap < time.Duration(n)*50*time.Millisecond {
					t.Errorf("sent again for the %d. time %v after the last, want %v at least", n, gap, time.Duration(n)*50*time.Millisecond)
				}
			}
		})
	}
}
