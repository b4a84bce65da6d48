package phase

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/testkit/fake"
)

// fakeDevices makes findDevice see devices alone, by path.
func fakeDevices(t *testing.T, devices ...engine.Device) {
	t.Helper()
	was := findDevice
	findDevice = func(p string) (engine.Device, error) {
		for _, d := range devices {
			if d.Path == p {
				return d, nil
			}
		}
		return engine.Device{}, fmt.Errorf("stat %s: no such file or directory", p)
	}
	t.Cleanup(func() { findDevice = was })
}

// TestOneResultDevice: with WAITDAEMON_RESULT_DEVICE, the waiter is given
// the device as the action sees it, and told the file's path on it;
// nothing is bound. A device the action does not see is bad input naming
// it, before anything is made; so is a device without a file, and a
// file's path that is not absolute.
func TestOneResultDevice(t *testing.T) {
	sdb1 := engine.Device{Path: "/dev/sdb1", Major: 8, Minor: 17}
	fakeDevices(t, sdb1)
	eng := newFake()
	out, _, err := phaseOne(t, eng, "IMAGE=reboot:1", "WAITDAEMON_DRY_RUN=true", "WAITDAEMON_RESULT_DEVICE=/dev/sdb1", "WAITDAEMON_RESULT_FILE=/var/log/w.json")
	if err != nil {
		t.Fatal(err)
	}
	var plan struct{ Waiter struct{ Create fake.Planned } }
	if err := json.Unmarshal([]byte(out), &plan); err != nil || plan.Waiter.Create.Waiter == nil {
		t.Fatalf("plan = %s (%v)", out, err)
	}
	w := plan.Waiter.Create.Waiter
	if w.Device == nil || *w.Device != sdb1 || w.Bind.Host != "" {
		t.Errorf("waiter's device %+v, bind %+v; want %+v and no bind", w.Device, w.Bind, sdb1)
	}
	for _, arg := range []string{"--result-device=/dev/sdb1", "--result-file=/var/log/w.json"} {
		if !slices.Contains(w.Args, arg) {
			t.Errorf("waiter's args %q lack %s", w.Args, arg)
		}
	}

	for _, tc := range []struct {
		env     []string
		wantErr string
	}{
		{[]string{"WAITDAEMON_RESULT_DEVICE=/dev/sdz1", "WAITDAEMON_RESULT_FILE=/var/log/w.json"},
			`WAITDAEMON_RESULT_DEVICE="/dev/sdz1": expected a block device this action sees, like /dev/sda1 (stat /dev/sdz1: no such file or directory`},
		{[]string{"WAITDAEMON_RESULT_DEVICE=/dev/sdb1"}, `WAITDAEMON_RESULT_DEVICE="/dev/sdb1": expected it with WAITDAEMON_RESULT_FILE`},
		{[]string{"WAITDAEMON_RESULT_DEVICE=sdb1", "WAITDAEMON_RESULT_FILE=/w.json"}, `WAITDAEMON_RESULT_DEVICE="sdb1": expected a block device under /dev`},
		{[]string{"WAITDAEMON_RESULT_DEVICE=/dev/sdb1", "WAITDAEMON_RESULT_FILE=var/w.json"}, `WAITDAEMON_RESULT_FILE="var/w.json": expected an absolute path to a file on WAITDAEMON_RESULT_DEVICE's file system`},
	} {
		eng := newFake()
		_, _, err := phaseOne(t, eng, append([]string{"IMAGE=reboot:1"}, tc.env...)...)
		if exitCode(err) != engine.ExitInput || !strings.Contains(fmt.Sprint(err), tc.wantErr) {
			t.Errorf("%q: %v; want exit 2, %q", tc.env, err, tc.wantErr)
		}
		if slices.ContainsFunc(eng.Calls(), func(c string) bool { return strings.HasPrefix(c, "Create") }) {
			t.Errorf("%q: created something: %q", tc.env, eng.Calls())
		}
	}
	// A file at the root of the device's file system is fine: nothing is
	// bound.
	if _, _, err := phaseOne(t, newFake(), "IMAGE=reboot:1", "WAITDAEMON_DRY_RUN=true", "WAITDAEMON_RESULT_DEVICE=/dev/sdb1", "WAITDAEMON_RESULT_FILE=/w.json"); err != nil {
		t.Errorf("a file at the device's root: %v", err)
	}

	// The waiter's no names the device.
	eng = newFake()
	eng.Says = map[string][]string{"act-waitdaemon-waiter": {`{"msg":"` + msgResultUnwritable + `","error":"the file system on /dev/sdb1 has no directory /var/log"}`}}
	_, _, err = phaseOne(t, eng, "IMAGE=reboot:1", "WAITDAEMON_RESULT_DEVICE=/dev/sdb1", "WAITDAEMON_RESULT_FILE=/var/log/w.json")
	if want := `WAITDAEMON_RESULT_FILE="/var/log/w.json": expected a file the waiter can write on WAITDAEMON_RESULT_DEVICE=/dev/sdb1 (the file system on /dev/sdb1 has no directory /var/log)`; exitCode(err) != engine.ExitInput || fmt.Sprint(err) != want {
		t.Errorf("phase 1: %v; want %q", err, want)
	}
}

