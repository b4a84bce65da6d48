package containerd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/containerd/ocispec"
)

var (
	_ engine.Engine = (*Engine)(nil)
	_ engine.Teller = (*Engine)(nil)
)

// PlanWaiter plans phase 2 from our own image, with least privilege (see
// waiterSpec): the socket's directory bound read-only, the tasks' output
// directory LogDir, and the result file's directory. LogDir is bound
// read-write at its own path: the waiter reads the user container's
// output there for the tail, and Remove deletes a removed container's
// <LogDir>/<id>/, which takes write access to LogDir itself. A narrower
// bind cannot do: the IDs of the user container and the fallback are
// made after the waiter's plan, and a bind of <LogDir>/<id> could only
// empty the directory, never remove it.
func (e *Engine) PlanWaiter(s engine.Self, want engine.Waiter) engine.Spec {
	d := s.Detail.(*self)
	id := e.newID(want.Name)
	mounts, socket := engineBind(socketSource(d.spec.Mounts, e.C.SocketPath()))
	mounts = append(mounts, bind(e.logDir(), e.logDir(), false))
	if want.Bind.Host != "" {
		mounts = append(mounts, bind(want.Bind.Host, want.Bind.Container, false))
	}
	env := append([]string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		engine.EnvContainerdAddress + "=" + socket,
		engine.EnvContainerdNamespace + "=" + e.namespace(),
		engine.EnvEngine + "=" + engine.KindContainerd,
	}, want.Env...)
	spec := waiterSpec(ocispec.CgroupsPath(cgroupsPath(d.spec), e.namespace(), id), append([]string{"/waitdaemon"}, want.Args...), env, mounts)
	mountDevice(&spec, want.Device)
	return engine.Spec{Name: want.Name, Create: &planned{
		ID: id, Image: d.ctr.Image, Labels: withName(want.Labels, want.Name),
		Runtime: runtimeName(d.ctr), RuntimeOptions: runtimeOptions(d.ctr), Snapshotter: cmp.Or(d.ctr.Snapshotter, e.snapshotter()), SnapshotKey: id,
		Output: "file://" + e.logFile(id), Spec: &spec,
	}}
}

// defaultCaps are containerd's default capabilities: an unprivileged
// container's.
var defaultCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID",
	"CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// waiterSpec is the OCI runtime spec of a waiter: containerd's defaults
// for an unprivileged container (default capabilities, no new
// privileges, /proc's sensitive paths masked or read-only, no devices
// beyond runc's defaults), as root, with its own pid, ipc and mount
// namespaces and the host's network and UTS (it needs no network, and a
// new network namespace is most of a container start), in the cgroup
// cgroup (/<namespace>/<id>, or systemd's form: ocispec.CgroupsPath). It
// mounts /proc and a /dev, no /sys, and mounts.
func waiterSpec(cgroup string, args, env []string, mounts []ocispec.Mount) ocispec.Spec {
	caps := raw(defaultCaps)
	dev := []ocispec.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
	}
	return ocispec.Spec{
		OCIVersion: "1.1.0",
		Process: &ocispec.Process{
			User: ocispec.User{UID: 0, GID: 0}, Args: args, Env: env, Cwd: "/",
			Rest: ocispec.Rest{
				"capabilities":    raw(map[string]json.RawMessage{"bounding": caps, "effective": caps, "permitted": caps}),
				"noNewPrivileges": raw(true),
				"rlimits":         raw([]map[string]any{{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}}),
			},
		},
		Root:   &ocispec.Root{Path: "rootfs"},
		Mounts: append(dev, mounts...),
		Linux: &ocispec.Linux{
			Namespaces:  []ocispec.Namespace{{Type: "pid"}, {Type: "ipc"}, {Type: "mount"}},
			CgroupsPath: cgroup,
			Rest: ocispec.Rest{
				"maskedPaths": raw([]string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
					"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi"}),
				"readonlyPaths": raw([]string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}),
				"resources":     raw(map[string]any{"devices": []map[string]any{{"allow": false, "access": "rwm"}}}),
			},
		},
	}
}

// cgroupsPath is a spec's cgroup path, "" if it has none.
func cgroupsPath(s ocispec.Spec) string {
	if s.Linux == nil {
		return ""
	}
	return s.Linux.CgroupsPath
}

