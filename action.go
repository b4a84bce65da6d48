package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/inherit"
	"github.com/waitdaemon/waitdaemon/selfid"
)

// Labels on every container waitdaemon creates.
const (
	labelRole     = "org.waitdaemon.role"      // "user" or "waiter"
	labelAction   = "org.waitdaemon.action"    // the action container's name
	labelActionID = "org.waitdaemon.action-id" // the action container's ID
)

// Roles, in the role label.
const (
	roleUser     = "user"
	roleFallback = "fallback"
	roleWaiter   = "waiter"
)

// resultDir is where the waiter sees the result file's host directory.
const resultDir = "/run/waitdaemon-result"

// engineDir is where the waiter finds the engine socket's directory.
const engineDir = "/run/waitdaemon-engine"

// handoff is phase 1's plan and what it made of it: it is the dry run's
// output, the log line, and the list of what to remove after a failure.
type handoff struct {
	Action   containerRef `json:"action"`
	FoundBy  string       `json:"found_by"`
	Pull     []pullPlan   `json:"pull"`
	Wait     int          `json:"wait_seconds"`
	User     creation     `json:"user_container"`
	Fallback *creation    `json:"fallback_container,omitempty"`
	Waiter   creation     `json:"waiter"`
	TookMS   int64        `json:"took_ms,omitempty"`

	connect map[string]dockerapi.EndpointSettings // below API 1.44
}

// creation is one container phase 1 creates: its create body until it is
// made, its ID after.
type creation struct {
	Name   string                   `json:"name"`
	ID     string                   `json:"id,omitempty"`
	Create *dockerapi.CreateRequest `json:"create,omitempty"`
}

type containerRef struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// Run is phase 1: validate, reach the engine, find ourselves, plan, clear
// an earlier run's leftovers, then create the user container (pulling
// its image if needed) while the waiter starts, and exit 0.
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
	h := newHandoff(self, string(foundBy), s, c.SocketPath(), g.verbose)
	if s.dryRun {
		if err := h.plan(ctx, c, s, self); err != nil {
			return err
		}
		return printPlan(g.stdout, h)
	}
	if err := clearLeftovers(ctx, c, h.Action.Name, g); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			h.removeCreated(c, g)
		}
	}()
	// The waiter's start is the slowest step; it needs only the names of
	// what it will start, so the user container is made while it starts.
	// The waiter's create goes first, alone: two creates at once slow
	// each other, and this one is on the way to the start.
	waiterMade := make(chan struct{})
	waiterErr := make(chan error, 1)
	go func() { waiterErr <- h.startWaiter(ctx, c, waiterMade) }()
	<-waiterMade
	if h.Waiter.ID == "" { // the create failed
		return <-waiterErr
	}
	err = h.createUser(ctx, c, s, self, g)
	if err = errors.Join(err, <-waiterErr); err != nil {
		return err
	}
	if s.resultFile != "" {
		if err := h.confirmResultFile(ctx, c, s.resultFile); err != nil {
			return err
		}
	}
	h.TookMS = time.Since(began).Milliseconds()
	h.User.Create, h.Waiter.Create = nil, nil
	if h.Fallback != nil {
		h.Fallback.Create = nil
	}
	logEvent(g.stdout, "handed off", h)
	return nil
}

// newHandoff names what phase 1 will make and plans the waiter.
func newHandoff(self dockerapi.Container, foundBy string, s settings, socket string, verbose bool) *handoff {
	action := strings.TrimPrefix(self.Name, "/")
	h := &handoff{
		Action:  containerRef{self.ID, action},
		FoundBy: foundBy,
		Wait:    s.wait,
		User:    creation{Name: action + "-waitdaemon-user"},
		Waiter:  creation{Name: action + "-waitdaemon-waiter"},
	}
	if s.fallbackImage != nil {
		h.Fallback = &creation{Name: action + "-waitdaemon-fallback"}
	}
	h.Waiter.Create = h.waiterBody(self, s, socket, verbose)
	return h
}

func (h *handoff) labels(role string) map[string]string {
	return map[string]string{labelRole: role, labelAction: h.Action.Name, labelActionID: h.Action.ID}
}

// plan decides the pulls and plans the user and fallback containers from
// this one. It creates nothing.
func (h *handoff) plan(ctx context.Context, c *dockerapi.Client, s settings, self dockerapi.Container) error {
	images := []settings{s}
	if s.fallbackImage != nil && *s.fallbackImage != s.image {
		fs := s
		fs.image = *s.fallbackImage
		images = append(images, fs)
	}
	h.Pull = nil
	for _, is := range images {
		p, err := decidePull(ctx, c, is)
		if err != nil {
			return err
		}
		h.Pull = append(h.Pull, p)
	}
	own, err := c.ImageInspect(ctx, self.Image)
	if err != nil {
		return fmt.Errorf("reading this action's own image: %w", err)
	}
	version, err := c.APIVersion(ctx)
	if err != nil {
		return err
	}
	// The registry config stays with the action: its credentials were
	// for this pull, not for the user container.
	out := inherit.Plan(inherit.Input{Container: self, Image: *own.Config, UserImage: s.image.String(), APIVersion: version, Withhold: []string{s.registryConfig}})
	h.connect = out.Connect
	user := out.Create
	user.Labels = withLabels(user.Labels, h.labels(roleUser))
	h.User.Create = &user
	if h.Fallback != nil {
		// The fallback has the user container's settings, its own image
		// and command, and that image's entrypoint.
		fb := out.Create
		fb.Image, fb.Cmd, fb.Entrypoint = s.fallbackImage.String(), s.fallbackCommand, nil
		fb.Labels = withLabels(out.Create.Labels, h.labels(roleFallback))
		h.Fallback.Create = &fb
	}
	return nil
}

