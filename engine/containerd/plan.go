package containerd

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/containerd/ocispec"
)

// planned is a planned container: the record Create makes, which a dry
// run prints.
type planned struct {
	ID      string            `json:"id"`
	Image   string            `json:"image"`
	Labels  map[string]string `json:"labels"`
	Runtime string            `json:"runtime"`
	// RuntimeOptions are the action's runtime's (a runc BinaryName,
	// Root, SystemdCgroup...), copied with its name.
	RuntimeOptions *containerdapi.Any `json:"runtime_options,omitempty"`
	Snapshotter    string             `json:"snapshotter"`
	SnapshotKey    string             `json:"snapshot_key"`
	// Output is the task's stdout and stderr, a file on the host.
	Output string        `json:"output"`
	Spec   *ocispec.Spec `json:"spec,omitempty"`
	// Pending says why Spec is missing: the user image is not present
	// yet, and is read at Create, after the pull.
	Pending string `json:"pending,omitempty"`

	in *ocispec.Input // the plan, less the user image
}

// runtimeName is the action's runtime, which the containers planned from
// it run on too: runc v2 when it names none.
func runtimeName(action containerdapi.Container) string {
	return cmp.Or(action.Runtime.Name, containerdapi.RuncV2)
}

// runtimeOptions are the options of the action's runtime, nil if none.
func runtimeOptions(action containerdapi.Container) *containerdapi.Any {
	if action.Runtime.Options.TypeURL == "" && len(action.Runtime.Options.Value) == 0 {
		return nil
	}
	o := action.Runtime.Options
	return &o
}

// role is the container's role, for messages: a command or the image's
// own default command is the fallback's (see engine.Want).
func role(want engine.Want) string {
	if want.Command != nil || want.ImageDefault {
		return "fallback"
	}
	return "user"
}

// leaseFor is how long a create's lease may outlive a waitdaemon that
// died before deleting it.
const leaseFor = 10 * time.Minute

// Plan plans a container like the action for another image, with
// ocispec's rules. A user image that is not present yet is read at
// Create.
func (e *Engine) Plan(ctx context.Context, s engine.Self, want engine.Want) (engine.Spec, error) {
	d := s.Detail.(*self)
	if d.image == nil {
		own, err := e.resolve(ctx, d.ctr.Image)
		if err != nil {
			return engine.Spec{}, fmt.Errorf("reading this action's own image %s: %w", d.ctr.Image, err)
		}
		cfg := imageConfig(own.Config)
		d.image = &cfg
	}
	id := e.newID(want.Name)
	p := &planned{
		ID: id, Image: want.Image.Qualified(), Labels: withName(want.Labels, want.Name),
		Runtime: runtimeName(d.ctr), RuntimeOptions: runtimeOptions(d.ctr), Snapshotter: cmp.Or(d.ctr.Snapshotter, e.snapshotter()), SnapshotKey: id,
		Output: "file://" + e.logFile(id),
		in: &ocispec.Input{
			Spec: d.spec, Image: *d.image, UserImageRef: want.Image.String(),
			Namespace: e.namespace(), ID: id, Withhold: want.Withhold, ImageDefault: want.ImageDefault,
			Command: want.Command, Role: role(want), HostEtc: e.hostEtc(d.spec),
		},
	}
	user, err := e.resolve(ctx, p.Image)
	switch {
	case errors.Is(err, containerdapi.ErrNotFound):
		p.Pending = "the image is not present: its config is read at create, after the pull"
	case err != nil:
		return engine.Spec{}, fmt.Errorf("reading image %s: %w", want.Image, err)
	default:
		if err := e.finish(ctx, p, user); err != nil {
			return engine.Spec{}, err
		}
	}
	return engine.Spec{Name: want.Name, Create: p, Note: networkNote(d.spec)}, nil
}

// hostEtc are the ocispec.HostFiles the host has, which a user container
// on the host's network binds: those found in the host's root as
// containerd and its runtime see it, the root of the action's nearest
// ancestor outside the action's mount namespace (its shim), which phase
// 1 sees when the action shares the host's pid namespace (the README's
// templates do). An action with a pid namespace of its own has no
// ancestor it can see, and its user container binds none. A file that is
// a symlink is followed within that root.
func (e *Engine) hostEtc(action ocispec.Spec) []string {
	if !ocispec.HostNetwork(action) {
		return nil
	}
	root := e.HostRoot
	if root == "" {
		if root = hostRoot(); root == "" {
			return nil
		}
	}
	var out []string
	for _, f := range ocispec.HostFiles {
		if existsIn(root, f) {
			out = append(out, f)
		}
	}
	return out
}