// bind is a bind mount of host path source at target.
func bind(source, target string, readOnly bool) ocispec.Mount {
	opt := "rw"
	if readOnly {
		opt = "ro"
	}
	return ocispec.Mount{Destination: target, Type: "bind", Source: source, Options: []string{"rbind", "rprivate", opt}}
}

// engineBind is engine.EngineBind as a mount, of the socket at source.
func engineBind(source string) ([]ocispec.Mount, string) {
	b, socket := engine.EngineBind(source, containerdapi.DefaultSocket)
	return []ocispec.Mount{bind(b.Host, b.Container, b.ReadOnly)}, socket
}

// socketSource is the host path of the socket bound into the action
// container at socket (engine.SocketSource), by its bind mounts.
func socketSource(mounts []ocispec.Mount, socket string) string {
	var binds []engine.Bind
	for _, m := range mounts {
		if m.Type == "bind" || strings.Contains(strings.Join(m.Options, ","), "bind") {
			binds = append(binds, engine.Bind{Host: m.Source, Container: m.Destination})
		}
	}
	return engine.SocketSource(binds, socket, containerdapi.DefaultSocket)
}

// outputPoll is how often Output looks for what the waiter told in its
// first second (outputQuick), when the word comes if all is well;
// outputSlow is how often it looks after that, so that a slow word (a
// result device slow to mount) is waited for with a few calls a second,
// not twenty, each of which a verbose trace shows.
const (
	outputPoll  = 50 * time.Millisecond
	outputQuick = time.Second
	outputSlow  = 250 * time.Millisecond
)

// Output passes on what the container told (Tell), until its task stops
// or ctx ends. Its real output goes to a host file that phase 1, in the
// action container, cannot see.
func (e *Engine) Output(ctx context.Context, ref string, w io.Writer) error {
	ctr, err := e.find(ctx, ref)
	if err != nil {
		return fmt.Errorf("following container %s: %w", ref, err)
	}
	said, began := "", time.Now()
	for {
		t, err := e.C.TaskGet(ctx, ctr.ID)
		stopped := errors.Is(err, containerdapi.ErrNotFound) || err == nil && t.Status == containerdapi.TaskStopped
		if err != nil && !stopped {
			return fmt.Errorf("following container %s: %w", ref, err)
		}
		// Read after the task's state: a line told before the exit is
		// in the labels when the exit is seen.
		if ctr, err = e.C.ContainerGet(ctx, ctr.ID); err != nil {
			return fmt.Errorf("following container %s: %w", ref, err)
		}
		if line := ctr.Labels[LabelSaid]; line != "" && line != said {
			said = line
			if _, err := io.WriteString(w, line+"\n"); err != nil {
				return err
			}
		}
		if stopped {
			return nil
		}
		poll := outputPoll
		if time.Since(began) >= outputQuick {
			poll = outputSlow
		}
		if !engine.Sleep(ctx, poll) {
			return ctx.Err()
		}
	}
}

// maxSaid bounds a told line, and a handed part: containerd refuses a
// label of more than 4096 bytes, key included, and one that is not UTF-8.
const maxSaid = 4000

// Tell puts line in the label LabelSaid of the container this process
// runs in (found by its cgroup path, else as Self finds the action), for
// Output to pass on.
func (e *Engine) Tell(ctx context.Context, line []byte) error {
	own, err := e.ownID(ctx)
	if err != nil {
		return fmt.Errorf("telling phase 1: %w", err)
	}
	if len(line) > maxSaid || !utf8.Valid(line) {
		return fmt.Errorf("telling phase 1: a line of %d bytes, more than a label holds, or not UTF-8", len(line))
	}
	if _, err := e.C.ContainerSetLabel(ctx, own, LabelSaid, string(line)); err != nil {
		return fmt.Errorf("telling phase 1: %w", err)
	}
	return nil
}

// cutRunes is s cut to at most limit bytes, at a rune's start.
func cutRunes(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	for limit > 0 && !utf8.RuneStart(s[limit]) {
		limit--
	}
	return s[:limit]
}

