package e2e

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/phase"
)

// maxLate is how far the waiter's start request may be from the action's
// exit plus WAIT_SECONDS.
const maxLate = 150 * time.Millisecond

// TestInheritance runs actions shaped like real workers' and checks what
// the user container received, the timing of its start, and that nothing
// is left behind.
func TestInheritance(t *testing.T) {
	onDockerAPIs(t, testInheritance)
}

func testInheritance(t *testing.T, c *dockerapi.Client) {
	e := engineOf(c)
	hostname, _ := os.Hostname()
	cases := []struct {
		name  string
		shape shape
		a     action
		// checks on the probe's report
		wantArgs     []string
		wantHostname string // "" means: not the host's
		hostNet      bool
		hostPid      bool
		foundBy      string
		cgroupns     bool // only where the engine honours a private cgroup namespace
	}{
		{
			// Privileged, as real workers always are, where the engine
			// can start it here.
			name:  "tink-worker reboot-like, flags in the command",
			shape: tinkWorker,
			a: action{
				name:       "e2e worker",
				command:    []string{"--help", "version", "-v"},
				env:        map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "1", "FOO": "bar baz", "PROBE_NAME": "p"},
				pid:        "host",
				privileged: e.privileged,
			},
			wantArgs: []string{"/probe", "--help", "version", "-v"},
			hostPid:  true,
			foundBy:  "cgroup",
		},
		{
			name:  "tink-agent with network host",
			shape: tinkAgent,
			a: action{
				name:    "e2e agent",
				command: []string{"reboot"},
				env:     map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "1", "FOO": "bar baz", "PROBE_NAME": "p"},
				pid:     "host",
				network: "host",
			},
			wantArgs:     []string{"/probe", "reboot"},
			wantHostname: hostname,
			hostNet:      true,
			hostPid:      true,
			foundBy:      "cgroup",
		},
		{
			name:  "custom hostname, empty command",
			shape: dockerAPI,
			a: action{
				name:     "e2e hostname",
				env:      map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "1", "FOO": "bar baz", "PROBE_NAME": "p"},
				hostname: "custom-e2e",
			},
			wantArgs:     []string{"/probe"},
			wantHostname: "custom-e2e",
			foundBy:      "cgroup",
		},
		{
			name:  "private cgroup namespace, found through mountinfo",
			shape: tinkWorker,
			a: action{
				name:     "e2e cgroupns",
				command:  []string{"reboot"},
				env:      map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "1", "FOO": "bar baz", "PROBE_NAME": "p"},
				cgroupns: "private",
			},
			wantArgs: []string{"/probe", "reboot"},
			foundBy:  "mountinfo",
			cgroupns: true,
		},
		{
			name:  "aliases: IMAGE and WAIT_SECONDS belong to the user",
			shape: tinkWorker,
			a: action{
				name:    "e2e aliases",
				command: []string{"x"},
				env: map[string]string{
					"WAITDAEMON_IMAGE": probeImage, "WAITDAEMON_WAIT_SECONDS": "1",
					"IMAGE": "user-value", "WAIT_SECONDS": "user-wait", "FOO": "bar baz", "PROBE_NAME": "p",
				},
			},
			wantArgs: []string{"/probe", "x"},
			foundBy:  "cgroup",
		},
	}
	for _, tc := range cases {
		if tc.cgroupns && !e.cgroupns {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			tc.a.volumes = []string{out + ":/out"}
			r := runAction(t, c, tc.shape, tc.a)
			if r.ExitCode != 0 {
				t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
			}
			handed, ok := find(events(r.Logs), "handed off")
			if !ok {
				t.Fatalf("phase 1 logged no hand-off line:\n%s", r.Logs)
			}
			if handed.str("found_by") != tc.foundBy {
				t.Errorf("found own container by %q, want %q", handed.str("found_by"), tc.foundBy)
			}
			evs := followWaiter(t, c, r.ID)
			started, ok1 := find(evs, "started user container")
			exited, ok2 := find(evs, "user container exited")
			if !ok1 || !ok2 {
				t.Fatalf("waiter output lacks the start or the exit: %v", evs)
			}
			checkTiming(t, r, started, exited, 1)
			if exited.num("exit_code") != 0 || exited["kept"] != false {
				t.Errorf("user container exit: %v, want 0 and removed", exited)
			}
			waitGone(t, rigOf(c), r.ID, 5*time.Second)

			p, ok := readProbe(t, out, "p")
			if !ok {
				t.Fatal("the user container did not run: no probe report")
			}
			if !slices.Equal(p.Args, tc.wantArgs) {
				t.Errorf("user command = %q, want %q", p.Args, tc.wantArgs)
			}
			wantEnv := []string{"FOO=bar baz", "PROBE_NAME=p", "PATH=/probe-bin:/usr/bin"}
			if _, alias := tc.a.env["WAITDAEMON_IMAGE"]; alias {
				wantEnv = append(wantEnv, "IMAGE=user-value", "WAIT_SECONDS=user-wait")
			}
			// Exactly the action's variables and the image's PATH, besides
			// what the runtime itself sets in every container (with the
			// user container's own values) and a Tty's TERM.
			var gotEnv []string
			seen := map[string]bool{}
			for _, kv := range p.Env {
				name, value, _ := strings.Cut(kv, "=")
				if seen[name] {
					t.Errorf("user env has %s more than once: %q", name, p.Env)
				}
				seen[name] = true
				switch {
				case name == "HOSTNAME" && value != p.Hostname:
					// Copied from the action's inspect, it would name the
					// action container (Podman puts it in Config.Env).
					t.Errorf("user env has %s, but the user container's hostname is %q: the action's HOSTNAME was copied", kv, p.Hostname)
				case slices.Contains(e.runtimeEnv, name), name == "TERM" && (tc.shape == tinkWorker || e.name == "podman"):
				default:
					gotEnv = append(gotEnv, kv)
				}
			}
			slices.Sort(gotEnv)
			slices.Sort(wantEnv)
			if !slices.Equal(gotEnv, wantEnv) {
				t.Errorf("user env = %q (less the runtime's %q and TERM), want exactly %q", gotEnv, e.runtimeEnv, wantEnv)
			}
			for _, kv := range p.Env {
				name, _, _ := strings.Cut(kv, "=")
				leaked := strings.HasPrefix(name, "WAITDAEMON_") || strings.HasPrefix(kv, "PATH=/usr/local/sbin")
				if _, alias := tc.a.env["WAITDAEMON_IMAGE"]; !alias && (name == "IMAGE" || name == "WAIT_SECONDS") {
					leaked = true
				}
				if leaked {
					t.Errorf("user env has %s, which is waitdaemon's", kv)
				}
			}
			// Exactly the action's volumes, besides the runtime's own mounts.
			wantMounts := []string{"/out", "/var/run/docker.sock"}
			if tc.shape == tinkWorker {
				wantMounts = append(wantMounts, "/workflow")
			}
			var gotMounts []string
			for _, m := range p.Mounts {
				runtime := m == "/" || m == "/etc/resolv.conf" || m == "/etc/hostname" || m == "/etc/hosts" || slices.Contains(e.runtimeMounts, m)
				for _, dir := range []string{"/proc", "/sys", "/dev"} {
					runtime = runtime || m == dir || strings.HasPrefix(m, dir+"/")
				}
				if !runtime {
					gotMounts = append(gotMounts, m)
				}
			}
			slices.Sort(gotMounts)
			slices.Sort(wantMounts)
			if !slices.Equal(gotMounts, wantMounts) {
				t.Errorf("user mounts = %q (less the runtime's), want exactly %q", gotMounts, wantMounts)
			}
			if got := p.Namespaces["pid"] == hostNamespace(t, "pid"); got != tc.hostPid {
				t.Errorf("user pid namespace is the host's: %v, want %v", got, tc.hostPid)
			}
			if got := p.Namespaces["net"] == hostNamespace(t, "net"); got != tc.hostNet {
				t.Errorf("user network namespace is the host's: %v, want %v", got, tc.hostNet)
			}
			// Privileged exactly when the worker made the action so:
			// every capability of the host's, and its devices.
			if full := p.CapEff == hostCapBnd(t) && p.Devices > 10; full != r.Privileged {
				t.Errorf("user capabilities %s and %d devices (privileged: %v), want the action's (privileged: %v)", p.CapEff, p.Devices, full, r.Privileged)
			}
			if tc.wantHostname != "" && p.Hostname != tc.wantHostname {
				t.Errorf("user hostname = %q, want %q", p.Hostname, tc.wantHostname)
			}
			if tc.wantHostname == "" && p.Hostname == hostname {
				t.Errorf("user hostname is the host's, %q, on a network of its own", p.Hostname)
			}
		})
	}
}

