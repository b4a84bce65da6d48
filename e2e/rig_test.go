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
	"github.com/waitdaemon/waitdaemon/phase"
	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
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
	// spec, if set, changes each action's spec before its create
	// (tinkagent.Containerd.Spec).
	spec func([]byte) []byte
}

func (r containerdRig) row() testEngine       { return engineNamed("containerd") }
func (r containerdRig) engine() engine.Engine { return r.eng }

// run runs a as tink-agent's containerd runtime does (package
// tinkagent): its name tinkerbell_<name>_e2e, the socket as a volume at
// containerd's default path, and the pid and network namespaces of the
// action's, each on its own; a successful action's container deleted
// after its exit, a failed one's kept (and removed when the test ends).
func (r containerdRig) run(t *testing.T, sh shape, a action) ran {
	t.Helper()
	if a.hostname != "" || a.cgroupns != "" || a.logDriver != "" {
		t.Fatalf("action %q: tink-agent sets no hostname, cgroup namespace or log driver", a.name)
	}
	ctx := testCtx(t)
	var env []string
	for k, v := range a.env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	var volumes []string
	if !a.noSocket {
		volumes = append(volumes, containerdSocket+":"+containerdapi.DefaultSocket)
	}
	act := agentAction(a, env, append(volumes, a.volumes...))
	act.Image = "docker.io/library/" + r.actionImg
	if a.image != "" {
		act.Image = a.image // as containerd names it: fully qualified
	}
	ctr := r.create(t, ctx, act)
	res := r.agentRun(t, ctx, ctr)
	removing := time.Now()
	if err := ctr.Finish(ctx, res); err != nil {
		t.Fatalf("agent: %v", err)
	}
	// Privileged always, as the agent's spec (spec.go) makes it.
	return ran{ID: ctr.ID, Name: ctr.Name, ExitCode: res.ExitCode, FinishedAt: res.ExitedAt, Logs: res.Output, Privileged: true, Removing: removing, Removed: time.Now()}
}

// cdAgentAction is the action tink-agent gets for a container named full
// (tinkerbell_<name>_<action ID>), with volumes as (host, container).
func cdAgentAction(full string, args, env []string, volumes [][2]string, pid, network string) tinkagent.Action {
	name, id := strings.TrimPrefix(full, "tinkerbell_"), "e2e"
	if i := strings.LastIndex(name, "_"); i > 0 {
		name, id = name[:i], name[i+1:]
	}
	a := tinkagent.Action{ID: id, Name: name, Args: args, Env: env, PID: pid, Network: network}
	for _, v := range volumes {
		a.Volumes = append(a.Volumes, v[0]+":"+v[1])
	}
	return a
}

// create creates a's container and task as tink-agent does, with the
// rig's action image unless a names one; everything the run makes is
// removed when the test ends.
func (r containerdRig) create(t *testing.T, ctx context.Context, a tinkagent.Action) *tinkagent.Container {
	t.Helper()
	if a.Image == "" {
		a.Image = "docker.io/library/" + r.actionImg
	}
	ctr, err := (&tinkagent.Containerd{C: r.c, Spec: r.spec}).Create(ctx, a)
	if err != nil {
		t.Fatalf("agent: %v", err)
	}
	id, name := ctr.ID, ctr.Name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// What the agent deletes after the action, if the test did not
		// get there.
		_ = ctr.Finish(ctx, tinkagent.Result{ExitCode: -1})
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
	return ctr
}

// agentRun starts the action with its wait in place, waits for its exit,
// and returns it with the action's output, read from its FIFOs.
func (r containerdRig) agentRun(t *testing.T, ctx context.Context, ctr *tinkagent.Container) tinkagent.Result {
	t.Helper()
	res, err := ctr.Run(ctx)
	if err != nil {
		t.Fatalf("agent: %v", err)
	}
	return res
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
