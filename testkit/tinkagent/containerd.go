package tinkagent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/imageref"
)

// SnapshotterLabel is the namespace label naming its default snapshotter.
const SnapshotterLabel = "containerd.io/defaults/snapshotter"

// FIFODir is where the agent's client makes a task's FIFOs (cio's
// default).
var FIFODir = "/run/containerd/fifo"

// Containerd is tink-agent's containerd runtime.
type Containerd struct {
	// C is the client, in the agent's namespace (tinkerbell).
	C *containerdapi.Client
	// Output receives the actions' output as it comes, as the agent's
	// own stdout and stderr do (and so the journal); nil discards it.
	Output io.Writer
	// Spec, if set, changes each action's spec before its create: a test
	// seam for an action the agent would not make (its actions are
	// always privileged).
	Spec func(spec []byte) []byte
	// CNI, if set, is the network each action not on the host's network
	// joins once its task exists, and leaves before its task's delete, as
	// every release's containerd runtime does (CaptainOS ships one); nil,
	// none: the action has loopback alone.
	CNI *CNI
}

// Container is an action's container, made by Create.
type Container struct {
	ID, Name                 string
	Snapshotter, SnapshotKey string
	Hostname                 string
	// Etc is the directory of its generated /etc files, gone after
	// Finish.
	Etc string

	c       *containerdapi.Client
	etc     *etcFiles
	cni     *CNI
	net     *Attachment
	fifos   *fifos
	output  *relay
	release Release
}

// Run runs a as the agent's Execute does, under a's timeout: it pulls the
// image if the namespace lacks it, creates the container and its task,
// starts it, waits for its exit or kills it at the timeout, and then
// deletes the task, and the container with its snapshot if it succeeded.
func (r *Containerd) Run(ctx context.Context, a Action) (Result, error) {
	return run(ctx, a, r.Create)
}

// Snapshotter is the namespace's default snapshotter (its
// containerd.io/defaults/snapshotter label), else overlayfs, which the
// agent's client unpacks to and makes snapshots in.
func (r *Containerd) Snapshotter(ctx context.Context) (string, error) {
	list, err := r.C.NamespaceList(ctx)
	if err != nil {
		return "", fmt.Errorf("the namespace's snapshotter: %w", err)
	}
	ns := cmp.Or(r.C.Namespace, containerdapi.DefaultNamespace)
	for _, n := range list {
		if n.Name == ns && n.Labels[SnapshotterLabel] != "" {
			return n.Labels[SnapshotterLabel], nil
		}
	}
	return containerdapi.DefaultSnapshotter, nil
}

// pullRequest pulls ref into snapshotter as r's agent does: HEAD reads
// the registries' hosts.toml from containerd's certs.d, earlier releases
// none (Release.hostDir).
func pullRequest(r Release, ref, snapshotter string) containerdapi.PullRequest {
	return containerdapi.PullRequest{Ref: ref, HostDir: r.hostDir(), Snapshotter: snapshotter}
}

// image is a's image unpacked in snapshotter, pulled first if it is not
// (five tries, 2 s apart and doubling up to 10 s, as the agent's).
func (r *Containerd) image(ctx context.Context, rel Release, ref, snapshotter string) (containerdapi.ResolvedImage, error) {
	img, err := r.C.ImageUnpacked(ctx, ref, containerdapi.DefaultPlatform(), snapshotter)
	if err == nil {
		return img, nil
	}
	delay := 2 * time.Second
	for try := 1; ; try++ {
		err = r.C.Pull(ctx, pullRequest(rel, ref, snapshotter))
		if err == nil || try == 5 || ctx.Err() != nil {
			break
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
		}
		delay = min(2*delay, 10*time.Second)
	}
	if err != nil {
		return img, fmt.Errorf("pulling %s: %w", ref, err)
	}
	return r.C.ImageUnpacked(ctx, ref, containerdapi.DefaultPlatform(), snapshotter)
}

