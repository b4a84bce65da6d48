package hostconfig

import (
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// TestDownFacts: whether a container of a HostConfig, and so one planned
// from it, shares the host's pid namespace and holds CAP_SYS_BOOT, by
// Docker's rules for Privileged, CapAdd and CapDrop.
func TestDownFacts(t *testing.T) {
	cases := []struct {
		name             string
		host             dockerapi.HostConfig
		hostPID, canBoot bool
	}{
		{"tink-worker's: privileged, pid host", dockerapi.HostConfig{Privileged: true, PidMode: "host"}, true, true},
		{"no pid mode", dockerapi.HostConfig{Privileged: true}, false, true},
		{"Podman's private", dockerapi.HostConfig{Privileged: true, PidMode: "private"}, false, true},
		{"another container's", dockerapi.HostConfig{Privileged: true, PidMode: "container:abc"}, false, true},
		{"privileged drops nothing", dockerapi.HostConfig{Privileged: true, CapDrop: []string{"SYS_BOOT"}}, false, true},
		{"unprivileged", dockerapi.HostConfig{PidMode: "host"}, true, false},
		{"SYS_BOOT added", dockerapi.HostConfig{CapAdd: []string{"SYS_BOOT"}}, false, true},
		{"Podman's CAP_SYS_BOOT", dockerapi.HostConfig{CapAdd: []string{"CAP_SYS_BOOT"}}, false, true},
		{"cap_sys_boot", dockerapi.HostConfig{CapAdd: []string{"cap_sys_boot"}}, false, true},
		{"ALL added", dockerapi.HostConfig{CapAdd: []string{"ALL"}}, false, true},
		{"ALL added, SYS_BOOT dropped", dockerapi.HostConfig{CapAdd: []string{"ALL"}, CapDrop: []string{"CAP_SYS_BOOT"}}, false, false},
		{"others added", dockerapi.HostConfig{CapAdd: []string{"NET_ADMIN", "SYS_ADMIN"}}, false, false},
		{"ALL dropped, SYS_BOOT added", dockerapi.HostConfig{CapAdd: []string{"SYS_BOOT"}, CapDrop: []string{"ALL"}}, false, true},
	}
	for _, tc := range cases {
		if got := HostPID(tc.host); got != tc.hostPID {
			t.Errorf("%s: HostPID = %v, want %v", tc.name, got, tc.hostPID)
		}
		if got := CanBoot(tc.host); got != tc.canBoot {
			t.Errorf("%s: CanBoot = %v, want %v", tc.name, got, tc.canBoot)
		}
		// What Plan keeps, a container planned from it has too.
		out := Plan(Input{Container: dockerapi.Container{ID: "0123456789abcdef", Config: dockerapi.Config{}, HostConfig: tc.host}})
		if HostPID(out.Create.HostConfig) != tc.hostPID || CanBoot(out.Create.HostConfig) != tc.canBoot {
			t.Errorf("%s: the plan's HostPID %v, CanBoot %v; want the action's", tc.name, HostPID(out.Create.HostConfig), CanBoot(out.Create.HostConfig))
		}
	}
}