// checkTiming checks that the waiter counted the wait from the worker's
// removal of the action container (after its exit, within a look of the
// removal) and sent the start request wait seconds after that, within
// maxLate, and logs the engine's own start time, which comes on top.
func checkTiming(t *testing.T, r ran, started, exited map[string]any, wait int) {
	t.Helper()
	sent, err := time.Parse(time.RFC3339Nano, started["start_sent"].(string))
	if err != nil {
		t.Fatalf("start_sent: %v", err)
	}
	from, err := time.Parse(time.RFC3339Nano, started["counted_from"].(string))
	if err != nil {
		t.Fatalf("counted_from: %v", err)
	}
	if from.Before(r.FinishedAt) || from.After(r.Removed.Add(maxLate+100*time.Millisecond)) {
		t.Errorf("the wait counted from %v, want after the action's exit at %v and within a look (100 ms) and %v of its removal at %v", from, r.FinishedAt, maxLate, r.Removed)
	}
	late := sent.Sub(from) - time.Duration(wait)*time.Second
	userStarted, _ := time.Parse(time.RFC3339Nano, exited["started_at"].(string))
	engineLate := userStarted.Sub(from) - time.Duration(wait)*time.Second
	t.Logf("removed %v after the exit; start request sent %v after removal + WAIT_SECONDS; the user container started %v after it (engine)", from.Sub(r.FinishedAt), late, engineLate)
	if math.Abs(float64(late)) > float64(maxLate) {
		t.Errorf("start request sent %v after the action's removal + %ds, want within ±%v", late, wait, maxLate)
	}
	// The engine's own start time comes on top; it only has to follow the
	// request, since a loaded machine can take seconds.
	if engineLate < late || engineLate > late+20*time.Second {
		t.Errorf("the engine started the user container %v after removal + %ds, want after the request (%v) and within 20s of it", engineLate, wait, late)
	}
}

