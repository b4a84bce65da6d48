package containerd

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine"
)

// TestPlanWaiterDevice: a waiter given the result device has that device,
// allowed in its cgroup, and CAP_SYS_ADMIN to mount it, besides
// containerd's default capabilities; nothing more. Without one, it has
// neither.
func TestPlanWaiterDevice(t *testing.T) {
	self := recordedAction(t, "reboot.json")
	e := New(&containerdapi.Client{Socket: "/run/containerd/containerd.sock", Namespace: "tinkerbell"})
	plan := func(d *engine.Device) (caps []string, devices, resources string) {
		p := e.PlanWaiter(self, engine.Waiter{Name: "w", Args: []string{"waiter"}, Device: d}).Create.(*planned)
		var c struct{ Bounding, Effective, Permitted []string }
		_ = json.Unmarshal(p.Spec.Process.Rest["capabilities"], &c)
		if !slices.Equal(c.Bounding, c.Effective) || !slices.Equal(c.Bounding, c.Permitted) {
			t.Errorf("capabilities %+v differ by set", c)
		}
		return c.Bounding, string(p.Spec.Linux.Rest["devices"]), string(p.Spec.Linux.Rest["resources"])
	}
	caps, devices, resources := plan(&engine.Device{Path: "/dev/sdb1", Major: 8, Minor: 17})
	if !slices.Equal(caps, append(slices.Clone(defaultCaps), "CAP_SYS_ADMIN")) {
		t.Errorf("capabilities %q; want the defaults and CAP_SYS_ADMIN", caps)
	}
	if want := `[{"fileMode":432,"gid":0,"major":8,"minor":17,"path":"/dev/sdb1","type":"b","uid":0}]`; devices != want {
		t.Errorf("devices %s; want %s", devices, want)
	}
	if want := `{"devices":[{"access":"rwm","allow":false},{"access":"rwm","allow":true,"major":8,"minor":17,"type":"b"}]}`; resources != want {
		t.Errorf("resources %s; want %s", resources, want)
	}
	caps, devices, resources = plan(nil)
	if !slices.Equal(caps, defaultCaps) || devices != "" || resources != `{"devices":[{"access":"rwm","allow":false}]}` {
		t.Errorf("without a device: capabilities %q, devices %q, resources %s", caps, devices, resources)
	}
}