// hostRoot is /proc/<pid>/root of this process's nearest ancestor in
// another mount namespace, or "" if none can be seen.
func hostRoot() string { return hostRootIn("/proc", os.Getppid()) }

// hostRootIn is hostRoot, reading proc as /proc, from the parent ppid:
// <proc>/<pid>/root of the nearest ancestor, 16 at most, whose mount
// namespace is not that of <proc>/self.
func hostRootIn(proc string, ppid int) string {
	own, err := os.Readlink(proc + "/self/ns/mnt")
	if err != nil {
		return ""
	}
	for pid, hops := ppid, 0; pid > 0 && hops < 16; hops++ {
		dir := proc + "/" + strconv.Itoa(pid)
		if ns, err := os.Readlink(dir + "/ns/mnt"); err == nil && ns != own {
			return dir + "/root"
		}
		stat, err := os.ReadFile(dir + "/stat")
		if err != nil {
			return ""
		}
		// pid (comm) state ppid ...: comm may hold spaces and parens.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 {
			return ""
		}
		pid, _ = strconv.Atoi(f[1])
	}
	return ""
}

// existsIn reports whether the file at p (absolute) is in the tree at
// root, following symlinks as the host would, within root.
func existsIn(root, p string) bool {
	for range 16 {
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			return false
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			return true
		}
		target, err := os.Readlink(filepath.Join(root, p))
		if err != nil {
			return false
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = filepath.Clean("/" + target)
	}
	return false
}

// networkNote is the hand-off's note on a user container planned from an
// action that is not on the host's network: the agent's CNI network goes
// with the action, and waitdaemon runs no CNI plugins.
func networkNote(action ocispec.Spec) string {
	if ocispec.HostNetwork(action) {
		return ""
	}
	return "a network namespace of its own with loopback only: the action's CNI network goes with the action; set namespaces.network: host for a network"
}

// finish makes the spec, with the user image's config, and, when the
// plan depends on them (ocispec.ReadsUserDB), its /etc/passwd and
// /etc/group: a USER that cannot be resolved without them fails when
// they cannot be read; any other gets its additional groups from them,
// or, when they cannot be read, its own group alone, and a note in the
// log.
func (e *Engine) finish(ctx context.Context, p *planned, user containerdapi.ResolvedImage) error {
	in := *p.in
	in.UserImage = imageConfig(user.Config)
	if ocispec.ReadsUserDB(in) {
		db, err := e.userDB(ctx, user)
		switch {
		case err != nil && ocispec.NeedsUserDB(in.UserImage.User):
			return err
		case err != nil:
			engine.Log(e.Log, "could not read the image's /etc/group; the user container gets its own group alone", map[string]string{"image": user.Image.Name, "error": err.Error()})
		default:
			in.UserDB = db
		}
	}
	spec, err := ocispec.Plan(in)
	if err != nil {
		return err
	}
	p.Spec, p.Pending = &spec, ""
	return nil
}

func imageConfig(c containerdapi.ImageConfig) ocispec.ImageConfig {
	return ocispec.ImageConfig{
		User: c.Config.User, Env: c.Config.Env, Entrypoint: c.Config.Entrypoint,
		Cmd: c.Config.Cmd, WorkingDir: c.Config.WorkingDir,
	}
}

// withName is labels with the readable name's.
func withName(labels map[string]string, name string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[LabelName] = name
	return out
}

