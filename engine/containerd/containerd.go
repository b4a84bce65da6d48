// Package containerd is the engine contract (package engine) carried out
// on containerd 2.x, through the containerdapi client: CaptainOS, where
// tink-agent runs each action as a containerd container in the namespace
// tinkerbell. The user container is planned by package engine/containerd/ocispec, beside it.
//
// What only containerd needs lives here:
//
//   - IDs. A containerd ID cannot be renamed, so every container this
//     engine creates gets an ID of its own, the readable name phase 1
//     gave it (sanitised, cut to fit 76 characters) and 8 random hex
//     digits, and keeps the readable name in the label org.waitdaemon.name.
//     List reports that label as the name, and every method that takes a
//     container also takes its readable name: an ID is looked up first,
//     then the newest container labelled with that name. Keep "renames" a
//     kept container by relabelling it, so that the name is free for this
//     run. Plan returns the readable name in Spec.Name, as phase 1 passes
//     it to the waiter before the plan is made.
//   - A container is metadata, a snapshot and a task. Create makes all
//     three, under a lease until the container holds its snapshot, and
//     leaves the task created, not started: a missing bind source or a
//     device that cannot be made fails the action while the agent still
//     listens. A user image that is not present at Plan (it is pulled
//     after) is read at Create.
//   - Output goes to a file on the host, the task's file:// URI
//     <LogDir>/<id>/log, as tink-agent's does: CaptainOS's rsyslog forwards
//     exactly those files. The shim creates and appends to it, stdout and
//     stderr each copied on its own (their lines can interleave out of
//     order). The waiter reads the user container's through its bind of
//     LogDir, for the result's tail: a run's own part, from where the file
//     ended when Start began it, once the shim has stopped copying. Remove
//     deletes <LogDir>/<id>/ after the container, where this process sees
//     it: the waiter does (LogDir is bound into it read-write, at the same
//     path), so nothing of a successful run stays; a kept failure, never
//     removed, keeps its file. Phase 1, in the action container, does not
//     see the host's LogDir: the output files of what it removes (a
//     re-run's earlier waiter, never-started containers, a failed
//     hand-off's) stay on the host, which is about to reboot or kexec.
//   - Phase 1 cannot read the waiter's output, so the waiter also tells it
//     (engine.Teller) the one line phase 1 waits for, in the label
//     org.waitdaemon.said of its own container; Output polls that label.
//   - The waiter is planned as a minimal OCI spec of its own (waiterSpec),
//     not from the action's: unprivileged, its own pid namespace, the
//     host's network, only the socket's directory, LogDir and the result
//     file's directory bound in.
//   - Ran: containerd keeps no record of a start. A task that runs or has
//     stopped ran; a created task did not; a container with no task ran if
//     Start had labelled it org.waitdaemon.started.
//   - No auto-remove, and a running task cannot delete itself: the waiter
//     stays behind once stopped, labelled. The next action's waiter
//     removes every stopped waiter of any other action (List says which
//     run), with its output directory, once its own user container has
//     run; a re-run's phase 1 removes every earlier waiter of its own
//     action. Only the last action's waiter stays with the host's
//     containerd state.
//   - Remove kills and deletes the task before the container: containerd
//     deletes a container whose task runs, and orphans the task.
//
// Main sets the client's namespace with DetectNamespace, and gives the
// waiter's client engine.WaiterWaitForEngine.
package containerd

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/containerd/ocispec"
	"github.com/waitdaemon/waitdaemon/imageref"
)

// Labels this engine sets besides the phases'.
const (
	// LabelName is a container's readable name: IDs cannot be renamed.
	LabelName = "org.waitdaemon.name"
	// LabelStarted is set, to the time, once a container's task started.
	LabelStarted = "org.waitdaemon.started"
	// LabelSaid is the last line the waiter told phase 1 (engine.Teller).
	LabelSaid = "org.waitdaemon.said"
	// labelNerdctlName is tink-agent's (and nerdctl's) name of a container.
	labelNerdctlName = "nerdctl/name"
)

// DefaultLogDir is where a task's output goes, one directory per
// container ID: the files CaptainOS's rsyslog forwards.
const DefaultLogDir = "/var/lib/containerd/io.containerd.grpc.v2.task"

// maxID is the longest ID containerd takes.
const maxID = 76

