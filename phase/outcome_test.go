package phase

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/testkit/fake"
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
// result so far, that run started and not ended, with the image and
// command it will run (the engine says them during the wait), and the
// boot's ID.
func TestTwoProvisional(t *testing.T) {
	dir := t.TempDir()
	eng := &recordingStarts{Engine: waiterFake(true), file: filepath.Join(dir, "result.json"), before: map[string][]result{}}
	eng.Exits = map[string][]int{"act-waitdaemon-user": {3, 4}}
	eng.Says = map[string][]string{"act-waitdaemon-user": {"kexec: no kernel"}}
	eng.ExitedAt = time.Now().Add(-800 * time.Millisecond)
	args := waiterArgs(1, true)
	args.WaitSeconds = 1
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
		if r.Image != "image-of-act-waitdaemon-user" || !slices.Equal(r.Command, []string{"run", "act-waitdaemon-user"}) {
			t.Errorf("%s: image %q, command %q; want the last run's, or before the first the first's", name, r.Image, r.Command)
		}
		runs := slices.Clone(r.Attempts)
		if r.Fallback != nil {
			runs = append(runs, *r.Fallback)
		}
		for _, a := range runs {
			made := a.Container // a re-run's container is made from the first
			if a.Attempt > 1 {
				made = "act-waitdaemon-user"
			}
			if a.Image != "image-of-"+made || !slices.Equal(a.Command, []string{"run", made}) {
				t.Errorf("%s: run %+v; want its image and command named", name, a)
			}
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

// slowDescribe is the fake engine, whose Describe answers only when its
// ctx ends: an engine slow to answer.
type slowDescribe struct{ *recordingStarts }

func (s slowDescribe) Describe(ctx context.Context, _ string) (string, []string, error) {
	<-ctx.Done()
	return "", nil, ctx.Err()
}

// TestTwoDescribeTakesNoTime: asking what the containers will run takes
// nothing from the wait: an engine that does not say by the start
// leaves the start on time, and the result before it names the image
// phase 1 made the container of.
func TestTwoDescribeTakesNoTime(t *testing.T) {
	rec := &recordingStarts{Engine: waiterFake(false), file: filepath.Join(t.TempDir(), "result.json"), before: map[string][]result{}}
	rec.ExitedAt = time.Now().Add(-700 * time.Millisecond)
	args := waiterArgs(0, false)
	args.WaitSeconds, args.ResultFile, args.UserImage = 1, rec.file, "docker.io/library/alpine:3.20"
	var out bytes.Buffer
	if err := Two(context.Background(), slowDescribe{rec}, args, Options{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	var started waited
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, `"msg":"started user container"`) {
			_ = json.Unmarshal([]byte(l), &started)
		}
	}
	if started.LateMS > 200 || started.StartSent == "" {
		t.Errorf("start sent %d ms late; want on time, whatever the engine's Describe:\n%s", started.LateMS, out.String())
	}
	if b := rec.before["act-waitdaemon-user"]; len(b) != 1 || b[0].Image != args.UserImage || b[0].Attempts[0].Image != args.UserImage {
		t.Errorf("result before the start: %+v; want the image phase 1 made the user container of", b)
	}
}

// handedOff runs phase 1 on eng with env and a result file in dir, and
// returns the command line it gave the waiter, with the result file as
// the test sees it, and phase 1's output.
func handedOff(t *testing.T, eng *fake.Engine, dir string, env ...string) (WaiterArgs, string) {
	t.Helper()
	env = append(env, "WAITDAEMON_RESULT_FILE="+filepath.Join(dir, "result.json"))
	eng.Says = map[string][]string{"act-waitdaemon-waiter": {`{"msg":"` + msgResultWritable + `"}`}}
	out, _, err := phaseOne(t, eng, env...)
	if err != nil {
		t.Fatal(err)
	}
	h := newHandoff(eng, eng.Action, mustValidate(t, env...), false)
	args := parseWaiter(t, h.Waiter.Create.(*fake.Planned).Waiter.Args)
	args.ResultFile = filepath.Join(dir, "result.json") // bound at ResultDir in the waiter
	return args, out
}

// TestProvisionalNamesRunsAtOnce: with WAIT_SECONDS 0, which leaves the
// waiter no time to ask the engine anything, the result written before
// each run names the image and command of that run, the user container's
// and the fallback's: phase 1 hands them to the waiter once it has made
// both, and the waiter reads them without asking the engine.
func TestProvisionalNamesRunsAtOnce(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback %v", fallback), func(t *testing.T) {
			dir := t.TempDir()
			eng := newFake()
			env := []string{"IMAGE=reboot:1", "WAIT_SECONDS=0"}
			if fallback {
				env = append(env, `WAITDAEMON_FALLBACK_COMMAND=["reboot","-f"]`)
				eng.Exits = map[string][]int{"act-waitdaemon-user": {1}}
			}
			args, _ := handedOff(t, eng, dir, env...)
			if args.WaitSeconds != 0 {
				t.Fatalf("the waiter waits %d s; want 0", args.WaitSeconds)
			}
			phase1 := len(eng.Calls())
			rec := &recordingStarts{Engine: eng, file: args.ResultFile, before: map[string][]result{}}
			var out bytes.Buffer
			if err := Two(context.Background(), rec, args, Options{Stdout: &out}); err != nil {
				t.Fatal(err)
			}
			for _, e := range rec.errs {
				t.Error(e)
			}
			runs := map[string]*attempt{}
			if b := rec.before["act-waitdaemon-user"]; len(b) == 1 && len(b[0].Attempts) == 1 {
				runs["act-waitdaemon-user"] = &b[0].Attempts[0]
			} else {
				t.Errorf("results before the user container's start: %+v; want one, naming its attempt", b)
			}
			if fallback {
				if b := rec.before["act-waitdaemon-fallback"]; len(b) == 1 && b[0].Fallback != nil {
					runs["act-waitdaemon-fallback"] = b[0].Fallback
				} else {
					t.Errorf("results before the fallback's start: %+v; want one, naming the fallback", b)
				}
			}
			for c, a := range runs {
				if a.Ended || a.Image != "image-of-"+c || !slices.Equal(a.Command, []string{"run", c}) {
					t.Errorf("before %s: %+v; want it not ended, named image-of-%s, run %s, as the engine made it", c, *a, c, c)
				}
			}
			for _, c := range eng.Calls()[phase1:] {
				if strings.HasPrefix(c, "Describe") {
					t.Errorf("the waiter asked the engine %q; want what phase 1 handed over alone", c)
				}
			}
		})
	}
}

