package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// Backoff between re-runs of a failed user container: retryBase, doubled
// each time, at most retryCap.
const (
	retryBase = 2 * time.Second
	retryCap  = 30 * time.Second
)

// waiterWaitForEngine is how long each of the waiter's requests waits for
// a socket that is not answering: longer than phase 1's, as the waiter
// outlives engine restarts that phase 1 never sees.
const waiterWaitForEngine = time.Minute

// waiterCmd is phase 2, run as the detached waiter container that phase 1
// started. It is not for humans.
type waiterCmd struct {
	UserContainer     string `required:"" help:"The user container to start."`
	ActionContainer   string `required:"" help:"The action container whose exit starts the wait."`
	WaitSeconds       int    `required:"" help:"Seconds to wait after the action container exits."`
	Retries           int    `help:"Re-runs of a user container that exits non-zero."`
	LogTail           int    `default:"20" help:"Lines of output kept in the result."`
	FallbackContainer string `help:"A container to start once when the user container and its retries failed."`
	ResultFile        string `help:"Where to write the result, inside the waiter."`
}

// waited is the waiter's account of the wait, logged when it starts the
// user container.
type waited struct {
	User          string `json:"user_container"`
	ActionExited  string `json:"action_exited"`
	StartSent     string `json:"start_sent"`
	Wait          int    `json:"wait_seconds"`
	LateMS        int64  `json:"late_ms"` // start_sent - action_exited - wait
	ActionRemoved bool   `json:"action_removed,omitempty"`
}

// result is what became of the user container: the waiter's last JSON
// line, and the result file.
type result struct {
	Action   string    `json:"action"`
	Image    string    `json:"image"`
	Command  []string  `json:"command"`
	ExitCode int       `json:"exit_code"`
	Attempts []attempt `json:"attempts"`
	Fallback *attempt  `json:"fallback,omitempty"`
	BootID   string    `json:"boot_id,omitempty"`
}

// attempt is one run of the user container, or the fallback's.
type attempt struct {
	Attempt    int      `json:"attempt,omitempty"`
	Container  string   `json:"container"`
	Image      string   `json:"image,omitempty"`
	Command    []string `json:"command,omitempty"`
	ExitCode   int      `json:"exit_code"`
	StartedAt  string   `json:"started_at,omitempty"`
	FinishedAt string   `json:"finished_at,omitempty"`
	LogTail    []string `json:"log_tail"`
	Kept       bool     `json:"kept"`
}

