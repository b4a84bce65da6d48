package containerdapi

import (
	"context"
	"fmt"
	"syscall"
	"time"
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
// missing bind source, a bad spec) surface here. It is sent once: a lost
// answer is the caller's to settle (Tasks/Get says whether the task was
// created).
func (c *Client) TaskCreate(ctx context.Context, id string, spec TaskSpec) (uint32, error) {
	req := &createTaskRequest{ContainerID: id, Rootfs: spec.Rootfs, Stdin: spec.Stdin, Stdout: spec.Stdout, Stderr: spec.Stderr, Terminal: spec.Terminal}
	var out createTaskResponse
	if err := c.call(ctx, tasksCreate, req, &out, callOptions{}); err != nil {
		return 0, fmt.Errorf("creating the task of container %q: %w", id, err)
	}
	return out.Pid, nil
}

// TaskStart starts the created task of container id and returns its pid.
// It is sent once: a lost answer is the caller's to settle (Tasks/Get
// says whether the task started).
func (c *Client) TaskStart(ctx context.Context, id string) (uint32, error) {
	var out startResponse
	if err := c.call(ctx, tasksStart, &taskRequest{ContainerID: id}, &out, callOptions{}); err != nil {
		return 0, fmt.Errorf("starting the task of container %q: %w", id, err)
	}
	return out.Pid, nil
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
