//go:build full

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
)

// privateDocker is a Docker 20.10 of the test's own, beside the shared
// engines: its own socket, data, exec root, managed containerd and
// bridge, and live-restore, so that the test may restart it while a
// container runs, as an engine upgrade on a box does. Only it is ever
// restarted.
type privateDocker struct {
	dir      string // its run directory: the socket's directory, the exec root, the log
	dataRoot string
	bridge   string // a bridge of its own: dockerd with --bridge=none deletes the host's docker0
	cmd      *exec.Cmd
	done     chan struct{}
}

func (d *privateDocker) socket() string  { return filepath.Join(d.dir, "sock", "docker.sock") }
func (d *privateDocker) logFile() string { return filepath.Join(d.dir, "dockerd.log") }

func (d *privateDocker) client() *dockerapi.Client {
	return &dockerapi.Client{Socket: d.socket(), WaitForEngine: 2 * time.Second}
}

// privateBridge is the bridge of the private Docker of a checkout tagged
// tag: its own, though another checkout's test starts one at the same
// time (a name of at most 15 bytes: the tag's if it fits, else a hash of
// it).
func privateBridge(tag string) string {
	if name := "wdr-" + tag; len(name) <= 15 {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(tag))
	return fmt.Sprintf("wdr-%08x", h.Sum32())
}

// freeSubnet is an address for a new bridge: the first /24 of 10.231 that
// no route of the host's uses (another checkout's private Docker's
// bridge has one).
func freeSubnet(t *testing.T, bridge string) string {
	t.Helper()
	for n := range 255 {
		out, err := exec.Command("ip", "-4", "route", "show", fmt.Sprintf("10.231.%d.0/24", n)).Output()
		if err != nil {
			t.Fatalf("ip route show: %v", err)
		}
		if len(bytes.TrimSpace(out)) == 0 {
			return fmt.Sprintf("10.231.%d.1/24", n)
		}
	}
	t.Fatalf("no free /24 of 10.231 for %s", bridge)
	return ""
}

// startPrivateDocker starts one for the test, with this checkout's images
// loaded, and stops it, and what it ran, at the test's end.
func startPrivateDocker(t *testing.T) *privateDocker {
	t.Helper()
	if _, err := exec.LookPath("dockerd"); err != nil {
		t.Fatalf("this test starts a Docker 20.10 of its own and needs dockerd on the PATH (`make engine` installs it): %v", err)
	}
	d := &privateDocker{
		dir:      "/run/waitdaemon-e2e-restart-" + e2eTag,
		dataRoot: "/var/lib/waitdaemon-e2e-restart-" + e2eTag,
	}
	d.bridge = privateBridge(e2eTag)
	if err := os.MkdirAll(filepath.Join(d.dir, "sock"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.clear(t) })
	if exec.Command("ip", "link", "show", d.bridge).Run() != nil {
		for _, args := range [][]string{
			{"link", "add", d.bridge, "type", "bridge"},
			{"addr", "add", freeSubnet(t, d.bridge), "dev", d.bridge},
			{"link", "set", d.bridge, "up"},
		} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	}
	d.start(t)
	if err := loadImages(exec.Command("docker", "-H", "unix://"+d.socket(), "load", "-q")); err != nil {
		t.Fatalf("loading the images into the test's own Docker: %v", err)
	}
	return d
}

