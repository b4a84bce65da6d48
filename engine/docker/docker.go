// Package docker is the engine contract (package engine) carried out on a
// Docker engine, and on Podman's Docker-compatible API, through the
// dockerapi client. The user container is planned by package
// hostconfig, beside it.
// What only these engines need lives here: network connects below API
// 1.44, Podman's quirks, renaming to keep an earlier run's failures, the
// socket directory bound into the waiter, and the engine's log stream.
package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/docker/hostconfig"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/inherit"
	"github.com/waitdaemon/waitdaemon/internal/tarfile"
	"github.com/waitdaemon/waitdaemon/selfid"
)

var (
	_ engine.Engine = (*Engine)(nil)
	_ engine.Teller = (*Engine)(nil)
)

// Engine is a Docker engine, or Podman's Docker-compatible API.
type Engine struct {
	C *dockerapi.Client

	// root is the root of the file system this process sees: "" is /.
	// Tests set it.
	root string
	// sources reads what this process sees of itself (nil:
	// selfid.Read). Tests set it.
	sources func(override string) selfid.Sources
}

// saidFile is where the waiter leaves, in its own root file system, the
// line it tells phase 1 (Tell).
const saidFile = "/waitdaemon-said"

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
	if err == nil {
		return nil
	}
	var te *dockerapi.TransportError
	var ae *dockerapi.Error
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach the Docker engine on %s (%w): mount its socket into the action with\n  volumes:\n    - /var/run/docker.sock:/var/run/docker.sock", e.C.SocketPath(), errors.Unwrap(err))
	case errors.As(err, &te), errors.As(err, &ae):
		return fmt.Errorf("%s does not answer like a Docker engine: %w", e.C.SocketPath(), err)
	}
	return err
}

// Self finds the action's own container. The override is taken as given
// when it runs. selfid's other candidates are clues, not proof: under
// NetworkMode container:X with a private cgroup namespace, the action has
// X's /etc/hosts, /etc/hostname and hostname, X is a candidate that
// exists and runs, and the action's own ID appears nowhere. So Self
// leaves a token of its own in its root file system and takes the
// running candidate in which the engine finds it. Where no token can be
// written (a read-only root), or the engine cannot look for it, a
// candidate counts when its upper directory (inspect's GraphDriver) is
// the root overlay's, and never when it is another; where either is not
// told, only as the one running container among them.
func (e *Engine) Self(ctx context.Context, override string) (engine.Self, error) {
	read := e.sources
	if read == nil {
		read = selfid.Read
	}
	token, terr := e.leaveToken()
	if terr == nil {
		defer os.Remove(filepath.Join(e.rootDir(), token))
	}
	var tried []string
	var unconfirmed []engine.Self // running, by distinct ID
	sources := read(override)
	upper, _ := selfid.RootUpperdir(sources.Mountinfo)
	for _, cand := range selfid.Candidates(sources) {
		ctr, err := e.C.ContainerInspect(ctx, cand.ID)
		if errors.Is(err, dockerapi.ErrNotFound) {
			tried = append(tried, fmt.Sprintf("%s %s", cand.Method, cand.ID))
			continue
		}
		if err != nil {
			return engine.Self{}, fmt.Errorf("finding this action's container: %w", err)
		}
		if !ctr.State.Running {
			tried = append(tried, fmt.Sprintf("%s %s (not running)", cand.Method, cand.ID))
			continue
		}
		if cand.Method == selfid.Override {
			return toSelf(ctr, string(cand.Method)), nil
		}
		if terr == nil {
			_, err := e.C.ContainerStatPath(ctx, ctr.ID, token)
			if err == nil {
				return toSelf(ctr, string(cand.Method)), nil
			}
			if errors.Is(err, dockerapi.ErrNotFound) {
				tried = append(tried, fmt.Sprintf("%s %s (another container)", cand.Method, cand.ID))
				continue
			}
			var ae *dockerapi.Error
			if !errors.As(err, &ae) {
				return engine.Self{}, fmt.Errorf("finding this action's container: %w", err)
			}
			// The engine answered, and cannot look: fall back.
			terr = err
		}
		// No token to look for: the root overlay's upper directory, where
		// both the engine and the mount table tell it, is this container's
		// alone.
		if theirs := ctr.GraphDriver.Data["UpperDir"]; upper != "" && theirs != "" {
			if sameUpper(theirs, upper) {
				return toSelf(ctr, string(cand.Method)), nil
			}
			tried = append(tried, fmt.Sprintf("%s %s (another container: its upper directory is not this root's)", cand.Method, cand.ID))
			continue
		}
		if !slices.ContainsFunc(unconfirmed, func(s engine.Self) bool { return s.ID == ctr.ID }) {
			unconfirmed = append(unconfirmed, toSelf(ctr, string(cand.Method)))
		}
		tried = append(tried, fmt.Sprintf("%s %s", cand.Method, cand.ID))
	}
	if terr != nil && len(unconfirmed) == 1 {
		return unconfirmed[0], nil
	}
	if terr != nil && len(unconfirmed) > 1 {
		tried = append(tried, fmt.Sprintf("%d run, and none could be confirmed as this one: %v", len(unconfirmed), terr))
	}
	return engine.Self{}, notFound(tried)
}