// Create makes a's container and its task, not started, as the agent
// does: a random 64-hex ID, the name tinkerbell_<name>_<action ID> in
// nerdctl's label, a snapshot <name>-<ID[:8]> of the namespace's default
// snapshotter, the spec of spec.go, generated /etc files, and the task's
// output to FIFOs it reads. It leaves nothing behind when it fails.
func (r *Containerd) Create(ctx context.Context, a Action) (_ *Container, err error) {
	if a.Release == TinkWorker {
		return nil, fmt.Errorf("action %s: tink-worker runs actions on Docker only", a.Name)
	}
	ref, err := imageref.Parse(a.Image)
	if err != nil {
		return nil, fmt.Errorf("action %s: image %q: %w", a.Name, a.Image, err)
	}
	snapshotter, err := r.Snapshotter(ctx)
	if err != nil {
		return nil, err
	}
	// The image pulled when the namespace lacks it (GetImage, then Pull
	// with unpack).
	img, err := r.image(ctx, a.Release, ref.Qualified(), snapshotter)
	if err != nil {
		return nil, fmt.Errorf("action %s: %w", a.Name, err)
	}
	id := NewID()
	hostNetwork := a.Network == "host"
	hostname := hostnameOf(id, hostNetwork)
	ctr := &Container{
		ID: id, Name: a.ContainerName(), Snapshotter: snapshotter, Hostname: hostname,
		c: r.C, output: &relay{to: r.Output}, release: a.Release.orHead(),
	}
	ctr.SnapshotKey = ctr.release.snapshotKey(ctr.Name, id)
	defer func() {
		if err != nil {
			ctr.remove(context.WithoutCancel(ctx))
		}
	}()
	// /etc/resolv.conf, hosts and hostname generated in a temporary
	// directory, to be bound in (prepareDNSFiles).
	if ctr.etc, err = newEtcFiles(hostNetwork, hostname); err != nil {
		return nil, fmt.Errorf("action %s: its /etc files: %w", a.Name, err)
	}
	ctr.Etc = ctr.etc.dir
	volumes, err := parseVolumes(a.Volumes)
	if err == nil {
		err = makeSources(volumes)
	}
	if err != nil {
		return nil, fmt.Errorf("action %s: %w", a.Name, err)
	}
	ns := cmp.Or(r.C.Namespace, containerdapi.DefaultNamespace)
	cfg := img.Config.Config
	s := containerSpec(ns, id, hostname, ctr.etc.dir, a, imageConfig{Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd, Env: cfg.Env, WorkingDir: cfg.WorkingDir}, volumes)
	if r.Spec != nil {
		s = r.Spec(s)
	}
	lease := "tinkagent-" + id[:12]
	if _, err := r.C.LeaseCreate(ctx, lease, time.Now().Add(time.Hour)); err != nil {
		return nil, fmt.Errorf("creating action %s: %w", a.Name, err)
	}
	lctx := containerdapi.WithLease(ctx, lease)
	mounts, err := r.C.SnapshotPrepare(lctx, snapshotter, ctr.SnapshotKey, img.ChainID)
	if err == nil {
		_, err = r.C.ContainerCreate(lctx, containerdapi.Container{
			ID: id, Image: ref.Qualified(),
			Labels:  ctr.release.labels(ns, ctr.Name, hostname),
			Runtime: containerdapi.Runtime{Name: containerdapi.RuncV2},
			Spec:    containerdapi.SpecAny(s), Snapshotter: snapshotter, SnapshotKey: ctr.SnapshotKey,
		})
	}
	if lerr := r.C.LeaseDelete(context.WithoutCancel(ctx), lease, true); err == nil {
		err = lerr
	}
	if err != nil {
		return nil, fmt.Errorf("creating action %s: %w", a.Name, err)
	}
	// The output to FIFOs that the agent reads (cio.WithStreams).
	if ctr.fifos, err = newFIFOs(FIFODir, ctr.output); err != nil {
		return nil, fmt.Errorf("action %s: its output's FIFOs: %w", a.Name, err)
	}
	pid, err := r.C.TaskCreate(ctx, id, containerdapi.TaskSpec{Rootfs: mounts, Stdout: ctr.fifos.paths[0], Stderr: ctr.fifos.paths[1]})
	if err != nil {
		return nil, fmt.Errorf("creating the task of action %s: %w", a.Name, err)
	}
	// The CNI network, on the task's network namespace before its start
	// (c.CNI.Setup with /proc/<pid>/ns/net); a failed setup is logged and
	// the action runs without a network, as the agent's.
	if r.CNI != nil && !hostNetwork {
		ctr.cni = r.CNI
		ctr.net, _ = r.CNI.Setup(ctx, id, fmt.Sprintf("/proc/%d/ns/net", pid))
	}
	return ctr, nil
}