// Run is phase 2: wait for the action container to exit, wait the delay,
// run the user container (again, up to Retries times, while it fails;
// then the fallback once), report, and remove what succeeded. A signal
// during the wait cancels everything; one after the start leaves the
// user container alone.
func (w *waiterCmd) Run(ctx context.Context, g *globals) error {
	c := g.client()
	c.WaitForEngine = waiterWaitForEngine
	if w.ResultFile != "" {
		// Phase 1 waits for one of these two lines, so that a result
		// that could never be written fails the action.
		if err := writable(w.ResultFile); err != nil {
			logEvent(g.stdout, msgResultUnwritable, map[string]string{"error": err.Error()})
			sleep(ctx, unwritableLinger) // until phase 1 has read it and removes this waiter
			return err
		}
		logEvent(g.stdout, msgResultWritable, map[string]string{"result_file": w.ResultFile})
	}
	exited, removed, err := w.actionExited(ctx, c, g)
	if err != nil {
		return err
	}
	if ctx.Err() != nil { // a signal while the action still ran
		return w.cancel(c, g)
	}
	timer := time.NewTimer(time.Until(exited.Add(time.Duration(w.WaitSeconds) * time.Second)))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return w.cancel(c, g)
	case <-timer.C:
	}

	sent := time.Now()
	if err := c.ContainerStart(context.WithoutCancel(ctx), w.UserContainer); err != nil {
		return fmt.Errorf("starting the user container (kept for inspection): %w", err)
	}
	logEvent(g.stdout, "started user container", waited{
		User: w.UserContainer, ActionExited: stamp(exited), StartSent: stamp(sent), Wait: w.WaitSeconds,
		LateMS: sent.Sub(exited).Milliseconds() - int64(w.WaitSeconds)*1000, ActionRemoved: removed,
	})

	var res result
	for n := 1; ; n++ {
		since := "" // a re-run's output follows the previous run's end
		if n > 1 {
			if !sleep(ctx, min(retryBase<<(n-2), retryCap)) {
				return w.leave(g)
			}
			sent = time.Now()
			if err := c.ContainerStart(context.WithoutCancel(ctx), w.UserContainer); err != nil {
				return fmt.Errorf("re-running the user container: %w", err)
			}
			since = res.Attempts[n-2].FinishedAt
		}
		a, err := w.follow(ctx, c, w.UserContainer, sent, since)
		if ctx.Err() != nil {
			return w.leave(g)
		}
		if err != nil {
			return err
		}
		a.Attempt = n
		res.Attempts = append(res.Attempts, a)
		logEvent(g.stdout, "user container exited", a)
		if a.ExitCode == 0 || n > w.Retries {
			break
		}
	}
	last := &res.Attempts[len(res.Attempts)-1]
	res.ExitCode, res.Image, res.Command = last.ExitCode, last.Image, last.Command
	if w.FallbackContainer != "" && last.ExitCode != 0 {
		fbSent := time.Now()
		if err := c.ContainerStart(context.WithoutCancel(ctx), w.FallbackContainer); err != nil {
			return fmt.Errorf("starting the fallback: %w", err)
		}
		fb, err := w.follow(ctx, c, w.FallbackContainer, fbSent, "")
		if ctx.Err() != nil {
			return w.leave(g)
		}
		if err != nil {
			return err
		}
		res.Fallback = &fb
		logEvent(g.stdout, "fallback exited", fb)
	}
	return w.finish(ctx, c, g, res)
}

// follow waits for the run of container whose start was sent at started
// to exit, and returns it: its exit code, times and the tail of its output
// since the given time. (A container's first output can come before the
// StartedAt the engine records.)
func (w *waiterCmd) follow(ctx context.Context, c *dockerapi.Client, container string, started time.Time, since string) (attempt, error) {
	a := attempt{Container: container}
	ctr, code, err := waitRun(ctx, c, container, started)
	if err != nil {
		return a, err
	}
	a.ExitCode = code
	a.Image, a.Command = ctr.Config.Image, append([]string{ctr.Path}, ctr.Args...)
	a.StartedAt, a.FinishedAt = ctr.State.StartedAt, ctr.State.FinishedAt
	a.LogTail = []string{}
	if w.LogTail > 0 {
		var out bytes.Buffer
		opts := dockerapi.LogsOptions{Tail: w.LogTail, TTY: ctr.Config.Tty, Since: since}
		if err := c.ContainerLogs(ctx, container, opts, &out, &out); err != nil {
			return a, err
		}
		a.LogTail = tail(out.String(), w.LogTail)
	}
	return a, nil
}

// staleWaits bounds how often follow asks again after a wait that
// answered for an earlier run; staleWaitPause is the pause between.
const (
	staleWaits     = 50
	staleWaitPause = 100 * time.Millisecond
)

// waitRun waits for container to stop and returns its inspect and exit
// code, once they are those of the run whose start was sent at started.
// A wait can answer for the run before: on Podman 4.3 a re-run's result
// once came back with the earlier run's exit code and none of its own
// output, as if read before the new run had begun. A run counts as this
// one when the container no longer runs and the engine's StartedAt is at
// most a second before started (re-runs are at least retryBase apart).
func waitRun(ctx context.Context, c *dockerapi.Client, container string, started time.Time) (dockerapi.Container, int, error) {
	for stale := 0; ; {
		wr, err := c.ContainerWait(ctx, container, dockerapi.WaitNotRunning)
		if err != nil {
			return dockerapi.Container{}, 0, fmt.Errorf("following %s: %w", container, err)
		}
		ctr, err := c.ContainerInspect(ctx, container)
		if err != nil {
			return ctr, 0, err
		}
		at, perr := time.Parse(time.RFC3339Nano, ctr.State.StartedAt)
		this := perr == nil && !at.Before(started.Add(-time.Second))
		switch {
		case ctr.State.Running: // the wait answered early: ask again
		case this:
			return ctr, ctr.State.ExitCode, nil
		default:
			// Stopped, by the engine's clock before this run's start. A
			// wall clock stepped back meanwhile looks the same: after
			// staleWaits asks, take the engine's word.
			if stale++; stale == staleWaits {
				return ctr, wr.StatusCode, nil
			}
		}
		if !sleep(ctx, staleWaitPause) {
			return ctr, 0, ctx.Err()
		}
	}
}