// Engine is a containerd daemon. Set C; the rest is optional. An Engine
// is safe for concurrent use.
type Engine struct {
	C *containerdapi.Client
	// Log, when set, hears what the engine does on its own, such as
	// making a container anew whose task create did not settle.
	Log io.Writer
	// LogDir is the host directory of the tasks' output files. Empty
	// means DefaultLogDir.
	LogDir string
	// ProcSelf is the directory Self reads cgroup and mountinfo from.
	// Empty means /proc/self. Tests point it at their own files.
	ProcSelf string
	// HostRoot, when set, is where phase 1 sees the host's root. Empty
	// means the root of the action's shim when the action shares the
	// host's pid namespace, and nowhere when it has its own. Tests point
	// it at their own directory.
	HostRoot string

	// newSuffix makes the random part of an ID, now dates leases; tests
	// make both deterministic.
	newSuffix func() string
	now       func() time.Time
	// noHostDir sends no certs.d directory with a pull: tests that
	// replay recordings made without one set it.
	noHostDir bool

	mu   sync.Mutex
	ids  map[string]string // readable name → ID, of what this process made or found
	runs map[string]run    // by ID: the run Start began
	own  string            // the waiter's own ID, once ownID found it
	snap string            // the action's snapshotter, once Self found it
	// images are the images read so far, by name, and whether each was
	// found unpacked: phase 1 reads the user's image to decide the pull,
	// to plan and to create, and reads it once. A pull forgets it.
	images     map[string]image
	imageLocks map[string]*sync.Mutex
	// userDBs are the user databases read from images (userDB), by
	// their config's digest.
	userDBs map[string]*ocispec.UserDB
}

// image is an image read, and whether its snapshot was found.
type image struct {
	containerdapi.ResolvedImage
	unpacked bool
}

// resolve reads image name for this host's platform, once (see images).
func (e *Engine) resolve(ctx context.Context, name string) (containerdapi.ResolvedImage, error) {
	return e.image(ctx, name, "")
}

// unpacked reads image name, and checks that it is unpacked for the
// snapshotter, once (see images).
func (e *Engine) unpacked(ctx context.Context, name, snapshotter string) (containerdapi.ResolvedImage, error) {
	return e.image(ctx, name, snapshotter)
}

// image reads image name, and with a snapshotter checks that it is
// unpacked, each once: callers at the same time wait for the first, so
// that an image is read the same number of times whatever the order.
func (e *Engine) image(ctx context.Context, name, snapshotter string) (containerdapi.ResolvedImage, error) {
	e.mu.Lock()
	if e.imageLocks == nil {
		e.imageLocks = map[string]*sync.Mutex{}
	}
	lock := e.imageLocks[name]
	if lock == nil {
		lock = &sync.Mutex{}
		e.imageLocks[name] = lock
	}
	e.mu.Unlock()
	lock.Lock()
	defer lock.Unlock()
	e.mu.Lock()
	img, ok := e.images[name]
	e.mu.Unlock()
	if !ok {
		r, err := e.C.ImageResolve(ctx, name, containerdapi.DefaultPlatform())
		if err != nil {
			return r, err
		}
		img = image{ResolvedImage: r}
		e.noteImage(name, img)
	}
	if snapshotter != "" && !img.unpacked {
		if _, err := e.C.SnapshotStat(ctx, snapshotter, img.ChainID); err != nil {
			return containerdapi.ResolvedImage{}, fmt.Errorf("image %q is not unpacked: %w", name, err)
		}
		img.unpacked = true
		e.noteImage(name, img)
	}
	return img.ResolvedImage, nil
}

// forget forgets image name: it is pulled, perhaps anew.
func (e *Engine) forget(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.images, name)
}

// noteImage notes an image read.
func (e *Engine) noteImage(name string, img image) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.images == nil {
		e.images = map[string]image{}
	}
	e.images[name] = img
}

// run is what Start remembers of a run for Follow.
type run struct {
	started time.Time
	offset  int64 // the log file's size when it began
}

// New returns the engine of client c.
func New(c *containerdapi.Client) *Engine { return &Engine{C: c} }

func (e *Engine) String() string {
	return "containerd on " + e.C.SocketPath() + " (namespace " + e.namespace() + ")"
}

func (e *Engine) namespace() string { return cmp.Or(e.C.Namespace, containerdapi.DefaultNamespace) }

func (e *Engine) logDir() string { return cmp.Or(e.LogDir, DefaultLogDir) }

// logFile is the host path of container id's output.
func (e *Engine) logFile(id string) string { return path.Join(e.logDir(), id, "log") }

func (e *Engine) clock() time.Time {
	if e.now != nil {
		return e.now()
	}
	return time.Now()
}

