package containerd

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
)

// TestStartRerunShimGone: a re-run's start deletes the task that ran
// before; a delete that fails as its shim goes away ("ttrpc: closed") is
// settled by asking for the task, and the run starts.
func TestStartRerunShimGone(t *testing.T) {
	e, d := newFake(t, map[string][]reply{
		"Containers/Get":    {{msg: `{"container":{"id":"user-1","snapshotter":"overlayfs","snapshot_key":"user-1"}}`}},
		"Tasks/Get":         {{msg: `{"process":{"container_id":"user-1","status":3}}`}, {code: containerdapi.NotFound, status: "task user-1 not found"}},
		"Tasks/Delete":      {{code: containerdapi.Unknown, status: "failed to delete task: ttrpc: closed"}},
		"Snapshots/Mounts":  {{msg: `{"mounts":[{"type":"bind","source":"/x"}]}`}},
		"Tasks/Create":      {{msg: `{"container_id":"user-1","pid":42}`}},
		"Tasks/Start":       {{msg: `{"pid":42}`}},
		"Containers/Update": {{msg: `{"container":{"id":"user-1"}}`}},
	})
	e.LogDir = t.TempDir()
	if err := e.Start(testCtx(t), "user-1"); err != nil {
		t.Errorf("Start() = %v, want the re-run started", err)
	}
	if n := d.count("Tasks/Start"); n != 1 {
		t.Errorf("%d starts, want 1", n)
	}
}

// TestUnknownTaskMayRun: containerd says UNKNOWN when a shim does not
// answer its State call in time: such a task may well run. List says it
// runs (so that no sweep kills it), Self takes it, and a refused wait on
// it is asked again.
func TestUnknownTaskMayRun(t *testing.T) {
	unknown := reply{msg: `{"process":{"container_id":"act","status":0}}`}
	t.Run("self", func(t *testing.T) {
		e, _ := newFake(t, map[string][]reply{
			"Containers/Get": {{msg: `{"container":{"id":"act","snapshotter":"overlayfs","spec":{"type_url":"types.containerd.io/opencontainers/runtime-spec/1/Spec","base64":"eyJvY2lWZXJzaW9uIjoiMS4wLjIifQ=="}}}`}},
			"Tasks/Get":      {unknown},
		})
		s, err := e.Self(testCtx(t), "act")
		if err != nil || s.ID != "act" {
			t.Errorf("Self() = %q, %v; want act, whose task's state is unknown", s.ID, err)
		}
	})
	t.Run("wait", func(t *testing.T) {
		e, d := newFake(t, map[string][]reply{
			"Tasks/Wait": {{code: containerdapi.Unknown, status: "cannot wait"}, {msg: `{"exit_status":4}`}},
			"Tasks/Get":  {unknown},
		})
		exit, err := e.waitTask(testCtx(t), "act", "the action container")
		if err != nil || exit.Status != 4 || d.count("Tasks/Wait") != 2 {
			t.Errorf("waitTask() = %+v, %v after %d waits; want exit 4, asked again", exit, err, d.count("Tasks/Wait"))
		}
	})
}

