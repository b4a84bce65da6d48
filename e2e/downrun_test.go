package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestDownRunRefused: a run that must take the machine down
// (WAITDAEMON_DOWN_WITHIN) from an action that could not fails at once,
// exit 2, naming what to set, and leaves nothing: one without the host's
// pid namespace (no `pid: host`), in a real run and in a dry run, and one
// without CAP_SYS_BOOT (Docker: not privileged, SYS_BOOT not added;
// containerd: the capabilities of a spec that is not privileged); and,
// from a privileged action, one whose user container, made, runs as its
// image's USER, not root, which has no capability after its exec.
func TestDownRunRefused(t *testing.T) {
	onEngines(t, func(t *testing.T, e rig) {
		env := func(dry string) map[string]string {
			return map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "0", "WAITDAEMON_DOWN_WITHIN": "30",
				"WAITDAEMON_FALLBACK_COMMAND": `["reboot","-f"]`, "WAITDAEMON_DRY_RUN": dry}
		}
		check := func(t *testing.T, r ran, want string) {
			t.Helper()
			if r.ExitCode != 2 || !strings.Contains(r.Logs, want) || strings.Contains(r.Logs, "cleaning up") {
				t.Errorf("exit %d, output:\n%s\nwant exit 2, %q, and nothing to clean up", r.ExitCode, r.Logs, want)
			}
			waitGone(t, e, r.ID, time.Second)
		}
		noPID := "WAITDAEMON_DOWN_WITHIN=\"30\": expected an action that shares the host's pid namespace, to take the machine down: set `pid: host` on the action"
		for _, dry := range []string{"false", "true"} {
			t.Run("no pid host, dry run "+dry, func(t *testing.T) {
				check(t, e.run(t, tinkAgent, action{name: "e2e down no pid " + dry, command: []string{"reboot"}, env: env(dry)}), noPID)
			})
		}
		t.Run("no CAP_SYS_BOOT", func(t *testing.T) {
			a := action{name: "e2e down no boot", command: []string{"reboot"}, pid: "host", env: env("false")}
			var r ran
			switch rg := e.(type) {
			case dockerRig:
				r = rg.run(t, dockerAPI, a) // not privileged, no capability added
			case containerdRig:
				rg.spec = func(s []byte) []byte { return confine(t, s) }
				r = rg.run(t, tinkAgent, a)
			default:
				t.Fatalf("no unprivileged action for %T", e)
			}
			check(t, r, `WAITDAEMON_DOWN_WITHIN="30": expected an action that holds CAP_SYS_BOOT, to take the machine down`)
		})
		t.Run("the user image's USER not root", func(t *testing.T) {
			buildUserImages(t)
			switch row := e.row(); {
			case row.containerd:
				importImages(t, probeUIDImage)
			case row.name != "docker":
				if out, err := exec.Command("sh", "-c", "docker save "+probeUIDImage+" | docker -H unix://"+e.(dockerRig).c.SocketPath()+" load -q").CombinedOutput(); err != nil {
					t.Fatalf("loading %s: %v\n%s", probeUIDImage, err, out)
				}
			}
			env := env("false")
			image := e.row().imageName(probeUIDImage) // Podman's load names it localhost/…
			env["IMAGE"] = image
			r := e.run(t, tinkAgent, action{name: "e2e down not root", command: []string{"reboot"}, pid: "host", env: env})
			check(t, r, `WAITDAEMON_DOWN_WITHIN="30": expected a user container that runs as root, to take the machine down: `)
			if want := "(" + image + `) runs as user "65532`; !strings.Contains(r.Logs, want) {
				t.Errorf("output:\n%s\nwant it to name the image and its user: %q", r.Logs, want)
			}
		})
	})
}
