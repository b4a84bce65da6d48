package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
)

// dockerBench measures waitdaemon on Docker or Podman, with actions run
// as tink-agent's Docker runtime runs them (package tinkagent): created,
// started with their wait in place, their output followed, and
// force-removed once they have exited, before the report. The agent
// stops an action only at its timeout, which no run here reaches. The
// actions are not privileged (Docker 20.10 here cannot start a
// privileged container) but get CAP_SYS_BOOT, as the end-to-end tests'.
type dockerBench struct {
	c      *dockerapi.Client
	agent  *tinkagent.Docker
	podman bool
	o      opts
}

func runDocker(ctx context.Context, o opts, socket string) (figures, error) {
	c := &dockerapi.Client{Socket: socket}
	v, err := c.EngineVersion(ctx)
	if err != nil {
		return figures{}, fmt.Errorf("no engine: %w (make engine starts one)", err)
	}
	podman, err := isPodman(ctx, c)
	if err != nil {
		return figures{}, err
	}
	b := &dockerBench{c: c, agent: &tinkagent.Docker{C: c, Unprivileged: true}, podman: podman, o: o}
	f := figures{engine: "Docker " + shortVersion(v.Version)}
	if podman {
		f.engine = "Podman " + shortVersion(v.Version)
	}
	fmt.Printf("\nEngine: %s %s (API %s) on %s\n", f.engine, v.Version, v.APIVersion, c.SocketPath())
	for i := range o.runs {
		d, err := b.bareStart(ctx, "default")
		if err != nil {
			return f, err
		}
		f.bridge = append(f.bridge, d)
		host, err := b.bareStart(ctx, "host")
		if err != nil {
			return f, err
		}
		// The engine's floor, measured as phase 1 is: a bare container's
		// own StartedAt→FinishedAt (Docker 29 and 28.2 take StartedAt
		// before the process runs), plus one host-network create+start,
		// the least a hand-off can cost.
		bare, err := b.bareRun(ctx)
		if err != nil {
			return f, err
		}
		f.floor = append(f.floor, bare+host)
		if d, err = b.phase1(ctx, fmt.Sprintf("bench-%d", i)); err != nil {
			return f, err
		}
		f.phase1 = append(f.phase1, d)
	}
	// The run with no removal waits out the bound beside the other
	// measures: all it adds to them is its waiter's look at the action,
	// ten a second.
	bound := make(chan error, 1)
	var unremoved timeline
	if o.bound {
		go func() {
			var err error
			unremoved, err = b.waitRun(ctx, "bench-bound", -1, false)
			bound <- err
		}()
	} else {
		bound <- nil
	}
	if f.mem, err = b.waiterMemory(ctx); err != nil {
		return f, err
	}
	var last timeline
	for i := range o.runs {
		r, err := b.waitRun(ctx, fmt.Sprintf("bench-wait-%d", i), removalDelays[i%len(removalDelays)], false)
		if err != nil {
			return f, err
		}
		f.wait = append(f.wait, r.late())
		f.learnt = append(f.learnt, r.countedFrom.Sub(r.removed))
		last = r
	}
	traced, err := b.waitRun(ctx, "bench-trace", removalDelays[0], true)
	if err != nil {
		return f, err
	}
	f.trips1, f.trips2 = traced.trips1, traced.trips2
	if f.trips1 == 0 || f.trips2 == 0 {
		return f, fmt.Errorf("the traced run shows %d and %d round trips: no trace", f.trips1, f.trips2)
	}
	if o.svg != "" {
		if err := os.WriteFile(o.svg, []byte(last.svg()), 0o644); err != nil {
			return f, err
		}
		fmt.Printf("Timeline of one run (WAIT_SECONDS=%d): %s\n", waitSeconds, o.svg)
	}
	title := "Phase 1 on " + f.engine
	if err := b.timeline(ctx, title); err != nil {
		return f, err
	}
	if err := <-bound; err != nil {
		return f, fmt.Errorf("the run with no removal: %w", err)
	}
	if o.bound {
		d := unremoved.late()
		f.bound = &d
	}
	return f, nil
}

// shortVersion is a version's major.minor (29.1.3: 29.1).
func shortVersion(v string) string {
	if p := strings.SplitN(v, ".", 3); len(p) == 3 {
		return p[0] + "." + p[1]
	}
	return v
}

// action is an action of waitdaemon's image, as a template writes it,
// its engine's socket bound in, and the environment env.
func (b *dockerBench) action(name, socket string, env ...string) tinkagent.Action {
	return tinkagent.Action{
		ID: "01JBENCH" + strings.ToUpper(tinkagent.NewID()[:10]), Name: name, Image: b.o.image, Args: []string{"reboot"},
		Env: append([]string{"IMAGE=" + b.o.probe}, env...), Volumes: []string{socket + ":/var/run/docker.sock"}, PID: "host",
	}
}

