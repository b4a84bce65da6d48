// Package docker is the engine contract (package engine) carried out on a
// Docker engine, and on Podman's Docker-compatible API, through the
// dockerapi client. The user container is planned by package inherit.
// What only these engines need lives here: network connects below API
// 1.44, Podman's quirks, renaming to keep an earlier run's failures, the
// socket directory bound into the waiter, and the engine's log stream.
package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/inherit"
	"github.com/waitdaemon/waitdaemon/selfid"
)

// Engine is a Docker engine, or Podman's Docker-compatible API.
type Engine struct {
	C *dockerapi.Client
	// Log, when set, hears what the engine does on its own, such as
	// asking again after losing the engine.
	Log io.Writer
}

// planned is the create request of a planned container, with what must
// follow the create: below API 1.44 a container is created on one network
// and connected to the others after.
type planned struct {
	dockerapi.CreateRequest
	connect map[string]dockerapi.EndpointSettings
}

// self is what the engine keeps of the action container.
type self struct {
	ctr dockerapi.Container
	// image is the config of the action's image, whose defaults the user
	// container does not inherit; read once.
	image *dockerapi.Config
}

func (e *Engine) String() string { return "the Docker engine on " + e.C.SocketPath() }

// Reach waits, within the client's bound, for the engine to answer. A
// socket that is missing or refuses is one not mounted; one that answers
// otherwise is not a Docker engine.
func (e *Engine) Reach(ctx context.Context) error {
	_, err := e.C.APIVersion(ctx)
	var te *dockerapi.TransportError
	var ae *dockerapi.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach the Docker engine on %s (%w): mount its socket into the action with\n  volumes:\n    - /var/run/docker.sock:/var/run/docker.sock", e.C.SocketPath(), errors.Unwrap(err))
	case errors.As(err, &te), errors.As(err, &ae):
		return fmt.Errorf("%s does not answer like a Docker engine: %w", e.C.SocketPath(), err)
	}
	return err
}

// Self confirms the candidates for our own ID in order, and takes the
// first that is a running container.
func (e *Engine) Self(ctx context.Context, override string) (engine.Self, error) {
	var tried []string
	for _, cand := range selfid.Candidates(selfid.Read(override)) {
		ctr, err := e.C.ContainerInspect(ctx, cand.ID)
		switch {
		case errors.Is(err, dockerapi.ErrNotFound):
		case err != nil:
			return engine.Self{}, fmt.Errorf("finding this action's container: %w", err)
		case ctr.State.Running:
			return toSelf(ctr, string(cand.Method)), nil
		}
		tried = append(tried, fmt.Sprintf("%s %s", cand.Method, cand.ID))
	}
	return engine.Self{}, notFound(tried)
}

// notFound is the bad input of a container that cannot find itself.
func notFound(tried []string) error {
	return engine.InputError(fmt.Sprintf("cannot find this action's own container (tried: %s): set WAITDAEMON_CONTAINER to its name or ID", strings.Join(tried, ", ")))
}

// Inspect reads any container as the action.
func (e *Engine) Inspect(ctx context.Context, container string) (engine.Self, error) {
	ctr, err := e.C.ContainerInspect(ctx, container)
	if err != nil {
		return engine.Self{}, err
	}
	return toSelf(ctr, "plan --container"), nil
}

func toSelf(ctr dockerapi.Container, foundBy string) engine.Self {
	return engine.Self{
		ID: ctr.ID, Name: strings.TrimPrefix(ctr.Name, "/"), FoundBy: foundBy,
		Env: ctr.Config.Env, Detail: &self{ctr: ctr},
	}
}

// List lists the containers labelled label=value, whether each ran, and
// whether it runs.
func (e *Engine) List(ctx context.Context, label, value string) ([]engine.Container, error) {
	list, err := e.C.ContainerList(ctx, label+"="+value)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Container, 0, len(list))
	for _, l := range list {
		name := l.ID
		if len(l.Names) > 0 {
			name = strings.TrimPrefix(l.Names[0], "/")
		}
		running := l.State == "running" || l.State == "paused" || l.State == "restarting"
		out = append(out, engine.Container{ID: l.ID, Name: name, Labels: l.Labels, Ran: l.State != "created", Running: running, State: l.State})
	}
	return out, nil
}

// Keep renames the container, so that this run can use its name.
func (e *Engine) Keep(ctx context.Context, c engine.Container, name string) (string, error) {
	if err := e.C.ContainerRename(ctx, c.ID, name); err != nil {
		return "", err
	}
	return name, nil
}

// Remove force-removes a container with its anonymous volumes.
func (e *Engine) Remove(ctx context.Context, id string) error {
	err := e.C.ContainerRemove(ctx, id, dockerapi.RemoveOptions{Force: true, Volumes: true})
	if errors.Is(err, dockerapi.ErrNotFound) {
		return nil
	}
	return err
}

