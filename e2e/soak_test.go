package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine/containerd"
)

// TestSoak runs 100 actions in a row with no wait; they must leave no
// container and no volume behind: on containerd, at most the last
// action's stopped waiter (each phase 1 removes the one before), and no
// output files but its.
func TestSoak(t *testing.T) {
	onEngines(t, func(t *testing.T, e rig) {
		d, docker := e.(dockerRig)
		var volumesBefore int
		if docker {
			volumesBefore = countVolumes(t, d.c)
		}
		began := time.Now()
		const runs = 100
		var ids []string
		for i := range runs {
			r := e.run(t, tinkWorker, action{
				name:    fmt.Sprintf("e2e soak %d", i),
				command: []string{"soak"},
				env:     map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "0"},
			})
			if r.ExitCode != 0 {
				t.Fatalf("run %d exited %d:\n%s", i, r.ExitCode, r.Logs)
			}
			waitDone(t, e, r.ID, 10*time.Second)
			ids = append(ids, r.ID)
		}
		t.Logf("%d actions in %v", runs, time.Since(began).Round(time.Millisecond))
		for _, id := range ids[:runs-1] {
			waitGone(t, e, id, 0)
		}
		waitDone(t, e, ids[runs-1], 0)
		if docker {
			if after := countVolumes(t, d.c); after != volumesBefore {
				t.Errorf("volumes: %d before, %d after", volumesBefore, after)
			}
			return
		}
		if dirs, _ := filepath.Glob(filepath.Join(containerd.DefaultLogDir, strings.Replace(actionContainer(tinkAgent, "e2e soak 0"), "_soak_0", "_soak_*", 1)+"-*")); len(dirs) > 1 {
			t.Errorf("output directories left on the host: %d, want the last waiter's alone: %q", len(dirs), dirs)
		}
	})
}

func countVolumes(t *testing.T, c *dockerapi.Client) int {
	t.Helper()
	resp, err := c.Raw(testCtx(t), "GET", "/volumes", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct{ Volumes []struct{ Name string } }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return len(v.Volumes)
}