// Reach waits, within the client's bound, for the daemon to answer. A
// socket that is missing or refuses is one not mounted.
func (e *Engine) Reach(ctx context.Context) error {
	_, err := e.C.Version(ctx)
	if err == nil {
		return nil
	}
	var te *containerdapi.TransportError
	var ae *containerdapi.Error
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach containerd on %s (%w): mount its socket into the action with\n  volumes:\n    - /run/containerd/containerd.sock:/run/containerd/containerd.sock", e.C.SocketPath(), rootCause(err))
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("cannot reach containerd on %s (%w): only root can use its socket", e.C.SocketPath(), rootCause(err))
	case errors.As(err, &ae), errors.As(err, &te):
		return fmt.Errorf("%s does not answer like containerd: %w", e.C.SocketPath(), err)
	}
	return err
}

// rootCause is the innermost error of a chain of single wraps.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// newID is a fresh ID for a container named name: the name made valid and
// cut to fit, then a random suffix.
func (e *Engine) newID(name string) string {
	suffix := ""
	if e.newSuffix != nil {
		suffix = e.newSuffix()
	} else {
		var b [4]byte
		_, _ = rand.Read(b[:])
		suffix = hex.EncodeToString(b[:])
	}
	return IDFor(name, suffix)
}

// IDFor is the ID of a container named name, with suffix: containerd's
// rule, [A-Za-z0-9]+ joined by single '.', '_' or '-', at most 76
// characters. Other characters become '-'; a name too long loses its
// beginning (tink-agent's "tinkerbell_" and the action's name come first;
// the role comes last).
func IDFor(name, suffix string) string {
	var b strings.Builder
	sep := true // at the start, as after a separator
	for _, r := range name {
		alnum := r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		switch {
		case alnum:
			b.WriteRune(r)
			sep = false
		case !sep:
			if r != '.' && r != '_' && r != '-' {
				r = '-'
			}
			b.WriteRune(r)
			sep = true
		}
	}
	s := strings.TrimRight(b.String(), "._-")
	if room := maxID - len(suffix) - 1; len(s) > room {
		s = strings.TrimLeft(s[len(s)-room:], "._-")
	}
	if s == "" {
		s = "waitdaemon"
	}
	return s + "-" + suffix
}

// remember notes the ID of a container by its readable name.
func (e *Engine) remember(name, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ids == nil {
		e.ids = map[string]string{}
	}
	e.ids[name] = id
}

// find returns the container ref names: its ID, else its readable name
// (the newest container labelled so). A container that is not there is
// an error for which errors.Is(err, containerdapi.ErrNotFound) holds.
func (e *Engine) find(ctx context.Context, ref string) (containerdapi.Container, error) {
	e.mu.Lock()
	id := cmp.Or(e.ids[ref], ref)
	e.mu.Unlock()
	ctr, err := e.C.ContainerGet(ctx, id)
	if !errors.Is(err, containerdapi.ErrNotFound) {
		return ctr, err
	}
	list, lerr := e.C.ContainerList(ctx, containerdapi.LabelFilter(LabelName, ref))
	if lerr != nil {
		return ctr, lerr
	}
	if len(list) == 0 {
		return ctr, fmt.Errorf("container %s: %w", ref, err)
	}
	newest := slices.MaxFunc(list, func(a, b containerdapi.Container) int { return a.CreatedAt.Compare(b.CreatedAt) })
	e.remember(ref, newest.ID)
	return newest, nil
}

// List lists the containers labelled label=value, whether each ran, and
// whether its task runs (or is paused).
func (e *Engine) List(ctx context.Context, label, value string) ([]engine.Container, error) {
	list, err := e.C.ContainerList(ctx, containerdapi.LabelFilter(label, value))
	if err != nil || len(list) == 0 {
		return nil, err
	}
	tasks, err := e.C.TaskList(ctx, "")
	if err != nil {
		return nil, err
	}
	status := map[string]containerdapi.TaskStatus{}
	for _, t := range tasks {
		status[t.ID] = t.Status
	}
	out := make([]engine.Container, 0, len(list))
	for _, c := range list {
		st, hasTask := status[c.ID]
		// A start that failed labels it started too (startFailed).
		ran, running, state := c.Labels[LabelStarted] != "", false, "no task"
		if hasTask {
			ran, state = ran || st != containerdapi.TaskCreated && st != containerdapi.TaskUnknown, st.String()
			running = mayRun(st)
		}
		out = append(out, engine.Container{ID: c.ID, Name: cmp.Or(c.Labels[LabelName], c.ID), Labels: c.Labels, Ran: ran, Running: running, State: state})
	}
	return out, nil
}

