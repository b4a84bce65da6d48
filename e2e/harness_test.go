package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/testkit/enginetest"
	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
)

// The images the tests build from this checkout, tagged E2E_TAG (default
// e2e): two checkouts that test on one engine at once tag theirs apart.
var (
	e2eTag      = cmp.Or(os.Getenv("E2E_TAG"), "e2e")
	actionImage = "waitdaemon:" + e2eTag
	probeImage  = "waitdaemon-probe:" + e2eTag
)

var buildOnce struct {
	sync.Once
	err error
	out []byte
}

// setup returns a client for the local engine, with this checkout's
// action image and the probe image built.
func setup(t *testing.T) *dockerapi.Client {
	t.Helper()
	c := enginetest.Require(t)
	buildOnce.Do(func() {
		cmd := exec.Command("make", "-C", "..", "image", "probe-image", "IMAGE="+actionImage, "PROBE_IMAGE="+probeImage)
		buildOnce.out, buildOnce.err = cmd.CombinedOutput()
	})
	if buildOnce.err != nil {
		t.Fatalf("building the images: %v\n%s", buildOnce.err, buildOnce.out)
	}
	return c
}

// testEngine is one row of the engine table: an engine every end-to-end
// test runs on, and what it does differently, so that one test body
// serves them all.
type testEngine struct {
	name string
	// setup starts the engine, if the tests start it, and returns a
	// client for its Docker API; containerd has none (openRig).
	setup func(*testing.T) *dockerapi.Client
	// containerd: the test containerd, with actions made as tink-agent's
	// containerd runtime makes them.
	containerd bool
	// keepsWaiter: a successful action leaves its stopped waiter, for
	// the next phase 1 to remove (containerd has no auto-remove).
	keepsWaiter bool
	// streamsApart: a container's stdout and stderr reach its output
	// file each copied on its own (containerd's shim), so their lines can
	// land out of order.
	streamsApart bool
	// plainHTTP: it pulls from the tests' plain-HTTP registry on
	// 127.0.0.1 (Podman only from those its registries.conf names).
	plainHTTP bool
	// tracedAuth is how the verbose trace of a pull shows the registry
	// credentials it sends.
	tracedAuth string
	// privileged: privileged containers start (Podman's, Docker 29's on
	// runc 1.4, 28.2's on runc 1.2.6 and 26.1's on runc 1.1.12 do on these
	// machines; Docker 20.10's cannot: a missing capability).
	privileged bool
	// cgroupns: a private cgroup namespace is honoured (Podman 4.3's
	// compatible API drops it).
	cgroupns bool
	// localhost: images loaded from Docker are named localhost/NAME, and
	// a container's image is reported so.
	localhost bool
	// makesBindSource: it makes a bind mount's missing source, as Podman
	// 4.3's compatible API does, where Docker refuses it.
	makesBindSource bool
	// forgetsFailedStart: a container whose start failed is inspected as
	// one never started (Podman 4.3 keeps no error nor exit code), so the
	// next run of the action removes it rather than keep it.
	forgetsFailedStart bool
	// runtimeEnv are the variables the engine gives every container of
	// its own accord, each with that container's own value.
	runtimeEnv []string
	// runtimeMounts are the mounts it gives every container, besides /,
	// /proc, /sys, /dev and the /etc files.
	runtimeMounts []string
	// gate: the row is one of make test's (go test -short): HookOS's
	// oldest Docker line as Debian ships it, with no build, and
	// CaptainOS's containerd. The others are make test-all's.
	gate bool
}

