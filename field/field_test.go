package field

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
)

// The tools the field needs on the host, and the packages that hold them.
var tools = map[string]string{
	"qemu-system-x86_64": "qemu-system-x86",
	"mmdebstrap":         "mmdebstrap",
	"busybox":            "busybox-static",
	"zstd":               "zstd",
	"cpio":               "cpio",
	"mkfs.ext4":          "e2fsprogs",
	"debugfs":            "e2fsprogs",
	"docker-registry":    "docker-registry",
	"docker":             "docker.io",
}

// The kernel command line of both machines.
const cmdline = "console=ttyS0 quiet panic=0 systemd.show_status=false"

// How long a machine may take to run its action (a TCG boot under load
// takes up to 2 minutes), and, once the action exited, to go down beyond
// its WAIT_SECONDS.
// The engine each machine runs, as the engine says it: CaptainOS's
// containerd, HookOS v0.11's Docker and HookOS v0.9-v0.10's.
var engines = map[string]string{
	"captainos": "containerd 2.2.1+unknown", // go install sets no version
	"hookos":    "docker 28.2.2",
	"hookos26":  "docker 26.1.5+dfsg1", // trixie's docker.io
}

// What the guest's kernel prints when it panics; with panic=0 it then
// hangs, so the run ends there.
const kernelPanic = "Kernel panic - not syncing"

const (
	// From QEMU's start to the action's exit: 1-3 min under TCG, and up
	// to 5 when the Go tests ran beside the suite and loaded both cores
	// (seen: a HookOS boot that had not run its action in 5 min).
	bootTimeout = 8 * time.Minute
	downGrace   = 90 * time.Second
)

// field is what every scenario shares: the images, the registry, the
// runner.
type field struct {
	repo     string
	images   map[string]Image
	registry *Registry
	runner   []byte // tools/tinkagent, static
	// realAgent is field/realagent, static; releases each real release's
	// tink-agent and tink-server (make tink-agents), by release.
	realAgent []byte
	releases  map[tinkagent.Release][2][]byte
	// controlPlane is controlPlaneRelease's whole control plane, the
	// embedded tinkerbell binary (make tink-agents).
	controlPlane string
	busybox      string
	logs         string
	logNames     map[string]int // how many runs each log name has had
}

// Row is one line of the table `make field` prints.
type Row struct {
	Scenario, OS, Want, Outcome string
	// Release is what ran the action: the real agent of a release, or
	// the runner copying one (field.label).
	Release          string
	By               string // the run that took the machine down
	ExitToDown, Wall time.Duration
	// ExitToRemoved and ExitToReport: from the action's exit to the end of
	// the worker's clean-up, and to its report.
	ExitToRemoved, ExitToReport time.Duration
	Note                        string
}

// TestMain kills the VMs of a run that is interrupted.
func TestMain(m *testing.M) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		KillAll()
		os.Exit(1)
	}()
	os.Exit(m.Run())
}

func TestField(t *testing.T) {
	var missing []string
	for tool, pkg := range tools {
		if _, err := exec.LookPath(tool); err != nil && !slices.Contains(missing, pkg) {
			missing = append(missing, pkg)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the field needs QEMU and the tools to build its machines: apt-get install -y qemu-system-x86 mmdebstrap busybox-static zstd cpio e2fsprogs docker-registry docker.io (missing: %v)", missing)
	}
	f := setUp(t)
	scenarios, err := Scenarios(f.repo)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		// make test, the gate: its rows alone.
		scenarios = slices.DeleteFunc(scenarios, func(sc Scenario) bool { return !sc.Gate })
	}
	only := regexp.MustCompile(os.Getenv("FIELD_RUN"))
	all := os.Getenv("FIELD_ALL") != ""
	width, err := machinesAtOnce(os.Getenv("FIELD_PARALLEL"))
	if err != nil {
		t.Fatal(err)
	}
	booting := make(chan struct{}, width)
	// The table keeps the scenarios' order, whichever machine ends first.
	var rows []Row
	var mu sync.Mutex
	ran := 0
	t.Cleanup(func() { printTable(rows) }) // once every row has ended
	for _, sc := range scenarios {
		name := sc.OS + "/" + sc.Name
		if !only.MatchString(name) {
			continue
		}
		if _, ok := f.images[sc.OS]; !ok {
			continue
		}
		i := len(rows)
		rows = append(rows, Row{Scenario: sc.Name, OS: sc.OS, Release: f.rowLabel(sc), Want: sc.Want, Outcome: "-"})
		if sc.Skip != "" && !all {
			rows[i].Note = "left out: " + sc.Skip
			continue
		}
		ran++
		log := f.logName(sc)
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			booting <- struct{}{}
			defer func() { <-booting }()
			row := f.run(t, sc, log)
			mu.Lock()
			rows[i] = row
			mu.Unlock()
		})
	}
	if ran == 0 {
		// A narrowing that matches nothing must not pass as a run.
		t.Fatalf("no row ran: FIELD_RUN=%q matches no OS/scenario of the images built (FIELD_OS=%q); rows are named like %q, with spaces", os.Getenv("FIELD_RUN"), os.Getenv("FIELD_OS"), "hookos/README.md HookOS (Docker) reboot under v0.23+v0.24+v0.25+head")
	}
}

