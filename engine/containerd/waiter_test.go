package containerd

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine"
)

// TestWaitTaskLost: a wait that breaks without an answer (containerd
// restarting) is ErrNoAnswer, asked once: the task may well run on, and
// the waiter asks again.
func TestWaitTaskLost(t *testing.T) {
	e, d := newFake(t, map[string][]reply{
		"Tasks/Wait": {{msg: `{"exit_status":3}`, broken: func() bool { return true }}},
	})
	e.C.WaitForEngine = -1
	exit, err := e.waitTask(testCtx(t), "act", "the action container")
	if !errors.Is(err, engine.ErrNoAnswer) || exit != (containerdapi.Exit{}) {
		t.Errorf("waitTask() = %+v, %v; want no exit, ErrNoAnswer", exit, err)
	}
	if d.count("Tasks/Get") != 0 || d.count("Tasks/Wait") == 0 {
		t.Errorf("%d waits, %d gets; want waits alone", d.count("Tasks/Wait"), d.count("Tasks/Get"))
	}
}

// TestWaitTaskRefused: a wait containerd refuses is the error when the
// task does not run, or cannot be read; while it runs, the wait is asked
// again.
func TestWaitTaskRefused(t *testing.T) {
	refused := reply{code: containerdapi.Unknown, status: "cannot wait"}
	cases := []struct {
		name      string
		wait      []reply
		get       []reply
		wantErr   bool
		wantWaits int
	}{
		{"the task is gone: not found", []reply{refused}, []reply{{code: containerdapi.NotFound, status: "task act not found"}}, true, 1},
		{"the task stopped", []reply{refused}, []reply{{msg: `{"process":{"container_id":"act","status":3}}`}}, true, 1},
		{"the task runs: asked again", []reply{refused, {msg: `{"exit_status":4}`}}, []reply{{msg: `{"process":{"container_id":"act","status":2}}`}}, false, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, d := newFake(t, map[string][]reply{"Tasks/Wait": tc.wait, "Tasks/Get": tc.get})
			exit, err := e.waitTask(testCtx(t), "act", "the action container")
			gone := strings.HasSuffix(tc.name, "not found")
			switch {
			case tc.wantErr && (err == nil || !strings.HasPrefix(err.Error(), "waiting for the action container: ") || !strings.Contains(err.Error(), "cannot wait")):
				t.Errorf("waitTask() = %+v, %v; want the wait's error", exit, err)
			case tc.wantErr && errors.Is(err, containerdapi.ErrNotFound) != gone:
				t.Errorf("waitTask() = %+v, %v; want ErrNotFound: %v", exit, err, gone)
			case !tc.wantErr && (err != nil || exit.Status != 4):
				t.Errorf("waitTask() = %+v, %v; want exit 4", exit, err)
			}
			if got := d.count("Tasks/Wait"); got != tc.wantWaits {
				t.Errorf("%d waits, want %d", got, tc.wantWaits)
			}
		})
	}
}