// ActionGone waits until the action container is gone (the agent
// deletes the task, then the container with its snapshot), or until by.
// It learns the deletion, and its time, from the daemon's events, and
// looks for the container besides (engine.WaitGone).
func (e *Engine) ActionGone(ctx context.Context, id string, by time.Time) (time.Time, bool) {
	return engine.WaitGone(ctx, by, e.watchDelete(id), func(ctx context.Context) bool {
		_, err := e.C.ContainerGet(ctx, id)
		return errors.Is(err, containerdapi.ErrNotFound)
	})
}

// watchDelete follows container id's deletion in the daemon's events.
func (e *Engine) watchDelete(id string) engine.Watch {
	return func(ctx context.Context) <-chan time.Time {
		deleted := make(chan time.Time, 1)
		go func() {
			defer close(deleted)
			sub, err := e.C.Subscribe(ctx, `topic=="`+containerdapi.TopicContainerDelete+`"`)
			if err != nil {
				return
			}
			defer sub.Close()
			for {
				ev, err := sub.Next()
				if err != nil {
					return
				}
				if d, err := ev.ContainerDelete(); err == nil && d.ID == id {
					deleted <- ev.Timestamp
					return
				}
			}
		}()
		return deleted
	}
}

// ActionExited waits for the action's task to exit, and returns when it
// did by the daemon's clock. tink-agent deletes the task 34–94 ms after
// any exit, and the container with it after an exit 0 alone: a task
// already gone whose container goes too, at once or within goneAsks
// asks, counts as removed now; one whose container stays ended in a
// failure, or in what tink-agent could not tell, and is an error that
// says its exit is unknown, so that nothing starts.
func (e *Engine) ActionExited(ctx context.Context, id string) (engine.Exit, error) {
	exit, err := e.waitTask(ctx, id, "the action container")
	if errors.Is(err, containerdapi.ErrNotFound) && ctx.Err() == nil {
		err = e.containerGone(ctx, id)
		if err == nil {
			return engine.Exit{At: time.Now(), Removed: true}, nil
		}
	}
	switch {
	case ctx.Err() != nil:
		return engine.Exit{At: time.Now()}, nil
	case err != nil:
		return engine.Exit{}, err
	}
	out := engine.Exit{At: exit.ExitedAt, Code: int(exit.Status), Known: true}
	if now := time.Now(); exit.ExitedAt.IsZero() || exit.ExitedAt.After(now) {
		out.At = now
	}
	return out, nil
}

// waitTask waits for container id's task to exit. A wait that breaks
// without an answer (the daemon restarting) is ErrNoAnswer: the task may
// well run on, and the caller asks again; one the daemon refuses while
// the task still runs (or may: see mayRun) is asked again after a
// second. One refused because the task was deleted meanwhile (tink-agent
// deletes the action's right after its exit, and the wait breaks off with
// the shim) is ErrNotFound.
func (e *Engine) waitTask(ctx context.Context, id, what string) (containerdapi.Exit, error) {
	for {
		exit, err := e.C.TaskWait(ctx, id)
		var lost *containerdapi.TransportError
		switch {
		case err == nil, ctx.Err() != nil, errors.Is(err, containerdapi.ErrNotFound):
			return exit, err
		case errors.As(err, &lost):
			return exit, fmt.Errorf("waiting for %s: %w: %w", what, engine.ErrNoAnswer, err)
		default:
			t, gerr := e.C.TaskGet(ctx, id)
			if errors.Is(gerr, containerdapi.ErrNotFound) {
				// Deleted while waited for (its shim gone, the wait
				// broken off): it has exited.
				return exit, fmt.Errorf("waiting for %s: %w (%w)", what, gerr, err)
			}
			if gerr != nil || !mayRun(t.Status) {
				return exit, fmt.Errorf("waiting for %s: %w", what, err)
			}
		}
		if !engine.Sleep(ctx, time.Second) {
			return exit, ctx.Err()
		}
	}
}

// maxTail bounds how much of a run's output Follow reads for its tail.
const maxTail = 1 << 20

