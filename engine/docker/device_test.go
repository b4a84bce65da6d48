package docker

import (
	"fmt"
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
)

// TestWaiterDevice: a waiter given the result device has that device and
// the right to mount it (CAP_SYS_ADMIN, no AppArmor profile), and is not
// privileged; without one, it has none of these.
func TestWaiterDevice(t *testing.T) {
	e := &Engine{C: &dockerapi.Client{Socket: "/var/run/docker.sock"}}
	act := engine.Self{ID: "act", Name: "act", Detail: &self{ctr: dockerapi.Container{ID: "act", Image: "sha256:wd"}}}
	plan := func(d *engine.Device) string {
		hc := e.PlanWaiter(act, engine.Waiter{Name: "w", Device: d}).Create.(*planned).HostConfig
		return fmt.Sprintf("privileged %v, devices %+v, caps %q, security %q", hc.Privileged, hc.Devices, hc.CapAdd, hc.SecurityOpt)
	}
	if got, want := plan(&engine.Device{Path: "/dev/sdb1", Major: 8, Minor: 17}),
		`privileged false, devices [{PathOnHost:/dev/sdb1 PathInContainer:/dev/sdb1 CgroupPermissions:rwm}], caps ["SYS_ADMIN"], security ["apparmor=unconfined"]`; got != want {
		t.Errorf("with a device: %s\nwant %s", got, want)
	}
	if got, want := plan(nil), `privileged false, devices [], caps [], security []`; got != want {
		t.Errorf("without: %s\nwant %s", got, want)
	}
}
