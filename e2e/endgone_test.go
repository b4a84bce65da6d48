package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/phase"
)

// TestWaiterEndsEngineGone: a waiter stopped (SIGTERM, as a shutdown
// stops it) while the engine it talks to is gone (its socket unlinked,
// as a stopping dockerd leaves it) ends within seconds: its removal of
// its own container gets the finish's 2 s, not the client's minute of
// waiting for the socket, which would hold the shutdown up.
//
// On the Docker engines: Podman 4.3's stop of the waiter, once its
// connection to the engine was cut, held the test's own calls past their
// two minutes (seen once, 124 s), so it is not a row here.
func TestWaiterEndsEngineGone(t *testing.T) {
	onDockers(t, func(t *testing.T, c *dockerapi.Client) {
		p := newFaultProxy(t, c.SocketPath())
		p.listen()
		r := runAction(t, c, tinkAgent, proxied(p, "e2e end gone", t.TempDir(), map[string]string{"WAIT_SECONDS": "0", "PROBE_SLEEP": "60"}))
		if r.ExitCode != 0 {
			t.Fatalf("the action exited %d:\n%s\nproxy:\n%s", r.ExitCode, r.Logs, p.log())
		}
		e := rigOf(c)
		user := findRole(t, e, r.ID, phase.RoleUser)
		for deadline := time.Now().Add(20 * time.Second); !running(t, e, r.ID, user); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the user container never started")
			}
		}
		waiter := findRole(t, e, r.ID, phase.RoleWaiter)
		p.stop() // the engine gone, for the waiter
		began := time.Now()
		e.stop(t, waiter) // docker stop -t 10: SIGTERM, and SIGKILL 10 s later
		took := time.Since(began)
		ctr, err := c.ContainerInspect(testCtx(t), waiter)
		if err != nil {
			t.Fatalf("the waiter, which cannot have removed itself: %v", err)
		}
		logs := e.waiter(t, r.ID)
		t.Logf("the waiter ended %v after SIGTERM, exit %d", took, ctr.State.ExitCode)
		if took > 6*time.Second || ctr.State.ExitCode == 137 {
			t.Errorf("the waiter ended %v after SIGTERM (exit %d), want within a few seconds, not killed; its output:\n%s", took, ctr.State.ExitCode, logs)
		}
		if !strings.Contains(logs, "removing the waiter's own container") {
			t.Errorf("the waiter did not say why it could not remove itself:\n%s", logs)
		}
	})
}
