//go:build full

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/containerd"
	"github.com/waitdaemon/waitdaemon/phase"
)

// TestContainerdRestart restarts the test containerd (the daemon alone:
// its tasks live on in their shims) twice while the waiter waits for the
// user container, which sleeps through both. At the first, as the wait
// begins, the client's own retry carries the wait over to the new
// daemon. The second comes once the wait is older than the waiter's
// client waits for a daemon (engine.WaiterWaitForEngine): the call
// fails, and the waiter must say so and ask again. Either way the result
// is the run's real end. It stops the daemon every other test uses, so
// it never runs in parallel, and it leaves the daemon running. It takes
// over a minute.
func TestContainerdRestart(t *testing.T) {
	c, eng, actionImg := setupContainerd(t)
	t.Cleanup(func() {
		if waitAnswers(c, 5*time.Second) == nil {
			return
		}
		if out, err := startContainerd(); err != nil {
			t.Errorf("the test containerd does not answer, and would not start again: %v\n%s", err, out)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out := t.TempDir()
	name := "tinkerbell_cd-restart_01JE2E" + randomHex(10)
	// The second restart is this long after the user container started;
	// the user container sleeps a little longer, to be running still.
	second := engine.WaiterWaitForEngine + 3*time.Second
	sleep := second + 5*time.Second

	stop := make(chan struct{})
	finished := make(chan struct{})
	var restartErr error
	var restarts []string // when each restart happened, for the failure message
	go func() {
		defer close(finished)
		restartErr = func() error {
			// The probe's report is its first act; then it sleeps.
			var started time.Time
			for deadline := time.Now().Add(time.Minute); started.IsZero(); time.Sleep(100 * time.Millisecond) {
				if _, err := os.Stat(filepath.Join(out, "probe.json")); err == nil {
					started = time.Now()
				}
				if time.Now().After(deadline) {
					return errors.New("the user container did not start within a minute")
				}
			}
			for _, at := range []time.Duration{0, second} {
				select {
				case <-stop:
					return errors.New("the test ended first")
				case <-time.After(time.Until(started.Add(at))):
				}
				if err := stopContainerd(); err != nil {
					return err
				}
				down := time.Now()
				if out, err := startContainerd(); err != nil {
					return fmt.Errorf("%w\n%s", err, out)
				}
				restarts = append(restarts, fmt.Sprintf("stopped by +%v, answering again by +%v after the user container started",
					down.Sub(started).Round(time.Millisecond), time.Since(started).Round(time.Millisecond)))
			}
			return nil
		}()
	}()
	t.Cleanup(func() { close(stop); <-finished })

	start := time.Now()
	r := runCDAction(t, ctx, c, eng, actionImg, cdAction{
		name:       name,
		env:        []string{"IMAGE=docker.io/library/" + probeImage, "WAIT_SECONDS=1", fmt.Sprintf("PROBE_SLEEP=%d", int(sleep.Seconds()))},
		volumes:    [][2]string{{out, "/out"}},
		resultWait: sleep + time.Minute,
	})
	<-finished
	if restartErr != nil {
		t.Fatalf("restarting containerd: %v", restartErr)
	}
	t.Logf("the run took %v; containerd restarted: %s", time.Since(start).Round(time.Millisecond), strings.Join(restarts, "; "))
	if a := r.result.Attempts; r.result.ExitCode != 0 || len(a) != 1 || a[0].ExitCode != 0 {
		t.Errorf("result %+v, want one run that exited 0\nphase 1:\n%s", r.result, r.phase1)
	}
	left := settled(t, eng, r.id, 30*time.Second, "waiter stopped")
	for _, l := range left {
		if l.Labels[phase.LabelRole] != phase.RoleWaiter {
			continue
		}
		said, err := os.ReadFile(filepath.Join(containerd.DefaultLogDir, l.ID, "log"))
		want := "could not follow a container; asking the engine again"
		// The client waits for a lost containerd from when it found it
		// lost, so a wait broken off by either restart is usually sent
		// again below the waiter, which says nothing; at most the waiter
		// says once that it asks again.
		if err != nil || strings.Count(string(said), want) > 1 {
			t.Errorf("the waiter's output (%v), want %q in it once at most:\n%s", err, want, said)
		}
	}
}
