package ocispec

import (
	"encoding/json"
	"testing"
)

// TestDownFacts: whether a container of a spec, and so one planned from
// it, shares the host's pid namespace (no pid namespace, or PID 1's) and
// holds CAP_SYS_BOOT (bounding and effective, or ambient for a process
// other than root, which has no other after its exec), on the specs tink-agent's
// containerd runtime made and on variants of them.
func TestDownFacts(t *testing.T) {
	caps := func(bounding, effective []string) Rest {
		raw, err := json.Marshal(map[string][]string{"bounding": bounding, "effective": effective, "permitted": effective})
		if err != nil {
			t.Fatal(err)
		}
		return Rest{"capabilities": raw}
	}
	boot := []string{"CAP_CHOWN", SysBoot}
	cases := []struct {
		name             string
		edit             func(*Spec)
		hostPID, canBoot bool
	}{
		{"reboot (pid host, privileged)", nil, true, true},
		{"cni-volumes", nil, false, true},
		{"a new pid namespace", func(s *Spec) { s.Linux.Namespaces = append(s.Linux.Namespaces, Namespace{Type: PIDNamespace}) }, false, true},
		{"PID 1's pid namespace", func(s *Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, Namespace{Type: PIDNamespace, Path: "/proc/1/ns/pid"})
		}, true, true},
		{"another's pid namespace", func(s *Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, Namespace{Type: PIDNamespace, Path: "/proc/4242/ns/pid"})
		}, false, true},
		{"no capabilities member", func(s *Spec) { delete(s.Process.Rest, "capabilities") }, true, false},
		{"containerd's default capabilities", func(s *Spec) {
			s.Process.Rest = caps([]string{"CAP_CHOWN", "CAP_KILL"}, []string{"CAP_CHOWN", "CAP_KILL"})
		}, true, false},
		{"CAP_SYS_BOOT bounding only", func(s *Spec) { s.Process.Rest = caps(boot, []string{"CAP_CHOWN"}) }, true, false},
		{"CAP_SYS_BOOT added", func(s *Spec) { s.Process.Rest = caps(boot, boot) }, true, true},
		{"a user namespace of its own", func(s *Spec) { s.Linux.Namespaces = append(s.Linux.Namespaces, Namespace{Type: UserNamespace}) }, true, false},
		{"not root", func(s *Spec) { s.Process.User.UID = 1000 }, true, false},
		{"not root, CAP_SYS_BOOT ambient", func(s *Spec) {
			s.Process.User.UID = 1000
			raw, _ := json.Marshal(map[string][]string{"bounding": boot, "effective": boot, "permitted": boot, "inheritable": boot, "ambient": boot})
			s.Process.Rest = Rest{"capabilities": raw}
		}, true, true},
		{"the host's user namespace", func(s *Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, Namespace{Type: UserNamespace, Path: "/proc/1/ns/user"})
		}, true, true},
	}
	for _, tc := range cases {
		name := "reboot"
		if tc.name == "cni-volumes" {
			name = "cni-volumes"
		}
		in := readCase(t, name).input(t)
		if tc.edit != nil {
			tc.edit(&in.Spec)
		}
		if got := HostPID(in.Spec); got != tc.hostPID {
			t.Errorf("%s: HostPID = %v, want %v", tc.name, got, tc.hostPID)
		}
		if got := CanBoot(in.Spec); got != tc.canBoot {
			t.Errorf("%s: CanBoot = %v, want %v", tc.name, got, tc.canBoot)
		}
		// What Plan keeps, a container planned from it has too.
		out, err := Plan(in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// The plan runs as the action's user, or, where that is its
		// image's, as the user image's USER (cni-volumes': 1000:1000),
		// which, not root, has no capability after its exec.
		if HostPID(out) != tc.hostPID || CanBoot(out) != (tc.canBoot && out.Process.User.UID == in.Spec.Process.User.UID) {
			t.Errorf("%s: the plan's HostPID %v, CanBoot %v (uid %d); want the action's, CAP_SYS_BOOT for root alone", tc.name, HostPID(out), CanBoot(out), out.Process.User.UID)
		}
	}
}
