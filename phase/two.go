package phase

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/engine"
)

// Backoff between re-runs of a failed user container: retryBase, doubled
// each time, at most retryCap.
var (
	retryBase = 2 * time.Second
	retryCap  = 30 * time.Second
)

// engineLost is the one bound on an engine that went away (restarting,
// say): how long the waiter goes on asking for the action's exit (then
// its exit counts as unknown), and for the end of a run it cannot follow
// (then the run counts as failed with unfollowedExitCode). The engines
// ask once and say so (engine.ErrNoAnswer); each ask waits for the
// socket within the client's own bound.
var engineLost = 2 * time.Minute

// lostStop bounds the stop of a run whose end was never followed, and the
// look at its end after, before any next run.
var lostStop = 30 * time.Second

// unfollowedExitCode is the exit code of a run whose end the engine never
// told: as docker run gives the engine's failures.
const unfollowedExitCode = 125

// FinishGrace is how long the finish's engine calls go on after a
// signal: the shutdown the user container started sends it, and may have
// stopped the engine already, whose calls would each wait for it to come
// back while the shutdown waits for the waiter. The result is reported
// after them.
const FinishGrace = 2 * time.Second

// signalStart bounds the start of the fallback after a signal: the
// shutdown that sent it may have stopped the engine already, whose calls
// would each wait for it to come back while the shutdown waits for the
// waiter.
var signalStart = 5 * time.Second

// unwritableLinger is how long a waiter that cannot write its result
// file stays, for phase 1 to read why.
var unwritableLinger = 30 * time.Second

// waiter is one run of phase 2.
type waiter struct {
	WaiterArgs
	eng engine.Engine
	o   Options
	// from is when WAIT_SECONDS counted from (countFrom).
	from time.Time
	// planned is what each container will run, by name, as phase 1
	// handed it over or the engine said during the wait: its Image and
	// Command alone.
	planned map[string]attempt
	// lastWrite is closed once the last write of the result file that
	// was begun has ended; writeNote says which writes before a run did
	// not end in time.
	lastWrite chan struct{}
	writeNote string
}

// Two is phase 2, run as the detached waiter container that phase 1
// started: wait for the action container to exit, wait WaitSeconds, run
// the user container (again, up to Retries times, while it fails; then
// the fallback once), report, and remove what succeeded. A signal during
// the wait cancels everything; one after the start leaves the user
// container alone.
func Two(ctx context.Context, eng engine.Engine, args WaiterArgs, o Options) error {
	w := &waiter{WaiterArgs: args, eng: eng, o: o}
	if err := w.answerResultFile(ctx); err != nil {
		return err
	}
	exit, err := w.actionExited(ctx)
	if err != nil {
		return w.exitUnknown(err)
	}
	if exit.Known && exit.Code != 0 {
		return w.actionFailed(ctx, exit.Code)
	}
	w.from = w.countFrom(ctx, exit)
	start := w.from.Add(time.Duration(w.WaitSeconds) * time.Second)
	w.learnRuns(ctx, start)
	if !engine.Sleep(ctx, time.Until(start)) {
		return w.cancel() // a signal during the action or the wait
	}
	res, err := w.runUser(ctx, exit)
	if errors.Is(err, errSignalled) {
		return w.cancel() // a signal before the first start went out
	}
	if err != nil {
		return w.leave()
	}
	if ctx.Err() == nil {
		// Once the user container has run, off its way: the waiter
		// sees what phase 1 cannot, the output files on the host of
		// what it removes.
		sweepWaiters(ctx, eng, w.ActionName, w.o.Stdout)
	}
	fctx, stop := Finishing(ctx)
	defer stop()
	return w.finish(fctx, res)
}

// lostClock is engineLost's count across the asks of one wait: from the
// first ask the engine left unanswered. An ask that failed after longer
// than the client waits for an engine not listening had an answering
// engine for part of that time: its failure starts the count again, so
// that an outage late in a long run gets the whole bound.
type lostClock struct{ since time.Time }

// failed counts an ask begun at began that failed, and says whether it
// is the first of an outage, and whether the outage has lasted engineLost.
func (c *lostClock) failed(began time.Time) (first, over bool) {
	if c.since.IsZero() || time.Since(began) > engine.WaiterWaitForEngine {
		c.since, first = time.Now(), true
	}
	return first, time.Since(c.since) >= engineLost
}

