package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
)

// PlanWaiter plans phase 2 from our own image, with least privilege: not
// privileged, its own pid namespace, only the socket's directory (and the
// result file's) bound in. It shares the host's network rather than get
// one of its own: it needs none, and a new network namespace is most of a
// container start. It is not marked for auto-removal: it removes itself
// as it ends (End).
func (e *Engine) PlanWaiter(s engine.Self, want engine.Waiter) engine.Spec {
	ctr := s.Detail.(*self).ctr
	binds, socket := engineBind(socketSource(ctr, e.C.SocketPath()))
	// The result file's directory is a bind mount, not a bind: the engine
	// makes a missing bind's source (on the host's in-memory root, where
	// the result would vanish at the reboot), and refuses a missing bind
	// mount's.
	var mounts []dockerapi.Mount
	if want.Bind.Host != "" {
		mounts = append(mounts, dockerapi.Mount{Type: "bind", Source: want.Bind.Host, Target: want.Bind.Container})
	}
	create := dockerapi.CreateRequest{
		Config: dockerapi.Config{
			Image:      ctr.Image,
			Entrypoint: []string{"/waitdaemon"},
			Cmd:        want.Args,
			Env:        append([]string{engine.EnvDockerHost + "=unix://" + socket}, want.Env...),
			Labels:     want.Labels,
		},
		HostConfig: dockerapi.HostConfig{
			Binds:       binds,
			Mounts:      mounts,
			NetworkMode: "host",
			LogConfig:   ctr.HostConfig.LogConfig,
		},
	}
	mountDevice(&create.HostConfig, want.Device)
	return engine.Spec{Name: want.Name, Create: &planned{CreateRequest: create}}
}

// mountDevice gives the waiter the block device d, at the same path, and
// the right to mount it: CAP_SYS_ADMIN (with which Docker's default
// seccomp profile allows mount and unshare), and no AppArmor profile,
// as Docker's own forbids mount. It is not privileged: it gets no other
// device, and keeps the other capabilities' limits.
func mountDevice(hc *dockerapi.HostConfig, d *engine.Device) {
	if d == nil {
		return
	}
	hc.Devices = append(hc.Devices, dockerapi.DeviceMapping{PathOnHost: d.Path, PathInContainer: d.Path, CgroupPermissions: "rwm"})
	hc.CapAdd = append(hc.CapAdd, "SYS_ADMIN")
	hc.SecurityOpt = append(hc.SecurityOpt, "apparmor=unconfined")
}

// End removes the waiter's own container, and this process with it: the
// engine kills it first. Docker 20.10 restarted with live-restore removes
// a running container marked for auto-removal (fixed in 25.0), which the
// waiter would be while the user container runs.
func (e *Engine) End(ctx context.Context, name string) error {
	return e.Remove(ctx, name)
}

// engineBind is engine.EngineBind as a Docker bind, of the engine socket
// at source.
func engineBind(source string) (binds []string, socket string) {
	b, socket := engine.EngineBind(source, dockerapi.DefaultSocket)
	bind := b.Host + ":" + b.Container
	if b.ReadOnly {
		bind += ":ro"
	}
	return []string{bind}, socket
}

// socketSource is the host path of the engine socket bound into the
// action container at socket (engine.SocketSource), by its binds and
// bind mounts.
func socketSource(ctr dockerapi.Container, socket string) string {
	var binds []engine.Bind
	for _, b := range ctr.HostConfig.Binds {
		if parts := strings.Split(b, ":"); len(parts) >= 2 {
			binds = append(binds, engine.Bind{Host: parts[0], Container: parts[1]})
		}
	}
	for _, m := range ctr.HostConfig.Mounts {
		if m.Type == "bind" {
			binds = append(binds, engine.Bind{Host: m.Source, Container: m.Target})
		}
	}
	return engine.SocketSource(binds, socket, dockerapi.DefaultSocket)
}

// exitPollEvery is the pause between two looks at the action
// container's state, besides the wait on it.
const exitPollEvery = 100 * time.Millisecond

// ActionExited waits for the action container to stop, or to be gone, and
// returns when it stopped, by the engine's clock when it can tell. On
// Podman, besides the engine's wait, it polls the container's state for
// as long as it runs: Podman 4.3 answers a wait 250–900 ms after the
// exit, by when the worker may have removed the container, and its exit
// time with it. The
// action runs on while phase 1 pulls, however long the pull takes, and
// no longer than the worker lets it.
func (e *Engine) ActionExited(ctx context.Context, id string) (engine.Exit, error) {
	either, stop := context.WithCancel(ctx)
	defer stop()
	type answer struct {
		exit engine.Exit
		err  error
	}
	waited := make(chan answer, 1)
	go func() {
		var a answer
		a.exit, a.err = e.waitAction(either, id)
		waited <- a
	}()
	polled := make(chan engine.Exit, 1)
	if podman, _ := e.C.Podman(either); podman {
		go pollExit(either, e.C, id, polled)
	}
	select {
	case exit := <-polled:
		stop()
		<-waited // it ends with the cancel
		return exit, nil
	case a := <-waited:
		return a.exit, a.err
	}
}

// ActionGone waits until the action container is gone (the worker's
// force-remove), or until by. It learns the removal, and its time, from
// the engine's events, and looks with an inspect besides (engine.WaitGone).
func (e *Engine) ActionGone(ctx context.Context, id string, by time.Time) (time.Time, bool) {
	return engine.WaitGone(ctx, by, e.watchRemoval(id), func(ctx context.Context) bool {
		_, err := e.C.ContainerInspect(ctx, id)
		return errors.Is(err, dockerapi.ErrNotFound)
	})
}

