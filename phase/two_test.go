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
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/testkit/fake"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
)

// The backoff the waiter uses, kept before init shortens it for the
// other tests (package variables are set before any init runs).
var shippedRetryBase, shippedRetryCap = retryBase, retryCap

func init() {
	// Re-runs in these tests follow each other at once.
	retryBase, retryCap = time.Millisecond, time.Millisecond
}

// waiterFake is an engine with the containers phase 1 leaves behind.
func waiterFake(fallback bool) *fake.Engine {
	eng := newFake()
	eng.Add("act-waitdaemon-waiter", labels(RoleWaiter, "act", actionID), true)
	eng.Add("act-waitdaemon-user", labels(RoleUser, "act", actionID), false)
	if fallback {
		eng.Add("act-waitdaemon-fallback", labels(RoleFallback, "act", actionID), false)
	}
	return eng
}

// onEachAttempt makes call (a method) on the user container of each of n
// attempts fail with err.
func onEachAttempt(call string, n int, err error) map[string]error {
	m := map[string]error{}
	for i := 1; i <= n; i++ {
		m[call+" "+attemptName("act-waitdaemon-user", i)] = err
	}
	return m
}

func waiterArgs(retries int, fallback bool) WaiterArgs {
	w := WaiterArgs{UserContainer: "act-waitdaemon-user", ActionContainer: actionID, ActionName: "act", WaitSeconds: 0, Retries: retries, LogTail: 2}
	if fallback {
		w.FallbackContainer = "act-waitdaemon-fallback"
	}
	return w
}

// lastResult is the result line of the waiter's output.
func lastResult(t *testing.T, out string) result {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var r struct {
		Msg string
		result
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil || r.Msg != "result" {
		t.Fatalf("last line is not the result (%v):\n%s", err, out)
	}
	return r.result
}

// TestTwo runs the user container through retries and the fallback, and
// keeps exactly what failed.
func TestTwo(t *testing.T) {
	cases := []struct {
		name         string
		exits        map[string][]int
		retries      int
		fallback     bool
		wantAttempts []int // exit codes
		wantFallback *int
		wantExit     int
		wantLeft     []string // besides the waiter
	}{
		{name: "success", wantAttempts: []int{0}},
		{name: "failure is kept", exits: map[string][]int{"act-waitdaemon-user": {3}}, wantAttempts: []int{3}, wantExit: 3, wantLeft: []string{"act-waitdaemon-user"}},
		{name: "a retry succeeds", exits: map[string][]int{"act-waitdaemon-user": {1, 1, 0}}, retries: 3, wantAttempts: []int{1, 1, 0}},
		{name: "retries spent", exits: map[string][]int{"act-waitdaemon-user": {1}}, retries: 2, wantAttempts: []int{1, 1, 1}, wantExit: 1, wantLeft: []string{"act-waitdaemon-user", "act-waitdaemon-user-2", "act-waitdaemon-user-3"}},
		{
			name: "the fallback runs after the retries", exits: map[string][]int{"act-waitdaemon-user": {2}}, retries: 1, fallback: true,
			wantAttempts: []int{2, 2}, wantFallback: new(int), wantExit: 2, wantLeft: []string{"act-waitdaemon-user", "act-waitdaemon-user-2"},
		},
		{
			name: "a failed fallback is kept too", exits: map[string][]int{"act-waitdaemon-user": {2}, "act-waitdaemon-fallback": {9}}, fallback: true,
			wantAttempts: []int{2}, wantFallback: ptr(9), wantExit: 2, wantLeft: []string{"act-waitdaemon-fallback", "act-waitdaemon-user"},
		},
		{name: "an unused fallback is removed", fallback: true, wantAttempts: []int{0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng := waiterFake(tc.fallback)
			eng.Exits = tc.exits
			var out bytes.Buffer
			if err := Two(context.Background(), eng, waiterArgs(tc.retries, tc.fallback), Options{Stdout: &out}); err != nil {
				t.Fatal(err)
			}
			res := lastResult(t, out.String())
			var codes []int
			for i, a := range res.Attempts {
				codes = append(codes, a.ExitCode)
				if a.Attempt != i+1 || len(a.LogTail) != 2 || !strings.Contains(a.LogTail[0], "run "+string(rune('1'+i))) || a.Kept != (tc.wantExit != 0) {
					t.Errorf("attempt %d = %+v", i+1, a)
				}
			}
			if !slices.Equal(codes, tc.wantAttempts) || res.ExitCode != tc.wantExit || res.Action != "act" {
				t.Errorf("result = exit %d, attempts %v, action %q; want %d, %v, act", res.ExitCode, codes, res.Action, tc.wantExit, tc.wantAttempts)
			}
			// The result names the image and command that ran, and each run
			// its start and end; each run also has a line of its own.
			if res.Image != "image-of-act-waitdaemon-user" || !slices.Equal(res.Command, []string{"run", "act-waitdaemon-user"}) {
				t.Errorf("result's image %q, command %q; want the user container's", res.Image, res.Command)
			}
			var exited []int
			for _, l := range strings.Split(out.String(), "\n") {
				var line struct {
					Msg string
					attempt
				}
				if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "user container exited" {
					exited = append(exited, line.ExitCode)
				}
			}
			if !slices.Equal(exited, tc.wantAttempts) {
				t.Errorf("user container exited lines with codes %v, want %v:\n%s", exited, tc.wantAttempts, out.String())
			}
			runs := slices.Clone(res.Attempts)
			if res.Fallback != nil {
				runs = append(runs, *res.Fallback)
			}
			for _, a := range runs {
				if a.StartedAt == "" || a.FinishedAt == "" {
					t.Errorf("run %+v lacks its start or end", a)
				}
			}
			switch {
			case tc.wantFallback == nil && res.Fallback != nil:
				t.Errorf("the fallback ran: %+v", res.Fallback)
			case tc.wantFallback != nil && (res.Fallback == nil || res.Fallback.ExitCode != *tc.wantFallback):
				t.Errorf("fallback = %+v, want exit %d", res.Fallback, *tc.wantFallback)
			}
			want := append(slices.Clone(tc.wantLeft), "act-waitdaemon-waiter")
			slices.Sort(want)
			if got := eng.Names(); !slices.Equal(got, want) {
				t.Errorf("left (-want +got):\n-%q\n+%q", want, got)
			}
			// Each attempt is a container of its own, started once.
			var starts []string
			for _, c := range eng.Calls() {
				if strings.HasPrefix(c, "Start act-waitdaemon-user") {
					starts = append(starts, c)
				}
			}
			var wantStarts []string
			for n := range tc.wantAttempts {
				wantStarts = append(wantStarts, "Start "+attemptName("act-waitdaemon-user", n+1))
			}
			if !slices.Equal(starts, wantStarts) {
				t.Errorf("the user containers were started %q, want %q", starts, wantStarts)
			}
		})
	}
}

// TestTwoWaits: the user container starts WaitSeconds after the action's
// exit, by the engine's clock, not after the waiter learnt of it.
func TestTwoWaits(t *testing.T) {
	eng := waiterFake(false)
	eng.ExitedAt = time.Now().Add(-700 * time.Millisecond)
	args := waiterArgs(0, false)
	args.WaitSeconds = 1
	var out bytes.Buffer
	began := time.Now()
	if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	var started waited
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, `"msg":"started user container"`) {
			_ = json.Unmarshal([]byte(l), &started)
		}
	}
	sent, err := time.Parse(time.RFC3339Nano, started.StartSent)
	if err != nil || sent.Before(eng.ExitedAt.Add(time.Second)) || sent.Sub(began) > 900*time.Millisecond {
		t.Errorf("start sent at %v (%v), want a second after the exit at %v, about 300 ms after the waiter began at %v", sent, err, eng.ExitedAt, began)
	}
}

