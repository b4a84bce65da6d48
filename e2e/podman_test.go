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
