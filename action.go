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
	"github.com/waitdaemon/waitdaemon/inherit"
	"github.com/waitdaemon/waitdaemon/selfid"
)

// maxWaitSeconds bounds WAIT_SECONDS: a longer wait is taken for a typo
// (milliseconds, say).
const maxWaitSeconds = 3600

// defaultWaitSeconds is the wait when WAIT_SECONDS is unset or empty.
const defaultWaitSeconds = 10

// Labels on every container waitdaemon creates.
const (
	labelRole     = "org.waitdaemon.role"      // "user" or "waiter"
	labelAction   = "org.waitdaemon.action"    // the action container's name
	labelActionID = "org.waitdaemon.action-id" // the action container's ID
)

// actionCmd is phase 1, run as the action container. Its settings come
// from the action's environment; the action's command arrives as
// arguments and is the user image's, never parsed here.
type actionCmd struct {
	Image       string   `env:"WAITDAEMON_IMAGE,IMAGE" placeholder:"REF" help:"The image to run after the wait. Required."`
	WaitSeconds string   `env:"WAITDAEMON_WAIT_SECONDS,WAIT_SECONDS" placeholder:"N" help:"Whole seconds to wait after the action exits, 0 to 3600 (default 10)."`
	Container   string   `env:"WAITDAEMON_CONTAINER" placeholder:"ID" help:"This action container's ID or name, when detection cannot find it."`
	Command     []string `arg:"" optional:"" passthrough:"" help:"The action's command: the user image's command."`
}

// settings are the validated inputs of phase 1.
type settings struct {
	image dockerapi.Reference
	wait  int // seconds
}

// inputError is bad input: it names the variable, shows the value and
// says what was expected.
type inputError struct{ msg string }

func (e inputError) Error() string { return e.msg }
func (inputError) ExitCode() int   { return exitInput }

// settings validates the inputs before anything is created.
func (a *actionCmd) settings(env []string) (settings, error) {
	var s settings
	imageVar := inherit.Image.Name(env)
	if strings.TrimSpace(a.Image) == "" {
		return s, inputError{fmt.Sprintf("%s is not set: expected the image to run after the wait, like alpine:3.20", imageVar)}
	}
	ref, err := dockerapi.ParseReference(strings.TrimSpace(a.Image))
	if err != nil {
		return s, inputError{fmt.Sprintf("%s: %v", imageVar, err)}
	}
	s.image = ref
	s.wait, err = parseWaitSeconds(a.WaitSeconds)
	if err != nil {
		return s, inputError{fmt.Sprintf("%s=%q: %v", inherit.WaitSeconds.Name(env), a.WaitSeconds, err)}
	}
	return s, nil
}