// TestTwoCountsFromRemoval: the wait counts from the later of the
// action's exit and its removal, as the worker reports only once it has
// removed it; for a worker that never removes it, from removalBound
// after the exit.
func TestTwoCountsFromRemoval(t *testing.T) {
	defer func(b time.Duration) { removalBound = b }(removalBound)
	removalBound = 1500 * time.Millisecond
	for _, tc := range []struct {
		name      string
		after     time.Duration // the removal, after the exit
		kept      bool
		wantFrom  time.Duration // counted from, after the exit
		wantStart time.Duration // the start, after the exit, at least
	}{
		{name: "removed 800 ms after the exit", after: 800 * time.Millisecond, wantFrom: 800 * time.Millisecond, wantStart: 1800 * time.Millisecond},
		{name: "never removed: the bound", kept: true, wantFrom: 1500 * time.Millisecond, wantStart: 2500 * time.Millisecond},
		{name: "removed at the exit", wantFrom: 0, wantStart: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := waiterFake(false)
			eng.ExitedAt = time.Now()
			eng.RemovedAfter, eng.ActionKept = tc.after, tc.kept
			args := waiterArgs(0, false)
			args.WaitSeconds = 1
			var out bytes.Buffer
			if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err != nil {
				t.Fatal(err)
			}
			var started waited
			for _, l := range strings.Split(out.String(), "\n") {
				if strings.Contains(l, `"msg":"started user container"`) {
					_ = json.Unmarshal([]byte(l), &started)
				}
			}
			sent, err := time.Parse(time.RFC3339Nano, started.StartSent)
			from, ferr := time.Parse(time.RFC3339Nano, started.CountedFrom)
			if err != nil || ferr != nil || sent.Sub(eng.ExitedAt) < tc.wantStart || sent.Sub(eng.ExitedAt) > tc.wantStart+700*time.Millisecond ||
				from.Sub(eng.ExitedAt) < tc.wantFrom || from.Sub(eng.ExitedAt) > tc.wantFrom+300*time.Millisecond {
				t.Errorf("counted from %s, start sent %s (%v, %v); want from %v after the exit at %s, the start %v after it", started.CountedFrom, started.StartSent, err, ferr, tc.wantFrom, engine.Stamp(eng.ExitedAt), tc.wantStart)
			}
		})
	}
}