// allEngines is the engine table.
var allEngines = []testEngine{
	{name: "docker", setup: setup, gate: true, cgroupns: true, plainHTTP: true, tracedAuth: "X-Registry-Auth: <redacted>", runtimeEnv: []string{"HOSTNAME", "HOME"}},
	{name: "docker29", setup: setupDocker29, privileged: true, cgroupns: true, plainHTTP: true, tracedAuth: "X-Registry-Auth: <redacted>", runtimeEnv: []string{"HOSTNAME", "HOME"}},
	{name: "docker28", setup: setupDocker28, privileged: true, cgroupns: true, plainHTTP: true, tracedAuth: "X-Registry-Auth: <redacted>", runtimeEnv: []string{"HOSTNAME", "HOME"}},
	{name: "docker26", setup: setupDocker26, privileged: true, cgroupns: true, plainHTTP: true, tracedAuth: "X-Registry-Auth: <redacted>", runtimeEnv: []string{"HOSTNAME", "HOME"}},
	{name: "podman", setup: setupPodman, privileged: true, localhost: true, makesBindSource: true, forgetsFailedStart: true, runtimeEnv: []string{"HOSTNAME", "HOME", "container"}, runtimeMounts: []string{"/run/.containerenv"}},
	{name: "containerd", containerd: true, gate: true, keepsWaiter: true, streamsApart: true, plainHTTP: true, tracedAuth: `"secret": "<redacted>"`},
}

// engines are the rows the tests run on: the whole table, or those that
// WAITDAEMON_E2E_ENGINES names (comma-separated, like docker28,docker26),
// to run the suite on some engines alone; under go test -short (make
// test, the gate), the gate's rows unless it names others. TestMain sets
// it.
var engines = allEngines

// tableRows is the rows this run of the tests uses: those list names,
// else the gate's under -short, else the whole table.
func tableRows(list string, short bool) ([]testEngine, error) {
	if strings.TrimSpace(list) == "" && short {
		return slices.DeleteFunc(slices.Clone(allEngines), func(e testEngine) bool { return !e.gate }), nil
	}
	return selectEngines(allEngines, list)
}

// onRow runs f if the row named so is among this run's rows; else it
// skips, saying so: for a test of one engine's own ways (Podman's,
// containerd's), which belongs to the runs that have that row. The
// gate's rows are always in make test: there it never skips.
func onRow(t *testing.T, name string) {
	t.Helper()
	if !slices.ContainsFunc(engines, func(e testEngine) bool { return e.name == name }) {
		t.Skipf("the %s row is not in this run (make test-all runs every row; WAITDAEMON_E2E_ENGINES=%s this one)", name, name)
	}
}

// The tests of the whole matrix alone (make test-all) are in files built
// with the tag full (//go:build full), which make test does not build:
// the soak, the release check, the engines restarted under the waiter,
// Podman's own tests. A test in any other file runs in both tiers.

// selectEngines is the rows of table that list names, in the table's
// order; all of them when list is empty. A name that is no row's is an
// error, so that a misspelt list runs nothing rather than everything.
func selectEngines(table []testEngine, list string) ([]testEngine, error) {
	if strings.TrimSpace(list) == "" {
		return table, nil
	}
	var names []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if !slices.ContainsFunc(table, func(e testEngine) bool { return e.name == name }) {
			var all []string
			for _, e := range table {
				all = append(all, e.name)
			}
			return nil, fmt.Errorf("WAITDAEMON_E2E_ENGINES=%q: no engine %q in the table; want a comma-separated list of %s", list, name, strings.Join(all, ", "))
		}
		names = append(names, name)
	}
	return slices.DeleteFunc(slices.Clone(table), func(e testEngine) bool { return !slices.Contains(names, e.name) }), nil
}

// onEngines runs f on every engine of the table.
func onEngines(t *testing.T, f func(t *testing.T, r rig)) {
	onEach(t, func(testEngine) bool { return true }, openRig, f)
}

// onEnginesInTurn runs f on every engine of the table, one after the
// other: for a test that changes what the others read (TestCheckoutsApart
// plays another checkout by its E2E_TAG).
func onEnginesInTurn(t *testing.T, f func(t *testing.T, r rig)) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) { f(t, openRig(t, e)) })
	}
}