// actionExited is the engine's ActionExited, asked again while the
// engine does not answer (ErrNoAnswer: the action may well still run),
// for engineLost at most.
func (w *waiter) actionExited(ctx context.Context) (engine.Exit, error) {
	var lost lostClock
	for {
		began := time.Now()
		exit, err := w.eng.ActionExited(ctx, w.ActionContainer)
		if !errors.Is(err, engine.ErrNoAnswer) || ctx.Err() != nil {
			return exit, err
		}
		first, over := lost.failed(began)
		if first {
			logEvent(w.o.Stdout, "lost the engine while waiting for the action container; asking again", map[string]string{"error": err.Error()})
		}
		if over {
			return exit, fmt.Errorf("%w (for %v)", err, engineLost)
		}
		if !engine.Sleep(ctx, min(followPause, engineLost)) {
			return engine.Exit{At: time.Now()}, nil
		}
	}
}

// removalBound bounds how long after the action's exit the wait for its
// removal goes on, for a worker that never removes it.
var removalBound = 60 * time.Second

// countFrom is when WAIT_SECONDS counts from: the later of the action's
// exit and its removal, since every worker removes the action container
// before it reports (tink-worker's force-remove; tink-agent's on Docker,
// and its task, container and snapshot on containerd), bounded at
// removalBound after the exit.
func (w *waiter) countFrom(ctx context.Context, exit engine.Exit) time.Time {
	if exit.Removed {
		return exit.At // gone already when its exit was learnt
	}
	at, _ := w.eng.ActionGone(ctx, w.ActionContainer, exit.At.Add(removalBound))
	if at.Before(exit.At) {
		return exit.At
	}
	return at
}

// Finishing is the context of what the waiter does as it ends, its
// finish and the removal of its own container: ctx, which a signal ends,
// given FinishGrace more.
func Finishing(ctx context.Context) (context.Context, context.CancelFunc) {
	return graceAfter(ctx, FinishGrace)
}

// graceAfter is a context that ctx's end does not end at once, but grace
// after.
func graceAfter(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(grace, cancel) })
	return gctx, func() { stop(); cancel() }
}

// answerResultFile tells phase 1 whether the result file can be written.
func (w *waiter) answerResultFile(ctx context.Context) error {
	if w.ResultFile == "" {
		return nil
	}
	if err := w.writable(); err != nil {
		w.answer(ctx, msgResultUnwritable, map[string]string{"error": err.Error()})
		engine.Sleep(ctx, unwritableLinger) // until phase 1 has read it and removes this waiter
		return err
	}
	w.answer(ctx, msgResultWritable, map[string]string{"result_file": w.ResultFile})
	return nil
}

// answer logs a line that phase 1 waits for in the waiter's output. An
// engine on which phase 1 cannot read that output (engine.Teller) is told
// a short line instead (told); if that fails, phase 1 says the waiter
// never answered.
func (w *waiter) answer(ctx context.Context, msg string, details map[string]string) {
	if w.o.Stdout != nil {
		logEvent(w.o.Stdout, msg, details)
	}
	if t, ok := w.eng.(engine.Teller); ok {
		if err := t.Tell(ctx, told(msg, details["error"])); err != nil {
			logEvent(w.o.Stdout, "could not tell phase 1", map[string]string{"error": err.Error()})
		}
	}
}

// maxToldError bounds the error a told line carries: escaped as JSON,
// six bytes a byte at worst, the line stays within the 4 KB an engine's
// label holds.
const maxToldError = 512

// told is the line an engine.Teller carries: msg, and why (errText, cut
// to maxToldError bytes at a rune's start), all that phase 1 reads of it.
func told(msg, errText string) []byte {
	if len(errText) > maxToldError {
		errText = strings.ToValidUTF8(errText[:maxToldError], "") + "…"
	}
	line, _ := json.Marshal(struct {
		Msg   string `json:"msg"`
		Error string `json:"error,omitempty"`
	}{msg, errText})
	return line
}

// errSignalled is a run not started because ctx ended before its start
// went out, in one of the steps before it that can wait: the make of a
// re-run's container, the write of the result before it.
var errSignalled = errors.New("a signal came before the start")