// TestTwoLate: a waiter that learns of the action's exit after the wait
// was already over starts the user container at once, and late_ms says by
// how much it missed the moment: the time since the exit, less the wait.
func TestTwoLate(t *testing.T) {
	cases := []struct {
		name    string
		ago     time.Duration // the action exited this long before the waiter ran
		wait    int
		removed bool
		wantMin int64 // late_ms, at least
	}{
		{name: "three seconds after a one-second wait", ago: 3 * time.Second, wait: 1, wantMin: 2000},
		{name: "a minute after a ten-second wait, the action gone", ago: time.Minute, wait: 10, removed: true, wantMin: 50000},
		{name: "on time", ago: 0, wait: 0, wantMin: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng := waiterFake(false)
			eng.ExitedAt = time.Now().Add(-tc.ago)
			eng.ActionRemoved = tc.removed
			args := waiterArgs(0, false)
			args.WaitSeconds = tc.wait
			var out bytes.Buffer
			if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err != nil {
				t.Fatal(err)
			}
			most := time.Since(eng.ExitedAt).Milliseconds() - int64(tc.wait)*1000
			var started waited
			for _, l := range strings.Split(out.String(), "\n") {
				if strings.Contains(l, `"msg":"started user container"`) {
					_ = json.Unmarshal([]byte(l), &started)
				}
			}
			if started.LateMS < tc.wantMin || started.LateMS > most || started.Wait != tc.wait || started.ActionRemoved != tc.removed ||
				started.User != "act-waitdaemon-user" || started.ActionExited != engine.Stamp(eng.ExitedAt) {
				t.Errorf("started = %+v, want late_ms from %d to %d, wait_seconds %d, action_removed %v, the exit at %s",
					started, tc.wantMin, most, tc.wait, tc.removed, engine.Stamp(eng.ExitedAt))
			}
		})
	}
}

// TestTwoSignals: a signal during the action or the wait removes what
// would have run, and starts nothing; one after the start leaves the user
// container running and removes nothing.
func TestTwoSignals(t *testing.T) {
	t.Run("during the action", func(t *testing.T) {
		eng := waiterFake(true)
		eng.Block = map[string]bool{"ActionExited": true}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		var out bytes.Buffer
		if err := Two(ctx, eng, waiterArgs(0, true), Options{Stdout: &out}); err != nil {
			t.Fatal(err)
		}
		checkCancelled(t, eng, out.String())
	})
	t.Run("during the wait", func(t *testing.T) {
		eng := waiterFake(true)
		args := waiterArgs(0, true)
		args.WaitSeconds = 60
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		var out bytes.Buffer
		if err := Two(ctx, eng, args, Options{Stdout: &out}); err != nil {
			t.Fatal(err)
		}
		checkCancelled(t, eng, out.String())
	})
	t.Run("after the start", func(t *testing.T) {
		eng := waiterFake(false)
		eng.Block = map[string]bool{"Follow act-waitdaemon-user": true}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		var out bytes.Buffer
		if err := Two(ctx, eng, waiterArgs(0, false), Options{Stdout: &out}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "the user container runs on") || slices.ContainsFunc(eng.Calls(), func(c string) bool { return strings.HasPrefix(c, "Remove") }) {
			t.Errorf("calls %q, output:\n%s\nwant nothing removed and the user container left running", eng.Calls(), out.String())
		}
	})
}