// Follow waits for the run to end, and returns it with the last tail
// lines its task wrote to its output file since Start began it (the
// waiter sees the file through its bind of LogDir; since is not needed).
func (e *Engine) Follow(ctx context.Context, ref string, sent time.Time, tail int, since string) (engine.Run, error) {
	ctr, err := e.find(ctx, ref)
	if err != nil {
		return engine.Run{}, fmt.Errorf("following %s: %w", ref, err)
	}
	exit, err := e.waitTask(ctx, ctr.ID, ref)
	if err != nil {
		return engine.Run{}, fmt.Errorf("following %s: %w", ref, err)
	}
	var spec ocispec.Spec
	_ = json.Unmarshal(ctr.Spec.Value, &spec)
	e.mu.Lock()
	r, ok := e.runs[ctr.ID]
	e.mu.Unlock()
	if !ok {
		r.started = sent
	}
	finished := exit.ExitedAt
	if finished.IsZero() {
		finished = time.Now()
	}
	run := engine.Run{
		ExitCode: int(exit.Status), Image: ctr.Image, StartedAt: engine.Stamp(r.started), FinishedAt: engine.Stamp(finished), Output: []string{},
	}
	if spec.Process != nil {
		run.Command = spec.Process.Args
	}
	if tail > 0 {
		settle(ctx, e.logFile(ctr.ID))
		out, err := readFrom(e.logFile(ctr.ID), r.offset)
		if err != nil {
			engine.Log(e.Log, "could not read a container's output", map[string]string{"container": ref, "error": err.Error()})
		}
		run.Output = engine.Tail(out, tail)
	}
	return run, nil
}

// settleEvery is how long a task's output file must stay the same size
// to count as complete; settleFor bounds the wait.
const (
	settleEvery = 50 * time.Millisecond
	settleFor   = time.Second
)

// settle waits until file stops growing: the shim copies a task's output
// into it on its own, and can still be at it when the exit is reported.
func settle(ctx context.Context, file string) {
	size := int64(-1)
	for deadline := time.Now().Add(settleFor); time.Now().Before(deadline); {
		fi, err := os.Stat(file)
		if err != nil || fi.Size() == size {
			return
		}
		size = fi.Size()
		if !engine.Sleep(ctx, settleEvery) {
			return
		}
	}
}

// readFrom reads file from offset on, or its last maxTail bytes.
func readFrom(file string, offset int64) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	offset = max(offset, fi.Size()-maxTail)
	if offset > fi.Size() {
		offset = 0 // a new file
	}
	buf := make([]byte, fi.Size()-offset)
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return string(buf[:n]), nil
}

// mountDevice gives a waiter's spec the block device d, at the same path,
// and the right to mount it: CAP_SYS_ADMIN, and the device allowed in its
// cgroup besides none. The spec has no seccomp filter nor AppArmor
// profile to forbid mount. It gets no other device or capability.
func mountDevice(spec *ocispec.Spec, d *engine.Device) {
	if d == nil {
		return
	}
	caps := raw(append(slices.Clone(defaultCaps), "CAP_SYS_ADMIN"))
	spec.Process.Rest["capabilities"] = raw(map[string]json.RawMessage{"bounding": caps, "effective": caps, "permitted": caps})
	spec.Linux.Rest["devices"] = raw([]map[string]any{{"path": d.Path, "type": "b", "major": d.Major, "minor": d.Minor, "fileMode": 0o660, "uid": 0, "gid": 0}})
	spec.Linux.Rest["resources"] = raw(map[string]any{"devices": []map[string]any{
		{"allow": false, "access": "rwm"},
		{"allow": true, "type": "b", "major": d.Major, "minor": d.Minor, "access": "rwm"},
	}})
}

// raw is v as JSON, for a spec's fields kept raw.
func raw(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// goneAsks is how often ActionExited asks for the container of an
// action whose task is gone, a pause apart (3.5 s in all).
const goneAsks = 8

// containerGone waits, goneAsks asks at most, for the container of an
// action whose task is gone to go too, as tink-agent removes it after
// an exit 0; an error if it stays, as after a failure.
func (e *Engine) containerGone(ctx context.Context, id string) error {
	for ask := range goneAsks {
		_, err := e.C.ContainerGet(ctx, id)
		if errors.Is(err, containerdapi.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the action container's task is gone, and asking for the container: %w", err)
		}
		if ask < goneAsks-1 {
			if !engine.Sleep(ctx, engine.Backoff(ask)) {
				return context.Cause(ctx)
			}
		}
	}
	return fmt.Errorf("the action container's task is gone and the container %s stays, as tink-agent keeps that of an action that failed: its exit is unknown", id)
}
