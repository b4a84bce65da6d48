package containerdapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/waitdaemon/waitdaemon/internal/socketclient"
)

// TaskStatus is containerd.v1.types.Status.
type TaskStatus uint32

// The states of a task.
const (
	TaskUnknown TaskStatus = 0
	TaskCreated TaskStatus = 1
	TaskRunning TaskStatus = 2
	TaskStopped TaskStatus = 3
	TaskPaused  TaskStatus = 4
	TaskPausing TaskStatus = 5
)

// started tells a task that was started: running, paused or stopped
// (it has exited).
func (s TaskStatus) started() bool {
	switch s {
	case TaskRunning, TaskStopped, TaskPaused, TaskPausing:
		return true
	}
	return false
}

func (s TaskStatus) String() string {
	switch s {
	case TaskCreated:
		return "created"
	case TaskRunning:
		return "running"
	case TaskStopped:
		return "stopped"
	case TaskPaused:
		return "paused"
	case TaskPausing:
		return "pausing"
	}
	return "unknown"
}

// Process is containerd.v1.types.Process: a task, as Tasks/Get and
// Tasks/List answer.
type Process struct {
	ContainerID string     // 1
	ID          string     // 2: the container's ID for a task
	Pid         uint32     // 3
	Status      TaskStatus // 4
	ExitStatus  uint32     // 9
	ExitedAt    time.Time  // 10
}

func (m *Process) fields() []field {
	return []field{
		{1, "container_id", (*stringValue)(&m.ContainerID)},
		{2, "id", (*stringValue)(&m.ID)},
		{3, "pid", uintValue[uint32]{&m.Pid}},
		{4, "status", uintValue[TaskStatus]{&m.Status}},
		{9, "exit_status", uintValue[uint32]{&m.ExitStatus}},
		{10, "exited_at", (*timeValue)(&m.ExitedAt)},
	}
}

// processList is a repeated Process (see msgList).
type processList []Process

func (l *processList) len() int         { return len(*l) }
func (l *processList) at(i int) message { return &(*l)[i] }
func (l *processList) add() message     { *l = append(*l, Process{}); return &(*l)[len(*l)-1] }

// TaskSpec is what Tasks/Create takes beyond the container's ID.
type TaskSpec struct {
	// Rootfs is the mounts of the container's snapshot (SnapshotMounts):
	// the daemon does not add them itself.
	Rootfs []Mount
	// Stdin, Stdout and Stderr are URIs: file:///host/path appends the
	// stream to that host file (the shim creates it); empty discards it.
	Stdin, Stdout, Stderr string
	Terminal              bool
	// SettleWithin bounds the settling of a create that failed (asking
	// for the task, creating it again), in all; zero is a request's time.
	// A create not settled within it fails with ErrUnsettled.
	SettleWithin time.Duration
}

// Exit is how a task ended.
type Exit struct {
	Status   uint32 // 137 for SIGKILL
	ExitedAt time.Time
}

type (
	createTaskRequest struct {
		ContainerID string  // 1
		Rootfs      []Mount // 3
		Stdin       string  // 4
		Stdout      string  // 5
		Stderr      string  // 6
		Terminal    bool    // 7
	}
	createTaskResponse struct {
		ContainerID string // 1
		Pid         uint32 // 2
	}
	taskRequest struct {
		ContainerID string // 1
		ExecID      string // 2
	}
	startResponse struct {
		Pid uint32 // 1
	}
	waitResponse struct {
		ExitStatus uint32    // 1
		ExitedAt   time.Time // 2
	}
	deleteTaskResponse struct {
		ID         string    // 1
		Pid        uint32    // 2
		ExitStatus uint32    // 3
		ExitedAt   time.Time // 4
	}
	killRequest struct {
		ContainerID string // 1
		ExecID      string // 2
		Signal      uint32 // 3
		All         bool   // 4
	}
	listTasksRequest struct {
		Filter string // 1
	}
	listTasksResponse struct {
		Tasks []Process // 1
	}
	getTaskResponse struct {
		Process Process // 1
	}
)

