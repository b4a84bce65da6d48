package e2e

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/containerd"
	"github.com/waitdaemon/waitdaemon/phase"
)

// The fault sweep: a full action (phase 1, the waiter, a retry and the
// fallback, with a result file) is run once through a fault proxy with no
// fault, which records every call it makes to the engine. Then, for each
// call of that list and each kind of fault, the same action is run again
// with that one fault on that one call, and the invariants are checked:
//   - the action exits 0, the user container runs once per attempt asked
//     for and the fallback once; or it fails, saying why, and leaves
//     nothing, and nothing of it ran;
//   - once it handed off, the waiter writes its result line, and the
//     result file;
//   - no container was made twice;
//   - what is left is what the README allows: after the hand-off, the
//     kept (failed) user container, and on containerd the stopped waiter
//     until another action's waiter removes it; after a failure, nothing.
//
// The list drives the sweep: a call added to waitdaemon is swept without
// a change here.

// sweepCall is one call of an action: the nth (from 1) of the calls that
// the proxy's norm gives the same key.
type sweepCall struct {
	key string
	nth int
}

func (c sweepCall) String() string { return fmt.Sprintf("%s #%d", c.key, c.nth) }

// name names the call's subtests, and so their temporary directories,
// in characters a file:// URI (an action's output on containerd) keeps
// as they are.
func (c sweepCall) name() string {
	return strings.NewReplacer("{", "", "}", "", "#", "", `"`, "", "=", "-").Replace(fmt.Sprintf("%s %d", c.key, c.nth))
}

// sweepKind is a kind of fault the sweep puts on a call.
type sweepKind int

const (
	// faultRefused: the call breaks before it reaches the engine (the
	// connection or stream reset, nothing forwarded).
	faultRefused sweepKind = iota
	// faultLost: the engine does the work, and its answer is lost.
	faultLost
	// faultTransient: the engine answers 503, or UNAVAILABLE.
	faultTransient
	// faultCut10, faultCut30, faultCut60: the connection cut while the
	// engine is still acting: the call forwarded, then, that many
	// milliseconds after it came, cut on both sides (the engine's
	// request cancelled, as a client's broken connection cancels it),
	// whatever the engine answered by then withheld.
	faultCut10
	faultCut30
	faultCut60
)

var sweepKinds = []sweepKind{faultRefused, faultLost, faultTransient, faultCut10, faultCut30, faultCut60}

func (k sweepKind) String() string {
	return [...]string{"refused", "lost", "transient", "cut-10ms", "cut-30ms", "cut-60ms"}[k]
}

// cutDelay is how long after a call came a faultCut kind cuts it.
func (k sweepKind) cutDelay() time.Duration {
	return map[sweepKind]time.Duration{faultCut10: 10 * time.Millisecond, faultCut30: 30 * time.Millisecond, faultCut60: 60 * time.Millisecond}[k]
}

// sweepOnly, when set, sweeps every call with the faults it names
// (comma separated, as String names them, or all), to look at some of
// them again.
var sweepOnly = flag.String("sweep.faults", "", "sweep every call with these faults (comma separated: refused,lost,transient,cut-10ms,cut-30ms,cut-60ms; all for every one)")

// sweeping is the faults the sweep puts on the ith call of the recording,
// c, unless -sweep.faults says otherwise. A call that acts, waits or
// streams gets the lost answer (the engine acted, and its answer never
// came), one cut (at 10, 30 or 60 ms, in turn down the list), and one
// failure before the engine acts (the reset or the 503, in turn). A
// plain read (a get, a list, a stat) changes nothing and answers at once:
// its repeat is the same call whatever became of the first, so it gets
// one fault, the reset, the lost answer or the 503 in turn down the list.
func sweeping(i int, c sweepCall) []sweepKind {
	switch *sweepOnly {
	case "":
		if c.plainRead() {
			reads := []sweepKind{faultRefused, faultLost, faultTransient}
			return []sweepKind{reads[i%len(reads)]}
		}
		before := []sweepKind{faultRefused, faultTransient}
		cuts := []sweepKind{faultCut10, faultCut30, faultCut60}
		return []sweepKind{before[i%len(before)], faultLost, cuts[i%len(cuts)]}
	case "all":
		return sweepKinds
	}
	var out []sweepKind
	for _, k := range sweepKinds {
		if slices.Contains(strings.Split(*sweepOnly, ","), k.String()) {
			out = append(out, k)
		}
	}
	return out
}

