package containerd

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/containerd/ocispec"
	"github.com/waitdaemon/waitdaemon/imageref"
)

// TestCreateTaskFails: a task that cannot be created fails Create, and
// the container made for it goes again; a removal that fails too is part
// of the error.
func TestCreateTaskFails(t *testing.T) {
	cases := []struct {
		name    string
		remove  reply
		wantErr []string
	}{
		{"removed", reply{msg: `{}`}, []string{"bad spec"}},
		{"not removed", reply{code: containerdapi.FailedPrecondition, status: "cannot delete"}, []string{"bad spec", "cannot delete"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, d := newFake(t, withImageX(map[string][]reply{
				"Leases/Create":     {{msg: `{}`}},
				"Leases/Delete":     {{msg: `{}`}},
				"Snapshots/Prepare": {{msg: `{}`}},
				"Containers/Create": {{msg: `{"container":{"id":"user-1"}}`}},
				"Tasks/Create":      {{code: containerdapi.InvalidArgument, status: "bad spec"}},
				"Containers/Get":    {{msg: `{"container":{"id":"user-1"}}`}},
				"Tasks/Get":         {{code: containerdapi.NotFound, status: "no task"}},
				"Containers/Delete": {tc.remove},
			}))
			p := &planned{ID: "user-1", Image: "docker.io/library/x:1", Runtime: "io.containerd.runc.v2", Snapshotter: "overlayfs", SnapshotKey: "user-1",
				Spec: &ocispec.Spec{Process: &ocispec.Process{Args: []string{"true"}}}}
			id, err := e.Create(testCtx(t), engine.Spec{Name: "user", Create: p})
			if id != "" || err == nil || !strings.HasPrefix(err.Error(), "creating container user: ") {
				t.Fatalf("Create() = %q, %v; want the task's error", id, err)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Create() = %v, want it to say %q", err, w)
				}
			}
			if d.count("Containers/Delete") != 1 {
				t.Errorf("%d deletes, want the container removed", d.count("Containers/Delete"))
			}
		})
	}
}

// TestCreateUnsettled: a task create cut in flight, then sent again, and
// that one hanging (as containerd 2.2.1 has): the container is given up
// soon, and removed, and made anew under a fresh ID, its snapshot, its
// output file and its cgroup its own; phase 1 goes on with that one.
func TestCreateUnsettled(t *testing.T) {
	const id, fresh = "waiter-0a1b2c3d", "waiter-f00df00d"
	e, d := newFake(t, withImageX(map[string][]reply{
		"Leases/Create":     {{msg: `{}`}},
		"Leases/Delete":     {{msg: `{}`}},
		"Snapshots/Prepare": {{msg: `{}`}},
		"Containers/Create": {{msg: `{"container":{"id":"` + id + `"}}`}},
		"Tasks/Create":      {{broken: func() bool { return true }}, {hangs: true}, {msg: `{"container_id":"` + fresh + `","pid":1}`}},
		"Tasks/Get":         {{code: containerdapi.NotFound, status: "no running task found: task " + id + " not found"}},
		"Containers/Get":    {{msg: `{"container":{"id":"` + id + `","snapshotter":"overlayfs","snapshot_key":"` + id + `"}}`}},
		"Containers/Delete": {{msg: `{}`}},
		"Snapshots/Remove":  {{msg: `{}`}},
	}))
	e.LogDir = t.TempDir()
	e.newSuffix = func() string { return "f00df00d" }
	e.C.RequestTimeout = 5 * time.Second // 40 s in phase 1
	defer func(old time.Duration) { settleAnew = old }(settleAnew)
	settleAnew = 500 * time.Millisecond
	p := &planned{ID: id, Image: "docker.io/library/x:1", Runtime: "io.containerd.runc.v2", Snapshotter: "overlayfs", SnapshotKey: id,
		Output: "file://" + e.logFile(id),
		Spec:   &ocispec.Spec{Process: &ocispec.Process{Args: []string{"true"}}, Linux: &ocispec.Linux{CgroupsPath: "/" + namespace + "/" + id}}}
	began := time.Now()
	got, err := e.Create(testCtx(t), engine.Spec{Name: "waiter", Create: p})
	if err != nil || got != fresh {
		t.Fatalf("Create() = %q, %v; want the container made anew, %s", got, err, fresh)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("Create took %v, want the unsettled create given up well before a request's time (5 s)", took)
	}
	reqs := d.requests("Containers/Create")
	var c struct {
		Container struct {
			ID          string
			SnapshotKey string `json:"snapshot_key"`
			Spec        struct {
				JSON struct {
					Linux struct {
						CgroupsPath string `json:"cgroupsPath"`
					}
				} `json:"json"`
			}
		}
	}
	if len(reqs) != 2 || json.Unmarshal([]byte(reqs[1]), &c) != nil || c.Container.ID != fresh || c.Container.SnapshotKey != fresh ||
		c.Container.Spec.JSON.Linux.CgroupsPath != "/"+namespace+"/"+fresh {
		t.Errorf("Containers/Create %q; want a second, for %s, on a snapshot and in a cgroup of its own", reqs, fresh)
	}
	var task struct{ Stdout string }
	if creates := d.requests("Tasks/Create"); len(creates) != 3 || json.Unmarshal([]byte(creates[2]), &task) != nil || task.Stdout != "file://"+e.logFile(fresh) {
		t.Errorf("Tasks/Create %q; want the third, %s's, with its own output file", creates, fresh)
	}
	if n := d.count("Containers/Delete"); n != 1 {
		t.Errorf("%d container deletes, want the unsettled one removed", n)
	}
}

