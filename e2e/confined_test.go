package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/internal/tinkagent"
	"github.com/waitdaemon/waitdaemon/phase"
)

// confinement is how containerd's default spec confines a container that
// is not privileged (oci.WithDefaultSpec): its capabilities, masked and
// read-only paths, no new privileges and its open-files limit.
var confinement = struct {
	caps             []string
	masked, readonly []string
	rlimits          []map[string]any
}{
	caps: []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID",
		"CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"},
	masked: []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
		"/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/sys/devices/virtual/powercap", "/proc/scsi"},
	readonly: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
	rlimits:  []map[string]any{{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}},
}

// confine makes tink-agent's privileged spec confined (see confinement):
// no device but its own, and none of the host's allowed.
func confine(t *testing.T, privileged []byte) []byte {
	t.Helper()
	var spec map[string]any
	if err := json.Unmarshal(privileged, &spec); err != nil {
		t.Fatal(err)
	}
	process, linux := spec["process"].(map[string]any), spec["linux"].(map[string]any)
	process["capabilities"] = map[string]any{"bounding": confinement.caps, "effective": confinement.caps, "permitted": confinement.caps}
	process["noNewPrivileges"] = true
	process["rlimits"] = confinement.rlimits
	linux["maskedPaths"], linux["readonlyPaths"] = confinement.masked, confinement.readonly
	linux["resources"] = map[string]any{"devices": []map[string]any{{"allow": false, "access": "rwm"}}}
	delete(linux, "devices")
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// createConfined creates action a as tinkagent.Create does, with its spec
// confined.
func createConfined(t *testing.T, ctx context.Context, c *containerdapi.Client, a tinkagent.Action) {
	t.Helper()
	img, err := c.ImageUnpacked(ctx, a.Image, containerdapi.DefaultPlatform(), containerdapi.DefaultSnapshotter)
	if err != nil {
		t.Fatal(err)
	}
	args := append(slices.Clone(img.Config.Config.Entrypoint), a.Args...)
	mounts, err := c.SnapshotPrepare(ctx, containerdapi.DefaultSnapshotter, a.SnapshotKey(), img.ChainID)
	if err != nil {
		t.Fatal(err)
	}
	spec := confine(t, tinkagent.Spec(containerdNS, a.ID, args, a.Env, a.Volumes, a.Etc, a.Private))
	if _, err := c.ContainerCreate(ctx, containerdapi.Container{
		ID: a.ID, Image: a.Image, Labels: map[string]string{"nerdctl/name": a.Name, "nerdctl/namespace": containerdNS},
		Runtime: containerdapi.Runtime{Name: containerdapi.RuncV2}, Spec: containerdapi.SpecAny(spec),
		Snapshotter: containerdapi.DefaultSnapshotter, SnapshotKey: a.SnapshotKey(),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TaskCreate(ctx, a.ID, containerdapi.TaskSpec{Rootfs: mounts, Stdout: "file://" + a.Log, Stderr: "file://" + a.Log}); err != nil {
		t.Fatal(err)
	}
}

// TestContainerdConfined: the user container of an action that is not
// privileged is confined as the action is: the same capability sets,
// no_new_privileges, rlimits, masked and read-only paths, and device
// rules, none of them empty (TestContainerdEngine compares the same for
// a privileged action, where masked and read-only paths are none).
func TestContainerdConfined(t *testing.T) {
	c, eng, actionImg := setupContainerd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := containerdRig{c: c, eng: eng, actionImg: actionImg}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "IMAGE=docker.io/library/" + probeImage, "WAIT_SECONDS=0", "PROBE_EXIT=3"}
	a := r.newAction(t, "tinkerbell_cd-confined_01JE2E"+randomHex(10), nil, env, [][2]string{{containerdSocket, containerdapi.DefaultSocket}}, false)
	createConfined(t, ctx, c, a)
	action := specOf(t, ctx, c, a.ID)
	exit, out := r.agentStart(t, ctx, a)
	if exit.Status != 0 || !strings.Contains(out, `"msg":"handed off"`) {
		t.Fatalf("the confined action exited %d, want 0 and the hand-off:\n%s", exit.Status, out)
	}
	if err := tinkagent.Delete(ctx, c, a); err != nil {
		t.Fatal(err)
	}
	kept := settled(t, eng, a.ID, 30*time.Second, "user stopped", "waiter stopped")
	want := privileges(action)
	for _, k := range []string{"capabilities", "noNewPrivileges", "rlimits", "maskedPaths", "readonlyPaths", "resources.devices"} {
		if want[k] == "" || want[k] == "null" {
			t.Errorf("the confined action's %s is empty: the comparison would prove nothing", k)
		}
	}
	n := 0
	for _, k := range kept {
		if k.Labels[phase.LabelRole] != phase.RoleUser {
			continue
		}
		n++
		got := privileges(specOf(t, ctx, c, k.ID))
		for key := range want {
			if got[key] != want[key] {
				t.Errorf("the user container's %s = %s, want the action's %s", key, got[key], want[key])
			}
		}
	}
	if n != 1 {
		t.Errorf("%d kept user containers, want the failed one: %+v", n, kept)
	}
}