// TestTellFails: a line the waiter cannot label itself with is an error.
func TestTellFails(t *testing.T) {
	id := "waiter-0001"
	e, d := newFake(t, map[string][]reply{
		"Containers/Get":    {{msg: `{"container":{"id":"` + id + `"}}`}},
		"Containers/Update": {{code: containerdapi.FailedPrecondition, status: "label too long"}},
	})
	if err := os.WriteFile(filepath.Join(e.ProcSelf, "cgroup"), []byte("0::/"+namespace+"/"+id+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := e.Tell(testCtx(t), []byte(`{"msg":"ready"}`))
	if err == nil || !strings.HasPrefix(err.Error(), "telling phase 1: ") || !strings.Contains(err.Error(), "label too long") {
		t.Errorf("Tell() = %v, want the update's error", err)
	}
	if d.count("Containers/Update") != 1 {
		t.Errorf("%d updates, want 1", d.count("Containers/Update"))
	}
}

// TestActionExitedFails: a wait that fails otherwise than by the task's
// absence or the context's end is ActionExited's error.
func TestActionExitedFails(t *testing.T) {
	e, _ := newFake(t, map[string][]reply{
		"Tasks/Wait": {{code: containerdapi.Unknown, status: "cannot wait"}},
		"Tasks/Get":  {{code: containerdapi.Unknown, status: "cannot get"}},
	})
	_, err := e.ActionExited(testCtx(t), "act")
	var ae *containerdapi.Error
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "cannot wait") {
		t.Errorf("ActionExited() = %v, want the wait's error", err)
	}
}

// TestStartFailedUnlabelled: a start that fails is the error, and a
// label that cannot mark it failed is logged, not the error.
func TestStartFailedUnlabelled(t *testing.T) {
	e, d := newFake(t, map[string][]reply{
		"Containers/Get":    {{msg: `{"container":{"id":"user-1","snapshotter":"overlayfs","snapshot_key":"user-1"}}`}},
		"Tasks/Get":         {{code: containerdapi.NotFound, status: "task user-1 not found"}},
		"Snapshots/Mounts":  {{code: containerdapi.NotFound, status: "snapshot user-1 does not exist"}},
		"Containers/Update": {{code: containerdapi.FailedPrecondition, status: "cannot update"}},
	})
	log := &syncLog{}
	e.Log = log
	err := e.Start(testCtx(t), "user-1")
	if err == nil || !strings.HasPrefix(err.Error(), "starting container user-1: reading its snapshot's mounts: ") {
		t.Errorf("Start() = %v, want the snapshot's error", err)
	}
	if !strings.Contains(log.String(), "could not label a container that failed to start") || !strings.Contains(log.String(), "cannot update") {
		t.Errorf("log %q: want the label's failure", log.String())
	}
	if d.count("Containers/Update") != 1 {
		t.Errorf("%d updates, want 1", d.count("Containers/Update"))
	}
}

// TestTellNotFound: a waiter that cannot find its own container cannot
// tell, and says why.
func TestTellNotFound(t *testing.T) {
	e, _ := newFake(t, nil)
	for _, name := range []string{"cgroup", "mountinfo"} {
		if err := os.WriteFile(filepath.Join(e.ProcSelf, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := e.Tell(testCtx(t), []byte(`{"msg":"ready"}`))
	var input engine.InputError
	if !errors.As(err, &input) || !strings.HasPrefix(err.Error(), "telling phase 1: cannot find this action's own container") {
		t.Errorf("Tell() = %v, want the bad input of a container not found", err)
	}
}

// TestOutputUntilStopped: Output passes on each new line the waiter
// tells while its task runs, and ends once the task stopped, with the
// line told last, read after the stop was seen.
func TestOutputUntilStopped(t *testing.T) {
	label := func(line string) reply {
		return reply{msg: `{"container":{"id":"waiter-1","labels":{"` + LabelSaid + `":` + strconv.Quote(line) + `}}}`}
	}
	e, _ := newFake(t, map[string][]reply{
		"Containers/Get": {label("one"), label("one"), label("one"), label("two"), label("three")},
		"Tasks/Get": {
			{msg: `{"process":{"id":"waiter-1","status":2}}`},
			{msg: `{"process":{"id":"waiter-1","status":2}}`},
			{msg: `{"process":{"id":"waiter-1","status":2}}`},
			{msg: `{"process":{"id":"waiter-1","status":3}}`},
		},
	})
	var out strings.Builder
	if err := e.Output(testCtx(t), "waiter-1", &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "one\ntwo\nthree\n" {
		t.Errorf("Output() = %q, want each line told, once", got)
	}
}

// TestFollowNoTail: a run followed with no tail asked for reads no
// output file.
func TestFollowNoTail(t *testing.T) {
	e, _ := newFake(t, map[string][]reply{
		"Containers/Get": {{msg: `{"container":{"id":"user-1","image":"docker.io/library/x:1"}}`}},
		"Tasks/Wait":     {{msg: `{"exit_status":3,"exited_at":"2026-01-01T00:00:03Z"}`}},
	})
	e.LogDir = t.TempDir() // holds no output file
	log := &syncLog{}
	e.Log = log
	run, err := e.Follow(testCtx(t), "user-1", time.Now(), 0, "")
	if err != nil || run.ExitCode != 3 || run.Output == nil || len(run.Output) != 0 {
		t.Errorf("Follow() = %+v, %v; want exit 3 and no output", run, err)
	}
	if log.String() != "" {
		t.Errorf("log %q: want nothing read, nothing logged", log.String())
	}
}

// TestContainerGonePauses: the asks for a container that stays are a
// pause apart, and the last is answered at once, with no pause after it.
func TestContainerGonePauses(t *testing.T) {
	var mu sync.Mutex
	var asked []time.Time
	ctr := reply{msg: `{"container":{"id":"act"}}`, broken: func() bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, time.Now())
		return false
	}}
	e, _ := newFake(t, map[string][]reply{"Containers/Get": {ctr}})
	err := e.containerGone(testCtx(t), "act")
	done := time.Now()
	mu.Lock()
	defer mu.Unlock()
	if err == nil || len(asked) != goneAsks {
		t.Fatalf("containerGone() = %v after %d asks, want an error after %d", err, len(asked), goneAsks)
	}
	if spread := asked[len(asked)-1].Sub(asked[0]); spread < 3*time.Second {
		t.Errorf("the asks spread over %v, want the pauses between them, 3.5 s in all", spread)
	}
	if after := done.Sub(asked[len(asked)-1]); after > 500*time.Millisecond {
		t.Errorf("containerGone() returned %v after the last ask, want no pause after it", after)
	}
}

// TestActionExitedTaskDeleted: tink-agent deletes the action's task right
// after its exit, and its container too after an exit 0, but keeps a
// failed action's container. A task gone (the wait broken off as its
// shim goes, "ttrpc: closed", or refused as not found) with its
// container gone too, at once or within a few seconds, is the action
// removed, not an error; one whose container stays is a failed or
// unknown exit, an error, so that nothing starts.
func TestActionExitedTaskDeleted(t *testing.T) {
	ctr := reply{msg: `{"container":{"id":"act"}}`}
	gone := reply{code: containerdapi.NotFound, status: "container \"act\": not found"}
	for _, tc := range []struct {
		name        string
		wait        reply
		containers  []reply
		wantRemoved bool
		wantGets    int
	}{
		{name: "broken off, container gone", wait: reply{code: containerdapi.Unknown, status: "ttrpc: closed"}, containers: []reply{gone}, wantRemoved: true, wantGets: 1},
		{name: "not found, container gone", wait: reply{code: containerdapi.NotFound, status: "task act not found"}, containers: []reply{gone}, wantRemoved: true, wantGets: 1},
		{name: "broken off, container gone late", wait: reply{code: containerdapi.Unknown, status: "ttrpc: closed"}, containers: []reply{ctr, ctr, gone}, wantRemoved: true, wantGets: 3},
		{name: "broken off, container kept", wait: reply{code: containerdapi.Unknown, status: "ttrpc: closed"}, containers: []reply{ctr}, wantGets: goneAsks},
		{name: "not found, container kept", wait: reply{code: containerdapi.NotFound, status: "task act not found"}, containers: []reply{ctr}, wantGets: goneAsks},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, d := newFake(t, map[string][]reply{
				"Tasks/Wait":     {tc.wait},
				"Tasks/Get":      {{code: containerdapi.NotFound, status: "task act not found"}},
				"Containers/Get": tc.containers,
			})
			before := time.Now()
			exit, err := e.ActionExited(testCtx(t), "act")
			switch {
			case tc.wantRemoved && (err != nil || !exit.Removed || exit.At.Before(before)):
				t.Errorf("ActionExited() = %+v, %v; want the action removed, now", exit, err)
			case !tc.wantRemoved && (err == nil || !strings.Contains(err.Error(), "its exit is unknown")):
				t.Errorf("ActionExited() = %+v, %v; want an error: its exit is unknown", exit, err)
			}
			if n := d.count("Containers/Get"); n != tc.wantGets {
				t.Errorf("%d Containers/Get, want %d", n, tc.wantGets)
			}
		})
	}
}

// TestOutputSlowWord: a waiter slow to tell its word is looked for
// twenty times a second in the first second, when the word comes if all
// is well, and four times a second after that.
func TestOutputSlowWord(t *testing.T) {
	var mu sync.Mutex
	var asked []time.Time
	running := reply{msg: `{"process":{"id":"waiter-1","status":2}}`, broken: func() bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, time.Now())
		return false
	}}
	e, _ := newFake(t, map[string][]reply{
		"Containers/Get": {{msg: `{"container":{"id":"waiter-1"}}`}},
		"Tasks/Get":      {running},
	})
	ctx, cancel := context.WithTimeout(testCtx(t), 3*time.Second)
	defer cancel()
	if err := e.Output(ctx, "waiter-1", io.Discard); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Output() = %v, want the context's end", err)
	}
	mu.Lock()
	defer mu.Unlock()
	quick, slow := 0, 0
	for _, at := range asked[1:] {
		switch since := at.Sub(asked[0]); {
		case since < 900*time.Millisecond:
			quick++
		case since > 1200*time.Millisecond:
			slow++
		}
	}
	if quick < 10 || slow > 9 {
		t.Errorf("asked %d times in the first 0.9 s and %d times after 1.2 s (of 3 s); want at least 10, then at most 9 (every %v)", quick, slow, outputSlow)
	}
}
