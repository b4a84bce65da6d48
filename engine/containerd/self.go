package containerd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/containerd/ocispec"
	"github.com/waitdaemon/waitdaemon/selfid"
)

// self is what the engine keeps of the action container.
type self struct {
	ctr  containerdapi.Container
	spec ocispec.Spec
	// image is the config of the action's image (waitdaemon's), whose
	// defaults the user container does not inherit; read once.
	image *ocispec.ImageConfig
}

// Self finds the action's own container: the one override names (an ID,
// or tink-agent's nerdctl/name), else the one the cgroup path names, else
// the one whose snapshot is the root overlay's upperdir. Each must be
// there and its task running.
//
// Unlike Docker's Self (engine/docker), it needs no token to confirm
// what it finds: neither clue can name another container. The cgroup
// path /<namespace>/<id> is the process's own cgroup, which a shared
// network, UTS or IPC namespace does not change; and the root overlay's
// upperdir is the container's own writable snapshot, which no other
// container mounts as its root. Files that another container shares
// (/etc/hosts and the like under NetworkMode container:X) are not read.
//
// The action's snapshotter (that of its record, else the namespace's
// default) is the one the engine then unpacks images to and makes
// snapshots in: the action's image is unpacked there, and tink-agent
// unpacks the others there too.
func (e *Engine) Self(ctx context.Context, override string) (engine.Self, error) {
	s, err := e.findSelf(ctx, override)
	if err != nil {
		return s, err
	}
	snap := s.Detail.(*self).ctr.Snapshotter
	if snap == "" {
		if snap, err = e.namespaceSnapshotter(ctx); err != nil {
			return engine.Self{}, fmt.Errorf("finding this action's snapshotter: %w", err)
		}
	}
	e.mu.Lock()
	e.snap = snap
	e.mu.Unlock()
	return s, nil
}

// SnapshotterLabel is the namespace label that names its default
// snapshotter, as containerd's client reads it.
const SnapshotterLabel = "containerd.io/defaults/snapshotter"

// namespaceSnapshotter is the namespace's default snapshotter: its
// SnapshotterLabel, else containerd's default.
func (e *Engine) namespaceSnapshotter(ctx context.Context) (string, error) {
	list, err := e.C.NamespaceList(ctx)
	if err != nil {
		return "", err
	}
	for _, n := range list {
		if n.Name == e.namespace() && n.Labels[SnapshotterLabel] != "" {
			return n.Labels[SnapshotterLabel], nil
		}
	}
	return containerdapi.DefaultSnapshotter, nil
}

// snapshotter is the snapshotter images are unpacked to and snapshots
// made in: the action's, once Self found it, else containerd's default.
func (e *Engine) snapshotter() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return cmp.Or(e.snap, containerdapi.DefaultSnapshotter)
}

// findSelf finds the action's container, as Self says.
func (e *Engine) findSelf(ctx context.Context, override string) (engine.Self, error) {
	var tried []string
	if override != "" {
		ctr, err := e.running(ctx, override)
		if err == nil {
			return toSelf(ctr, string(selfid.Override))
		}
		if !errors.Is(err, containerdapi.ErrNotFound) && !errors.Is(err, errNotRunning) {
			return engine.Self{}, fmt.Errorf("finding this action's container: %w", err)
		}
		tried = append(tried, "override "+override)
	}
	if ns, id, ok := selfid.ContainerdCgroup(e.readProc("cgroup")); ok {
		if ns == e.namespace() {
			ctr, err := e.running(ctx, id)
			if err == nil {
				return toSelf(ctr, string(selfid.Cgroup))
			}
			if !errors.Is(err, containerdapi.ErrNotFound) && !errors.Is(err, errNotRunning) {
				return engine.Self{}, fmt.Errorf("finding this action's container: %w", err)
			}
		}
		tried = append(tried, "cgroup "+ns+"/"+id)
	}
	if upper, ok := selfid.RootUpperdir(e.readProc("mountinfo")); ok {
		ctr, err := e.byUpperdir(ctx, upper)
		if err == nil {
			return toSelf(ctr, string(selfid.Mountinfo))
		}
		if !errors.Is(err, containerdapi.ErrNotFound) {
			return engine.Self{}, fmt.Errorf("finding this action's container: %w", err)
		}
		tried = append(tried, "mountinfo "+upper)
	}
	return engine.Self{}, engine.InputError(fmt.Sprintf("cannot find this action's own container in containerd namespace %s (tried: %s): set WAITDAEMON_CONTAINER to its ID or name", e.namespace(), cmp.Or(strings.Join(tried, ", "), "nothing to go by")))
}