// parseWaitSeconds reads a whole number of seconds, 0 to maxWaitSeconds;
// empty means the default.
func parseWaitSeconds(v string) (int, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return defaultWaitSeconds, nil
	}
	expected := fmt.Errorf("expected a whole number of seconds from 0 to %d, like %d", maxWaitSeconds, defaultWaitSeconds)
	for _, r := range v {
		if r < '0' || r > '9' {
			return 0, expected
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n > maxWaitSeconds {
		return 0, expected
	}
	return n, nil
}

// handoff is what phase 1 found and made, for its log line and for the
// clean-up after a failure.
type handoff struct {
	Action  containerRef `json:"action"`
	FoundBy string       `json:"found_by"`
	Image   string       `json:"image"`
	Pulled  bool         `json:"pulled"`
	User    containerRef `json:"user_container"`
	Waiter  containerRef `json:"waiter"`
	Wait    int          `json:"wait_seconds"`
	TookMS  int64        `json:"took_ms"`
}

type containerRef struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// Run is phase 1: reach the engine, find ourselves, validate, make sure
// the image is there, plan and create the user container, start the
// waiter, and exit 0.
func (a *actionCmd) Run(ctx context.Context, g *globals) (err error) {
	began := time.Now()
	s, err := a.settings(os.Environ())
	if err != nil {
		return err
	}
	c := g.client()
	if err := reachEngine(ctx, c); err != nil {
		return err
	}
	self, foundBy, err := findSelf(ctx, c, selfid.Candidates(selfid.Read(a.Container)))
	if err != nil {
		return err
	}
	h := handoff{Action: containerRef{self.ID, strings.TrimPrefix(self.Name, "/")}, FoundBy: string(foundBy), Image: s.image.String(), Wait: s.wait}
	defer func() {
		if err != nil {
			h.removeCreated(c, g)
		}
	}()

	h.User.Name, h.Waiter.Name = names(h.Action.Name)

	// The waiter's start is the slowest step; it needs only the user
	// container's name, so it runs while the user container is prepared.
	waiterErr := make(chan error, 1)
	go func() { waiterErr <- h.startWaiter(ctx, c, self, g.verbose) }()
	err = h.createUser(ctx, c, s, self, g)
	err = errors.Join(err, <-waiterErr)
	if err != nil {
		return err
	}
	h.TookMS = time.Since(began).Milliseconds()
	logEvent(g.stdout, "handed off", h)
	return nil
}

// reachEngine waits, within the client's bound, for the engine to answer.
func reachEngine(ctx context.Context, c *dockerapi.Client) error {
	_, err := c.APIVersion(ctx)
	var te *dockerapi.TransportError
	if errors.As(err, &te) {
		return fmt.Errorf("cannot reach the Docker engine on %s (%v): mount its socket into the action with\n  volumes:\n    - /var/run/docker.sock:/var/run/docker.sock", c.SocketPath(), te.Err)
	}
	return err
}

// findSelf confirms the candidates in order and returns the first that is
// a running container.
func findSelf(ctx context.Context, c *dockerapi.Client, candidates []selfid.Candidate) (dockerapi.Container, selfid.Method, error) {
	var tried []string
	for _, cand := range candidates {
		ctr, err := c.ContainerInspect(ctx, cand.ID)
		switch {
		case errors.Is(err, dockerapi.ErrNotFound):
		case err != nil:
			return dockerapi.Container{}, "", fmt.Errorf("finding this action's container: %w", err)
		case ctr.State.Running:
			return ctr, cand.Method, nil
		}
		tried = append(tried, fmt.Sprintf("%s %s", cand.Method, cand.ID))
	}
	return dockerapi.Container{}, "", inputError{fmt.Sprintf("cannot find this action's own container (tried: %s): set WAITDAEMON_CONTAINER to its name or ID", strings.Join(tried, ", "))}
}

// ensureImage pulls ref when the engine does not have it.
func ensureImage(ctx context.Context, c *dockerapi.Client, ref dockerapi.Reference, g *globals) (pulled bool, err error) {
	_, err = c.ImageInspect(ctx, ref.String())
	if !errors.Is(err, dockerapi.ErrNotFound) {
		return false, err
	}
	logEvent(g.stdout, "pulling", map[string]string{"image": ref.String()})
	if err := c.ImagePull(ctx, ref, nil, nil); err != nil {
		return false, err
	}
	return true, nil
}

// names derives the containers' names from the action container's, so
// that a retried create meets its own work.
func names(action string) (user, waiter string) {
	return action + "-waitdaemon-user", action + "-waitdaemon-waiter"
}

func (h *handoff) labels(role string) map[string]string {
	return map[string]string{labelRole: role, labelAction: h.Action.Name, labelActionID: h.Action.ID}
}

// createUser makes sure the image is there, plans the user container from
// this one, and creates it, not started: the operator's settings fail
// now, while the worker still listens.
func (h *handoff) createUser(ctx context.Context, c *dockerapi.Client, s settings, self dockerapi.Container, g *globals) (err error) {
	if h.Pulled, err = ensureImage(ctx, c, s.image, g); err != nil {
		return err
	}
	own, err := c.ImageInspect(ctx, self.Image)
	if err != nil {
		return fmt.Errorf("reading this action's own image: %w", err)
	}
	version, err := c.APIVersion(ctx)
	if err != nil {
		return err
	}
	plan := inherit.Plan(inherit.Input{Container: self, Image: *own.Config, UserImage: s.image.String(), APIVersion: version})
	body := plan.Create
	if body.Labels == nil {
		body.Labels = map[string]string{}
	}
	for k, v := range h.labels("user") {
		body.Labels[k] = v
	}
	created, err := c.ContainerCreate(ctx, h.User.Name, body)
	if err != nil {
		return err
	}
	h.User.ID = created.ID
	for network, ep := range plan.Connect {
		if err := c.NetworkConnect(ctx, network, created.ID, ep); err != nil {
			return err
		}
	}
	return nil
}

// startWaiter creates and starts phase 2 from our own image, with least
// privilege: not privileged, its own pid namespace, only the socket bound
// in. It shares the host's network rather than get one of its own: it
// needs none, and a new network namespace is most of a container start.
func (h *handoff) startWaiter(ctx context.Context, c *dockerapi.Client, self dockerapi.Container, verbose bool) error {
	env := []string{}
	if verbose {
		env = append(env, "WAITDAEMON_VERBOSE=true")
	}
	body := dockerapi.CreateRequest{
		Config: dockerapi.Config{
			Image:      self.Image,
			Entrypoint: []string{"/waitdaemon"},
			Cmd: []string{"waiter",
				"--user-container=" + h.User.Name,
				"--action-container=" + h.Action.ID,
				"--wait-seconds=" + strconv.Itoa(h.Wait)},
			Env:    env,
			Labels: h.labels("waiter"),
		},
		HostConfig: dockerapi.HostConfig{
			Binds:       []string{socketSource(self, c.SocketPath()) + ":" + dockerapi.DefaultSocket},
			NetworkMode: "host",
			AutoRemove:  true,
			LogConfig:   self.HostConfig.LogConfig,
		},
	}
	created, err := c.ContainerCreate(ctx, h.Waiter.Name, body)
	if err != nil {
		return err
	}
	h.Waiter.ID = created.ID
	return c.ContainerStart(ctx, created.ID)
}

// socketSource is the host path of the engine socket bound into the
// action container at socket; the default path when no bind says.
func socketSource(self dockerapi.Container, socket string) string {
	for _, b := range self.HostConfig.Binds {
		parts := strings.Split(b, ":")
		if len(parts) >= 2 && parts[1] == socket {
			return parts[0]
		}
	}
	for _, m := range self.HostConfig.Mounts {
		if m.Type == "bind" && m.Target == socket {
			return m.Source
		}
	}
	return dockerapi.DefaultSocket
}

// removeCreated undoes a failed handoff, whatever ctx has become.
func (h *handoff) removeCreated(c *dockerapi.Client, g *globals) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, id := range []string{h.Waiter.ID, h.User.ID} {
		if id == "" {
			continue
		}
		if err := c.ContainerRemove(ctx, id, dockerapi.RemoveOptions{Force: true, Volumes: true}); err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
			fmt.Fprintf(g.stderr, "waitdaemon: cleaning up: %v\n", err)
		}
	}
}
