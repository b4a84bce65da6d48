package containerdapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/testkit/grpcrr"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// These tests replay fixtures recorded from a real containerd 2.2.1 (see
// testdata/README.md). Each runs the real client, over HTTP/2 on a unix
// socket, against a fake daemon that plays the recording.

const (
	fixtures = "../testdata/fixtures"
	engine   = "containerd-2.2.1"
	// namespace keeps the recordings apart from whatever else runs on the
	// test containerd.
	namespace = "waitdaemon-rr"
	// fixtureImage is `make record`'s busybox image, imported by
	// testdata/record-containerd.sh.
	fixtureImage = "docker.io/library/waitdaemon-fixture:1"
	// The throwaway registries of testdata/record-containerd.sh: plain
	// HTTP, and with htpasswd (user rr, password rrPassword).
	registry     = "127.0.0.1:5010"
	authRegistry = "127.0.0.1:5011"
	rrPassword   = "rr-Secret-0b6f"
)

// platform is the recordings': the fixture image is amd64's busybox.
var platform = containerdapi.Platform{OS: "linux", Architecture: "amd64"}

func client(t *testing.T, name string) *containerdapi.Client {
	t.Helper()
	s := grpcrr.Open(t, fixtures, engine, name, containerdapi.Codec)
	c := &containerdapi.Client{Socket: s.Socket, Transport: s.Transport, Namespace: namespace}
	containerdapi.SetStreamIDs(c, "waitdaemon-rr-"+strings.ToLower(name))
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestVersion(t *testing.T) {
	c := client(t, "Version")
	v, err := c.Version(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.Version, "2.2.1") {
		t.Errorf("Version() = %+v, want 2.2.1", v)
	}
	ns, err := c.NamespaceList(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ns, func(n containerdapi.Namespace) bool { return n.Name == namespace }) {
		t.Errorf("NamespaceList() = %+v, want %s among them", ns, namespace)
	}
}

// TestUnimplemented calls a method no containerd has.
func TestUnimplemented(t *testing.T) {
	c := client(t, "Unimplemented")
	err := containerdapi.CallUnimplemented(ctx(t), c)
	var apiErr *containerdapi.Error
	if !errors.Is(err, containerdapi.ErrUnimplemented) || !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "unknown service") {
		t.Errorf("a call of an unknown service: error = %v, want Unimplemented: unknown service", err)
	}
}