// sameUpper reports whether inspect's upper directory is the one the
// root overlay names: the same path, or, where the engine mounted it
// from its own directory with relative paths (overlay2 does, when its
// options would be too long), the same path's end.
func sameUpper(inspected, mounted string) bool {
	if path.IsAbs(mounted) {
		return path.Clean(inspected) == path.Clean(mounted)
	}
	return strings.HasSuffix(path.Clean(inspected), "/"+path.Clean(mounted))
}

// tokenPrefix begins the name of the file Self leaves in its own root.
const tokenPrefix = "/.waitdaemon-self-"

// leaveToken makes a file of a random name at the root of this process's
// file system, for the engine to find in the one container that is this
// one, and returns its path there.
func (e *Engine) leaveToken() (string, error) {
	token := tokenPrefix + rand.Text()
	f, err := os.OpenFile(filepath.Join(e.rootDir(), token), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("leaving a token to find this container by: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("leaving a token to find this container by: %w", err)
	}
	return token, nil
}

// rootDir is the root of this process's file system.
func (e *Engine) rootDir() string {
	if e.root == "" {
		return "/"
	}
	return e.root
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
		Env: ctr.Config.Env, Detail: &self{ctr: ctr}, User: ctr.Config.User,
		// Docker gives a process other than root no ambient
		// capabilities: after its exec it has none.
		HostPID: hostconfig.HostPID(ctr.HostConfig), CanBoot: hostconfig.CanBoot(ctr.HostConfig) && inherit.Root(ctr.Config.User),
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
		ran := l.State != "created" || e.startFailed(ctx, l.ID)
		out = append(out, engine.Container{ID: l.ID, Name: name, Labels: l.Labels, Ran: ran, Running: running, State: l.State})
	}
	return out, nil
}

// startFailed reports whether a created container's start was tried and
// failed: the engine then leaves it created, with the error and an exit
// code in its state. The list does not say; its inspect does.
func (e *Engine) startFailed(ctx context.Context, id string) bool {
	ctr, err := e.C.ContainerInspect(ctx, id)
	return err == nil && (ctr.State.Error != "" || ctr.State.ExitCode != 0)
}

// Keep renames the container, so that this run can use its name. One
// already named so (a Keep called again, or a rename whose answer was
// lost made again) is kept.
func (e *Engine) Keep(ctx context.Context, c engine.Container, name string) (string, error) {
	if err := engine.Settle(ctx, func() error { return e.C.ContainerRename(ctx, c.ID, name) }, nil); err != nil {
		if there, ierr := e.C.ContainerInspect(ctx, c.ID); ierr == nil && strings.TrimPrefix(there.Name, "/") == name {
			return name, nil
		}
		return "", err
	}
	return name, nil
}

