package e2e

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// proxied is an action of the tink-agent shape that reaches the engine
// only through p, and whose user container (the probe) reports to out.
func proxied(p *faultProxy, name, out string, env map[string]string) action {
	k, v := p.env()
	env[k] = v
	env["IMAGE"] = probeImage
	if _, ok := env["WAIT_SECONDS"]; !ok {
		env["WAIT_SECONDS"] = "1"
	}
	return action{name: name, command: []string{"fault"}, env: env, noSocket: true, volumes: []string{p.volume(), out + ":/out"}}
}

// userCreate matches the create of an action's user container.
var userCreate = regexp.MustCompile(`^/containers/create\?name=.*-waitdaemon-user$`)

// succeeded checks that the action handed off, the user container ran
// once and succeeded, and nothing was left behind; it returns the
// waiter's events.
func succeeded(t *testing.T, c *dockerapi.Client, p *faultProxy, r ran, out string) []event {
	t.Helper()
	if r.ExitCode != 0 {
		t.Fatalf("the action exited %d:\n%s\nproxy:\n%s", r.ExitCode, r.Logs, p.log())
	}
	evs := followWaiter(t, c, r.ID)
	res, ok := find(evs, "result")
	attempts, _ := res["attempts"].([]any)
	if !ok || res.num("exit_code") != 0 || len(attempts) != 1 {
		t.Errorf("result = %v, want one attempt that exited 0; waiter:\n%v\nproxy:\n%s", res, evs, p.log())
	}
	if _, ran := readProbe(t, out, "probe"); !ran {
		t.Error("the user container did not run")
	}
	waitGone(t, rigOf(c), r.ID, 10*time.Second)
	return evs
}

// TestFaults puts a fault-injecting proxy between waitdaemon (both
// phases) and the real engine, and checks each outcome, and that no
// container is left behind or made twice.
// waitedFor checks that phase 1 began before the engine answered at
// appears, and handed off after it: it waited for the engine. (Measured
// against the engine's clock, not the test's start: engines take their
// own time to start the action.)
func waitedFor(t *testing.T, r ran, handed event, appears time.Time) {
	t.Helper()
	took := time.Duration(handed.num("took_ms")) * time.Millisecond
	began := r.FinishedAt.Add(-took)
	if took == 0 || !began.Before(appears) || r.FinishedAt.Before(appears) {
		t.Errorf("phase 1 ran from %v to %v (took %v); the engine answered from %v: want it begun before and handed off after",
			began.Format(time.StampMilli), r.FinishedAt.Format(time.StampMilli), took, appears.Format(time.StampMilli))
	}
}