// sweepPlan is the faults each call of the recording gets: the whole
// sweep's (sweeping) in the full tier, the gate's sample (sampled) under
// go test -short, unless -sweep.faults names the faults.
func sweepPlan(calls []sweepCall) [][]sweepKind {
	if testing.Short() && *sweepOnly == "" {
		return sampled(calls)
	}
	out := make([][]sweepKind, len(calls))
	for i, c := range calls {
		out[i] = sweeping(i, c)
	}
	return out
}

// sampled is the gate's sample of the sweep: each kind of fault that the
// whole sweep puts on a class of call (a plain read, a wait, a stream, a
// call that acts) once on a call of that class, the class's calls taken
// in turn down the recording, so that the faults land on different calls.
func sampled(calls []sweepCall) [][]sweepKind {
	byClass := map[string][]int{}
	var classes []string
	for i, c := range calls {
		cl := c.class()
		if byClass[cl] == nil {
			classes = append(classes, cl)
		}
		byClass[cl] = append(byClass[cl], i)
	}
	out := make([][]sweepKind, len(calls))
	for _, cl := range classes {
		kinds := sweepKinds
		if cl == "read" {
			kinds = []sweepKind{faultRefused, faultLost, faultTransient}
		}
		idx := byClass[cl]
		for j, k := range kinds {
			i := idx[j%len(idx)]
			out[i] = append(out[i], k)
		}
	}
	return out
}

// class is the kind of call c is: "read" (plainRead), "wait" (for a
// container's or task's end), "stream" (a log, the events, a pull's
// progress, a content read) or "act".
func (c sweepCall) class() string {
	if c.plainRead() {
		return "read"
	}
	method, path, _ := strings.Cut(c.key, " ")
	if _, rpc, ok := strings.Cut(method, "/"); ok {
		switch rpc {
		case "Wait":
			return "wait"
		case "Read", "Subscribe":
			return "stream"
		}
		return "act"
	}
	switch {
	case strings.Contains(path, "/wait"):
		return "wait"
	case strings.Contains(path, "/logs"), strings.HasPrefix(path, "/events"), strings.HasPrefix(path, "/images/create"):
		return "stream"
	}
	return "act"
}

// plainRead says whether c reads a record and nothing more: on Docker a
// GET or HEAD but a log or the events' stream, on containerd a Get, List or Stat, or the
// version.
func (c sweepCall) plainRead() bool {
	method, path, _ := strings.Cut(c.key, " ")
	switch method {
	case "GET", "HEAD":
		return !strings.Contains(path, "/logs") && !strings.HasPrefix(path, "/events")
	}
	_, rpc, ok := strings.Cut(method, "/")
	return ok && (rpc == "Get" || rpc == "List" || rpc == "Stat" || rpc == "Version")
}

// sweepParallel is how many actions of the sweep run at once.
const sweepParallel = 4

// minSweepCalls is fewer calls than a full action can make on any
// engine: a recording shorter than this recorded too little.
const minSweepCalls = 20

// The action of the sweep: its user container (the probe) fails every
// run, so that it is re-run once and then the fallback (the probe too)
// runs; each counts its runs in out/<name>.count.
const sweepRetries = 1

var (
	sweepUserCommand     = []string{"--name=user", "--fail-times=1000"}
	sweepFallbackCommand = `["--name=fallback","--fail-times=0"]`
)