func (m *createTaskRequest) fields() []field {
	return []field{
		{1, "container_id", (*stringValue)(&m.ContainerID)},
		{3, "rootfs", msgList{(*mountList)(&m.Rootfs)}},
		{4, "stdin", (*stringValue)(&m.Stdin)},
		{5, "stdout", (*stringValue)(&m.Stdout)},
		{6, "stderr", (*stringValue)(&m.Stderr)},
		{7, "terminal", (*boolValue)(&m.Terminal)},
	}
}
func (m *createTaskResponse) fields() []field {
	return []field{{1, "container_id", (*stringValue)(&m.ContainerID)}, {2, "pid", uintValue[uint32]{&m.Pid}}}
}
func (m *taskRequest) fields() []field {
	return []field{{1, "container_id", (*stringValue)(&m.ContainerID)}, {2, "exec_id", (*stringValue)(&m.ExecID)}}
}
func (m *startResponse) fields() []field { return []field{{1, "pid", uintValue[uint32]{&m.Pid}}} }
func (m *waitResponse) fields() []field {
	return []field{{1, "exit_status", uintValue[uint32]{&m.ExitStatus}}, {2, "exited_at", (*timeValue)(&m.ExitedAt)}}
}
func (m *deleteTaskResponse) fields() []field {
	return []field{
		{1, "id", (*stringValue)(&m.ID)},
		{2, "pid", uintValue[uint32]{&m.Pid}},
		{3, "exit_status", uintValue[uint32]{&m.ExitStatus}},
		{4, "exited_at", (*timeValue)(&m.ExitedAt)},
	}
}
func (m *killRequest) fields() []field {
	return []field{
		{1, "container_id", (*stringValue)(&m.ContainerID)},
		{2, "exec_id", (*stringValue)(&m.ExecID)},
		{3, "signal", uintValue[uint32]{&m.Signal}},
		{4, "all", (*boolValue)(&m.All)},
	}
}
func (m *listTasksRequest) fields() []field { return []field{{1, "filter", (*stringValue)(&m.Filter)}} }
func (m *listTasksResponse) fields() []field {
	return []field{{1, "tasks", msgList{(*processList)(&m.Tasks)}}}
}
func (m *getTaskResponse) fields() []field { return []field{{1, "process", msgValue{&m.Process}}} }

var (
	tasksCreate = newRPC("containerd.services.tasks.v1.Tasks/Create", &createTaskRequest{}, &createTaskResponse{}, false)
	tasksStart  = newRPC("containerd.services.tasks.v1.Tasks/Start", &taskRequest{}, &startResponse{}, false)
	tasksWait   = newRPC("containerd.services.tasks.v1.Tasks/Wait", &taskRequest{}, &waitResponse{}, true)
	tasksDelete = newRPC("containerd.services.tasks.v1.Tasks/Delete", &taskRequest{}, &deleteTaskResponse{}, true)
	tasksKill   = newRPC("containerd.services.tasks.v1.Tasks/Kill", &killRequest{}, &empty{}, true)
	tasksList   = newRPC("containerd.services.tasks.v1.Tasks/List", &listTasksRequest{}, &listTasksResponse{}, true)
	tasksGet    = newRPC("containerd.services.tasks.v1.Tasks/Get", &taskRequest{}, &getTaskResponse{}, true)
)

