package containerd

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
)

// TestAgain: a re-run's container is first's, made again: first's spec
// for its own ID (its cgroup), first's image, runtime (with its options)
// and labels but the name and the start, on a fresh snapshot of the
// image snapshot first's was prepared on, with its task; its ID is its
// name with first's suffix, so that a call made again makes the same.
func TestAgain(t *testing.T) {
	const first = "tinkerbell_kexec-waitdaemon-user-0a1b2c3d"
	const id = "tinkerbell_kexec-waitdaemon-user-2-0a1b2c3d"
	get := `{"container":{"id":"` + first + `","labels":{"org.waitdaemon.role":"user","org.waitdaemon.name":"tinkerbell_kexec-waitdaemon-user","org.waitdaemon.started":"2100-01-01T00:00:00Z"},` +
		`"image":"quay.io/tinkerbell/actions/kexec:latest","runtime":{"name":"io.containerd.runc.v2","options":{"type_url":"containerd.runc.v1.Options","base64":"UAE="}},"snapshotter":"overlayfs","snapshot_key":"` + first + `",` +
		`"spec":{"type_url":"types.containerd.io/opencontainers/runtime-spec/1/Spec","json":{"ociVersion":"1.2.0","process":{"user":{"uid":0,"gid":0},"args":["/usr/bin/kexec"],"cwd":"/"},"root":{"path":"rootfs"},` +
		`"linux":{"cgroupsPath":"/` + namespace + `/` + first + `","namespaces":[{"type":"mount"}]}}}}}`
	e, d := newFake(t, map[string][]reply{
		"Containers/Get":    {{msg: get}},
		"Snapshots/Stat":    {{msg: `{"info":{"name":"` + first + `","parent":"sha256:kexec-top","kind":2}}`}},
		"Leases/Create":     {{msg: `{"lease":{"id":"waitdaemon-` + id + `"}}`}},
		"Snapshots/Prepare": {{msg: `{"mounts":[{"type":"overlay","source":"overlay"}]}`}},
		"Containers/Create": {{msg: `{"container":{"id":"` + id + `"}}`}},
		"Leases/Delete":     {{msg: `{}`}},
		"Tasks/Create":      {{msg: `{"container_id":"` + id + `","pid":1}`}},
	})
	got, err := e.Again(testCtx(t), first, "tinkerbell_kexec-waitdaemon-user-2")
	if err != nil || got != id {
		t.Fatalf("Again() = %q, %v; want %q", got, err, id)
	}
	var prep struct{ Snapshotter, Key, Parent string }
	if err := json.Unmarshal([]byte(d.requests("Snapshots/Prepare")[0]), &prep); err != nil || prep.Key != id || prep.Parent != "sha256:kexec-top" || prep.Snapshotter != "overlayfs" {
		t.Errorf("Snapshots/Prepare %s (%v); want key %s on first's parent sha256:kexec-top, in overlayfs", d.requests("Snapshots/Prepare")[0], err, id)
	}
	var create struct {
		Container struct {
			ID, Image, Snapshotter string
			SnapshotKey            string `json:"snapshot_key"`
			Labels                 map[string]string
			Runtime                struct {
				Name    string
				Options struct {
					TypeURL string `json:"type_url"`
					Base64  string
				}
			}
			Spec struct {
				JSON struct {
					Process struct{ Args []string }
					Linux   struct {
						CgroupsPath string `json:"cgroupsPath"`
					}
				} `json:"json"`
			}
		}
	}
	req := d.requests("Containers/Create")[0]
	if err := json.Unmarshal([]byte(req), &create); err != nil {
		t.Fatal(err)
	}
	c := create.Container
	if c.ID != id || c.Image != "quay.io/tinkerbell/actions/kexec:latest" || c.SnapshotKey != id || c.Runtime.Name != "io.containerd.runc.v2" ||
		c.Runtime.Options.TypeURL != "containerd.runc.v1.Options" || c.Runtime.Options.Base64 != "UAE=" ||
		c.Labels[LabelName] != "tinkerbell_kexec-waitdaemon-user-2" || c.Labels["org.waitdaemon.role"] != "user" || c.Labels[LabelStarted] != "" ||
		c.Spec.JSON.Linux.CgroupsPath != "/"+namespace+"/"+id || strings.Join(c.Spec.JSON.Process.Args, " ") != "/usr/bin/kexec" {
		t.Errorf("Containers/Create %s\nwant first's, made again for %s, never started", req, id)
	}
	if n := d.count("Tasks/Create"); n != 1 {
		t.Errorf("%d task creates, want 1", n)
	}
}