// runUser runs the user container, and again (afresh: attempt) while it
// fails, up to Retries times, then the fallback once if it still failed.
// Its error is ctx's when ctx ended while a run was followed: that run
// goes on; errSignalled when ctx ended before the first start went out.
// A ctx that ends before a re-run's start (in the pause, the make of its
// container or the write before it) stops the re-runs: the result says
// so, and the fallback still starts.
func (w *waiter) runUser(ctx context.Context, exit engine.Exit) (result, error) {
	var res result
	halted := false // a run's end could not be learnt: nothing more starts
	for n := 1; ; n++ {
		if n > 1 && !engine.Sleep(ctx, retryDelay(n)) {
			res.Stopped = w.stopBeforeRerun(n)
			break
		}
		a, err := w.attempt(ctx, n, res, exit)
		if errors.Is(err, errSignalled) && n > 1 {
			res.unstarted = append(res.unstarted, a.Container)
			res.Stopped = w.stopBeforeRerun(n)
			break
		}
		if err != nil {
			return res, err
		}
		if a, halted = w.beforeNext(ctx, a, n, &res); halted {
			break
		}
		a = sameAsBefore(a, n, res.Attempts)
		if err := w.settle(ctx, &a); err != nil {
			return res, err
		}
		res.Attempts = append(res.Attempts, a)
		logEvent(w.o.Stdout, "user container exited", a)
		if !a.failed() || n > w.Retries {
			break
		}
	}
	last := res.Attempts[len(res.Attempts)-1]
	res.ExitCode, res.Image, res.Command, res.Note = last.ExitCode, last.Image, last.Command, last.Note
	if w.FallbackContainer != "" && last.failed() && !halted {
		return w.runFallback(ctx, res)
	}
	return res, nil
}

// notMadeExitCode is the exit code of a re-run whose container could not
// be made: the engine's failure, as docker run gives it, whatever the
// engine said.
const notMadeExitCode = 125

// attempt writes the result so far, res, and runs attempt n: the first
// in the user container phase 1 made, each re-run in a fresh container
// made from it (not a restart of one a run has changed), which starts
// from the image as the first did. The make, like a start, is not cut
// short by a signal: the engine may make it all the same. A ctx that
// ended by the start (during the make or the write) starts nothing: the
// error is errSignalled, with the attempt's container.
func (w *waiter) attempt(ctx context.Context, n int, res result, exit engine.Exit) (attempt, error) {
	if n == 1 {
		w.provisional(res, attempt{Attempt: n, Container: w.UserContainer})
		if ctx.Err() != nil {
			return attempt{Container: w.UserContainer}, errSignalled
		}
		return w.run(ctx, w.UserContainer, "starting the user container (kept for inspection)", w.onFirstStart(n, exit))
	}
	container := attemptName(w.UserContainer, n)
	_, err := w.eng.Again(context.WithoutCancel(ctx), w.UserContainer, container)
	if ctx.Err() != nil {
		return attempt{Container: container}, errSignalled
	}
	first := w.planned[w.UserContainer] // what the re-run runs: the first's
	w.provisional(res, attempt{Attempt: n, Container: container, Image: cmp.Or(first.Image, w.imageOf(w.UserContainer)), Command: first.Command})
	if ctx.Err() != nil {
		return attempt{Container: container}, errSignalled
	}
	if err != nil {
		a := w.refused(container, "making the re-run's container", err)
		a.ExitCode = notMadeExitCode
		return a, nil
	}
	return w.run(ctx, container, "re-running the user container", nil)
}

// onFirstStart logs, for run n if it is the first, when its start went
// out against the action's exit and the wait.
func (w *waiter) onFirstStart(n int, exit engine.Exit) func(sent time.Time) {
	return func(sent time.Time) {
		if n == 1 {
			logEvent(w.o.Stdout, "started user container", waited{
				User: w.UserContainer, ActionExited: engine.Stamp(exit.At), CountedFrom: engine.Stamp(w.from), StartSent: engine.Stamp(sent), Wait: w.WaitSeconds,
				LateMS: sent.Sub(w.from).Milliseconds() - int64(w.WaitSeconds)*1000, ActionRemoved: exit.Removed,
			})
		}
	}
}

