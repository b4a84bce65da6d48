package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/containerd"
	"github.com/waitdaemon/waitdaemon/engine/docker"
	"github.com/waitdaemon/waitdaemon/internal/tinkagent"
	"github.com/waitdaemon/waitdaemon/phase"
)

// rig is a row of the engine table as a test drives it: it runs actions
// the way that engine's agent does, and reads what became of them
// through waitdaemon's own engine contract.
type rig interface {
	row() testEngine
	// engine is waitdaemon's engine on the row's engine, for List and
	// Remove.
	engine() engine.Engine
	// run runs a as a worker of shape sh does (on containerd, as
	// tink-agent's containerd runtime does, whatever the shape), and
	// removes the action container once it has exited, as workers do.
	run(t *testing.T, sh shape, a action) ran
	// waiter follows the waiter of action id until it exits, and
	// returns its output. The waiter must still be there.
	waiter(t *testing.T, actionID string) string
	// stop sends container id SIGTERM, and SIGKILL 10 s later, as
	// `docker stop` does, and returns once it has stopped.
	stop(t *testing.T, id string)
	// exitCode is the exit code of container id, which has stopped.
	exitCode(t *testing.T, id string) int
	// hasImage reports whether the image ref is on the engine.
	hasImage(t *testing.T, ref string) bool
	// removeImage removes the name ref from the engine, if it is there.
	removeImage(t *testing.T, ref string)
	// putProbe puts the probe image on the engine as ref, which the
	// tests' registry serves, without a pull that the registry would
	// count where the engine can tag.
	putProbe(t *testing.T, ref string)
}

// rigOf is the row of the table whose engine c talks to, as a rig.
func rigOf(c *dockerapi.Client) rig { return dockerRig{c: c, e: engineOf(c)} }

// openRig starts the row's engine, if the tests start it, and returns it
// as a rig.
func openRig(t *testing.T, e testEngine) rig {
	t.Helper()
	if e.containerd {
		c, eng, img := setupContainerd(t)
		return containerdRig{c: c, eng: eng, actionImg: img}
	}
	return dockerRig{c: e.setup(t), e: e}
}

// dockerRig is a Docker engine, or Podman's Docker-compatible API.
type dockerRig struct {
	c *dockerapi.Client
	e testEngine
}

func (d dockerRig) row() testEngine                          { return d.e }
func (d dockerRig) engine() engine.Engine                    { return &docker.Engine{C: d.c} }
func (d dockerRig) run(t *testing.T, sh shape, a action) ran { return runAction(t, d.c, sh, a) }
func (d dockerRig) waiter(t *testing.T, actionID string) string {
	return followWaiterRaw(t, d.c, actionID)
}

func (d dockerRig) stop(t *testing.T, id string) {
	t.Helper()
	if _, err := d.c.Raw(testCtx(t), "POST", "/containers/"+id+"/stop?t=10", nil); err != nil {
		t.Fatalf("stopping %s: %v", id, err)
	}
}

func (d dockerRig) exitCode(t *testing.T, id string) int {
	t.Helper()
	ctr, err := d.c.ContainerInspect(testCtx(t), id)
	if err != nil {
		t.Fatalf("the exit code of %s: %v", id, err)
	}
	return ctr.State.ExitCode
}

func (d dockerRig) hasImage(t *testing.T, ref string) bool { return imagePresent(t, d.c, ref) }
func (d dockerRig) removeImage(t *testing.T, ref string)   { removeImage(t, d.c, ref) }

func (d dockerRig) putProbe(t *testing.T, ref string) {
	t.Helper()
	i := strings.LastIndex(ref, ":")
	tagProbe(t, d.c, ref[:i], ref[i+1:])
}

// containerdRig is the test containerd, with actions made as tink-agent's
// containerd runtime makes them (package tinkagent).
type containerdRig struct {
	c         *containerdapi.Client
	eng       *containerd.Engine
	actionImg string
}

func (r containerdRig) row() testEngine       { return engineNamed("containerd") }
func (r containerdRig) engine() engine.Engine { return r.eng }