// TestTwoSignalWritesResult: a signal during the action or the wait
// writes a result that says so and that nothing started, over the file
// an earlier run of the action left, which would otherwise go on
// describing that run as if it were this one.
func TestTwoSignalWritesResult(t *testing.T) {
	for _, during := range []string{"the action", "the wait"} {
		t.Run(during, func(t *testing.T) {
			eng := waiterFake(true)
			args := waiterArgs(0, true)
			args.ResultFile = filepath.Join(t.TempDir(), "result.json")
			earlier := `{"action":"act","state":"done","exit_code":0,"attempts":[{"attempt":1,"container":"act-waitdaemon-user","exit_code":0,"ended":true}]}`
			if err := os.WriteFile(args.ResultFile, []byte(earlier), 0o644); err != nil {
				t.Fatal(err)
			}
			if during == "the action" {
				eng.Block = map[string]bool{"ActionExited": true}
			} else {
				args.WaitSeconds = 60
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			var out bytes.Buffer
			if err := Two(ctx, eng, args, Options{Stdout: &out}); err != nil {
				t.Fatal(err)
			}
			checkCancelled(t, eng, out.String())
			res := lastResult(t, out.String())
			if res.State != stateDone || res.ExitCode != -1 || len(res.Attempts) != 0 || res.Fallback != nil || !strings.Contains(res.NotStarted, "cancelled") {
				t.Errorf("result = %+v; want done, exit -1, no run, and not_started saying it was cancelled", res)
			}
			checkResultFile(t, args.ResultFile, res)
		})
	}
}

// TestTwoSignalWhileRemoving: a signal once the user container has
// exited (the shutdown it started) ends the removals of the finish, as
// calls to an engine the shutdown stopped would otherwise wait for it:
// the waiter still logs the result, and leaves.
func TestTwoSignalWhileRemoving(t *testing.T) {
	eng := waiterFake(false)
	eng.Block = map[string]bool{"Remove act-waitdaemon-user": true}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- Two(ctx, eng, waiterArgs(0, false), Options{Stdout: &out}) }()
	select {
	case err := <-done:
		if err == nil || !errors.Is(err, context.Canceled) {
			t.Errorf("Two() = %v, want the removal's cancel", err)
		}
		if r := lastResult(t, out.String()); r.ExitCode != 0 {
			t.Errorf("result %+v, want exit code 0", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Two() still removing the user container 10 s after the signal; calls %q", eng.Calls())
	}
}

func checkCancelled(t *testing.T, eng *fake.Engine, out string) {
	t.Helper()
	if got := eng.Names(); !slices.Equal(got, []string{"act-waitdaemon-waiter"}) {
		t.Errorf("left: %q; want the waiter alone", got)
	}
	if slices.ContainsFunc(eng.Calls(), func(c string) bool { return strings.HasPrefix(c, "Start") }) || !strings.Contains(out, "cancelled during the wait") {
		t.Errorf("calls %q, output:\n%s\nwant no start and the cancel logged", eng.Calls(), out)
	}
}

// TestTwoResultFile: the waiter answers phase 1's question, then writes
// the result file, the same as its last line.
func TestTwoResultFile(t *testing.T) {
	dir := t.TempDir()
	eng := waiterFake(false)
	eng.Exits = map[string][]int{"act-waitdaemon-user": {4}}
	args := waiterArgs(0, false)
	args.ResultFile = filepath.Join(dir, "result.json")
	var out bytes.Buffer
	if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "{") || !strings.Contains(strings.Split(out.String(), "\n")[0], msgResultWritable) {
		t.Errorf("first line is not the answer to phase 1:\n%s", out.String())
	}
	data, err := os.ReadFile(args.ResultFile)
	if err != nil {
		t.Fatal(err)
	}
	var file result
	if err := json.Unmarshal(data, &file); err != nil || file.ExitCode != 4 || file.Action != "act" || len(file.Attempts) != 1 {
		t.Errorf("result file = %s (%v)", data, err)
	}
	// It names the boot it ran in: a reboot's result is told apart.
	if boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil && (file.BootID == "" || file.BootID != strings.TrimSpace(string(boot))) {
		t.Errorf("result file's boot_id = %q, want this boot's %q", file.BootID, strings.TrimSpace(string(boot)))
	}

	t.Run("unwritable", func(t *testing.T) {
		unwritableLinger = 0
		t.Cleanup(func() { unwritableLinger = 30 * time.Second })
		eng := waiterFake(false)
		args := waiterArgs(0, false)
		args.ResultFile = filepath.Join(dir, "none", "result.json")
		var out bytes.Buffer
		if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err == nil || !strings.Contains(out.String(), msgResultUnwritable) {
			t.Errorf("error %v, output:\n%s\nwant the waiter to say it cannot write, and fail", err, out.String())
		}
		if slices.ContainsFunc(eng.Calls(), func(c string) bool { return strings.HasPrefix(c, "Start") }) {
			t.Errorf("it started something: %q", eng.Calls())
		}
	})
}

// teller is an engine whose waiter output phase 1 cannot read: it is
// told the answer instead (engine.Teller).
type teller struct {
	*fake.Engine
	told []string
}

func (t *teller) Tell(_ context.Context, line []byte) error {
	t.told = append(t.told, string(line))
	return nil
}

// TestTwoTells: on such an engine the waiter tells phase 1 its answer,
// its msg alone, and nothing else.
func TestTwoTells(t *testing.T) {
	eng := &teller{Engine: waiterFake(false)}
	args := waiterArgs(0, false)
	args.ResultFile = filepath.Join(t.TempDir(), "result.json")
	var out bytes.Buffer
	if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if want := `{"msg":"` + msgResultWritable + `"}`; len(eng.told) != 1 || eng.told[0] != want || !strings.HasPrefix(out.String(), `{"time":`) {
		t.Errorf("told %q, want just %s, and the whole line written:\n%s", eng.told, want, out.String())
	}
}

// TestTold: the told line carries the msg and why, the why cut to
// maxToldError bytes at a rune's start, so that the line stays within a
// label's 4 KB however the why escapes.
func TestTold(t *testing.T) {
	var got struct{ Msg, Error string }
	if err := json.Unmarshal(told(msgResultUnwritable, "open /r: permission denied"), &got); err != nil || got.Msg != msgResultUnwritable || got.Error != "open /r: permission denied" {
		t.Errorf("told = %+v, %v; want the msg and the error whole", got, err)
	}
	long := strings.Repeat("<", maxToldError-1) + "é" + strings.Repeat("\x01", 100)
	line := told(msgResultUnwritable, long)
	if err := json.Unmarshal(line, &got); err != nil || !utf8.ValidString(got.Error) || got.Error != strings.Repeat("<", maxToldError-1)+"…" {
		t.Errorf("told %d bytes, error %q, %v; want the error cut before the é", len(line), got.Error, err)
	}
	worst := told(msgResultUnwritable, strings.Repeat("\x01", 5000))
	if len(worst) > 4000 {
		t.Errorf("told %d bytes at worst; want at most 4000", len(worst))
	}
}

// TestTwoStartFails: a start the engine refuses is a failed attempt, with
// the engine's word as its tail and a shell's exit code: the retries and
// the fallback follow, the result is written, and the container is kept
// for inspection.
func TestTwoStartFails(t *testing.T) {
	cases := []struct {
		name     string
		err      error
		retries  int
		fallback bool
		wantCode int
	}{
		{name: "no such binary", err: errors.New(`OCI runtime create failed: exec: "/no-such-binary": stat /no-such-binary: no such file or directory: unknown`), fallback: true, wantCode: 127},
		{name: "not executable", err: errors.New(`exec: "/etc/passwd": permission denied`), retries: 2, wantCode: 126},
		{name: "any other refusal", err: errors.New("500: the engine is out of sorts"), retries: 1, fallback: true, wantCode: 125},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng := waiterFake(tc.fallback)
			eng.Fail = onEachAttempt("Start", tc.retries+1, tc.err)
			args := waiterArgs(tc.retries, tc.fallback)
			args.ResultFile = filepath.Join(t.TempDir(), "result.json")
			args.UserImage = "reboot:1"
			var out bytes.Buffer
			if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err != nil {
				t.Fatalf("phase 2: %v\n%s", err, out.String())
			}
			res := lastResult(t, out.String())
			if len(res.Attempts) != tc.retries+1 || res.ExitCode != tc.wantCode {
				t.Fatalf("result = %+v; want %d attempts, exit %d", res, tc.retries+1, tc.wantCode)
			}
			// The result names the image that could not start.
			if res.Image != "reboot:1" {
				t.Errorf("result's image %q; want reboot:1, the user container's", res.Image)
			}
			for _, a := range res.Attempts {
				if a.ExitCode != tc.wantCode || len(a.LogTail) != 1 || !strings.Contains(a.LogTail[0], tc.err.Error()) || !a.Kept || a.Image != "reboot:1" {
					t.Errorf("attempt %+v; want exit %d, the engine's word as its tail, kept, its image", a, tc.wantCode)
				}
			}
			if tc.fallback && (res.Fallback == nil || res.Fallback.ExitCode != 0) {
				t.Errorf("fallback = %+v; want it run, exit 0", res.Fallback)
			}
			// Each refusal is logged, saying which start it was.
			wantDoing := []string{"starting the user container (kept for inspection)"}
			for range tc.retries {
				wantDoing = append(wantDoing, "re-running the user container")
			}
			var doing []string
			for _, l := range strings.Split(out.String(), "\n") {
				var e struct{ Msg, Container, Doing, Error string }
				if json.Unmarshal([]byte(l), &e) == nil && e.Msg == "could not start a container" {
					doing = append(doing, e.Doing)
					if e.Container != attemptName("act-waitdaemon-user", len(doing)) || e.Error != tc.err.Error() {
						t.Errorf("logged %s", l)
					}
				}
			}
			if diff := linediff.Lines(wantDoing, doing); diff != "" {
				t.Errorf("the refused starts logged (-want +got):\n%s", diff)
			}
			if data, err := os.ReadFile(args.ResultFile); err != nil || !strings.Contains(string(data), `"exit_code": `+strconv.Itoa(tc.wantCode)) {
				t.Errorf("result file: %s (%v)", data, err)
			}
			for n := 1; n <= tc.retries+1; n++ {
				if got := eng.Names(); !slices.Contains(got, attemptName("act-waitdaemon-user", n)) {
					t.Errorf("left: %q; want the user container of attempt %d kept", got, n)
				}
			}
			// The next run of the action keeps them too: they were tried.
			var next bytes.Buffer
			if err := clearLeftovers(context.Background(), eng, eng.Action, &next); err != nil {
				t.Fatal(err)
			}
			for n := 1; n <= tc.retries+1; n++ {
				if name := attemptName("act-waitdaemon-user", n) + "-" + shortID(actionID); !slices.Contains(eng.Names(), name) {
					t.Errorf("after the next run's clearing: %q; want %s, kept under a new name\n%s", eng.Names(), name, next.String())
				}
			}
		})
	}
}