// errNotRunning is a container found whose task does not run.
var errNotRunning = errors.New("its task does not run")

// running returns the container ref names, if its task runs (or may:
// see mayRun).
func (e *Engine) running(ctx context.Context, ref string) (containerdapi.Container, error) {
	ctr, err := e.findAction(ctx, ref)
	if err != nil {
		return ctr, err
	}
	t, err := e.C.TaskGet(ctx, ctr.ID)
	if errors.Is(err, containerdapi.ErrNotFound) {
		return ctr, errNotRunning
	}
	if err != nil {
		return ctr, err
	}
	if !mayRun(t.Status) {
		return ctr, errNotRunning
	}
	return ctr, nil
}

// findAction returns the container ref names: its ID, else its nerdctl
// name (tink-agent's tinkerbell_<name>_<action ID>), else its readable
// name.
func (e *Engine) findAction(ctx context.Context, ref string) (containerdapi.Container, error) {
	ctr, err := e.C.ContainerGet(ctx, ref)
	if !errors.Is(err, containerdapi.ErrNotFound) {
		return ctr, err
	}
	list, lerr := e.C.ContainerList(ctx, containerdapi.LabelFilter(labelNerdctlName, ref))
	if lerr != nil {
		return ctr, lerr
	}
	if len(list) == 1 {
		return list[0], nil
	}
	return e.find(ctx, ref)
}

// byUpperdir returns the container with a running task (see mayRun) whose snapshot's
// upperdir is upper.
func (e *Engine) byUpperdir(ctx context.Context, upper string) (containerdapi.Container, error) {
	tasks, err := e.C.TaskList(ctx, "")
	if err != nil {
		return containerdapi.Container{}, err
	}
	for _, t := range tasks {
		if !mayRun(t.Status) {
			continue
		}
		ctr, err := e.C.ContainerGet(ctx, t.ID)
		if err != nil || ctr.SnapshotKey == "" {
			continue
		}
		mounts, err := e.C.SnapshotMounts(ctx, cmp.Or(ctr.Snapshotter, containerdapi.DefaultSnapshotter), ctr.SnapshotKey)
		if err != nil {
			continue
		}
		for _, m := range mounts {
			if u, ok := selfid.Upperdir(m.Options); ok && u == upper {
				return ctr, nil
			}
		}
	}
	return containerdapi.Container{}, fmt.Errorf("no running container has the upperdir %s: %w", upper, containerdapi.ErrNotFound)
}

// Inspect reads any container as the action.
func (e *Engine) Inspect(ctx context.Context, container string) (engine.Self, error) {
	ctr, err := e.findAction(ctx, container)
	if err != nil {
		return engine.Self{}, fmt.Errorf("inspecting container %s: %w", container, err)
	}
	return toSelf(ctr, "plan --container")
}

func toSelf(ctr containerdapi.Container, foundBy string) (engine.Self, error) {
	var spec ocispec.Spec
	if err := json.Unmarshal(ctr.Spec.Value, &spec); err != nil {
		return engine.Self{}, fmt.Errorf("reading the spec of container %s: %w", ctr.ID, err)
	}
	var env []string
	user := ""
	if spec.Process != nil {
		env = spec.Process.Env
		user = fmt.Sprintf("%d:%d", spec.Process.User.UID, spec.Process.User.GID)
	}
	return engine.Self{
		ID: ctr.ID, Name: cmp.Or(ctr.Labels[labelNerdctlName], ctr.Labels[LabelName], ctr.ID), FoundBy: foundBy,
		Env: env, Detail: &self{ctr: ctr, spec: spec},
		HostPID: ocispec.HostPID(spec), CanBoot: ocispec.CanBoot(spec), User: user,
	}, nil
}

// readProc reads a file of ProcSelf; a missing one is empty.
func (e *Engine) readProc(name string) string {
	data, _ := os.ReadFile(filepath.Join(cmp.Or(e.ProcSelf, "/proc/self"), name))
	return string(data)
}

// DetectNamespace is the containerd namespace to work in: that of
// CONTAINERD_NAMESPACE, else the one this process's cgroup path names (an
// action's /<namespace>/<id>), else tinkerbell.
func DetectNamespace() string {
	cgroup, _ := os.ReadFile("/proc/self/cgroup")
	return detectNamespace(strings.TrimSpace(os.Getenv(engine.EnvContainerdNamespace)), string(cgroup))
}

func detectNamespace(env, cgroup string) string {
	if env != "" {
		return env
	}
	if ns, _, ok := selfid.ContainerdCgroup(cgroup); ok {
		return ns
	}
	return containerdapi.DefaultNamespace
}