// run runs a as tink-agent does: its name tinkerbell_<name>_e2e, the
// socket as a volume at containerd's default path, /etc files from a
// temporary directory, the host's pid and network namespaces when the
// action asks for either (the agent's runtime has the two together), and
// after the exit, the task, the container and its snapshot deleted.
func (r containerdRig) run(t *testing.T, sh shape, a action) ran {
	t.Helper()
	// Every action is privileged here, as tink-agent makes them.
	if len(a.entrypoint) > 0 || a.hostname != "" || a.cgroupns != "" {
		t.Fatalf("action %q: the containerd rig makes no entrypoint, hostname or cgroupns of its own", a.name)
	}
	ctx := testCtx(t)
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for k, v := range a.env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	var volumes [][2]string
	if !a.noSocket {
		volumes = append(volumes, [2]string{containerdSocket, containerdapi.DefaultSocket})
	}
	for _, v := range a.volumes {
		host, ctr, _ := strings.Cut(v, ":")
		ctr, _, _ = strings.Cut(ctr, ":")
		volumes = append(volumes, [2]string{host, ctr})
	}
	action := r.newAction(t, "tinkerbell_"+sanitize(a.name)+"_e2e", a.command, env, volumes, a.pid != "host" && a.network != "host")
	if a.image != "" {
		action.Image = a.image // as containerd names it: fully qualified
	}
	exit, out := r.agentRun(t, ctx, action)
	if err := tinkagent.Delete(ctx, r.c, action); err != nil {
		t.Fatalf("agent: %v", err)
	}
	return ran{ID: action.ID, Name: action.Name, ExitCode: int(exit.Status), FinishedAt: exit.ExitedAt, Logs: out}
}

// newAction is an action container's description, as tink-agent makes
// one, with a new ID, /etc files of its own, its output to a file, and
// everything the run makes removed when the test ends.
func (r containerdRig) newAction(t *testing.T, name string, args, env []string, volumes [][2]string, private bool) tinkagent.Action {
	t.Helper()
	id := tinkagent.NewID()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		list, _ := r.eng.List(ctx, phase.LabelActionID, id)
		for _, l := range list {
			if err := r.eng.Remove(ctx, l.ID); err != nil {
				t.Errorf("cleaning up %s: %v", l.ID, err)
			}
			// The tasks' output files, which the shim leaves on the host.
			_ = os.RemoveAll(filepath.Join(containerd.DefaultLogDir, l.ID))
		}
		if err := r.eng.Remove(ctx, id); err != nil {
			t.Errorf("cleaning up the action: %v", err)
		}
		// And those of the containers the waiter removed.
		dirs, _ := filepath.Glob(filepath.Join(containerd.DefaultLogDir, name+"-*"))
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
	})
	etc := t.TempDir()
	if err := tinkagent.EtcDir(etc); err != nil {
		t.Fatal(err)
	}
	return tinkagent.Action{
		ID: id, Name: name, Image: "docker.io/library/" + r.actionImg, Args: args, Env: env,
		Volumes: volumes, Etc: etc, Private: private, Log: filepath.Join(t.TempDir(), "action.log"),
	}
}

// agentRun creates the action's container and task, starts it, waits for
// its exit, and returns the exit and the action's output.
func (r containerdRig) agentRun(t *testing.T, ctx context.Context, a tinkagent.Action) (containerdapi.Exit, string) {
	t.Helper()
	if err := tinkagent.Create(ctx, r.c, a); err != nil {
		t.Fatal(err)
	}
	return r.agentStart(t, ctx, a)
}

// agentStart starts the action's created task, waits for its exit, and
// returns the exit and the action's output.
func (r containerdRig) agentStart(t *testing.T, ctx context.Context, a tinkagent.Action) (containerdapi.Exit, string) {
	t.Helper()
	type waited struct {
		exit containerdapi.Exit
		err  error
	}
	done := make(chan waited, 1)
	go func() {
		e, err := r.c.TaskWait(ctx, a.ID)
		done <- waited{e, err}
	}()
	time.Sleep(100 * time.Millisecond) // the wait is under way before the start, as the agent's
	if _, err := r.c.TaskStart(ctx, a.ID); err != nil {
		t.Fatalf("agent: starting the action: %v", err)
	}
	w := <-done
	if w.err != nil {
		t.Fatalf("agent: waiting for the action: %v", w.err)
	}
	return w.exit, settledOutput(a.Log)
}

// settledOutput reads a task's output file once the shim has copied all
// of it: the exit can be reported before the shim's copy of the last
// lines is done (on a loaded machine, seconds after). It waits, within
// 10 s, for the file to have something in it and then to stay the same
// size for 100 ms.
func settledOutput(file string) string {
	size := int64(-1)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		fi, err := os.Stat(file)
		if err == nil && fi.Size() > 0 && fi.Size() == size {
			break
		}
		if err == nil {
			size = fi.Size()
		}
	}
	out, _ := os.ReadFile(file)
	return string(out)
}

// waiter waits for the waiter's task to exit, and reads its output file.
func (r containerdRig) waiter(t *testing.T, actionID string) string {
	t.Helper()
	ctx := testCtx(t)
	id := findRole(t, r, actionID, phase.RoleWaiter)
	if _, err := r.c.TaskWait(ctx, id); err != nil && !errors.Is(err, containerdapi.ErrNotFound) {
		t.Fatalf("waiting for the waiter: %v", err)
	}
	out, err := os.ReadFile(filepath.Join(containerd.DefaultLogDir, id, "log"))
	if err != nil {
		t.Fatalf("the waiter's output: %v", err)
	}
	return string(out)
}

