package tinkagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/imageref"
)

// Docker is tink-agent's Docker runtime (HookOS).
type Docker struct {
	C *dockerapi.Client
	// Output receives the actions' output as it comes, as the agent logs
	// what it reads of its attach; nil discards it.
	Output io.Writer
	// Unprivileged leaves out Privileged, which the agent always sets:
	// for an engine that cannot start a privileged container (Docker
	// 20.10 on the development machines). The action gets CAP_SYS_BOOT
	// alone instead, which a run that must take the machine down needs.
	Unprivileged bool
}

// DockerContainer is an action's container, made by Create.
type DockerContainer struct {
	ID, Name string
	// Request is the create request the agent sent.
	Request dockerapi.CreateRequest

	c       *dockerapi.Client
	output  *relay
	release Release
}

// Run runs a as the agent's Execute does, under a's timeout: the image
// pulled if the engine lacks it, the container created, started, its
// output followed, its exit waited for, or at the timeout stopped (SIGTERM,
// SIGKILL 5 s later); then the container force-removed, whatever its
// end.
func (d *Docker) Run(ctx context.Context, a Action) (Result, error) {
	return run(ctx, a, d.Create)
}

// Create pulls a's image if the engine lacks it (five tries), and creates
// its container as a's release does (createRequest): named
// tinkerbell_<name>_<action ID> (tink-worker: action_<name>), the env,
// the command as Cmd after the image's entrypoint, the volumes as binds,
// privileged, and the pid and network modes.
func (d *Docker) Create(ctx context.Context, a Action) (*DockerContainer, error) {
	if _, err := d.C.ImageInspect(ctx, a.Image); err != nil {
		ref, perr := imageref.Parse(a.Image)
		if perr != nil {
			return nil, fmt.Errorf("action %s: image %q: %w", a.Name, a.Image, perr)
		}
		delay := 100 * time.Millisecond
		for try := 1; ; try++ {
			err = d.C.ImagePull(ctx, ref, nil, nil)
			if err == nil || try == 5 || ctx.Err() != nil {
				break
			}
			time.Sleep(delay)
			delay *= 2
		}
		if err != nil {
			return nil, fmt.Errorf("action %s: pulling %s: %w", a.Name, a.Image, err)
		}
	}
	name, req := d.createRequest(a)
	created, err := d.C.ContainerCreate(ctx, name, req)
	if err != nil {
		return nil, fmt.Errorf("creating action %s: %w", name, err)
	}
	return &DockerContainer{ID: created.ID, Name: name, Request: req, c: d.C, output: &relay{to: d.Output}, release: a.Release}, nil
}

// createRequest is the name and body of the create a's worker sends.
func (d *Docker) createRequest(a Action) (string, dockerapi.CreateRequest) {
	req := dockerapi.CreateRequest{
		// The action's args as the cmd, after the image's entrypoint.
		Config: dockerapi.Config{Image: a.Image, Env: a.Env, Cmd: a.Args},
		HostConfig: dockerapi.HostConfig{
			Binds: append([]string{}, a.Volumes...),
			// Privileged, always (tink-worker: HookOS runs it so).
			Privileged: !d.Unprivileged,
			// The pid mode: the top-level pid, or from v0.25.0
			// namespaces.pid over it (ParseTemplate). The network mode
			// from v0.25.0's namespaces.network (v0.23.0 and v0.24.0's
			// runtime sets none; their a.Network is always empty).
			PidMode: a.PID, NetworkMode: a.Network,
		},
	}
	if d.Unprivileged {
		// The reboot's capability alone, in Privileged's place.
		req.HostConfig.CapAdd = []string{"SYS_BOOT"}
	}
	if a.Release == TinkWorker {
		// tink-worker (CreateContainer): a terminal and both streams
		// attached, the workflow's directory bound first
		// (/worker/<workflow ID>:/workflow), no network mode, and no
		// entrypoint of its own.
		req.Config.Tty, req.Config.AttachStdout, req.Config.AttachStderr = true, true, true
		req.HostConfig.Binds = append([]string{"/worker/" + a.ID + ":/workflow"}, a.Volumes...)
		req.HostConfig.NetworkMode = ""
		return a.ContainerName(), req
	}
	// tink-agent: the action's cmd (file and NATS transports only) as the
	// entrypoint.
	if a.Cmd != "" {
		req.Config.Entrypoint = []string{a.Cmd}
	}
	return a.ContainerName(), req
}

// Start starts the container, and returns at once.
func (c *DockerContainer) Start(ctx context.Context) error {
	if err := c.c.ContainerStart(ctx, c.ID); err != nil {
		return fmt.Errorf("starting action %s: %w", c.Name, err)
	}
	return nil
}

// Run waits for the container's next exit, starts it, follows its output,
// and returns its exit; at ctx's deadline it stops it (SIGTERM, then
// SIGKILL 5 s later) and returns that exit.
func (c *DockerContainer) Run(ctx context.Context) (Result, error) {
	res := Result{ContainerID: c.ID, Name: c.Name}
	type waited struct {
		code int
		err  error
	}
	done := make(chan waited, 1)
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		w, err := c.c.ContainerWait(wctx, c.ID, dockerapi.WaitNextExit)
		done <- waited{w.StatusCode, err}
	}()
	time.Sleep(50 * time.Millisecond) // the next-exit wait is in place before the start, as the agent's
	if err := c.Start(ctx); err != nil {
		// Nothing ran: no exit code.
		res.TimedOut, res.ExitCode = errors.Is(ctx.Err(), context.DeadlineExceeded), -1
		return res, err
	}
	// The output followed from the start, as the agent's attach.
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		_ = c.c.ContainerLogs(wctx, c.ID, dockerapi.LogsOptions{Follow: true}, c.output, c.output)
	}()
	var w waited
	select {
	case w = <-done:
	case <-ctx.Done():
		// At the timeout: stopped, with 5 s before the SIGKILL.
		res.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		if _, err := c.c.Raw(wctx, "POST", "/containers/"+url.PathEscape(c.ID)+"/stop?t=5", nil); err != nil {
			return res, fmt.Errorf("stopping action %s at its timeout: %w", c.Name, err)
		}
		w = <-done
	}
	if w.err != nil {
		return res, fmt.Errorf("waiting for action %s: %w", c.Name, w.err)
	}
	select {
	case <-followed:
	case <-time.After(10 * time.Second):
	}
	res.ExitCode, res.Output = w.code, c.output.String()
	if ctr, err := c.c.ContainerInspect(wctx, c.ID); err == nil {
		res.ExitedAt, _ = time.Parse(time.RFC3339Nano, ctr.State.FinishedAt)
	}
	return res, nil
}

// Output is what the action has written so far.
func (c *DockerContainer) Output() string { return c.output.String() }

// Finish force-removes the container, whatever its end, before the
// report: tink-agent's deferred ContainerRemove (force, 10 s), every
// release; tink-worker's RemoveContainer (force, with its volumes).
func (c *DockerContainer) Finish(ctx context.Context, _ Result) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.c.ContainerRemove(ctx, c.ID, c.removeOptions()); err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
		return fmt.Errorf("removing action %s: %w", c.Name, err)
	}
	return nil
}

// removeOptions: force (tink-agent); force with the volumes (tink-worker).
func (c *DockerContainer) removeOptions() dockerapi.RemoveOptions {
	return dockerapi.RemoveOptions{Force: true, Volumes: c.release == TinkWorker}
}