// onEach runs f on every engine of the table that which selects, each in
// a subtest, with what open readied for it. The engines are readied one
// at a time; then each subtest goes on beside the others, as many at once
// as go test's -parallel (GOMAXPROCS unless set): the engines are apart
// (a socket, a data root and names of their own), and an action mostly
// waits on its engine.
func onEach[R any](t *testing.T, which func(testEngine) bool, open func(*testing.T, testEngine) R, f func(*testing.T, R)) {
	for _, e := range engines {
		if which(e) {
			t.Run(e.name, func(t *testing.T) {
				r := open(t, e)
				t.Parallel()
				f(t, r)
			})
		}
	}
}

// onPullers runs f on every engine of the table that pulls from the tests'
// registry.
func onPullers(t *testing.T, f func(t *testing.T, r rig)) {
	onEach(t, func(e testEngine) bool { return e.plainHTTP }, openRig, f)
}

// setupDockerAPI readies e's engine and returns a client for its Docker API.
func setupDockerAPI(t *testing.T, e testEngine) *dockerapi.Client { return e.setup(t) }

// onDockerAPIs runs f on every engine of the table that has Docker's API:
// for what the tests read through that API alone (the create request a
// dry run prints, inspected host settings, the engine's own faults).
// TestContainerdEngine and its kin cover the same ground on containerd.
func onDockerAPIs(t *testing.T, f func(t *testing.T, c *dockerapi.Client)) {
	onEach(t, func(e testEngine) bool { return e.setup != nil }, setupDockerAPI, f)
}

// onDockers runs f on every Docker engine of the table: for what the
// tests cannot do on Podman (pull from the tests' plain-HTTP registry,
// which its registries.conf does not name insecure).
func onDockers(t *testing.T, f func(t *testing.T, c *dockerapi.Client)) {
	onEach(t, func(e testEngine) bool { return strings.HasPrefix(e.name, "docker") }, setupDockerAPI, f)
}

// engineOf is the row of the table whose engine c talks to.
func engineOf(c *dockerapi.Client) testEngine {
	if isPodman(c) {
		return engineNamed("podman")
	}
	for name, d := range builtDockers {
		if d.socket != "" && c.SocketPath() == d.socket {
			return engineNamed(name)
		}
	}
	return engineNamed("docker")
}

// engineNamed is the row of the table called name.
func engineNamed(name string) testEngine {
	for _, e := range allEngines {
		if e.name == name {
			return e
		}
	}
	panic("no engine " + name + " in the table")
}

