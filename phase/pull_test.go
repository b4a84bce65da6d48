package phase

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
)

// pacedPull is an engine whose pull reports its progress in bursts: each
// burst's reports at once, a pause between bursts.
type pacedPull struct {
	engine.Engine
	bursts [][]int64 // bytes done; of 100
	pause  time.Duration
}

func (p pacedPull) Pull(_ context.Context, _ imageref.Ref, _ *engine.Auth, progress func(done, total int64)) error {
	for i, burst := range p.bursts {
		if i > 0 {
			time.Sleep(p.pause)
		}
		for _, done := range burst {
			progress(done, 100)
		}
	}
	return nil
}

// TestPullProgress: a pull's progress is logged at most once a second:
// nothing in its first second, then the first report after each second
// that passed since the last line.
func TestPullProgress(t *testing.T) {
	eng := pacedPull{Engine: newFake(), bursts: [][]int64{{1, 2, 3}, {40, 41}, {90, 100}}, pause: pullEvery + 50*time.Millisecond}
	ref, err := imageref.Parse("reboot:1")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := pull(context.Background(), eng, mustValidate(t, "IMAGE=reboot:1"), ref, &out); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var line struct {
			Msg   string
			Image string
			Done  int64 `json:"done_bytes"`
			Total int64 `json:"total_bytes"`
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		got = append(got, fmt.Sprintf("%s %s %d/%d", line.Msg, line.Image, line.Done, line.Total))
	}
	want := []string{"pulling reboot:1 40/100", "pulling reboot:1 90/100"}
	if diff := linediff.Lines(want, got); diff != "" {
		t.Errorf("logged (-want +got):\n%s", diff)
	}
}

// TestOnePullPolicy: WAITDAEMON_PULL_POLICY decides the pull. if-not-present
// pulls an absent image alone, always pulls a present one too, and never
// pulls nothing: an absent image then fails the action, not as bad input,
// and leaves nothing (README, Settings and Exit codes).
func TestOnePullPolicy(t *testing.T) {
	cases := []struct {
		policy   string
		present  bool
		wantPull bool
		wantErr  string // "" for a hand-off
	}{
		{policy: "", present: true},
		{policy: "", present: false, wantPull: true},
		{policy: "if-not-present", present: false, wantPull: true},
		{policy: "ALWAYS", present: true, wantPull: true},
		{policy: "never", present: true},
		{policy: "never", present: false, wantErr: "image reboot:1 is not present, and WAITDAEMON_PULL_POLICY=never forbids pulling it"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s, present %v", tc.policy, tc.present), func(t *testing.T) {
			eng := newFake()
			eng.Images = map[string]bool{"reboot:1": tc.present}
			out, _, err := phaseOne(t, eng, "IMAGE=reboot:1", "WAITDAEMON_PULL_POLICY="+tc.policy)
			if pulled := len(eng.Pulls()) > 0; pulled != tc.wantPull {
				t.Errorf("pulled %v, want %v; calls %q", pulled, tc.wantPull, eng.Calls())
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || exitCode(err) == engine.ExitInput {
					t.Errorf("phase 1: %v (exit %d); want %q, not bad input", err, exitCode(err), tc.wantErr)
				}
				if got := eng.Names(); len(got) != 0 {
					t.Errorf("left %q", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantDecision := map[bool]string{true: decisionPull, false: decisionPresent}[tc.wantPull]
			var handed struct{ Pull []pullPlan }
			if json.Unmarshal([]byte(lastLine(out)), &handed) != nil || len(handed.Pull) != 1 || handed.Pull[0].Decision != wantDecision {
				t.Errorf("hand-off %s; want the decision %q", lastLine(out), wantDecision)
			}
		})
	}
}

// lastLine is the last line of out.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}