// hostnameOf is a container's hostname: the ID's first 12 characters, or
// with the host's network, the host's name.
func hostnameOf(id string, hostNetwork bool) string {
	if hostNetwork {
		if h, err := os.Hostname(); err == nil {
			return h
		}
	}
	return id[:12]
}

// imageConfig is what of an image's config the spec takes.
type imageConfig struct {
	Entrypoint, Cmd, Env []string
	WorkingDir           string
}

// containerSpec is the OCI spec of a's container in namespace ns, with
// ID id, of an image of config cfg, as the agent makes it (spec.go): the
// same in v0.23.0 to HEAD, given the same action.
func containerSpec(ns, id, hostname, etc string, a Action, cfg imageConfig, volumes []mount) []byte {
	// The command: the image's entrypoint and cmd, with the action's cmd
	// in place of the entrypoint and its args in place of the cmd
	// (WithImageConfig, withEntrypointOverride, WithImageConfigArgs).
	args := slices.Concat(cfg.Entrypoint, cfg.Cmd)
	switch {
	case a.Cmd != "" && len(a.Args) > 0:
		// Both: the cmd and the args alone (WithProcessArgs).
		args = slices.Concat([]string{a.Cmd}, a.Args)
	case a.Cmd != "":
		// The entrypoint replaced, the image's cmd kept.
		args = slices.Concat([]string{a.Cmd}, cfg.Cmd)
	case len(a.Args) > 0:
		args = slices.Concat(cfg.Entrypoint, a.Args)
	}
	// The environment: containerd's PATH, the image's, then the action's
	// (WithImageConfig, WithEnv).
	env := mergeEnv(mergeEnv([]string{defaultPath}, cfg.Env...), a.Env...)
	return spec(specInput{
		Namespace: ns, ID: id, Args: args, Env: env, Cwd: cmp.Or(cfg.WorkingDir, "/"), Hostname: hostname,
		Volumes: volumes, Etc: etc, HostPID: a.PID == "host", HostNetwork: a.Network == "host",
	})
}

// parseVolumes are the action's volumes as bind mounts (parseVolumes):
// rbind, rw unless ro; other options kept; named volumes left out.
func parseVolumes(volumes []string) ([]mount, error) {
	var out []mount
	for _, v := range volumes {
		parts := strings.SplitN(v, ":", 3)
		if len(parts) < 2 || !filepath.IsAbs(parts[1]) {
			continue
		}
		if !filepath.IsAbs(parts[0]) && !strings.HasPrefix(parts[0], ".") {
			continue
		}
		opts := []string{"rbind", "rw"}
		if len(parts) == 3 {
			opts = []string{"rbind"}
			mode := "rw"
			for _, o := range strings.Split(parts[2], ",") {
				switch o = strings.TrimSpace(o); o {
				case "ro", "rw":
					mode = o
				case "":
				default:
					opts = append(opts, o)
				}
			}
			opts = append(opts, mode)
		}
		src, err := filepath.Abs(parts[0])
		if err != nil {
			return nil, err
		}
		out = append(out, mount{Source: src, Destination: parts[1], Options: opts})
	}
	return out, nil
}

// makeSources makes the missing source directories of mounts, as the
// agent does (nerdctl's -v).
func makeSources(mounts []mount) error {
	for _, m := range mounts {
		if _, err := os.Stat(m.Source); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(m.Source, 0o755); err != nil {
				return fmt.Errorf("volume %s: %w", m.Source, err)
			}
		}
	}
	return nil
}

