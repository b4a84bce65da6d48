package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/phase"
)

// TestFailedActionWaitRefused: an action killed after it started the
// waiter (at the worker's timeout, say) did not hand off, and the waiter
// learns so from the action's inspect though the engine refused its wait
// on the action (answered 500, once the action had stopped) and, on
// Podman, its poll of the action's state gave up: nothing starts, and the
// result says the action exited 137.
func TestFailedActionWaitRefused(t *testing.T) {
	onDockerAPIs(t, func(t *testing.T, c *dockerapi.Client) {
		ctx := testCtx(t)
		p := newFaultProxy(t, c.SocketPath())
		// Phase 1 stalls at the user container's create, until it is killed.
		p.add(&fault{method: "POST", path: userCreate, times: 1, kind: slow, delay: time.Minute})
		p.listen()
		out := t.TempDir()
		file := filepath.Join(out, "result.json")
		a := proxied(p, "e2e failed wait", out, map[string]string{"WAITDAEMON_RESULT_FILE": file})
		var env []string
		for k, v := range a.env {
			env = append(env, k+"="+v)
		}
		// The worker's container, which stays after it exits, as it does
		// for the moment before the worker removes it.
		name := actionContainer(tinkAgent, a.name)
		clearName(c, name)
		created, err := c.ContainerCreate(ctx, name, dockerapi.CreateRequest{
			Config:     dockerapi.Config{Image: actionImage, Cmd: a.command, Env: env},
			HostConfig: dockerapi.HostConfig{Binds: a.volumes},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeAction(c, created.ID) })
		// The waiter's wait on the action is refused, 8 s after it asked.
		p.add(&fault{method: "POST", path: regexp.MustCompile(`^/containers/` + created.ID + `/wait$`), times: 1, kind: answer, status: 500, delay: 8 * time.Second})
		if err := c.ContainerStart(ctx, created.ID); err != nil {
			t.Fatal(err)
		}
		waiter := ""
		for deadline := time.Now().Add(30 * time.Second); waiter == "" || !running(t, rigOf(c), created.ID, waiter); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no waiter running 30 s after the action started; proxy:\n%s", p.log())
			}
			waiter = roleOf(t, rigOf(c), created.ID, phase.RoleWaiter)
		}
		// On Podman, the waiter's poll of the action's state gives up at
		// its next look, refused (Docker's waiter has no poll: its wait
		// alone says); then the action is killed.
		if isPodman(c) {
			inspect := "^GET /containers/" + created.ID + "/json: 500"
			p.add(&fault{method: "GET", path: regexp.MustCompile(`^/containers/` + created.ID + `/json$`), times: 1, kind: answer, status: 500})
			for deadline := time.Now().Add(10 * time.Second); p.count(inspect) == 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the waiter did not look at the action; proxy:\n%s", p.log())
				}
			}
		}
		if _, err := c.Raw(ctx, "POST", "/containers/"+created.ID+"/kill", nil); err != nil {
			t.Fatal(err)
		}
		var res struct {
			State          string
			ExitCode       int `json:"exit_code"`
			Attempts       []json.RawMessage
			ActionExitCode *int   `json:"action_exit_code"`
			NotStarted     string `json:"not_started"`
		}
		var data []byte
		for deadline := time.Now().Add(40 * time.Second); res.State != "done"; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no result 40 s after the kill: %s; proxy:\n%s", data, p.log())
			}
			data, _ = os.ReadFile(file)
			_ = json.Unmarshal(data, &res)
		}
		if res.ActionExitCode == nil || *res.ActionExitCode != 137 || len(res.Attempts) != 0 || !strings.Contains(res.NotStarted, "did not hand off") {
			t.Errorf("result %s; want action_exit_code 137, no attempt, not_started saying it did not hand off; proxy:\n%s", data, p.log())
		}
		if n := p.count("^POST /containers/" + created.ID + `/wait: 500 \(fault\)`); n != 1 {
			t.Errorf("the wait was refused %d times, want once; proxy:\n%s", n, p.log())
		}
	})
}
