package e2e

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/containerd"
	"github.com/waitdaemon/waitdaemon/engine/containerd/ocispec"
	"github.com/waitdaemon/waitdaemon/phase"
	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
)

// The test containerd (`make containerd`) and its ctr, in the cache
// scripts/containerd.sh builds it into (ENGINES_CACHE: no WAITDAEMON_
// name, which an action would refuse as a variable it does not know).
const containerdSocket = "/run/containerd-test/containerd.sock"

var ctrBinary = filepath.Join(cmp.Or(os.Getenv("ENGINES_CACHE"), "/var/cache/waitdaemon"), "containerd-v2.2.1", "ctr")

// containerdNS is the namespace the tests run actions in on the test
// containerd: tink-agent's, tinkerbell, under the default tag, and
// tinkerbell-TAG under another. A waiter removes the stopped waiters of
// the whole namespace, and the tests remove images from it: two
// checkouts that test at once each have one of their own.
var containerdNS = namespaceFor(e2eTag)

func namespaceFor(tag string) string {
	if tag == "e2e" {
		return "tinkerbell"
	}
	return "tinkerbell-" + tag
}

// requireContainerd returns a client for the test containerd, or fails
// the test saying how to start one.
func requireContainerd(t *testing.T) *containerdapi.Client {
	t.Helper()
	c := &containerdapi.Client{Socket: containerdSocket, Namespace: containerdNS, WaitForEngine: 2 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Version(ctx); err != nil {
		t.Fatalf("this test needs the test containerd on %s, and none answers: %v\nstart it with `make containerd`", containerdSocket, err)
	}
	return c
}

// importImages copies Docker images into the test containerd's
// namespace, unpacked, as docker.io/library/NAME:TAG.
func importImages(t *testing.T, images ...string) {
	t.Helper()
	importImagesTo(t, containerdNS, "", images...)
}

// importImagesTo copies Docker images into namespace ns, unpacked in
// snapshotter (empty: ctr's default).
func importImagesTo(t *testing.T, ns, snapshotter string, images ...string) {
	t.Helper()
	save := exec.Command("docker", append([]string{"save"}, images...)...)
	args := []string{"-a", containerdSocket, "-n", ns, "images", "import", "-"}
	if snapshotter != "" {
		// The Transfer service unpacks to the configured snapshotter alone.
		args = slices.Insert(args, len(args)-1, "--local", "--snapshotter", snapshotter)
	}
	imp := exec.Command(ctrBinary, args...)
	pipe, err := save.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	imp.Stdin = pipe
	var out strings.Builder
	imp.Stdout, imp.Stderr = &out, &out
	if err := save.Start(); err != nil {
		t.Fatal(err)
	}
	if err := imp.Run(); err != nil {
		t.Fatalf("importing %v into containerd: %v\n%s", images, err, out.String())
	}
	if err := save.Wait(); err != nil {
		t.Fatalf("docker save %v: %v", images, err)
	}
}

// cdAction is one action run on the test containerd.
type cdAction struct {
	name    string   // nerdctl/name, tinkerbell_<name>_<action ID>
	args    []string // the action's command
	env     []string // the action's environment, besides PATH
	volumes [][2]string
	// socket, when set, is a host directory bound at /run/containerd in
	// place of the test containerd's socket: the action (and its waiter,
	// which binds the socket's directory) reach the daemon through
	// whatever listens there, if anything does yet.
	socket  string
	private bool   // pid and network namespaces of its own, else the host's pid namespace
	network string // namespaces.network, unless private
	dryRun  bool   // WAITDAEMON_DRY_RUN: no hand-off, no result
	fails   bool   // phase 1 fails: no hand-off
	result  string // WAITDAEMON_RESULT_FILE; empty: one in a new directory
	// resultWait bounds the wait for the result file after the hand-off;
	// zero means a minute.
	resultWait time.Duration
}

// cdRun is what became of it.
type cdRun struct {
	id     string // the action container's
	spec   ocispec.Spec
	exit   uint32 // its exit status
	phase1 string // its output
	result phase2Result
}

// phase2Result is the result file, in part.
type phase2Result struct {
	ExitCode int `json:"exit_code"`
	Attempts []struct {
		Container string   `json:"container"`
		ExitCode  int      `json:"exit_code"`
		LogTail   []string `json:"log_tail"`
		Kept      bool     `json:"kept"`
	} `json:"attempts"`
}

// runCDAction runs a as tink-agent does (package tinkagent), with the
// socket as a volume and /etc files from a temporary directory; wait,
// start, and after an exit 0, the task then the container deleted at
// once. It waits for the waiter's result file.
func runCDAction(t *testing.T, ctx context.Context, c *containerdapi.Client, eng *containerd.Engine, actionImg string, a cdAction) cdRun {
	t.Helper()
	result := cmp.Or(a.result, filepath.Join(t.TempDir(), "result.json"))
	env := append([]string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"WAITDAEMON_RESULT_FILE=" + result,
	}, a.env...)
	if a.dryRun {
		env = append(env, "WAITDAEMON_DRY_RUN=true")
	}
	socket := [2]string{containerdSocket, containerdapi.DefaultSocket}
	if a.socket != "" {
		socket = [2]string{a.socket, filepath.Dir(containerdapi.DefaultSocket)}
	}
	e := containerdRig{c: c, eng: eng, actionImg: actionImg}
	pid, network := "host", a.network
	if a.private {
		pid, network = "", ""
	}
	ctr := e.create(t, ctx, cdAgentAction(a.name, a.args, env, append([][2]string{socket}, a.volumes...), pid, network))
	exit := e.agentRun(t, ctx, ctr)
	id := ctr.ID
	r := cdRun{id: id, phase1: exit.Output, exit: uint32(exit.ExitCode), spec: specOf(t, ctx, c, id)}
	// The agent, after the exit: the task, then, after an exit 0, the
	// container.
	if err := ctr.Finish(ctx, exit); err != nil {
		t.Fatal(err)
	}
	if a.fails {
		if exit.ExitCode == 0 {
			t.Fatalf("the action exited 0, want a failure; its output:\n%s", r.phase1)
		}
		return r
	}
	if a.dryRun {
		if exit.ExitCode != 0 {
			t.Fatalf("the dry run exited %d, want 0; its output:\n%s", exit.ExitCode, r.phase1)
		}
		return r
	}
	if exit.ExitCode != 0 || !strings.Contains(r.phase1, `"msg":"handed off"`) {
		t.Fatalf("the action exited %d, want 0 and the hand-off; its output:\n%s", exit.ExitCode, r.phase1)
	}

	deadline := time.Now().Add(cmp.Or(a.resultWait, time.Minute))
	for {
		if data, done := resultDone(result); done && json.Unmarshal(data, &r.result) == nil {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("no result file after %v; phase 1 said:\n%s", cmp.Or(a.resultWait, time.Minute), r.phase1)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestContainerdEngine runs actions on the test containerd the way
// tink-agent does, with waitdaemon's image as the action's and the probe
// as IMAGE. An action that succeeds: phase 1 finds itself by its cgroup,
// hands off and exits 0; the agent deletes the action; the waiter runs
// the probe, which must see the action's env, volumes and namespaces, and
// writes the result file; the fallback, never started, is removed with
// its created task; nothing but the stopped waiter is left, and no
// output file of the user container or the fallback. Then another action,
// whose phase 1 removes the first's stopped waiter, and whose user
// container fails, and is re-run once: it is kept, with its output; and
// the next run of that action keeps it out of the way (under its own ID),
// removes the earlier waiter, and runs its own.
func TestContainerdEngine(t *testing.T) {
	c, eng, actionImg := setupContainerd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	user := "IMAGE=docker.io/library/" + probeImage

	out := t.TempDir()
	name1 := "tinkerbell_cd-e2e_01JE2E" + randomHex(10)
	r := runCDAction(t, ctx, c, eng, actionImg, cdAction{
		name: name1, args: []string{"--probe-arg", "two words"},
		env:     []string{user, "WAIT_SECONDS=1", "PROBE_DIR=/out", "PROBE_NAME=user", "OPERATOR_SETTING=kept", `WAITDAEMON_FALLBACK_COMMAND=["--exit=9"]`},
		volumes: [][2]string{{out, "/out"}},
	})
	if !strings.Contains(r.phase1, `"found_by":"cgroup"`) {
		t.Errorf("phase 1 did not find itself by its cgroup:\n%s", r.phase1)
	}
	if r.result.ExitCode != 0 || len(r.result.Attempts) != 1 || len(r.result.Attempts[0].LogTail) == 0 {
		t.Errorf("result %+v, want one run, exit 0, with the probe's output in the tail", r.result)
	}
	probe, ok := readProbe(t, out, "user")
	if !ok {
		t.Fatal("the probe left no report")
	}
	if !slices.Equal(probe.Args[1:], []string{"--probe-arg", "two words"}) {
		t.Errorf("probe args %q, want the action's command", probe.Args)
	}
	for _, want := range []string{"OPERATOR_SETTING=kept", "PROBE_DIR=/out"} {
		if !slices.Contains(probe.Env, want) {
			t.Errorf("probe env lacks %s: %q", want, probe.Env)
		}
	}
	for _, kv := range probe.Env {
		if strings.HasPrefix(kv, "WAITDAEMON_") || strings.HasPrefix(kv, "IMAGE=") || strings.HasPrefix(kv, "WAIT_SECONDS=") {
			t.Errorf("probe env has waitdaemon's %s", kv)
		}
	}
	// The README's template: the host's pid namespace, and the agent's
	// own network namespace, which goes with the action: the user
	// container gets one of its own.
	if probe.Namespaces["pid"] != hostNamespace(t, "pid") {
		t.Errorf("probe pid namespace %s, want the host's %s, as the action's", probe.Namespaces["pid"], hostNamespace(t, "pid"))
	}
	if probe.Namespaces["net"] == hostNamespace(t, "net") || probe.Namespaces["net"] == "" {
		t.Errorf("probe net namespace %q, want one of its own, as the action has", probe.Namespaces["net"])
	}
	if !slices.Contains(probe.Mounts, "/out") || !slices.Contains(probe.Mounts, containerdapi.DefaultSocket) {
		t.Errorf("probe mounts %q, want the action's volumes", probe.Mounts)
	}
	// Privileged, as the action: every capability the agent has, and
	// the host's devices.
	if want := hostCapBnd(t); probe.CapEff != want || probe.Devices < 10 {
		t.Errorf("probe capabilities %s and %d devices; want the action's, %s and the host's devices", probe.CapEff, probe.Devices, want)
	}
	settled(t, eng, r.id, 30*time.Second, "waiter stopped")
	// Nor the output files of the user container and the fallback: the
	// waiter removed their directories with them.
	for _, role := range []string{phase.RoleUser, phase.RoleFallback} {
		if dirs := logDirs(t, name1, role); len(dirs) != 0 {
			t.Errorf("after a success, the %s container's output is still on the host: %q", role, dirs)
		}
	}

	t.Run("kept failure, then the next run", func(t *testing.T) {
		name := "tinkerbell_cd-kept_01JE2E" + randomHex(10)
		out := t.TempDir()
		// The first action's waiter has stopped, for this one's to sweep.
		settled(t, eng, r.id, 30*time.Second, phase.RoleWaiter+" stopped")
		failed := runCDAction(t, ctx, c, eng, actionImg, cdAction{
			name: name, args: []string{"--exit=3"}, private: true, volumes: [][2]string{{out, "/out"}},
			env: []string{user, "WAIT_SECONDS=0", "WAITDAEMON_RETRIES=1", "WAITDAEMON_LOG_TAIL=200", "PROBE_DIR=/out", "PROBE_NAME=failed"},
		})
		// This other action's waiter removed the first action's stopped
		// waiter (containerd has no auto-remove), and its output
		// directory, which only a waiter sees.
		settled(t, eng, r.id, 30*time.Second)
		if dirs, _ := filepath.Glob(filepath.Join(containerd.DefaultLogDir, name1+"-*")); len(dirs) != 0 {
			t.Errorf("the first action's output directories are still on the host: %q", dirs)
		}
		// The agent's default namespaces: the user container gets its
		// own pid and network namespaces too.
		if probe, ok := readProbe(t, out, "failed"); !ok || probe.Namespaces["pid"] == hostNamespace(t, "pid") || probe.Namespaces["net"] == hostNamespace(t, "net") {
			t.Errorf("the probe of a private action: %+v, want its own pid and network namespaces", probe.Namespaces)
		}
		a := failed.result.Attempts
		if failed.result.ExitCode != 3 || len(a) != 2 || !a[1].Kept {
			t.Fatalf("result %+v, want two runs, exit 3, kept", failed.result)
		}
		// Each run's tail is its own: the probe's report, whose start
		// time it holds once. (Its last words, on stderr, can land
		// before the report: the shim copies the two streams apart.)
		started := map[string]bool{}
		for i, at := range a {
			var own []string
			for _, l := range at.LogTail {
				if strings.Contains(l, `"started"`) {
					own = append(own, l)
				}
			}
			if len(own) != 1 || started[own[0]] {
				t.Errorf("run %d's tail %q, want its own output alone", i+1, at.LogTail)
			}
			started[strings.Join(own, "")] = true
		}
		// Each attempt's user container is kept: the re-run's is a fresh
		// one.
		kept := settled(t, eng, failed.id, 30*time.Second, "user stopped", "user stopped", "waiter stopped")
		for _, k := range kept {
			if out, _ := os.ReadFile(filepath.Join(containerd.DefaultLogDir, k.ID, "log")); k.Labels[phase.LabelRole] == phase.RoleWaiter &&
				!strings.Contains(string(out), "removed another action's stopped waiter") {
				t.Errorf("the second action's waiter did not say it removed the first's:\n%s", out)
			}
		}
		// The kept user container has the action's privileges: its
		// capability sets, devices and device rules, and masked and
		// read-only paths (none: it is privileged).
		for _, k := range kept {
			if k.Labels[phase.LabelRole] != phase.RoleUser {
				continue
			}
			want, got := privileges(failed.spec), privileges(specOf(t, ctx, c, k.ID))
			if !strings.Contains(want["capabilities"], "CAP_SYS_ADMIN") || !strings.Contains(want["resources.devices"], `"allow":true`) {
				t.Errorf("the action is not privileged: %v", want)
			}
			for key := range want {
				if got[key] != want[key] {
					t.Errorf("the user container's %s = %s, want the action's %s", key, got[key], want[key])
				}
			}
		}
		// A kept failure keeps its output file, for the operator.
		for _, k := range kept {
			if k.Labels[phase.LabelRole] != phase.RoleUser {
				continue
			}
			if _, err := os.Stat(filepath.Join(containerd.DefaultLogDir, k.ID, "log")); err != nil {
				t.Errorf("the kept user container's output file: %v, want it on the host", err)
			}
		}
		next := runCDAction(t, ctx, c, eng, actionImg, cdAction{name: name, env: []string{user, "WAIT_SECONDS=0"}})
		if !strings.Contains(next.phase1, "kept an earlier run's container") || !strings.Contains(next.phase1, "removed an earlier run's container") {
			t.Errorf("the next run's phase 1 did not keep the earlier user container and remove its waiter:\n%s", next.phase1)
		}
		if next.result.ExitCode != 0 {
			t.Errorf("the next run's result %+v, want exit 0", next.result)
		}
		still := settled(t, eng, failed.id, 30*time.Second, "user stopped", "user stopped")
		for _, k := range kept {
			if k.Labels[phase.LabelRole] == phase.RoleUser && !slices.ContainsFunc(still, func(s engine.Container) bool { return s.ID == k.ID && s.Name != k.Name }) {
				t.Errorf("the kept user containers are %+v, want %s among them under its own ID, renamed from %s", still, k.ID, k.Name)
			}
		}
		settled(t, eng, next.id, 30*time.Second, "waiter stopped")
	})

	t.Run("the host's network", func(t *testing.T) {
		out := t.TempDir()
		r := runCDAction(t, ctx, c, eng, actionImg, cdAction{
			name: "tinkerbell_cd-hostnet_01JE2E" + randomHex(10), network: "host", volumes: [][2]string{{out, "/out"}},
			env: []string{user, "WAIT_SECONDS=0", "PROBE_DIR=/out", "PROBE_NAME=hostnet"},
		})
		if r.result.ExitCode != 0 {
			t.Fatalf("result %+v, want exit 0", r.result)
		}
		probe, ok := readProbe(t, out, "hostnet")
		if !ok {
			t.Fatal("the probe left no report")
		}
		host, _ := os.Hostname()
		if probe.Namespaces["net"] != hostNamespace(t, "net") || probe.Hostname != host {
			t.Errorf("probe net namespace %s, hostname %q; want the host's, %s and %q", probe.Namespaces["net"], probe.Hostname, hostNamespace(t, "net"), host)
		}
		// This host has all three /etc files: each is bound, and none is
		// the action's, which the agent deleted.
		for _, f := range ocispec.HostFiles {
			if !slices.Contains(probe.Mounts, f) {
				t.Errorf("probe mounts %q lack the host's %s", probe.Mounts, f)
			}
		}
		for _, m := range r.spec.Mounts {
			if slices.Contains(ocispec.HostFiles, m.Destination) && m.Source == m.Destination {
				t.Errorf("the action binds the host's %s, which tink-agent never does: %+v", m.Destination, m)
			}
		}
	})
}

// specOf is the OCI spec of container id.
func specOf(t *testing.T, ctx context.Context, c *containerdapi.Client, id string) ocispec.Spec {
	t.Helper()
	ctr, err := c.ContainerGet(ctx, id)
	if err != nil {
		t.Fatalf("reading container %s: %v", id, err)
	}
	var spec ocispec.Spec
	if err := json.Unmarshal(ctr.Spec.Value, &spec); err != nil {
		t.Fatalf("the spec of container %s: %v", id, err)
	}
	return spec
}

// privileges are the parts of a spec that make a container privileged or
// confine it: its capability sets, no_new_privileges, rlimits, AppArmor
// and SELinux labels, OOM score, devices and device rules, masked and
// read-only paths, seccomp and sysctls, as JSON.
func privileges(s ocispec.Spec) map[string]string {
	out := map[string]string{}
	if s.Process != nil {
		for _, k := range []string{"capabilities", "noNewPrivileges", "rlimits", "apparmorProfile", "selinuxLabel", "oomScoreAdj"} {
			out[k] = string(s.Process.Rest[k])
		}
	}
	if s.Linux != nil {
		for _, k := range []string{"devices", "maskedPaths", "readonlyPaths", "seccomp", "sysctl"} {
			out[k] = string(s.Linux.Rest[k])
		}
		var res struct{ Devices json.RawMessage }
		_ = json.Unmarshal(s.Linux.Rest["resources"], &res)
		out["resources.devices"] = string(res.Devices)
	}
	return out
}

// setupContainerd is the start of a containerd end-to-end test: the test
// containerd, this checkout's action and probe images (built on the
// Docker engine) imported into it, and the engine on it.
func setupContainerd(t *testing.T) (*containerdapi.Client, *containerd.Engine, string) {
	t.Helper()
	onRow(t, "containerd")
	c := requireContainerd(t)
	setup(t)
	actionImg := cmp.Or(os.Getenv("E2E_CONTAINERD_ACTION_IMAGE"), actionImage)
	importImages(t, actionImg, probeImage)
	return c, containerd.New(c), actionImg
}

// TestContainerdDryRun: the dry run prints the plan on containerd, the
// containers' records with their specs, and creates nothing.
func TestContainerdDryRun(t *testing.T) {
	c, eng, actionImg := setupContainerd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := runCDAction(t, ctx, c, eng, actionImg, cdAction{
		name: "tinkerbell_cd-dry_01JE2E" + randomHex(10), dryRun: true, args: []string{"reboot"},
		env: []string{"IMAGE=docker.io/library/" + probeImage, "WAITDAEMON_FALLBACK_COMMAND=[\"sh\"]"},
	})
	start := strings.Index(r.phase1, "{")
	var plan struct {
		FoundBy string `json:"found_by"`
		User    struct {
			Name   string
			Create struct {
				ID     string
				Labels map[string]string
				Spec   struct {
					Process struct{ Args []string }
				}
			}
		} `json:"user_container"`
		Fallback *struct{ Name string } `json:"fallback_container"`
		Waiter   struct {
			Create struct {
				Image string
				Spec  struct {
					Process struct{ Args, Env []string }
				}
			}
		}
	}
	if start < 0 || json.Unmarshal([]byte(r.phase1[start:]), &plan) != nil {
		t.Fatalf("the dry run printed no plan:\n%s", r.phase1)
	}
	if plan.FoundBy != "cgroup" || !strings.HasPrefix(plan.User.Create.ID, plan.User.Name+"-") ||
		plan.User.Create.Labels[containerd.LabelName] != plan.User.Name || !slices.Equal(plan.User.Create.Spec.Process.Args, []string{"/probe", "reboot"}) {
		t.Errorf("the user container's plan: %+v, want its ID from its name, the name in a label, the probe's entrypoint and the action's command", plan.User)
	}
	if plan.Fallback == nil || plan.Waiter.Create.Image != "docker.io/library/"+actionImg || plan.Waiter.Create.Spec.Process.Args[0] != "/waitdaemon" ||
		!slices.Contains(plan.Waiter.Create.Spec.Process.Env, "WAITDAEMON_ENGINE=containerd") {
		t.Errorf("the plan's fallback %+v and waiter %+v, want both, the waiter of waitdaemon's image on containerd", plan.Fallback, plan.Waiter)
	}
	if list, err := eng.List(ctx, phase.LabelActionID, r.id); err != nil || len(list) != 0 {
		t.Errorf("the dry run created %+v, %v; want nothing", list, err)
	}
}

// logDirs are the output directories on the host of the containers of
// role that phase 1 made for the action named action.
func logDirs(t *testing.T, action, role string) []string {
	t.Helper()
	id := containerd.IDFor(action+"-waitdaemon-"+role, "00000000")
	dirs, err := filepath.Glob(filepath.Join(containerd.DefaultLogDir, strings.TrimSuffix(id, "00000000")+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))[:n]
}

// hostCapBnd is this process's capability bounding set, as
// /proc/self/status shows it: what a privileged container gets.
func hostCapBnd(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("no CapBnd in /proc/self/status")
	return ""
}

// TestContainerdSnapshotter: in a namespace whose default snapshotter is
// not overlayfs (its containerd.io/defaults/snapshotter label), where
// tink-agent unpacks the images and makes the action's snapshot, the
// waiter and the user container are made in the action's snapshotter,
// and the user image found there without a pull.
func TestContainerdSnapshotter(t *testing.T) {
	c, _, actionImg := setupContainerd(t)
	ns, snapshotter := "waitdaemon-native-"+e2eTag, "native"
	ctx := testCtx(t)
	ctr := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ctrBinary, append([]string{"-a", containerdSocket}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ctr %q: %v\n%s", args, err, out)
		}
	}
	list, err := c.NamespaceList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list, func(n containerdapi.Namespace) bool { return n.Name == ns }) {
		ctr("namespaces", "create", ns)
	}
	ctr("namespaces", "label", ns, tinkagent.SnapshotterLabel+"="+snapshotter)
	// The images unpacked in that snapshotter alone: removed first, with
	// their snapshots in every snapshotter.
	refs := []string{"docker.io/library/" + actionImg, "docker.io/library/" + probeImage}
	rm := func() {
		_ = exec.Command(ctrBinary, append([]string{"-a", containerdSocket, "-n", ns, "images", "rm", "--sync"}, refs...)...).Run()
	}
	rm()
	importImagesTo(t, ns, snapshotter, actionImg, probeImage)
	t.Cleanup(rm)
	nc := &containerdapi.Client{Socket: containerdSocket, Namespace: ns}
	eng := containerd.New(nc)

	out := t.TempDir()
	a := tinkagent.Action{
		ID: "01JE2E" + strings.ToUpper(randomHex(10)), Name: "native", Image: "docker.io/library/" + actionImg, Args: []string{"reboot"},
		Env:     []string{"IMAGE=docker.io/library/" + probeImage, "WAIT_SECONDS=0", "PROBE_DIR=/out", "PROBE_NAME=native", "WAITDAEMON_PULL_POLICY=never"},
		Volumes: []string{containerdSocket + ":" + containerdapi.DefaultSocket, out + ":/out"}, PID: "host",
	}
	created, err := (&tinkagent.Containerd{C: nc}).Create(ctx, a)
	if err != nil {
		t.Fatalf("agent: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = created.Finish(ctx, tinkagent.Result{ExitCode: -1})
		left, _ := eng.List(ctx, phase.LabelActionID, created.ID)
		for _, l := range left {
			_ = eng.Remove(ctx, l.ID)
			_ = os.RemoveAll(filepath.Join(containerd.DefaultLogDir, l.ID))
		}
		_ = eng.Remove(ctx, created.ID)
	})
	if created.Snapshotter != snapshotter {
		t.Fatalf("the agent made the action in %q, want the namespace's %s", created.Snapshotter, snapshotter)
	}
	res, err := created.Run(ctx)
	if err != nil {
		t.Fatalf("agent: %v", err)
	}
	if err := created.Finish(ctx, res); err != nil {
		t.Fatalf("agent: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("the action exited %d, want 0:\n%s", res.ExitCode, res.Output)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, ok := readProbe(t, out, "native"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the user container did not run in a minute; phase 1 said:\n%s", res.Output)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, l := range settled(t, eng, created.ID, 30*time.Second, phase.RoleWaiter+" stopped") {
		rec, err := nc.ContainerGet(ctx, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Snapshotter != snapshotter {
			t.Errorf("the waiter's snapshotter = %q, want the action's, %s", rec.Snapshotter, snapshotter)
		}
	}
}
