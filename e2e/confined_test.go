package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
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

// TestContainerdConfined: the user container of an action that is not
// privileged is confined as the action is: the same capability sets,
// no_new_privileges, rlimits, masked and read-only paths, and device
// rules, none of them empty (TestContainerdEngine compares the same for
// a privileged action, where masked and read-only paths are none).
func TestContainerdConfined(t *testing.T) {
	c, eng, actionImg := setupContainerd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := containerdRig{c: c, eng: eng, actionImg: actionImg, spec: func(s []byte) []byte { return confine(t, s) }}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "IMAGE=docker.io/library/" + probeImage, "WAIT_SECONDS=0", "PROBE_EXIT=3"}
	a := cdAgentAction("tinkerbell_cd-confined_01JE2E"+randomHex(10), nil, env, [][2]string{{containerdSocket, containerdapi.DefaultSocket}}, "host", "host")
	ctr := r.create(t, ctx, a)
	action := specOf(t, ctx, c, ctr.ID)
	res := r.agentRun(t, ctx, ctr)
	if res.ExitCode != 0 || !strings.Contains(res.Output, `"msg":"handed off"`) {
		t.Fatalf("the confined action exited %d, want 0 and the hand-off:\n%s", res.ExitCode, res.Output)
	}
	if err := ctr.Finish(ctx, res); err != nil {
		t.Fatal(err)
	}
	kept := settled(t, eng, ctr.ID, 30*time.Second, "user stopped", "waiter stopped")
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