func withLabels(base, extra map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(extra))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// printPlan is the dry run's output: the plan as indented JSON, with the
// values of secret-looking variables redacted as in the trace.
func printPlan(w io.Writer, h *handoff) error {
	data, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", dockerapi.Redact(data))
	return err
}

// clearLeftovers makes room for this run of the action: an earlier run's
// waiter is removed (there are never two), its user or fallback container
// that never started is removed, and one that ran is kept under a name of
// its own.
func clearLeftovers(ctx context.Context, c *dockerapi.Client, action string, g *globals) error {
	earlier, err := c.ContainerList(ctx, labelAction+"="+action)
	if err != nil {
		return err
	}
	for _, e := range earlier {
		name := strings.TrimPrefix(firstOr(e.Names, e.ID), "/")
		if e.Labels[labelRole] == roleWaiter || e.State == "created" {
			err = c.ContainerRemove(ctx, e.ID, dockerapi.RemoveOptions{Force: true, Volumes: true})
			if err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
				return fmt.Errorf("removing an earlier run's %s: %w", name, err)
			}
			logEvent(g.stdout, "removed an earlier run's container", map[string]string{"name": name, "role": e.Labels[labelRole], "state": e.State})
			continue
		}
		kept := name + "-" + shortID(e.Labels[labelActionID])
		if err := c.ContainerRename(ctx, e.ID, kept); err != nil {
			return fmt.Errorf("keeping an earlier run's %s: %w", name, err)
		}
		logEvent(g.stdout, "kept an earlier run's container under a new name", map[string]string{"name": kept, "role": e.Labels[labelRole], "state": e.State})
	}
	return nil
}

func firstOr(names []string, def string) string {
	if len(names) > 0 {
		return names[0]
	}
	return def
}

func shortID(id string) string { return id[:min(12, len(id))] }