// TestFailingUserContainerIsKept checks that a user container that exits
// non-zero is kept, named and labelled, with the action's settings, and
// that the waiter's result carries its exit code and output.
func TestFailingUserContainerIsKept(t *testing.T) {
	onDockerAPIs(t, func(t *testing.T, c *dockerapi.Client) {
		e := engineOf(c)
		out := t.TempDir()
		r := runAction(t, c, tinkWorker, action{
			name:       "e2e failing",
			command:    []string{"boom"},
			env:        map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "1", "PROBE_EXIT": "3"},
			volumes:    []string{out + ":/out"},
			pid:        "host",
			privileged: e.privileged,
		})
		if r.ExitCode != 0 {
			t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
		}
		name := r.Name + "-waitdaemon-user"
		evs := followWaiter(t, c, r.ID)
		res, ok := find(evs, "result")
		if !ok {
			t.Fatalf("the waiter logged no result: %v", evs)
		}
		attempts, _ := res["attempts"].([]any)
		if len(attempts) != 1 {
			t.Fatalf("result = %v, want one attempt", res)
		}
		first, _ := attempts[0].(map[string]any)
		logTail, _ := first["log_tail"].([]any)
		if res.num("exit_code") != 3 || first["kept"] != true || first["container"] != name ||
			len(logTail) == 0 || logTail[len(logTail)-1] != "probe: exiting 3 as asked" || res.str("action") != r.Name {
			t.Fatalf("result = %v, want exit_code 3, one attempt, kept, named, with the output's tail", res)
		}
		// The image is the user container's Config.Image, as the engine
		// reports it (Podman: the name it resolved the short name to).
		if res.str("image") != e.imageName(probeImage) {
			t.Errorf("result image = %q, want %q", res.str("image"), e.imageName(probeImage))
		}
		ctx := testCtx(t)
		kept, err := c.ContainerInspect(ctx, name)
		if err != nil {
			t.Fatalf("the failed user container was not kept: %v", err)
		}
		if kept.HostConfig.Privileged != r.Privileged || kept.HostConfig.PidMode != "host" {
			t.Errorf("kept container: Privileged %v, PidMode %q; want the action's, %v and host", kept.HostConfig.Privileged, kept.HostConfig.PidMode, r.Privileged)
		}
		if kept.State.ExitCode != 3 || kept.Config.Labels["org.waitdaemon.role"] != "user" || kept.Config.Labels["org.waitdaemon.action-id"] != r.ID {
			t.Errorf("kept container: exit %d, labels %v", kept.State.ExitCode, kept.Config.Labels)
		}
		if err := c.ContainerRemove(ctx, kept.ID, dockerapi.RemoveOptions{Force: true, Volumes: true}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, rigOf(c), r.ID, 5*time.Second)
	})
}

