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
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/engine/fake"
)

// shortDown makes a second of WAITDAEMON_DOWN_WITHIN last unit, for
// one test.
func shortDown(t *testing.T, unit time.Duration) {
	t.Helper()
	was := downUnit
	downUnit = unit
	t.Cleanup(func() { downUnit = was })
}

// TestTwoDownWithin: with DownWithin, a run that exits 0 and leaves the
// waiter alive DownWithin seconds later is a failed attempt, exit code 0
// with a note; the retries and the fallback follow, and what failed is
// kept.
func TestTwoDownWithin(t *testing.T) {
	shortDown(t, 50*time.Millisecond)
	eng := waiterFake(true)
	args := waiterArgs(1, true)
	args.DownWithin = 2
	var out bytes.Buffer
	began := time.Now()
	if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	res := lastResult(t, out.String())
	note := "did not go down within 2 s"
	runs := slices.Clone(res.Attempts)
	if res.Fallback != nil {
		runs = append(runs, *res.Fallback)
	}
	if len(res.Attempts) != 2 || res.Fallback == nil {
		t.Fatalf("result = %+v; want two attempts and the fallback", res)
	}
	for i, a := range runs {
		if a.ExitCode != 0 || a.Note != note || !a.Kept || !a.Ended {
			t.Errorf("run %d = %+v; want exit 0, note %q, kept, ended", i+1, a, note)
		}
	}
	if res.ExitCode != 0 || res.Note != note || res.State != stateDone {
		t.Errorf("result: exit %d, note %q, state %q; want 0, %q, %q", res.ExitCode, res.Note, res.State, note, stateDone)
	}
	// Three runs, each waited for 2 units.
	if min := 6 * downUnit; took < min {
		t.Errorf("took %v, want at least %v: each run's wait to go down", took, min)
	}
	var starts []string
	for _, c := range eng.Calls() {
		if strings.HasPrefix(c, "Start ") {
			starts = append(starts, c)
		}
	}
	if want := []string{"Start act-waitdaemon-user", "Start act-waitdaemon-user-2", "Start act-waitdaemon-fallback"}; !slices.Equal(starts, want) {
		t.Errorf("starts %q, want %q", starts, want)
	}
	if !strings.Contains(out.String(), `"msg":"waiting for the machine to go down"`) {
		t.Errorf("no line says the waiter waits for the machine to go down:\n%s", out.String())
	}
	if want := []string{"act-waitdaemon-fallback", "act-waitdaemon-user", "act-waitdaemon-user-2", "act-waitdaemon-waiter"}; !slices.Equal(eng.Names(), want) {
		t.Errorf("left %q, want %q", eng.Names(), want)
	}

	t.Run("the machine goes down meanwhile", func(t *testing.T) {
		eng := waiterFake(false)
		eng.Exits = map[string][]int{"act-waitdaemon-user": {1, 0}}
		args := waiterArgs(1, false)
		args.DownWithin = 3600
		args.ResultFile = filepath.Join(t.TempDir(), "result.json")
		// The first run fails and is retried at once; the second exits
		// 0, and the waiter waits for the machine, which goes down: the
		// signal comes as the waiter says it waits.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out := &cancelOn{msg: "waiting for the machine to go down", cancel: cancel}
		if err := Two(ctx, eng, args, Options{Stdout: out}); err != nil {
			t.Fatal(err)
		}
		if !out.seen {
			t.Fatalf("the waiter never waited for the machine to go down:\n%s", out.String())
		}
		// Nothing more starts, nothing is removed, no result is written
		// over the last one.
		if strings.Contains(out.String(), `"msg":"result"`) {
			t.Errorf("a result after the signal:\n%s", out.String())
		}
		if n := len(eng.Calls()); eng.Calls()[n-1] != "Follow act-waitdaemon-user-2" {
			t.Errorf("calls after the last run: %q", eng.Calls())
		}
		// The file still says the second attempt started and did not
		// end: the next boot reads that it took the machine down.
		data, err := os.ReadFile(args.ResultFile)
		var res result
		if err == nil {
			err = json.Unmarshal(data, &res)
		}
		if err != nil || res.State != stateRunning || len(res.Attempts) != 2 || !res.Attempts[0].Ended || res.Attempts[0].ExitCode != 1 || res.Attempts[1].Ended {
			t.Errorf("result file: %s (%v); want attempt 1 ended (exit 1), attempt 2 started, not ended", data, err)
		}
	})

	t.Run("the action failed", func(t *testing.T) {
		eng := waiterFake(false)
		eng.ActionCode = 137
		args := waiterArgs(0, false)
		args.DownWithin = 5
		args.ResultFile = filepath.Join(t.TempDir(), "result.json")
		if err := Two(context.Background(), eng, args, Options{Stdout: &bytes.Buffer{}}); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(args.ResultFile)
		var res result
		if err := json.Unmarshal(data, &res); err != nil || res.State != stateDone || res.ExitCode != -1 || res.NotStarted == "" || res.WrittenAt == "" {
			t.Errorf("result file: %s (%v); want done, not started", data, err)
		}
	})

	t.Run("unset", func(t *testing.T) {
		eng := waiterFake(true)
		var out bytes.Buffer
		if err := Two(context.Background(), eng, waiterArgs(1, true), Options{Stdout: &out}); err != nil {
			t.Fatal(err)
		}
		res := lastResult(t, out.String())
		if len(res.Attempts) != 1 || res.Fallback != nil || res.Attempts[0].Note != "" || res.Note != "" {
			t.Errorf("result %+v; want one successful attempt", res)
		}
	})
}

