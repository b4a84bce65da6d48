//go:build full

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine/containerd"
)

// TestSoak runs actions in a row with no wait; they must leave no
// container and no volume behind: on containerd, at most the last
// action's stopped waiter (each phase 1 removes the one before), and no
// output files but its. 100 actions on Docker 20.10 and on containerd,
// 25 on each other engine (soakRuns): one thing left behind fails the
// soak whatever the count, and 100 took 280 to 430 s per engine, two
// engines at once, with both cores busy.
func TestSoak(t *testing.T) {
	onEngines(t, func(t *testing.T, e rig) {
		d, docker := e.(dockerRig)
		var volumesBefore []string
		if docker {
			volumesBefore = volumes(t, d.c, false)
		}
		began := time.Now()
		runs := soakRuns(e.row().name)
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
			// Volumes that no container uses and were not there before:
			// another checkout's tests may make and use volumes meanwhile.
			var left []string
			for _, v := range volumes(t, d.c, true) {
				if !slices.Contains(volumesBefore, v) {
					left = append(left, v)
				}
			}
			if len(left) > 0 {
				t.Errorf("volumes left that no container uses: %q", left)
			}
			return
		}
		if dirs, _ := filepath.Glob(filepath.Join(containerd.DefaultLogDir, strings.Replace(actionContainer(tinkAgent, "e2e soak 0"), "_soak_0", "_soak_*", 1)+"-*")); len(dirs) > 1 {
			t.Errorf("output directories left on the host: %d, want the last waiter's alone: %q", len(dirs), dirs)
		}
	})
}

// volumes are the names of the engine's volumes, or of those that no
// container uses (dangling).
func volumes(t *testing.T, c *dockerapi.Client, dangling bool) []string {
	t.Helper()
	path := "/volumes"
	if dangling {
		path += "?filters=" + url.QueryEscape(`{"dangling":["true"]}`)
	}
	resp, err := c.Raw(testCtx(t), "GET", path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct{ Volumes []struct{ Name string } }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, vol := range v.Volumes {
		names = append(names, vol.Name)
	}
	return names
}

// soakRuns is how many actions the soak runs in a row on the engine of
// the table named so.
func soakRuns(engine string) int {
	if engine == "docker" || engine == "containerd" {
		return 100
	}
	return 25
}
