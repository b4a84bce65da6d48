package phase

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/engine"
)

// TestOneDownRunRefused: a run that must take the machine down
// (WAITDAEMON_DOWN_WITHIN) from an action outside the host's pid
// namespace, or without CAP_SYS_BOOT, is bad input naming what to set,
// before anything is made; the dry run and plan --container say the
// same. Without WAITDAEMON_DOWN_WITHIN the action may be anything.
func TestOneDownRunRefused(t *testing.T) {
	cases := []struct {
		name             string
		hostPID, canBoot bool
		want             string // "" for a hand-off
	}{
		{"private pid", false, true, "WAITDAEMON_DOWN_WITHIN=\"30\": expected an action that shares the host's pid namespace, to take the machine down: set `pid: host` on the action"},
		{"private pid and no CAP_SYS_BOOT", false, false, "set `pid: host` on the action"},
		{"no CAP_SYS_BOOT", true, false, "WAITDAEMON_DOWN_WITHIN=\"30\": expected an action that holds CAP_SYS_BOOT, to take the machine down: make it privileged"},
		{"host pid and CAP_SYS_BOOT", true, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, dry := range []string{"false", "true"} {
				eng := newFake()
				eng.Action.HostPID, eng.Action.CanBoot = tc.hostPID, tc.canBoot
				_, _, err := phaseOne(t, eng, "IMAGE=reboot:1", "WAITDAEMON_DOWN_WITHIN=30", `WAITDAEMON_FALLBACK_COMMAND=["reboot","-f"]`, "WAITDAEMON_DRY_RUN="+dry)
				if tc.want == "" {
					if err != nil {
						t.Errorf("dry run %s: %v; want the hand-off", dry, err)
					}
					continue
				}
				if exitCode(err) != engine.ExitInput || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("dry run %s: error %v (exit %d); want exit %d and %q", dry, err, exitCode(err), engine.ExitInput, tc.want)
				}
				for _, c := range eng.Calls() {
					if !strings.HasPrefix(c, "Reach") && !strings.HasPrefix(c, "Self") {
						t.Errorf("dry run %s: phase 1 went on to %s", dry, c)
					}
				}
			}
			// Without WAITDAEMON_DOWN_WITHIN, nothing is asked of the
			// action.
			eng := newFake()
			eng.Action.HostPID, eng.Action.CanBoot = tc.hostPID, tc.canBoot
			if _, _, err := phaseOne(t, eng, "IMAGE=reboot:1"); err != nil {
				t.Errorf("without WAITDAEMON_DOWN_WITHIN: %v", err)
			}
			// plan --container reads the same from the container's env.
			eng = newFake()
			eng.Action.HostPID, eng.Action.CanBoot = tc.hostPID, tc.canBoot
			eng.Action.Env = []string{"IMAGE=reboot:1", "WAITDAEMON_DOWN_WITHIN=30"}
			err := Plan(context.Background(), eng, "act", Options{Stdout: &bytes.Buffer{}})
			if tc.want == "" && err != nil || tc.want != "" && (exitCode(err) != engine.ExitInput || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("plan --container: %v; want %q", err, tc.want)
			}
		})
	}
}

// TestOneDownRunNotRoot: a run that must take the machine down is
// refused, with exit 2, when the user container or the fallback, as
// made, runs as a user other than root (its image's USER, where the
// action set none): such a process has no effective capabilities after
// its exec, and reboot(2) fails. The message names the setting, the
// container and its user, and what is expected; what phase 1 made is
// removed. A root user, or none, is handed off.
func TestOneDownRunNotRoot(t *testing.T) {
	fallback := []string{"WAITDAEMON_FALLBACK_IMAGE=fallback:1", `WAITDAEMON_FALLBACK_COMMAND=["reboot","-f"]`}
	cases := []struct {
		name  string
		users map[string]string
		want  string // "" for a hand-off
	}{
		{"the user image's USER", map[string]string{"reboot:1": "1000"},
			`WAITDAEMON_DOWN_WITHIN="30": expected a user container that runs as root, to take the machine down: act-waitdaemon-user (reboot:1) runs as user "1000"`},
		{"the fallback image's USER", map[string]string{"fallback:1": "nobody:nogroup"},
			`WAITDAEMON_DOWN_WITHIN="30": expected a fallback container that runs as root, to take the machine down: act-waitdaemon-fallback (fallback:1) runs as user "nobody:nogroup"`},
		{"root by name and number", map[string]string{"reboot:1": "root", "fallback:1": "0:0"}, ""},
		{"no USER", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng := newFake()
			eng.Images["fallback:1"] = true
			eng.Action.HostPID, eng.Action.CanBoot = true, true
			eng.Users = tc.users
			_, _, err := phaseOne(t, eng, append([]string{"IMAGE=reboot:1", "WAITDAEMON_DOWN_WITHIN=30"}, fallback...)...)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("%v; want the hand-off", err)
				}
				return
			}
			if exitCode(err) != engine.ExitInput || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "no effective capabilities") {
				t.Fatalf("error %v (exit %d); want exit %d and %q, saying why", err, exitCode(err), engine.ExitInput, tc.want)
			}
			if names := eng.Names(); len(names) != 0 {
				t.Errorf("left behind: %q; want what phase 1 made removed", names)
			}
		})
	}
}