// setUp builds the machines' images (or finds them cached), starts the
// registry and pushes the images the templates name.
func setUp(t *testing.T) *field {
	t.Helper()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := &field{repo: repo, images: map[string]Image{}, logs: os.Getenv("FIELD_LOGS"), logNames: map[string]int{}}
	if f.logs == "" {
		f.logs = filepath.Join(os.TempDir(), "waitdaemon-field")
	}
	if err := os.MkdirAll(f.logs, 0o755); err != nil {
		t.Fatal(err)
	}
	oses := strings.Fields(os.Getenv("FIELD_OS"))
	if len(oses) == 0 {
		oses = []string{"captainos", "hookos", "hookos26"}
		if testing.Short() {
			// make test's rows run on these alone (Scenario.Gate).
			oses = []string{"captainos", "hookos26"}
		}
	}
	for _, name := range oses {
		t.Logf("the %s image: started (built once into the cache, a minute or two; else found there)", name)
		img, took, err := BuildImage(ctx, repo, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the %s image: %s (%.1f s)", name, filepath.Dir(img.Kernel), took.Seconds())
		f.images[name] = img
	}
	if f.busybox, err = exec.LookPath("busybox"); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := func(out, pkg string) {
		t.Helper()
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
		cmd.Dir, cmd.Env = repo, append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	runner := filepath.Join(bin, "tinkagent")
	build(runner, "./tools/tinkagent")
	if f.runner, err = os.ReadFile(runner); err != nil {
		t.Fatal(err)
	}
	// The released agents and their server sides (make tink-agents), and
	// field/realagent, which runs them in the machines: make test-all's.
	// make test's rows (-short) keep the runner, so that the gate builds
	// nothing of Tinkerbell's.
	if !testing.Short() {
		f.loadReleases(t, bin, build)
	}
	f.setUpImages(t, repo, bin, build)
	return f
}

// loadReleases builds field/realagent and reads each real release's
// tink-agent and tink-server, building them first if the cache lacks
// them (scripts/tinkerbell.sh).
func (f *field) loadReleases(t *testing.T, bin string, build func(out, pkg string)) {
	t.Helper()
	var err error
	realAgent := filepath.Join(bin, "realagent")
	build(realAgent, "./field/realagent")
	if f.realAgent, err = os.ReadFile(realAgent); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(f.repo, "scripts/tinkerbell.sh"))
	cmd.Env = append(os.Environ(), "EMBEDDED=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("building Tinkerbell's releases (make tink-agents, scripts/tinkerbell.sh; it needs the Go module proxy): %v\n%s", err, out)
	}
	f.releases = map[tinkagent.Release][2][]byte{}
	for r, v := range realVersions {
		dir := ""
		for _, d := range strings.Fields(string(out)) {
			if filepath.Base(d) == "tinkerbell-"+v {
				dir = d
			}
		}
		agent, err1 := os.ReadFile(filepath.Join(dir, "tink-agent"))
		server, err2 := os.ReadFile(filepath.Join(dir, "tink-server"))
		if dir == "" || err1 != nil || err2 != nil {
			t.Fatalf("tink-agent %s and its server side in %q: %v, %v (make tink-agents builds them)", v, dir, err1, err2)
		}
		f.releases[r] = [2][]byte{agent, server}
		if r == controlPlaneRelease {
			f.controlPlane = filepath.Join(dir, "tinkerbell-embedded")
			if _, err := os.Stat(f.controlPlane); err != nil {
				t.Fatalf("%s's whole control plane: %v (make tink-agents builds it)", v, err)
			}
		}
	}
}

// rowLabel is what runs sc's action here: label's, and the whole control
// plane for a control-plane row.
func (f *field) rowLabel(sc Scenario) string {
	if sc.ControlPlane {
		return f.label(sc.Release) + " + control plane"
	}
	return f.label(sc.Release)
}

// label is what runs a row's action here: the release's real agent where
// this run has it, else the runner copying the release.
func (f *field) label(r tinkagent.Release) string {
	if _, ok := f.releases[r]; ok {
		return releaseLabel(r)
	}
	return "runner " + string(r)
}

// setUpImages builds the images the templates name, starts the registry
// and pushes them there.
func (f *field) setUpImages(t *testing.T, repo, bin string, build func(out, pkg string)) {
	t.Helper()
	var err error
	// The images: waitdaemon's (make image), the kexec action, and an
	// alpine stand-in, busybox with its applets linked.
	// Into a directory of its own: the end-to-end tests may build theirs in
	// bin/ at the same time.
	if out, err := exec.Command("make", "-C", repo, "image", "IMAGE=waitdaemon:field", "BIN="+filepath.Join(bin, "image")).CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	kexecDir := filepath.Join(bin, "kexec")
	build(filepath.Join(kexecDir, "kexec"), "./field/kexec")
	copyFile(t, filepath.Join(repo, "field/kexec/Dockerfile"), filepath.Join(kexecDir, "Dockerfile"))
	dockerBuild(t, kexecDir, "waitdaemon-field-kexec:latest")
	alpineDir := filepath.Join(bin, "alpine")
	if err := os.MkdirAll(filepath.Join(alpineDir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, f.busybox, filepath.Join(alpineDir, "bin/busybox"))
	for _, applet := range []string{"sh", "reboot", "poweroff", "halt", "kill", "sleep", "cat", "echo", "ls", "mount", "sync"} {
		if err := os.Symlink("busybox", filepath.Join(alpineDir, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(alpineDir, "Dockerfile"), []byte("FROM scratch\nCOPY bin /bin\nENV PATH=/bin\nCMD [\"/bin/sh\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dockerBuild(t, alpineDir, "waitdaemon-field-alpine:3.20")

	if f.registry, err = StartRegistry(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.registry.Stop)
	for local, name := range map[string]string{
		"waitdaemon:field":              "waitdaemon:latest",
		"waitdaemon-field-kexec:latest": "kexec:latest",
		"waitdaemon-field-alpine:3.20":  "alpine:3.20",
	} {
		if err := f.registry.Push(context.Background(), local, name); err != nil {
			t.Fatal(err)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

func dockerBuild(t *testing.T, dir, tag string) {
	t.Helper()
	cmd := exec.Command("docker", "build", "-q", "-t", tag, dir)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker build %s: %v\n%s", tag, err, out)
	}
}

// The guest's side: /field/run waits for the engine, runs the action
// with the runner as tink-agent would, or with a release's real
// tink-agent (RUNNER=/field/realagent), and says on the console how it
// went.
const runScript = `#!/bin/sh
. /field/env
echo "FIELD-BOOTED pid1=$(cat /proc/1/comm) hostname=$(hostname) etc-hostname=$(cat /etc/hostname 2>/dev/null || echo none) cgroup=$(stat -fc %T /sys/fs/cgroup) boot_id=$(cat /proc/sys/kernel/random/boot_id)"
n=0
until ip -4 addr show scope global | grep -q inet; do
	sleep 0.5
	n=$((n+1))
	[ $n = 120 ] && { echo "FIELD-NO-ADDRESS"; ip addr; }
done
n=0
if [ "$RUNTIME" = containerd ]; then
	until ctr version >/dev/null 2>&1; do
		sleep 0.5
		n=$((n+1))
		[ $n = 120 ] && { echo "FIELD-ENGINE-DOWN"; systemctl status containerd --no-pager | tail -20; }
	done
	echo "FIELD-ENGINE-UP containerd $(ctr version | awk '/^Server/ {s=1} s && /Version:/ {print $2; exit}')"
else
	until docker version >/dev/null 2>&1; do
		sleep 0.5
		n=$((n+1))
		[ $n = 240 ] && { echo "FIELD-ENGINE-DOWN"; tail -20 /var/log/dockerd.log; }
	done
	echo "FIELD-ENGINE-UP docker $(docker version --format '{{.Server.Version}}')"
fi
if [ -n "$MOUNT_TARGET" ]; then
	mkdir -p /mnt/target && mount /dev/sda1 /mnt/target || echo "FIELD-MOUNT-FAILED"
fi
if [ "$RUNTIME" = containerd ] && [ "$RELEASE" != head ]; then
	# v0.23 to v0.25 pull with containerd's default resolver, HTTPS for
	# the field's plain-HTTP registry: the action's image is there
	# beforehand, as an HTTPS registry or a baked-in image would have it.
	PRELOAD="$(sed -n 's/^[ -]*image: *//p' /field/action.yaml | head -1) $PRELOAD"
fi
for img in $PRELOAD; do
	if [ "$RUNTIME" = containerd ]; then
		ctr -n tinkerbell images pull --hosts-dir /etc/containerd/certs.d "$img" >/dev/null
	else
		docker pull -q "$img" >/dev/null
	fi
	if [ $? = 0 ]; then
		echo "FIELD-PRELOADED $img"
	else
		echo "FIELD-PRELOAD-FAILED $img"
	fi
done
if [ -n "$SLOW_DEVICE" ]; then
	# The target disk's partition behind device-mapper's delay target:
	# each read and write of /dev/dm-0 waits SLOW_DEVICE ms. (udev's
	# /dev/mapper/slow is a link, which no worker gives an action.)
	if dmsetup create slow --table "0 $(cat /sys/class/block/sda1/size) delay /dev/sda1 0 $SLOW_DEVICE" && [ -b /dev/dm-0 ] && [ "$(cat /sys/block/dm-0/dm/name)" = slow ]; then
		echo "FIELD-SLOW-DEVICE /dev/dm-0 $(dmsetup table slow)"
	else
		echo "FIELD-SLOW-DEVICE-FAILED"
	fi
fi
echo "FIELD-CLOCK $(date +%s.%N)"
# The waiter's lines, on the console as it writes them, each after
# FIELD-WAITER: which run took the machine down is read from them. The
# waiter is watched for from before the action runs, and followed from
# its creation (a docker CLI started after the action's exit came, under
# TCG, after HookOS's shutdown had begun): containerd's task log of it, or
# docker logs. On systemd the follower is a unit of its own that the way
# down does not stop (no default dependencies, so no conflict with
# shutdown.target): in the runner's service, it was stopped with it at the
# reboot's first step, under load before it printed the line that the
# waiter wrote just before.
if [ "$RUNTIME" = containerd ]; then
	cat >/run/field-follow <<'FOLLOW'
until w=$(find /var/lib/containerd/io.containerd.grpc.v2.task -path '*-waitdaemon-waiter*' -name log 2>/dev/null | head -1); [ -n "$w" ]; do sleep 0.5; done
tail -n +1 -F "$w" 2>/dev/null | sed -u 's/^/FIELD-WAITER /' >/dev/ttyS0
FOLLOW
	systemd-run --quiet --collect --unit=field-follow -p DefaultDependencies=no /bin/sh /run/field-follow || echo "FIELD-FOLLOW-FAILED"
else
	(
		until w=$(docker ps -a --filter name=-waitdaemon-waiter --format '{{.Names}}' 2>/dev/null | head -1); [ -n "$w" ]; do sleep 3; done
		docker logs -f "$w" 2>&1 | sed -u 's/^/FIELD-WAITER /'
	) &
fi
echo FIELD-RUNNING
if [ -x /field/bootkit ]; then
	RUNNER=$RUNNER /field/bootkit $RUNNER_FLAGS -release "$RELEASE"
else
	${RUNNER:-/field/tinkagent} $RUNNER_FLAGS -runtime "$RUNTIME" -socket "$SOCKET" -release "$RELEASE" -action /field/action.yaml
fi
echo "FIELD-RUNNER-EXIT $?"
if [ "$RUNTIME" = containerd ]; then
	echo "FIELD-CONTAINERS $(ctr -n tinkerbell containers list -q | tr '\n' ' ')"
	for c in $(ctr -n tinkerbell containers list -q); do
		echo "FIELD-DEVICES $c: $(ctr -n tinkerbell containers info "$c" | grep -o '"path": "/dev/sd[^"]*"' | tr '\n' ' ')"
	done
	echo "FIELD-HOST-DEVICES $(ls /dev/sd* 2>&1 | tr '\n' ' ')"
	# The task log files, which CaptainOS's rsyslog forwards.
	(
		for t in 15 30 45; do
			sleep 15
			for f in $(find /var/lib/containerd/io.containerd.grpc.v2.task -name log); do
				sed "s|^|FIELD-TASKLOG $t $(basename "$(dirname "$f")" | cut -c1-60): |" "$f"
			done
		done
	) &
	if [ -n "$WATCH_LEFT" ]; then
		# What is left once the waiter has ended (its container stays).
		(
			n=0
			while ctr -n tinkerbell tasks list 2>/dev/null | grep -- '-waitdaemon-waiter.*RUNNING' >/dev/null && [ $n -lt 75 ]; do
				sleep 2
				n=$((n+1))
			done
			echo "FIELD-LEFT $(ctr -n tinkerbell containers list -q | tr '\n' ' ')"
		) &
	fi
	wait # the service's end would kill it
else
	echo "FIELD-CONTAINERS $(docker ps -a --format '{{.Names}}:{{.Status}}' | tr '\n' ' ')"
	if [ -n "$WATCH_LEFT" ]; then
		# What is left once the waiter has ended (and removed itself).
		(
			n=0
			while [ -n "$(docker ps -q --filter name=-waitdaemon-waiter)" ] && [ $n -lt 75 ]; do
				sleep 2
				n=$((n+1))
			done
			echo "FIELD-LEFT $(docker ps -a --format '{{.Names}}:{{.State}}' | tr '\n' ' ')"
		) &
	fi
	wait
fi
`

var actionLine = regexp.MustCompile(`\{"msg":"action (exited|timed out)".*\}`)

// logName names the file of f.logs that keeps sc's console: two
// templates under one heading, with one action name, keep a log each.
func (f *field) logName(sc Scenario) string {
	base := strings.NewReplacer(" ", "_", "/", "_", "(", "", ")", "", ",", "").Replace(sc.OS + "_" + sc.Name)
	f.logNames[base]++
	if n := f.logNames[base]; n > 1 {
		base += fmt.Sprintf("_%d", n)
	}
	return base + ".log"
}

// machinesAtOnce is how many machines boot at once, FIELD_PARALLEL's
// number: 2 unless set, one for each core of the machines this suite is
// run on, since each takes a core under TCG.
func machinesAtOnce(s string) (int, error) {
	if s == "" {
		return 2, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("FIELD_PARALLEL=%q: want how many machines boot at once, a whole number from 1", s)
	}
	return n, nil
}

// run boots sc's machine, runs its action, and watches it go down; its
// console goes to logName in f.logs.
func (f *field) run(t *testing.T, sc Scenario, logName string) Row {
	row := Row{Scenario: sc.Name, OS: sc.OS, Want: sc.Want, Release: f.rowLabel(sc)}
	t.Logf("booting %s for %s", sc.OS, sc.Name)
	img := f.images[sc.OS]
	// Not t.TempDir(): QEMU's options take no commas in a path.
	dir, err := os.MkdirTemp("", "waitdaemon-field-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	env := "RUNTIME=docker\nSOCKET=/var/run/docker.sock\n"
	if sc.OS == "captainos" {
		// CNI, as tink-agent sets it up on CaptainOS.
		env = "RUNTIME=containerd\nSOCKET=/run/containerd/containerd.sock\nRUNNER_FLAGS=-cni\n"
	}
	if sc.MountTarget {
		env += "MOUNT_TARGET=1\n"
	}
	env += "RELEASE=" + string(sc.Release) + "\n"
	real, isReal := f.releases[sc.Release]
	if isReal {
		// The release's real tink-agent, fed over gRPC by its own server
		// side on the machine's loopback.
		env += "RUNNER=/field/realagent\n"
	}
	if len(sc.Preload) > 0 {
		env += "PRELOAD='" + strings.Join(sc.Preload, " ") + "'\n"
	}
	if sc.KillAfterCreate {
		env += "WATCH_LEFT=1\n"
	}
	if sc.Slow > 0 {
		env += fmt.Sprintf("SLOW_DEVICE=%d\n", sc.Slow)
	}
	forwards := []Forward{{Guest: 5017, Host: f.registry.Port}}
	var cp *ControlPlane
	if sc.ControlPlane {
		if !isReal || f.controlPlane == "" {
			t.Fatalf("%s: a control-plane row needs %s's real agent and its whole control plane (make tink-agents; make test-all)", sc.Name, sc.Release)
		}
		// The whole control plane on the host, in a network namespace
		// of its own; the agent in the machine reaches its tink-server
		// through a guestfwd into it.
		cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Minute)
		began := time.Now()
		cp, err = StartControlPlane(cctx, f.controlPlane, dir)
		ccancel()
		if err != nil {
			t.Fatal(err)
		}
		defer cp.Stop()
		agentID := "field-" + sc.OS
		pctx, pcancel := context.WithCancel(context.Background())
		defer pcancel()
		if err := cp.Provision(pctx, agentID, sc.Action); err != nil {
			t.Fatalf("%v (the control plane's log: %s)", err, filepath.Join(dir, "tinkerbell.log"))
		}
		t.Logf("%s's whole control plane ready and provisioned in %.1f s", realVersions[sc.Release], time.Since(began).Seconds())
		forwards = append(forwards, Forward{Guest: TinkServerPort, Host: TinkServerPort, Netns: cp.Netns})
		flags := fmt.Sprintf("-grpc-server %s:%d -id %s", GuestForwardAddr, TinkServerPort, agentID)
		if strings.Contains(env, "RUNNER_FLAGS=-cni\n") {
			flags += " -cni"
			env = strings.Replace(env, "RUNNER_FLAGS=-cni\n", "", 1)
		}
		env += "RUNNER_FLAGS='" + flags + "'\n"
	}
	m := Machine{
		Kernel: img.Kernel, Initrd: img.Initrd, Append: cmdline,
		Forwards: forwards,
		Extra: []File{
			{Name: "field", Mode: modeDir | 0o755},
			{Name: "field/run", Mode: 0o755, Data: []byte(runScript)},
			{Name: "field/env", Mode: 0o644, Data: []byte(env)},
			{Name: "field/action.yaml", Mode: 0o644, Data: []byte(sc.Action)},
			{Name: "field/tinkagent", Mode: 0o755, Data: f.runner},
		},
	}
	if isReal {
		m.Extra = append(m.Extra,
			File{Name: "field/realagent", Mode: 0o755, Data: f.realAgent},
			File{Name: "field/tink-agent", Mode: 0o755, Data: real[0]},
			File{Name: "field/tink-server", Mode: 0o755, Data: real[1]})
	}
	if isHookOS(sc.OS) {
		m.Extra = append(m.Extra, File{Name: "field/bootkit", Mode: 0o755, Data: []byte(bootkitScript)})
	}
	if sc.Disk {
		m.Disk = filepath.Join(dir, "disk.img")
		if err := MakeTargetDisk(m.Disk, img.Kernel, f.busybox, img.NextBoot); err != nil {
			t.Fatal(err)
		}
	}
	logPath := filepath.Join(f.logs, logName)
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	m.Log = log
	fmt.Fprintf(log, "# %s on %s\n%s\n", sc.Name, sc.OS, sc.Action)

	start := time.Now()
	vm, err := m.Boot(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Kill()
	row.Note = vm.Accel
	fail := func(format string, a ...any) Row {
		t.Helper()
		t.Errorf("%s on %s: %s\nconsole (%s), last lines:\n%s", sc.Name, sc.OS, fmt.Sprintf(format, a...), logPath, consoleTail(vm, 40))
		if row.Outcome == "" {
			row.Outcome = "error"
		}
		row.Wall = time.Since(start)
		return row
	}

	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	exit, _, err := vm.WaitLine(ctx, 0, func(s string) bool { return actionLine.MatchString(s) || strings.Contains(s, kernelPanic) })
	if err != nil {
		return fail("no action exit within %v: %v", bootTimeout, err)
	}
	if strings.Contains(exit.Text, kernelPanic) {
		return fail("the guest's kernel panicked before the action exited (%s)", vm.Accel)
	}
	var ended struct {
		Msg       string
		ExitCode  int       `json:"exit_code"`
		At        time.Time `json:"at"`
		RemovedAt time.Time `json:"removed_at"`
	}
	_ = json.Unmarshal([]byte(actionLine.FindString(exit.Text)), &ended)
	// The action's exit, on the host's clock: the runner reports it only
	// after the container's removal, seconds later under TCG, so take its
	// "at" and the guest clock's offset, which FIELD-CLOCK gave.
	exitAt, removedAt := exit.At, exit.At
	if offset, ok := clockOffset(vm.Lines()); ok && !ended.At.IsZero() {
		exitAt = ended.At.Add(offset)
		if !ended.RemovedAt.IsZero() {
			removedAt = ended.RemovedAt.Add(offset)
		}
	}
	// The report window's parts: the action's exit, the worker's
	// clean-up done (what it removes before it reports), the report
	// (the runner's line, on the host's clock).
	row.ExitToRemoved, row.ExitToReport = removedAt.Sub(exitAt), exit.At.Sub(exitAt)
	t.Logf("%s under %s: %s, exit code %d, %.1f s after QEMU started; removed %.2f s later, reported %.2f s after the exit", sc.OS, sc.Release, ended.Msg, ended.ExitCode, exitAt.Sub(start).Seconds(), row.ExitToRemoved.Seconds(), row.ExitToReport.Seconds())
	if got := engineUp(vm); got != engines[sc.OS] {
		return fail("the machine runs %q; want %q", got, engines[sc.OS])
	}
	var killed KillTiming
	if sc.KillAfterCreate {
		if err := prepared(vm); err != nil {
			return fail("%v", err)
		}
		killedAt, err := KilledAt(vm.Lines())
		if err != nil {
			return fail("%v", err)
		}
		if killed, err = KilledWaiting(vm.Lines(), killedAt); err != nil {
			return fail("%v", err)
		}
		t.Logf("%s", killed.Note())
	}
	if sc.OS == "captainos" {
		hostNet, err := onHostNetwork(sc.Action, sc.Release)
		if err != nil {
			return fail("%v", err)
		}
		teardown, err := CheckCaptainOS(vm.Lines(), hostNet, exit.At)
		if err != nil {
			return fail("%v", err)
		}
		t.Logf("CaptainOS as shipped; the action on the host's network: %v; its CNI network taken down in %v, before the report", hostNet, teardown)
	}

	if sc.Want != StayedUp && (ended.Msg != "action exited" || ended.ExitCode != 0) {
		return fail("the action did not succeed: %s, exit code %d", ended.Msg, ended.ExitCode)
	}
	window := time.Duration(sc.Wait)*time.Second + downGrace
	dctx, dcancel := context.WithTimeout(context.Background(), window)
	defer dcancel()
	down, err := vm.WaitDown(dctx)
	row.Wall = time.Since(start)
	switch {
	case err == context.DeadlineExceeded:
		row.Outcome = StayedUp
	case err != nil:
		return fail("%v", err)
	case down.Reason == "guest-reset":
		row.Outcome = Reset
	case down.Reason == "guest-shutdown":
		row.Outcome = Shutdown
		for _, l := range vm.Lines() {
			if l.At.After(exit.At) && SecondKernel(l.Text) {
				row.Outcome = Kexec
			}
		}
	default:
		row.Outcome = down.Reason
	}
	if row.Outcome != StayedUp {
		row.ExitToDown = down.At.Sub(exitAt)
	}
	vm.Kill()
	if cp != nil {
		// The report is the control plane's: the Workflow's SUCCESS, as
		// its status said it, before the machine went down.
		succeeded, err := cp.Succeeded()
		if err != nil {
			return fail("%v", err)
		}
		if row.Outcome != StayedUp && !succeeded.Before(down.At) {
			return fail("the Workflow's SUCCESS was read %.2f s after the machine went down", succeeded.Sub(down.At).Seconds())
		}
		row.ExitToReport = succeeded.Sub(exitAt)
		t.Logf("the Workflow's states: %+v", cp.States())
	}
	if sc.KillAfterCreate {
		row.Note += ", " + killed.Note()
		left, err := NothingStarted(vm.Lines())
		if err != nil {
			return fail("%v", err)
		}
		t.Logf("nothing started; left once the waiter ended: %v", left)
	}
	if row.Outcome != sc.Want {
		return fail("want %s, got %s (%s, exit code %d)", sc.Want, row.Outcome, ended.Msg, ended.ExitCode)
	}
	if isHookOS(sc.OS) {
		if err := CheckHookOS(vm.Lines(), sc.Want); err != nil {
			return fail("%v", err)
		}
	}
	if sc.Want == StayedUp && ended.Msg != "action timed out" {
		return fail("want the action timed out, got %s, exit code %d", ended.Msg, ended.ExitCode)
	}
	if sc.Want != StayedUp && row.ExitToDown < time.Duration(sc.Wait)*time.Second {
		return fail("down %.1f s after the action's exit, before its WAIT_SECONDS=%d", row.ExitToDown.Seconds(), sc.Wait)
	}
	var data []byte
	if sc.Result != "" {
		if data, err = f.nextBoot(t, vm, m, row.Outcome, sc.Result, dir); err != nil {
			return fail("%v", err)
		}
		t.Logf("%s, as the next boot read it: %s", sc.Result, data)
	}
	if sc.KillAfterCreate && sc.Result != "" {
		if err := NotStarted(data); err != nil {
			return fail("%v", err)
		}
	}
	if row.By, err = tookDown(sc, row.Outcome, vm, data); err != nil {
		return fail("%v", err)
	}
	if err := checkBy(sc, row, vm); err != nil {
		return fail("%v", err)
	}
	if err := checkBootFacts(sc.OS, vm); err != nil {
		return fail("%v", err)
	}
	return row
}

// tookDown says which run took the machine down (none if it stayed up):
// from the result file
// the next boot read when there is one, which the waiter's lines on the
// console must not contradict, else from those lines.
func tookDown(sc Scenario, outcome string, vm *VM, result []byte) (string, error) {
	if outcome == StayedUp {
		return ByNothing, nil
	}
	var lines []string
	for _, l := range vm.Lines() {
		lines = append(lines, l.Text)
	}
	byLines := TookDown(lines, sc.Retries, sc.Fallback)
	if result == nil {
		return byLines, nil
	}
	byFile, err := ByResult(result)
	if err != nil {
		return "", err
	}
	// A run whose first line lost the race with the machine's end leaves
	// the console with nothing: only a different run contradicts.
	if byLines != byFile && byLines != ByNothing {
		return "", fmt.Errorf("the result file says the %s took the machine down, the waiter's lines on the console the %s", byFile, byLines)
	}
	return byFile, nil
}

// checkBy checks that the run that should take the machine down did, and
// within its bounds: with WAITDAEMON_DOWN_WITHIN, the template's own
// command before WAIT_SECONDS + DOWN_WITHIN had passed since the action's
// exit (else the fallback would have started); HookOS's init after
// LinuxKit's 5 s grace, its shutdown run to its end.
func checkBy(sc Scenario, row Row, vm *VM) error {
	if row.By != sc.By {
		return fmt.Errorf("the machine was taken down by %s; want %s", row.By, sc.By)
	}
	if row.By == ByCommand && sc.DownWithin > 0 && row.ExitToDown >= time.Duration(sc.Wait+sc.DownWithin)*time.Second {
		return fmt.Errorf("down %.1f s after the action's exit, not before its WAIT_SECONDS + WAITDAEMON_DOWN_WITHIN (%d s)", row.ExitToDown.Seconds(), sc.Wait+sc.DownWithin)
	}
	if sc.InitShutdown && row.By == ByCommand {
		if min := time.Duration(sc.Wait+LinuxKitGrace) * time.Second; row.ExitToDown < min {
			return fmt.Errorf("down %.1f s after the action's exit, before WAIT_SECONDS + LinuxKit's %d s grace (%.0f s)", row.ExitToDown.Seconds(), LinuxKitGrace, min.Seconds())
		}
		if !slices.ContainsFunc(vm.Lines(), func(l Line) bool { return strings.HasPrefix(l.Text, ShutdownLine) }) {
			return fmt.Errorf("HookOS's shutdown did not run to its end: no %s line", ShutdownLine)
		}
	}
	return nil
}

// The facts each machine prints at boot (FIELD-BOOTED), as the OS it
// stands for has them: CaptainOS's systemd with no /etc/hostname and
// the hostname systemd falls back to; HookOS's init (busybox's, as
// LinuxKit's, whose comm is init), the hostname its rcS sets; cgroup v2
// on both.
var bootFacts = map[string]map[string]string{
	"captainos": {"pid1": "systemd", "hostname": "localhost", "etc-hostname": "none", "cgroup": "cgroup2fs"},
	"hookos":    {"pid1": "init", "hostname": "hookos", "etc-hostname": "none", "cgroup": "cgroup2fs"},
	"hookos26":  {"pid1": "init", "hostname": "hookos", "etc-hostname": "none", "cgroup": "cgroup2fs"},
}

// bootedLine is the FIELD-BOOTED line's facts.
func bootedLine(vm *VM) map[string]string {
	facts := map[string]string{}
	for _, l := range vm.Lines() {
		// systemd's terminal resets may come before it on the line.
		if i := strings.Index(l.Text, "FIELD-BOOTED "); i >= 0 {
			rest := l.Text[i+len("FIELD-BOOTED "):]
			for _, kv := range strings.Fields(rest) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					facts[k] = v
				}
			}
			break
		}
	}
	return facts
}

// checkBootFacts compares the facts os's machine printed at boot with
// bootFacts.
func checkBootFacts(os string, vm *VM) error {
	got := bootedLine(vm)
	for k, want := range bootFacts[os] {
		if got[k] != want {
			return fmt.Errorf("the machine booted with %s=%q; want %q, as %s has it (FIELD-BOOTED: %v)", k, got[k], want, os, got)
		}
	}
	return nil
}

// nextBoot is the result file the next boot read from the target disk:
// after a kexec, the second kernel's initrd, in the same machine; after a
// reset or a shutdown, the same initrd booted again on the same disk.
// The file's boot ID must be the boot's that wrote it, and not the next
// boot's.
func (f *field) nextBoot(t *testing.T, first *VM, m Machine, outcome, name, dir string) ([]byte, error) {
	vm := first
	if outcome != Kexec {
		next := Machine{Kernel: m.Kernel, Initrd: NextBootInitrd(m.Disk), Append: cmdline + " field.boot=next", Disk: m.Disk, Log: m.Log}
		if m.Log != nil {
			fmt.Fprintf(m.Log, "# the next boot\n")
		}
		var err error
		ndir := filepath.Join(dir, "next")
		if err := os.MkdirAll(ndir, 0o755); err != nil {
			return nil, err
		}
		if vm, err = next.Boot(context.Background(), ndir); err != nil {
			return nil, err
		}
		defer vm.Kill()
		ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
		defer cancel()
		if _, err := vm.WaitDown(ctx); err != nil {
			return nil, fmt.Errorf("the next boot did not end: %v\n%s", err, consoleTail(vm, 20))
		}
	}
	wrote := bootedLine(first)["boot_id"]
	read, data, err := NextBootRead(vm.Lines(), name)
	if err != nil {
		return nil, fmt.Errorf("%v; the next boot's console:\n%s", err, consoleTail(vm, 20))
	}
	var r fileResult
	if err := decodeFirst(string(data), &r); err != nil {
		return nil, fmt.Errorf("the result file the next boot read: %w", err)
	}
	switch {
	case wrote == "" || r.BootID != wrote:
		return nil, fmt.Errorf("the result file's boot_id %q; want the boot's that wrote it, %q", r.BootID, wrote)
	case r.BootID == read:
		return nil, fmt.Errorf("the result file's boot_id %q is the next boot's own", r.BootID)
	}
	t.Logf("the next boot (%s) read %s, written in boot %s", read, name, wrote)
	return data, nil
}

// engineUp is the engine and version the guest's FIELD-ENGINE-UP line
// names.
func engineUp(vm *VM) string {
	for _, l := range vm.Lines() {
		if rest, ok := strings.CutPrefix(l.Text, "FIELD-ENGINE-UP"); ok {
			return strings.TrimSpace(rest)
		}
	}
	return "no engine"
}

// clockOffset is the host's clock less the guest's, from the FIELD-CLOCK
// line: the guest's time when it wrote it, the host's when it came.
func clockOffset(lines []Line) (time.Duration, bool) {
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l.Text, "FIELD-CLOCK "); ok {
			secs, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				return 0, false
			}
			guest := time.Unix(0, int64(secs*1e9))
			return l.At.Sub(guest), true
		}
	}
	return 0, false
}

func consoleTail(vm *VM, n int) string {
	lines := vm.Lines()
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "  %s\n", l.Text)
	}
	return b.String()
}

func printTable(rows []Row) {
	if len(rows) == 0 {
		return
	}
	fmt.Printf("\n%-58s %-10s %-11s %-9s %-9s %-8s %12s %11s %10s %8s  %s\n", "scenario", "os", "release", "want", "outcome", "by", "exit→removed", "exit→report", "exit→down", "wall", "note")
	for _, r := range rows {
		e2d := "-"
		if r.ExitToDown > 0 {
			e2d = fmt.Sprintf("%.1f s", r.ExitToDown.Seconds())
		}
		wall := "-"
		if r.Wall > 0 {
			wall = fmt.Sprintf("%.0f s", r.Wall.Seconds())
		}
		rm, rp := "-", "-"
		if r.ExitToReport > 0 {
			rm, rp = fmt.Sprintf("%.2f s", r.ExitToRemoved.Seconds()), fmt.Sprintf("%.2f s", r.ExitToReport.Seconds())
		}
		by := r.By
		if by == "" {
			by = "-"
		}
		fmt.Printf("%-58s %-10s %-11s %-9s %-9s %-8s %12s %11s %10s %8s  %s\n", r.Scenario, r.OS, r.Release, r.Want, r.Outcome, by, rm, rp, e2d, wall, r.Note)
	}
}
