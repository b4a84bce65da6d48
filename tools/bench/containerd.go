package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine/containerd"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/phase"
	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
)

// cdBench measures waitdaemon on containerd, with action containers made
// and run as tink-agent's containerd runtime does (package tinkagent),
// which, once an action has exited 0, deletes its task, then its
// container and snapshot: phase 1 by containerd's own times, against a
// bare create and start of the action's image in the same run; the
// wait, the round trips and the waiter's memory.
type cdBench struct {
	c            *containerdapi.Client
	eng          *containerd.Engine
	image, probe string // qualified
	o            opts

	mu      sync.Mutex
	actions []string // the IDs of the actions run, for the clean-up
}

func runContainerd(ctx context.Context, o opts, socket, namespace string) (f figures, err error) {
	c := &containerdapi.Client{Socket: socket, Namespace: namespace}
	v, err := c.Version(ctx)
	if err != nil {
		return f, fmt.Errorf("no containerd on %s: %w (make containerd starts one)", c.SocketPath(), err)
	}
	b := &cdBench{c: c, eng: containerd.New(c), o: o}
	for _, ref := range []struct{ in, out *string }{{&o.image, &b.image}, {&o.probe, &b.probe}} {
		r, err := imageref.Parse(*ref.in)
		if err != nil {
			return f, err
		}
		*ref.out = r.Qualified()
		if _, err := c.ImageUnpacked(ctx, *ref.out, containerdapi.DefaultPlatform(), containerdapi.DefaultSnapshotter); err != nil {
			return f, fmt.Errorf("image %s in namespace %s: %w (make bench imports it)", *ref.out, namespace, err)
		}
	}
	defer func() { err = errors.Join(err, b.cleanUp()) }()
	f.engine = "containerd " + shortVersion(strings.TrimPrefix(v.Version, "v"))
	fmt.Printf("\nEngine: containerd %s on %s (namespace %s)\n", v.Version, c.SocketPath(), namespace)

	for i := range o.runs {
		d, err := b.bareStart(ctx, i)
		if err != nil {
			return f, err
		}
		f.floor = append(f.floor, d)
		p, err := b.phase1(ctx, i)
		if err != nil {
			return f, err
		}
		f.phase1 = append(f.phase1, p)
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
	for i := range o.runs {
		r, err := b.waitRun(ctx, fmt.Sprintf("bench-wait-%d", i), removalDelays[i%len(removalDelays)], false)
		if err != nil {
			return f, err
		}
		f.wait = append(f.wait, r.late())
		f.learnt = append(f.learnt, r.countedFrom.Sub(r.removed))
	}
	traced, err := b.waitRun(ctx, "bench-trace", removalDelays[0], true)
	if err != nil {
		return f, err
	}
	f.trips1, f.trips2 = traced.trips1, traced.trips2
	if f.trips1 == 0 || f.trips2 == 0 {
		return f, fmt.Errorf("the traced run shows %d and %d round trips: no trace", f.trips1, f.trips2)
	}
	if err := b.timeline(ctx, "Phase 1 on "+f.engine, o.timelineRuns); err != nil {
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

// timeline runs actions whose socket is a callProxy's, and prints the
// calls of the one whose phase 1 took the median time.
func (b *cdBench) timeline(ctx context.Context, title string, runs int) error {
	var all []phase1Run
	for i := range runs {
		p, err := newCallProxy(b.c.SocketPath(), true)
		if err != nil {
			return err
		}
		r, err := b.run(ctx, fmt.Sprintf("bench-tl-%d", i), p.sock)
		calls := p.noted()
		p.close()
		if err != nil {
			return fmt.Errorf("the timeline's run %d: %w", i, err)
		}
		all = append(all, phase1Run{began: r.began, exited: r.exited, calls: calls})
	}
	m := medianRun(all)
	printTimeline(title, m.began, m.exited, m.calls)
	return nil
}

// action is a tink-agent-shaped action of waitdaemon's image, with env,
// and the engine's socket as a volume.
func (b *cdBench) action(name string, args []string, env ...string) tinkagent.Action {
	return tinkagent.Action{
		ID: "01JBENCH" + strings.ToUpper(tinkagent.NewID()[:10]), Name: name, Image: b.image, Args: args, Env: env,
		Volumes: []string{b.c.SocketPath() + ":" + containerdapi.DefaultSocket}, PID: "host",
	}
}

// create creates a's container and task as the agent does; its ID is
// noted for the clean-up.
func (b *cdBench) create(ctx context.Context, a tinkagent.Action) (*tinkagent.Container, error) {
	ctr, err := (&tinkagent.Containerd{C: b.c}).Create(ctx, a)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.actions = append(b.actions, ctr.ID)
	return ctr, nil
}

// bareStart times the least an agent's start costs: a container of the
// action's image made as the agent makes it (lease, snapshot, container,
// task), and started; then removes it. Without IMAGE, it stops at
// once, having made nothing.
func (b *cdBench) bareStart(ctx context.Context, i int) (time.Duration, error) {
	a := b.action(fmt.Sprintf("bench-bare-%d", i), []string{"reboot"})
	began := time.Now()
	ctr, err := b.create(ctx, a)
	if err != nil {
		return 0, err
	}
	if _, err := b.c.TaskStart(ctx, ctr.ID); err != nil {
		return 0, fmt.Errorf("starting the bare container: %w", err)
	}
	took := time.Since(began)
	if _, err := b.c.TaskWait(ctx, ctr.ID); err != nil {
		return 0, fmt.Errorf("waiting for the bare container: %w", err)
	}
	if list, err := b.eng.List(ctx, phase.LabelActionID, ctr.ID); err != nil || len(list) > 0 {
		return 0, fmt.Errorf("the bare container made %d containers (%v), want none", len(list), err)
	}
	return took, ctr.Finish(ctx, tinkagent.Result{})
}

// phase1 runs one action as the agent does, removed at once, and
// returns phase 1's time by containerd's clock: from the action's
// /tasks/start event (the envelope's timestamp: containerd has no start
// time of a task) to its exited_at. It then waits for the waiter to
// stop, which the next phase 1 removes.
func (b *cdBench) phase1(ctx context.Context, i int) (time.Duration, error) {
	r, err := b.run(ctx, fmt.Sprintf("bench-%d", i), b.c.SocketPath())
	return r.exited.Sub(r.began), err
}

// cdRun is one action's run: containerd's times of its start and exit,
// and when the agent's Tasks/Start was sent.
type cdRun struct{ began, exited, sent time.Time }

// run runs one action as the agent does, with socket bound as the
// engine's, and waits for its waiter to stop.
func (b *cdBench) run(ctx context.Context, name, socket string) (cdRun, error) {
	var r cdRun
	a := b.action(name, []string{"reboot"}, "IMAGE="+b.probe, "WAIT_SECONDS=0")
	a.Volumes = []string{socket + ":" + containerdapi.DefaultSocket}
	ctr, err := b.create(ctx, a)
	if err != nil {
		return r, err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	sub, err := b.c.Subscribe(sctx, `topic=="`+containerdapi.TopicTaskStart+`"`)
	if err != nil {
		return r, err
	}
	defer sub.Close()
	waited := make(chan error, 1)
	var exit containerdapi.Exit
	go func() { var err error; exit, err = b.c.TaskWait(ctx, ctr.ID); waited <- err }()
	time.Sleep(50 * time.Millisecond) // the wait is in place
	r.sent = time.Now()
	if _, err := b.c.TaskStart(ctx, ctr.ID); err != nil {
		return r, fmt.Errorf("starting action %s: %w", ctr.Name, err)
	}
	for r.began.IsZero() {
		ev, err := sub.Next()
		if err != nil {
			return r, fmt.Errorf("waiting for the start of action %s: %w", ctr.Name, err)
		}
		if e, err := ev.TaskStart(); err == nil && e.ContainerID == ctr.ID {
			r.began = ev.Timestamp
		}
	}
	if err := <-waited; err != nil {
		return r, fmt.Errorf("waiting for action %s: %w", ctr.Name, err)
	}
	if exit.Status != 0 {
		return r, fmt.Errorf("action %s exited %d:\n%s", ctr.Name, exit.Status, ctr.Output())
	}
	if err := ctr.Finish(ctx, tinkagent.Result{}); err != nil {
		return r, err
	}
	if _, err := b.waiter(ctx, ctr.ID, true); err != nil {
		return r, err
	}
	r.exited = exit.ExitedAt
	return r, nil
}

// waiter finds the waiter of action id and, if stopped, waits until it
// has stopped (for up to 90 s: one that waits out the 60 s bound); it
// returns the waiter's ID.
func (b *cdBench) waiter(ctx context.Context, id string, stopped bool) (string, error) {
	for range 1800 {
		list, err := b.eng.List(ctx, phase.LabelActionID, id)
		if err != nil {
			return "", err
		}
		for _, l := range list {
			if l.Labels[phase.LabelRole] == phase.RoleWaiter && (!stopped || len(list) == 1 && l.Ran && !l.Running) {
				return l.ID, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("the waiter of action %s did not finish in 90 s", id[:12])
}

// waiterMemory runs an action and reads the waiter's memory from
// /proc/<its task's pid>/status while it waits for the action's removal;
// then removes the action as the agent does.
func (b *cdBench) waiterMemory(ctx context.Context) (memory, error) {
	ctr, res, err := b.runAction(ctx, b.action("bench-memory", []string{"reboot"}, "IMAGE="+b.probe, "WAIT_SECONDS=0"))
	if err != nil {
		return memory{}, err
	}
	mem, err := func() (memory, error) {
		time.Sleep(time.Second)
		w, err := b.waiter(ctx, ctr.ID, false)
		if err != nil {
			return memory{}, err
		}
		t, err := b.c.TaskGet(ctx, w)
		if err != nil {
			return memory{}, fmt.Errorf("the waiter's task: %w", err)
		}
		if t.Status != containerdapi.TaskRunning {
			return memory{}, fmt.Errorf("the waiter is %s, not waiting", t.Status)
		}
		return readMemory(int(t.Pid))
	}()
	if err := errors.Join(err, ctr.Finish(ctx, res)); err != nil {
		return mem, err
	}
	_, err = b.waiter(ctx, ctr.ID, true)
	return mem, err
}

// runAction creates and runs a as the agent does, to its exit, which
// must be 0; the caller finishes it.
func (b *cdBench) runAction(ctx context.Context, a tinkagent.Action) (*tinkagent.Container, tinkagent.Result, error) {
	ctr, err := b.create(ctx, a)
	if err != nil {
		return nil, tinkagent.Result{}, err
	}
	res, err := ctr.Run(ctx)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("action %s exited %d:\n%s", ctr.Name, res.ExitCode, res.Output)
	}
	if err != nil {
		return nil, res, errors.Join(err, ctr.Finish(context.WithoutCancel(ctx), res))
	}
	return ctr, res, nil
}

// waitRun runs one action with WAIT_SECONDS=1 as the agent does, whose
// clean-up (the task, then the container and its snapshot) begins delay
// after the exit (never, if delay is negative: the waiter then counts
// from 60 s after the exit), waits for its waiter to stop, and returns
// the run's timeline from the waiter's output; verbose counts the round
// trips.
func (b *cdBench) waitRun(ctx context.Context, name string, delay time.Duration, verbose bool) (timeline, error) {
	tl := timeline{wait: waitSeconds * time.Second}
	env := []string{"IMAGE=" + b.probe, "WAIT_SECONDS=" + strconv.Itoa(waitSeconds)}
	if verbose {
		env = append(env, "WAITDAEMON_VERBOSE=true")
	}
	ctr, res, err := b.runAction(ctx, b.action(name, []string{"reboot"}, env...))
	if err != nil {
		return tl, err
	}
	tl.actionExited, tl.trips1 = res.ExitedAt, countTrips(res.Output)
	if delay >= 0 {
		time.Sleep(time.Until(tl.actionExited.Add(delay)))
		sctx, stop := context.WithTimeout(ctx, 10*time.Second)
		defer stop()
		sub, err := b.c.Subscribe(sctx, `topic=="`+containerdapi.TopicContainerDelete+`"`)
		if err != nil {
			return tl, err
		}
		defer sub.Close()
		if err := ctr.Finish(ctx, res); err != nil {
			return tl, err
		}
		// When the daemon deleted the container, from its events.
		for tl.removed.IsZero() {
			ev, err := sub.Next()
			if err != nil {
				return tl, fmt.Errorf("the delete of %s in the daemon's events: %w", ctr.Name, err)
			}
			if d, err := ev.ContainerDelete(); err == nil && d.ID == ctr.ID {
				tl.removed = ev.Timestamp
			}
		}
	}
	w, err := b.waiter(ctx, ctr.ID, true)
	if delay < 0 {
		err = errors.Join(err, ctr.Finish(ctx, res))
	}
	if err != nil {
		return tl, err
	}
	out, err := os.ReadFile(filepath.Join(containerd.DefaultLogDir, w, "log"))
	if err != nil {
		return tl, fmt.Errorf("the waiter's output: %w", err)
	}
	// Its stdout and stderr in one file, each line whole.
	if err := tl.read(string(out), string(out)); err != nil {
		return tl, fmt.Errorf("the waiter of %s: %w", ctr.Name, err)
	}
	return tl, nil
}

// cleanUp removes what the bench's actions left, with their output.
func (b *cdBench) cleanUp() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, id := range b.actions {
		list, err := b.eng.List(ctx, phase.LabelActionID, id)
		errs = append(errs, err)
		for _, l := range list {
			// On the host, Remove removes the output directory too.
			errs = append(errs, b.eng.Remove(ctx, l.ID))
		}
		errs = append(errs, b.eng.Remove(ctx, id))
	}
	// The output of the waiters that a later phase 1 removed: it could
	// not reach them.
	dirs, _ := filepath.Glob(filepath.Join(containerd.DefaultLogDir, "tinkerbell_bench-*_01JBENCH*"))
	for _, d := range dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleaning up: %w", err)
	}
	return nil
}
