package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// TestSoak runs 100 actions in a row with no wait; they must leave no
// container and no volume behind.
func TestSoak(t *testing.T) {
	onDockerAPIs(t, func(t *testing.T, c *dockerapi.Client) {
		volumesBefore := countVolumes(t, c)
		began := time.Now()
		const runs = 100
		for i := range runs {
			r := runAction(t, c, tinkWorker, action{
				name:    fmt.Sprintf("e2e soak %d", i),
				command: []string{"soak"},
				env:     map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "0"},
			})
			if r.ExitCode != 0 {
				t.Fatalf("run %d exited %d:\n%s", i, r.ExitCode, r.Logs)
			}
			waitGone(t, rigOf(c), r.ID, 10*time.Second)
		}
		t.Logf("%d actions in %v", runs, time.Since(began).Round(time.Millisecond))
		ctx := testCtx(t) // after the runs, which may outlast one
		list, err := c.ContainerList(ctx, "org.waitdaemon.action")
		if err != nil || len(list) != 0 {
			t.Errorf("containers left by waitdaemon: %d (%v)", len(list), err)
		}
		if after := countVolumes(t, c); after != volumesBefore {
			t.Errorf("volumes: %d before, %d after", volumesBefore, after)
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