// TestAgainUnsettled: a re-run's task create cut in flight, then sent
// again, and that one hanging (containerd 2.2.1 has hung so on what the
// cut create left, a whole request's time, Tasks/Get saying NotFound
// meanwhile): the re-run's container is given up, soon, and removed,
// and the re-run made under a fresh ID (nothing of it has started, so a
// fresh one is always safe).
func TestAgainUnsettled(t *testing.T) {
	const first = "tinkerbell_kexec-waitdaemon-user-0a1b2c3d"
	const name = "tinkerbell_kexec-waitdaemon-user-2"
	const id, fresh = name + "-0a1b2c3d", name + "-f00df00d"
	ctr := func(id string) string {
		return `{"container":{"id":"` + id + `","labels":{"org.waitdaemon.role":"user","org.waitdaemon.name":"tinkerbell_kexec-waitdaemon-user"},` +
			`"image":"quay.io/tinkerbell/actions/kexec:latest","runtime":{"name":"io.containerd.runc.v2"},"snapshotter":"overlayfs","snapshot_key":"` + id + `",` +
			`"spec":{"type_url":"types.containerd.io/opencontainers/runtime-spec/1/Spec","json":{"ociVersion":"1.2.0","process":{"user":{"uid":0,"gid":0},"args":["/usr/bin/kexec"],"cwd":"/"},"root":{"path":"rootfs"},` +
			`"linux":{"cgroupsPath":"/` + namespace + `/` + id + `","namespaces":[{"type":"mount"}]}}}}}`
	}
	e, d := newFake(t, map[string][]reply{
		// first's, for Again; the given-up one's, for its removal; the
		// fresh one's.
		"Containers/Get":    {{msg: ctr(first)}, {msg: ctr(id)}, {msg: ctr(fresh)}},
		"Snapshots/Stat":    {{msg: `{"info":{"name":"` + first + `","parent":"sha256:kexec-top","kind":2}}`}},
		"Leases/Create":     {{msg: `{"lease":{"id":"waitdaemon-lease"}}`}},
		"Snapshots/Prepare": {{msg: `{"mounts":[{"type":"overlay","source":"overlay"}]}`}},
		"Containers/Create": {{msg: `{"container":{"id":"` + id + `"}}`}},
		"Leases/Delete":     {{msg: `{}`}},
		"Tasks/Create":      {{broken: func() bool { return true }}, {hangs: true}, {msg: `{"container_id":"` + fresh + `","pid":1}`}},
		"Tasks/Get":         {{code: containerdapi.NotFound, status: "no running task found: task " + id + " not found"}},
		"Containers/Delete": {{msg: `{}`}},
		"Snapshots/Remove":  {{msg: `{}`}},
	})
	e.LogDir = t.TempDir()
	e.newSuffix = func() string { return "f00df00d" }
	// A request's time: 90 s in the waiter.
	e.C.RequestTimeout = 5 * time.Second
	defer func(old time.Duration) { settleAnew = old }(settleAnew)
	settleAnew = 500 * time.Millisecond
	began := time.Now()
	got, err := e.Again(testCtx(t), first, name)
	if err != nil || got != fresh {
		t.Fatalf("Again() = %q, %v; want the re-run made anew, %s", got, err, fresh)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("Again took %v, want the unsettled create given up well before a request's time (5 s)", took)
	}
	var created, deleted []string
	for _, req := range d.requests("Containers/Create") {
		var c struct {
			Container struct {
				ID          string
				SnapshotKey string `json:"snapshot_key"`
			}
		}
		_ = json.Unmarshal([]byte(req), &c)
		created = append(created, c.Container.ID+" on "+c.Container.SnapshotKey)
	}
	for _, req := range d.requests("Containers/Delete") {
		var c struct{ ID string }
		_ = json.Unmarshal([]byte(req), &c)
		deleted = append(deleted, c.ID)
	}
	if !slices.Equal(created, []string{id + " on " + id, fresh + " on " + fresh}) || !slices.Equal(deleted, []string{id}) {
		t.Errorf("containers created %q, deleted %q; want %s, given up and deleted, then %s, each on a snapshot of its own", created, deleted, id, fresh)
	}
	if got, _ := e.find(testCtx(t), name); got.ID != fresh {
		t.Errorf("%s is found as %q, want the fresh %s", name, got.ID, fresh)
	}
}