// mountRecorder stands for the kernel's mounts: each onDevice mounts a
// directory of its own, a copy of the device's file system, and copies it
// back when unmounted.
type mountRecorder struct {
	disk    string // the device's file system, between mounts
	devices []string
	mounted bool
}

func (m *mountRecorder) onDevice(device string, fn func(root string) error) error {
	if m.mounted {
		return errors.New("mounted twice at once")
	}
	m.devices = append(m.devices, device)
	m.mounted = true
	defer func() { m.mounted = false }()
	root := m.disk + ".mounted"
	if err := os.Rename(m.disk, root); err != nil {
		return err
	}
	defer os.Rename(root, m.disk)
	return fn(root)
}

// TestTwoResultDevice: on a device, the waiter mounts it for each write,
// the answer to phase 1, each run's provisional result and the last, and
// never writes while it is not mounted.
func TestTwoResultDevice(t *testing.T) {
	m := &mountRecorder{disk: filepath.Join(t.TempDir(), "disk")}
	if err := os.MkdirAll(filepath.Join(m.disk, "var", "log"), 0o755); err != nil {
		t.Fatal(err)
	}
	was := onDevice
	onDevice = m.onDevice
	t.Cleanup(func() { onDevice = was })

	eng := &recordingStarts{Engine: waiterFake(true), file: filepath.Join(m.disk, "var", "log", "w.json"), before: map[string][]result{}}
	eng.Exits = map[string][]int{"act-waitdaemon-user": {5}}
	args := waiterArgs(0, true)
	args.ResultDevice, args.ResultFile = "/dev/sdb1", "/var/log/w.json"
	var out bytes.Buffer
	if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	for _, e := range eng.errs {
		t.Error(e)
	}
	// The answer, before the attempt, before the fallback, the result.
	if want := []string{"/dev/sdb1", "/dev/sdb1", "/dev/sdb1", "/dev/sdb1"}; !slices.Equal(m.devices, want) {
		t.Errorf("mounts %q, want %q", m.devices, want)
	}
	if u, f := eng.before["act-waitdaemon-user"], eng.before["act-waitdaemon-fallback"]; len(u) != 1 || len(f) != 1 || u[0].State != stateRunning || f[0].State != stateRunning {
		t.Errorf("provisional results: user %+v, fallback %+v", u, f)
	}
	data, err := os.ReadFile(eng.file)
	var res result
	if err == nil {
		err = json.Unmarshal(data, &res)
	}
	if err != nil || res.State != stateDone || res.ExitCode != 5 || res.Fallback == nil {
		t.Errorf("result on the device: %s (%v)", data, err)
	}

	t.Run("no such directory", func(t *testing.T) {
		unwritableLinger = 0
		t.Cleanup(func() { unwritableLinger = 30 * time.Second })
		eng := waiterFake(false)
		args := waiterArgs(0, false)
		args.ResultDevice, args.ResultFile = "/dev/sdb1", "/var/lib/waitdaemon/w.json"
		var out bytes.Buffer
		err := Two(context.Background(), eng, args, Options{Stdout: &out})
		if want := "the file system on /dev/sdb1 has no directory /var/lib/waitdaemon"; err == nil || err.Error() != want || !strings.Contains(out.String(), want) {
			t.Errorf("%v, output:\n%s\nwant the waiter to say %q", err, out.String(), want)
		}
		if slices.ContainsFunc(eng.Calls(), func(c string) bool { return strings.HasPrefix(c, "Start") }) {
			t.Errorf("it started something: %q", eng.Calls())
		}
		if _, err := os.Stat(filepath.Join(m.disk, "var", "lib")); err == nil {
			t.Error("it made the directory")
		}
	})
}

// TestFindDevice: a block device's numbers; anything else is refused.
func TestFindDevice(t *testing.T) {
	if _, err := findDevice("/dev/null"); err == nil || err.Error() != "/dev/null is not a block device" {
		t.Errorf("/dev/null: %v; want it refused, a character device", err)
	}
	if _, err := findDevice("/dev/nonexistent-waitdaemon"); err == nil {
		t.Error("a missing device was found")
	}
	blocks, _ := filepath.Glob("/sys/dev/block/*")
	for _, b := range blocks {
		numbers := filepath.Base(b) // major:minor
		name, err := os.Readlink(b)
		if err != nil {
			continue
		}
		dev := "/dev/" + filepath.Base(name)
		d, err := findDevice(dev)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil || fmt.Sprintf("%d:%d", d.Major, d.Minor) != numbers || d.Path != dev {
			t.Errorf("%s: %+v, %v; want %s", dev, d, err, numbers)
		}
		return
	}
	t.Log("no block device in /dev to read")
}