// TestContainers creates, gets, lists, relabels and deletes a container,
// and meets AlreadyExists and NotFound.
func TestContainers(t *testing.T) {
	c := client(t, "Containers")
	ctx := ctx(t)
	const id = "rr-containers"
	want := containerdapi.Container{
		ID:      id,
		Labels:  map[string]string{"org.waitdaemon.action": "rr", "org.waitdaemon.role": "user"},
		Image:   fixtureImage,
		Runtime: containerdapi.Runtime{Name: containerdapi.RuncV2},
		Spec:    containerdapi.SpecAny([]byte(`{"ociVersion":"1.2.0","process":{"args":["true"],"env":["PATH=/bin","REGISTRY_PASSWORD=hunter2"],"cwd":"/"},"root":{"path":"rootfs"}}`)),
	}
	created, err := c.ContainerCreate(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	if created.ID != id || !maps.Equal(created.Labels, want.Labels) || created.Runtime.Name != containerdapi.RuncV2 || created.CreatedAt.IsZero() {
		t.Errorf("ContainerCreate() = %+v, want it as asked, with a creation time", created)
	}
	// Not a retry: a second create is a conflict.
	if _, err := c.ContainerCreate(ctx, want); !errors.Is(err, containerdapi.ErrAlreadyExists) {
		t.Errorf("second ContainerCreate() error = %v, want AlreadyExists", err)
	}
	got, err := c.ContainerGet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.TypeURL != containerdapi.SpecTypeURL || !json.Valid(got.Spec.Value) || got.Image != fixtureImage {
		t.Errorf("ContainerGet() spec %s %q image %q, want the spec and image created", got.Spec.TypeURL, got.Spec.Value, got.Image)
	}
	list, err := c.ContainerList(ctx, containerdapi.LabelFilter("org.waitdaemon.action", "rr"))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != id {
		t.Errorf("ContainerList(action rr) = %+v, want just %s", list, id)
	}
	list, err = c.ContainerList(ctx, containerdapi.LabelFilter("org.waitdaemon.action", "nobody"))
	if err != nil || len(list) != 0 {
		t.Errorf("ContainerList(action nobody) = %+v, %v; want none", list, err)
	}
	updated, err := c.ContainerSetLabel(ctx, id, "org.waitdaemon.state", "handed-off")
	wantLabels := map[string]string{"org.waitdaemon.action": "rr", "org.waitdaemon.role": "user", "org.waitdaemon.state": "handed-off"}
	if err != nil || !maps.Equal(updated.Labels, wantLabels) {
		t.Errorf("ContainerSetLabel() labels = %v, %v; want %v", updated.Labels, err, wantLabels)
	}
	updated, err = c.ContainerSetLabel(ctx, id, "org.waitdaemon.role", "")
	wantLabels = map[string]string{"org.waitdaemon.action": "rr", "org.waitdaemon.state": "handed-off"}
	if err != nil || !maps.Equal(updated.Labels, wantLabels) {
		t.Errorf("ContainerSetLabel(remove) labels = %v, %v; want %v", updated.Labels, err, wantLabels)
	}
	wantLabels = map[string]string{"only": "this"}
	updated, err = c.ContainerSetLabels(ctx, id, wantLabels)
	if err != nil || !maps.Equal(updated.Labels, wantLabels) || updated.Image != fixtureImage {
		t.Errorf("ContainerSetLabels() = labels %v image %q, %v; want labels %v and the image untouched", updated.Labels, updated.Image, err, wantLabels)
	}
	if err := c.ContainerDelete(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct {
		name string
		call func() error
	}{
		{"ContainerGet", func() error { _, err := c.ContainerGet(ctx, id); return err }},
		{"ContainerDelete", func() error { return c.ContainerDelete(ctx, id) }},
	} {
		name, err := call.name, call.call()
		var apiErr *containerdapi.Error
		if !errors.Is(err, containerdapi.ErrNotFound) || !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "not found") {
			t.Errorf("%s after the delete: error = %v, want NotFound", name, err)
		}
	}
}

// ociSpec is a minimal runtime spec for the fixture image.
func ociSpec(args ...string) []byte {
	spec := map[string]any{
		"ociVersion": "1.2.0",
		"process": map[string]any{
			"args": args, "env": []string{"PATH=/bin"}, "cwd": "/",
			"user":            map[string]any{"uid": 0, "gid": 0},
			"noNewPrivileges": true,
			"capabilities": map[string]any{
				"bounding":  []string{"CAP_KILL"},
				"effective": []string{"CAP_KILL"},
				"permitted": []string{"CAP_KILL"},
			},
		},
		"root":     map[string]any{"path": "rootfs"},
		"hostname": "rr",
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc"},
			{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		},
		"linux": map[string]any{
			"namespaces": []map[string]string{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}},
		},
	}
	data, _ := json.Marshal(spec)
	return data
}

