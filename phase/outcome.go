package phase

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/engine"
)

// downUnit is a second of WAITDAEMON_DOWN_WITHIN; tests shorten it.
var downUnit = time.Second

// bootIDFile names the boot the waiter runs in.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// bootID is this boot's ID, empty if the kernel does not say.
func bootID() string {
	id, err := os.ReadFile(bootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(id))
}

// mark stamps res, as the waiter writes it, with the action, its state,
// the boot and the time.
func (w *waiter) mark(res *result, state string) {
	res.Action, res.State, res.BootID, res.WriteNote = w.ActionName, state, bootID(), w.writeNote
	res.WrittenAt = engine.Stamp(time.Now())
	if res.Attempts == nil {
		res.Attempts = []attempt{}
	}
}

// provisionalWrite bounds a write before a run: a device that does not
// answer must not keep the run from starting.
var provisionalWrite = 5 * time.Second

// finalWrite bounds the last write of the result: a device that stops
// answering must not keep the waiter from its end (on Docker, from
// removing itself); the result line is in its log all the same.
var finalWrite = 30 * time.Second

// earlierWrite bounds the wait of a write for the one before it, still
// under way (a device that does not answer): the file must end as the
// last one written, and a write that never ends must not hold up the
// result, nor the waiter's end.
var earlierWrite = 10 * time.Second

// provisional writes, before a run starts, the result so far with that
// run (next: the next attempt, or the fallback) started and not ended.
// If the run takes the machine down, the file says which run did, and
// what came before. A file that cannot be written does not stop the run:
// the reboot matters more than its record.
func (w *waiter) provisional(res result, next attempt) {
	if w.ResultFile == "" {
		return
	}
	next.ExitCode, next.LogTail = -1, []string{}
	if next.Image == "" {
		planned := w.planned[next.Container]
		next.Image, next.Command = cmp.Or(planned.Image, w.imageOf(next.Container)), planned.Command
	}
	if n := len(res.Attempts); n > 0 {
		res.Image, res.Command = res.Attempts[n-1].Image, res.Attempts[n-1].Command
	} else {
		res.Image, res.Command = next.Image, next.Command
	}
	if next.Attempt == 0 {
		res.Fallback = &next
	} else {
		res.Attempts = append(slices.Clip(res.Attempts), next)
	}
	res.ExitCode = -1
	w.mark(&res, stateRunning)
	before := "the fallback"
	if next.Attempt > 0 {
		before = fmt.Sprintf("attempt %d", next.Attempt)
	}
	if err := w.storeWithin(res, provisionalWrite, before); err != nil {
		logEvent(w.o.Stdout, "could not write the result so far", map[string]string{"error": err.Error()})
	}
}

// storeWithin is store, before the run named before, which waits for it
// limit at most: a write that has not ended then goes on, the run starts,
// and the results written after say so. A write still under way from
// before is not overtaken: this one is left out, and said so too.
func (w *waiter) storeWithin(res result, limit time.Duration, before string) error {
	if w.lastWrite != nil {
		select {
		case <-w.lastWrite:
		default:
			w.noteWrite(fmt.Sprintf("the result before %s was not written: the write before it had not ended", before))
			return errors.New("an earlier write of the result has not ended: this one is left out")
		}
	}
	ended, errc := make(chan struct{}), make(chan error, 1)
	w.lastWrite = ended
	go func() {
		err := w.write(res)
		close(ended) // before the answer: the next write finds it ended
		errc <- err
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case err := <-errc:
		return err
	case <-timer.C:
		w.noteWrite(fmt.Sprintf("the result before %s was not written within %v: the run started without it", before, limit))
		return fmt.Errorf("writing the result did not end within %v: the run starts without it", limit)
	}
}

// noteWrite adds note to writeNote.
func (w *waiter) noteWrite(note string) {
	if w.writeNote != "" {
		w.writeNote += "; "
	}
	w.writeNote += note
}

// learnRuns learns what the user container and the fallback will run,
// for the result written before each run: from what phase 1 handed over
// (readHanded), which takes nothing from the wait, however short; what
// it did not hand over (an engine that cannot, a hand-over that failed)
// the waiter asks the engine during the wait (describe). With no result
// file it learns nothing.
func (w *waiter) learnRuns(ctx context.Context, start time.Time) {
	if w.ResultFile == "" {
		return
	}
	w.planned = map[string]attempt{}
	w.readHanded(ctx)
	w.describe(ctx, start)
}

// handedWithin bounds the read of what phase 1 handed over: a look at the
// waiter's own file or container, which an engine that does not answer
// must not make late for the start by more.
var handedWithin = 500 * time.Millisecond

