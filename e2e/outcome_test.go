package e2e

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// onDeviceEngines runs f on the engines of the table but Podman: the
// result device's test gives the action the device by a device mapping
// (Docker 20.10 cannot start the privileged actions of real workers),
// which the user container inherits, and Podman 4.3 refuses to create it
// with the mapping its inspect gave ("invalid device mode: ").
func onDeviceEngines(t *testing.T, f func(t *testing.T, r rig)) {
	for _, e := range engines {
		if e.name != "podman" {
			t.Run(e.name, func(t *testing.T) { f(t, openRig(t, e)) })
		}
	}
}

// outcome is the result file, as the README documents it.
type outcome struct {
	Action    string       `json:"action"`
	State     string       `json:"state"`
	ExitCode  int          `json:"exit_code"`
	Note      string       `json:"note"`
	Attempts  []outcomeRun `json:"attempts"`
	Fallback  *outcomeRun  `json:"fallback"`
	BootID    string       `json:"boot_id"`
	WrittenAt string       `json:"written_at"`
}

type outcomeRun struct {
	Attempt  int      `json:"attempt"`
	Image    string   `json:"image"`
	Command  []string `json:"command"`
	ExitCode int      `json:"exit_code"`
	Ended    bool     `json:"ended"`
	Note     string   `json:"note"`
	Kept     bool     `json:"kept"`
}

// readOutcome reads a result file.
func readOutcome(t *testing.T, file string) (outcome, string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("result file: %v", err)
	}
	var o outcome
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatalf("result file: %v\n%s", err, data)
	}
	return o, string(data)
}

// watchOutcome reads the result file every 20 ms until the returned
// func is called, and that func returns each state of the file seen
// while it said a run was under way, in order.
func watchOutcome(t *testing.T, file string) func() []outcome {
	t.Helper()
	stop, seen := make(chan struct{}), make(chan []outcome, 1)
	var once sync.Once
	end := func() { once.Do(func() { close(stop) }) }
	t.Cleanup(end)
	go func() {
		var states []outcome
		last := ""
		for {
			if data, err := os.ReadFile(file); err == nil && string(data) != last {
				last = string(data)
				var o outcome
				if json.Unmarshal(data, &o) == nil && o.State == "running" {
					states = append(states, o)
				}
			}
			select {
			case <-stop:
				seen <- states
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() []outcome { end(); return <-seen }
}

// TestDownWithin: with WAITDAEMON_DOWN_WITHIN=2, an IMAGE whose command
// exits 0 and leaves the machine up is a failed attempt; the fallback
// runs, and the result records both, each with the note. With
// WAIT_SECONDS 0, the result before each run names its image and
// command all the same.
func TestDownWithin(t *testing.T) {
	onEngines(t, func(t *testing.T, e rig) {
		out := t.TempDir()
		running := watchOutcome(t, filepath.Join(out, "result.json"))
		r := e.run(t, tinkAgent, action{
			name:    "e2e down within",
			command: []string{"--exit=0", "reboot"},
			// A run that must take the machine down needs the host's pid
			// namespace.
			pid: "host",
			env: map[string]string{
				"IMAGE": probeImage, "WAIT_SECONDS": "0", "WAITDAEMON_DOWN_WITHIN": "2",
				"WAITDAEMON_FALLBACK_COMMAND": `["--exit=0","fallback"]`,
				"WAITDAEMON_RESULT_FILE":      filepath.Join(out, "result.json"),
			},
			volumes: []string{out + ":/out"},
		})
		if r.ExitCode != 0 {
			t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
		}
		evs := events(e.waiter(t, r.ID))
		if _, ok := find(evs, "result"); !ok {
			t.Fatalf("no result line: %v", evs)
		}
		if _, ok := find(evs, "waiting for the machine to go down"); !ok {
			t.Errorf("no line says the waiter waits for the machine to go down: %v", evs)
		}
		res, data := readOutcome(t, filepath.Join(out, "result.json"))
		note := "did not go down within 2 s"
		if res.State != "done" || res.ExitCode != 0 || res.Note != note || res.BootID == "" || res.Action != r.Name || len(res.Attempts) != 1 || res.Fallback == nil {
			t.Fatalf("result file = %s\nwant one attempt and the fallback, done, exit 0 with the note %q", data, note)
		}
		a, fb := res.Attempts[0], *res.Fallback
		if a.ExitCode != 0 || a.Note != note || !a.Ended || !a.Kept {
			t.Errorf("attempt = %+v; want exit 0, %q, ended, kept", a, note)
		}
		if strings.Join(fb.Command, " ") != "/probe --exit=0 fallback" || fb.ExitCode != 0 || fb.Note != note || !fb.Ended {
			t.Errorf("fallback = %+v; want /probe --exit=0 fallback, exit 0, %q, ended", fb, note)
		}
		if kept := roleOf(t, e, r.ID, "user"); kept == "" || e.exitCode(t, kept) != 0 {
			t.Errorf("the user container that left the machine up was not kept (%q)", kept)
		}
		// Before each run: that run, not ended, named as it then ran.
		var before []outcomeRun
		for _, o := range running() {
			switch {
			case o.Fallback != nil && !o.Fallback.Ended:
				before = append(before, *o.Fallback)
			case len(o.Attempts) > 0 && !o.Attempts[len(o.Attempts)-1].Ended:
				before = append(before, o.Attempts[len(o.Attempts)-1])
			}
		}
		if len(before) != 2 {
			t.Fatalf("the result file said a run was under way before %d runs: %+v; want 2, the attempt and the fallback", len(before), before)
		}
		for i, want := range []outcomeRun{a, fb} {
			if got := before[i]; got.Image == "" || got.Image != want.Image || strings.Join(got.Command, " ") != strings.Join(want.Command, " ") {
				t.Errorf("before run %d, the result file named %q, %q; want %q, %q, as it ran", i+1, got.Image, got.Command, want.Image, want.Command)
			}
		}
	})
}

// loopDisk is an ext4 file system with a /var/log directory, on a loop
// device made for the test and detached after it: a target disk.
func loopDisk(t *testing.T) (image, device string) {
	t.Helper()
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(filepath.Join(tree, "var", "log"), 0o755); err != nil {
		t.Fatal(err)
	}
	image = filepath.Join(dir, "disk.img")
	for _, cmd := range [][]string{{"truncate", "-s", "16M", image}, {"mkfs.ext4", "-q", "-F", "-d", tree, image}} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%q: %v\n%s (mkfs.ext4 is Debian's e2fsprogs)", cmd, err, out)
		}
	}
	out, err := exec.Command("losetup", "--find", "--show", image).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v\n%s (the tests run as root, with the loop module)", err, out)
	}
	device = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", device).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v\n%s", device, err, out)
		}
	})
	return image, device
}