// TestPlanFallbackCommand: a fallback whose image has neither ENTRYPOINT
// nor CMD, planned for an action with no command, runs the command it
// is given: planned, not refused as a command missing.
func TestPlanFallbackCommand(t *testing.T) {
	e, _ := newFake(t, map[string][]reply{
		"Images/Get": {{msg: `{"image":{"name":"docker.io/library/fb:1","target":{"media_type":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:m"}}}`}},
		"Content/Read": {
			{msg: `{"data":"{\"config\":{\"digest\":\"sha256:c\"},\"layers\":[{\"digest\":\"sha256:l\"}]}"}`},
			{msg: `{"data":"{\"architecture\":\"amd64\",\"os\":\"linux\",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:aaaa\"]}}"}`},
		},
	})
	act := recordedAction(t, "reboot.json")
	d := act.Detail.(*self)
	wd := []string{"/waitdaemon", "action", "--"}
	d.image = &ocispec.ImageConfig{Entrypoint: wd}
	d.spec.Process.Args = wd
	ref, err := imageref.Parse("fb:1")
	if err != nil {
		t.Fatal(err)
	}
	cmd := []string{"/bin/busybox", "reboot", "-f"}
	spec, err := e.Plan(testCtx(t), act, engine.Want{Name: "act-waitdaemon-fallback", Image: ref, Command: cmd})
	if err != nil {
		t.Fatalf("Plan() = %v, want the fallback planned with its command", err)
	}
	if got := spec.Create.(*planned).Spec.Process.Args; !slices.Equal(got, cmd) {
		t.Errorf("args %q, want %q", got, cmd)
	}
}

// TestRuntimeCopied: the user container and the waiter run on the
// action's runtime, with its options (a runc BinaryName, Root,
// SystemdCgroup...), and, under systemd's cgroup driver, a cgroup path
// of its slice:prefix:name form.
func TestRuntimeCopied(t *testing.T) {
	// containerd.runc.v1.Options{binary_name: "/usr/local/bin/runc", systemd_cgroup: true}
	opts := append([]byte{0x32, 19}, "/usr/local/bin/runc"...)
	opts = append(opts, 0x50, 1)
	for _, tc := range []struct {
		name, cgroup, wantCgroup string
	}{
		{name: "cgroupfs", cgroup: "/tinkerbell/act", wantCgroup: "/" + namespace + "/"},
		{name: "systemd", cgroup: "system.slice:tinkerbell:act", wantCgroup: "system.slice:tinkerbell:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, d := newFake(t, map[string][]reply{
				"Images/Get": {{msg: `{"image":{"name":"docker.io/library/fb:1","target":{"media_type":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:m"}}}`}},
				"Content/Read": {
					{msg: `{"data":"{\"config\":{\"digest\":\"sha256:c\"},\"layers\":[{\"digest\":\"sha256:l\"}]}"}`},
					{msg: `{"data":"{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Cmd\":[\"/bin/sh\"]},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:aaaa\"]}}"}`},
				},
				"Leases/Create":     {{msg: `{}`}},
				"Leases/Delete":     {{msg: `{}`}},
				"Snapshots/Prepare": {{msg: `{}`}},
				"Containers/Create": {{msg: `{"container":{"id":"x"}}`}},
			})
			act := recordedAction(t, "reboot.json")
			sd := act.Detail.(*self)
			sd.ctr.Runtime = containerdapi.Runtime{Name: "io.containerd.runc.v2", Options: containerdapi.Any{TypeURL: "containerd.runc.v1.Options", Value: opts}}
			sd.spec.Linux.CgroupsPath = tc.cgroup
			sd.image = &ocispec.ImageConfig{Entrypoint: []string{"/waitdaemon", "action", "--"}}
			ref, err := imageref.Parse("fb:1")
			if err != nil {
				t.Fatal(err)
			}
			user, err := e.Plan(testCtx(t), act, engine.Want{Name: "act-waitdaemon-user", Image: ref})
			if err != nil {
				t.Fatal(err)
			}
			waiter := e.PlanWaiter(act, engine.Waiter{Name: "act-waitdaemon-waiter", Args: []string{"waiter"}})
			for _, spec := range []engine.Spec{user, waiter} {
				p := spec.Create.(*planned)
				if got := p.Spec.Linux.CgroupsPath; got != tc.wantCgroup+p.ID {
					t.Errorf("%s: cgroup path %q, want %q", spec.Name, got, tc.wantCgroup+p.ID)
				}
				specJSON, _ := json.Marshal(p.Spec)
				if _, err := e.createContainer(testCtx(t), p, specJSON, "sha256:aaaa"); err != nil {
					t.Fatal(err)
				}
			}
			want := `{"name":"io.containerd.runc.v2","options":{"type_url":"containerd.runc.v1.Options","base64":"` + base64.StdEncoding.EncodeToString(opts) + `"}}`
			for i, req := range d.requests("Containers/Create") {
				var got struct {
					Container struct{ Runtime json.RawMessage }
				}
				if err := json.Unmarshal([]byte(req), &got); err != nil || string(got.Container.Runtime) != want {
					t.Errorf("create %d: runtime %s, %v; want the action's, with its options, %s", i, got.Container.Runtime, err, want)
				}
			}
		})
	}
}