// sameAsBefore is run n, which, if it never ran or its end was never
// told, has the image and command of the run before: its container was
// made as the one before was.
func sameAsBefore(a attempt, n int, before []attempt) attempt {
	a.Attempt = n
	if a.Command == nil && len(before) > 0 {
		prev := before[len(before)-1]
		a.Image, a.Command = cmp.Or(prev.Image, a.Image), prev.Command
	}
	return a
}

// stopBeforeRerun logs a signal in the pause before re-run n, and says
// it for the result.
func (w *waiter) stopBeforeRerun(n int) string {
	logEvent(w.o.Stdout, "stopping before a re-run; nothing runs", map[string]string{"user_container": w.UserContainer})
	return fmt.Sprintf("stopped by a signal before re-run %d: no more re-runs were started", n)
}

// runFallback runs the fallback once, after the user container's last
// run failed. After a signal it is started, within signalStart, and not
// followed: it runs on, not ended, as the result says (it may be what
// takes the machine down).
func (w *waiter) runFallback(ctx context.Context, res result) (result, error) {
	w.provisional(res, attempt{Container: w.FallbackContainer})
	if res.Stopped == "" && ctx.Err() != nil {
		logEvent(w.o.Stdout, "stopping before the fallback; it is started, not followed", map[string]string{"fallback": w.FallbackContainer})
		res.Stopped = "stopped by a signal before the fallback's start: it was started and not followed"
	}
	if res.Stopped != "" {
		sctx, stop := context.WithTimeout(context.WithoutCancel(ctx), signalStart)
		defer stop()
		fb := attempt{Container: w.FallbackContainer, Image: cmp.Or(w.planned[w.FallbackContainer].Image, w.FallbackImage), Command: w.planned[w.FallbackContainer].Command, ExitCode: -1, LogTail: []string{}, LogNote: "started as the waiter stopped: not followed"}
		if err := w.eng.Start(sctx, w.FallbackContainer); err != nil {
			fb = w.refused(w.FallbackContainer, "starting the fallback", err)
			fb.Ended = true
		}
		res.Fallback = &fb
		return res, nil
	}
	fb, err := w.run(ctx, w.FallbackContainer, "starting the fallback", nil)
	if err != nil {
		return res, err
	}
	if err := w.settle(ctx, &fb); err != nil {
		return res, err
	}
	res.Fallback = &fb
	logEvent(w.o.Stdout, "fallback exited", fb)
	return res, nil
}

// beforeNext makes sure that run a (attempt n) has ended before any next
// run, if another may follow and a may still run: one that was lost (its
// end never followed) becomes the run as the engine then tells it; one
// whose start failed is stopped, in case the start took effect. One whose
// end cannot be learnt is the last: it goes into res, which says why, and
// halted is true. A lost run that nothing follows is left to run on, as
// its note says.
func (w *waiter) beforeNext(ctx context.Context, a attempt, n int, res *result) (_ attempt, halted bool) {
	if !a.lost && !a.unsure {
		return a, false
	}
	if n > w.Retries && w.FallbackContainer == "" {
		if a.lost { // nothing follows it: it may be what takes the machine down
			a.LogNote += "; the last run, so it was not stopped: it may run on"
		}
		return a, false
	}
	var err error
	if a.lost {
		var ended attempt
		if ended, err = w.endLost(ctx, a); err == nil {
			return ended, false
		}
	} else if err = w.stopUnsure(ctx, a.Container); err == nil {
		a.LogNote = cmp.Or(a.LogNote+"; ", "") + "stopped before the next run, in case its start had taken effect"
		return a, false
	}
	a = sameAsBefore(a, n, res.Attempts)
	a.Ended = true
	res.Attempts = append(res.Attempts, a)
	res.Stopped = w.notLearnt(a, err)
	return a, true
}

