package phase

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/testkit/fake"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
)

// unreadableLog is an engine on which no run's log can be read back: each
// run comes with an empty tail and a note that says why.
type unreadableLog struct{ *fake.Engine }

const logNote = `no log tail: the log driver "none" cannot be read back`

func (u unreadableLog) Follow(ctx context.Context, id string, sent time.Time, tail int, since string) (engine.Run, error) {
	r, err := u.Engine.Follow(ctx, id, sent, tail, since)
	r.Output, r.Note = []string{}, logNote
	return r, err
}

// TestTwoLogNote: a run whose log cannot be read back is no failure of
// the waiter: its attempt in the result has an empty tail and the
// engine's note, as log_note.
func TestTwoLogNote(t *testing.T) {
	eng := unreadableLog{waiterFake(false)}
	eng.Exits = map[string][]int{"act-waitdaemon-user": {5}}
	var out bytes.Buffer
	if err := Two(context.Background(), eng, waiterArgs(0, false), Options{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var r struct {
		Attempts []json.RawMessage `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil || len(r.Attempts) != 1 {
		t.Fatalf("result line %s (%v), want one attempt", lines[len(lines)-1], err)
	}
	var a map[string]any
	_ = json.Unmarshal(r.Attempts[0], &a)
	got, _ := json.Marshal(map[string]any{"exit_code": a["exit_code"], "log_tail": a["log_tail"], "log_note": a["log_note"]})
	want := `{"exit_code":5,"log_note":"` + strings.ReplaceAll(logNote, `"`, `\"`) + `","log_tail":[]}`
	if diff := linediff.Text(want, string(got)); diff != "" {
		t.Errorf("attempt (-want +got):\n%s", diff)
	}
}