// watchRemoval follows container id's removal in the engine's events:
// Docker's destroy, Podman's remove. The stream starts from a little
// before it is asked for, so that a removal while it opens is not lost.
func (e *Engine) watchRemoval(id string) engine.Watch {
	return func(ctx context.Context) <-chan time.Time {
		removed := make(chan time.Time, 1)
		go func() {
			defer close(removed)
			s, err := e.C.Events(ctx, dockerapi.EventsOptions{
				Since:   time.Now().Add(-time.Second),
				Filters: map[string][]string{"type": {"container"}, "container": {id}},
			})
			if err != nil {
				return
			}
			defer s.Close()
			stop := context.AfterFunc(ctx, func() { s.Close() })
			defer stop()
			for {
				ev, err := s.Next()
				if err != nil {
					return
				}
				if (ev.Action == "destroy" || ev.Action == "remove") && (strings.HasPrefix(ev.Actor.ID, id) || ev.Actor.Attributes["name"] == id) {
					removed <- ev.At()
					return
				}
			}
		}()
		return removed
	}
}

// pollExit inspects container every exitPollEvery while it runs, and
// sends when and how it stopped once it has. It gives up quietly when the
// container is gone or the engine does not answer: the wait says.
func pollExit(ctx context.Context, c *dockerapi.Client, container string, exited chan<- engine.Exit) {
	for engine.Sleep(ctx, exitPollEvery) {
		ctr, err := c.ContainerInspect(ctx, container)
		if err != nil {
			return
		}
		if ctr.State.Running {
			continue
		}
		if t, ok := finishedAt(ctr, time.Now()); ok {
			exited <- engine.Exit{At: t, Code: ctr.State.ExitCode, Known: true}
		}
		return
	}
}

// finishedAt is when ctr stopped, if the engine says and it is before now.
func finishedAt(ctr dockerapi.Container, now time.Time) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, ctr.State.FinishedAt)
	return t, err == nil && t.Year() > 1 && t.Before(now)
}

// waitAction is ActionExited's wait. A wait that breaks without an answer
// (the engine restarting under live-restore drops it) is ErrNoAnswer: the
// action may well still run, and the caller asks again.
func (e *Engine) waitAction(ctx context.Context, id string) (engine.Exit, error) {
	now := func() (engine.Exit, error) { return engine.Exit{At: time.Now()}, nil }
	var wr dockerapi.WaitResponse
	for {
		var err error
		wr, err = e.C.ContainerWait(ctx, id, dockerapi.WaitNotRunning)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return now()
		}
		var lost *dockerapi.TransportError
		switch {
		case errors.Is(err, dockerapi.ErrNotFound):
			return engine.Exit{At: time.Now(), Removed: true}, nil
		case !errors.As(err, &lost):
			// The engine answered, and cannot wait. Its inspect says how
			// the action stopped (a failed action must not hand off), or
			// that it still runs: then ask again. Only with neither does
			// the exit count from now, its code unknown.
			ctr, ierr := e.C.ContainerInspect(ctx, id)
			switch {
			case ierr == nil && ctr.State.Running:
				if !engine.Sleep(ctx, time.Second) {
					return now()
				}
				continue
			case ierr == nil:
				return stopped(ctr, ctr.State.ExitCode), nil
			case errors.Is(ierr, dockerapi.ErrNotFound):
				return engine.Exit{At: time.Now(), Removed: true}, nil
			}
			return now()
		default:
			return engine.Exit{}, fmt.Errorf("waiting for the action container: %w: %w", engine.ErrNoAnswer, err)
		}
	}
	// The wait's answer is the exit code; the inspect, when the
	// container is still there, says when.
	ctr, err := e.C.ContainerInspect(ctx, id)
	if err != nil {
		return engine.Exit{At: time.Now(), Code: wr.StatusCode, Known: true, Removed: errors.Is(err, dockerapi.ErrNotFound)}, nil
	}
	return stopped(ctr, wr.StatusCode), nil
}

// stopped is the exit, with code, of ctr, which no longer runs: when the
// engine says it stopped, else now.
func stopped(ctr dockerapi.Container, code int) engine.Exit {
	exit := engine.Exit{At: time.Now(), Code: code, Known: true}
	if t, ok := finishedAt(ctr, exit.At); ok {
		exit.At = t
	}
	return exit
}

// staleWaits bounds how often waitRun asks again after a wait that
// answered for an earlier run; staleWaitPause is the pause between.
const (
	staleWaits     = 50
	staleWaitPause = 100 * time.Millisecond
)

// waitRun waits for container to stop and returns its inspect and exit
// code, once they are those of the run whose start was sent at started.
// A wait can answer for the run before: Podman 4.3 can answer a re-run's
// wait with the earlier run's exit code, as if read before the new run
// had begun (docs/development.md#why-the-code-is-as-it-is). A run counts
// as this one when the container no longer runs and the engine's
// StartedAt is at most a second before started (re-runs are seconds
// apart). A wait or inspect that breaks without an answer is
// ErrNoAnswer: the run may go on, and the caller asks again.
func waitRun(ctx context.Context, c *dockerapi.Client, container string, started time.Time) (dockerapi.Container, int, error) {
	for stale := 0; ; {
		wr, err := c.ContainerWait(ctx, container, dockerapi.WaitNotRunning)
		var ctr dockerapi.Container
		if err == nil {
			ctr, err = c.ContainerInspect(ctx, container)
		}
		var lost *dockerapi.TransportError
		switch {
		case errors.As(err, &lost):
			return ctr, 0, fmt.Errorf("following %s: %w: %w", container, engine.ErrNoAnswer, err)
		case err != nil:
			return ctr, 0, fmt.Errorf("following %s: %w", container, err)
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
		if !engine.Sleep(ctx, staleWaitPause) {
			return ctr, 0, ctx.Err()
		}
	}
}