// run creates and runs an action as the agent does, to its exit, which
// must be 0; the caller finishes it.
func (b *dockerBench) run(ctx context.Context, a tinkagent.Action) (*tinkagent.DockerContainer, tinkagent.Result, error) {
	ctr, err := b.agent.Create(ctx, a)
	if err != nil {
		return nil, tinkagent.Result{}, err
	}
	res, err := ctr.Run(ctx)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("action %s exited %d:\n%s", ctr.Name, res.ExitCode, res.Output)
	}
	if err != nil {
		_ = ctr.Finish(context.WithoutCancel(ctx), res)
		return nil, res, err
	}
	return ctr, res, nil
}

// bareStart times a create and start of the user image, as the client
// sees it, then removes the container.
func (b *dockerBench) bareStart(ctx context.Context, network string) (time.Duration, error) {
	began := time.Now()
	created, err := b.c.ContainerCreate(ctx, "", dockerapi.CreateRequest{
		Config:     dockerapi.Config{Image: b.o.probe, Env: []string{"PROBE_SLEEP=30"}},
		HostConfig: dockerapi.HostConfig{NetworkMode: network},
	})
	if err != nil {
		return 0, err
	}
	defer b.c.ContainerRemove(context.WithoutCancel(ctx), created.ID, dockerapi.RemoveOptions{Force: true, Volumes: true})
	if err := b.c.ContainerStart(ctx, created.ID); err != nil {
		return 0, err
	}
	return time.Since(began), nil
}

// bareRun runs the user image to its exit, at once (it records nothing:
// it has no /out), and returns the engine's StartedAt→FinishedAt.
func (b *dockerBench) bareRun(ctx context.Context) (time.Duration, error) {
	created, err := b.c.ContainerCreate(ctx, "", dockerapi.CreateRequest{Config: dockerapi.Config{Image: b.o.probe}})
	if err != nil {
		return 0, err
	}
	defer b.c.ContainerRemove(context.WithoutCancel(ctx), created.ID, dockerapi.RemoveOptions{Force: true, Volumes: true})
	if err := b.c.ContainerStart(ctx, created.ID); err != nil {
		return 0, err
	}
	if _, err := b.c.ContainerWait(ctx, created.ID, dockerapi.WaitNotRunning); err != nil {
		return 0, err
	}
	started, finished, err := b.times(ctx, created.ID)
	return finished.Sub(started), err
}

// times are a container's StartedAt and FinishedAt.
func (b *dockerBench) times(ctx context.Context, id string) (started, finished time.Time, err error) {
	ctr, err := b.c.ContainerInspect(ctx, id)
	if err != nil {
		return started, finished, err
	}
	started, err1 := time.Parse(time.RFC3339Nano, ctr.State.StartedAt)
	finished, err2 := time.Parse(time.RFC3339Nano, ctr.State.FinishedAt)
	return started, finished, errors.Join(err1, err2)
}

// phase1 runs one action with WAIT_SECONDS=0, removed at once, and
// returns its StartedAt→FinishedAt once everything it made is gone.
func (b *dockerBench) phase1(ctx context.Context, name string) (time.Duration, error) {
	ctr, res, err := b.run(ctx, b.action(name, b.c.SocketPath(), "WAIT_SECONDS=0"))
	if err != nil {
		return 0, err
	}
	started, finished, err := b.times(ctx, ctr.ID)
	if err := errors.Join(err, ctr.Finish(ctx, res)); err != nil {
		return 0, err
	}
	return finished.Sub(started), b.waitGone(ctx, ctr.ID)
}

