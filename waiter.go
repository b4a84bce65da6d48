package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// waiterCmd is phase 2, run as the detached waiter container that phase 1
// started. It is not for humans.
type waiterCmd struct {
	UserContainer   string `required:"" help:"The user container to start."`
	ActionContainer string `required:"" help:"The action container whose exit starts the wait."`
	WaitSeconds     int    `required:"" help:"Seconds to wait after the action container exits."`
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

// finished is the user container's end, logged as JSON.
type finished struct {
	User       string `json:"user_container"`
	Name       string `json:"name"`
	Image      string `json:"image"`
	ExitCode   int    `json:"exit_code"`
	StartedAt  string `json:"started_at,omitempty"`
	FinishedAt string `json:"finished_at,omitempty"`
	Kept       bool   `json:"kept"`
}

// Run is phase 2: wait for the action container to exit, wait the delay,
// start the user container, follow it to its exit, and remove it when it
// succeeded. A signal during the wait cancels everything; one after the
// start leaves the user container alone.
func (w *waiterCmd) Run(ctx context.Context, g *globals) error {
	c := g.client()
	exited, removed := w.actionExited(ctx, c)
	timer := time.NewTimer(time.Until(exited.Add(time.Duration(w.WaitSeconds) * time.Second)))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return w.cancel(c, g)
	case <-timer.C:
	}

	sent := time.Now()
	if err := c.ContainerStart(context.WithoutCancel(ctx), w.UserContainer); err != nil && !errors.Is(err, dockerapi.ErrNotModified) {
		return fmt.Errorf("starting the user container (kept for inspection): %w", err)
	}
	logEvent(g.stdout, "started user container", waited{
		User: w.UserContainer, ActionExited: stamp(exited), StartSent: stamp(sent), Wait: w.WaitSeconds,
		LateMS: sent.Sub(exited).Milliseconds() - int64(w.WaitSeconds)*1000, ActionRemoved: removed,
	})

	res, err := c.ContainerWait(ctx, w.UserContainer, dockerapi.WaitNotRunning)
	if ctx.Err() != nil {
		logEvent(g.stdout, "stopping; the user container runs on", map[string]string{"user_container": w.UserContainer})
		return nil
	}
	if err != nil {
		return fmt.Errorf("following the user container: %w", err)
	}
	return w.report(ctx, c, g, res.StatusCode)
}

// actionExited waits for the action container to stop, or to be gone, and
// returns when it stopped by the engine's clock when it can tell.
func (w *waiterCmd) actionExited(ctx context.Context, c *dockerapi.Client) (exited time.Time, removed bool) {
	_, err := c.ContainerWait(ctx, w.ActionContainer, dockerapi.WaitNotRunning)
	now := time.Now()
	if err != nil {
		return now, errors.Is(err, dockerapi.ErrNotFound)
	}
	ctr, err := c.ContainerInspect(ctx, w.ActionContainer)
	if err != nil {
		return now, errors.Is(err, dockerapi.ErrNotFound)
	}
	if t, err := time.Parse(time.RFC3339Nano, ctr.State.FinishedAt); err == nil && t.Before(now) && t.Year() > 1 {
		return t, false
	}
	return now, false
}

// cancel removes the user container that will now never start.
func (w *waiterCmd) cancel(c *dockerapi.Client, g *globals) error {
	ctx, stop := context.WithTimeout(context.Background(), 15*time.Second)
	defer stop()
	err := c.ContainerRemove(ctx, w.UserContainer, dockerapi.RemoveOptions{Force: true, Volumes: true})
	if err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
		return fmt.Errorf("cancelled during the wait, and removing the user container: %w", err)
	}
	logEvent(g.stdout, "cancelled during the wait; the user container was removed and never started", map[string]string{"user_container": w.UserContainer})
	return nil
}

// report logs the user container's end, and removes it when it succeeded;
// a failed one is kept, named and labelled, for docker logs.
func (w *waiterCmd) report(ctx context.Context, c *dockerapi.Client, g *globals, code int) error {
	f := finished{User: w.UserContainer, ExitCode: code, Kept: code != 0}
	if ctr, err := c.ContainerInspect(ctx, w.UserContainer); err == nil {
		f.Name, f.Image = ctr.Name[min(1, len(ctr.Name)):], ctr.Config.Image
		f.StartedAt, f.FinishedAt = ctr.State.StartedAt, ctr.State.FinishedAt
	}
	if code == 0 {
		if err := c.ContainerRemove(ctx, w.UserContainer, dockerapi.RemoveOptions{Volumes: true}); err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
			return fmt.Errorf("removing the user container: %w", err)
		}
	}
	logEvent(g.stdout, "user container exited", f)
	return nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
