package e2e

// The core of the end-to-end suite, run against Podman 4.3's
// Docker-compatible API: the action container runs under Podman with
// Podman's socket bound at /var/run/docker.sock, so waitdaemon finds
// itself in Podman's layout, reads Podman's inspect (Binds with options
// appended, Podman's own environment entries) and negotiates at Podman's
// API version. Where Podman behaves differently from Docker, the tests
// assert the difference, so that it stays documented.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// podmanAPIVersion is the version Podman 4.3's compatibility API answers
// in its ping, and so the one waitdaemon speaks to it.
const podmanAPIVersion = "1.41"

// podmanEngine is the Podman API service the Podman tests share. It is
// started once per test binary and stopped by TestMain.
var podmanEngine struct {
	once sync.Once
	err  error
	dir  string // containers.conf, podman.sock, service.log
	cmd  *exec.Cmd
	done chan struct{} // closed when the service has exited
	exit error         // why, once done is closed
}

func podmanSocket() string { return filepath.Join(podmanEngine.dir, "podman.sock") }
func podmanConf() string   { return filepath.Join(podmanEngine.dir, "containers.conf") }

// TestMain picks the rows of the engine table the tests run on
// (WAITDAEMON_E2E_ENGINES), and stops the Podman service after the tests,
// if one was started: it is the package's only shared state that must not
// outlive the test binary.
func TestMain(m *testing.M) {
	flag.Parse()
	rows, err := tableRows(os.Getenv("WAITDAEMON_E2E_ENGINES"), testing.Short())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	engines = rows
	code := m.Run()
	stopPodman()
	os.Exit(code)
}

// isPodman tells the client of the Podman service from Docker's.
func isPodman(c *dockerapi.Client) bool {
	return podmanEngine.dir != "" && c.SocketPath() == podmanSocket()
}

// setupPodman returns a client for Podman's Docker-compatible API, with
// the action and probe images (built by Docker in setup) loaded into
// Podman. It installs Podman if it is missing and fails the test when it
// cannot; it never skips.
func setupPodman(t *testing.T) *dockerapi.Client {
	t.Helper()
	setup(t) // Docker builds waitdaemon:e2e and waitdaemon-probe:e2e
	podmanEngine.once.Do(func() { podmanEngine.err = startPodman() })
	if podmanEngine.err != nil {
		t.Fatalf("Podman: %v", podmanEngine.err)
	}
	return &dockerapi.Client{Socket: podmanSocket(), WaitForEngine: 2 * time.Second}
}

// startPodman installs Podman if needed, writes a containers.conf
// without default ulimits (with them, no container starts on these
// machines: "error setting rlimit type 7: operation not permitted"),
// starts `podman system service` on a socket of its own, and loads the
// images.
func startPodman() error {
	if _, err := exec.LookPath("podman"); err != nil {
		out, err := aptGet("install", "-y", "podman").CombinedOutput()
		if err != nil {
			// A fresh machine may have no package lists yet.
			upd, uerr := aptGet("update").CombinedOutput()
			out = append(append(out, upd...), '\n')
			if uerr == nil {
				var more []byte
				more, err = aptGet("install", "-y", "podman").CombinedOutput()
				out = append(out, more...)
			}
		}
		if err != nil {
			return fmt.Errorf("these tests need Podman 4.3, which is not installed, and `apt-get install -y podman` failed: %v\n%s", err, tailOf(out, 20))
		}
	}
	dir, err := os.MkdirTemp("", "waitdaemon-podman-")
	if err != nil {
		return err
	}
	podmanEngine.dir = dir
	if err := os.WriteFile(podmanConf(), []byte("[containers]\ndefault_ulimits = []\n"), 0o644); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "service.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command("podman", "system", "service", "--time=0", "unix://"+podmanSocket())
	cmd.Env = podmanEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// TestMain stops it; should the test binary die first (a panic, a
	// test timeout), the kernel sends it SIGTERM.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting `podman system service`: %w", err)
	}
	logFile.Close()
	podmanEngine.cmd = cmd
	podmanEngine.done = make(chan struct{})
	go func() {
		podmanEngine.exit = cmd.Wait()
		close(podmanEngine.done)
	}()

	c := &dockerapi.Client{Socket: podmanSocket(), WaitForEngine: 15 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	answered := make(chan error, 1)
	go func() { _, err := c.APIVersion(ctx); answered <- err }()
	select {
	case <-podmanEngine.done:
		return fmt.Errorf("`podman system service` exited at once (%v):\n%s", podmanEngine.exit, serviceLog())
	case err := <-answered:
		if err != nil {
			return fmt.Errorf("`podman system service` does not answer on %s: %v\n%s", podmanSocket(), err, serviceLog())
		}
	}

	// docker save IMG... | podman load. Podman names them localhost/IMG.
	// Earlier loads' tags are removed first, so that they do not pile up
	// as untagged images (an image still in use stays).
	rmi := exec.Command("podman", "rmi", "localhost/"+actionImage, "localhost/"+probeImage)
	rmi.Env = podmanEnv()
	_ = rmi.Run()
	load := exec.Command("podman", "load")
	load.Env = podmanEnv()
	return loadImages(load)
}