func (r containerdRig) stop(t *testing.T, id string) {
	t.Helper()
	ctx := testCtx(t)
	if err := r.c.TaskKill(ctx, id, syscall.SIGTERM, false); err != nil {
		t.Fatalf("stopping %s: %v", id, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := r.c.TaskWait(wctx, id); err == nil {
		return
	}
	if err := r.c.TaskKill(ctx, id, syscall.SIGKILL, false); err != nil {
		t.Fatalf("killing %s: %v", id, err)
	}
	if _, err := r.c.TaskWait(ctx, id); err != nil {
		t.Fatalf("waiting for %s: %v", id, err)
	}
}

func (r containerdRig) exitCode(t *testing.T, id string) int {
	t.Helper()
	p, err := r.c.TaskGet(testCtx(t), id)
	if err != nil {
		t.Fatalf("the exit code of %s: %v", id, err)
	}
	return int(p.ExitStatus)
}

func (r containerdRig) hasImage(t *testing.T, ref string) bool {
	t.Helper()
	_, err := r.c.ImageGet(testCtx(t), ref)
	if err != nil && !errors.Is(err, containerdapi.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func (r containerdRig) removeImage(t *testing.T, ref string) {
	t.Helper()
	if out, err := exec.Command(ctrBinary, "-a", containerdSocket, "-n", containerdNS, "images", "rm", ref).CombinedOutput(); err != nil && r.hasImage(t, ref) {
		t.Fatalf("ctr images rm %s: %v\n%s", ref, err, out)
	}
}

// putProbe pulls ref: containerd names images only as they were pulled
// or imported.
func (r containerdRig) putProbe(t *testing.T, ref string) {
	t.Helper()
	if err := r.c.Pull(testCtx(t), containerdapi.PullRequest{Ref: ref}); err != nil {
		t.Fatalf("pulling %s into containerd: %v", ref, err)
	}
	t.Cleanup(func() { r.removeImage(t, ref) })
}

// roleOf is the ID of action id's container of role, or "".
func roleOf(t *testing.T, r rig, actionID, role string) string {
	t.Helper()
	list, err := r.engine().List(testCtx(t), phase.LabelActionID, actionID)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list {
		if l.Labels[phase.LabelRole] == role {
			return l.ID
		}
	}
	return ""
}

// running reports whether container id of action actionID runs.
func running(t *testing.T, r rig, actionID, id string) bool {
	t.Helper()
	list, err := r.engine().List(testCtx(t), phase.LabelActionID, actionID)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list {
		if l.ID == id {
			return l.Running
		}
	}
	return false
}

// settled waits until the containers of action id are those of want
// ("role state" each, or "role" for one in any state; sorted), and fails
// the test when they are not after limit. It returns them.
func settled(t *testing.T, eng engine.Engine, id string, limit time.Duration, want ...string) []engine.Container {
	t.Helper()
	ctx := testCtx(t)
	var got []string
	var list []engine.Container
	for deadline := time.Now().Add(limit); ; time.Sleep(100 * time.Millisecond) {
		var err error
		if list, err = eng.List(ctx, phase.LabelActionID, id); err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, l := range list {
			got = append(got, l.Labels[phase.LabelRole]+" "+l.State)
		}
		slices.Sort(got)
		if slices.EqualFunc(got, want, func(g, w string) bool { return g == w || strings.HasPrefix(g, w+" ") && !strings.Contains(w, " ") }) {
			return list
		}
		if time.Now().After(deadline) {
			var names []string
			for _, l := range list {
				names = append(names, fmt.Sprintf("%s (%s)", l.Name, l.State))
			}
			t.Errorf("left behind by action %s after %v: %s; want %q", id[:12], limit, strings.Join(names, ", "), want)
			return list
		}
	}
}

// waitGone waits until no container of action id remains.
func waitGone(t *testing.T, r rig, actionID string, limit time.Duration) {
	t.Helper()
	settled(t, r.engine(), actionID, limit)
}

// waitDone waits until what an action that ran leaves is all that
// remains of it: nothing, or on containerd, where a task cannot delete
// itself, its stopped waiter.
func waitDone(t *testing.T, r rig, actionID string, limit time.Duration) {
	t.Helper()
	if r.row().keepsWaiter {
		settled(t, r.engine(), actionID, limit, phase.RoleWaiter+" stopped")
		return
	}
	settled(t, r.engine(), actionID, limit)
}