// start starts dockerd and waits until it answers.
func (d *privateDocker) start(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(d.logFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	d.cmd = exec.Command("dockerd",
		"--host", "unix://"+d.socket(),
		"--pidfile", filepath.Join(d.dir, "docker.pid"),
		"--exec-root", filepath.Join(d.dir, "exec"),
		"--data-root", d.dataRoot,
		"--bridge", d.bridge, "--iptables=false", "--ip-masq=false",
		"--live-restore",
	)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	// Should the test binary die first, the kernel stops it; live-restore
	// keeps what it ran, which the next run's clear removes.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting dockerd: %v", err)
	}
	d.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(d.cmd, d.done)
	c := d.client()
	for began := time.Now(); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.Ping(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-d.done:
			t.Fatalf("dockerd exited before it answered: %v\n%s", err, d.logTail())
		default:
		}
		if time.Since(began) > time.Minute {
			t.Fatalf("dockerd did not answer within a minute: %v\n%s", err, d.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop stops dockerd with SIGTERM, as a service manager does; with
// live-restore, the containers and their containerd run on.
func (d *privateDocker) stop(t *testing.T) {
	t.Helper()
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		t.Errorf("dockerd did not stop within 30 s of SIGTERM\n%s", d.logTail())
	}
	d.cmd = nil
}

// restart stops dockerd and starts it again.
func (d *privateDocker) restart(t *testing.T) (down, up time.Time) {
	t.Helper()
	down = time.Now()
	d.stop(t)
	d.start(t)
	return down, time.Now()
}

// clear removes every container it has, then stops it and the containerd
// it started.
func (d *privateDocker) clear(t *testing.T) {
	if d.cmd != nil {
		c := d.client()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if list, err := c.ContainerList(ctx); err == nil {
			for _, ctr := range list {
				_ = c.ContainerRemove(ctx, ctr.ID, dockerapi.RemoveOptions{Force: true, Volumes: true})
			}
		}
		cancel()
		d.stop(t)
	}
	pid, err := os.ReadFile(filepath.Join(d.dir, "exec", "containerd", "containerd.pid"))
	if n, perr := strconv.Atoi(strings.TrimSpace(string(pid))); err == nil && perr == nil && n > 1 {
		_ = syscall.Kill(n, syscall.SIGTERM)
	}
	_ = exec.Command("ip", "link", "delete", d.bridge).Run()
}

func (d *privateDocker) logTail() string {
	data, _ := os.ReadFile(d.logFile())
	return tailOf(data, 20)
}

// TestEngineRestartWhileUserRuns: the engine restarts (live-restore)
// while the user container runs, later into the run than the waiter's
// client waits for an engine that is down: the engine keeps the waiter
// (it is not marked for auto-removal, which Docker 20.10 applies to
// running containers as it restarts), and the waiter asks again once the
// engine is back, follows the run to its end, writes the result, and
// removes what succeeded, as if nothing had happened.
func TestEngineRestartWhileUserRuns(t *testing.T) {
	setup(t) // builds the images in the shared Docker, to load them
	d := startPrivateDocker(t)
	c := d.client()
	// The restart comes this long into the run: past the waiter's wait
	// for an engine that is down, counted from the wait's start.
	restartAt := engine.WaiterWaitForEngine + 5*time.Second
	runs := restartAt + 20*time.Second
	out := t.TempDir()
	r := runAction(t, c, tinkAgent, action{
		name:    "e2e restart",
		network: "host",
		command: []string{fmt.Sprintf("--sleep=%d", int(runs.Seconds()))},
		env: map[string]string{
			"IMAGE": probeImage, "WAIT_SECONDS": "0",
			"WAITDAEMON_RESULT_FILE": filepath.Join(out, "result.json"),
		},
	})
	if r.ExitCode != 0 {
		t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
	}
	user := r.Name + "-waitdaemon-user"
	ctx, cancel := context.WithTimeout(context.Background(), runs+3*time.Minute)
	defer cancel()
	var started time.Time
	for began := time.Now(); started.IsZero(); time.Sleep(100 * time.Millisecond) {
		ctr, err := c.ContainerInspect(ctx, user)
		if err == nil && ctr.State.Running {
			started, _ = time.Parse(time.RFC3339Nano, ctr.State.StartedAt)
		}
		if time.Since(began) > 30*time.Second {
			t.Fatalf("the user container did not start within 30 s: %+v, %v\n%s", ctr.State, err, r.Logs)
		}
	}
	// The waiter's own log, read from its file: it removes itself at the
	// end, its log with it.
	waiter, err := c.ContainerInspect(ctx, r.Name+"-waitdaemon-waiter")
	if err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	var logPath struct{ LogPath string }
	if resp, err := c.Raw(ctx, "GET", "/containers/"+waiter.ID+"/json", nil); err == nil {
		_ = json.NewDecoder(resp.Body).Decode(&logPath)
		resp.Body.Close()
	}
	var said []byte
	readSaid := func() {
		if data, err := os.ReadFile(logPath.LogPath); err == nil {
			said = data
		}
	}
	time.Sleep(time.Until(started.Add(restartAt)))
	down, up := d.restart(t)
	t.Logf("the engine restarted %v into the run, down for %v", down.Sub(started).Round(time.Second), up.Sub(down).Round(time.Millisecond))

	file := filepath.Join(out, "result.json")
	var data []byte
	for {
		readSaid()
		var done bool
		if data, done = resultDone(file); done {
			break
		}
		if ctx.Err() != nil || time.Since(started) > runs+time.Minute {
			t.Fatalf("no result file in state done %v after the run's end; the waiter said:\n%s\nthe file:\n%s", time.Since(started.Add(runs)).Round(time.Second), said, data)
		}
		time.Sleep(time.Second)
	}
	var res struct {
		ExitCode int `json:"exit_code"`
		Attempts []struct {
			ExitCode   int    `json:"exit_code"`
			FinishedAt string `json:"finished_at"`
			LogNote    string `json:"log_note"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatalf("result file: %v\n%s", err, data)
	}
	finished := time.Time{}
	if len(res.Attempts) == 1 {
		finished, _ = time.Parse(time.RFC3339Nano, res.Attempts[0].FinishedAt)
	}
	if res.ExitCode != 0 || len(res.Attempts) != 1 || res.Attempts[0].ExitCode != 0 || !finished.After(up) {
		t.Errorf("result file = %s\nwant the one run, exit 0, finished after the engine came back (%v)", data, up.UTC().Format(time.RFC3339Nano))
	}
	// It ran to success: removed, as any.
	for time.Since(finished) < 10*time.Second {
		if _, err := c.ContainerInspect(ctx, user); errors.Is(err, dockerapi.ErrNotFound) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("the user container is still there 10 s after it succeeded")
}
