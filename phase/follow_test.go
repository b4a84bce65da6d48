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

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/testkit/fake"
)

// TestTwoFollowFails: a run whose end cannot be followed (the engine
// restarting under it, say) is asked after again; one the engine never
// settles within engineLost counts as a failed run with a note saying
// why, and the re-runs, the fallback and the result follow as after any
// failed run.
func TestTwoFollowFails(t *testing.T) {
	lost := engineLost
	engineLost = 50 * time.Millisecond
	t.Cleanup(func() { engineLost = lost })
	engineGone := errors.New("following act-waitdaemon-user: connection refused")

	// twoWithResultFile runs phase 2 on eng, one re-run and a fallback,
	// with a result file, and returns the result it told.
	twoWithResultFile := func(t *testing.T, eng *fake.Engine) (result, WaiterArgs) {
		t.Helper()
		args := waiterArgs(1, true)
		args.ResultFile = filepath.Join(t.TempDir(), "result.json")
		var out bytes.Buffer
		if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err != nil {
			t.Fatalf("phase 2: %v\n%s", err, out.String())
		}
		return lastResult(t, out.String()), args
	}

	t.Run("settled by asking again", func(t *testing.T) {
		eng := waiterFake(true)
		eng.Lost = map[string]error{"Follow act-waitdaemon-user": engineGone}
		res, args := twoWithResultFile(t, eng)
		if len(res.Attempts) != 1 || res.ExitCode != 0 || res.Fallback != nil || res.Attempts[0].FinishedAt == "" {
			t.Errorf("result = %+v; want the one run, exit 0, as the engine settled it", res)
		}
		if n := countCalls(eng.Calls(), "Start act-waitdaemon-user"); n != 1 {
			t.Errorf("started %d times; want once: %q", n, eng.Calls())
		}
		checkResultFile(t, args.ResultFile, res)
	})

	t.Run("never settled", func(t *testing.T) {
		// Its end, after a stop, still cannot be read: nothing more
		// starts (see TestTwoLostRunEnds).
		eng := waiterFake(true)
		eng.Fail = onEachAttempt("Follow", 2, engineGone)
		res, args := twoWithResultFile(t, eng)
		if len(res.Attempts) != 1 || res.ExitCode != unfollowedExitCode || res.Fallback != nil || !strings.Contains(res.Stopped, "could not be learnt") {
			t.Fatalf("result = %+v; want one attempt, exit %d, no fallback, and why", res, unfollowedExitCode)
		}
		for _, a := range res.Attempts {
			if a.ExitCode != unfollowedExitCode || !strings.Contains(a.LogNote, engineGone.Error()) || !a.Kept {
				t.Errorf("attempt %+v; want exit %d, a note with the engine's error, kept", a, unfollowedExitCode)
			}
		}
		if n := countCalls(eng.Calls(), "Follow act-waitdaemon-user"); n < 2 {
			t.Errorf("%d follows; want the run asked after again: %q", n, eng.Calls())
		}
		checkResultFile(t, args.ResultFile, res)
	})
}

func countCalls(calls []string, call string) int {
	n := 0
	for _, c := range calls {
		if c == call {
			n++
		}
	}
	return n
}

// checkResultFile: the result file holds the result line's result.
func checkResultFile(t *testing.T, file string, want result) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("no result file: %v", err)
	}
	var got result
	if err := json.Unmarshal(data, &got); err != nil || got.ExitCode != want.ExitCode || got.State != want.State || got.NotStarted != want.NotStarted || len(got.Attempts) != len(want.Attempts) || (got.Fallback == nil) != (want.Fallback == nil) {
		t.Errorf("result file = %s (%v); want the result line's", data, err)
	}
}