// Start starts the container's task, and returns at once.
func (c *Container) Start(ctx context.Context) error {
	if _, err := c.c.TaskStart(ctx, c.ID); err != nil {
		return fmt.Errorf("starting action %s: %w", c.Name, err)
	}
	return nil
}

// Run starts the task with its wait in place, and waits for its exit; at
// ctx's deadline (the action's timeout) it SIGKILLs it and waits for that
// exit. It returns once the output has been read.
func (c *Container) Run(ctx context.Context) (Result, error) {
	res := Result{ContainerID: c.ID, Name: c.Name}
	type waited struct {
		exit containerdapi.Exit
		err  error
	}
	done := make(chan waited, 1)
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		e, err := c.c.TaskWait(wctx, c.ID)
		done <- waited{e, err}
	}()
	time.Sleep(50 * time.Millisecond) // the wait is under way before the start, as the agent's
	if err := c.Start(ctx); err != nil {
		// Nothing ran: no exit code.
		res.TimedOut, res.ExitCode = errors.Is(ctx.Err(), context.DeadlineExceeded), -1
		return res, err
	}
	var w waited
	select {
	case w = <-done:
	case <-ctx.Done():
		// At the timeout: SIGKILL, and wait for that exit.
		res.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		if err := c.c.TaskKill(wctx, c.ID, syscall.SIGKILL, false); err != nil {
			return res, fmt.Errorf("killing action %s at its timeout: %w", c.Name, err)
		}
		w = <-done
	}
	if w.err != nil {
		return res, fmt.Errorf("waiting for action %s: %w", c.Name, w.err)
	}
	res.ExitCode, res.ExitedAt = int(w.exit.Status), w.exit.ExitedAt
	c.fifos.drain(10 * time.Second)
	res.Output = c.output.String()
	return res, nil
}

// Output is what the action has written so far.
func (c *Container) Output() string { return c.output.String() }

// Finish is what the agent does once the action has ended, in its
// deferred calls' order: it takes the action off its CNI network (the
// task's namespace path, gone with its process by then), deletes the
// task; a failed action's container is kept (v0.24.0 and later), a
// successful one's deleted with its snapshot, as v0.23.0 deletes every
// one; the /etc files are deleted either way.
func (c *Container) Finish(ctx context.Context, res Result) error {
	var errs []error
	// The CNI network's removal is logged, not reported, by the agent.
	c.removeNetwork(ctx)
	if _, err := c.c.TaskDelete(ctx, c.ID); err != nil && !errors.Is(err, containerdapi.ErrNotFound) {
		errs = append(errs, fmt.Errorf("deleting the task of action %s: %w", c.Name, err))
	}
	c.fifos.close()
	if res.Succeeded() || !c.release.keepsFailed() {
		// A successful action's container deleted with its snapshot
		// (WithSnapshotCleanup); from v0.24.0 a failed one kept, for the
		// operator.
		if err := c.c.ContainerDelete(ctx, c.ID); err != nil && !errors.Is(err, containerdapi.ErrNotFound) {
			errs = append(errs, fmt.Errorf("deleting action %s: %w", c.Name, err))
		}
		if err := c.c.SnapshotRemove(ctx, c.Snapshotter, c.SnapshotKey); err != nil && !errors.Is(err, containerdapi.ErrNotFound) {
			errs = append(errs, fmt.Errorf("removing the snapshot of action %s: %w", c.Name, err))
		}
	}
	// The /etc files deleted after the action, whatever its end.
	if err := c.etc.remove(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeNetwork takes the container off its CNI network, if it joined
// one, once.
func (c *Container) removeNetwork(ctx context.Context) {
	if c.cni != nil && c.net != nil {
		_ = c.cni.Remove(ctx, c.net)
		c.net = nil
	}
}

// remove undoes a Create that failed half-way.
func (c *Container) remove(ctx context.Context) {
	c.removeNetwork(ctx)
	_, _ = c.c.TaskDelete(ctx, c.ID)
	c.fifos.close()
	_ = c.c.ContainerDelete(ctx, c.ID)
	_ = c.c.SnapshotRemove(ctx, c.Snapshotter, c.SnapshotKey)
	_ = c.etc.remove()
}