func TestFaults(t *testing.T) {
	onDockerAPIs(t, func(t *testing.T, c *dockerapi.Client) {

		t.Run("socket absent at first", func(t *testing.T) {
			t.Parallel()
			p := newFaultProxy(t, c.SocketPath())
			appears := time.Now().Add(3 * time.Second)
			time.AfterFunc(time.Until(appears), p.listen)
			out := t.TempDir()
			r := runAction(t, c, tinkAgent, proxied(p, "e2e fault absent", out, map[string]string{}))
			handed, _ := find(events(r.Logs), "handed off")
			succeeded(t, c, p, r, out)
			waitedFor(t, r, handed, appears)
		})

		t.Run("connection refused at first", func(t *testing.T) {
			t.Parallel()
			p := newFaultProxy(t, c.SocketPath())
			p.refuse()
			appears := time.Now().Add(3 * time.Second)
			time.AfterFunc(time.Until(appears), func() {
				os.Remove(p.sock)
				p.listen()
			})
			out := t.TempDir()
			r := runAction(t, c, tinkAgent, proxied(p, "e2e fault refused", out, map[string]string{}))
			handed, _ := find(events(r.Logs), "handed off")
			succeeded(t, c, p, r, out)
			waitedFor(t, r, handed, appears)
		})

		t.Run("503s, then success", func(t *testing.T) {
			t.Parallel()
			p := newFaultProxy(t, c.SocketPath())
			p.add(&fault{method: "POST", path: userCreate, times: 3, kind: answer, status: 503})
			p.add(&fault{method: "GET", path: regexp.MustCompile(`^/containers/[0-9a-f]{64}/json$`), times: 2, kind: answer, status: 503})
			p.listen()
			out := t.TempDir()
			r := runAction(t, c, tinkAgent, proxied(p, "e2e fault 503", out, map[string]string{}))
			succeeded(t, c, p, r, out)
			name := "POST /containers/create?name=" + actionContainer(tinkAgent, "e2e fault 503") + "-waitdaemon-user"
			if n503, n201 := p.count(prefix(name+": 503")), p.count(prefix(name+": 201")); n503 != 3 || n201 != 1 {
				t.Errorf("user creates: %d answered 503 and %d 201, want 3 and 1:\n%s", n503, n201, p.log())
			}
		})

		t.Run("500 on create is not retried", func(t *testing.T) {
			t.Parallel()
			p := newFaultProxy(t, c.SocketPath())
			p.add(&fault{method: "POST", path: userCreate, kind: answer, status: 500})
			p.listen()
			out := t.TempDir()
			r := runAction(t, c, tinkAgent, proxied(p, "e2e fault 500", out, map[string]string{}))
			if r.ExitCode != 1 || !strings.Contains(r.Logs, "fault injected: 500") {
				t.Errorf("exit %d, output:\n%s\nwant exit 1 and the engine's message", r.ExitCode, r.Logs)
			}
			if n := p.count(prefix("POST /containers/create?name=" + actionContainer(tinkAgent, "e2e fault 500") + "-waitdaemon-user")); n != 1 {
				t.Errorf("the user create was sent %d times, want once:\n%s", n, p.log())
			}
			waitGone(t, rigOf(c), r.ID, 5*time.Second)
			if _, ran := readProbe(t, out, "probe"); ran {
				t.Error("the user container ran")
			}
		})

		t.Run("hang-up after the engine created", func(t *testing.T) {
			t.Parallel()
			p := newFaultProxy(t, c.SocketPath())
			p.add(&fault{method: "POST", path: userCreate, times: 1, kind: hangUpLate})
			p.listen()
			out := t.TempDir()
			r := runAction(t, c, tinkAgent, proxied(p, "e2e fault late", out, map[string]string{}))
			succeeded(t, c, p, r, out)
			name := "POST /containers/create?name=" + actionContainer(tinkAgent, "e2e fault late") + "-waitdaemon-user"
			// The conflict is 409 on Docker, 500 on Podman 4.3.
			late, conflict := p.count(prefix(name+": 201 from the engine, hung up")), p.count(prefix(name+": 409"))+p.count(prefix(name+": 500"))
			if late != 1 || conflict != 1 || p.count(prefix(name)) != 2 {
				t.Errorf("user creates: want one created and hung up, then one 409 that is adopted:\n%s", p.log())
			}
		})

		t.Run("a slow answer meets the deadline", func(t *testing.T) {
			t.Parallel()
			p := newFaultProxy(t, c.SocketPath())
			p.add(&fault{method: "GET", path: regexp.MustCompile(`^/images/.*/json$`), kind: slow, delay: 5 * time.Second})
			p.listen()
			pc := &dockerapi.Client{Socket: p.sock, RequestTimeout: 500 * time.Millisecond}
			start := time.Now()
			_, err := pc.ImageInspect(context.Background(), probeImage)
			took := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within 500ms") {
				t.Errorf("ImageInspect() error = %v, want the deadline, named", err)
			}
			if took > 2*time.Second {
				t.Errorf("ImageInspect() returned after %v, want soon after the 500ms deadline", took)
			}
		})

		// Docker only: the test registry is plain HTTP on 127.0.0.1:<port>,
		// which Podman pulls from only when registries.conf names it
		// insecure. The pull's retry is the client's, the same for both.
		if !isPodman(c) {
			t.Run("hang-up in the middle of a pull", func(t *testing.T) {
				t.Parallel()
				addr := startRegistry(t, false)
				ref := pushProbe(t, c, addr, false)
				removeImage(t, c, ref)
				p := newFaultProxy(t, c.SocketPath())
				p.add(&fault{method: "POST", path: regexp.MustCompile(`^/images/create$`), times: 1, kind: cut, cutAfter: 150})
				p.listen()
				out := t.TempDir()
				a := proxied(p, "e2e fault pull", out, map[string]string{})
				a.env["IMAGE"] = ref
				r := runAction(t, c, tinkAgent, a)
				succeeded(t, c, p, r, out)
				if cutN, whole := p.count(prefix("POST /images/create: 200, cut")), p.count(prefix("POST /images/create: 200")); cutN != 1 || whole != 2 {
					t.Errorf("pulls: want one cut and one whole:\n%s", p.log())
				}
			})
		}

		t.Run("a wait that breaks off", func(t *testing.T) {
			t.Parallel()
			p := newFaultProxy(t, c.SocketPath())
			p.add(&fault{method: "POST", path: regexp.MustCompile(`^/containers/[0-9a-f]{64}/wait$`), times: 1, kind: cut, cutAfter: 0})
			// The user container's create, beside the waiter's start, is
			// held back, so that the action runs on well after the
			// waiter's wait breaks: the break cannot pass for the exit, nor
			// the exit be learned before the break.
			const held = 2 * time.Second
			p.add(&fault{method: "POST", path: userCreate, times: 1, kind: slow, delay: held})
			p.listen()
			out := t.TempDir()
			r := runAction(t, c, tinkAgent, proxied(p, "e2e fault wait", out, map[string]string{"WAIT_SECONDS": "1"}))
			evs := succeeded(t, c, p, r, out)
			if _, ok := find(evs, "lost the engine while waiting for the action container; asking again"); !ok {
				t.Errorf("the waiter did not say it asked again:\n%v\nproxy:\n%s", evs, p.log())
			}
			// The broken wait is not taken for the exit: the waiter asks
			// again (the second wait answers at the exit, or its poll of
			// the action's state learns it first), and the start follows
			// the real exit by WAIT_SECONDS, not the break.
			if n := p.count(prefix("POST /containers/" + r.ID + "/wait")); n != 2 {
				t.Errorf("the waiter waited %d times on the action, want 2:\n%s", n, p.log())
			}
			started, _ := find(evs, "started user container")
			sent, err := time.Parse(time.RFC3339Nano, started.str("start_sent"))
			if late := sent.Sub(r.FinishedAt) - time.Second; err != nil || late < -maxLate || late > 2*time.Second {
				t.Errorf("start sent at %v (%v), want WAIT_SECONDS after the action's exit at %v", sent, err, r.FinishedAt)
			}
		})

		t.Run("engine restarted while the waiter waits", func(t *testing.T) {
			t.Parallel()
			p := newFaultProxy(t, c.SocketPath())
			p.listen()
			out := t.TempDir()
			r := runAction(t, c, tinkAgent, proxied(p, "e2e fault restart", out, map[string]string{"WAIT_SECONDS": "3"}))
			// The waiter is now in its 3 s wait; the engine goes away for 5 s,
			// with a new socket after.
			p.restart(5 * time.Second)
			up := time.Now()
			succeeded(t, c, p, r, out)
			if rep, ok := readProbe(t, out, "probe"); ok && rep.Started.Before(up.Add(-100*time.Millisecond)) {
				t.Errorf("the user container started at %v, before the engine was back at %v", rep.Started, up)
			}
			if n := p.count(prefix("POST /containers/" + actionContainer(tinkAgent, "e2e fault restart") + "-waitdaemon-user/start")); n != 1 {
				t.Errorf("the user container was started %d times, want once:\n%s", n, p.log())
			}
		})
	})
}