// TestTwoSignalInBackoff: a signal during the pause before a re-run
// starts no more re-runs, and says so: nothing runs on. The fallback
// still starts, as the user container failed, and the result is written:
// still running, as the fallback was started and not followed (it may be
// the run that takes the machine down), its exit code -1.
func TestTwoSignalInBackoff(t *testing.T) {
	base, limit := retryBase, retryCap
	retryBase, retryCap = time.Minute, time.Minute
	t.Cleanup(func() { retryBase, retryCap = base, limit })
	eng := waiterFake(true)
	eng.Exits = map[string][]int{"act-waitdaemon-user": {1}}
	args := waiterArgs(3, true)
	args.ResultFile = filepath.Join(t.TempDir(), "result.json")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for !slices.Contains(eng.Calls(), "Follow act-waitdaemon-user") {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	var out bytes.Buffer
	if err := Two(ctx, eng, args, Options{Stdout: &out}); err != nil {
		t.Fatalf("phase 2: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "runs on") {
		t.Errorf("said the user container runs on, though it stopped:\n%s", out.String())
	}
	res := lastResult(t, out.String())
	if len(res.Attempts) != 1 || res.Attempts[0].ExitCode != 1 || !res.Attempts[0].Ended || !strings.Contains(res.Stopped, "re-run") {
		t.Errorf("result = %+v; want the one attempt, exit 1, and why no re-run came", res)
	}
	if res.State != stateRunning || res.ExitCode != -1 {
		t.Errorf("result's state %q, exit code %d; want %q and -1: the fallback runs on, not followed", res.State, res.ExitCode, stateRunning)
	}
	if fb := res.Fallback; fb == nil || fb.Ended || fb.ExitCode != -1 || !fb.Kept || !slices.Contains(eng.Calls(), "Start act-waitdaemon-fallback") {
		t.Errorf("fallback = %+v, calls %q; want it started, not ended, exit code -1, not removed", res.Fallback, eng.Calls())
	}
	if slices.Contains(eng.Calls(), "Remove act-waitdaemon-fallback") {
		t.Errorf("the fallback, which runs on, was removed: %q", eng.Calls())
	}
	if n := countCalls(eng.Calls(), "Start act-waitdaemon-user"); n != 1 {
		t.Errorf("user container started %d times; want once", n)
	}
	checkResultFile(t, args.ResultFile, res)
}

// TestTwoSignalFallbackBounded: the fallback started after a signal (in
// the pause before a re-run) gets a few seconds: during a shutdown the
// engine may be stopped already, and its start would otherwise wait for
// it to come back, as long as the shutdown lets the waiter live. A start
// cut so is a start refused, and the result is written.
func TestTwoSignalFallbackBounded(t *testing.T) {
	base, limit, bound := retryBase, retryCap, signalStart
	retryBase, retryCap, signalStart = time.Minute, time.Minute, 100*time.Millisecond
	t.Cleanup(func() { retryBase, retryCap, signalStart = base, limit, bound })
	eng := waiterFake(true)
	eng.Exits = map[string][]int{"act-waitdaemon-user": {1}}
	eng.Block = map[string]bool{"Start act-waitdaemon-fallback": true}
	args := waiterArgs(3, true)
	args.ResultFile = filepath.Join(t.TempDir(), "result.json")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for !slices.Contains(eng.Calls(), "Follow act-waitdaemon-user") {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- Two(ctx, eng, args, Options{Stdout: &out}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("phase 2: %v\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("phase 2 still starting the fallback 10 s after the signal; calls %q", eng.Calls())
	}
	res := lastResult(t, out.String())
	if fb := res.Fallback; fb == nil || !fb.Ended || fb.ExitCode != 125 || !strings.Contains(strings.Join(fb.LogTail, " "), "could not start") {
		t.Errorf("fallback = %+v; want its start refused, exit 125", res.Fallback)
	}
	checkResultFile(t, args.ResultFile, res)
}

// TestTwoActionExitedFails: a waiter that cannot learn when the action
// exited (the engine gone for longer than it waits; on containerd, an
// action killed at its timeout whose task the agent deleted before the
// waiter looked) starts nothing, removes the user and fallback
// containers, which will never start, and still writes a result that
// says why.
func TestTwoActionExitedFails(t *testing.T) {
	eng := waiterFake(true)
	eng.Fail = map[string]error{"ActionExited": errors.New("waiting for the action container: no answer from the engine for 2m0s")}
	args := waiterArgs(1, true)
	args.ResultFile = filepath.Join(t.TempDir(), "result.json")
	var out bytes.Buffer
	if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err == nil {
		t.Errorf("phase 2 succeeded; want its error")
	}
	res := lastResult(t, out.String())
	if res.ExitCode != -1 || len(res.Attempts) != 0 || !strings.Contains(res.NotStarted, "no answer from the engine") {
		t.Errorf("result = %+v; want exit -1, no attempt, and why", res)
	}
	if slices.ContainsFunc(eng.Calls(), func(c string) bool { return strings.HasPrefix(c, "Start") }) {
		t.Errorf("started something: %q", eng.Calls())
	}
	if got := eng.Names(); !slices.Equal(got, []string{"act-waitdaemon-waiter"}) {
		t.Errorf("left %q; want the waiter alone", got)
	}
	checkResultFile(t, args.ResultFile, res)
}

// TestTwoActionExitedNoAnswer: a wait for the action's exit that the
// engine breaks off without an answer (ErrNoAnswer: an engine restarting)
// is asked again, the loss logged once, and the run goes on as the engine
// then says; one the engine never answers within engineLost is an exit
// unknown: nothing starts. An error of another kind is not asked again.
func TestTwoActionExitedNoAnswer(t *testing.T) {
	lost := engineLost
	engineLost = 50 * time.Millisecond
	t.Cleanup(func() { engineLost = lost })
	noAnswer := fmt.Errorf("waiting for the action container: %w: EOF", engine.ErrNoAnswer)
	for _, tc := range []struct {
		name      string
		once      []error // ActionExited's answers before the fake's own
		fail      error   // every answer, when set
		wantAsks  int     // 0: at least two
		wantStart bool
	}{
		{name: "answered again", once: []error{noAnswer}, wantAsks: 2, wantStart: true},
		{name: "never answered", fail: noAnswer},
		{name: "another error", fail: errors.New("waiting for the action container: 400 bad wait"), wantAsks: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := waiterFake(true)
			eng.Once = map[string][]error{"ActionExited": tc.once}
			if tc.fail != nil {
				eng.Fail = map[string]error{"ActionExited": tc.fail}
			}
			var out bytes.Buffer
			err := Two(context.Background(), eng, waiterArgs(0, false), Options{Stdout: &out})
			asks := countCalls(eng.Calls(), "ActionExited")
			if tc.wantAsks == 0 && asks < 2 || tc.wantAsks != 0 && asks != tc.wantAsks {
				t.Errorf("ActionExited asked %d times, want %d (0: two or more)", asks, tc.wantAsks)
			}
			started := slices.ContainsFunc(eng.Calls(), func(c string) bool { return strings.HasPrefix(c, "Start") })
			if started != tc.wantStart || (err == nil) != tc.wantStart {
				t.Errorf("started %v, error %v; want started %v:\n%s", started, err, tc.wantStart, out.String())
			}
			logged := strings.Count(out.String(), "lost the engine while waiting for the action container")
			if want := map[bool]int{true: 1, false: 0}[errors.Is(tc.fail, engine.ErrNoAnswer) || len(tc.once) > 0]; logged != want {
				t.Errorf("the loss logged %d times, want %d:\n%s", logged, want, out.String())
			}
			if tc.fail == noAnswer && !strings.Contains(lastResult(t, out.String()).NotStarted, "no answer from the engine: EOF (for 50ms)") {
				t.Errorf("result does not say the engine did not answer for engineLost:\n%s", out.String())
			}
		})
	}
}

// TestTwoStartFailsBetweenRuns: a run that could not start after one
// that ran has that run's image and command; a re-run after it reads the
// output of its own container, from its start; and a last run that could
// not start leaves the result the image and command of the runs before.
func TestTwoStartFailsBetweenRuns(t *testing.T) {
	for _, retries := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d retries", retries), func(t *testing.T) {
			eng := waiterFake(false)
			eng.Exits = map[string][]int{"act-waitdaemon-user": {1}}
			eng.Fail = map[string]error{"Start act-waitdaemon-user-2": errors.New("500: the engine is out of sorts")}
			var out bytes.Buffer
			if err := Two(context.Background(), eng, waiterArgs(retries, false), Options{Stdout: &out}); err != nil {
				t.Fatalf("phase 2: %v\n%s", err, out.String())
			}
			res := lastResult(t, out.String())
			if len(res.Attempts) != retries+1 || res.Attempts[1].ExitCode != 125 {
				t.Fatalf("result = %+v; want %d attempts, the second refused", res, retries+1)
			}
			ran := []string{"run", "act-waitdaemon-user"}
			if a := res.Attempts[1]; a.Image != "image-of-act-waitdaemon-user" || !slices.Equal(a.Command, ran) {
				t.Errorf("the refused run %+v; want the image and command of the run before", a)
			}
			if res.Image != "image-of-act-waitdaemon-user" || !slices.Equal(res.Command, ran) {
				t.Errorf("result's image %q, command %q; want those that ran", res.Image, res.Command)
			}
			for n := 1; n <= retries+1; n++ {
				want := []string{""}
				if n == 2 {
					want = nil // refused
				}
				if since := eng.Sinces(attemptName("act-waitdaemon-user", n)); !slices.Equal(since, want) {
					t.Errorf("attempt %d's output read since %q; want %q", n, since, want)
				}
			}
		})
	}
}