// readDisk reads a file from the file system in image, without mounting
// it.
func readDisk(t *testing.T, image, file string) (string, bool) {
	t.Helper()
	out, err := exec.Command("debugfs", "-R", "cat "+file, image).Output()
	if err != nil || len(out) == 0 {
		return "", false
	}
	return string(out), true
}

// mountedOnHost reports whether device is mounted anywhere on the host.
func mountedOnHost(t *testing.T, device string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/1/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(data), " "+device+" ")
}

// deviceShape runs the result device's actions with the loop device
// mapped in: tink-agent's Docker runtime gives the action every device by
// making it privileged, which Docker 20.10 cannot start here, so Docker's
// rows map the one device as the Docker API allows; on containerd every
// shape is tink-agent's, privileged with the host's devices.
const deviceShape = dockerAPI

// TestResultDevice: with WAITDAEMON_RESULT_DEVICE, the result reaches a
// block device the host has not mounted, as the target disk is in HookOS
// and CaptainOS: the failed attempt and the fallback are there, done,
// with the boot's ID, and the device is left unmounted. A directory the
// device's file system lacks, or a device the action does not see, fails
// the action, exit 2, naming it, and nothing is made.
func TestResultDevice(t *testing.T) {
	onDeviceEngines(t, func(t *testing.T, e rig) {
		image, device := loopDisk(t)
		env := map[string]string{
			"IMAGE": probeImage, "WAIT_SECONDS": "0",
			"WAITDAEMON_FALLBACK_COMMAND": `["--exit=0","fallback"]`,
			"WAITDAEMON_RESULT_DEVICE":    device, "WAITDAEMON_RESULT_FILE": "/var/log/waitdaemon.json",
		}
		r := e.run(t, deviceShape, action{name: "e2e result device", command: []string{"--exit=3"}, env: env, devices: []string{device}})
		if r.ExitCode != 0 {
			t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
		}
		evs := events(e.waiter(t, r.ID))
		if _, ok := find(evs, "result"); !ok {
			t.Fatalf("no result line: %v", evs)
		}
		if mountedOnHost(t, device) {
			t.Errorf("%s is mounted on the host", device)
		}
		data, ok := readDisk(t, image, "/var/log/waitdaemon.json")
		if !ok {
			t.Fatalf("no /var/log/waitdaemon.json on %s; waiter:\n%v", device, evs)
		}
		var res outcome
		if err := json.Unmarshal([]byte(data), &res); err != nil {
			t.Fatalf("result on the device: %v\n%s", err, data)
		}
		boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
		if res.State != "done" || res.ExitCode != 3 || len(res.Attempts) != 1 || !res.Attempts[0].Ended || res.Fallback == nil ||
			res.Fallback.ExitCode != 0 || !res.Fallback.Ended || res.BootID != strings.TrimSpace(string(boot)) {
			t.Errorf("result on the device = %s\nwant done: one attempt exiting 3, the fallback exiting 0, this boot's ID", data)
		}

		t.Run("no such directory", func(t *testing.T) {
			env := maps.Clone(env)
			env["WAITDAEMON_RESULT_FILE"] = "/var/lib/waitdaemon/result.json"
			r := e.run(t, deviceShape, action{name: "e2e result device dir", command: []string{"--exit=0"}, env: env, devices: []string{device}})
			want := `WAITDAEMON_RESULT_FILE="/var/lib/waitdaemon/result.json": expected a file the waiter can write on WAITDAEMON_RESULT_DEVICE=` + device +
				` (the file system on ` + device + ` has no directory /var/lib/waitdaemon)`
			if r.ExitCode != 2 || !strings.Contains(r.Logs, want) {
				t.Errorf("the action exited %d:\n%s\nwant 2, %q", r.ExitCode, r.Logs, want)
			}
			if _, ok := readDisk(t, image, "/var/lib/waitdaemon"); ok {
				t.Error("the directory was made")
			}
			if left := roleOf(t, e, r.ID, "user"); left != "" {
				t.Errorf("the user container %s was left", left)
			}
		})
		t.Run("no file system", func(t *testing.T) {
			blank := filepath.Join(t.TempDir(), "blank.img")
			if out, err := exec.Command("truncate", "-s", "1M", blank).CombinedOutput(); err != nil {
				t.Fatalf("truncate: %v\n%s", err, out)
			}
			out, err := exec.Command("losetup", "--find", "--show", blank).CombinedOutput()
			if err != nil {
				t.Fatalf("losetup: %v\n%s", err, out)
			}
			blankDev := strings.TrimSpace(string(out))
			t.Cleanup(func() { _ = exec.Command("losetup", "-d", blankDev).Run() })
			env := maps.Clone(env)
			env["WAITDAEMON_RESULT_DEVICE"] = blankDev
			r := e.run(t, deviceShape, action{name: "e2e result device blank", command: []string{"--exit=0"}, env: env, devices: []string{blankDev}})
			want := "(mounting " + blankDev + ": no file system this kernel knows is on it (tried "
			if r.ExitCode != 2 || !strings.Contains(r.Logs, want) {
				t.Errorf("the action exited %d:\n%s\nwant 2, %q", r.ExitCode, r.Logs, want)
			}
		})
		t.Run("no such device", func(t *testing.T) {
			env := maps.Clone(env)
			env["WAITDAEMON_RESULT_DEVICE"] = "/dev/waitdaemon-none"
			r := e.run(t, deviceShape, action{name: "e2e result device none", command: []string{"--exit=0"}, env: env})
			want := `WAITDAEMON_RESULT_DEVICE="/dev/waitdaemon-none": expected a block device this action sees`
			if r.ExitCode != 2 || !strings.Contains(r.Logs, want) {
				t.Errorf("the action exited %d:\n%s\nwant 2, %q", r.ExitCode, r.Logs, want)
			}
		})
	})
}