// TestRunToExit runs the fixture image's sh to exit 3 the way a backend
// does: a lease, the image's config and chain ID, a snapshot, the
// container, the lease's end, the task with file:// output, an exit event,
// wait, start, and the clean-up.
func TestRunToExit(t *testing.T) {
	c := client(t, "RunToExit")
	ctx := ctx(t)
	const id = "rr-run-to-exit"
	log := filepath.Join(os.TempDir(), "waitdaemon-rr-run-to-exit.log")
	expires := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

	lease, err := c.LeaseCreate(ctx, id, expires)
	if err != nil {
		t.Fatal(err)
	}
	// (The recording dates every time the daemon answers alike.)
	if lease.ID != id || lease.Labels[containerdapi.LabelGCExpire] == "" || lease.CreatedAt.IsZero() {
		t.Errorf("LeaseCreate() = %+v, want %s, with an expiry and a creation time", lease, id)
	}
	lctx := containerdapi.WithLease(ctx, id)
	img, err := c.ImageUnpacked(lctx, fixtureImage, platform, containerdapi.DefaultSnapshotter)
	if err != nil {
		t.Fatal(err)
	}
	if img.Image.Name != fixtureImage || len(img.Manifest.Layers) == 0 || img.Config.Config.Labels["org.waitdaemon.fixture"] != "1" ||
		!strings.HasPrefix(img.ChainID, "sha256:") || !slices.Equal(img.Config.Config.Env, []string{"PATH=/bin"}) {
		t.Errorf("ImageResolve() = %+v, want the fixture image's manifest, config (its label, PATH=/bin) and chain ID", img)
	}
	mounts, err := c.SnapshotPrepare(lctx, containerdapi.DefaultSnapshotter, id, img.ChainID)
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 1 || mounts[0].Type != "overlay" || !slices.ContainsFunc(mounts[0].Options, func(o string) bool { return strings.HasPrefix(o, "upperdir=") }) {
		t.Errorf("SnapshotPrepare() = %+v, want one overlay with an upperdir", mounts)
	}
	_, err = c.ContainerCreate(lctx, containerdapi.Container{
		ID:          id,
		Labels:      map[string]string{"org.waitdaemon.action": "rr-run-to-exit"},
		Image:       fixtureImage,
		Runtime:     containerdapi.Runtime{Name: containerdapi.RuncV2},
		Spec:        containerdapi.SpecAny(ociSpec("sh", "-c", "echo out; echo err >&2; exit 3")),
		Snapshotter: containerdapi.DefaultSnapshotter,
		SnapshotKey: id,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.LeaseDelete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	// The container holds its snapshot now that the lease is gone.
	again, err := c.SnapshotMounts(ctx, containerdapi.DefaultSnapshotter, id)
	if err != nil || len(again) != 1 || !slices.Equal(again[0].Options, mounts[0].Options) {
		t.Errorf("SnapshotMounts() after the lease's end = %+v, %v; want the prepared mounts", again, err)
	}
	sub, err := c.Subscribe(ctx, `topic=="/tasks/exit"`)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pid, err := c.TaskCreate(ctx, id, containerdapi.TaskSpec{Rootfs: mounts, Stdout: "file://" + log, Stderr: "file://" + log})
	if err != nil {
		t.Fatal(err)
	}
	if pid == 0 {
		t.Errorf("TaskCreate() pid = 0, want the init's")
	}
	task, err := c.TaskGet(ctx, id)
	if err != nil || task.Status != containerdapi.TaskCreated || task.Pid != pid {
		t.Errorf("TaskGet() before the start = %+v, %v; want created, pid %d", task, err, pid)
	}
	type waited struct {
		exit containerdapi.Exit
		err  error
	}
	waitc := make(chan waited, 1)
	go func() {
		e, err := c.TaskWait(ctx, id)
		waitc <- waited{e, err}
	}()
	time.Sleep(100 * time.Millisecond) // the wait is in before the start
	if _, err := c.TaskStart(ctx, id); err != nil {
		t.Fatal(err)
	}
	w := <-waitc
	if w.err != nil || w.exit.Status != 3 || w.exit.ExitedAt.IsZero() {
		t.Errorf("TaskWait() = %+v, %v; want exit 3 and a time", w.exit, w.err)
	}
	ev, err := sub.Next()
	if err != nil {
		t.Fatal(err)
	}
	exit, err := ev.TaskExit()
	if err != nil || ev.Topic != containerdapi.TopicTaskExit || ev.Namespace != namespace || exit.ContainerID != id || exit.ExitStatus != 3 {
		t.Errorf("the exit event = %+v %+v, %v; want %s's exit 3 in %s", ev, exit, err, id, namespace)
	}
	tasks, err := c.TaskList(ctx, "")
	if err != nil || len(tasks) != 1 || tasks[0].ID != id || tasks[0].Status != containerdapi.TaskStopped || tasks[0].ExitStatus != 3 {
		t.Errorf("TaskList() = %+v, %v; want %s stopped, exit 3", tasks, err, id)
	}
	del, err := c.TaskDelete(ctx, id)
	if err != nil || del.Status != 3 {
		t.Errorf("TaskDelete() = %+v, %v; want exit 3", del, err)
	}
	if _, err := c.TaskWait(ctx, id); !errors.Is(err, containerdapi.ErrNotFound) {
		t.Errorf("TaskWait() after the delete: error = %v, want NotFound", err)
	}
	if err := c.ContainerDelete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.SnapshotRemove(ctx, containerdapi.DefaultSnapshotter, id); err != nil {
		t.Fatal(err)
	}
	if rr.Recording(engine) {
		out, err := os.ReadFile(log)
		os.Remove(log)
		if err != nil || string(out) != "out\nerr\n" && string(out) != "err\nout\n" {
			t.Errorf("the task's file:// output = %q, %v; want out and err", out, err)
		}
	}
}

// TestPull has the daemon pull from a local registry over plain HTTP,
// with progress, then finds the image and its unpacked snapshot.
func TestPull(t *testing.T) {
	c := client(t, "Pull")
	ctx := ctx(t)
	ref := registry + "/rr/good:1"
	var events []containerdapi.Progress
	err := c.Pull(ctx, containerdapi.PullRequest{Ref: ref, Platform: platform, Progress: func(p containerdapi.Progress) { events = append(events, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(p containerdapi.Progress) bool { return p.Event == "complete" || p.Event == "saved" }) {
		t.Errorf("Pull() progress = %+v, want it to say it completed", events)
	}
	img, err := c.ImageUnpacked(ctx, ref, platform, containerdapi.DefaultSnapshotter)
	if err != nil || img.Image.Name != ref || len(img.Config.RootFS.DiffIDs) == 0 {
		t.Errorf("ImageUnpacked() after the pull = %+v, %v; want it resolved and unpacked", img, err)
	}
}

// TestPullAuth pulls from a registry that wants a login: the daemon asks
// for the host's credentials on the auth stream. Neither the secret nor
// the username is traced or recorded.
func TestPullAuth(t *testing.T) {
	c := client(t, "PullAuth")
	var trace traceBuffer
	c.Trace = &trace
	ctx := ctx(t)
	ref := authRegistry + "/rr/good:1"
	var asked []string
	auth := containerdapi.StaticAuth(authRegistry, "rr", rrPassword)
	err := c.Pull(ctx, containerdapi.PullRequest{Ref: ref, Platform: platform, Auth: func(host, r string) (string, string, bool) {
		asked = append(asked, host+" "+r)
		return auth(host, r)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) == 0 || asked[0] != authRegistry+" "+ref {
		t.Errorf("Pull() asked for credentials for %q, want %s", asked, authRegistry)
	}
	if _, err := c.ImageGet(ctx, ref); err != nil {
		t.Errorf("ImageGet() after the pull: %v", err)
	}
	for _, want := range []string{
		`"type_url": "containerd.types.transfer.AuthRequest"`,
		`"host": "` + authRegistry + `"`,
		`"secret": "<redacted>"`,
		`"username": "<redacted>"`,
	} {
		if !strings.Contains(trace.String(), want) {
			t.Errorf("the trace lacks %s:\n%s", want, trace.String())
		}
	}
	// The whole credential is hidden, as Docker's X-Registry-Auth is.
	if strings.Contains(trace.String(), rrPassword) || strings.Contains(trace.String(), `"username": "rr"`) {
		t.Errorf("the trace shows the registry's password or username:\n%s", trace.String())
	}
	data, err := os.ReadFile(filepath.Join(fixtures, engine, "PullAuth.json"))
	if err == nil && (strings.Contains(string(data), rrPassword) || strings.Contains(string(data), `"username": "rr"`)) {
		t.Errorf("PullAuth.json holds the registry's password or username")
	}
}

// TestPullMissing pulls a tag the registry does not have.
func TestPullMissing(t *testing.T) {
	c := client(t, "PullMissing")
	err := c.Pull(ctx(t), containerdapi.PullRequest{Ref: registry + "/rr/missing:1", Platform: platform})
	if !errors.Is(err, containerdapi.ErrNotFound) {
		t.Errorf("Pull(missing) error = %v, want NotFound", err)
	}
	_, err = c.ImageGet(ctx(t), registry+"/rr/missing:1")
	if !errors.Is(err, containerdapi.ErrNotFound) {
		t.Errorf("ImageGet(missing) error = %v, want NotFound", err)
	}
}
