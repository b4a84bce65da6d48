package containerd

import (
	"encoding/json"
	"strings"
	"testing"
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
