package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestContainerdFaults puts a fault-injecting gRPC proxy between
// waitdaemon (both phases) and the test containerd, and checks each
// outcome: the action hands off and exits 0, the user container runs
// once and succeeds, nothing is left but the stopped waiter, and the
// proxy saw the fault happen as intended. The faults run one after
// another: each action's phase 1 removes the stopped waiters of other
// actions, and would take another fault's from under its check.
func TestContainerdFaults(t *testing.T) {
	c, eng, actionImg := setupContainerd(t)

	// proxied runs an action named for what, whose user container is the
	// probe, reporting to out, and which reaches containerd only through
	// p.
	proxied := func(t *testing.T, ctx context.Context, p *grpcFaultProxy, what, out string, env ...string) cdRun {
		t.Helper()
		return runCDAction(t, ctx, c, eng, actionImg, cdAction{
			name:    "tinkerbell_cd-fault-" + what + "_01JE2E" + randomHex(10),
			env:     append([]string{"IMAGE=docker.io/library/" + probeImage, "WAIT_SECONDS=0"}, env...),
			volumes: [][2]string{{out, "/out"}},
			socket:  p.dir,
		})
	}
	// succeeded checks what every fault must end in.
	succeeded := func(t *testing.T, ctx context.Context, p *grpcFaultProxy, r cdRun, out string) {
		t.Helper()
		if a := r.result.Attempts; r.result.ExitCode != 0 || len(a) != 1 || a[0].ExitCode != 0 {
			t.Errorf("result %+v, want one run that exited 0\nphase 1:\n%s", r.result, r.phase1)
		}
		if _, ran := readProbe(t, out, "probe"); !ran {
			t.Error("the user container did not run")
		}
		settled(t, eng, r.id, 30*time.Second, "waiter stopped")
	}
	ctxFor := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		t.Cleanup(cancel)
		return ctx
	}

	t.Run("socket absent at first", func(t *testing.T) {
		ctx := ctxFor(t)
		p := newGRPCFaultProxy(t)
		// The action is made and started within a second or so: the
		// socket appears while phase 1 waits for it.
		appears := time.Now().Add(2 * time.Second)
		timer := time.AfterFunc(time.Until(appears), p.listen)
		t.Cleanup(func() { timer.Stop() })
		out := t.TempDir()
		// With no socket to find, phase 1 would take the engine to be
		// Docker: the engine is named.
		r := proxied(t, ctx, p, "absent", out, "WAITDAEMON_ENGINE=containerd")
		succeeded(t, ctx, p, r, out)
		handed, ok := find(events(r.phase1), "handed off")
		at, err := time.Parse(time.RFC3339Nano, handed.str("time"))
		if !ok || err != nil || handed.num("took_ms") == 0 {
			t.Fatalf("no hand-off with its time and duration in phase 1's output:\n%s", r.phase1)
		}
		began := at.Add(-time.Duration(handed.num("took_ms")) * time.Millisecond)
		if !began.Before(appears) || !at.After(appears) {
			t.Errorf("phase 1 ran from %v to %v; the socket appeared at %v: want it begun before and handed off after",
				began.Format(time.StampMilli), at.Format(time.StampMilli), appears.Format(time.StampMilli))
		}
		if !strings.HasPrefix(p.log(), "-- listening\nVersion/Version: OK\n") {
			t.Error("the proxy's log does not begin with its listen, then phase 1's first call")
		}
	})

	t.Run("UNAVAILABLE, then success", func(t *testing.T) {
		ctx := ctxFor(t)
		p := newGRPCFaultProxy(t)
		p.add(&grpcFault{method: "Containers/Get", times: 2, kind: unavailable})
		p.add(&grpcFault{method: "Containers/Create", subject: userID, times: 2, kind: unavailable})
		p.listen()
		out := t.TempDir()
		r := proxied(t, ctx, p, "unavailable", out)
		succeeded(t, ctx, p, r, out)
		gets := p.count(`^Containers/Get \S+: Unavailable \(fault\)$`)
		creates, created := p.count(`^Containers/Create `+userID.String()+`: Unavailable \(fault\)$`), p.count(`^Containers/Create `+userID.String()+`: OK$`)
		if gets != 2 || creates != 2 || created != 1 {
			t.Errorf("Containers/Get: %d answered UNAVAILABLE; the user container's create: %d UNAVAILABLE, %d OK; want 2, then 2 and 1",
				gets, creates, created)
		}
	})

	t.Run("a create whose answer is lost", func(t *testing.T) {
		ctx := ctxFor(t)
		p := newGRPCFaultProxy(t)
		p.add(&grpcFault{method: "Containers/Create", subject: userID, times: 1, kind: lostAnswer})
		p.listen()
		out := t.TempDir()
		r := proxied(t, ctx, p, "lostcreate", out)
		succeeded(t, ctx, p, r, out)
		// One container, created once and lost, then met again by the
		// retry and adopted: its one task made and started once.
		lost := regexp.MustCompile(`(?m)^Containers/Create (` + userID.String() + `): OK from containerd, answer lost \(fault\)$`).FindStringSubmatch(p.log())
		if lost == nil {
			t.Fatal("the proxy lost no answer to the user container's create")
		}
		id := regexp.QuoteMeta(lost[1])
		checks := []struct {
			re   string
			want int
		}{
			{`^Containers/Create ` + userID.String() + `: `, 2},
			{`^Containers/Create ` + id + `: AlreadyExists$`, 1},
			{`^Tasks/Create ` + id + `: OK$`, 1},
			{`^Tasks/Create ` + userID.String() + `: `, 1},
			{`^Tasks/Start ` + id + `: OK$`, 1},
		}
		for _, c := range checks {
			if n := p.count(c.re); n != c.want {
				t.Errorf("%d calls match %s, want %d", n, c.re, c.want)
			}
		}
	})

	// pulled runs an action whose IMAGE is the probe, pushed to a
	// registry of its own and absent from containerd, while the proxy
	// breaks the first pull as kind says; it checks that the pull was
	// broken once, then done, and the action ran.
	pulled := func(t *testing.T, kind grpcFaultKind, broken string) {
		requireRegistryTools(t)
		ctx := ctxFor(t)
		addr := startRegistry(t, false)
		ref := pushProbe(t, setup(t), addr, false)
		ctrImages := func(args ...string) error {
			return exec.Command(ctrBinary, append([]string{"-a", containerdSocket, "-n", containerdNS, "images"}, args...)...).Run()
		}
		_ = ctrImages("rm", ref)
		t.Cleanup(func() { _ = ctrImages("rm", ref) })
		p := newGRPCFaultProxy(t)
		p.add(&grpcFault{method: "Transfer/Transfer", times: 1, kind: kind})
		p.listen()
		out := t.TempDir()
		r := runCDAction(t, ctx, c, eng, actionImg, cdAction{
			name:    "tinkerbell_cd-fault-pull_01JE2E" + randomHex(10),
			env:     []string{"IMAGE=" + ref, "WAIT_SECONDS=0"},
			volumes: [][2]string{{out, "/out"}},
			socket:  p.dir,
		})
		if !strings.Contains(r.phase1, `"decision":"pull"`) {
			t.Errorf("phase 1 did not pull:\n%s", r.phase1)
		}
		succeeded(t, ctx, p, r, out)
		pull := `^Transfer/Transfer ` + regexp.QuoteMeta(ref) + `: `
		if n, done := p.count(pull+broken+` \(fault\)$`), p.count(pull+`OK$`); n != 1 || done != 1 || p.count(pull) != 2 {
			t.Errorf("pulls: %d %s, %d done; want one of each, and no other", n, broken, done)
		}
	}

	t.Run("a pull broken on its way", func(t *testing.T) {
		pulled(t, resetUnsent, "hung up")
	})

	t.Run("a pull whose answer is lost", func(t *testing.T) {
		pulled(t, lostAnswer, "OK from containerd, answer lost")
	})
}

// userID matches the ID of an action's user container.
var userID = regexp.MustCompile(`\S+-waitdaemon-user-[0-9a-f]{8}`)

// stopContainerd stops the test containerd daemon alone, as a crash or an
// upgrade does: its tasks go on in their shims.
func stopContainerd() error {
	data, err := os.ReadFile(filepath.Join(filepath.Dir(containerdSocket), "containerd.pid"))
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return err
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	if err := proc.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if proc.Signal(syscall.Signal(0)) != nil {
			return nil
		}
	}
	return errors.New("containerd did not stop within 10s of SIGTERM")
}

// startContainerd starts the test containerd again (make containerd),
// leaving the tasks alone.
func startContainerd() ([]byte, error) {
	cmd := exec.Command("scripts/containerd.sh")
	cmd.Dir = ".."
	return cmd.CombinedOutput()
}