// Remove force-removes a container with its anonymous volumes. One not
// there (removed already, or by a removal whose answer was lost) counts
// as removed.
func (e *Engine) Remove(ctx context.Context, id string) error {
	err := engine.Settle(ctx, func() error {
		return e.C.ContainerRemove(ctx, id, dockerapi.RemoveOptions{Force: true, Volumes: true})
	}, nil)
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
	out := hostconfig.Plan(hostconfig.Input{Container: d.ctr, Image: *d.image, UserImage: want.Image.String(), APIVersion: version, Withhold: want.Withhold})
	create := out.Create
	if want.Command != nil {
		create.Cmd, create.Entrypoint = want.Command, nil
	} else if want.ImageDefault {
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
// could not be given at the create. Called again for the same spec, or
// when a create's answer was lost and it was made again, it adopts the
// container of that name if it carries every label planned and the
// image, and connects what is not connected yet. A name the engine says
// is taken while no container answers to it, after a lost answer, is held
// by that create, cut off while the engine was still at it, making the
// container or undoing it: the create is made again, for nameHeld at
// most, until the engine settles it.
func (e *Engine) Create(ctx context.Context, spec engine.Spec) (string, error) {
	p := spec.Create.(*planned)
	var created dockerapi.CreateResponse
	sent := 0
	create := func() (err error) {
		sent++
		created, err = e.C.ContainerCreate(ctx, spec.Name, p.CreateRequest)
		return err
	}
	settled := func() error {
		if spec.Name == "" {
			return create() // unnamed: a second would make a second container
		}
		return engine.Settle(ctx, create, nil)
	}
	err := settled()
	adopted := false
	for held := time.Now(); errors.Is(err, dockerapi.ErrConflict); {
		there, ierr := e.C.ContainerInspect(ctx, spec.Name)
		// Its labels make it this create's; a Create called again (not a
		// create made again here) needs the image too. Podman names an
		// image otherwise than it was asked for (localhost/…, docker.io/…).
		if adopted = ierr == nil && (sent > 1 || there.Config.Image == p.Image) && hasLabels(there.Config.Labels, p.Labels); adopted {
			created.ID, err = there.ID, nil
			break
		}
		if sent == 1 || !errors.Is(ierr, dockerapi.ErrNotFound) || time.Since(held) >= nameHeld || !engine.Sleep(ctx, nameHeldPause) {
			break
		}
		err = settled()
	}
	if err != nil {
		return "", missingSource(err, p.HostConfig.Mounts)
	}
	for network, ep := range p.connect {
		connect := func() error { return e.C.NetworkConnect(ctx, network, created.ID, ep) }
		err := engine.Settle(ctx, connect, connectedAlready)
		if adopted && connectedAlready(err) {
			continue
		}
		if err != nil {
			return created.ID, err
		}
	}
	return created.ID, nil
}

// nameHeld bounds how long Create makes a create again while the engine
// holds its name for a create cut off; nameHeldPause is the pause
// between them.
const (
	nameHeld      = 5 * time.Second
	nameHeldPause = 50 * time.Millisecond
)

// connectedAlready is the engine's refusal to connect a container to a
// network it is in already.
func connectedAlready(err error) bool {
	var ae *dockerapi.Error
	return errors.As(err, &ae) && strings.Contains(strings.ToLower(ae.Message), "already")
}

// Again creates container name as first was created: planned from first,
// as inspected, for first's image, by the rules that planned first from
// the action, which carry what first was given and nothing of what its
// runs did, and its environment whole (control variables are not
// stripped twice: those first has are the user's). Called again, Create
// adopts it.
func (e *Engine) Again(ctx context.Context, first, name string) (string, error) {
	ctr, err := e.C.ContainerInspect(ctx, first)
	if err != nil {
		return "", fmt.Errorf("making %s like %s: %w", name, first, err)
	}
	img, err := e.C.ImageInspect(ctx, ctr.Image)
	if err != nil {
		return "", fmt.Errorf("making %s like %s: reading its image: %w", name, first, err)
	}
	version, err := e.C.APIVersion(ctx)
	if err != nil {
		return "", err
	}
	var cfg dockerapi.Config
	if img.Config != nil {
		cfg = *img.Config
	}
	out := hostconfig.Plan(hostconfig.Input{Container: ctr, Image: cfg, UserImage: ctr.Config.Image, APIVersion: version, Again: true})
	return e.Create(ctx, engine.Spec{Name: name, Create: &planned{CreateRequest: out.Create, connect: out.Connect}})
}

// hasLabels reports whether have holds every label of want.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// missingSource names the bind mount of mounts whose source the engine
// found missing, in an error phase 1 tells apart.
func missingSource(err error, mounts []dockerapi.Mount) error {
	msg := err.Error()
	if !strings.Contains(msg, "bind source path does not exist") && !strings.Contains(msg, "no such file or directory") {
		return err
	}
	for _, m := range mounts {
		if m.Type == "bind" && strings.Contains(msg, m.Source) {
			return &engine.MissingSourceError{Source: m.Source, Target: m.Target, Err: err}
		}
	}
	return err
}

// Start starts a created container. One that runs already (a Start
// called again) counts as started. A start whose answer was lost is not
// made again blindly: a container that exits at once is no longer
// running when the repeat comes, and the repeat would run it again. The
// container is inspected first: if it runs, or started after the first
// attempt was sent, that attempt started it.
func (e *Engine) Start(ctx context.Context, id string) error {
	sent := time.Now()
	err := engine.Settle(ctx, func() error {
		err := e.C.ContainerStart(ctx, id)
		if !engine.IsLost(err) {
			return err
		}
		ctr, ierr := e.C.ContainerInspect(ctx, id)
		if ierr != nil {
			return engine.Final(err)
		}
		since, perr := time.Parse(time.RFC3339Nano, ctr.State.StartedAt)
		if ctr.State.Running || perr == nil && !since.Before(sent) {
			return nil
		}
		return err
	}, func(err error) bool { return errors.Is(err, dockerapi.ErrNotModified) })
	if err != nil && !errors.Is(err, dockerapi.ErrNotModified) {
		return err
	}
	return nil
}

// Output follows the container's log stream. A log that cannot be read
// back (log driver none, or syslog, gelf, fluentd… with the engine's
// cache disabled) gives, instead, what the container told (Tell).
func (e *Engine) Output(ctx context.Context, id string, w io.Writer) error {
	err := e.C.ContainerLogs(ctx, id, dockerapi.LogsOptions{Follow: true}, w, io.Discard)
	if _, ok := unreadable(err); ok {
		return e.told(ctx, id, w)
	}
	return err
}

// outputPoll is the pause between two looks at what a container told.
const outputPoll = 100 * time.Millisecond

// maxSaid bounds the told file read.
const maxSaid = 64 << 10

// told passes on the lines the container tells (Tell), until it stops
// or ctx ends: the file it leaves them in, each time it changes. A
// container cannot relabel itself on Docker; it can write its own file
// system, which the engine reads.
func (e *Engine) told(ctx context.Context, id string, w io.Writer) error {
	said := ""
	for {
		ctr, err := e.C.ContainerInspect(ctx, id)
		gone := errors.Is(err, dockerapi.ErrNotFound)
		if err != nil && !gone {
			return fmt.Errorf("following container %s: %w", id, err)
		}
		stopped := gone || !ctr.State.Running && ctr.State.Status != "created"
		if !gone {
			// Read after the state: a line told before the exit is
			// in the file when the exit is seen.
			// Not found: nothing told yet, or gone.
			line, err := e.readSaid(ctx, id)
			if err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
				return fmt.Errorf("following container %s: %w", id, err)
			}
			if line != "" && line != said {
				said = line
				if _, err := io.WriteString(w, line+"\n"); err != nil {
					return err
				}
			}
		}
		if stopped {
			return nil
		}
		if !engine.Sleep(ctx, outputPoll) {
			return ctx.Err()
		}
	}
}

// readSaid reads the told file out of container id: the last line told.
func (e *Engine) readSaid(ctx context.Context, id string) (string, error) {
	rc, _, err := e.C.ContainerArchive(ctx, id, saidFile)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	tr := tarfile.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", saidFile, err)
		}
		if !hdr.Regular() {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, maxSaid))
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", saidFile, err)
		}
		return strings.TrimRight(string(data), "\n"), nil
	}
}