// logLost is an engine whose Follow of the user container returns the
// run, ended, with the error of a log that could not be read.
type logLost struct{ *fake.Engine }

func (e logLost) Follow(ctx context.Context, id string, sent time.Time, tail int, since string) (engine.Run, error) {
	r, err := e.Engine.Follow(ctx, id, sent, tail, since)
	if err != nil {
		return r, err
	}
	return r, errors.New("reading the log: connection reset")
}

// TestTwoFollowLogFails: a run that ended but whose output could not be
// read counts as it ended, with an empty tail and a note saying why; it
// is not asked after again.
func TestTwoFollowLogFails(t *testing.T) {
	eng := logLost{waiterFake(false)}
	eng.Exits = map[string][]int{"act-waitdaemon-user": {4}}
	var out bytes.Buffer
	if err := Two(context.Background(), eng, waiterArgs(0, false), Options{Stdout: &out}); err != nil {
		t.Fatalf("phase 2: %v\n%s", err, out.String())
	}
	res := lastResult(t, out.String())
	if len(res.Attempts) != 1 {
		t.Fatalf("result = %+v; want one attempt", res)
	}
	a := res.Attempts[0]
	if a.ExitCode != 4 || a.FinishedAt == "" || len(a.LogTail) != 0 || a.LogNote != "no log tail: reading the log: connection reset" {
		t.Errorf("attempt %+v; want exit 4, its end, no tail and the log's error as its note", a)
	}
	if n := countCalls(eng.Calls(), "Follow act-waitdaemon-user"); n != 1 {
		t.Errorf("followed %d times; want once", n)
	}
}

