package phase

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/testkit/fake"
)

// signalOnAgain is the fake, with a signal that comes while the
// waiter makes re-run's container.
type signalOnAgain struct {
	*fake.Engine
	rerun  string
	signal context.CancelFunc
}

func (s signalOnAgain) Again(ctx context.Context, first, name string) (string, error) {
	if name == s.rerun {
		s.signal()
	}
	return s.Engine.Again(ctx, first, name)
}

// TestTwoSignalWhileMakingRerun: a signal while a re-run's container is
// being made (an Again that does not heed it, as a make may happen all
// the same) is taken as one in the pause before it: that re-run never
// starts, the fallback does (not followed), the result says why, and the
// container made for the re-run, never started, is removed.
func TestTwoSignalWhileMakingRerun(t *testing.T) {
	eng := waiterFake(true)
	eng.Exits = map[string][]int{"act-waitdaemon-user": {1}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := waiterArgs(3, true)
	args.ResultFile = filepath.Join(t.TempDir(), "result.json")
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Two(ctx, signalOnAgain{eng, "act-waitdaemon-user-2", cancel}, args, Options{Stdout: &out})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("phase 2: %v\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("phase 2 still running 10 s after the signal; calls %q", eng.Calls())
	}
	if slices.Contains(eng.Calls(), "Start act-waitdaemon-user-2") {
		t.Errorf("the re-run started after the signal: %q", eng.Calls())
	}
	res := lastResult(t, out.String())
	if len(res.Attempts) != 1 || !strings.Contains(res.Stopped, "re-run 2") {
		t.Errorf("result = %+v; want the one attempt, and why no re-run came", res)
	}
	if fb := res.Fallback; fb == nil || fb.Ended || !slices.Contains(eng.Calls(), "Start act-waitdaemon-fallback") {
		t.Errorf("fallback = %+v, calls %q; want it started, not followed", res.Fallback, eng.Calls())
	}
	if slices.Contains(eng.Names(), "act-waitdaemon-user-2") {
		t.Errorf("the re-run's container, never started, is still there: %q", eng.Names())
	}
	checkResultFile(t, args.ResultFile, res)
}

// TestTwoSignalWhileWritingFirst: a signal while the result before the
// first run is written (a device slow to answer) starts nothing: the
// user container is removed and the result says it was cancelled.
func TestTwoSignalWhileWritingFirst(t *testing.T) {
	m := &mountRecorder{disk: filepath.Join(t.TempDir(), "disk")}
	if err := os.MkdirAll(filepath.Join(m.disk, "var", "log"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	mounts := 0
	was := onDevice
	onDevice = func(device string, fn func(root string) error) error {
		mu.Lock()
		mounts++
		n := mounts
		mu.Unlock()
		if n == 2 { // the write before the first run
			cancel()
		}
		return m.onDevice(device, fn)
	}
	t.Cleanup(func() { onDevice = was })
	eng := waiterFake(true)
	args := waiterArgs(1, true)
	args.ResultDevice, args.ResultFile = "/dev/sdb1", "/var/log/w.json"
	var out bytes.Buffer
	Two(ctx, eng, args, Options{Stdout: &out})
	if slices.Contains(eng.Calls(), "Start act-waitdaemon-user") {
		t.Errorf("the user container started after the signal: %q", eng.Calls())
	}
	if res := lastResult(t, out.String()); !strings.Contains(res.NotStarted, "cancelled") {
		t.Errorf("result = %+v; want it cancelled, nothing started", res)
	}
}