// TestOneHandOffFails: a hand-over phase 1 cannot make, or make whole,
// fails nothing: phase 1 says so and hands off, and the waiter asks the
// engine during the wait for what it lacks.
func TestOneHandOffFails(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		fail      string
		wantNamed string // what the waiter has from phase 1
	}{
		{fail: "Hand act-waitdaemon-waiter"},
		{fail: "Describe act-waitdaemon-fallback", wantNamed: "act-waitdaemon-user"},
	} {
		t.Run(tc.fail, func(t *testing.T) {
			dir := t.TempDir()
			eng := newFake()
			eng.Fail = map[string]error{tc.fail: boom}
			args, out := handedOff(t, eng, dir, "IMAGE=reboot:1", `WAITDAEMON_FALLBACK_COMMAND=["reboot","-f"]`)
			if !strings.Contains(out, `"msg":"could not hand the waiter what its containers will run; it asks the engine during the wait"`) || !strings.Contains(out, "boom") ||
				!strings.Contains(out, `"msg":"handed off"`) {
				t.Errorf("phase 1 said:\n%s\nwant the hand-over's failure, and the hand-off", out)
			}
			w := &waiter{WaiterArgs: args, eng: eng, o: Options{Stdout: io.Discard}}
			w.learnRuns(t.Context(), time.Now()) // no time to ask the engine
			var named []string
			for c := range w.planned {
				named = append(named, c)
			}
			if tc.wantNamed == "" && len(named) != 0 || tc.wantNamed != "" && !slices.Equal(named, []string{tc.wantNamed}) {
				t.Errorf("the waiter has what %q will run from phase 1; want %q", named, tc.wantNamed)
			}
			eng.Fail = nil
			w.learnRuns(t.Context(), time.Now().Add(time.Second))
			if len(w.planned) != 2 {
				t.Errorf("with time to ask, the waiter knows what %v will run; want both", w.planned)
			}
		})
	}
}

