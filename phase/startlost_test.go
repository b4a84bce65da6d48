package phase

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/waitdaemon/waitdaemon/testkit/fake"
)

// concurrencyCheck is the fake, which, at each Start, notes every other
// user or fallback container the engine still has running: two runs of
// the user container (two reboots, two kexecs) at once.
type concurrencyCheck struct {
	*fake.Engine
	mu      sync.Mutex
	overlap []string
}

func (c *concurrencyCheck) Start(ctx context.Context, id string) error {
	for _, role := range []string{RoleUser, RoleFallback} {
		list, err := c.Engine.List(ctx, LabelRole, role)
		if err != nil {
			return err
		}
		for _, other := range list {
			if other.Running && other.ID != id && other.Name != id {
				c.mu.Lock()
				c.overlap = append(c.overlap, fmt.Sprintf("starting %s while %s runs", id, other.Name))
				c.mu.Unlock()
			}
		}
	}
	return c.Engine.Start(ctx, id)
}

// TestTwoStartLostStopped: a start whose answer is lost after it did
// start the container (Docker's ContainerStart when its last repeat is
// ambiguous; containerd's TaskStart when the task stays UNKNOWN) counts
// as a refused run, and the container is stopped before the re-run, or
// the fallback, starts: never two runs at once.
func TestTwoStartLostStopped(t *testing.T) {
	for _, tc := range []struct {
		name     string
		retries  int
		fallback bool
	}{
		{"re-run", 1, false},
		{"fallback", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := waiterFake(tc.fallback)
			// The start goes through (the container runs: the fake's
			// Add gives it no command, so it runs until followed) and
			// its answer is lost.
			eng.Lost = map[string]error{"Start act-waitdaemon-user": errors.New("starting the task of container \"x\": unavailable (then its status stayed UNKNOWN: it is counted as not started)")}
			c := &concurrencyCheck{Engine: eng}
			var out bytes.Buffer
			if err := Two(context.Background(), c, waiterArgs(tc.retries, tc.fallback), Options{Stdout: &out}); err != nil {
				t.Fatalf("phase 2: %v\n%s", err, out.String())
			}
			if len(c.overlap) > 0 {
				t.Errorf("two runs at once: %q\ncalls %q", c.overlap, eng.Calls())
			}
			if !slices.Contains(eng.Calls(), "Stop act-waitdaemon-user") {
				t.Errorf("calls %q; want the first run stopped", eng.Calls())
			}
		})
	}
}