// endsBeforeStart is the fake engine, on which a run ends, by the
// engine's word, before it started: Docker 20.10 dates a start once the
// runtime's start returned, by when a quick run has exited.
type endsBeforeStart struct{ *fake.Engine }

func (e endsBeforeStart) Follow(ctx context.Context, id string, sent time.Time, tail int, since string) (engine.Run, error) {
	r, err := e.Engine.Follow(ctx, id, sent, tail, since)
	r.StartedAt, r.FinishedAt = "2026-11-28T04:53:33.4033Z", "2026-11-28T04:53:33.4025Z"
	return r, err
}

// TestTwoEndsBeforeStart: a run is never said to have ended before it
// started: the times are the engine's, ordered, and a note says which
// one the engine dated late.
func TestTwoEndsBeforeStart(t *testing.T) {
	var out bytes.Buffer
	if err := Two(context.Background(), endsBeforeStart{waiterFake(false)}, waiterArgs(0, false), Options{Stdout: &out}); err != nil {
		t.Fatalf("phase 2: %v\n%s", err, out.String())
	}
	a := lastResult(t, out.String()).Attempts[0]
	started, serr := time.Parse(time.RFC3339Nano, a.StartedAt)
	finished, ferr := time.Parse(time.RFC3339Nano, a.FinishedAt)
	if serr != nil || ferr != nil || finished.Before(started) || a.FinishedAt != "2026-11-28T04:53:33.4025Z" ||
		!strings.Contains(a.TimeNote, "2026-11-28T04:53:33.4033Z") {
		t.Errorf("run started %q, finished %q, note %q; want the engine's end, a start no later, and a note with the start the engine gave", a.StartedAt, a.FinishedAt, a.TimeNote)
	}
}