// TestSignals: SIGTERM during the wait cancels (nothing starts, nothing
// is left); after the start it leaves the user container running.
func TestSignals(t *testing.T) {
	onEngines(t, func(t *testing.T, e rig) {
		t.Run("during the wait", func(t *testing.T) {
			out := t.TempDir()
			file := filepath.Join(out, "result.json")
			r := e.run(t, tinkWorker, action{name: "e2e sigterm wait", env: map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "30", "WAITDAEMON_RESULT_FILE": file}, volumes: []string{out + ":/out"}})
			if r.ExitCode != 0 {
				t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
			}
			waiter := findRole(t, e, r.ID, phase.RoleWaiter)
			began := time.Now()
			e.stop(t, waiter)
			if d := time.Since(began); d > 5*time.Second {
				t.Errorf("the waiter took %v to stop, want it to cancel at once", d)
			}
			waitDone(t, e, r.ID, 5*time.Second)
			if _, ran := readProbe(t, out, "probe"); ran {
				t.Error("the user container ran after the waiter was cancelled")
			}
			// The result says so: a file an earlier run left would
			// otherwise go on describing that run.
			if res, data := readOutcome(t, file); res.State != "done" || res.ExitCode != -1 || len(res.Attempts) != 0 || !strings.Contains(data, `"not_started": "cancelled`) {
				t.Errorf("result file %s; want done, exit -1, no attempt, and not_started saying it was cancelled", data)
			}
		})
		t.Run("after the start", func(t *testing.T) {
			r := e.run(t, tinkWorker, action{name: "e2e sigterm run", env: map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "0", "PROBE_SLEEP": "30"}})
			if r.ExitCode != 0 {
				t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
			}
			user := findRole(t, e, r.ID, phase.RoleUser)
			for deadline := time.Now().Add(10 * time.Second); !running(t, e, r.ID, user); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the user container never started")
				}
			}
			waiter := findRole(t, e, r.ID, phase.RoleWaiter)
			e.stop(t, waiter)
			if !running(t, e, r.ID, user) {
				t.Fatal("after SIGTERM to the waiter, the user container no longer runs, want it running")
			}
			for deadline := time.Now().Add(5 * time.Second); running(t, e, r.ID, waiter); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the waiter outlived its SIGTERM")
				}
			}
		})
	})
}

// findRole is the ID of action actionID's container of role, which must
// be there.
func findRole(t *testing.T, e rig, actionID, role string) string {
	t.Helper()
	id := roleOf(t, e, actionID, role)
	if id == "" {
		t.Fatalf("no %s container for action %s", role, actionID[:12])
	}
	return id
}