// mayRun reports whether a task in state st may be running: running,
// paused, or unknown (containerd's answer when the shim's State call
// fails or times out, as a busy shim's can; its task may well run, and
// is not taken for stopped).
func mayRun(st containerdapi.TaskStatus) bool {
	switch st {
	case containerdapi.TaskRunning, containerdapi.TaskPaused, containerdapi.TaskPausing, containerdapi.TaskUnknown:
		return true
	}
	return false
}

// Keep keeps the container under its own ID, and relabels it with name,
// so that this run's container alone answers to the old one.
func (e *Engine) Keep(ctx context.Context, c engine.Container, name string) (string, error) {
	if _, err := e.C.ContainerSetLabel(ctx, c.ID, LabelName, name); err != nil {
		return "", fmt.Errorf("relabelling container %s as %s: %w", c.ID, name, err)
	}
	return name, nil
}

// killWait bounds how long Remove waits for a killed task to stop.
const killWait = 10 * time.Second

// Remove removes a container: its task first (killed if it runs, never
// left orphaned), then the container and its snapshot, then its output
// directory <LogDir>/<id>/ where this process sees it (the waiter; not
// phase 1: see the package doc). What is not there is not an error.
func (e *Engine) Remove(ctx context.Context, ref string) error {
	ctr, err := e.find(ctx, ref)
	if errors.Is(err, containerdapi.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing container %s: %w", ref, err)
	}
	if err := e.deleteTask(ctx, ctr.ID); err != nil {
		return fmt.Errorf("removing container %s: %w", ref, err)
	}
	if err := e.C.ContainerDelete(ctx, ctr.ID); err != nil && !errors.Is(err, containerdapi.ErrNotFound) {
		return fmt.Errorf("removing container %s: %w", ref, err)
	}
	if ctr.SnapshotKey != "" {
		err := e.C.SnapshotRemove(ctx, cmp.Or(ctr.Snapshotter, containerdapi.DefaultSnapshotter), ctr.SnapshotKey)
		if err != nil && !errors.Is(err, containerdapi.ErrNotFound) {
			return fmt.Errorf("removing the snapshot of container %s: %w", ref, err)
		}
	}
	// The shim has gone with the task: nothing writes there any more.
	if err := os.RemoveAll(path.Join(e.logDir(), ctr.ID)); err != nil {
		return fmt.Errorf("removing the output of container %s: %w", ref, err)
	}
	return nil
}

// deleteTask deletes container id's task, killing it first unless it has
// stopped. No task is no error.
func (e *Engine) deleteTask(ctx context.Context, id string) error {
	t, err := e.C.TaskGet(ctx, id)
	if errors.Is(err, containerdapi.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if t.Status != containerdapi.TaskStopped {
		wctx, cancel := context.WithTimeout(ctx, killWait)
		defer cancel()
		waited := make(chan error, 1)
		go func() { _, err := e.C.TaskWait(wctx, id); waited <- err }()
		if err := e.C.TaskKill(ctx, id, syscall.SIGKILL, true); err != nil && !errors.Is(err, containerdapi.ErrNotFound) {
			return fmt.Errorf("killing its task: %w", err)
		}
		if err := <-waited; err != nil && !errors.Is(err, containerdapi.ErrNotFound) {
			return fmt.Errorf("waiting for its killed task: %w", err)
		}
	}
	return e.taskDelete(ctx, id)
}

// taskDelete deletes a stopped task. A delete that fails while the task's
// shim goes away (containerd says "ttrpc: closed") may have happened: the
// task is asked for, and deleted again while it is there, a few times.
func (e *Engine) taskDelete(ctx context.Context, id string) error {
	var err error
	for try := range 3 {
		if _, err = e.C.TaskDelete(ctx, id); err == nil || errors.Is(err, containerdapi.ErrNotFound) {
			return nil
		}
		if _, gerr := e.C.TaskGet(ctx, id); errors.Is(gerr, containerdapi.ErrNotFound) {
			return nil
		}
		if !engine.Sleep(ctx, engine.Backoff(try)) {
			break
		}
	}
	return fmt.Errorf("deleting its task: %w", err)
}

// HasImage reports whether the image is in the store and unpacked for
// this platform, in the action's snapshotter: both are needed to run it.
func (e *Engine) HasImage(ctx context.Context, ref imageref.Ref) (bool, error) {
	_, err := e.unpacked(ctx, ref.Qualified(), e.snapshotter())
	if errors.Is(err, containerdapi.ErrNotFound) || errors.Is(err, containerdapi.ErrNoPlatform) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("looking up image %s: %w", ref, err)
	}
	return true, nil
}

