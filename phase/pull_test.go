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
	"github.com/waitdaemon/waitdaemon/internal/linediff"
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