// Create creates the planned container and its task, not started: under
// a lease, the snapshot on the image's, the container, then the task
// with its output to its file. A user container's spec is made again
// from its image's config as it is after the pull, if one was made. A create whose answer was lost
// adopts its own lease, snapshot, container (same ID and labels) and
// task: each create is made again (see createContainer), and a lost task
// create is settled by asking Tasks/Get (see taskCreate); a second Create
// meets its task as AlreadyExists. When the task cannot be created, the
// container goes again; when its create is not settled, it is made anew
// (see createAnew).
func (e *Engine) Create(ctx context.Context, spec engine.Spec) (string, error) {
	p := spec.Create.(*planned)
	img, err := e.unpacked(ctx, p.Image, p.Snapshotter)
	if err != nil {
		return "", fmt.Errorf("creating container %s: image %s: %w", spec.Name, p.Image, err)
	}
	if p.in != nil {
		// Planned again with the config of the image as it is now: it
		// may have been pulled, or pulled anew, since the plan (a pull
		// forgets the image read before it).
		if err := e.finish(ctx, p, img); err != nil {
			return "", fmt.Errorf("creating container %s: %w", spec.Name, err)
		}
	}
	return e.createAnew(ctx, spec.Name, p, img.ChainID)
}

// settleAnew bounds the settling of a task create that failed, before
// the container is made anew: well within a request's time, which a
// containerd that hangs on what a cut create left can take whole.
var settleAnew = 15 * time.Second

// createAnew is create, but a task create that failed and is not
// settled within settleAnew (cut in flight, and the one sent again
// hanging: containerd 2.2.1 has hung so on what the cut create left, a
// whole request's time, saying meanwhile that there is no task) gives
// that container up: it is removed, if containerd lets it, and made anew
// under a fresh ID, which nothing of the first can hold up. Nothing of a
// container has started before its start, so a fresh one is always
// safe.
func (e *Engine) createAnew(ctx context.Context, name string, p *planned, parent string) (string, error) {
	id, err := e.create(ctx, name, p, parent, settleAnew)
	if !errors.Is(err, errUnsettled) {
		return id, err
	}
	fresh := *p
	fresh.ID = e.newID(name)
	fresh.SnapshotKey, fresh.Output = fresh.ID, "file://"+e.logFile(fresh.ID)
	if p.Spec != nil {
		spec := ocispec.Again(*p.Spec, e.namespace(), p.ID, fresh.ID)
		fresh.Spec = &spec
	}
	engine.Log(e.Log, "gave up a container whose task create did not settle; making it anew", map[string]string{"container": p.ID, "fresh": fresh.ID, "error": err.Error()})
	return e.create(ctx, name, &fresh, parent, 0)
}

// giveUpRemove bounds the removal of a container given up as unsettled.
const giveUpRemove = 10 * time.Second

// create creates container name as p plans it, its snapshot on parent,
// and its task, not started; a task create that failed is settled within
// settle (zero: a request's time). A container whose task cannot be made
// is removed, one unsettled within giveUpRemove (containerd may hang on
// it still; the next run of the action removes what is left, never
// started).
func (e *Engine) create(ctx context.Context, name string, p *planned, parent string, settle time.Duration) (string, error) {
	specJSON, err := json.Marshal(p.Spec)
	if err != nil {
		return "", fmt.Errorf("creating container %s: %w", name, err)
	}
	mounts, err := e.createContainer(ctx, p, specJSON, parent)
	if err != nil {
		return "", fmt.Errorf("creating container %s: %w", name, err)
	}
	_, err = e.taskCreate(ctx, p.ID, containerdapi.TaskSpec{Rootfs: mounts, Stdout: p.Output, Stderr: p.Output}, settle)
	if err != nil && !errors.Is(err, containerdapi.ErrAlreadyExists) {
		rctx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
		if errors.Is(err, errUnsettled) {
			rctx, cancel = context.WithTimeout(rctx, giveUpRemove)
		}
		defer cancel()
		if rerr := e.Remove(rctx, p.ID); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return "", fmt.Errorf("creating container %s: %w", name, missingBind(err, p.Spec))
	}
	e.remember(name, p.ID)
	return p.ID, nil
}