// TestOrdered: only a run whose end the engine dates before its start is
// reordered; the engine's zero time (a run it never saw end) and times
// it did not give are left as they are.
func TestOrdered(t *testing.T) {
	const start, end = "2026-11-28T04:53:33.4033Z", "2026-11-28T04:53:33.4025Z"
	cases := []struct {
		started, finished, wantStarted string
		note                           bool
	}{
		{start, end, end, true},
		{end, start, end, false},
		{start, start, start, false},
		{start, "0001-01-01T00:00:00Z", start, false},
		{start, "", start, false},
		{"", end, "", false},
	}
	for _, tc := range cases {
		a := ordered(attempt{StartedAt: tc.started, FinishedAt: tc.finished})
		if a.StartedAt != tc.wantStarted || a.FinishedAt != tc.finished || (a.TimeNote != "") != tc.note {
			t.Errorf("ordered(%q, %q) = %q, %q, note %q; want %q, %q, a note: %v", tc.started, tc.finished, a.StartedAt, a.FinishedAt, a.TimeNote, tc.wantStarted, tc.finished, tc.note)
		}
	}
}

// TestTwoLostRunEnds: a run whose end could not be followed is stopped,
// and its end confirmed, before any next run (a re-run, the fallback):
// never two runs at once. One whose end cannot be learnt then starts
// nothing more, and the result says why.
func TestTwoLostRunEnds(t *testing.T) {
	lost, bound := engineLost, lostStop
	engineLost, lostStop = 50*time.Millisecond, 200*time.Millisecond
	t.Cleanup(func() { engineLost, lostStop = lost, bound })
	engineGone := errors.New("following act-waitdaemon-user: connection refused")

	t.Run("stopped, then re-run", func(t *testing.T) {
		eng := waiterFake(true)
		eng.Exits = map[string][]int{"act-waitdaemon-user": {1, 0}}
		eng.Once = map[string][]error{"Follow act-waitdaemon-user": {engineGone, engineGone}}
		var out bytes.Buffer
		if err := Two(context.Background(), eng, waiterArgs(1, true), Options{Stdout: &out}); err != nil {
			t.Fatalf("phase 2: %v\n%s", err, out.String())
		}
		calls := eng.Calls()
		stop, again := slices.Index(calls, "Stop act-waitdaemon-user"), slices.Index(calls, "Again act-waitdaemon-user-2")
		if stop < 0 || again < stop || countCalls(calls[stop:again], "Follow act-waitdaemon-user") != 1 {
			t.Errorf("calls %q; want the lost run stopped, and its end read, before the re-run is made", calls)
		}
		res := lastResult(t, out.String())
		if len(res.Attempts) != 2 || res.ExitCode != 0 || res.Fallback != nil || res.Attempts[0].FinishedAt == "" {
			t.Errorf("result = %+v; want the first run ended as the engine then said, and the re-run", res)
		}
	})

	t.Run("its end asked again while the engine is away", func(t *testing.T) {
		lostStop = 3 * time.Second
		t.Cleanup(func() { lostStop = 200 * time.Millisecond })
		noAnswer := fmt.Errorf("following act-waitdaemon-user: %w: EOF", engine.ErrNoAnswer)
		eng := waiterFake(true)
		eng.Exits = map[string][]int{"act-waitdaemon-user": {1, 0}}
		eng.Once = map[string][]error{"Follow act-waitdaemon-user": {noAnswer, noAnswer, noAnswer}}
		var out bytes.Buffer
		if err := Two(context.Background(), eng, waiterArgs(1, true), Options{Stdout: &out}); err != nil {
			t.Fatalf("phase 2: %v\n%s", err, out.String())
		}
		calls := eng.Calls()
		stop, again := slices.Index(calls, "Stop act-waitdaemon-user"), slices.Index(calls, "Again act-waitdaemon-user-2")
		if stop < 0 || again < stop || countCalls(calls[stop:again], "Follow act-waitdaemon-user") != 2 {
			t.Errorf("calls %q; want the lost run's end asked for twice after its stop, the engine away once, before the re-run", calls)
		}
	})

	t.Run("its end not learnt", func(t *testing.T) {
		eng := waiterFake(true)
		eng.Fail = map[string]error{"Follow act-waitdaemon-user": engineGone}
		eng.Block = map[string]bool{"Stop act-waitdaemon-user": true}
		args := waiterArgs(1, true)
		args.ResultFile = filepath.Join(t.TempDir(), "result.json")
		var out bytes.Buffer
		if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err != nil {
			t.Fatalf("phase 2: %v\n%s", err, out.String())
		}
		for _, c := range []string{"Again act-waitdaemon-user-2", "Start act-waitdaemon-fallback", "Remove act-waitdaemon-user"} {
			if slices.Contains(eng.Calls(), c) {
				t.Errorf("%s after a run whose end was never learnt: %q", c, eng.Calls())
			}
		}
		res := lastResult(t, out.String())
		if len(res.Attempts) != 1 || res.Fallback != nil || !strings.Contains(res.Stopped, "could not be learnt") || !res.Attempts[0].Kept {
			t.Errorf("result = %+v; want the one attempt, kept, no fallback, and why", res)
		}
		checkResultFile(t, args.ResultFile, res)
	})

	t.Run("the last run, nothing after it", func(t *testing.T) {
		eng := waiterFake(false)
		eng.Fail = map[string]error{"Follow act-waitdaemon-user": engineGone}
		var out bytes.Buffer
		if err := Two(context.Background(), eng, waiterArgs(0, false), Options{Stdout: &out}); err != nil {
			t.Fatalf("phase 2: %v\n%s", err, out.String())
		}
		if slices.Contains(eng.Calls(), "Stop act-waitdaemon-user") {
			t.Errorf("the last run, lost, was stopped with nothing to run after it (it may be the reboot): %q", eng.Calls())
		}
		res := lastResult(t, out.String())
		a := res.Attempts[0]
		if len(res.Attempts) != 1 || res.ExitCode != unfollowedExitCode || !a.Kept || !strings.Contains(a.LogNote, "not stopped: it may run on") {
			t.Errorf("result = %+v; want the one run, failed, kept, and a note that it was left to run on", res)
		}
	})

	t.Run("a signal while it is stopped", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		eng := waiterFake(true)
		eng.Exits = map[string][]int{"act-waitdaemon-user": {1}}
		eng.Once = map[string][]error{"Follow act-waitdaemon-user": {engineGone, engineGone}}
		args := waiterArgs(1, true)
		args.ResultFile = filepath.Join(t.TempDir(), "result.json")
		var out bytes.Buffer
		if err := Two(ctx, signalOnStop{eng, cancel}, args, Options{Stdout: &out}); err != nil {
			t.Fatalf("phase 2: %v\n%s", err, out.String())
		}
		if slices.Contains(eng.Calls(), "Again act-waitdaemon-user-2") {
			t.Errorf("a re-run made after the signal: %q", eng.Calls())
		}
		res := lastResult(t, out.String())
		if len(res.Attempts) != 1 || res.Attempts[0].FinishedAt == "" || !strings.Contains(res.Stopped, "stopped by a signal") || res.Fallback == nil || res.Fallback.Ended {
			t.Errorf("result = %+v; want the stopped run with its end, no re-run, the fallback started and not followed, and why", res)
		}
		checkResultFile(t, args.ResultFile, res)
	})
}

// signalOnStop is the fake engine on which a signal comes as a run is
// stopped.
type signalOnStop struct {
	*fake.Engine
	signal context.CancelFunc
}

func (e signalOnStop) Stop(ctx context.Context, id string) error {
	e.signal()
	return e.Engine.Stop(ctx, id)
}

// TestLostClock: the count of an outage starts at its first failed ask,
// is over after engineLost, and starts again at an ask that failed after
// longer than the client waits for an engine not listening: the engine
// answered for part of it.
func TestLostClock(t *testing.T) {
	lost := engineLost
	engineLost = 100 * time.Millisecond
	t.Cleanup(func() { engineLost = lost })
	var c lostClock
	if first, over := c.failed(time.Now()); !first || over {
		t.Errorf("the first failure: first %v, over %v; want true, false", first, over)
	}
	time.Sleep(engineLost)
	if first, over := c.failed(time.Now()); first || !over {
		t.Errorf("a failure engineLost later: first %v, over %v; want false, true", first, over)
	}
	if first, over := c.failed(time.Now().Add(-engine.WaiterWaitForEngine - time.Second)); !first || over {
		t.Errorf("a failure after a long ask: first %v, over %v; want true, false", first, over)
	}
}