// tail returns the last n lines of s as a terminal shows them: a
// carriage return inside a line (a progress bar's, or a TTY's line end
// whose newline Podman's log lost) starts it over, so what follows the
// last one is the line.
func tail(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), "\r\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return []string{}
	}
	lines = lines[max(0, len(lines)-n):]
	for i, l := range lines {
		l = strings.TrimRight(l, "\r")
		lines[i] = l[strings.LastIndexByte(l, '\r')+1:]
	}
	return lines
}

// finish logs the result, writes the result file, and removes the
// containers that succeeded or never ran; a failed one is kept, named and
// labelled, for docker logs.
func (w *waiterCmd) finish(ctx context.Context, c *dockerapi.Client, g *globals, res result) error {
	if ctr, err := c.ContainerInspect(ctx, w.UserContainer); err == nil {
		res.Action = ctr.Config.Labels[labelAction]
	}
	if id, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		res.BootID = strings.TrimSpace(string(id))
	}
	remove := map[string]bool{w.UserContainer: res.ExitCode == 0}
	if w.FallbackContainer != "" {
		remove[w.FallbackContainer] = res.Fallback == nil || res.Fallback.ExitCode == 0
	}
	for i := range res.Attempts {
		res.Attempts[i].Kept = !remove[w.UserContainer]
	}
	if res.Fallback != nil {
		res.Fallback.Kept = !remove[w.FallbackContainer]
	}
	var errs []error
	for name, gone := range remove {
		if !gone {
			continue
		}
		if err := c.ContainerRemove(ctx, name, dockerapi.RemoveOptions{Force: true, Volumes: true}); err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
			errs = append(errs, fmt.Errorf("removing %s: %w", name, err))
		}
	}
	logEvent(g.stdout, "result", res)
	if w.ResultFile != "" {
		if err := writeResult(w.ResultFile, res); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// The waiter's answer to phase 1 about the result file.
const (
	msgResultWritable   = "result file writable"
	msgResultUnwritable = "result file not writable"
)

// unwritableLinger is how long a waiter that cannot write its result
// file stays, for phase 1 to read why.
const unwritableLinger = 30 * time.Second

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

// writeResult writes res to file atomically: a temporary file beside it,
// synced, then renamed over it.
func writeResult(file string, res result) (err error) {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(path.Dir(file), ".result-*.json")
	if err != nil {
		return fmt.Errorf("writing the result file: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(append(data, '\n')); err == nil {
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

// engineLost bounds how long the waiter goes on asking an engine that
// does not answer (restarting, say) while it waits for the action
// container. Each ask itself waits for the socket, within the client's
// WaitForEngine.
const engineLost = 2 * time.Minute

// exitPollFor bounds how long the waiter also polls the action
// container's state, besides waiting on it; exitPollEvery is the pause
// between polls.
const (
	exitPollFor   = 30 * time.Second
	exitPollEvery = 100 * time.Millisecond
)

// actionExited waits for the action container to stop, or to be gone, and
// returns when it stopped, by the engine's clock when it can tell. Besides
// the engine's wait, it polls the container's state for a while: Podman
// 4.3 answers a wait 250–900 ms after the exit, by when the worker may
// have removed the container, and its exit time with it.
func (w *waiterCmd) actionExited(ctx context.Context, c *dockerapi.Client, g *globals) (exited time.Time, removed bool, err error) {
	either, stop := context.WithCancel(ctx)
	defer stop()
	type answer struct {
		exited  time.Time
		removed bool
		err     error
	}
	waited := make(chan answer, 1)
	go func() {
		var a answer
		a.exited, a.removed, a.err = w.waitAction(either, c, g)
		waited <- a
	}()
	polled := make(chan time.Time, 1)
	go pollExit(either, c, w.ActionContainer, polled)
	select {
	case t := <-polled:
		stop()
		<-waited // it ends with the cancel
		return t, false, nil
	case a := <-waited:
		return a.exited, a.removed, a.err
	}
}

// pollExit inspects container every exitPollEvery, for exitPollFor at
// most, and sends when it stopped once it has. It gives up quietly when
// the container is gone or the engine does not answer: the wait says.
func pollExit(ctx context.Context, c *dockerapi.Client, container string, exited chan<- time.Time) {
	deadline := time.Now().Add(exitPollFor)
	for time.Now().Before(deadline) && sleep(ctx, exitPollEvery) {
		ctr, err := c.ContainerInspect(ctx, container)
		if err != nil {
			return
		}
		if ctr.State.Running {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, ctr.State.FinishedAt); err == nil && t.Year() > 1 && t.Before(time.Now()) {
			exited <- t
		}
		return
	}
}

// waitAction is actionExited's wait. A wait that breaks without an answer
// (the engine restarting under live-restore drops it) is asked again: the
// action may well still run.
func (w *waiterCmd) waitAction(ctx context.Context, c *dockerapi.Client, g *globals) (exited time.Time, removed bool, err error) {
	var lostSince time.Time
	for {
		_, err := c.ContainerWait(ctx, w.ActionContainer, dockerapi.WaitNotRunning)
		var lost *dockerapi.TransportError
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return time.Now(), false, nil
		case errors.Is(err, dockerapi.ErrNotFound):
			return time.Now(), true, nil
		case !errors.As(err, &lost):
			// The engine answered, and cannot wait. Count the exit from
			// now, unless the action still runs: then ask again.
			if ctr, ierr := c.ContainerInspect(ctx, w.ActionContainer); ierr == nil && ctr.State.Running {
				if !sleep(ctx, time.Second) {
					return time.Now(), false, nil
				}
				continue
			}
			return time.Now(), false, nil
		default:
			if lostSince.IsZero() {
				lostSince = time.Now()
				logEvent(g.stdout, "lost the engine while waiting for the action container; asking again", map[string]string{"error": err.Error()})
			}
			if time.Since(lostSince) > engineLost {
				return time.Time{}, false, fmt.Errorf("waiting for the action container: no answer from the engine for %v: %w", engineLost, err)
			}
			if !sleep(ctx, time.Second) {
				return time.Now(), false, nil
			}
			continue
		}
		break
	}
	now := time.Now()
	ctr, err := c.ContainerInspect(ctx, w.ActionContainer)
	if err != nil {
		return now, errors.Is(err, dockerapi.ErrNotFound), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, ctr.State.FinishedAt); err == nil && t.Before(now) && t.Year() > 1 {
		return t, false, nil
	}
	return now, false, nil
}

// cancel removes the containers that will now never start.
func (w *waiterCmd) cancel(c *dockerapi.Client, g *globals) error {
	ctx, stop := context.WithTimeout(context.Background(), 15*time.Second)
	defer stop()
	var errs []error
	for _, name := range []string{w.UserContainer, w.FallbackContainer} {
		if name == "" {
			continue
		}
		err := c.ContainerRemove(ctx, name, dockerapi.RemoveOptions{Force: true, Volumes: true})
		if err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
			errs = append(errs, fmt.Errorf("cancelled during the wait, and removing %s: %w", name, err))
		}
	}
	logEvent(g.stdout, "cancelled during the wait; nothing was started", map[string]string{"user_container": w.UserContainer})
	return errors.Join(errs...)
}

// leave ends the waiter after a signal once the user container runs: it
// may well be the reboot that sent it.
func (w *waiterCmd) leave(g *globals) error {
	logEvent(g.stdout, "stopping; the user container runs on", map[string]string{"user_container": w.UserContainer})
	return nil
}

// sleep waits d, and reports false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