// readHanded takes from what phase 1 handed over what the user container
// and the fallback will run. What cannot be read is logged, and left to
// describe.
func (w *waiter) readHanded(ctx context.Context) {
	hd, ok := w.eng.(engine.Hander)
	if !ok {
		return
	}
	hctx, stop := context.WithTimeout(ctx, handedWithin)
	defer stop()
	data, err := hd.Handed(hctx)
	if data == nil && err == nil {
		return // nothing handed over
	}
	var runs handedRuns
	if err == nil {
		err = json.Unmarshal(data, &runs)
	}
	if err != nil {
		logEvent(w.o.Stdout, "could not read what phase 1 handed over", map[string]string{"error": err.Error()})
		return
	}
	for _, c := range []string{w.UserContainer, w.FallbackContainer} {
		if r, ok := runs[c]; c != "" && ok {
			w.planned[c] = attempt{Image: r.Image, Command: r.Command}
		}
	}
}

// describe asks the engine, during the wait before the start at start,
// what the containers phase 1 did not hand over will run. It takes
// nothing from the wait: what the engine has not said by start stays
// unsaid (the file then names the image phase 1 made it of).
func (w *waiter) describe(ctx context.Context, start time.Time) {
	d, ok := w.eng.(engine.Describer)
	if !ok || !time.Now().Before(start) {
		return
	}
	dctx, stop := context.WithDeadline(ctx, start)
	defer stop()
	for _, c := range []string{w.UserContainer, w.FallbackContainer} {
		if _, known := w.planned[c]; c == "" || known {
			continue
		}
		image, command, err := d.Describe(dctx, c)
		if err != nil {
			logEvent(w.o.Stdout, "could not learn what a container will run", map[string]string{"container": c, "error": err.Error()})
			continue
		}
		w.planned[c] = attempt{Image: image, Command: command}
	}
}

// ordered is run a, never ended before it started: Docker 20.10 dates a
// start once the runtime's start has returned, and an end by the exit
// itself, so a run that exits at once can end, by the engine's word,
// before it started. Its start is then its end, and TimeNote keeps the
// start the engine gave.
func ordered(a attempt) attempt {
	started, serr := time.Parse(time.RFC3339Nano, a.StartedAt)
	finished, ferr := time.Parse(time.RFC3339Nano, a.FinishedAt)
	if serr != nil || ferr != nil || finished.Year() <= 1 || !finished.Before(started) {
		return a
	}
	a.TimeNote = fmt.Sprintf("the engine dated the start %s, %v after the end: it dates a start once the runtime's start returned, by when this run had exited; started_at is the end", a.StartedAt, started.Sub(finished))
	a.StartedAt = a.FinishedAt
	return a
}

// settle marks a run ended and, with DownWithin, waits that long for the
// machine to go down after a run that exited 0: a waiter still alive then
// makes the run a failure. A ctx that ends meanwhile (the machine going
// down stops the waiter) returns its error.
func (w *waiter) settle(ctx context.Context, a *attempt) error {
	a.Ended = true
	if w.DownWithin == 0 || a.ExitCode != 0 {
		return nil
	}
	logEvent(w.o.Stdout, "waiting for the machine to go down", map[string]any{"container": a.Container, "down_within": w.DownWithin})
	if !engine.Sleep(ctx, time.Duration(w.DownWithin)*downUnit) {
		return ctx.Err()
	}
	a.Note = fmt.Sprintf("did not go down within %d s", w.DownWithin)
	return nil
}

// store writes res to the result file, once the write before it has
// ended, so that the file ends as the last one written, within
// finalWrite. One that has not ended within earlierWrite is not
// overtaken: res is left out, and the error says so.
func (w *waiter) store(res result) error {
	if w.lastWrite != nil {
		timer := time.NewTimer(earlierWrite)
		defer timer.Stop()
		select {
		case <-w.lastWrite:
		case <-timer.C:
			return fmt.Errorf("the result file was not written: the write before it had not ended within %v (the device does not answer)", earlierWrite)
		}
	}
	ended, errc := make(chan struct{}), make(chan error, 1)
	w.lastWrite = ended
	go func() {
		err := w.write(res)
		close(ended)
		errc <- err
	}()
	timer := time.NewTimer(finalWrite)
	defer timer.Stop()
	select {
	case err := <-errc:
		return err
	case <-timer.C:
		return fmt.Errorf("the result file was not written: the write did not end within %v (the device does not answer)", finalWrite)
	}
}

// write writes res to the result file, on its device when it has one.
func (w *waiter) write(res result) error {
	if w.ResultDevice == "" {
		return writeResult(w.ResultFile, res)
	}
	return w.onResultDevice(func(file string) error { return writeResult(file, res) })
}

// writable checks that the result file can be written, on its device
// when it has one.
func (w *waiter) writable() error {
	if w.ResultDevice == "" {
		return writable(w.ResultFile)
	}
	return w.onResultDevice(writable)
}
