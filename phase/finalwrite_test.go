package phase

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestTwoFinalWriteBounded: the device answers every write until the
// final one, which it never finishes: the waiter ends all the same,
// within finalWrite (on Docker, a waiter that never ended would never
// remove itself). The same store is the last step of cancel,
// actionFailed and exitUnknown.
func TestTwoFinalWriteBounded(t *testing.T) {
	m := &mountRecorder{disk: filepath.Join(t.TempDir(), "disk")}
	if err := os.MkdirAll(filepath.Join(m.disk, "var", "log"), 0o755); err != nil {
		t.Fatal(err)
	}
	release, hung := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	mounts := 0
	was, bound, earlier, final := onDevice, provisionalWrite, earlierWrite, finalWrite
	provisionalWrite, earlierWrite, finalWrite = 50*time.Millisecond, 100*time.Millisecond, 200*time.Millisecond
	onDevice = func(device string, fn func(root string) error) error {
		mu.Lock()
		mounts++
		n := mounts
		mu.Unlock()
		if n == 3 { // the answer to phase 1, the write before the run, then the result: never answered
			defer close(hung)
			<-release
		}
		return m.onDevice(device, fn)
	}
	t.Cleanup(func() {
		close(release)
		<-hung
		onDevice, provisionalWrite, earlierWrite, finalWrite = was, bound, earlier, final
	})

	eng := waiterFake(false)
	eng.Exits = map[string][]int{"act-waitdaemon-user": {5}}
	args := waiterArgs(0, false)
	args.ResultDevice, args.ResultFile = "/dev/sdb1", "/var/log/w.json"
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- Two(context.Background(), eng, args, Options{Stdout: &out}) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("phase 2 still waiting 5 s (25 times finalWrite) on the final write, which the device never finishes; calls %q", eng.Calls())
	}
}