// imageName is how the engine reports an image the tests loaded.
func (e testEngine) imageName(ref string) string {
	if e.localhost {
		return "localhost/" + ref
	}
	return ref
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// shape is how a worker creates an action container.
type shape string

const (
	tinkWorker shape = "tink-worker" // Tty, privileged, /workflow bind, default bridge
	tinkAgent  shape = "tink-agent"  // tink-agent's Docker runtime (package tinkagent)
	// dockerAPI is a container made with the Docker API's fields as the
	// action has them, for settings neither worker makes (a hostname, a
	// cgroup namespace, a log driver): no Tty, sorted env, pid and
	// network from the action.
	dockerAPI shape = "docker-api"
)

// action is one action of a template, as an operator writes it.
type action struct {
	image       string // the action's image (default: this checkout's)
	name        string
	command     []string
	entrypoint  []string // tink-agent's cmd
	env         map[string]string
	volumes     []string
	pid         string
	network     string // tink-agent v0.25 namespaces.network
	hostname    string
	cgroupns    string   // "private" hides the ID from /proc/self/cgroup
	noSocket    bool     // leave out the socket volume
	privileged  bool     // real workers always set it; this machine cannot start it
	devices     []string // host devices the action sees at the same path (a privileged one sees them all)
	logDriver   string   // Docker's log driver for the action (none: its log cannot be read back)
	waitForUser bool
}

// ran is what the worker saw of an action.
type ran struct {
	ID         string
	Name       string // the action container's
	ExitCode   int
	FinishedAt time.Time
	Logs       string
	// Privileged: the worker made the action privileged.
	Privileged bool
	// Removing and Removed are when the worker asked to remove the
	// container (on tink-agent, to stop it or delete its task first), and
	// when that returned, before it would report: the engine removed it
	// in between.
	Removing, Removed time.Time
}

// runAction runs a like a worker of the given shape: create, start, wait
// until not running, inspect, read its output, force-remove it with its
// volumes; or, for tink-agent, as package tinkagent does.
func runAction(t *testing.T, c *dockerapi.Client, sh shape, a action) ran {
	t.Helper()
	ctx := testCtx(t)
	var env []string
	for k, v := range a.env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	volumes := a.volumes
	if !a.noSocket {
		volumes = append(volumes, c.SocketPath()+":/var/run/docker.sock")
	}
	if sh == tinkAgent {
		return runAgent(t, ctx, c, a, env, volumes)
	}
	body := dockerapi.CreateRequest{
		Config: dockerapi.Config{Image: cmp.Or(a.image, actionImage), Cmd: a.command, Env: env, Entrypoint: a.entrypoint, Hostname: a.hostname},
		HostConfig: dockerapi.HostConfig{
			Privileged:   a.privileged,
			PidMode:      a.pid,
			CgroupnsMode: a.cgroupns,
		},
	}
	for _, d := range a.devices {
		body.HostConfig.Devices = append(body.HostConfig.Devices, dockerapi.DeviceMapping{PathOnHost: d, PathInContainer: d, CgroupPermissions: "rwm"})
	}
	if a.logDriver != "" {
		body.HostConfig.LogConfig = &dockerapi.LogConfig{Type: a.logDriver}
	}
	var name string
	switch sh {
	case tinkWorker:
		name = actionContainer(sh, a.name)
		body.Tty, body.AttachStdout, body.AttachStderr = true, true, true
		wf := t.TempDir()
		body.HostConfig.Binds = append([]string{wf + ":/workflow"}, volumes...)
	case dockerAPI:
		name = actionContainer(sh, a.name)
		body.HostConfig.Binds = volumes
		body.HostConfig.NetworkMode = a.network
	}
	// A run of the suite that was cut short (a timeout, a signal) can
	// leave the action and what it made behind; a worker would not meet
	// them, so neither does the test.
	clearName(c, name)
	created, err := c.ContainerCreate(ctx, name, body)
	if err != nil {
		t.Fatalf("worker: %v", err)
	}
	t.Cleanup(func() { removeAction(c, created.ID) })
	if err := c.ContainerStart(ctx, created.ID); err != nil {
		t.Fatalf("worker: %v", err)
	}
	res, err := c.ContainerWait(ctx, created.ID, dockerapi.WaitNotRunning)
	if err != nil {
		t.Fatalf("worker: %v", err)
	}
	ctr, err := c.ContainerInspect(ctx, created.ID)
	if err != nil {
		t.Fatalf("worker: %v", err)
	}
	var out bytes.Buffer
	if err := c.ContainerLogs(ctx, created.ID, dockerapi.LogsOptions{TTY: body.Tty}, &out, &out); err != nil && a.logDriver != "none" {
		t.Fatalf("worker: %v", err)
	}
	// Podman's conmon can still be writing a quick exit's lines to its
	// log file when the wait returns (seen: an empty log, once in a whole
	// run): a failed action's empty log is read again, for a second at
	// most, as the worker's relay of it would come later too.
	for try := 0; out.Len() == 0 && res.StatusCode != 0 && a.logDriver != "none" && isPodman(c) && try < 5; try++ {
		time.Sleep(200 * time.Millisecond)
		_ = c.ContainerLogs(ctx, created.ID, dockerapi.LogsOptions{TTY: body.Tty}, &out, &out)
	}
	finished, err := time.Parse(time.RFC3339Nano, ctr.State.FinishedAt)
	if err != nil {
		t.Fatalf("worker: FinishedAt %q: %v", ctr.State.FinishedAt, err)
	}
	watchWaiter(t, c, created.ID)
	removing := time.Now()
	if err := c.ContainerRemove(ctx, created.ID, dockerapi.RemoveOptions{Force: true, Volumes: true}); err != nil {
		t.Fatalf("worker: %v", err)
	}
	return ran{ID: created.ID, Name: name, ExitCode: res.StatusCode, FinishedAt: finished, Logs: out.String(), Privileged: body.HostConfig.Privileged, Removing: removing, Removed: time.Now()}
}

// runAgent runs a as tink-agent's Docker runtime does (package
// tinkagent), privileged where the row's engine starts privileged
// containers, and returns once it has removed the container.
func runAgent(t *testing.T, ctx context.Context, c *dockerapi.Client, a action, env, volumes []string) ran {
	t.Helper()
	if a.hostname != "" || a.cgroupns != "" || a.logDriver != "" {
		t.Fatalf("action %q: tink-agent sets no hostname, cgroup namespace or log driver (shape dockerAPI does)", a.name)
	}
	act := agentAction(a, env, volumes)
	act.Image = cmp.Or(a.image, actionImage)
	// A run of the suite that was cut short can leave the action behind.
	clearName(c, act.ContainerName())
	d := tinkagent.Docker{C: c, Unprivileged: !engineOf(c).privileged}
	ctr, err := d.Create(ctx, act)
	if err != nil {
		t.Fatalf("agent: %v", err)
	}
	t.Cleanup(func() { removeAction(c, ctr.ID) })
	res, err := ctr.Run(ctx)
	if err != nil {
		t.Fatalf("agent: %v", err)
	}
	watchWaiter(t, c, ctr.ID)
	removing := time.Now()
	if err := ctr.Finish(ctx, res); err != nil {
		t.Fatalf("agent: %v", err)
	}
	return ran{ID: ctr.ID, Name: ctr.Name, ExitCode: res.ExitCode, FinishedAt: res.ExitedAt, Logs: res.Output, Privileged: ctr.Request.HostConfig.Privileged, Removing: removing, Removed: time.Now()}
}

// waiterWatch is the output of an action's waiter, followed from before
// the worker removed the action: the waiter outlives that removal by
// WAIT_SECONDS at least, so a test that reads its output later, however
// late on a loaded machine, never races its end.
type waiterWatch struct {
	done      chan struct{}
	out, note string
	err       error
}

// waiterWatches are the waiters followed, by action ID, until a test
// reads one (followWaiterRaw).
var waiterWatches sync.Map

// watchWaiter starts following the waiter of the action actionID, if it
// made one: called once the action has exited, before the worker
// removes it. The follow ends with the waiter, or with the test.
func watchWaiter(t *testing.T, c *dockerapi.Client, actionID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	list, err := c.ContainerList(ctx, "org.waitdaemon.action-id="+actionID, "org.waitdaemon.role=waiter")
	if err != nil || len(list) != 1 {
		cancel()
		return // no hand-off, or a waiter already gone: followWaiterRaw says so
	}
	w := &waiterWatch{done: make(chan struct{})}
	follow := func() (string, string, error) {
		var out bytes.Buffer
		err := c.ContainerLogs(ctx, list[0].ID, dockerapi.LogsOptions{Follow: true}, &out, &out)
		if err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
			return "", "", fmt.Errorf("following the waiter: %w", err)
		}
		return out.String(), "", nil
	}
	if isPodman(c) {
		if follow, err = openPodmanWaiter(ctx, c, list[0].ID); err != nil {
			cancel()
			return
		}
	}
	go func() {
		defer close(w.done)
		w.out, w.note, w.err = follow()
	}()
	waiterWatches.Store(actionID, w)
	t.Cleanup(func() {
		cancel()
		<-w.done
		waiterWatches.Delete(actionID)
	})
}