// Again creates container name as first was created: first's spec, but
// for its own ID, first's runtime (with its options), image and labels, on a fresh snapshot
// of the image snapshot first's was prepared on, and its task, not
// started. Its ID is name with first's suffix, so that a call made again
// (after a lost answer) adopts what an earlier one made, as Create does,
// and one whose task create is not settled is made anew (createAnew).
func (e *Engine) Again(ctx context.Context, first, name string) (string, error) {
	ctr, err := e.find(ctx, first)
	if err != nil {
		return "", fmt.Errorf("making %s like %s: %w", name, first, err)
	}
	snapshotter := cmp.Or(ctr.Snapshotter, containerdapi.DefaultSnapshotter)
	snap, err := e.C.SnapshotStat(ctx, snapshotter, ctr.SnapshotKey)
	if err != nil {
		return "", fmt.Errorf("making %s like %s: its snapshot: %w", name, first, err)
	}
	var spec ocispec.Spec
	if err := json.Unmarshal(ctr.Spec.Value, &spec); err != nil {
		return "", fmt.Errorf("making %s like %s: its spec: %w", name, first, err)
	}
	id := IDFor(name, ctr.ID[strings.LastIndexByte(ctr.ID, '-')+1:])
	spec = ocispec.Again(spec, e.namespace(), ctr.ID, id)
	labels := withName(ctr.Labels, name)
	delete(labels, LabelStarted)
	delete(labels, LabelSaid)
	p := &planned{
		ID: id, Image: ctr.Image, Labels: labels, Runtime: runtimeName(ctr), RuntimeOptions: runtimeOptions(ctr),
		Snapshotter: snapshotter, SnapshotKey: id, Output: "file://" + e.logFile(id), Spec: &spec,
	}
	return e.createAnew(ctx, name, p, snap.Parent)
}

// missingBind is a task create that failed on a bind whose source the
// host lacks (containerd, unlike Docker, never makes one), as an error
// that says which path of the host, bound where; other errors pass as
// they are.
func missingBind(err error, spec *ocispec.Spec) error {
	msg := err.Error()
	if !strings.Contains(msg, "no such file or directory") {
		return err
	}
	for _, m := range spec.Mounts {
		// runc 1.1 says "stat SOURCE: no such file or directory", runc
		// 1.4 "open SOURCE: no such file or directory".
		if m.Source != "" && strings.HasPrefix(m.Source, "/") && strings.Contains(msg, " "+m.Source+": no such file or directory") {
			return &engine.MissingSourceError{Source: m.Source, Target: m.Destination, Err: err}
		}
	}
	return err
}

// createContainer prepares the snapshot and creates the container under
// a lease, which it deletes (collecting what only it held) once the
// container holds the snapshot. It returns the snapshot's mounts. Each
// create whose answer was lost is made again (engine.Settle); one that
// meets AlreadyExists, then or on its first attempt (a Create called
// again after a lost answer), met what an earlier attempt made: the
// lease and the snapshot are ours (their names are this container's
// own), and so is a container with the same labels.
func (e *Engine) createContainer(ctx context.Context, p *planned, specJSON []byte, chainID string) ([]containerdapi.Mount, error) {
	lease := "waitdaemon-" + p.ID
	err := engine.Settle(ctx, func() error {
		_, err := e.C.LeaseCreate(ctx, lease, e.clock().Add(leaseFor))
		return err
	}, nil)
	if err != nil && !errors.Is(err, containerdapi.ErrAlreadyExists) {
		return nil, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := e.C.LeaseDelete(dctx, lease, true); err != nil && !errors.Is(err, containerdapi.ErrNotFound) {
			engine.Log(e.Log, "could not delete a lease; containerd drops it later", map[string]string{"lease": lease, "error": err.Error()})
		}
	}()
	lctx := containerdapi.WithLease(ctx, lease)
	var mounts []containerdapi.Mount
	err = engine.Settle(lctx, func() (err error) {
		mounts, err = e.C.SnapshotPrepare(lctx, p.Snapshotter, p.SnapshotKey, chainID)
		return err
	}, nil)
	if errors.Is(err, containerdapi.ErrAlreadyExists) {
		mounts, err = e.C.SnapshotMounts(lctx, p.Snapshotter, p.SnapshotKey)
	}
	if err != nil {
		return nil, fmt.Errorf("preparing its snapshot: %w", err)
	}
	ctr := containerdapi.Container{
		ID: p.ID, Labels: p.Labels, Image: p.Image, Runtime: containerdapi.Runtime{Name: p.Runtime},
		Spec: containerdapi.SpecAny(specJSON), Snapshotter: p.Snapshotter, SnapshotKey: p.SnapshotKey,
	}
	if p.RuntimeOptions != nil {
		ctr.Runtime.Options = *p.RuntimeOptions
	}
	err = engine.Settle(lctx, func() error {
		_, err := e.C.ContainerCreate(lctx, ctr)
		return err
	}, nil)
	if err != nil {
		if !errors.Is(err, containerdapi.ErrAlreadyExists) {
			return nil, err
		}
		// An earlier attempt's create, whose answer was lost, is ours.
		if got, gerr := e.C.ContainerGet(ctx, p.ID); gerr != nil || !maps.Equal(got.Labels, p.Labels) {
			return nil, err
		}
	}
	return mounts, nil
}