// podmanEnv is the environment of every podman command the tests run.
func podmanEnv() []string { return append(os.Environ(), "CONTAINERS_CONF="+podmanConf()) }

func serviceLog() string {
	data, _ := os.ReadFile(filepath.Join(podmanEngine.dir, "service.log"))
	return tailOf(data, 30)
}

func tailOf(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// stopPodman stops the service (SIGTERM, then SIGKILL after 10 s) and
// removes its directory. The containers the tests made are removed by
// the tests themselves.
func stopPodman() {
	if podmanEngine.done != nil {
		_ = podmanEngine.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-podmanEngine.done:
		case <-time.After(10 * time.Second):
			_ = podmanEngine.cmd.Process.Kill()
			<-podmanEngine.done
		}
	}
	if podmanEngine.dir != "" {
		os.RemoveAll(podmanEngine.dir)
	}
}

// TestPodmanEngine checks what the Podman tests rely on, and the
// differences from Docker that are Podman's own, not waitdaemon's.
func TestPodmanEngine(t *testing.T) {
	onRow(t, "podman")
	c := setupPodman(t)
	ctx := testCtx(t)
	t.Run("negotiation", func(t *testing.T) {
		p, err := c.Ping(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.APIVersion(ctx)
		if err != nil || v != podmanAPIVersion || p.APIVersion != podmanAPIVersion {
			t.Fatalf("Podman answers Api-Version %q, negotiated %q (%v); want %s", p.APIVersion, v, err, podmanAPIVersion)
		}
	})
	t.Run("short image names resolve to localhost/", func(t *testing.T) {
		// docker save | podman load names the images localhost/IMG; the
		// compat API resolves the short names the tests use to them.
		for _, ref := range []string{actionImage, probeImage} {
			img, err := c.ImageInspect(ctx, ref)
			if err != nil {
				t.Fatalf("image %s under Podman: %v", ref, err)
			}
			if !slices.Contains(img.RepoTags, "localhost/"+ref) {
				t.Errorf("image %s: RepoTags %q, want localhost/%s", ref, img.RepoTags, ref)
			}
		}
	})
	t.Run("cgroup namespace mode is ignored", func(t *testing.T) {
		// Podman 4.3's compat create drops HostConfig.CgroupnsMode: the
		// container stays in the host's cgroup namespace, and its inspect
		// reports "" (so there is nothing for the user container to
		// inherit either).
		created, err := c.ContainerCreate(ctx, "waitdaemon_"+sanitize(scoped("e2e podman cgroupns")), dockerapi.CreateRequest{
			Config:     dockerapi.Config{Image: probeImage, Env: []string{"PROBE_SLEEP=5", "PROBE_DIR=/none"}},
			HostConfig: dockerapi.HostConfig{CgroupnsMode: "private"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeAction(c, created.ID) })
		if err := c.ContainerStart(ctx, created.ID); err != nil {
			t.Fatal(err)
		}
		got, err := c.ContainerInspect(ctx, created.ID)
		if err != nil {
			t.Fatal(err)
		}
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/cgroup", got.State.Pid))
		if err != nil {
			t.Fatalf("the container's cgroup namespace: %v (state %+v)", err, got.State)
		}
		if got.HostConfig.CgroupnsMode != "" || ns != hostNamespace(t, "cgroup") {
			t.Errorf("CgroupnsMode private under Podman: inspect says %q, namespace %s (host's %s); "+
				"Podman 4.3 used to ignore it (\"\", the host's): update docs/engines.md's Podman table",
				got.HostConfig.CgroupnsMode, ns, hostNamespace(t, "cgroup"))
		}
	})
}

// TestPodmanPlan runs a dry run under Podman, traced: waitdaemon speaks
// API 1.41 to Podman, reads the socket's host path from Podman's Binds
// format, and plans the user container without Podman's own additions.
func TestPodmanPlan(t *testing.T) {
	onRow(t, "podman")
	c := setupPodman(t)
	out := t.TempDir()
	r := runAction(t, c, tinkAgent, action{
		name:    "e2e podman plan",
		command: []string{"reboot"},
		env:     map[string]string{"IMAGE": probeImage, "FOO": "bar", "WAITDAEMON_DRY_RUN": "true", "WAITDAEMON_VERBOSE": "true"},
		volumes: []string{out + ":/out:ro"},
		pid:     "host",
	})
	if r.ExitCode != 0 {
		t.Fatalf("the dry run exited %d:\n%s", r.ExitCode, r.Logs)
	}
	for _, want := range []string{"> GET /_ping ", "< Api-Version: " + podmanAPIVersion, "> GET /v" + podmanAPIVersion + "/containers/"} {
		if !strings.Contains(r.Logs, want) {
			t.Errorf("the trace lacks %q:\n%s", want, r.Logs)
		}
	}
	if strings.Contains(r.Logs, "/v1.50/") || strings.Contains(r.Logs, "/v1.24/") {
		t.Errorf("the action spoke another API version than %s:\n%s", podmanAPIVersion, r.Logs)
	}
	i := strings.LastIndex(r.Logs, "{\n  \"action\"")
	if i < 0 {
		t.Fatalf("no plan in the output:\n%s", r.Logs)
	}
	var plan struct {
		Action  struct{ ID, Name string }
		FoundBy string `json:"found_by"`
		User    struct {
			Name   string
			Create dockerapi.CreateRequest
		} `json:"user_container"`
		Waiter struct {
			Name   string
			Create dockerapi.CreateRequest
		}
	}
	if err := json.NewDecoder(strings.NewReader(r.Logs[i:])).Decode(&plan); err != nil {
		t.Fatalf("the plan: %v\n%s", err, r.Logs[i:])
	}
	if plan.Action.ID != r.ID {
		t.Errorf("the plan is for %s, want the action %s", plan.Action.ID, r.ID)
	}
	user := plan.User.Create
	// Podman reports Binds with options appended; create takes them back.
	for _, b := range []string{out + ":/out:ro,rprivate,rbind", podmanSocket() + ":/var/run/docker.sock:rw,rprivate,rbind"} {
		if !slices.Contains(user.HostConfig.Binds, b) {
			t.Errorf("user Binds %q lack %s (Podman's format)", user.HostConfig.Binds, b)
		}
	}
	if user.HostConfig.PidMode != "host" || user.Image != probeImage || !slices.Equal(user.Cmd, []string{"reboot"}) {
		t.Errorf("user plan: PidMode %q, Image %q, Cmd %q", user.HostConfig.PidMode, user.Image, user.Cmd)
	}
	if !slices.Contains(user.Env, "FOO=bar") {
		t.Errorf("user plan Env %q lacks FOO=bar", user.Env)
	}
	for _, kv := range user.Env {
		name, _, _ := strings.Cut(kv, "=")
		// Podman adds all three to every container by itself, with the
		// new container's own values; copied, they would carry the
		// action's (HOSTNAME its short ID).
		if kv == "container=podman" || kv == "TERM=xterm" || name == "HOSTNAME" || strings.HasPrefix(name, "WAITDAEMON_") || name == "IMAGE" {
			t.Errorf("user plan Env has %s, which the operator did not set: %q", kv, user.Env)
		}
	}
	// The waiter binds the socket by its host path, taken from Podman's
	// "src:dst:options" form.
	if want := []string{filepath.Dir(podmanSocket()) + ":/run/waitdaemon-engine:ro"}; !slices.Equal(plan.Waiter.Create.HostConfig.Binds, want) {
		t.Errorf("waiter Binds = %q, want %q", plan.Waiter.Create.HostConfig.Binds, want)
	}
	if plan.Waiter.Create.HostConfig.AutoRemove || plan.Waiter.Create.HostConfig.NetworkMode != "host" {
		t.Errorf("waiter: AutoRemove %v, NetworkMode %q", plan.Waiter.Create.HostConfig.AutoRemove, plan.Waiter.Create.HostConfig.NetworkMode)
	}
	waitGone(t, rigOf(c), r.ID, time.Second)
}

// followPodmanWaiter returns the waiter's output, read from its log file
// on the host (Podman's k8s-file: "TIME STREAM F|P TEXT" lines), held
// open until the waiter is gone. Podman 4.3's `logs?follow=1` cannot be
// used: its follower polls the file every 250 ms and stops when the file
// is deleted, and AutoRemove deletes it right after the waiter exits, so
// the waiter's last lines (the user container's exit, the result) are
// often lost. The API follow runs alongside, and the test logs what it
// returned.
func followPodmanWaiter(t *testing.T, c *dockerapi.Client, actionID string) string {
	t.Helper()
	ctx := testCtx(t)
	list, err := c.ContainerList(ctx, "org.waitdaemon.action-id="+actionID, "org.waitdaemon.role=waiter")
	if err != nil || len(list) != 1 {
		t.Fatalf("looking for the waiter of %s: %v, %d found", actionID[:12], err, len(list))
	}
	end, err := openPodmanWaiter(ctx, c, list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	out, note, err := end()
	if err != nil {
		t.Fatal(err)
	}
	t.Log(note)
	return out
}

// openPodmanWaiter opens the log file of waiter id, which must still be
// there, and returns what reads it once the waiter is gone: its output,
// and a note of what Podman's own follow returned of it.
func openPodmanWaiter(ctx context.Context, c *dockerapi.Client, id string) (end func() (out, note string, err error), err error) {
	resp, err := c.Raw(ctx, "GET", "/containers/"+id+"/json", nil)
	if err != nil {
		return nil, fmt.Errorf("inspecting the waiter: %w", err)
	}
	var ins struct{ LogPath string }
	err = json.NewDecoder(resp.Body).Decode(&ins)
	resp.Body.Close()
	if err != nil || ins.LogPath == "" {
		return nil, fmt.Errorf("the waiter's LogPath: %q, %v", ins.LogPath, err)
	}
	f, err := os.Open(ins.LogPath)
	if err != nil {
		return nil, fmt.Errorf("opening the waiter's log: %w", err)
	}
	apiLines := make(chan int, 1)
	go func() {
		var out bytes.Buffer
		_ = c.ContainerLogs(ctx, id, dockerapi.LogsOptions{Follow: true}, &out, &out)
		apiLines <- len(events(out.String()))
	}()
	return func() (string, string, error) {
		defer f.Close()
		for {
			_, err := c.ContainerInspect(ctx, id)
			if errors.Is(err, dockerapi.ErrNotFound) {
				break
			}
			if err != nil {
				return "", "", fmt.Errorf("waiting for the waiter to end: %w", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		data, err := io.ReadAll(f)
		if err != nil {
			return "", "", fmt.Errorf("reading the waiter's log: %w", err)
		}
		var out, partial strings.Builder
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			fields := strings.SplitN(sc.Text(), " ", 4)
			if len(fields) < 3 {
				continue
			}
			text := ""
			if len(fields) == 4 {
				text = fields[3]
			}
			partial.WriteString(text)
			if fields[2] != "P" {
				out.WriteString(partial.String() + "\n")
				partial.Reset()
			}
		}
		evs := events(out.String())
		select {
		case n := <-apiLines:
			return out.String(), fmt.Sprintf("the waiter logged %d JSON lines; Podman's logs?follow=1 returned %d of them", len(evs), n), nil
		case <-time.After(5 * time.Second):
			return out.String(), fmt.Sprintf("the waiter logged %d JSON lines; Podman's logs?follow=1 had not ended 5 s after the waiter was removed", len(evs)), nil
		}
	}, nil
}