// sweepEnv is the sweep action's environment, besides the engine's
// socket and IMAGE.
func sweepEnv(resultFile string) map[string]string {
	return map[string]string{
		"WAIT_SECONDS":                "0",
		"WAITDAEMON_RETRIES":          fmt.Sprint(sweepRetries),
		"WAITDAEMON_FALLBACK_COMMAND": sweepFallbackCommand,
		"WAITDAEMON_RESULT_FILE":      resultFile,
	}
}

// sweepRun is what became of one action of the sweep.
type sweepRun struct {
	actionID string
	exit     int
	phase1   string
	waiter   string // the waiter's output, once it handed off
	proxyLog string
	calls    []sweepCall
	fired    int                // how many calls the fault broke
	left     []engine.Container // what remained, once settled
	// created counts, for each role, the distinct containers the engine
	// was seen to make.
	created map[string]int
}

// sweeper runs actions of the sweep on one engine.
type sweeper interface {
	// run runs the action named for n, through a proxy of its own that
	// breaks call as kind says (no fault when call.key is empty), with
	// the user container and the fallback reporting to out.
	run(t *testing.T, n int, call sweepCall, kind sweepKind, out string) sweepRun
	// keepsWaiter: after the hand-off, the stopped waiter may stay.
	keepsWaiter() bool
	// prepare makes the engine's state before the recording what it is
	// during the sweep, so that the recording makes every call the
	// sweep's runs do.
	prepare(t *testing.T)
}

// TestFaultSweep runs the sweep on Docker 20.10 and on containerd, with
// actions made as tink-agent makes them: both at once, since each action
// of it mostly waits on its engine. make test (go test -short) runs the
// sample (sampled), make test-all the whole sweep.
func TestFaultSweep(t *testing.T) {
	t.Run("docker", func(t *testing.T) {
		onRow(t, "docker")
		t.Parallel()
		sweep(t, dockerSweeper{c: setup(t)})
	})
	t.Run("containerd", func(t *testing.T) {
		t.Parallel()
		c, eng, img := setupContainerd(t)
		sweep(t, containerdSweeper{r: containerdRig{c: c, eng: eng, actionImg: img}})
	})
}

// sweepOutcome is how one run of the sweep ended.
type sweepOutcome string

const (
	outcomeRan      sweepOutcome = "handed off; each attempt and the fallback ran once"
	outcomeFailed   sweepOutcome = "failed cleanly"
	outcomeNotMet   sweepOutcome = "the call was not made so often: no fault"
	outcomeViolated sweepOutcome = "an invariant broke"
	outcomeNotReady sweepOutcome = "the engine could not be readied for it: not run"
)