// endLost stops run a, whose end could not be followed (it may run on),
// and reads its end, within lostStop, before any next run: the run as
// the engine then tells it. A signal does not cut it short: nothing may
// start before it has ended. An error says its end could not be learnt.
func (w *waiter) endLost(ctx context.Context, a attempt) (attempt, error) {
	sctx, stop := context.WithTimeout(context.WithoutCancel(ctx), lostStop)
	defer stop()
	logEvent(w.o.Stdout, "stopping a run whose end was not followed, before the next", map[string]string{"container": a.Container})
	if err := w.eng.Stop(sctx, a.Container); err != nil {
		return a, fmt.Errorf("stopping it: %w", err)
	}
	r, err := w.eng.Follow(sctx, a.Container, a.sent, w.LogTail, "")
	for errors.Is(err, engine.ErrNoAnswer) && engine.Sleep(sctx, followPause) {
		r, err = w.eng.Follow(sctx, a.Container, a.sent, w.LogTail, "") // the engine still away: ask again, within lostStop
	}
	switch {
	case err == nil:
	case r.FinishedAt != "":
		r.Output, r.Note = []string{}, "no log tail: "+err.Error()
	default:
		return a, fmt.Errorf("reading its end once stopped: %w", err)
	}
	if r.Output == nil {
		r.Output = []string{}
	}
	return ordered(attempt{
		Container: a.Container, Image: r.Image, Command: r.Command, ExitCode: r.ExitCode,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, LogTail: r.Output,
		LogNote: cmp.Or(r.Note, a.LogNote+"; stopped before the next run, its end as the engine then told it"),
	}), nil
}

// stopUnsure stops container, whose start failed and may yet have taken
// effect, within lostStop, before any next run: a signal does not cut it
// short, as nothing may start before it is known not to run. An error
// says it could not be stopped.
func (w *waiter) stopUnsure(ctx context.Context, container string) error {
	sctx, stop := context.WithTimeout(context.WithoutCancel(ctx), lostStop)
	defer stop()
	logEvent(w.o.Stdout, "stopping a container whose start failed, in case it started, before the next run", map[string]string{"container": container})
	if err := w.eng.Stop(sctx, container); err != nil {
		return fmt.Errorf("stopping it, as its start failed and may have taken effect: %w", err)
	}
	return nil
}

// notLearnt logs that run a's end could not be learnt, why, and says it
// for the result: nothing more starts.
func (w *waiter) notLearnt(a attempt, err error) string {
	logEvent(w.o.Stdout, "could not learn a run's end; nothing more runs", map[string]string{"container": a.Container, "error": err.Error()})
	return fmt.Sprintf("the end of %s could not be learnt (%v): no more runs were started, as it may run on", a.Container, err)
}

// retryDelay is the pause before run n of the user container (n > 1):
// retryBase before the second, doubled for each later one, at most
// retryCap.
func retryDelay(n int) time.Duration { return min(retryBase<<(n-2), retryCap) }

// run starts container and follows the run to its end: the one path of
// the first run, the re-runs and the fallback. started, when set, hears
// when the start was sent. A start that fails is a failed run: the
// engine's word is its tail, and its exit code a shell's.
func (w *waiter) run(ctx context.Context, container, what string, started func(time.Time)) (attempt, error) {
	sent := time.Now()
	if err := w.eng.Start(context.WithoutCancel(ctx), container); err != nil {
		// The engine's word may have come after it started the
		// container (an answer lost or cut): beforeNext stops it.
		a := w.refused(container, what, err)
		a.unsure, a.sent = true, sent
		return a, nil
	}
	if started != nil {
		started(sent)
	}
	r, lost, err := w.follow(ctx, container, sent)
	if err != nil {
		return attempt{}, err
	}
	if r.Output == nil {
		r.Output = []string{}
	}
	return ordered(attempt{
		Container: container, Image: r.Image, Command: r.Command, ExitCode: r.ExitCode,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, LogTail: r.Output, LogNote: r.Note,
		lost: lost, sent: sent,
	}), nil
}

// refused is the failed run of a container whose start failed, with the
// image phase 1 made it of.
func (w *waiter) refused(container, what string, err error) attempt {
	logEvent(w.o.Stdout, "could not start a container", map[string]string{"container": container, "doing": what, "error": err.Error()})
	return attempt{Container: container, Image: w.imageOf(container), ExitCode: engine.StartExitCode(err), LogTail: []string{"could not start: " + err.Error()}}
}

// imageOf is the image phase 1 made container of.
func (w *waiter) imageOf(container string) string {
	if container == w.FallbackContainer {
		return w.FallbackImage
	}
	return w.UserImage
}

