package e2e

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine/containerd"
	"github.com/waitdaemon/waitdaemon/phase"
)

// The test containerd (`make containerd`) and its ctr.
const (
	containerdSocket = "/run/containerd-test/containerd.sock"
	ctrBinary        = "/var/cache/waitdaemon/containerd-v2.2.1/ctr"
	containerdNS     = "tinkerbell"
)

// requireContainerd returns a client for the test containerd, or fails
// the test saying how to start one.
func requireContainerd(t *testing.T) *containerdapi.Client {
	t.Helper()
	c := &containerdapi.Client{Socket: containerdSocket, Namespace: containerdNS, WaitForEngine: 2 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Version(ctx); err != nil {
		t.Fatalf("this test needs the test containerd on %s, and none answers: %v\nstart it with `make containerd`", containerdSocket, err)
	}
	return c
}

// importImages copies Docker images into the test containerd's
// namespace, unpacked, as docker.io/library/NAME:TAG.
func importImages(t *testing.T, images ...string) {
	t.Helper()
	save := exec.Command("docker", append([]string{"save"}, images...)...)
	imp := exec.Command(ctrBinary, "-a", containerdSocket, "-n", containerdNS, "images", "import", "-")
	pipe, err := save.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	imp.Stdin = pipe
	var out strings.Builder
	imp.Stdout, imp.Stderr = &out, &out
	if err := save.Start(); err != nil {
		t.Fatal(err)
	}
	if err := imp.Run(); err != nil {
		t.Fatalf("importing %v into containerd: %v\n%s", images, err, out.String())
	}
	if err := save.Wait(); err != nil {
		t.Fatalf("docker save %v: %v", images, err)
	}
}

// actionSpec is the spec of an action container as tink-agent makes one
// (see testdata/ocispec), but unprivileged, which is all these machines
// can start: waitdaemon's ENTRYPOINT and the action's command, its env,
// pid and network host, the /run tmpfs, the volumes, and /etc files
// from a temporary directory.
func actionSpec(id string, args, env []string, volumes [][2]string, etc string) []byte {
	caps := []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID",
		"CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}
	mounts := []map[string]any{
		{"destination": "/proc", "type": "proc", "source": "proc", "options": []string{"nosuid", "noexec", "nodev"}},
		{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{"destination": "/run", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
	}
	for _, v := range volumes {
		mounts = append(mounts, map[string]any{"destination": v[1], "type": "bind", "source": v[0], "options": []string{"rbind", "rw"}})
	}
	for _, f := range []string{"resolv.conf", "hosts", "hostname"} {
		mounts = append(mounts, map[string]any{"destination": "/etc/" + f, "type": "bind", "source": filepath.Join(etc, f), "options": []string{"bind", "rprivate", "rw"}})
	}
	spec := map[string]any{
		"ociVersion": "1.1.0",
		"process": map[string]any{
			"user": map[string]any{"uid": 0, "gid": 0}, "args": args, "env": env, "cwd": "/",
			"capabilities":    map[string]any{"bounding": caps, "effective": caps, "permitted": caps},
			"noNewPrivileges": true,
		},
		"root":   map[string]any{"path": "rootfs"},
		"mounts": mounts,
		"linux": map[string]any{
			"namespaces":  []map[string]string{{"type": "ipc"}, {"type": "uts"}, {"type": "mount"}},
			"cgroupsPath": "/" + containerdNS + "/" + id,
			"maskedPaths": []string{"/proc/kcore", "/proc/keys"},
			"resources":   map[string]any{"devices": []map[string]any{{"allow": false, "access": "rwm"}}},
		},
	}
	data, _ := json.Marshal(spec)
	return data
}

// TestContainerdEngine runs an action on the test containerd the way
// tink-agent does (a random 64-hex ID, nerdctl's name label, pid and
// network host, the socket as a volume, the output to a file), with
// waitdaemon's image as the action's and the probe as IMAGE: phase 1
// finds itself, hands off and exits 0; the agent deletes the action;
// the waiter runs the probe, which must see the action's env, volumes
// and namespaces, and writes the result file; then nothing but the
// stopped waiter is left.
func TestContainerdEngine(t *testing.T) {
	c := requireContainerd(t)
	setup(t) // builds the images, on the Docker engine
	actionImg := cmp.Or(os.Getenv("E2E_CONTAINERD_ACTION_IMAGE"), actionImage)
	importImages(t, actionImg, probeImage)
	qualified := func(ref string) string { return "docker.io/library/" + ref }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	idb := make([]byte, 32)
	_, _ = rand.Read(idb)
	id := hex.EncodeToString(idb)
	name := "tinkerbell_cd-e2e_01JE2E" + strings.ToUpper(id[:20])
	eng := containerd.New(c)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		list, _ := eng.List(cctx, phase.LabelActionID, id)
		for _, l := range list {
			if err := eng.Remove(cctx, l.ID); err != nil {
				t.Errorf("cleaning up %s: %v", l.ID, err)
			}
			// The tasks' output files, which the shim leaves on the host.
			_ = os.RemoveAll(filepath.Join(containerd.DefaultLogDir, l.ID))
		}
		if err := eng.Remove(cctx, id); err != nil {
			t.Errorf("cleaning up the action: %v", err)
		}
	})

	out, etc := t.TempDir(), t.TempDir()
	for _, f := range []string{"resolv.conf", "hosts", "hostname"} {
		data, err := os.ReadFile("/etc/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(etc, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	resultDir := t.TempDir()
	img, err := c.ImageUnpacked(ctx, qualified(actionImg), containerdapi.DefaultPlatform(), containerdapi.DefaultSnapshotter)
	if err != nil {
		t.Fatalf("the imported action image: %v", err)
	}
	args := append(slices.Clone(img.Config.Config.Entrypoint), "--probe-arg", "two words")
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"IMAGE=" + qualified(probeImage), "WAIT_SECONDS=1", "WAITDAEMON_ENGINE=containerd",
		"WAITDAEMON_RESULT_FILE=" + filepath.Join(resultDir, "result.json"),
		"PROBE_DIR=/out", "PROBE_NAME=user", "OPERATOR_SETTING=kept",
	}
	volumes := [][2]string{{containerdSocket, containerdapi.DefaultSocket}, {out, "/out"}}
	actionLog := filepath.Join(t.TempDir(), "action.log")

	// tink-agent's create: lease, snapshot, container, task; then wait
	// and start.
	lease := "e2e-" + id[:12]
	if _, err := c.LeaseCreate(ctx, lease, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	lctx := containerdapi.WithLease(ctx, lease)
	key := name + "-" + id[:8]
	mounts, err := c.SnapshotPrepare(lctx, containerdapi.DefaultSnapshotter, key, img.ChainID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ContainerCreate(lctx, containerdapi.Container{
		ID: id, Image: qualified(actionImg), Labels: map[string]string{"nerdctl/name": name, "nerdctl/namespace": containerdNS},
		Runtime: containerdapi.Runtime{Name: containerdapi.RuncV2}, Spec: containerdapi.SpecAny(actionSpec(id, args, env, volumes, etc)),
		Snapshotter: containerdapi.DefaultSnapshotter, SnapshotKey: key,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.LeaseDelete(ctx, lease, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TaskCreate(ctx, id, containerdapi.TaskSpec{Rootfs: mounts, Stdout: "file://" + actionLog, Stderr: "file://" + actionLog}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan containerdapi.Exit, 1)
	go func() {
		e, err := c.TaskWait(ctx, id)
		if err != nil {
			t.Errorf("waiting for the action: %v", err)
		}
		waited <- e
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := c.TaskStart(ctx, id); err != nil {
		t.Fatal(err)
	}
	exit := <-waited
	phase1, _ := os.ReadFile(actionLog)
	if exit.Status != 0 || !strings.Contains(string(phase1), `"msg":"handed off"`) {
		t.Fatalf("the action exited %d, want 0 and the hand-off; its output:\n%s", exit.Status, phase1)
	}
	if !strings.Contains(string(phase1), `"found_by":"cgroup"`) {
		t.Errorf("phase 1 did not find itself by its cgroup:\n%s", phase1)
	}
	// The agent, after an exit 0: the task, then the container.
	time.Sleep(50 * time.Millisecond)
	if _, err := c.TaskDelete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.ContainerDelete(ctx, id); err != nil {
		t.Fatal(err)
	}
	_ = c.SnapshotRemove(ctx, containerdapi.DefaultSnapshotter, key)

	// The waiter runs the probe a second after the exit, and reports.
	var result struct {
		ExitCode int `json:"exit_code"`
		Attempts []struct {
			Container string   `json:"container"`
			LogTail   []string `json:"log_tail"`
		} `json:"attempts"`
	}
	deadline := time.Now().Add(time.Minute)
	for {
		data, err := os.ReadFile(filepath.Join(resultDir, "result.json"))
		if err == nil && json.Unmarshal(data, &result) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no result file after a minute; phase 1 said:\n%s", phase1)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if result.ExitCode != 0 || len(result.Attempts) != 1 || len(result.Attempts[0].LogTail) == 0 {
		t.Errorf("result %+v, want one run, exit 0, with the probe's output in the tail", result)
	}
	probe, ok := readProbe(t, out, "user")
	if !ok {
		t.Fatal("the probe left no report")
	}
	if !slices.Equal(probe.Args[1:], []string{"--probe-arg", "two words"}) {
		t.Errorf("probe args %q, want the action's command", probe.Args)
	}
	for _, want := range []string{"OPERATOR_SETTING=kept", "PROBE_DIR=/out"} {
		if !slices.Contains(probe.Env, want) {
			t.Errorf("probe env lacks %s: %q", want, probe.Env)
		}
	}
	for _, kv := range probe.Env {
		if strings.HasPrefix(kv, "WAITDAEMON_") || strings.HasPrefix(kv, "IMAGE=") || strings.HasPrefix(kv, "WAIT_SECONDS=") {
			t.Errorf("probe env has waitdaemon's %s", kv)
		}
	}
	for _, ns := range []string{"pid", "net"} {
		if probe.Namespaces[ns] != hostNamespace(t, ns) {
			t.Errorf("probe %s namespace %s, want the host's %s, as the action's", ns, probe.Namespaces[ns], hostNamespace(t, ns))
		}
	}
	if !slices.Contains(probe.Mounts, "/out") || !slices.Contains(probe.Mounts, containerdapi.DefaultSocket) {
		t.Errorf("probe mounts %q, want the action's volumes", probe.Mounts)
	}

	// What is left: at most the waiter, stopped.
	var left []string
	for time.Now().Before(deadline) {
		list, err := eng.List(ctx, phase.LabelActionID, id)
		if err != nil {
			t.Fatal(err)
		}
		left = left[:0]
		stopped := true
		for _, l := range list {
			left = append(left, l.Labels[phase.LabelRole]+" "+l.State)
			stopped = stopped && l.Labels[phase.LabelRole] == phase.RoleWaiter && l.State == "stopped"
		}
		if stopped && len(list) <= 1 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("left behind: %q, want at most the waiter, stopped", left)
}