// TaskCreate creates the task of container id, stopped at its start
// (created), and returns its pid. Most run failures (capabilities, a
// missing bind source, a bad spec) surface here.
//
// A create whose answer was lost (see lostAnswer) is not failed, nor sent
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
// goes is created again. Settling a failed attempt takes one request's
// time at most, in all, or spec.SettleWithin; a create not settled by
// then fails with ErrUnsettled.
func (c *Client) TaskCreate(ctx context.Context, id string, spec TaskSpec) (uint32, error) {
	req := &createTaskRequest{ContainerID: id, Rootfs: spec.Rootfs, Stdin: spec.Stdin, Stdout: spec.Stdout, Stderr: spec.Stderr, Terminal: spec.Terminal}
	// Once an attempt has failed, settling it (asking, waiting, creating
	// again) takes at most one request's time in all: a containerd that
	// hangs on what a cut create left must not hold the caller longer.
	bound := cmp.Or(spec.SettleWithin, c.bounds().Request())
	settle := ctx
	unsettled := func(err error) error {
		if settle != ctx && settle.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("creating the task of container %q: %w (%w within %v)", id, err, ErrUnsettled, bound)
		}
		return fmt.Errorf("creating the task of container %q: %w", id, err)
	}
	for try, lostTries := 0, 0; ; try++ {
		var out createTaskResponse
		tries := &socketclient.Attempts{}
		err := c.call(settle, tasksCreate, req, &out, callOptions{tries: tries})
		if err == nil {
			return out.Pid, nil
		}
		if try == 0 {
			var cancel context.CancelFunc
			settle, cancel = context.WithTimeout(ctx, bound)
			defer cancel()
		}
		lost := lostAnswer(err, tries)
		met := try > 0 && errors.Is(err, ErrAlreadyExists) || bundleExists(err)
		if lost {
			lostTries++
		}
		if !lost && !met || lostTries > socketclient.MaxRetries || ctx.Err() != nil {
			return 0, unsettled(err)
		}
		p, gerr := c.createdTask(settle, id)
		if gerr == nil {
			return p.Pid, nil
		}
		if !errors.Is(gerr, ErrNotFound) {
			return 0, unsettled(fmt.Errorf("%w (then asking whether it was: %w)", err, gerr))
		}
		if perr := socketclient.Pause(settle, min(try, 3)); perr != nil {
			return 0, unsettled(err)
		}
	}
}

// createdTask is the task of container id once a create whose answer
// was lost left it: asked for again while its status is UNKNOWN (see
// knownTask), and taken only if it is there still after a pause of
// 200 ms, which a cut create that containerd undoes does not outlast.
func (c *Client) createdTask(ctx context.Context, id string) (Process, error) {
	if _, err := c.knownTask(ctx, id); err != nil {
		return Process{}, err
	}
	if err := socketclient.Pause(ctx, 2); err != nil {
		return Process{}, err
	}
	return c.TaskGet(ctx, id)
}