// output is the waiter's whole output, once it has ended.
func (w *waiterWatch) output(t *testing.T) string {
	t.Helper()
	<-w.done
	if w.err != nil {
		t.Fatal(w.err)
	}
	if w.note != "" {
		t.Log(w.note)
	}
	return w.out
}

// agentAction is a as the server sends it to tink-agent, with action ID
// e2e and its name scoped: an entrypoint of the test's is the agent's cmd, and its arguments
// go before the command.
func agentAction(a action, env, volumes []string) tinkagent.Action {
	act := tinkagent.Action{ID: "e2e", Name: scoped(a.name), Args: a.command, Env: env, Volumes: volumes, PID: a.pid, Network: a.network}
	if len(a.entrypoint) > 0 {
		act.Cmd, act.Args = a.entrypoint[0], append(slices.Clone(a.entrypoint[1:]), a.command...)
	}
	return act
}

// clearName removes the container called name, if there is one, and all
// it made.
func clearName(c *dockerapi.Client, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if old, err := c.ContainerInspect(ctx, name); err == nil {
		removeAction(c, old.ID)
	}
}

func removeAction(c *dockerapi.Client, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = c.ContainerRemove(ctx, id, dockerapi.RemoveOptions{Force: true, Volumes: true})
	list, _ := c.ContainerList(ctx, "org.waitdaemon.action-id="+id)
	for _, l := range list {
		_ = c.ContainerRemove(ctx, l.ID, dockerapi.RemoveOptions{Force: true, Volumes: true})
	}
}

