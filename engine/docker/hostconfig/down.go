package hostconfig

import (
	"slices"
	"strings"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// HostPID reports whether a container of host shares the host's pid
// namespace, as a container planned from it does (Plan keeps PidMode):
// PidMode host. Another container's ("container:ID") is that
// container's, which the action's settings cannot vouch for.
func HostPID(host dockerapi.HostConfig) bool {
	return host.PidMode == "host"
}

// CanBoot reports whether a container of host holds CAP_SYS_BOOT, which
// reboot(2) needs (reboot -f, poweroff -f, a kexec), as a container
// planned from it does (Plan keeps Privileged, CapAdd and CapDrop).
// Docker's rules: a privileged container has every capability, whatever
// CapDrop says; else ALL in CapAdd gives every one but CapDrop's, and
// otherwise CapAdd adds to the defaults, which lack CAP_SYS_BOOT.
// Capabilities are named with or without CAP_, in any case.
func CanBoot(host dockerapi.HostConfig) bool {
	if host.Privileged {
		return true
	}
	has := func(caps []string, c string) bool {
		return slices.ContainsFunc(caps, func(s string) bool {
			return strings.TrimPrefix(strings.ToUpper(s), "CAP_") == c
		})
	}
	if has(host.CapAdd, "ALL") {
		return !has(host.CapDrop, "SYS_BOOT")
	}
	return has(host.CapAdd, "SYS_BOOT")
}
