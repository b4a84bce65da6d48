// Package tinkagent runs actions the way tink-agent (tinkerbell/tinkerbell,
// tink/agent) does, on its two runtimes: containerd (CaptainOS) and Docker
// (HookOS); or, on Docker, as tink-worker (tinkerbell/tink) does. It
// copies the release an action names (Release: tink-worker, v0.23, v0.24,
// v0.25, HEAD): how its server reads the template, and how its worker
// makes, pulls and cleans up the container. It is a test rig, for the end-to-end tests, the bench, the
// containerd demo and the VM suite's machines (tools/tinkagent); no part
// of waitdaemon's binary.
//
// Run is the whole of one action, as the agent's Execute: pull, create,
// start, wait (killed at the timeout), relay the output, clean up. The
// lower-level pieces (Create, then Start or Run, then Finish) let a test
// watch what the agent made in between.
package tinkagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"regexp"
	"time"
)

// Action is one action as tink-agent receives it from the server.
type Action struct {
	// Release is the Tinkerbell whose worker runs the action (zero:
	// Head), as ParseTemplate read it.
	Release Release
	// ID is the action's ID in the workflow: the container's name ends
	// with it.
	ID   string
	Name string
	// Image as the template names it (containerd qualifies a short name
	// to docker.io, as the agent does).
	Image string
	// Cmd replaces the image's entrypoint: the agent's Cmd, which only
	// its file and NATS transports set (a template's command is Args).
	Cmd string
	// Args are the template's command: the image's entrypoint gets them
	// as its arguments, in place of the image's cmd.
	Args []string
	// Env are KEY=VALUE, in the order the server sends them.
	Env []string
	// Volumes are host:container[:options].
	Volumes []string
	// PID and Network are the action's namespaces.pid (or its top-level
	// pid) and namespaces.network: "host", or "" for the runtime's own.
	PID, Network string
	// Timeout is the action's timeout: the agent kills the action when
	// it passes, and a zero timeout has passed before anything starts.
	Timeout time.Duration
}

// Result is how an action ended.
type Result struct {
	ContainerID string
	Name        string // the container's
	ExitCode    int
	ExitedAt    time.Time
	// TimedOut: the action's timeout passed, and the agent killed it. One
	// killed because the agent was stopped (its context cancelled) did not
	// time out; its exit code says it failed.
	TimedOut bool
	// KilledAt, when it TimedOut, is when the timeout passed: the agent's
	// kill, or, before the action ran, its giving up.
	KilledAt time.Time
	// Output is what the action wrote on stdout and stderr, as the agent
	// read it.
	Output string
	// RemovedAt is when the worker's clean-up after the exit ended: what
	// it removes before it reports (Finish) is gone, and its report would
	// go out now.
	RemovedAt time.Time
}

// Succeeded reports whether the agent counts r a success.
func (r Result) Succeeded() bool { return !r.TimedOut && r.ExitCode == 0 }

var invalidName = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// ContainerName is a's release's name for a's container (see
// Release.containerName).
func (a Action) ContainerName() string { return a.Release.containerName(a) }

// NewID is a random 64-hex container ID, as the agent's (and nerdctl's).
func NewID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// container is an action's container on either runtime, once created.
type container interface {
	Run(ctx context.Context) (Result, error)
	Finish(ctx context.Context, res Result) error
}

// run is the agent's Execute, on either runtime: under the action's
// timeout, counted from before the pull, create, run, then finish.
func run[C container](ctx context.Context, a Action, create func(context.Context, Action) (C, error)) (Result, error) {
	// The agent's deadline: the action's timeout, from before the pull.
	ctx, cancel := context.WithTimeout(ctx, a.Timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	ctr, err := create(ctx, a)
	if err != nil {
		// Nothing ran: no exit code.
		res := Result{Name: a.ContainerName(), TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded), ExitCode: -1}
		if res.TimedOut {
			res.KilledAt = deadline
		}
		return res, err
	}
	res, err := ctr.Run(ctx)
	if res.TimedOut {
		res.KilledAt = deadline
	}
	// Every worker cleans up before it reports: tink-worker's deferred
	// RemoveContainer and tink-agent's deferred removals all run before
	// Execute returns to the report.
	ferr := ctr.Finish(context.WithoutCancel(ctx), res)
	res.RemovedAt = time.Now()
	return res, errors.Join(err, ferr)
}
