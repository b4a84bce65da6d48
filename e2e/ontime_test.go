package e2e

import (
	"math"
	"path/filepath"
	"testing"
	"time"
)

// TestStartOnTimeWithResult: the start request goes out WAIT_SECONDS
// after the action's exit, within maxLate, and with a result file or a
// result device within four times that, though the waiter writes the
// result before the start (on the device: mount, write, syncs,
// unmount). Each late is logged: docs/engines.md gives the figures.

// learntWithin bounds how long after the worker's removal of the action
// a waiter whose wait broke off with it learns that it is gone: the
// wait's answer and one look at the container.
const learntWithin = 500 * time.Millisecond

func TestStartOnTimeWithResult(t *testing.T) {
	onDeviceEngines(t, func(t *testing.T, e rig) {
		_, device := loopDisk(t)
		for _, tc := range []struct {
			name    string
			env     map[string]string
			dev     []string
			maxLate time.Duration
		}{
			{name: "no result file", env: map[string]string{}, maxLate: maxLate},
			// A write and two syncs: 2–8 ms on an idle machine, up to
			// 150 ms on a loaded one.
			{name: "a result file", env: map[string]string{"WAITDAEMON_RESULT_FILE": filepath.Join(t.TempDir(), "result.json")}, maxLate: 4 * maxLate},
			// A mount, a write, two syncs and an unmount: 14–98 ms on an
			// idle machine, more on a loaded one.
			{name: "a result device", env: map[string]string{"WAITDAEMON_RESULT_DEVICE": device, "WAITDAEMON_RESULT_FILE": "/var/log/waitdaemon.json"}, dev: []string{device}, maxLate: 4 * maxLate},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var lates []time.Duration
				for range 3 {
					env := map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "1"}
					for k, v := range tc.env {
						env[k] = v
					}
					r := e.run(t, deviceShape, action{name: "e2e on time", command: []string{"--exit=0"}, env: env, devices: tc.dev})
					if r.ExitCode != 0 {
						t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
					}
					evs := events(e.waiter(t, r.ID))
					started, ok := find(evs, "started user container")
					if !ok {
						t.Fatalf("no start line: %v", evs)
					}
					sent, err := time.Parse(time.RFC3339Nano, started.str("start_sent"))
					if err != nil {
						t.Fatalf("start_sent: %v", err)
					}
					// The wait counts from the worker's removal of the
					// action, after its exit: the engine's own time of
					// it, from its events, so between the worker's ask
					// and the answer. A worker that removes the action
					// before the waiter's wait on it is answered (the
					// runner can, within 2 ms of the exit) leaves the
					// waiter no exit to read: the start line says
					// action_removed, and the wait counts from when the
					// waiter learnt it was gone (docs/how-it-works.md),
					// after the removal began and soon after it ended.
					from, err := time.Parse(time.RFC3339Nano, started.str("counted_from"))
					latest := r.Removed
					if removed, _ := started["action_removed"].(bool); removed {
						latest = r.Removed.Add(learntWithin)
					}
					if err != nil || from.Before(r.FinishedAt) || from.Before(r.Removing) || from.After(latest) {
						t.Errorf("the wait counted from %v (%v), want after the action's exit at %v, and the removal's own time, from %v to %v (action_removed: %v)",
							from, err, r.FinishedAt, r.Removing, latest, started["action_removed"])
					}
					late := sent.Sub(from) - time.Second
					lates = append(lates, late)
					if math.Abs(float64(late)) > float64(tc.maxLate) {
						t.Errorf("start request sent %v after the action's removal + 1 s, want within ±%v", late, tc.maxLate)
					}
					waitDone(t, e, r.ID, 30*time.Second)
				}
				t.Logf("%s, %s: start request sent %v after removal + WAIT_SECONDS", e.row().name, tc.name, lates)
			})
		}
	})
}