// addBlobs passes on the progress of a pull, in which the daemon reports
// each blob on its own, added up; an event with no size, such as a
// reference resolved, is none.
func addBlobs(progress func(done, total int64)) func(containerdapi.Progress) {
	blobs := map[string][2]int64{} // name: done, total
	return func(p containerdapi.Progress) {
		if p.Total <= 0 {
			return
		}
		blobs[p.Name] = [2]int64{p.Progress, p.Total}
		var done, total int64
		for _, b := range blobs {
			done, total = done+b[0], total+b[1]
		}
		progress(done, total)
	}
}

// Pull has the daemon pull and unpack the image for this platform, with
// the credential for its own registry alone, through the certs.d
// directory CaptainOS writes (containerdapi.DefaultHostDir): its
// <host:port>/hosts.toml files declare the registries that are plain
// HTTP or have a private CA. The directory is sent whatever this
// container's own file system holds: the daemon reads it on its host, and
// one that is not there is no error there (containerd 2.2.1 pulls as
// without it; e2e's TestContainerdHostDirMissing checks it). A pull that fails
// as HTTPS to a plain-HTTP registry, or on a certificate the daemon does
// not trust, says which hosts.toml declares that registry.
func (e *Engine) Pull(ctx context.Context, ref imageref.Ref, auth *engine.Auth, progress func(done, total int64)) error {
	req := containerdapi.PullRequest{Ref: ref.Qualified(), HostDir: containerdapi.DefaultHostDir, Snapshotter: e.snapshotter()}
	if e.noHostDir {
		req.HostDir = ""
	}
	if auth != nil {
		req.Auth = authFor(auth)
	}
	if progress != nil {
		req.Progress = addBlobs(progress)
	}
	e.forget(ref.Qualified())
	// A pull whose answer was lost (its lease's create, or its transfer
	// broken off) is pulled again, from new side streams: each pull runs
	// under a lease of its own, and what the daemon fetched stays in its
	// content store.
	err := engine.Settle(ctx, func() error { return e.C.Pull(ctx, req) }, nil)
	if errors.Is(err, containerdapi.ErrUnimplemented) {
		v, verr := e.C.Version(ctx)
		version := "older than 2.0"
		if verr == nil {
			version = v.Version
		}
		return fmt.Errorf("pulling image %s: containerd %s cannot pull for a client (its Transfer service came with 2.0): pull the image on the host first, or upgrade containerd: %w", ref, version, err)
	}
	if err != nil && untrustedRegistry(err) {
		// err already names the image; what to do comes last.
		return fmt.Errorf("%w: if registry %s is plain HTTP or has a private CA, declare it in %s on the host "+
			"(CaptainOS writes one for each of its insecure_registries= entries; name a private CA's certificate in it with ca = \"...\")",
			err, ref.Registry(), hostsFile(req.HostDir, ref.Registry()))
	}
	return err
}

// hostsFile is the hosts.toml that declares registry host in dir (the
// default one when the pull named none).
func hostsFile(dir, host string) string {
	return path.Join(cmp.Or(dir, containerdapi.DefaultHostDir), host, "hosts.toml")
}

// untrustedRegistry reports a pull that failed as HTTPS to a registry that
// speaks plain HTTP, or on the registry's certificate: what a hosts.toml
// cures. The daemon says so only in its message (code Unknown).
func untrustedRegistry(err error) bool {
	msg := err.Error()
	for _, s := range []string{
		"server gave HTTP response to HTTPS client",
		"first record does not look like a TLS handshake",
		"x509: ",
		"tls: failed to verify certificate",
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// authFor answers the daemon's credential requests with auth for its own
// registry's host alone; Docker Hub's is asked for as registry-1.docker.io.
func authFor(auth *engine.Auth) func(host, ref string) (string, string, bool) {
	return func(host, _ string) (string, string, bool) {
		if !sameRegistry(host, auth.Registry) {
			return "", "", false
		}
		if auth.IdentityToken != "" {
			return "", auth.IdentityToken, true
		}
		return auth.Username, auth.Password, true
	}
}

// sameRegistry reports whether the daemon's host is the registry's.
func sameRegistry(host, registry string) bool {
	if host == registry {
		return true
	}
	hub := func(h string) bool {
		return h == imageref.DockerHub || h == "registry-1.docker.io" || h == "index.docker.io"
	}
	return hub(host) && hub(registry)
}