// HasImage looks the image up.
func (e *Engine) HasImage(ctx context.Context, ref imageref.Ref) (bool, error) {
	_, err := e.C.ImageInspect(ctx, ref.String())
	if errors.Is(err, dockerapi.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Pull pulls the image, adding up the layers' progress.
func (e *Engine) Pull(ctx context.Context, ref imageref.Ref, auth *engine.Auth, progress func(done, total int64)) error {
	layers := map[string][2]int64{} // id: done, total
	return e.C.ImagePull(ctx, ref, authConfig(auth), func(m dockerapi.PullMessage) {
		if m.ID != "" && m.ProgressDetail.Total > 0 {
			layers[m.ID] = [2]int64{m.ProgressDetail.Current, m.ProgressDetail.Total}
		}
		var done, total int64
		for _, l := range layers {
			done, total = done+l[0], total+l[1]
		}
		progress(done, total)
	})
}

// authConfig is a credential as the engine takes it: Docker Hub's under
// its historical server address.
func authConfig(a *engine.Auth) *dockerapi.AuthConfig {
	if a == nil {
		return nil
	}
	server := a.Registry
	if server == imageref.DockerHub {
		server = "https://index.docker.io/v1/"
	}
	return &dockerapi.AuthConfig{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, ServerAddress: server}
}

// Plan plans a container like the action for another image, with
// inherit's rules.
func (e *Engine) Plan(ctx context.Context, s engine.Self, want engine.Want) (engine.Spec, error) {
	d := s.Detail.(*self)
	if d.image == nil {
		own, err := e.C.ImageInspect(ctx, d.ctr.Image)
		if err != nil {
			return engine.Spec{}, fmt.Errorf("reading this action's own image: %w", err)
		}
		d.image = own.Config
	}
	version, err := e.C.APIVersion(ctx)
	if err != nil {
		return engine.Spec{}, err
	}
	out := inherit.Plan(inherit.Input{Container: d.ctr, Image: *d.image, UserImage: want.Image.String(), APIVersion: version, Withhold: want.Withhold})
	create := out.Create
	switch {
	case want.Command != nil:
		create.Cmd, create.Entrypoint = want.Command, nil
	case want.ImageDefault:
		// Null, not []: the engine applies the image's own.
		create.Cmd, create.Entrypoint = nil, nil
	}
	create.Labels = merge(create.Labels, want.Labels)
	return engine.Spec{Name: want.Name, Create: &planned{CreateRequest: create, connect: out.Connect}}, nil
}

func merge(base, extra map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(extra))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// Create creates the container and connects it to the networks that
// could not be given at the create.
func (e *Engine) Create(ctx context.Context, spec engine.Spec) (string, error) {
	p := spec.Create.(*planned)
	created, err := e.C.ContainerCreate(ctx, spec.Name, p.CreateRequest)
	if err != nil {
		return "", err
	}
	for network, ep := range p.connect {
		if err := e.C.NetworkConnect(ctx, network, created.ID, ep); err != nil {
			return created.ID, err
		}
	}
	return created.ID, nil
}

// Start starts a created container.
func (e *Engine) Start(ctx context.Context, id string) error { return e.C.ContainerStart(ctx, id) }

// Output follows the container's log stream.
func (e *Engine) Output(ctx context.Context, id string, w io.Writer) error {
	return e.C.ContainerLogs(ctx, id, dockerapi.LogsOptions{Follow: true}, w, io.Discard)
}

// Follow waits for the run, then reads the tail of its output. (A
// container's first output can come before the StartedAt the engine
// records, so a re-run's tail starts at the previous run's end.)
func (e *Engine) Follow(ctx context.Context, id string, sent time.Time, tail int, since string) (engine.Run, error) {
	ctr, code, err := waitRun(ctx, e.C, id, sent)
	if err != nil {
		return engine.Run{}, err
	}
	r := engine.Run{
		ExitCode: code, Image: ctr.Config.Image, Command: append([]string{ctr.Path}, ctr.Args...),
		StartedAt: ctr.State.StartedAt, FinishedAt: ctr.State.FinishedAt, Output: []string{},
	}
	if tail > 0 {
		var out bytes.Buffer
		opts := dockerapi.LogsOptions{Tail: tail, TTY: ctr.Config.Tty, Since: since}
		if err := e.C.ContainerLogs(ctx, id, opts, &out, &out); err != nil {
			return r, err
		}
		r.Output = Tail(out.String(), tail)
	}
	return r, nil
}

// Tail returns the last n lines of s as a terminal shows them: a
// carriage return inside a line (a progress bar's, or a TTY's line end
// whose newline Podman's log lost) starts it over, so what follows the
// last one is the line.
func Tail(s string, n int) []string {
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