// scoped is an action's name as the worker gets it: with the checkout's
// tag (E2E_TAG) after it, unless that is the default, e2e, which the
// tests' names begin with already. Phase 1 clears an earlier run's
// containers by the action's name, so two checkouts that run the same
// test on one engine at once must run actions of names of their own.
func scoped(name string) string {
	if e2eTag == "e2e" {
		return name
	}
	return name + " " + e2eTag
}

// actionContainer is the name of the container that a worker of shape sh
// makes for the action the test calls name (on containerd, tink-agent's
// whatever the shape).
func actionContainer(sh shape, name string) string {
	switch sh {
	case tinkWorker:
		return "action_" + sanitize(scoped(name))
	case dockerAPI:
		return "tinkerbell_" + sanitize(scoped(name)) + "_e2e"
	}
	return agentAction(action{name: name}, nil, nil).ContainerName()
}

// sanitize is tink-worker's: every character outside [a-zA-Z0-9_.-]
// becomes _.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '.' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

// event is one JSON line of waitdaemon's output.
type event map[string]any

func (e event) str(k string) string { s, _ := e[k].(string); return s }

func (e event) num(k string) float64 { n, _ := e[k].(float64); return n }

// events parses the JSON lines in out.
func events(out string) []event {
	var evs []event
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var e event
		if json.Unmarshal([]byte(strings.TrimSpace(sc.Text())), &e) == nil {
			evs = append(evs, e)
		}
	}
	return evs
}

func find(evs []event, msg string) (event, bool) {
	for _, e := range evs {
		if e.str("msg") == msg {
			return e, true
		}
	}
	return nil, false
}

// followWaiter is the waiter's output, as events (followWaiterRaw).
func followWaiter(t *testing.T, c *dockerapi.Client, actionID string) []event {
	t.Helper()
	return events(followWaiterRaw(t, c, actionID))
}

// probeReport is what the probe recorded.
type probeReport struct {
	Args       []string          `json:"args"`
	Env        []string          `json:"env"`
	Hostname   string            `json:"hostname"`
	Namespaces map[string]string `json:"namespaces"`
	CapEff     string            `json:"cap_eff"`
	Devices    int               `json:"devices"`
	Mounts     []string          `json:"mounts"`
	Started    time.Time         `json:"started"`
	UID        int               `json:"uid"`
	GID        int               `json:"gid"`
	Groups     []int             `json:"groups"`
}