// Tell leaves line in the file saidFile of this process's own root file
// system, whole (written aside, then renamed), for Output to read
// through the engine when the container's log cannot be read back. The
// waiter's image is FROM scratch and it runs as root: its root file
// system is writable.
func (e *Engine) Tell(_ context.Context, line []byte) error {
	file := filepath.Join(e.rootDir(), saidFile)
	tmp := file + ".new"
	if err := os.WriteFile(tmp, append(bytes.Clone(line), '\n'), 0o644); err != nil {
		return fmt.Errorf("telling phase 1: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("telling phase 1: %w", err)
	}
	return nil
}

// unreadable reports whether err is the engine's answer to reading a log
// whose driver cannot be read back (501, "configured logging driver does
// not support reading"), and its word.
func unreadable(err error) (string, bool) {
	var ae *dockerapi.Error
	if !errors.As(err, &ae) {
		return "", false
	}
	// Podman 4.3 answers 500, "this container is using the 'none' log
	// driver, cannot read logs".
	return ae.Message, ae.Status == http.StatusNotImplemented || strings.Contains(ae.Message, "does not support reading") ||
		strings.Contains(ae.Message, "cannot read logs")
}

// Describe says what container id will run, from its inspect, as Follow
// says what it ran.
func (e *Engine) Describe(ctx context.Context, id string) (string, []string, error) {
	ctr, err := e.C.ContainerInspect(ctx, id)
	if err != nil {
		return "", nil, err
	}
	return ctr.Config.Image, append([]string{ctr.Path}, ctr.Args...), nil
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
		err := e.C.ContainerLogs(ctx, id, opts, &out, &out)
		if msg, ok := unreadable(err); ok {
			// No tail, and the run is no less done.
			driver := ""
			if ctr.HostConfig.LogConfig != nil {
				driver = ctr.HostConfig.LogConfig.Type
			}
			r.Note = fmt.Sprintf("no log tail: the log driver %q cannot be read back (%s)", driver, msg)
			return r, nil
		}
		if err != nil {
			return r, err
		}
		r.Output = engine.Tail(out.String(), tail)
	}
	return r, nil
}