// TestTwoResultDeviceHangs: a write before a run that the device does not
// finish (a failing disk) holds the start up for provisionalWrite at
// most: the run starts, the result says that write did not finish, and
// no write overtakes the one still under way, so that the file ends as
// the last one written.
func TestTwoResultDeviceHangs(t *testing.T) {
	m := &mountRecorder{disk: filepath.Join(t.TempDir(), "disk")}
	if err := os.MkdirAll(filepath.Join(m.disk, "var", "log"), 0o755); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var mu sync.Mutex
	mounts := 0
	was, bound := onDevice, provisionalWrite
	provisionalWrite = 50 * time.Millisecond
	onDevice = func(device string, fn func(root string) error) error {
		mu.Lock()
		mounts++
		n := mounts
		mu.Unlock()
		if n == 2 { // the write before the first run: the device hangs
			<-release
		}
		return m.onDevice(device, fn)
	}
	t.Cleanup(func() { onDevice, provisionalWrite = was, bound })

	eng := waiterFake(true)
	eng.Exits = map[string][]int{"act-waitdaemon-user": {5}}
	args := waiterArgs(0, true)
	args.ResultDevice, args.ResultFile = "/dev/sdb1", "/var/log/w.json"
	go func() {
		for !slices.Contains(eng.Calls(), "Start act-waitdaemon-fallback") {
			time.Sleep(time.Millisecond)
		}
		close(release)
	}()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- Two(context.Background(), eng, args, Options{Stdout: &out}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("phase 2: %v\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatalf("phase 2 still waiting 10 s on a write before the run that the device does not finish; calls %q", eng.Calls())
	}
	res := lastResult(t, out.String())
	wantNote := "the result before attempt 1 was not written within 50ms: the run started without it; " +
		"the result before the fallback was not written: the write before it had not ended"
	if res.WriteNote != wantNote || res.ExitCode != 5 {
		t.Errorf("result %+v; want exit 5, and the note %q", res, wantNote)
	}
	data, err := os.ReadFile(filepath.Join(m.disk, "var", "log", "w.json"))
	var file result
	if err == nil {
		err = json.Unmarshal(data, &file)
	}
	if err != nil || file.State != stateDone || file.WriteNote != res.WriteNote {
		t.Errorf("result on the device: %s (%v); want the last result, with its note", data, err)
	}
}

// TestTwoResultDeviceHangsForGood: a write before a run that the device
// never finishes does not hold up the result for ever: the final write
// waits for it earlierWrite at most, then is left out, and the waiter
// ends, with the result logged and an error saying why it is not on the
// device.
func TestTwoResultDeviceHangsForGood(t *testing.T) {
	m := &mountRecorder{disk: filepath.Join(t.TempDir(), "disk")}
	if err := os.MkdirAll(filepath.Join(m.disk, "var", "log"), 0o755); err != nil {
		t.Fatal(err)
	}
	release, hung := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	mounts := 0
	was, bound, earlier := onDevice, provisionalWrite, earlierWrite
	provisionalWrite, earlierWrite = 50*time.Millisecond, 100*time.Millisecond
	onDevice = func(device string, fn func(root string) error) error {
		mu.Lock()
		mounts++
		n := mounts
		mu.Unlock()
		if n == 2 { // the write before the first run: the device never answers
			<-release
			defer close(hung)
		}
		return m.onDevice(device, fn)
	}
	t.Cleanup(func() {
		close(release)
		<-hung // the write the device held has ended: nothing reads what is restored
		onDevice, provisionalWrite, earlierWrite = was, bound, earlier
	})

	eng := waiterFake(false)
	eng.Exits = map[string][]int{"act-waitdaemon-user": {5}}
	args := waiterArgs(0, false)
	args.ResultDevice, args.ResultFile = "/dev/sdb1", "/var/log/w.json"
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- Two(context.Background(), eng, args, Options{Stdout: &out}) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("phase 2 still waiting 10 s on a write that the device never finishes; calls %q", eng.Calls())
	}
	if err == nil || !strings.Contains(err.Error(), "had not ended within 100ms") {
		t.Errorf("phase 2 = %v; want an error saying the write before had not ended", err)
	}
	if res := lastResult(t, out.String()); res.ExitCode != 5 || res.State != stateDone {
		t.Errorf("result %+v; want it logged, exit 5, done", res)
	}
}