// startTries bounds how often Start creates and starts a task that goes
// before its start reaches it.
const startTries = 3

// Start starts the container's task. A task that ran before (a
// container started again) is deleted and made anew, on the same snapshot and
// output file; one already running counts as started. A task create or
// start whose answer was lost is settled by asking Tasks/Get (see
// taskCreate and taskStart): a task that
// started and already stopped counts as started, and Follow reads its
// exit. A start that finds no task (a create cut in flight that
// containerd undid after Tasks/Get saw its task) creates it again, and
// starts it, startTries times in all at most.
func (e *Engine) Start(ctx context.Context, ref string) error {
	ctr, err := e.find(ctx, ref)
	if err != nil {
		return fmt.Errorf("starting container %s: %w", ref, err)
	}
	t, err := e.C.TaskGet(ctx, ctr.ID)
	if errors.Is(err, containerdapi.ErrNotFound) {
		err = e.newTask(ctx, ctr)
	} else if err == nil {
		switch t.Status {
		case containerdapi.TaskRunning, containerdapi.TaskPaused, containerdapi.TaskPausing:
			return nil
		case containerdapi.TaskStopped:
			if err = e.taskDelete(ctx, ctr.ID); err == nil {
				err = e.newTask(ctx, ctr)
			}
		}
	}
	if err != nil {
		return e.startFailed(ctx, ref, ctr.ID, err)
	}
	var offset int64
	if fi, err := os.Stat(e.logFile(ctr.ID)); err == nil {
		offset = fi.Size() // seen through the waiter's bind; phase 1 sees none
	}
	// Read before the start is sent: a quick run can exit before its
	// answer comes back, and its exit is dated on the same (the host's)
	// clock.
	started := e.clock()
	_, err = e.taskStart(ctx, ctr.ID)
	for again := 1; errors.Is(err, containerdapi.ErrNotFound) && again < startTries; again++ {
		// The task went between its create and its start: a create cut
		// in flight, found by Tasks/Get and then undone by containerd.
		// Nothing started: it is created again.
		if err = e.newTask(ctx, ctr); err == nil {
			started = e.clock()
			_, err = e.taskStart(ctx, ctr.ID)
		}
	}
	if err != nil {
		return e.startFailed(ctx, ref, ctr.ID, err)
	}
	e.mu.Lock()
	if e.runs == nil {
		e.runs = map[string]run{}
	}
	e.runs[ctr.ID] = run{started: started, offset: offset}
	e.mu.Unlock()
	if _, err := e.C.ContainerSetLabel(ctx, ctr.ID, LabelStarted, engine.Stamp(started)); err != nil {
		engine.Log(e.Log, "could not label a started container", map[string]string{"container": ctr.ID, "error": err.Error()})
	}
	return nil
}

// startFailed labels a container whose start failed as started, so that
// List says it ran, and it is kept like a run that failed; and returns
// the start's error.
func (e *Engine) startFailed(ctx context.Context, ref, id string, err error) error {
	if _, lerr := e.C.ContainerSetLabel(context.WithoutCancel(ctx), id, LabelStarted, "failed "+engine.Stamp(e.clock())); lerr != nil {
		engine.Log(e.Log, "could not label a container that failed to start", map[string]string{"container": id, "error": lerr.Error()})
	}
	return fmt.Errorf("starting container %s: %w", ref, err)
}

// newTask creates the task of a container whose task is gone: on its
// snapshot, with its output to its file.
func (e *Engine) newTask(ctx context.Context, ctr containerdapi.Container) error {
	mounts, err := e.C.SnapshotMounts(ctx, ctr.Snapshotter, ctr.SnapshotKey)
	if err != nil {
		return fmt.Errorf("reading its snapshot's mounts: %w", err)
	}
	out := "file://" + e.logFile(ctr.ID)
	if _, err := e.taskCreate(ctx, ctr.ID, containerdapi.TaskSpec{Rootfs: mounts, Stdout: out, Stderr: out}, 0); err != nil {
		return fmt.Errorf("creating its task: %w", err)
	}
	return nil
}