// TestTwoActionFailed: an action that exited non-zero (killed at the
// agent's timeout, say, before phase 1 could undo) starts nothing: the
// waiter removes what phase 1 made and writes a result that says why. An
// action gone before its exit could be read is taken as handed off:
// phase 1 removes what it made whenever it fails.
func TestTwoActionFailed(t *testing.T) {
	eng := waiterFake(true)
	eng.ActionCode = 137
	args := waiterArgs(0, true)
	args.ResultFile = filepath.Join(t.TempDir(), "result.json")
	var out bytes.Buffer
	if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(eng.Calls(), func(c string) bool { return strings.HasPrefix(c, "Start") }) {
		t.Errorf("calls %q; want nothing started", eng.Calls())
	}
	if got := eng.Names(); !slices.Equal(got, []string{"act-waitdaemon-waiter"}) {
		t.Errorf("left %q; want the waiter alone", got)
	}
	res := lastResult(t, out.String())
	if res.ActionExitCode == nil || *res.ActionExitCode != 137 || res.ExitCode != -1 || len(res.Attempts) != 0 || !strings.Contains(res.NotStarted, "137") {
		t.Errorf("result %+v; want action exit 137, exit -1, no attempts, and why", res)
	}
	if data, err := os.ReadFile(args.ResultFile); err != nil || !strings.Contains(string(data), `"action_exit_code": 137`) {
		t.Errorf("result file: %s (%v)", data, err)
	}

	t.Run("removed before its exit was read", func(t *testing.T) {
		eng := waiterFake(false)
		eng.ActionRemoved = true
		var out bytes.Buffer
		if err := Two(context.Background(), eng, waiterArgs(0, false), Options{Stdout: &out}); err != nil {
			t.Fatal(err)
		}
		if res := lastResult(t, out.String()); len(res.Attempts) != 1 || res.ActionExitCode != nil {
			t.Errorf("result %+v; want the user container run", res)
		}
	})
}

