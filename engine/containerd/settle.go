package containerd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine"
)

// errUnsettled is a task create whose first attempt failed in a way that
// leaves its outcome open, and that could not be settled in the time
// allowed (see taskCreate): containerd may have done it, or may do it
// yet.
var errUnsettled = errors.New("not settled")

// taskCreate creates the task of container id, stopped at its start
// (created), and returns its pid.
//
// A create whose answer was lost (engine.IsLost) is not failed, nor sent
// again blindly: Tasks/Get says what became of it. A task that is there
// is the one it created (a container has one task), and is returned; none
// means it was not created, or is still being created, and it is created
// again. A retry that meets AlreadyExists met the lost attempt's task.
// Any attempt that meets the task's bundle, or its runc container, met
// another create of the task still under way, or one cut off that
// containerd is still undoing (containerd 2.2.1 answers Unknown, "mkdir
// …: file exists", runc's "container with given ID already exists", or
// a new shim's "getwd: no such file or directory" or "open
// …/shim-binary-path: no such file or directory", or runc's "open
// …/log.json: no such file or directory", when the undoing removes the
// bundle under it, for the seconds it takes; Tasks/Get finds
// no task meanwhile, or a task that then goes): the task is asked for
// again, and created again, after a pause, until that create has ended
// or been undone. A task found after a lost answer is taken only once
// it is still there when asked again after a pause (a status UNKNOWN, a
// busy shim's, is asked for again first): a cut create that containerd
// undoes can show its task for a moment before it goes, and a task that
// goes is created again. Settling a failed attempt takes within at most,
// in all (zero: one request's time); a create not settled by then fails
// with errUnsettled.
func (e *Engine) taskCreate(ctx context.Context, id string, spec containerdapi.TaskSpec, within time.Duration) (uint32, error) {
	// Once an attempt has failed, settling it (asking, waiting, creating
	// again) takes at most within in all: a containerd that hangs on
	// what a cut create left must not hold the caller longer.
	bound := cmp.Or(within, e.C.RequestTime())
	settle := ctx
	unsettled := func(err error) error {
		if settle != ctx && settle.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("%w (%w within %v)", err, errUnsettled, bound)
		}
		return err
	}
	for try, lostTries := 0, 0; ; try++ {
		pid, err := e.C.TaskCreate(settle, id, spec)
		if err == nil {
			return pid, nil
		}
		if try == 0 {
			var cancel context.CancelFunc
			settle, cancel = context.WithTimeout(ctx, bound)
			defer cancel()
		}
		lost := engine.IsLost(err)
		met := try > 0 && errors.Is(err, containerdapi.ErrAlreadyExists) || bundleExists(err)
		if lost {
			lostTries++
		}
		if !lost && !met || lostTries > engine.Repeats || ctx.Err() != nil {
			return 0, unsettled(err)
		}
		p, gerr := e.createdTask(settle, id)
		if gerr == nil {
			return p.Pid, nil
		}
		if !errors.Is(gerr, containerdapi.ErrNotFound) {
			return 0, unsettled(fmt.Errorf("%w (then asking whether it was: %w)", err, gerr))
		}
		if !engine.Sleep(settle, engine.Backoff(min(try, 3))) {
			return 0, unsettled(err)
		}
	}
}

// createdTask is the task of container id once a create whose answer
// was lost left it: asked for again while its status is UNKNOWN (see
// knownTask), and taken only if it is there still after a pause of
// 200 ms, which a cut create that containerd undoes does not outlast.
func (e *Engine) createdTask(ctx context.Context, id string) (containerdapi.Process, error) {
	if _, err := e.knownTask(ctx, id); err != nil {
		return containerdapi.Process{}, err
	}
	if !engine.Sleep(ctx, engine.Backoff(2)) {
		return containerdapi.Process{}, context.Cause(ctx)
	}
	return e.C.TaskGet(ctx, id)
}

// knownTask is the task of container id, asked for again, a few times,
// after a pause each, while containerd says its status is UNKNOWN (the
// shim's State missed its 2 s, as a busy shim's does): the status it
// then has, or UNKNOWN still.
func (e *Engine) knownTask(ctx context.Context, id string) (containerdapi.Process, error) {
	for ask := 0; ; ask++ {
		p, err := e.C.TaskGet(ctx, id)
		if err != nil || p.Status != containerdapi.TaskUnknown || ask == engine.Repeats {
			return p, err
		}
		if !engine.Sleep(ctx, engine.Backoff(ask)) {
			return p, context.Cause(ctx)
		}
	}
}

// bundleExists is a task create that met the bundle directory, or the
// runc container, of another create of the same task, still under way
// or being undone; or whose new shim lost its working directory, the
// bundle, to that undoing ("getwd: no such file or directory", or "open
// …/shim-binary-path: no such file or directory" as it starts), or whose
// runc lost its log file in the bundle ("unable to retrieve OCI runtime
// error (open …/log.json: no such file or directory)").
func bundleExists(err error) bool {
	var ae *containerdapi.Error
	if !errors.As(err, &ae) || ae.Code != containerdapi.Unknown {
		return false
	}
	return strings.Contains(ae.Message, "mkdir ") && strings.HasSuffix(ae.Message, ": file exists") ||
		strings.HasSuffix(ae.Message, "runc create failed: container with given ID already exists") ||
		strings.HasPrefix(ae.Message, "failed to start shim: ") && (strings.Contains(ae.Message, "getwd: no such file or directory") ||
			strings.Contains(ae.Message, "/shim-binary-path: no such file or directory")) ||
		strings.Contains(ae.Message, "unable to retrieve OCI runtime error (open ") && strings.Contains(ae.Message, "/log.json: no such file or directory")
}

// taskStart starts the created task of container id and returns its pid.
//
// A start whose answer was lost (engine.IsLost) is not failed, nor sent
// again blindly: Tasks/Get says what became of it. A task running, paused
// or stopped started (a stopped one has already exited: TaskWait reads
// its exit); one still created did not, and is started again; one gone
// is an error. One whose status is UNKNOWN (containerd's answer when the
// shim's State misses its 2 s limit, as a shim busy starting the task
// does) may have started: it is asked for again, a few times, and never
// started again while so; if it stays UNKNOWN the start fails, with the
// task as it is: a wait for its exit would never end if it never started,
// so the caller counts it as a run that could not start.
func (e *Engine) taskStart(ctx context.Context, id string) (uint32, error) {
	for try := 0; ; try++ {
		pid, err := e.C.TaskStart(ctx, id)
		if err == nil {
			return pid, nil
		}
		lost := engine.IsLost(err)
		if !lost && try == 0 || try == engine.Repeats {
			return 0, err
		}
		// A lost answer, or a retry's failure that may be the lost
		// attempt's start met: the task says.
		p, gerr := e.knownTask(ctx, id)
		if gerr != nil {
			return 0, fmt.Errorf("%w (then asking whether it started: %w)", err, gerr)
		}
		switch p.Status {
		case containerdapi.TaskRunning, containerdapi.TaskStopped, containerdapi.TaskPaused, containerdapi.TaskPausing:
			return p.Pid, nil
		case containerdapi.TaskUnknown:
			return 0, fmt.Errorf("%w (then its status stayed UNKNOWN: it is counted as not started)", err)
		}
		if p.Status != containerdapi.TaskCreated || !lost {
			return 0, fmt.Errorf("%w (the task is %s)", err, p.Status)
		}
		if !engine.Sleep(ctx, engine.Backoff(try)) {
			return 0, fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		}
	}
}
