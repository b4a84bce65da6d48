package e2e

import (
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/containerd"
	"github.com/waitdaemon/waitdaemon/phase"
)

// TestWaiterFollowedLate: the waiter's output can be read however late
// the test comes to it. The harness follows the waiter from before the
// worker removes the action, which the waiter outlives by WAIT_SECONDS
// at least; here the test comes once the waiter (WAIT_SECONDS 0) is long
// gone, as on a loaded machine a second can pass before a test's look.
func TestWaiterFollowedLate(t *testing.T) {
	onDockerAPIs(t, func(t *testing.T, c *dockerapi.Client) {
		r := runAction(t, c, tinkWorker, action{name: "e2e followed late", env: map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "0"}})
		if r.ExitCode != 0 {
			t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
		}
		waitGone(t, rigOf(c), r.ID, 30*time.Second)
		evs := followWaiter(t, c, r.ID)
		if res, ok := find(evs, "result"); !ok || res.num("exit_code") != 0 {
			t.Errorf("the waiter's output %v; want its result line, exit 0", evs)
		}
	})
}

// TestCheckoutsApart: two checkouts that test on one engine at once
// (E2E_TAG apart) leave each other's containers alone, though they run
// the same tests. The other checkout's action waits (WAIT_SECONDS 60),
// and on containerd an earlier one of it has left its stopped waiter;
// then this checkout's action of the same name runs to its end. Phase 1
// clears an earlier run's containers by the action's name, and a waiter
// on containerd removes the stopped waiters of its namespace: neither
// reaches the other checkout's.
func TestCheckoutsApart(t *testing.T) {
	onEnginesInTurn(t, func(t *testing.T, e rig) {
		tag := e2eTag + "-apart"
		o := otherCheckout(t, e, tag)
		env := func(wait string) map[string]string {
			return map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": wait}
		}
		var stopped string
		var waiting ran
		asCheckout(tag, func() {
			if e.row().keepsWaiter {
				r := o.run(t, tinkWorker, action{name: "e2e apart done", env: env("0")})
				waitDone(t, o, r.ID, 30*time.Second)
				stopped = findRole(t, o, r.ID, phase.RoleWaiter)
			}
			waiting = o.run(t, tinkWorker, action{name: "e2e apart", env: env("60")})
		})
		waiter := findRole(t, o, waiting.ID, phase.RoleWaiter)
		t.Cleanup(func() {
			if running(t, o, waiting.ID, waiter) {
				o.stop(t, waiter)
			}
		})
		r := e.run(t, tinkWorker, action{name: "e2e apart", env: env("0")})
		if r.ExitCode != 0 {
			t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
		}
		waitDone(t, e, r.ID, 30*time.Second)
		if !running(t, o, waiting.ID, waiter) {
			t.Errorf("the other checkout's waiter of %s no longer waits, after this checkout's %s ran:\n%s", waiting.Name, r.Name, r.Logs)
		}
		if stopped != "" {
			if list, err := o.engine().List(testCtx(t), phase.LabelRole, phase.RoleWaiter); err != nil || !slices.ContainsFunc(list, func(c engine.Container) bool { return c.ID == stopped }) {
				t.Errorf("the other checkout's stopped waiter %s is gone (%v), after this checkout's %s ran", stopped, err, r.Name)
			}
		}
	})
}

// asCheckout runs f as a checkout tagged tag would: its actions named
// for it.
func asCheckout(tag string, f func()) {
	old := e2eTag
	e2eTag = tag
	defer func() { e2eTag = old }()
	f()
}

// otherCheckout is e as a checkout tagged tag sees it: the same engine,
// and on containerd that checkout's namespace, with the images imported
// into it, and removed with it when the test ends.
func otherCheckout(t *testing.T, e rig, tag string) rig {
	t.Helper()
	r, ok := e.(containerdRig)
	if !ok {
		return e
	}
	ns := namespaceFor(tag)
	c := &containerdapi.Client{Socket: containerdSocket, Namespace: ns, WaitForEngine: 2 * time.Second}
	importImagesTo(t, ns, "", r.actionImg, probeImage)
	t.Cleanup(func() {
		_ = exec.Command(ctrBinary, "-a", containerdSocket, "-n", ns, "images", "rm", "--sync", "docker.io/library/"+r.actionImg, "docker.io/library/"+probeImage).Run()
		_ = exec.Command(ctrBinary, "-a", containerdSocket, "namespaces", "rm", ns).Run()
	})
	return containerdRig{c: c, eng: containerd.New(c), actionImg: r.actionImg}
}