func sweep(t *testing.T, s sweeper) {
	start := time.Now()
	s.prepare(t)
	out := t.TempDir()
	rec := s.run(t, 0, sweepCall{}, faultRefused, out)
	if checkSweepRun(t, s, rec, out) != outcomeRan || t.Failed() {
		t.Fatalf("the recording run did not hand off and run everything; phase 1 (exit %d):\n%s\nproxy:\n%s", rec.exit, rec.phase1, rec.proxyLog)
	}
	if len(rec.calls) < minSweepCalls {
		t.Fatalf("the recording has %d calls, want at least %d: %v\nproxy:\n%s", len(rec.calls), minSweepCalls, rec.calls, rec.proxyLog)
	}
	var list []string
	for _, c := range rec.calls {
		list = append(list, c.String())
	}
	t.Logf("recorded %d calls:\n%s", len(rec.calls), strings.Join(list, "\n"))

	type sweepCase struct {
		n    int
		call sweepCall
		kind sweepKind
		// before readies the engine for the case, within its subtest:
		// a case that -run leaves out needs nothing readied.
		before func(*testing.T)
	}
	cases := make(chan sweepCase)
	var mu sync.Mutex
	outcomes := map[sweepOutcome]int{}
	byKind := map[sweepKind]map[sweepOutcome]int{}
	var notRan []string // the runs that did not hand off and run everything
	var wg sync.WaitGroup
	runCases := func(cases <-chan sweepCase) {
		for c := range cases {
			// t.Run from several goroutines at once: the runs overlap
			// without counting against -parallel.
			t.Run(c.call.name()+"/"+c.kind.String(), func(t *testing.T) {
				outcome := outcomeViolated
				defer func() {
					mu.Lock()
					defer mu.Unlock()
					if t.Failed() && outcome != outcomeNotReady {
						outcome = outcomeViolated
					}
					outcomes[outcome]++
					if outcome != outcomeRan {
						notRan = append(notRan, fmt.Sprintf("  %s, %s: %s", c.call, c.kind, outcome))
					}
					if byKind[c.kind] == nil {
						byKind[c.kind] = map[sweepOutcome]int{}
					}
					byKind[c.kind][outcome]++
				}()
				if c.before != nil {
					outcome = outcomeNotReady
					c.before(t)
					outcome = outcomeViolated
				}
				out := t.TempDir()
				r := s.run(t, c.n, c.call, c.kind, out)
				outcome = checkSweepRun(t, s, r, out)
				if r.fired == 0 {
					outcome = outcomeNotMet
				}
			})
		}
	}
	for range sweepParallel {
		wg.Add(1)
		go func() { defer wg.Done(); runCases(cases) }()
	}
	// A call on another action's container (a waiter removing the
	// stopped waiters of other actions) is made only if that container
	// is still there: those runs go alone, after the rest, each after
	// prepare has left one, as it did before the recording.
	n := 0
	var alone []sweepCase
	faults := sweepPlan(rec.calls)
	for i, call := range rec.calls {
		for _, kind := range faults[i] {
			n++
			if strings.Contains(call.key, "{other}") {
				alone = append(alone, sweepCase{n, call, kind, s.prepare})
				continue
			}
			cases <- sweepCase{n: n, call: call, kind: kind}
		}
	}
	close(cases)
	wg.Wait()
	for _, c := range alone {
		one := make(chan sweepCase, 1)
		one <- c
		close(one)
		runCases(one)
	}

	var summary []string
	for _, kind := range sweepKinds {
		if byKind[kind] == nil {
			continue
		}
		var parts []string
		for o, k := range byKind[kind] {
			parts = append(parts, fmt.Sprintf("%d %s", k, o))
		}
		sort.Strings(parts)
		summary = append(summary, fmt.Sprintf("  %s: %s", kind, strings.Join(parts, ", ")))
	}
	slices.Sort(notRan)
	ran := 0 // the runs -run selected
	for _, k := range outcomes {
		ran += k
	}
	t.Logf("the sweep: %d calls, %d runs, %d of them run, in %v: %d %s, %d %s, %d %s, %d %s\n%s\nthe runs that did not hand off and run everything:\n%s",
		len(rec.calls), n, ran, time.Since(start).Round(time.Second),
		outcomes[outcomeRan], outcomeRan, outcomes[outcomeFailed], outcomeFailed,
		outcomes[outcomeNotMet], outcomeNotMet, outcomes[outcomeViolated], outcomeViolated,
		strings.Join(summary, "\n"), strings.Join(notRan, "\n"))
}