// followPause is the pause before a run whose end could not be followed
// is asked after again.
const followPause = time.Second

// follow follows the run of container started at sent to its end. A
// Follow that fails (the engine restarting under it, say: the run itself
// may go on) is asked again, the same run, until the engine settles it;
// one that still fails engineLost after the first failure of an outage
// (lostClock) is counted as a failed run, with unfollowedExitCode and a
// note saying why, and lost: it may run on. Its error is ctx's alone.
func (w *waiter) follow(ctx context.Context, container string, sent time.Time) (r engine.Run, lost bool, err error) {
	var clock lostClock
	for {
		began := time.Now()
		r, err := w.eng.Follow(ctx, container, sent, w.LogTail, "")
		switch {
		case ctx.Err() != nil:
			return r, false, ctx.Err()
		case err == nil:
			return r, false, nil
		case r.FinishedAt != "":
			// The run ended; only its output could not be read.
			r.Output, r.Note = []string{}, "no log tail: "+err.Error()
			return r, false, nil
		}
		first, over := clock.failed(began)
		if first {
			logEvent(w.o.Stdout, "could not follow a container; asking the engine again", map[string]string{"container": container, "error": err.Error()})
		}
		if over {
			note := fmt.Sprintf("its end could not be followed: the engine did not say for %v (%v)", engineLost, err)
			return engine.Run{ExitCode: unfollowedExitCode, Image: w.imageOf(container), Note: note}, true, nil
		}
		if !engine.Sleep(ctx, min(followPause, engineLost)) {
			return r, false, ctx.Err()
		}
	}
}

// finish logs the result, writes the result file, and removes the
// containers that succeeded or never ran; a failed one is kept, named and
// labelled, for its logs. The user containers of all attempts go
// together: removed when the last succeeded, else kept.
func (w *waiter) finish(ctx context.Context, res result) error {
	var remove []string
	kept := res.ExitCode != 0 || res.Note != ""
	for i := range res.Attempts {
		res.Attempts[i].Kept = kept
		if !kept {
			remove = append(remove, res.Attempts[i].Container)
		}
	}
	if w.FallbackContainer != "" {
		fbKept := res.Fallback != nil && res.Fallback.failed()
		if res.Fallback != nil {
			res.Fallback.Kept = fbKept
		}
		if !fbKept {
			remove = append(remove, w.FallbackContainer)
		}
	}
	// A re-run's container made as a signal came, never started.
	remove = append(remove, res.unstarted...)
	errs := removeAll(ctx, w.eng, remove)
	return errors.Join(append(errs, w.report(res))...)
}

// report logs the result, the waiter's last line, and writes the result
// file when one was asked for. A fallback started and not followed (after
// a signal) runs on: the result is still running, with no outcome yet.
func (w *waiter) report(res result) error {
	state := stateDone
	if res.Fallback != nil && !res.Fallback.Ended {
		state, res.ExitCode = stateRunning, -1
	}
	w.mark(&res, state)
	logEvent(w.o.Stdout, "result", res)
	if w.ResultFile == "" {
		return nil
	}
	return w.store(res)
}

// actionFailed ends the waiter of an action that exited non-zero: phase 1
// did not hand off (it was killed, say, before it could undo), so the
// user container never starts. What phase 1 made is removed, and the
// result says why.
func (w *waiter) actionFailed(ctx context.Context, code int) error {
	errs := w.removeUnstarted(ctx)
	res := notStarted(fmt.Sprintf("the action container exited %d, so it did not hand off: nothing was started", code))
	res.ActionExitCode = &code
	return errors.Join(append(errs, w.report(res))...)
}

// removeUnstarted removes the user and fallback containers, which will
// now never start.
func (w *waiter) removeUnstarted(ctx context.Context) []error {
	return removeAll(ctx, w.eng, []string{w.UserContainer, w.FallbackContainer})
}

// notStarted is the result of a run that started nothing, and why.
func notStarted(why string) result {
	return result{ExitCode: -1, Attempts: []attempt{}, NotStarted: why}
}