// TestStartedBeforeFinished: a run that exits before the start's answer
// comes back started no later than it finished: started_at is read before
// the start is sent, on the host's clock, which dates the exit too.
func TestStartedBeforeFinished(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := t0
	answered := func() bool { // the start's answer takes 10 ms to come back
		mu.Lock()
		defer mu.Unlock()
		clock = t0.Add(10 * time.Millisecond)
		return false
	}
	e, _ := newFake(t, map[string][]reply{
		"Containers/Get":    {{msg: `{"container":{"id":"user-1","image":"docker.io/library/x:1","snapshotter":"overlayfs","snapshot_key":"user-1"}}`}},
		"Tasks/Get":         {{code: containerdapi.NotFound, status: "task user-1 not found"}},
		"Snapshots/Mounts":  {{msg: `{"mounts":[{"type":"bind","source":"/x"}]}`}},
		"Tasks/Create":      {{msg: `{"container_id":"user-1","pid":42}`}},
		"Tasks/Start":       {{msg: `{"pid":42}`, broken: answered}},
		"Containers/Update": {{msg: `{"container":{"id":"user-1"}}`}},
		"Tasks/Wait":        {{msg: `{"exit_status":0,"exited_at":"2026-01-01T00:00:00.001Z"}`}},
	})
	e.LogDir = t.TempDir()
	e.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	if err := e.Start(testCtx(t), "user-1"); err != nil {
		t.Fatal(err)
	}
	run, err := e.Follow(testCtx(t), "user-1", t0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	started, _ := time.Parse(time.RFC3339Nano, run.StartedAt)
	finished, _ := time.Parse(time.RFC3339Nano, run.FinishedAt)
	if started.IsZero() || started.After(finished) {
		t.Errorf("started_at %s, finished_at %s: want it started before it finished", run.StartedAt, run.FinishedAt)
	}
}

// TestTellLong: a told line up to the limit goes as it is; one longer
// than a label takes, or not UTF-8, is refused, and nothing is sent.
func TestTellLong(t *testing.T) {
	id := "waiter-0001"
	exact := `{"msg":"ready","error":"`
	exact += strings.Repeat("c", maxSaid-len(exact)-2) + `"}`
	for name, tc := range map[string]struct {
		line string
		ok   bool
	}{
		"short":             {`{"msg":"ready"}`, true},
		"exactly the limit": {exact, true},
		"a byte more":       {exact + " ", false},
		"not UTF-8":         {"\xff", false},
	} {
		t.Run(name, func(t *testing.T) {
			e, d := newFake(t, map[string][]reply{
				"Containers/Get":    {{msg: `{"container":{"id":"` + id + `"}}`}},
				"Containers/Update": {{msg: `{"container":{"id":"` + id + `"}}`}},
			})
			writeProc(t, e, "cgroup", "0::/"+namespace+"/"+id+"\n")
			err := e.Tell(testCtx(t), []byte(tc.line))
			reqs := d.requests("Containers/Update")
			if (err == nil) != tc.ok || len(reqs) != map[bool]int{true: 1, false: 0}[tc.ok] {
				t.Fatalf("Tell() = %v after %d updates; want ok %v", err, len(reqs), tc.ok)
			}
			if !tc.ok {
				return
			}
			var req struct {
				Container struct {
					Labels map[string]string `json:"labels"`
				} `json:"container"`
			}
			if err := json.Unmarshal([]byte(reqs[0]), &req); err != nil {
				t.Fatal(err)
			}
			if said := req.Container.Labels[LabelSaid]; said != tc.line {
				t.Errorf("told %q, want %q as it is", said, tc.line)
			}
		})
	}
}

// writeProc writes the file name of e's ProcSelf.
func writeProc(t *testing.T, e *Engine, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.ProcSelf, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCutRunes: a cut never splits a rune, and never grows.
func TestCutRunes(t *testing.T) {
	for _, tc := range []struct {
		s     string
		limit int
		want  string
	}{
		{"ab", 2, "ab"}, {"abc", 2, "ab"}, {"é", 1, ""}, {"éa", 1, ""}, {"aé", 2, "a"}, {"\x80\x80\x80", 2, ""},
	} {
		if got := cutRunes(tc.s, tc.limit); got != tc.want {
			t.Errorf("cutRunes(%q, %d) = %q, want %q", tc.s, tc.limit, got, tc.want)
		}
	}
}

// TestStartTaskUndone: a task whose create was cut in flight can be
// found, then undone by containerd before the start reaches it: the
// start answers NotFound, nothing ran, and the task is created again
// and started, a few times at most.
func TestStartTaskUndone(t *testing.T) {
	notFound := reply{code: containerdapi.NotFound, status: "task user-1 not found"}
	for _, tc := range []struct {
		name        string
		starts      []reply
		wantErr     bool
		wantCreates int
	}{
		{name: "undone once", starts: []reply{notFound, {msg: `{"pid":43}`}}, wantCreates: 2},
		{name: "undone again and again", starts: []reply{notFound}, wantErr: true, wantCreates: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, d := newFake(t, map[string][]reply{
				"Containers/Get":    {{msg: `{"container":{"id":"user-1","snapshotter":"overlayfs","snapshot_key":"user-1"}}`}},
				"Tasks/Get":         {notFound},
				"Snapshots/Mounts":  {{msg: `{"mounts":[{"type":"bind","source":"/x"}]}`}},
				"Tasks/Create":      {{msg: `{"container_id":"user-1","pid":42}`}},
				"Tasks/Start":       tc.starts,
				"Containers/Update": {{msg: `{"container":{"id":"user-1"}}`}},
			})
			e.LogDir = t.TempDir()
			err := e.Start(testCtx(t), "user-1")
			if tc.wantErr != (err != nil) || tc.wantErr && !errors.Is(err, containerdapi.ErrNotFound) {
				t.Errorf("Start() = %v, want error %v (NotFound)", err, tc.wantErr)
			}
			if n, s := d.count("Tasks/Create"), d.count("Tasks/Start"); n != tc.wantCreates || s != tc.wantCreates {
				t.Errorf("%d task creates, %d starts; want %d of each", n, s, tc.wantCreates)
			}
		})
	}
}