// checkSweepRun checks the invariants on r, and says how it ended.
func checkSweepRun(t *testing.T, s sweeper, r sweepRun, out string) sweepOutcome {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format+"\nphase 1 (exit %d):\n%s\nwaiter:\n%s\nproxy:\n%s", append(args, r.exit, r.phase1, r.waiter, r.proxyLog)...)
	}
	count := func(name string) int {
		data, err := os.ReadFile(filepath.Join(out, name+".count"))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return len(data)
	}
	for role, n := range r.created {
		if n > 1 {
			fail("the engine made %d %s containers, want one", n, role)
		}
	}
	var left []string
	for _, l := range r.left {
		left = append(left, l.Labels[phase.LabelRole])
		if l.Running {
			fail("%s still runs", l.Name)
		}
	}
	slices.Sort(left)

	if r.exit != 0 {
		msg := ""
		for _, l := range strings.Split(r.phase1, "\n") {
			if m, ok := strings.CutPrefix(l, "waitdaemon: "); ok {
				msg = m
			}
		}
		if msg == "" {
			fail("the action failed saying nothing")
		}
		if len(left) > 0 {
			fail("the action failed and left %q, want nothing", left)
		}
		if u, f := count("user"), count("fallback"); u != 0 || f != 0 {
			fail("the action failed, and yet the user container ran %d times and the fallback %d", u, f)
		}
		t.Logf("failed cleanly, saying: %s", msg)
		return outcomeFailed
	}

	if u, f := count("user"), count("fallback"); u != 1+sweepRetries || f != 1 {
		fail("the user container ran %d times and the fallback %d, want %d and 1", u, f, 1+sweepRetries)
	}
	res, ok := find(events(r.waiter), "result")
	if !ok {
		fail("the waiter wrote no result line")
	} else {
		checkSweepResult(t, "the result line", mustJSON(t, res), fail)
	}
	data, err := os.ReadFile(filepath.Join(out, "result.json"))
	if err != nil {
		fail("no result file: %v", err)
	} else {
		checkSweepResult(t, "the result file", data, fail)
	}
	// The user container of each attempt failed: each is kept. The
	// fallback succeeded: it is removed. The waiter is removed when it
	// ends, or on containerd stays, stopped, until another action's
	// waiter removes it.
	users := slices.Repeat([]string{"user"}, 1+sweepRetries)
	want := [][]string{users}
	if s.keepsWaiter() {
		want = [][]string{users, append(slices.Clone(users), "waiter")}
	}
	if !slices.ContainsFunc(want, func(w []string) bool { return slices.Equal(w, left) }) {
		fail("left %q, want one of %q", left, want)
	}
	return outcomeRan
}

