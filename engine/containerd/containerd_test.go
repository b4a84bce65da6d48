package containerd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/containerd/ocispec"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/testkit/grpcrr"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// These tests replay fixtures recorded from the test containerd 2.2.1
// (testdata/fixtures/containerd-2.2.1/Engine*.json; see
// testdata/README.md): each runs the engine and the real client, over
// HTTP/2 on a unix socket, against a fake daemon that plays the
// recording, and checks the calls' order in the client's trace. Record
// them again with
//
//	CONTAINERD_ADDRESS=/run/containerd-test/containerd.sock go test ./engine/containerd/ -run 'TestEngine' -record=containerd-2.2.1
//
// (make record-containerd does, after importing the fixture image).

const (
	fixtures   = "../../testdata/fixtures"
	recordedBy = "containerd-2.2.1"
	namespace  = "waitdaemon-rr"
	// fixtureImage is the busybox image testdata/record-containerd.sh
	// imports into namespace.
	fixtureImage = "docker.io/library/waitdaemon-fixture:1"
	// fixtureConfig is the digest of its config, as recorded.
	fixtureConfig = "sha256:8e7c6eb46f069f9889746b91ffe6c78762bd9510c11829af0180a852b432def6"
	// logDir is where the tasks' output goes: the shim writes there when
	// recording; the test writes what it would when replaying.
	logDir = "/tmp/waitdaemon-rr-engine"
	// hostDir is a directory every recording machine has, bound as the
	// action's volumes.
	hostDir = "/var/tmp"
)

// recording reports whether the fixtures are being recorded.
func recording() bool { return rr.Recording(recordedBy) }

// trace collects the client's trace.
type trace struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (t *trace) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.Write(p)
}

// calls returns the methods called so far, in order, short
// ("Tasks/Create"), and forgets them.
func (t *trace) calls() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, l := range strings.Split(t.buf.String(), "\n") {
		if m, ok := strings.CutPrefix(l, "> containerd.services."); ok && !strings.Contains(m, ":") {
			out = append(out, m[strings.LastIndex(m, ".")+1:])
		}
	}
	t.buf.Reset()
	return out
}