// reachEngine waits, within the client's bound, for the engine to answer.
// A socket that is missing or refuses is one not mounted; one that
// answers otherwise is not a Docker engine.
func reachEngine(ctx context.Context, c *dockerapi.Client) error {
	_, err := c.APIVersion(ctx)
	var te *dockerapi.TransportError
	var ae *dockerapi.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach the Docker engine on %s (%w): mount its socket into the action with\n  volumes:\n    - /var/run/docker.sock:/var/run/docker.sock", c.SocketPath(), errors.Unwrap(err))
	case errors.As(err, &te), errors.As(err, &ae):
		return fmt.Errorf("%s does not answer like a Docker engine: %w", c.SocketPath(), err)
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

// createUser pulls what the plan says to, then creates the user container
// (and the fallback), not started: the operator's settings fail now,
// while the worker still listens.
func (h *handoff) createUser(ctx context.Context, c *dockerapi.Client, s settings, self dockerapi.Container, g *globals) error {
	if err := h.plan(ctx, c, s, self); err != nil {
		return err
	}
	for _, p := range h.Pull {
		if p.Decision != "pull" {
			continue
		}
		ps := s
		ps.image, _ = dockerapi.ParseReference(p.Image)
		if err := pull(ctx, c, ps, g.stdout); err != nil {
			return err
		}
	}
	for _, cr := range []*creation{&h.User, h.Fallback} {
		if cr == nil {
			continue
		}
		created, err := c.ContainerCreate(ctx, cr.Name, *cr.Create)
		if err != nil {
			return err
		}
		cr.ID = created.ID
		for network, ep := range h.connect {
			if err := c.NetworkConnect(ctx, network, created.ID, ep); err != nil {
				return err
			}
		}
	}
	return nil
}

// waiterBody plans phase 2 from our own image, with least privilege: not
// privileged, its own pid namespace, only the socket (and the result
// file's directory) bound in. It shares the host's network rather than
// get one of its own: it needs none, and a new network namespace is most
// of a container start.
func (h *handoff) waiterBody(self dockerapi.Container, s settings, socket string, verbose bool) *dockerapi.CreateRequest {
	cmd := []string{"waiter",
		"--user-container=" + h.User.Name,
		"--action-container=" + h.Action.ID,
		"--wait-seconds=" + strconv.Itoa(s.wait),
		"--retries=" + strconv.Itoa(s.retries),
		"--log-tail=" + strconv.Itoa(s.logTail),
	}
	binds, engineSocket := engineBind(socketSource(self, socket))
	if h.Fallback != nil {
		cmd = append(cmd, "--fallback-container="+h.Fallback.Name)
	}
	if s.resultFile != "" {
		binds = append(binds, path.Dir(s.resultFile)+":"+resultDir)
		cmd = append(cmd, "--result-file="+path.Join(resultDir, path.Base(s.resultFile)))
	}
	env := []string{"DOCKER_HOST=unix://" + engineSocket}
	if verbose {
		env = append(env, "WAITDAEMON_VERBOSE=true")
	}
	return &dockerapi.CreateRequest{
		Config: dockerapi.Config{
			Image:      self.Image,
			Entrypoint: []string{"/waitdaemon"},
			Cmd:        cmd,
			Env:        env,
			Labels:     h.labels(roleWaiter),
		},
		HostConfig: dockerapi.HostConfig{
			Binds:       binds,
			NetworkMode: "host",
			AutoRemove:  true,
			LogConfig:   self.HostConfig.LogConfig,
		},
	}
}

// startWaiter creates and starts the waiter. It closes made once the
// create has answered, with h.Waiter.ID set if it succeeded.
func (h *handoff) startWaiter(ctx context.Context, c *dockerapi.Client, made chan<- struct{}) error {
	created, err := c.ContainerCreate(ctx, h.Waiter.Name, *h.Waiter.Create)
	if err == nil {
		h.Waiter.ID = created.ID
	}
	close(made)
	if err != nil {
		return err
	}
	return c.ContainerStart(ctx, created.ID)
}

// engineBind binds the directory of the engine socket at source into the
// waiter, read-only, and returns the socket's path there. The directory,
// not the socket file: an engine that restarts (with live-restore, the
// waiter lives on) unlinks its socket and makes a new one, which a bind
// of the old file would never see.
func engineBind(source string) (binds []string, socket string) {
	dir, file := path.Split(source)
	if dir == "/" || dir == "" {
		return []string{source + ":" + dockerapi.DefaultSocket}, dockerapi.DefaultSocket
	}
	return []string{path.Clean(dir) + ":" + engineDir + ":ro"}, path.Join(engineDir, file)
}

// confirmResultFile waits for the waiter to say whether it can write the
// result file on the host, which only it can see.
func (h *handoff) confirmResultFile(ctx context.Context, c *dockerapi.Client, file string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var answer struct{ Msg, Error string }
	lines := &lineWriter{line: func(l []byte) {
		var e struct{ Msg, Error string }
		if json.Unmarshal(l, &e) == nil && (e.Msg == msgResultWritable || e.Msg == msgResultUnwritable) {
			answer = e
			cancel()
		}
	}}
	err := c.ContainerLogs(ctx, h.Waiter.ID, dockerapi.LogsOptions{Follow: true}, lines, io.Discard)
	switch {
	case answer.Msg == msgResultWritable:
		return nil
	case answer.Msg == msgResultUnwritable:
		return bad("WAITDAEMON_RESULT_FILE", file, "a file the waiter can write on the host ("+answer.Error+")")
	case err == nil:
		err = errors.New("it ended without a word")
	}
	return fmt.Errorf("the waiter did not say whether it can write WAITDAEMON_RESULT_FILE=%q: %w", file, err)
}

// lineWriter calls line with each whole line written to it.
type lineWriter struct {
	buf  []byte
	line func([]byte)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.line(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

// socketSource is the host path of the engine socket bound into the
// action container at socket, itself or through a directory above it;
// the default path when no bind says.
func socketSource(self dockerapi.Container, socket string) string {
	var binds [][2]string // source, target
	for _, b := range self.HostConfig.Binds {
		if parts := strings.Split(b, ":"); len(parts) >= 2 {
			binds = append(binds, [2]string{parts[0], parts[1]})
		}
	}
	for _, m := range self.HostConfig.Mounts {
		if m.Type == "bind" {
			binds = append(binds, [2]string{m.Source, m.Target})
		}
	}
	for _, b := range binds {
		if path.Clean(b[1]) == socket {
			return b[0]
		}
	}
	for _, b := range binds {
		if rest, ok := strings.CutPrefix(socket, path.Clean(b[1])+"/"); ok {
			return path.Join(b[0], rest)
		}
	}
	return dockerapi.DefaultSocket
}

// removeCreated undoes a failed handoff, whatever ctx has become: what it
// knows it made, and whatever else carries this action's ID (a create
// whose answer never came may still have happened).
func (h *handoff) removeCreated(c *dockerapi.Client, g *globals) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ids := []string{h.Waiter.ID, h.User.ID}
	if h.Fallback != nil {
		ids = append(ids, h.Fallback.ID)
	}
	if list, err := c.ContainerList(ctx, labelActionID+"="+h.Action.ID); err == nil {
		for _, l := range list {
			if !slices.Contains(ids, l.ID) {
				ids = append(ids, l.ID)
			}
		}
	}
	for _, id := range ids {
		if id == "" {
			continue
		}
		if err := c.ContainerRemove(ctx, id, dockerapi.RemoveOptions{Force: true, Volumes: true}); err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
			fmt.Fprintf(g.stderr, "waitdaemon: cleaning up: %v\n", err)
		}
	}
}