// knownTask is the task of container id, asked for again, a few times,
// after a pause each, while containerd says its status is UNKNOWN (the
// shim's State missed its 2 s, as a busy shim's does): the status it
// then has, or UNKNOWN still.
func (c *Client) knownTask(ctx context.Context, id string) (Process, error) {
	for ask := 0; ; ask++ {
		p, err := c.TaskGet(ctx, id)
		if err != nil || p.Status != TaskUnknown || ask == socketclient.MaxRetries {
			return p, err
		}
		if err := socketclient.Pause(ctx, ask); err != nil {
			return p, err
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
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != Unknown {
		return false
	}
	return strings.Contains(ae.Message, "mkdir ") && strings.HasSuffix(ae.Message, ": file exists") ||
		strings.HasSuffix(ae.Message, "runc create failed: container with given ID already exists") ||
		strings.HasPrefix(ae.Message, "failed to start shim: ") && (strings.Contains(ae.Message, "getwd: no such file or directory") ||
			strings.Contains(ae.Message, "/shim-binary-path: no such file or directory")) ||
		strings.Contains(ae.Message, "unable to retrieve OCI runtime error (open ") && strings.Contains(ae.Message, "/log.json: no such file or directory")
}

// TaskStart starts the created task of container id and returns its pid.
//
// A start whose answer was lost (see lostAnswer) is not failed, nor sent
// again blindly: Tasks/Get says what became of it. A task running, paused
// or stopped started (a stopped one has already exited: TaskWait reads
// its exit); one still created did not, and is started again; one gone
// is an error. One whose status is UNKNOWN (containerd's answer when the
// shim's State misses its 2 s limit, as a shim busy starting the task
// does) may have started: it is asked for again, a few times, and never
// started again while so; if it stays UNKNOWN the start fails, with the
// task as it is: a wait for its exit would never end if it never started,
// so the caller counts it as a run that could not start.
func (c *Client) TaskStart(ctx context.Context, id string) (uint32, error) {
	for try := 0; ; try++ {
		var out startResponse
		tries := &socketclient.Attempts{}
		err := c.call(ctx, tasksStart, &taskRequest{ContainerID: id}, &out, callOptions{tries: tries})
		if err == nil {
			return out.Pid, nil
		}
		lost := lostAnswer(err, tries)
		if !lost && try == 0 || try == socketclient.MaxRetries {
			return 0, fmt.Errorf("starting the task of container %q: %w", id, err)
		}
		// A lost answer, or a retry's failure that may be the lost
		// attempt's start met: the task says.
		p, gerr := c.knownTask(ctx, id)
		if gerr != nil {
			return 0, fmt.Errorf("starting the task of container %q: %w (then asking whether it started: %w)", id, err, gerr)
		}
		if p.Status.started() {
			return p.Pid, nil
		}
		if p.Status == TaskUnknown {
			return 0, fmt.Errorf("starting the task of container %q: %w (then its status stayed UNKNOWN: it is counted as not started)", id, err)
		}
		if p.Status != TaskCreated || !lost {
			return 0, fmt.Errorf("starting the task of container %q: %w (the task is %s)", id, err, p.Status)
		}
		if err := socketclient.Pause(ctx, try); err != nil {
			return 0, fmt.Errorf("starting the task of container %q: %w", id, err)
		}
	}
}

// TaskWait blocks until the task of container id exits, and returns how.
// It answers at once for a task that exited and was not deleted; after
// Tasks/Delete it fails as not found. Only ctx ends it early: call it in
// a goroutine before TaskStart not to miss a quick exit's answer.
func (c *Client) TaskWait(ctx context.Context, id string) (Exit, error) {
	var out waitResponse
	if err := c.call(ctx, tasksWait, &taskRequest{ContainerID: id}, &out, callOptions{long: true}); err != nil {
		return Exit{}, fmt.Errorf("waiting for the task of container %q: %w", id, err)
	}
	return Exit{Status: out.ExitStatus, ExitedAt: out.ExitedAt}, nil
}

// TaskDelete deletes the stopped task of container id and returns how it
// exited.
func (c *Client) TaskDelete(ctx context.Context, id string) (Exit, error) {
	var out deleteTaskResponse
	if err := c.call(ctx, tasksDelete, &taskRequest{ContainerID: id}, &out, callOptions{}); err != nil {
		return Exit{}, fmt.Errorf("deleting the task of container %q: %w", id, err)
	}
	return Exit{Status: out.ExitStatus, ExitedAt: out.ExitedAt}, nil
}

// TaskKill sends sig to the task of container id (with all, to every
// process in it).
func (c *Client) TaskKill(ctx context.Context, id string, sig syscall.Signal, all bool) error {
	req := &killRequest{ContainerID: id, Signal: uint32(sig), All: all}
	if err := c.call(ctx, tasksKill, req, &empty{}, callOptions{}); err != nil {
		return fmt.Errorf("sending %v to the task of container %q: %w", sig, id, err)
	}
	return nil
}

// TaskList returns the namespace's tasks (filter: containerd's syntax;
// "" for all).
func (c *Client) TaskList(ctx context.Context, filter string) ([]Process, error) {
	var out listTasksResponse
	if err := c.call(ctx, tasksList, &listTasksRequest{Filter: filter}, &out, callOptions{}); err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	return out.Tasks, nil
}

// TaskGet returns the task of container id.
func (c *Client) TaskGet(ctx context.Context, id string) (Process, error) {
	var out getTaskResponse
	if err := c.call(ctx, tasksGet, &taskRequest{ContainerID: id}, &out, callOptions{}); err != nil {
		return Process{}, fmt.Errorf("getting the task of container %q: %w", id, err)
	}
	return out.Process, nil
}