// cancelOn is an output that calls cancel when a line says msg.
type cancelOn struct {
	bytes.Buffer
	msg    string
	cancel func()
	seen   bool
}

func (c *cancelOn) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(c.msg)) {
		c.seen = true
		c.cancel()
	}
	return c.Buffer.Write(p)
}

// recordingStarts is the fake engine, whose Start first reads the result
// file as it is at that moment.
type recordingStarts struct {
	*fake.Engine
	file   string
	before map[string][]result // by container, one per start
	errs   []string
}

func (r *recordingStarts) Start(ctx context.Context, id string) error {
	data, err := os.ReadFile(r.file)
	var res result
	if err == nil {
		err = json.Unmarshal(data, &res)
	}
	if err != nil {
		r.errs = append(r.errs, fmt.Sprintf("at Start %s: %v", id, err))
	}
	r.before[id] = append(r.before[id], res)
	return r.Engine.Start(ctx, id)
}

// TestTwoProvisional: before each run starts, the result file holds the
// result so far, that run started and not ended, and the boot's ID.
func TestTwoProvisional(t *testing.T) {
	dir := t.TempDir()
	eng := &recordingStarts{Engine: waiterFake(true), file: filepath.Join(dir, "result.json"), before: map[string][]result{}}
	eng.Exits = map[string][]int{"act-waitdaemon-user": {3, 4}}
	eng.Says = map[string][]string{"act-waitdaemon-user": {"kexec: no kernel"}}
	args := waiterArgs(1, true)
	args.ResultFile = eng.file
	var out bytes.Buffer
	if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	for _, e := range eng.errs {
		t.Error(e)
	}
	boot := bootID()
	check := func(name string, r result, ended []int, fallback bool) {
		t.Helper()
		if r.State != stateRunning || r.BootID != boot || r.Action != "act" || r.ExitCode != -1 || r.WrittenAt == "" {
			t.Errorf("%s: state %q, boot %q, action %q, exit %d, written %q; want %q, %q, act, -1, a time",
				name, r.State, r.BootID, r.Action, r.ExitCode, r.WrittenAt, stateRunning, boot)
		}
		var codes []int
		for _, a := range r.Attempts {
			if a.Ended {
				codes = append(codes, a.ExitCode)
				if len(a.LogTail) == 0 {
					t.Errorf("%s: ended attempt %+v has no log tail", name, a)
				}
			}
		}
		if len(ended) > 0 && (r.Image != "image-of-act-waitdaemon-user" || !slices.Equal(r.Command, []string{"run", "act-waitdaemon-user"})) {
			t.Errorf("%s: image %q, command %q; want the last run's", name, r.Image, r.Command)
		}
		if !slices.Equal(codes, ended) {
			t.Errorf("%s: ended attempts' codes %v, want %v", name, codes, ended)
		}
		runningUser := len(r.Attempts) == len(ended)+1 && !r.Attempts[len(ended)].Ended && r.Attempts[len(ended)].Container == attemptName("act-waitdaemon-user", len(ended)+1) &&
			r.Attempts[len(ended)].Attempt == len(ended)+1 && r.Attempts[len(ended)].ExitCode == -1
		runningFallback := r.Fallback != nil && !r.Fallback.Ended && r.Fallback.Container == "act-waitdaemon-fallback" && r.Fallback.ExitCode == -1
		if fallback && (!runningFallback || len(r.Attempts) != len(ended)) || !fallback && (!runningUser || r.Fallback != nil) {
			data, _ := json.Marshal(r)
			t.Errorf("%s: %s; want the run starting as started and not ended", name, data)
		}
	}
	user, fb := append(eng.before["act-waitdaemon-user"], eng.before["act-waitdaemon-user-2"]...), eng.before["act-waitdaemon-fallback"]
	if len(user) != 2 || len(fb) != 1 {
		t.Fatalf("starts: user %d, fallback %d; want 2 and 1", len(user), len(fb))
	}
	check("before attempt 1", user[0], nil, false)
	check("before attempt 2", user[1], []int{3}, false)
	check("before the fallback", fb[0], []int{3, 4}, true)

	// When the last run ends, the file is the result, as the last line.
	data, err := os.ReadFile(eng.file)
	if err != nil {
		t.Fatal(err)
	}
	var final result
	if err := json.Unmarshal(data, &final); err != nil {
		t.Fatal(err)
	}
	if final.State != stateDone || final.ExitCode != 4 || final.Fallback == nil || !final.Fallback.Ended || final.Fallback.ExitCode != 0 || final.BootID != boot {
		t.Errorf("final result file: %s", data)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".result-*")); len(left) != 0 {
		t.Errorf("temporary files left: %q", left)
	}
}