// slowHanded is the fake engine, whose Handed answers only when its ctx
// ends: an engine that does not answer.
type slowHanded struct{ *recordingStarts }

func (s slowHanded) Handed(ctx context.Context) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestTwoHandedUnread: what phase 1 handed over that the waiter cannot
// read, or read in time, is logged, and the waiter asks the engine
// during the wait; with no wait, the start is late by handedWithin at
// most, and the result before it names the image phase 1 made the user
// container of.
func TestTwoHandedUnread(t *testing.T) {
	for _, tc := range []struct {
		name     string
		wait     int
		slow     bool
		handed   string // what phase 1 left; "" for nothing
		fail     error
		wantSays string
		wantRun  attempt // before the user container's start
	}{
		{name: "not JSON", wait: 1, handed: "{", wantSays: "unexpected end of JSON input",
			wantRun: attempt{Image: "image-of-act-waitdaemon-user", Command: []string{"run", "act-waitdaemon-user"}}},
		{name: "the engine's error", wait: 1, fail: errors.New("boom"), wantSays: "boom",
			wantRun: attempt{Image: "image-of-act-waitdaemon-user", Command: []string{"run", "act-waitdaemon-user"}}},
		{name: "no answer, no wait", slow: true, wantSays: "context deadline exceeded", wantRun: attempt{Image: "reboot:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingStarts{Engine: waiterFake(false), file: filepath.Join(t.TempDir(), "result.json"), before: map[string][]result{}}
			rec.Own = "act-waitdaemon-waiter"
			if tc.handed != "" {
				if err := rec.Hand(t.Context(), "act-waitdaemon-waiter", []byte(tc.handed)); err != nil {
					t.Fatal(err)
				}
			}
			rec.Fail = map[string]error{"Handed": tc.fail}
			rec.ExitedAt = time.Now()
			args := waiterArgs(0, false)
			args.WaitSeconds, args.ResultFile, args.UserImage = tc.wait, rec.file, "reboot:1"
			var eng engine.Engine = rec
			if tc.slow {
				eng = slowHanded{rec}
			}
			var out bytes.Buffer
			if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), `"msg":"could not read what phase 1 handed over"`) || !strings.Contains(out.String(), tc.wantSays) {
				t.Errorf("the waiter said:\n%s\nwant that it could not read what phase 1 handed over: %s", out.String(), tc.wantSays)
			}
			var started waited
			for _, l := range strings.Split(out.String(), "\n") {
				if strings.Contains(l, `"msg":"started user container"`) {
					_ = json.Unmarshal([]byte(l), &started)
				}
			}
			if started.StartSent == "" || started.LateMS > (handedWithin+200*time.Millisecond).Milliseconds() {
				t.Errorf("start sent %d ms late; want within handedWithin, %v:\n%s", started.LateMS, handedWithin, out.String())
			}
			b := rec.before["act-waitdaemon-user"]
			if len(b) != 1 || len(b[0].Attempts) != 1 || b[0].Attempts[0].Image != tc.wantRun.Image || !slices.Equal(b[0].Attempts[0].Command, tc.wantRun.Command) {
				t.Errorf("result before the start: %+v; want its run named %q, %q", b, tc.wantRun.Image, tc.wantRun.Command)
			}
		})
	}
}
