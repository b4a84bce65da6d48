package containerd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine"
)

// TestSelfTriedAll: an override that names no container, and a root
// upperdir that no running task has, are each named among what was
// tried, in the bad input that asks for the override.
func TestSelfTriedAll(t *testing.T) {
	notFound := reply{code: containerdapi.NotFound, status: "container not found"}
	e, _ := newFake(t, map[string][]reply{
		"Containers/Get":  {notFound},
		"Containers/List": {{msg: `{}`}},
		"Tasks/List":      {{msg: `{}`}},
	})
	upper := "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/7/fs"
	for name, content := range map[string]string{
		"cgroup":    "0::/\n",
		"mountinfo": "72 48 0:38 / / rw,relatime - overlay overlay rw,lowerdir=/x,upperdir=" + upper + ",workdir=/y\n",
	} {
		if err := os.WriteFile(filepath.Join(e.ProcSelf, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.Self(testCtx(t), "gone-action")
	var input engine.InputError
	if !errors.As(err, &input) || !strings.Contains(err.Error(), "(tried: override gone-action, mountinfo "+upper+")") {
		t.Errorf("Self() = %v; want the bad input, with the override and the upperdir tried", err)
	}
}

// TestInspectBadSpec: a container whose spec is not JSON cannot be read
// as the action, and the error says whose.
func TestInspectBadSpec(t *testing.T) {
	e, _ := newFake(t, map[string][]reply{
		"Containers/Get": {{msg: `{"container":{"id":"act","spec":{"type_url":"types.containerd.io/opencontainers/runtime-spec/1/Spec","base64":"bm90IGpzb24="}}}`}},
	})
	_, err := e.Inspect(testCtx(t), "act")
	if err == nil || !strings.HasPrefix(err.Error(), "reading the spec of container act: ") {
		t.Errorf("Inspect() = %v, want the spec's error", err)
	}
}

// TestSelfOverrideTask: the override names the action's container only
// while its task runs; a task that cannot be read fails Self.
func TestSelfOverrideTask(t *testing.T) {
	cases := []struct {
		name      string
		task      reply
		wantInput bool   // the bad input: the override was tried
		wantErr   string // in the error
	}{
		{"stopped", reply{msg: `{"process":{"id":"act","status":3}}`}, true, "tried: override act"},
		{"no task", reply{code: containerdapi.NotFound, status: "no task"}, true, "tried: override act"},
		{"unreadable", reply{code: containerdapi.Unknown, status: "cannot read"}, false, "finding this action's container: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newFake(t, map[string][]reply{
				"Containers/Get": {{msg: `{"container":{"id":"act"}}`}},
				"Tasks/Get":      {tc.task},
			})
			for _, name := range []string{"cgroup", "mountinfo"} {
				if err := os.WriteFile(filepath.Join(e.ProcSelf, name), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s, err := e.Self(testCtx(t), "act")
			var input engine.InputError
			if err == nil || errors.As(err, &input) != tc.wantInput || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Self() = %s, %v; want an error with %q (bad input %v)", s.ID, err, tc.wantErr, tc.wantInput)
			}
		})
	}
}