// exitUnknown ends the waiter of an action whose exit it could not
// learn (on containerd, one killed at its timeout whose task the agent
// deleted before the waiter looked, its container kept): nothing starts,
// what phase 1 made is removed, within a bound (the engine may be gone),
// and the result says why.
func (w *waiter) exitUnknown(why error) error {
	ctx, stop := context.WithTimeout(context.Background(), 15*time.Second)
	defer stop()
	errs := w.removeUnstarted(ctx)
	res := notStarted("could not tell when the action container exited: " + why.Error())
	return errors.Join(append([]error{why}, append(errs, w.report(res))...)...)
}

// cancel removes the containers that will now never start, and reports
// so: a result file an earlier run of the action left must not go on
// describing that run as this one.
func (w *waiter) cancel() error {
	ctx, stop := context.WithTimeout(context.Background(), 15*time.Second)
	defer stop()
	errs := w.removeUnstarted(ctx)
	logEvent(w.o.Stdout, "cancelled during the wait; nothing was started", map[string]string{"user_container": w.UserContainer})
	var err error
	if len(errs) > 0 {
		err = fmt.Errorf("cancelled during the wait, and removing what will never start: %w", errors.Join(errs...))
	}
	return errors.Join(err, w.report(notStarted("cancelled by a signal during the action or the wait: nothing was started")))
}

// leave ends the waiter after a signal once the user container runs: it
// may well be the reboot that sent it.
func (w *waiter) leave() error {
	logEvent(w.o.Stdout, "stopping; the user container runs on", map[string]string{"user_container": w.UserContainer})
	return nil
}

// writable checks that file can be written as writeResult does: a
// temporary file in its directory, then a rename over a file that is
// not a directory.
func writable(file string) error {
	if fi, err := os.Stat(file); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", file)
	}
	tmp, err := os.CreateTemp(path.Dir(file), ".result-*.json")
	if err != nil {
		return err
	}
	tmp.Close()
	return os.Remove(tmp.Name())
}

// tempFile is the temporary file writeResult fills, as os.CreateTemp
// makes it; tests make one that fails at a given step.
type tempFile interface {
	io.Writer
	Chmod(os.FileMode) error
	Sync() error
	Close() error
	Name() string
}

var createTemp = func(dir, pattern string) (tempFile, error) { return os.CreateTemp(dir, pattern) }

// writeResult writes res to file atomically: a temporary file beside it,
// synced, then renamed over it. What fails leaves file as it was, and no
// temporary file.
func writeResult(file string, res result) (err error) {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := createTemp(path.Dir(file), ".result-*.json")
	if err != nil {
		return fmt.Errorf("writing the result file: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(append(data, '\n')); err == nil {
		err = tmp.Chmod(resultMode(file))
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		return fmt.Errorf("writing the result file: %w", err)
	}
	if dir, err := os.Open(path.Dir(file)); err == nil {
		_ = dir.Sync()
		dir.Close()
	}
	return nil
}

// resultMode is the mode the result file keeps: the one it has, else
// readable by all, as files are made. (A temporary file is made 0600,
// which the rename would otherwise give it.)
func resultMode(file string) os.FileMode {
	if fi, err := os.Stat(file); err == nil {
		return fi.Mode().Perm()
	}
	return 0o644
}

// sweepWaiters removes, with one List, the waiters of actions other than
// action that have stopped: on an engine with no auto-remove
// (containerd), a waiter cannot remove itself. One that runs, or was
// never started (its phase 1 may be starting it now), belongs to an
// action still under way and stays. It is housekeeping: what fails is
// logged, and this run goes on.
func sweepWaiters(ctx context.Context, eng engine.Engine, action string, out io.Writer) {
	waiters, err := eng.List(ctx, LabelRole, RoleWaiter)
	if err != nil {
		logEvent(out, "could not list other actions' waiters", map[string]string{"error": err.Error()})
		return
	}
	for _, w := range waiters {
		if w.Labels[LabelAction] == action || !w.Ran || w.Running {
			continue
		}
		details := map[string]string{"name": w.Name, "action": w.Labels[LabelAction], "state": w.State}
		if err := eng.Remove(ctx, w.ID); err != nil {
			details["error"] = err.Error()
			logEvent(out, "could not remove another action's stopped waiter", details)
			continue
		}
		logEvent(out, "removed another action's stopped waiter", details)
	}
}