// testEngine returns an engine on the fixture name, with IDs and times
// fixed, and its trace.
func testEngine(t *testing.T, name string) (*Engine, *trace) {
	t.Helper()
	s := grpcrr.Open(t, fixtures, recordedBy, name, containerdapi.Codec)
	tr := &trace{}
	c := &containerdapi.Client{Socket: s.Socket, Transport: s.Transport, Namespace: namespace, Trace: tr}
	containerdapi.SetStreamIDs(c, "waitdaemon-rr-"+strings.ToLower(name))
	n := 0
	e := New(c)
	e.LogDir = logDir
	e.newSuffix = func() string { n++; return fmt.Sprintf("%08x", n) }
	e.now = func() time.Time { return time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC) }
	e.ProcSelf = t.TempDir()
	// The fixture image has no /etc (testdata/fixture-image): its user
	// database is given as read, empty, by its config's digest, rather
	// than have the recordings hold its three 2 MB layers, read whole to
	// find no /etc/passwd or /etc/group in them.
	e.userDBs = map[string]*ocispec.UserDB{fixtureConfig: {}}
	// The recording host's root, as the recordings saw it: all three
	// /etc files.
	e.HostRoot = t.TempDir()
	if err := os.Mkdir(filepath.Join(e.HostRoot, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range ocispec.HostFiles {
		if err := os.WriteFile(filepath.Join(e.HostRoot, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e, tr
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// hexID is a 64-hex ID like tink-agent's, fixed by seed.
func hexID(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return hex.EncodeToString(sum[:])
}

// actionSpec is an action container's spec as tink-agent makes one,
// unprivileged: pid private, network host, a volume, the registry
// config (withheld), and /etc files from a temporary directory (here
// the host's own, which every recording machine has).
func actionSpec(id string) []byte {
	caps := []string{"CAP_CHOWN", "CAP_KILL", "CAP_SETUID", "CAP_SETGID"}
	spec := map[string]any{
		"ociVersion": "1.2.0",
		"process": map[string]any{
			"user": map[string]any{"uid": 0, "gid": 0}, "args": []string{"sleep", "30"}, "cwd": "/",
			"env":             []string{"PATH=/bin", "OPERATOR=kept", "IMAGE=" + fixtureImage, "WAIT_SECONDS=5", "WAITDAEMON_RETRIES=1"},
			"capabilities":    map[string]any{"bounding": caps, "effective": caps, "permitted": caps},
			"noNewPrivileges": true,
		},
		"root": map[string]any{"path": "rootfs"},
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc"},
			{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{"destination": "/data", "type": "bind", "source": hostDir, "options": []string{"rbind", "rw"}},
			{"destination": "/root/.docker", "type": "bind", "source": hostDir, "options": []string{"rbind", "ro"}},
			{"destination": "/run/containerd/containerd.sock", "type": "bind", "source": "/run/containerd-test/containerd.sock", "options": []string{"rbind", "rw"}},
			{"destination": "/etc/hosts", "type": "bind", "source": "/etc/hosts", "options": []string{"bind", "rprivate", "rw"}},
		},
		"linux": map[string]any{
			"namespaces":  []map[string]string{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}},
			"cgroupsPath": "/" + namespace + "/" + id,
			"resources":   map[string]any{"devices": []map[string]any{{"allow": false, "access": "rwm"}}},
		},
	}
	data, _ := json.Marshal(spec)
	return data
}

// startAction makes and starts an action container the way tink-agent
// does, running sleep, and returns the mounts of its snapshot. The test
// removes it with the engine (as a test of Remove).
func startAction(t *testing.T, ctx context.Context, c *containerdapi.Client, id, name string) []containerdapi.Mount {
	t.Helper()
	img, err := c.ImageUnpacked(ctx, fixtureImage, containerdapi.Platform{OS: "linux", Architecture: "amd64"}, containerdapi.DefaultSnapshotter)
	if err != nil {
		t.Fatal(err)
	}
	lease := "rr-" + id[:8]
	if _, err := c.LeaseCreate(ctx, lease, time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	lctx := containerdapi.WithLease(ctx, lease)
	key := name + "-" + id[:8]
	mounts, err := c.SnapshotPrepare(lctx, containerdapi.DefaultSnapshotter, key, img.ChainID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ContainerCreate(lctx, containerdapi.Container{
		ID: id, Image: fixtureImage, Labels: map[string]string{labelNerdctlName: name},
		Runtime: containerdapi.Runtime{Name: containerdapi.RuncV2}, Spec: containerdapi.SpecAny(actionSpec(id)),
		Snapshotter: containerdapi.DefaultSnapshotter, SnapshotKey: key,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.LeaseDelete(ctx, lease, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TaskCreate(ctx, id, containerdapi.TaskSpec{Rootfs: mounts}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TaskStart(ctx, id); err != nil {
		t.Fatal(err)
	}
	return mounts
}

// inOrder reports whether each of want occurs in calls, in that order.
func inOrder(calls []string, want ...string) bool {
	i := 0
	for _, c := range calls {
		if i < len(want) && c == want[i] {
			i++
		}
	}
	return i == len(want)
}

// TestEngineSelf finds a running action container by its cgroup path,
// then by its root overlay's upperdir, then by the override (its nerdctl
// name); Remove then kills and deletes its task before the container.
func TestEngineSelf(t *testing.T) {
	e, tr := testEngine(t, "EngineSelf")
	ctx := testCtx(t)
	id, name := hexID("self"), "tinkerbell_self_01JRR0000000000000000SELF"
	mounts := startAction(t, ctx, e.C, id, name)
	upper, _ := upperdir(mounts)

	write := func(file, content string) {
		if err := os.WriteFile(filepath.Join(e.ProcSelf, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		how, cgroup, mountinfo, override string
	}{
		{how: "cgroup", cgroup: "12:pids:/" + namespace + "/" + id + "\n0::/" + namespace + "/" + id + "\n", mountinfo: "garbage\n"},
		{how: "mountinfo", cgroup: "0::/\n", mountinfo: "72 48 0:38 / / rw,relatime - overlay overlay rw,lowerdir=/x,upperdir=" + upper + ",workdir=/y\n"},
		{how: "override", override: name},
	}
	for _, tc := range cases {
		write("cgroup", tc.cgroup)
		write("mountinfo", tc.mountinfo)
		s, err := e.Self(ctx, tc.override)
		if err != nil {
			t.Fatalf("Self by %s: %v", tc.how, err)
		}
		if s.ID != id || s.Name != name || s.FoundBy != tc.how || !slices.Contains(s.Env, "OPERATOR=kept") {
			t.Errorf("Self by %s = %+v, want %s named %s, its env", tc.how, s, id, name)
		}
	}
	tr.calls()

	// Its output directory goes with it.
	out := filepath.Join(e.LogDir, id)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "log"), []byte("output\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("after Remove, its output directory %s: %v, want it gone", out, err)
	}
	if calls := tr.calls(); !inOrder(calls, "Tasks/Kill", "Tasks/Delete", "Containers/Delete", "Snapshots/Remove") {
		t.Errorf("Remove called %q, want the task killed and deleted before the container, then its snapshot", calls)
	}
	// Gone, the container is still removed, and not found.
	if err := e.Remove(ctx, id); err != nil {
		t.Errorf("Remove of a container that is gone: %v, want nil", err)
	}
	write("cgroup", "0::/"+namespace+"/"+id+"\n")
	write("mountinfo", "")
	_, err := e.Self(ctx, "")
	var inputErr engine.InputError
	if !errors.As(err, &inputErr) || !strings.Contains(err.Error(), "WAITDAEMON_CONTAINER") {
		t.Errorf("Self of a container gone: %v, want bad input naming WAITDAEMON_CONTAINER", err)
	}
}

// upperdir returns the upperdir of a snapshot's mounts.
func upperdir(mounts []containerdapi.Mount) (string, bool) {
	for _, m := range mounts {
		for _, o := range m.Options {
			if u, ok := strings.CutPrefix(o, "upperdir="); ok {
				return u, true
			}
		}
	}
	return "", false
}

// TestEngineRun plans a user container from a running action, creates
// it (lease, snapshot, container, task, in that order), creates it again
// as after a lost answer (it adopts its own), lists it as never run,
// starts it, follows its run, re-runs it on a new task, keeps it,
// tells and reads the waiter's answer, waits for the action's exit (and,
// its task deleted and its container kept, finds its exit unknown), and
// removes both. The eight Containers/Get after the last Tasks/Wait were
// added to the recording by hand, copies of the recorded one that
// follows them.
func TestEngineRun(t *testing.T) {
	e, tr := testEngine(t, "EngineRun")
	ctx := testCtx(t)
	os.RemoveAll(logDir)
	t.Cleanup(func() { os.RemoveAll(logDir) })
	id, name := hexID("run"), "tinkerbell_run_01JRR00000000000000000RUN"
	startAction(t, ctx, e.C, id, name)
	if err := os.WriteFile(filepath.Join(e.ProcSelf, "cgroup"), []byte("0::/"+namespace+"/"+id+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := e.Self(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := imageref.Parse("waitdaemon-fixture:1")
	if ok, err := e.HasImage(ctx, ref); !ok || err != nil {
		t.Errorf("HasImage(%s) = %v, %v; want true", ref, ok, err)
	}
	missing, _ := imageref.Parse("waitdaemon-fixture:missing")
	if ok, err := e.HasImage(ctx, missing); ok || err != nil {
		t.Errorf("HasImage(%s) = %v, %v; want false", missing, ok, err)
	}

	// Plan: what travels, what is rebuilt.
	userName := name + "-waitdaemon-user"
	labels := map[string]string{"org.waitdaemon.role": "user", "org.waitdaemon.action-id": id}
	spec, err := e.Plan(ctx, self, engine.Want{
		Name: userName, Image: ref, Labels: labels, Withhold: []string{"/root/.docker"},
		Command: []string{"sh", "-c", "echo run; exit 3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := spec.Create.(*planned)
	wantID := "tinkerbell_run_01JRR00000000000000000RUN-waitdaemon-user-00000001"
	if spec.Name != userName || p.ID != wantID || p.SnapshotKey != wantID || p.Labels[LabelName] != userName ||
		p.Labels["org.waitdaemon.role"] != "user" || p.Image != fixtureImage || p.Output != "file://"+logDir+"/"+wantID+"/log" {
		t.Errorf("Plan() = %s %+v, want %s with its readable name in a label, the role, the image and its own output file", spec.Name, p, wantID)
	}
	s := p.Spec
	var nsTypes, dests []string
	for _, ns := range s.Linux.Namespaces {
		nsTypes = append(nsTypes, ns.Type)
	}
	for _, m := range s.Mounts {
		dests = append(dests, m.Destination)
	}
	if spec.Note != "" {
		t.Errorf("Plan() note %q on the host's network, want none", spec.Note)
	}
	if !slices.Equal(nsTypes, []string{"pid", "ipc", "uts", "mount"}) || s.Linux.CgroupsPath != "/"+namespace+"/"+wantID {
		t.Errorf("plan namespaces %q cgroup %s, want the action's (no network: the host's), in /%s/%s", nsTypes, s.Linux.CgroupsPath, namespace, wantID)
	}
	if !slices.Equal(s.Process.Args, []string{"sh", "-c", "echo run; exit 3"}) || !slices.Contains(s.Process.Env, "OPERATOR=kept") ||
		slices.ContainsFunc(s.Process.Env, func(kv string) bool { return strings.HasPrefix(kv, "IMAGE=") || strings.HasPrefix(kv, "WAITDAEMON_") }) {
		t.Errorf("plan args %q env %q, want the command, the operator's env without waitdaemon's", s.Process.Args, s.Process.Env)
	}
	if !slices.Contains(dests, "/data") || slices.Contains(dests, "/root/.docker") || !slices.Contains(dests, "/etc/resolv.conf") {
		t.Errorf("plan mounts %q, want the volume, not the registry config, and the host's /etc files", dests)
	}
	for _, m := range s.Mounts {
		if m.Destination == "/etc/hosts" && (m.Source != "/etc/hosts" || !slices.Contains(m.Options, "ro")) {
			t.Errorf("plan /etc/hosts = %+v, want the host's, read-only, never the agent's temporary copy", m)
		}
	}
	if _, err := json.Marshal(spec); err != nil {
		t.Errorf("the plan does not print: %v", err)
	}
	tr.calls()

	// Create, and again as if the answer had been lost.
	got, err := e.Create(ctx, spec)
	if err != nil || got != wantID {
		t.Fatalf("Create() = %s, %v; want %s", got, err, wantID)
	}
	if calls := tr.calls(); !inOrder(calls, "Leases/Create", "Snapshots/Prepare", "Containers/Create", "Leases/Delete", "Tasks/Create") {
		t.Errorf("Create called %q, want a lease, the snapshot, the container, the lease's end, then the task", calls)
	}
	if again, err := e.Create(ctx, spec); err != nil || again != wantID {
		t.Errorf("Create() again, as after a lost answer = %s, %v; want its own container adopted", again, err)
	}
	list, err := e.List(ctx, "org.waitdaemon.action-id", id)
	if err != nil || len(list) != 1 || list[0].ID != wantID || list[0].Name != userName || list[0].Ran || list[0].Running || list[0].State != "created" {
		t.Errorf("List() = %+v, %v; want the user container by its readable name, created, never run", list, err)
	}

	// Two runs; the second on a new task, its tail its own.
	for n, want := range []string{"run", "run"} {
		if err := e.Start(ctx, userName); err != nil {
			t.Fatalf("Start() run %d: %v", n+1, err)
		}
		if !recording() { // the shim's part
			if err := os.MkdirAll(filepath.Dir(e.logFile(wantID)), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(e.logFile(wantID), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(f, "%s\n", want)
			f.Close()
		}
		r, err := e.Follow(ctx, userName, time.Now(), 5, "")
		if err != nil {
			t.Fatal(err)
		}
		if r.ExitCode != 3 || r.Image != fixtureImage || r.Command[0] != "sh" || !slices.Equal(r.Output, []string{want}) || r.FinishedAt == "" {
			t.Errorf("Follow() run %d = %+v, want exit 3, the image and command, and only this run's output %q", n+1, r, want)
		}
		calls := tr.calls()
		if n == 1 && !inOrder(calls, "Tasks/Get", "Tasks/Delete", "Snapshots/Mounts", "Tasks/Create", "Tasks/Start") {
			t.Errorf("a re-run's Start called %q, want the stopped task deleted and a new one created", calls)
		}
	}
	list, err = e.List(ctx, "org.waitdaemon.action-id", id)
	if err != nil || len(list) != 1 || !list[0].Ran || list[0].Running || list[0].State != "stopped" {
		t.Errorf("List() after the runs = %+v, %v; want it ran", list, err)
	}
	kept, err := e.Keep(ctx, list[0], userName+"-earlier")
	if err != nil || kept != userName+"-earlier" {
		t.Errorf("Keep() = %q, %v", kept, err)
	}
	if list, _ := e.List(ctx, "org.waitdaemon.action-id", id); len(list) != 1 || list[0].Name != userName+"-earlier" || list[0].ID != wantID {
		t.Errorf("List() after Keep = %+v, want it under its own ID, named as kept", list)
	}

	// The waiter's answer: told by the action here (it finds itself by
	// its cgroup), read by Output.
	if err := e.Tell(ctx, []byte(`{"msg":"result file writable"}`)); err != nil {
		t.Fatal(err)
	}
	octx, cancel := context.WithCancel(ctx)
	var out bytes.Buffer
	err = e.Output(octx, id, writerFunc(func(p []byte) (int, error) { cancel(); return out.Write(p) }))
	if out.String() != "{\"msg\":\"result file writable\"}\n" || !errors.Is(err, context.Canceled) {
		t.Errorf("Output() wrote %q, %v; want the line told", out.String(), err)
	}

	// The action exits; then its task is gone.
	exited := make(chan engine.Exit, 1)
	go func() {
		x, err := e.ActionExited(ctx, id)
		if err != nil {
			t.Error(err)
		}
		exited <- x
	}()
	if recording() {
		time.Sleep(200 * time.Millisecond) // the wait is in before the kill
	}
	if err := e.C.TaskKill(ctx, id, 9, true); err != nil {
		t.Fatal(err)
	}
	if x := <-exited; x.Removed || x.At.IsZero() || !x.Known || x.Code != 137 {
		t.Errorf("ActionExited() = %+v, want the exit's time and code 137 (SIGKILL)", x)
	}
	if _, err := e.C.TaskDelete(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Its container stays, as tink-agent keeps a failed action's: the
	// exit is unknown, once asked for eight times (3.5 s).
	if x, err := e.ActionExited(ctx, id); err == nil || !strings.Contains(err.Error(), "its exit is unknown") || x.Removed {
		t.Errorf("ActionExited() of a deleted task whose container stays = %+v, %v; want its exit unknown", x, err)
	}
	tr.calls()
	for _, c := range []string{wantID, id} {
		if err := e.Remove(ctx, c); err != nil {
			t.Errorf("Remove(%s): %v", c, err)
		}
	}
	if calls := tr.calls(); slices.Contains(calls, "Tasks/Kill") || !inOrder(calls, "Tasks/Delete", "Containers/Delete", "Snapshots/Remove", "Containers/Delete", "Snapshots/Remove") {
		t.Errorf("Remove of stopped containers called %q, want no kill, the task deleted first", calls)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
