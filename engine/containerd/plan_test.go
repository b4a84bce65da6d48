package containerd

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/inherit/ocispec"
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
			e, d := newFake(t, map[string][]reply{
				"Images/Get": {{msg: `{"image":{"name":"docker.io/library/x:1","target":{"media_type":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:m"}}}`}},
				"Content/Read": {
					{msg: `{"data":"{\"config\":{\"digest\":\"sha256:c\"},\"layers\":[{\"digest\":\"sha256:l\"}]}"}`},
					{msg: `{"data":"{\"architecture\":\"amd64\",\"os\":\"linux\",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:aaaa\"]}}"}`},
				},
				"Snapshots/Stat":    {{msg: `{}`}},
				"Leases/Create":     {{msg: `{}`}},
				"Leases/Delete":     {{msg: `{}`}},
				"Snapshots/Prepare": {{msg: `{}`}},
				"Containers/Create": {{msg: `{"container":{"id":"user-1"}}`}},
				"Tasks/Create":      {{code: containerdapi.InvalidArgument, status: "bad spec"}},
				"Containers/Get":    {{msg: `{"container":{"id":"user-1"}}`}},
				"Tasks/Get":         {{code: containerdapi.NotFound, status: "no task"}},
				"Containers/Delete": {tc.remove},
			})
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