func readProbe(t *testing.T, dir, name string) (probeReport, bool) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return probeReport{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var r probeReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("probe report: %v\n%s", err, data)
	}
	return r, true
}

// hostNamespace is this test process's namespace of kind (the host's, as
// the tests run on the host).
func hostNamespace(t *testing.T, kind string) string {
	ns, err := os.Readlink("/proc/self/ns/" + kind)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestSelectEngines holds the row filter to its word: the rows named, in
// the table's order; all of them for an empty list; an error naming a
// row the table lacks.
func TestSelectEngines(t *testing.T) {
	names := func(rows []testEngine) string {
		var s []string
		for _, e := range rows {
			s = append(s, e.name)
		}
		return strings.Join(s, ",")
	}
	all := names(allEngines)
	for _, tc := range []struct{ list, want string }{
		{"", all},
		{" ", all},
		{"docker26", "docker26"},
		{"docker26, docker28", "docker28,docker26"},
		{"containerd,docker", "docker,containerd"},
	} {
		got, err := selectEngines(allEngines, tc.list)
		if err != nil || names(got) != tc.want {
			t.Errorf("selectEngines(%q) = %s, %v; want %s", tc.list, names(got), err, tc.want)
		}
	}
	if got, err := selectEngines(allEngines, "docker,docker27"); err == nil || !strings.Contains(err.Error(), `"docker27"`) {
		t.Errorf("selectEngines(docker,docker27) = %s, %v; want an error naming docker27", names(got), err)
	}
	if names(allEngines) != "docker,docker29,docker28,docker26,podman,containerd" {
		t.Errorf("the table's rows are %s", names(allEngines))
	}
	for _, tc := range []struct {
		list  string
		short bool
		want  string
	}{
		{"", true, "docker,containerd"},
		{"", false, all},
		{"docker28", true, "docker28"},
		{"podman,docker", false, "docker,podman"},
	} {
		got, err := tableRows(tc.list, tc.short)
		if err != nil || names(got) != tc.want {
			t.Errorf("tableRows(%q, short %v) = %s, %v; want %s", tc.list, tc.short, names(got), err, tc.want)
		}
	}
}

// resultDone reads the result file at path, and says whether it is the
// one written once the last run ended (state done): the waiter writes it
// before each run too, that run started and not ended.
func resultDone(path string) ([]byte, bool) {
	data, err := os.ReadFile(path)
	var r struct{ State string }
	return data, err == nil && json.Unmarshal(data, &r) == nil && r.State == "done"
}

// loadImages pipes `docker save` of the action and probe images, from the
// Docker 20.10 that builds them, into load (a `docker load` or `podman
// load` of another engine). Each side writes into its own buffer: the two
// are copied by goroutines of their own.
func loadImages(load *exec.Cmd) error {
	save := exec.Command("docker", "save", actionImage, probeImage)
	var saveErr, loadOut bytes.Buffer
	save.Stderr = &saveErr
	load.Stdout, load.Stderr = &loadOut, &loadOut
	pipe, err := save.StdoutPipe()
	if err != nil {
		return err
	}
	load.Stdin = pipe
	if err := save.Start(); err != nil {
		return fmt.Errorf("docker save: %w", err)
	}
	lerr := load.Run()
	if err := save.Wait(); err != nil {
		return fmt.Errorf("docker save %s %s: %v\n%s", actionImage, probeImage, err, saveErr.String())
	}
	if lerr != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(load.Args, " "), lerr, loadOut.String())
	}
	return nil
}

// aptGet is apt-get with args, unasked, and waiting up to 5 minutes for
// another apt-get to end (the VM suite's, which installs its tools as
// these tests start) rather than fail at once on its lock.
func aptGet(args ...string) *exec.Cmd {
	cmd := exec.Command("apt-get", append([]string{"-o", "DPkg::Lock::Timeout=300"}, args...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	return cmd
}