// TestWriteResultMode: the result file keeps the mode it had; a new one
// is readable by all (0644), whatever the temporary file's.
func TestWriteResultMode(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "new.json")
	if err := writeResult(fresh, result{Action: "act"}); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(dir, "kept.json")
	if err := os.WriteFile(kept, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(kept, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := writeResult(kept, result{Action: "act"}); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]os.FileMode{fresh: 0o644, kept: 0o640} {
		if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", filepath.Base(file), fi.Mode().Perm(), err, want)
		}
	}
}

// TestTwoSweepsStoppedWaiters: once the user container has run, the
// waiter removes, with one List, every other action's waiter that has
// stopped (containerd has no auto-remove; the waiter, unlike phase 1,
// sees their output files on the host), and leaves alone one that runs
// or was never started, its own, and other actions' containers of other
// roles. The result stays the last line.
func TestTwoSweepsStoppedWaiters(t *testing.T) {
	eng := waiterFake(false)
	other := "b0000000000000000000000000000000000000000000000000000000000000ff"
	eng.Add("done-waitdaemon-waiter", labels(RoleWaiter, "done", other), true)
	eng.Add("gone-waitdaemon-waiter", labels(RoleWaiter, "gone", other), true)
	eng.AddRunning("waiting-waitdaemon-waiter", labels(RoleWaiter, "waiting", other))
	eng.Add("starting-waitdaemon-waiter", labels(RoleWaiter, "starting", other), false)
	eng.Add("done-waitdaemon-user", labels(RoleUser, "done", other), true)
	var out bytes.Buffer
	if err := Two(context.Background(), eng, waiterArgs(0, false), Options{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	want := []string{"act-waitdaemon-waiter", "done-waitdaemon-user", "starting-waitdaemon-waiter", "waiting-waitdaemon-waiter"}
	if got := eng.Names(); !slices.Equal(got, want) {
		t.Errorf("containers (-want +got):\n-%q\n+%q", want, got)
	}
	calls := eng.Calls()
	list := slices.Index(calls, "List org.waitdaemon.role=waiter")
	if list < 0 || list < slices.Index(calls, "Start act-waitdaemon-user") || slices.Index(calls[list+1:], calls[list]) >= 0 {
		t.Errorf("want one List of the waiters, after the user container's start; calls:\n%s", strings.Join(calls, "\n"))
	}
	if strings.Count(out.String(), "removed another action's stopped waiter") != 2 {
		t.Errorf("output does not say it removed the two stopped waiters:\n%s", out.String())
	}
	lastResult(t, out.String())
}

// TestTwoSweepFailsQuietly: a stopped waiter of another action that
// cannot be removed is logged, and the run goes on.
func TestTwoSweepFailsQuietly(t *testing.T) {
	eng := waiterFake(false)
	eng.Add("done-waitdaemon-waiter", labels(RoleWaiter, "done", "b0"), true)
	eng.Fail = map[string]error{"Remove done-waitdaemon-waiter": errors.New("engine says no")}
	var out bytes.Buffer
	err := Two(context.Background(), eng, waiterArgs(0, false), Options{Stdout: &out})
	if err != nil || !strings.Contains(out.String(), "could not remove another action's stopped waiter") || !strings.Contains(out.String(), "engine says no") {
		t.Errorf("phase 2: %v, output:\n%s\nwant it to go on, saying why the waiter stays", err, out.String())
	}
	if r := lastResult(t, out.String()); r.ExitCode != 0 {
		t.Errorf("result %+v, want exit 0", r)
	}
}

// TestRetryDelay: the pause before each re-run of a failed user container
// starts at 2 s, doubles, and stops growing at 30 s, up to the most runs
// the settings allow (README, Settings: WAITDAEMON_RETRIES).
func TestRetryDelay(t *testing.T) {
	base, limit := retryBase, retryCap
	retryBase, retryCap = shippedRetryBase, shippedRetryCap
	t.Cleanup(func() { retryBase, retryCap = base, limit })
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second}
	for n := 7; n <= MaxRetries+1; n++ {
		want = append(want, 30*time.Second)
	}
	var got []time.Duration
	for n := 2; n <= MaxRetries+1; n++ {
		got = append(got, retryDelay(n))
	}
	if diff := linediff.Lines(durations(want), durations(got)); diff != "" {
		t.Errorf("pauses before runs 2 to %d (-want +got):\n%s", MaxRetries+1, diff)
	}
}

func durations(ds []time.Duration) []string {
	var s []string
	for _, d := range ds {
		s = append(s, d.String())
	}
	return s
}

// failingFile is a temporary result file that fails at one step: write
// (after half the bytes), chmod, sync or close.
type failingFile struct {
	*os.File
	fail           string
	synced, closed bool
}

var errDisk = errors.New("input/output error")

func (f *failingFile) Write(b []byte) (int, error) {
	if f.fail == "write" {
		n, _ := f.File.Write(b[:len(b)/2])
		return n, errDisk
	}
	return f.File.Write(b)
}

func (f *failingFile) Chmod(m os.FileMode) error {
	if f.fail == "chmod" {
		return errDisk
	}
	return f.File.Chmod(m)
}

func (f *failingFile) Sync() error {
	if f.fail == "sync" {
		return errDisk
	}
	f.synced = true
	return f.File.Sync()
}

func (f *failingFile) Close() error {
	f.closed = true
	err := f.File.Close()
	if f.fail == "close" {
		return errDisk
	}
	return err
}

// TestWriteResultFails: whichever step of the result file's write fails,
// writeResult says so, leaves the file that was there as it was and no
// temporary file beside it, and closes what it opened; when none fails,
// the new result is synced before it replaces the old.
func TestWriteResultFails(t *testing.T) {
	cases := []struct {
		fail    string // the temporary file's failing step, or "rename", "create", "none"
		wantErr error  // errors.Is
	}{
		{fail: "none"},
		{fail: "write", wantErr: errDisk},
		{fail: "chmod", wantErr: errDisk},
		{fail: "sync", wantErr: errDisk},
		{fail: "close", wantErr: errDisk},
		{fail: "rename"},
		{fail: "create", wantErr: os.ErrNotExist},
	}
	for _, tc := range cases {
		t.Run(tc.fail, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "result.json")
			old := "{\"action\": \"before\"}\n"
			switch tc.fail {
			case "rename": // a directory cannot be replaced by a file
				file = filepath.Join(dir, "full")
				if err := os.MkdirAll(filepath.Join(file, "x"), 0o755); err != nil {
					t.Fatal(err)
				}
			case "create":
				file = filepath.Join(dir, "missing", "result.json")
			default:
				if err := os.WriteFile(file, []byte(old), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var tmp *failingFile
			real := createTemp
			t.Cleanup(func() { createTemp = real })
			createTemp = func(dir, pattern string) (tempFile, error) {
				f, err := os.CreateTemp(dir, pattern)
				if err != nil {
					return nil, err
				}
				tmp = &failingFile{File: f, fail: tc.fail}
				return tmp, nil
			}

			err := writeResult(file, result{Action: "after", Attempts: []attempt{}})

			switch {
			case tc.fail == "none" && err != nil:
				t.Fatalf("writeResult: %v", err)
			case tc.fail != "none" && (err == nil || !strings.HasPrefix(err.Error(), "writing the result file: ")):
				t.Errorf("error %v, want one that says the result file could not be written", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("error %v, want it to wrap %v", err, tc.wantErr)
			}
			if tmp != nil && (!tmp.closed || tmp.synced != (tc.fail == "none" || tc.fail == "close" || tc.fail == "rename")) {
				t.Errorf("the temporary file: closed %v, synced %v", tmp.closed, tmp.synced)
			}
			if tc.fail == "rename" || tc.fail == "create" {
				if entries, _ := os.ReadDir(dir); len(entries) != strings.Count(tc.fail, "rename") {
					t.Errorf("left in the directory: %v", entries)
				}
				return
			}
			want := old
			if tc.fail == "none" {
				want = "{\n  \"action\": \"after\",\n  \"image\": \"\",\n  \"command\": null,\n  \"exit_code\": 0,\n  \"attempts\": []\n}\n"
			}
			got, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if diff := linediff.Text(want, string(got)); diff != "" {
				t.Errorf("the result file (-want +got):\n%s", diff)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("left in the directory: %v", entries)
			}
		})
	}
}

// TestWritable: phase 1's question, whether the result file can be
// written, is answered no for a missing directory and for a path that is
// a directory, and asking leaves nothing behind.
func TestWritable(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		file    string
		wantErr string // in the error; "" for none
	}{
		{file: "result.json"},
		{file: "sub", wantErr: "sub is a directory"},
		{file: "missing/result.json", wantErr: "no such file or directory"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			err := writable(filepath.Join(dir, tc.file))
			if got := fmt.Sprint(err); (tc.wantErr == "") != (err == nil) || !strings.Contains(got, tc.wantErr) {
				t.Errorf("writable: %v, want %q", err, tc.wantErr)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "sub" {
				t.Errorf("left in the directory: %v", entries)
			}
		})
	}
}

// TestWriteResultClosesWhatItOpens: a result written leaves no file
// descriptor open, however many are written (the directory opened to be
// synced is closed too).
func TestWriteResultClosesWhatItOpens(t *testing.T) {
	file := filepath.Join(t.TempDir(), "result.json")
	open := func() int {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(fds)
	}
	// One first: what the runtime opens once (its poller) is then open.
	if err := writeResult(file, result{Action: "act", Attempts: []attempt{}}); err != nil {
		t.Fatal(err)
	}
	before := open()
	for range 20 {
		if err := writeResult(file, result{Action: "act", Attempts: []attempt{}}); err != nil {
			t.Fatal(err)
		}
	}
	if after := open(); after != before {
		t.Errorf("%d descriptors open before 20 results were written, %d after; want the same", before, after)
	}
}

// TestTwoRetryFresh: each re-run starts from the image, as the first run
// did, not from the file system an earlier run left: a command that makes
// its mount point with mkdir(2) (tinkerbell/actions' kexec) fails the same
// way on every run, rather than on the directory the run before made.
func TestTwoRetryFresh(t *testing.T) {
	eng := newFake()
	eng.Add("act-waitdaemon-waiter", labels(RoleWaiter, "act", actionID), true)
	user := engine.Spec{Name: "act-waitdaemon-user", Create: &fake.Planned{Want: &engine.Want{
		Name: "act-waitdaemon-user", Labels: labels(RoleUser, "act", actionID), Command: fake.Mkdir("/mountAction", 3),
	}}}
	if _, err := eng.Create(t.Context(), user); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Two(t.Context(), eng, waiterArgs(2, false), Options{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	res := lastResult(t, out.String())
	var codes, containers []string
	for _, a := range res.Attempts {
		codes = append(codes, strconv.Itoa(a.ExitCode)+" "+a.LogTail[len(a.LogTail)-1])
		containers = append(containers, a.Container)
	}
	want := []string{"3 exiting 3", "3 exiting 3", "3 exiting 3"}
	if !slices.Equal(codes, want) {
		t.Errorf("attempts exited %q, want %q: each run from the image, without the directory an earlier run made\n%s", codes, want, out.String())
	}
	wantContainers := []string{"act-waitdaemon-user", "act-waitdaemon-user-2", "act-waitdaemon-user-3"}
	if !slices.Equal(containers, wantContainers) {
		t.Errorf("attempts ran in %q, want %q", containers, wantContainers)
	}
}

// TestTwoRetryNotMade: a re-run whose container cannot be made is a
// failed attempt, exit 125 whatever the engine said, with the engine's
// word as its tail; the next re-run and the fallback follow.
func TestTwoRetryNotMade(t *testing.T) {
	eng := waiterFake(true)
	eng.Exits = map[string][]int{"act-waitdaemon-user": {1}}
	eng.Fail = map[string]error{"Again act-waitdaemon-user-2": errors.New("creating: open /x: no such file or directory")}
	var out bytes.Buffer
	if err := Two(t.Context(), eng, waiterArgs(2, true), Options{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	res := lastResult(t, out.String())
	var got []string
	for _, a := range res.Attempts {
		got = append(got, fmt.Sprintf("%s %d %q", a.Container, a.ExitCode, a.LogTail))
	}
	want := []string{
		`act-waitdaemon-user 1 ["act-waitdaemon-user run 1 line 1" "act-waitdaemon-user run 1 line 2"]`,
		`act-waitdaemon-user-2 125 ["could not start: creating: open /x: no such file or directory"]`,
		`act-waitdaemon-user-3 1 ["act-waitdaemon-user run 2 line 1" "act-waitdaemon-user run 2 line 2"]`,
	}
	if diff := linediff.Lines(want, got); diff != "" || res.Fallback == nil || res.Fallback.ExitCode != 0 {
		t.Errorf("attempts (-want +got):\n%s\nfallback %+v; want it run", diff, res.Fallback)
	}
}

// TestAttemptName: attempt 1 runs in the user container phase 1 made,
// each re-run in user-N, for every N WAITDAEMON_RETRIES allows; no other
// name, and no kept container's (user-<12 hex digits>), is a re-run's.
func TestAttemptName(t *testing.T) {
	const user = "act-waitdaemon-user"
	if got := attemptName(user, 1); got != user {
		t.Errorf("attemptName(1) = %q, want %q", got, user)
	}
	for n := 2; n <= MaxRetries+1; n++ {
		name := attemptName(user, n)
		if name != user+"-"+strconv.Itoa(n) || !isAttemptName(user, name) {
			t.Errorf("attemptName(%d) = %q, a re-run's: %v; want %s-%d, a re-run's", n, name, isAttemptName(user, name), user, n)
		}
	}
	for _, name := range []string{user, user + "-1", user + "-0", user + "-" + strconv.Itoa(MaxRetries+2), user + "-012345678901", "other-waitdaemon-user-2", user + "-2-0123456789ab"} {
		if isAttemptName(user, name) {
			t.Errorf("isAttemptName(%q) = true, want false", name)
		}
	}
}