// waitGone waits until the action's waiter and user container are gone.
func (b *dockerBench) waitGone(ctx context.Context, actionID string) error {
	for range 300 {
		list, err := b.c.ContainerList(ctx, "org.waitdaemon.action-id="+actionID)
		if err != nil || len(list) == 0 {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("action %s left containers behind", actionID[:12])
}

// waiterOf is the ID of the waiter of action id.
func (b *dockerBench) waiterOf(ctx context.Context, id string) (string, error) {
	list, err := b.c.ContainerList(ctx, "org.waitdaemon.action-id="+id, "org.waitdaemon.role=waiter")
	if err != nil || len(list) != 1 {
		return "", fmt.Errorf("finding the waiter of %s: %v (%d found)", id[:12], err, len(list))
	}
	return list[0].ID, nil
}

// waiterMemory runs an action and reads the waiter's memory from /proc
// while it waits for the action's removal; then removes the action.
func (b *dockerBench) waiterMemory(ctx context.Context) (memory, error) {
	ctr, res, err := b.run(ctx, b.action("bench-memory", b.c.SocketPath(), "WAIT_SECONDS=0"))
	if err != nil {
		return memory{}, err
	}
	mem, err := func() (memory, error) {
		time.Sleep(time.Second)
		id, err := b.waiterOf(ctx, ctr.ID)
		if err != nil {
			return memory{}, err
		}
		w, err := b.c.ContainerInspect(ctx, id)
		if err != nil {
			return memory{}, err
		}
		return readMemory(w.State.Pid)
	}()
	if err := errors.Join(err, ctr.Finish(ctx, res)); err != nil {
		return mem, err
	}
	return mem, b.waitGone(ctx, ctr.ID)
}

// waitRun runs one action with WAIT_SECONDS=1, removes it delay after its
// exit (never, if delay is negative: the waiter then counts from 60 s
// after the exit), follows its waiter to the end and returns the run's
// timeline; verbose counts the round trips.
func (b *dockerBench) waitRun(ctx context.Context, name string, delay time.Duration, verbose bool) (timeline, error) {
	tl := timeline{wait: waitSeconds * time.Second}
	env := []string{"WAIT_SECONDS=" + strconv.Itoa(waitSeconds)}
	if verbose {
		env = append(env, "WAITDAEMON_VERBOSE=true")
	}
	ctr, res, err := b.run(ctx, b.action(name, b.c.SocketPath(), env...))
	if err != nil {
		return tl, err
	}
	defer ctr.Finish(context.WithoutCancel(ctx), res)
	tl.trips1 = countTrips(res.Output)
	if tl.actionStarted, tl.actionExited, err = b.times(ctx, ctr.ID); err != nil {
		return tl, err
	}
	wid, err := b.waiterOf(ctx, ctr.ID)
	if err != nil {
		return tl, err
	}
	if tl.waiterStarted, _, err = b.times(ctx, wid); err != nil {
		return tl, err
	}
	followed := make(chan error, 1)
	var out, trace strings.Builder
	go func() { followed <- followWaiter(ctx, b.c, wid, b.podman, &out, &trace) }()
	if delay >= 0 {
		time.Sleep(time.Until(tl.actionExited.Add(delay)))
		if err := ctr.Finish(ctx, res); err != nil {
			return tl, err
		}
		if tl.removed, err = b.removedAt(ctx, ctr.ID, tl.actionExited); err != nil {
			return tl, err
		}
	}
	if err := <-followed; err != nil {
		return tl, fmt.Errorf("following the waiter of %s: %w", ctr.Name, err)
	}
	if err := tl.read(out.String(), trace.String()); err != nil {
		return tl, fmt.Errorf("the waiter of %s: %w", ctr.Name, err)
	}
	if err := ctr.Finish(ctx, res); err != nil {
		return tl, err
	}
	return tl, b.waitGone(ctx, ctr.ID)
}

// removedAt is when the engine removed container id, from its events
// since the container's exit, which the engine replays.
func (b *dockerBench) removedAt(ctx context.Context, id string, exited time.Time) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := b.c.Events(ctx, dockerapi.EventsOptions{Since: exited.Add(-time.Second), Filters: map[string][]string{"type": {"container"}, "container": {id}}})
	if err != nil {
		return time.Time{}, err
	}
	defer s.Close()
	for {
		ev, err := s.Next()
		if err != nil {
			return time.Time{}, fmt.Errorf("the removal of %s in the engine's events: %w", id, err)
		}
		if ev.Action == "destroy" || ev.Action == "remove" {
			return ev.At(), nil
		}
	}
}

// timeline runs actions whose socket is a callProxy's, and prints the
// calls of the one whose phase 1 took the median time.
func (b *dockerBench) timeline(ctx context.Context, title string) error {
	var all []phase1Run
	for i := range b.o.timelineRuns {
		r, err := func() (phase1Run, error) {
			p, err := newCallProxy(b.c.SocketPath(), false)
			if err != nil {
				return phase1Run{}, err
			}
			defer p.close()
			ctr, res, err := b.run(ctx, b.action(fmt.Sprintf("bench-tl-%d", i), p.sock, "WAIT_SECONDS=0"))
			if err != nil {
				return phase1Run{}, err
			}
			began, exited, err := b.times(ctx, ctr.ID)
			// The waiter, through the same proxy, ends before it closes.
			err = errors.Join(err, ctr.Finish(ctx, res), b.waitGone(ctx, ctr.ID))
			return phase1Run{began: began, exited: exited, calls: p.noted()}, err
		}()
		if err != nil {
			return fmt.Errorf("the timeline's run %d: %w", i, err)
		}
		all = append(all, r)
	}
	m := medianRun(all)
	printTimeline(title, m.began, m.exited, m.calls)
	return nil
}