// TestDownWithin: WAITDAEMON_DOWN_WITHIN is whole seconds from 1 to
// 3600, unset by default; anything else is bad input naming it. Phase 1
// hands it to the waiter.
func TestDownWithin(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int
	}{{"", 0}, {"  ", 0}, {"1", 1}, {" 30 ", 30}, {"3600", 3600}} {
		s, err := ReadInputs([]string{"IMAGE=alpine", "DOCKER_CONFIG=" + t.TempDir(), "WAITDAEMON_DOWN_WITHIN=" + tc.value}).Validate()
		if err != nil || s.DownWithin != tc.want {
			t.Errorf("WAITDAEMON_DOWN_WITHIN=%q: %d, %v; want %d", tc.value, s.DownWithin, err, tc.want)
		}
	}
	for _, value := range []string{"0", "3601", "-1", "2s", "1.5", "abc"} {
		_, err := ReadInputs([]string{"IMAGE=alpine", "DOCKER_CONFIG=" + t.TempDir(), "WAITDAEMON_DOWN_WITHIN=" + value}).Validate()
		want := fmt.Sprintf("WAITDAEMON_DOWN_WITHIN=%q: expected a whole number of seconds from 1 to 3600, like 30", value)
		if err == nil || err.Error() != want || exitCode(err) != 2 {
			t.Errorf("WAITDAEMON_DOWN_WITHIN=%q: %v; want %q, exit 2", value, err, want)
		}
	}
	args := WaiterArgs{UserContainer: "u", ActionContainer: "a", DownWithin: 5}.Args()
	if !slices.Contains(args, "--down-within=5") {
		t.Errorf("waiter args %q lack --down-within=5", args)
	}
	if args := (WaiterArgs{UserContainer: "u"}).Args(); slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--down-within") }) {
		t.Errorf("waiter args %q have --down-within, unset", args)
	}
}

// TestTwoProvisionalFails: a result that cannot be written before a run
// is logged, and the run starts all the same; the last write's failure is
// the waiter's error.
func TestTwoProvisionalFails(t *testing.T) {
	was := createTemp
	createTemp = func(string, string) (tempFile, error) { return nil, errDisk }
	t.Cleanup(func() { createTemp = was })
	eng := waiterFake(true)
	eng.Exits = map[string][]int{"act-waitdaemon-user": {1}}
	args := waiterArgs(0, true)
	args.ResultFile = filepath.Join(t.TempDir(), "result.json")
	var out bytes.Buffer
	err := Two(context.Background(), eng, args, Options{Stdout: &out})
	if !errors.Is(err, errDisk) {
		t.Errorf("Two() = %v; want the last write's failure", err)
	}
	if n := strings.Count(out.String(), `"msg":"could not write the result so far"`); n != 2 {
		t.Errorf("%d lines say the result so far could not be written, want 2 (the attempt's, the fallback's):\n%s", n, out.String())
	}
	var starts []string
	for _, c := range eng.Calls() {
		if strings.HasPrefix(c, "Start ") {
			starts = append(starts, c)
		}
	}
	if want := []string{"Start act-waitdaemon-user", "Start act-waitdaemon-fallback"}; !slices.Equal(starts, want) {
		t.Errorf("starts %q, want %q", starts, want)
	}
}