// checkSweepResult checks a result: the user container failed, twice,
// and the fallback ran and succeeded.
func checkSweepResult(t *testing.T, what string, data []byte, fail func(string, ...any)) {
	t.Helper()
	var res struct {
		ExitCode int `json:"exit_code"`
		Attempts []struct {
			ExitCode int  `json:"exit_code"`
			Kept     bool `json:"kept"`
		} `json:"attempts"`
		Fallback *struct {
			ExitCode int `json:"exit_code"`
		} `json:"fallback"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		fail("%s: %v\n%s", what, err, data)
		return
	}
	ok := res.ExitCode == 3 && len(res.Attempts) == 1+sweepRetries && res.Fallback != nil && res.Fallback.ExitCode == 0
	for _, a := range res.Attempts {
		ok = ok && a.ExitCode == 3 && a.Kept
	}
	if !ok {
		fail("%s:\n%s\nwant %d attempts that exited 3, kept, and the fallback exiting 0", what, data, 1+sweepRetries)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// settle waits, within limit, until no container of action id runs (and,
// unless keepsWaiter, its waiter is gone), and returns them.
func settle(t *testing.T, eng engine.Engine, id string, keepsWaiter bool, limit time.Duration) []engine.Container {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(200 * time.Millisecond) {
		list, err := eng.List(testCtx(t), phase.LabelActionID, id)
		if err != nil {
			t.Fatal(err)
		}
		busy := slices.ContainsFunc(list, func(c engine.Container) bool {
			return c.Running || !keepsWaiter && c.Labels[phase.LabelRole] == phase.RoleWaiter
		})
		if !busy || time.Now().After(deadline) {
			return list
		}
	}
}

// dockerSweeper runs the sweep on the Docker engine c.
type dockerSweeper struct{ c *dockerapi.Client }

func (dockerSweeper) keepsWaiter() bool { return false }

// prepare has nothing to do: a waiter on Docker removes itself.
func (dockerSweeper) prepare(*testing.T) {}

var (
	hexID      = regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	createName = regexp.MustCompile(`^POST /containers/create\?name=\S*-waitdaemon-(\w+(?:-\d{1,2})?): 201`)
)

func (d dockerSweeper) run(t *testing.T, n int, call sweepCall, kind sweepKind, out string) sweepRun {
	t.Helper()
	p := newFaultProxy(t, d.c.SocketPath())
	name := fmt.Sprintf("e2e sweep %d", n)
	full := actionContainer(tinkAgent, name)
	p.norm = func(x string) string {
		return hexID.ReplaceAllString(strings.ReplaceAll(x, full, "{action}"), "{id}")
	}
	if call.key != "" {
		f := &fault{call: call}
		switch kind {
		case faultRefused:
			f.kind = hangUp
		case faultLost:
			f.kind = hangUpLate
		case faultTransient:
			f.kind, f.status = answer, 503
		default:
			f.kind, f.delay = cutActing, kind.cutDelay()
		}
		p.add(f)
	}
	p.listen()
	env := sweepEnv(filepath.Join(out, "result.json"))
	k, v := p.env()
	env[k], env["IMAGE"], env["WAITDAEMON_FALLBACK_IMAGE"] = v, probeImage, probeImage
	r := runAction(t, d.c, tinkAgent, action{
		name: name, command: sweepUserCommand, env: env, noSocket: true,
		volumes: []string{p.volume(), out + ":/out"},
	})
	res := sweepRun{actionID: r.ID, exit: r.ExitCode, phase1: r.Logs}
	if r.ExitCode == 0 {
		res.waiter = followWaiterRaw(t, d.c, r.ID)
	}
	res.left = settle(t, rigOf(d.c).engine(), r.ID, false, 30*time.Second)
	res.proxyLog = p.log()
	res.calls = p.calls()
	res.created = map[string]int{}
	for _, l := range strings.Split(p.log(), "\n") {
		if m := createName.FindStringSubmatch(l); m != nil {
			res.created[m[1]]++
		}
	}
	res.fired = p.fired()
	return res
}

// containerdSweeper runs the sweep on the test containerd.
type containerdSweeper struct{ r containerdRig }

func (containerdSweeper) keepsWaiter() bool { return true }

// prepare leaves one stopped waiter of another action, and that one
// alone (its own waiter removes the others), as the sweep's actions leave
// theirs: the recording's waiter then removes it, as a waiter removes
// the stopped waiters of other actions once its user container has run.
func (s containerdSweeper) prepare(t *testing.T) {
	t.Helper()
	r := s.r.run(t, tinkAgent, action{
		name: "e2e sweep other", pid: "host", volumes: []string{t.TempDir() + ":/out"},
		env: map[string]string{"IMAGE": "docker.io/library/" + probeImage, "WAIT_SECONDS": "0"},
	})
	if r.ExitCode != 0 {
		t.Fatalf("the action before the recording exited %d:\n%s", r.ExitCode, r.Logs)
	}
	waitDone(t, s.r, r.ID, 30*time.Second)
}

var cdCreated = regexp.MustCompile(`(?m)^Containers/Create (\S*-waitdaemon-(\w+(?:-\d{1,2})?)-[0-9a-f]{8}): OK`)

func (s containerdSweeper) run(t *testing.T, n int, call sweepCall, kind sweepKind, out string) sweepRun {
	t.Helper()
	p := newGRPCFaultProxy(t)
	name := fmt.Sprintf("e2e sweep %d", n)
	full := actionContainer(tinkAgent, name)
	own := regexp.MustCompile(regexp.QuoteMeta(full) + `(-waitdaemon-\w+(?:-\d{1,2})?)(-[0-9a-f]{8})?\b`)
	p.norm = func(x string) string {
		x = own.ReplaceAllString(x, "{action}$1")
		x = otherWaitdaemon.ReplaceAllString(x, "{other}$1")
		return hexID.ReplaceAllString(strings.ReplaceAll(x, full, "{action}"), "{id}")
	}
	if call.key != "" {
		f := &grpcFault{call: call, kind: cutInFlight, delay: kind.cutDelay()}
		if k, ok := map[sweepKind]grpcFaultKind{faultRefused: resetUnsent, faultLost: lostAnswer, faultTransient: unavailable}[kind]; ok {
			f.kind = k
		}
		p.add(f)
	}
	p.listen()
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"IMAGE=docker.io/library/" + probeImage, "WAITDAEMON_FALLBACK_IMAGE=docker.io/library/" + probeImage,
	}
	for k, v := range sweepEnv(filepath.Join(out, "result.json")) {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	ctx := testCtx(t)
	ctr := s.r.create(t, ctx, cdAgentAction(full, sweepUserCommand, env, [][2]string{{p.dir, filepath.Dir(containerdapi.DefaultSocket)}, {out, "/out"}}, "host", ""))
	exit := s.r.agentRun(t, ctx, ctr)
	res := sweepRun{actionID: ctr.ID, exit: exit.ExitCode, phase1: exit.Output}
	if err := ctr.Finish(ctx, exit); err != nil {
		t.Fatalf("agent: %v", err)
	}
	if exit.ExitCode == 0 {
		res.waiter = s.waiterOutput(t, ctr.ID)
	}
	res.left = settle(t, s.r.eng, ctr.ID, true, 30*time.Second)
	res.proxyLog = p.log()
	res.calls = p.calls()
	res.created = map[string]int{}
	ids := map[string]bool{}
	// A container given up as unsettled (its task create cut, and the
	// one sent again hanging) is removed, never started, and made anew:
	// it was not made twice.
	for _, e := range events(res.phase1 + "\n" + res.waiter) {
		if strings.HasPrefix(e.str("msg"), "gave up a container") {
			t.Logf("gave up %s, its task create not settled, and made it anew as %s", e.str("container"), e.str("fresh"))
			ids[e.str("container")] = true
		}
	}
	for _, m := range cdCreated.FindAllStringSubmatch(res.proxyLog, -1) {
		if !ids[m[1]] {
			ids[m[1]] = true
			res.created[m[2]]++
		}
	}
	res.fired = p.fired()
	return res
}

// otherWaitdaemon matches the ID of a container another action's phase 1
// made.
var otherWaitdaemon = regexp.MustCompile(`\S+(-waitdaemon-\w+(?:-\d{1,2})?)-[0-9a-f]{8}\b`)

// waiterOutput follows the waiter of action id to its end and returns its
// output. The output file is held open from the start: another action's
// waiter may remove this one, and its directory, once it has stopped.
func (s containerdSweeper) waiterOutput(t *testing.T, actionID string) string {
	t.Helper()
	id := roleOf(t, s.r, actionID, phase.RoleWaiter)
	if id == "" {
		return "(no waiter found)"
	}
	f, err := os.Open(filepath.Join(containerd.DefaultLogDir, id, "log"))
	if err != nil {
		return fmt.Sprintf("(its output: %v)", err)
	}
	defer f.Close()
	if _, err := s.r.c.TaskWait(testCtx(t), id); err != nil {
		t.Logf("waiting for the waiter: %v", err)
	}
	// The shim copies the last lines after the exit: wait, within 30 s,
	// for the result line (or for the file to be removed).
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		data, err := os.ReadFile(f.Name())
		if err != nil || strings.Contains(string(data), `"msg":"result"`) {
			break
		}
	}
	out, _ := io.ReadAll(f)
	return string(out)
}

// TestSweepFaults: a call that acts, waits or streams gets a failure
// before the engine acts (the reset or the 503 in turn), the lost answer
// and one cut (its delay in turn down the list); a plain read gets one
// fault, in turn down the list; -sweep.faults=all gives every call every
// fault.
func TestSweepFaults(t *testing.T) {
	names := func(ks []sweepKind) string {
		var out []string
		for _, k := range ks {
			out = append(out, k.String())
		}
		return strings.Join(out, ",")
	}
	was := *sweepOnly
	t.Cleanup(func() { *sweepOnly = was })
	*sweepOnly = ""
	for _, tc := range []struct {
		i    int
		key  string
		want string
	}{
		{0, "GET /_ping", "refused"},
		{1, "GET /containers/{id}/json", "lost"},
		{2, "HEAD /containers/{id}/archive", "transient"},
		{3, "GET /containers/{id}/logs", "transient,lost,cut-10ms"},
		{4, "POST /containers/create?name={action}-waitdaemon-user", "refused,lost,cut-30ms"},
		{5, "POST /containers/{id}/wait", "transient,lost,cut-60ms"},
		{6, "DELETE /containers/{action}-waitdaemon-fallback", "refused,lost,cut-10ms"},
		{7, "Version/Version", "lost"},
		{8, "Containers/Get {id}", "transient"},
		{9, `Containers/List labels."org.waitdaemon.role"=="waiter"`, "refused"},
		{10, "Snapshots/Stat sha256:{id}", "lost"},
		{11, "Content/Read", "transient,lost,cut-60ms"},
		{12, "Tasks/Create {action}-waitdaemon-user", "refused,lost,cut-10ms"},
		{13, "Tasks/Wait {id}", "transient,lost,cut-30ms"},
		{14, "Leases/Delete waitdaemon-{action}-waitdaemon-user", "refused,lost,cut-60ms"},
	} {
		if got := names(sweeping(tc.i, sweepCall{key: tc.key, nth: 1})); got != tc.want {
			t.Errorf("call %d, %s: %s; want %s", tc.i, tc.key, got, tc.want)
		}
	}
	for only, want := range map[string]string{"all": "refused,lost,transient,cut-10ms,cut-30ms,cut-60ms", "cut-30ms,lost": "lost,cut-30ms"} {
		*sweepOnly = only
		if got := names(sweeping(0, sweepCall{key: "GET /_ping", nth: 1})); got != want {
			t.Errorf("-sweep.faults=%s: %s; want %s", only, got, want)
		}
	}
}

// TestSweepSample: the gate's sample gives each class of call each fault
// the whole sweep gives it, once, spread over the class's calls in turn.
func TestSweepSample(t *testing.T) {
	calls := []sweepCall{
		{key: "GET /_ping", nth: 1},
		{key: "POST /containers/create?name={action}-waitdaemon-user", nth: 1},
		{key: "GET /containers/{id}/json", nth: 1},
		{key: "POST /containers/{id}/wait", nth: 1},
		{key: "POST /containers/{id}/start", nth: 1},
		{key: "GET /containers/{id}/logs", nth: 1},
		{key: "Tasks/Wait {id}", nth: 1},
		{key: "Content/Read", nth: 1},
	}
	want := map[string][]string{
		"GET /_ping":                {"refused", "transient"},
		"GET /containers/{id}/json": {"lost"},
		"POST /containers/create?name={action}-waitdaemon-user": {"refused", "transient", "cut-30ms"},
		"POST /containers/{id}/start":                           {"lost", "cut-10ms", "cut-60ms"},
		"POST /containers/{id}/wait":                            {"refused", "transient", "cut-30ms"},
		"Tasks/Wait {id}":                                       {"lost", "cut-10ms", "cut-60ms"},
		"GET /containers/{id}/logs":                             {"refused", "transient", "cut-30ms"},
		"Content/Read":                                          {"lost", "cut-10ms", "cut-60ms"},
	}
	got := sampled(calls)
	runs := 0
	for i, c := range calls {
		var names []string
		for _, k := range got[i] {
			names = append(names, k.String())
		}
		runs += len(names)
		if !slices.Equal(names, want[c.key]) {
			t.Errorf("%s: %q; want %q", c.key, names, want[c.key])
		}
	}
	if runs != 3+3*len(sweepKinds) {
		t.Errorf("%d runs; want %d: three for the reads, six for each other class", runs, 3+3*len(sweepKinds))
	}
}

// TestSweepClasses: the engines' event streams are streams, not reads.
func TestSweepClasses(t *testing.T) {
	for key, want := range map[string]string{
		`GET /events?filters={"container":["{id}"],"type":["container"]}&since={time}`: "stream",
		"Events/Subscribe":          "stream",
		"GET /containers/{id}/json": "read",
		"Containers/Get {id}":       "read",
	} {
		if got := (sweepCall{key: key, nth: 1}).class(); got != want {
			t.Errorf("class of %s = %q; want %q", key, got, want)
		}
	}
}
