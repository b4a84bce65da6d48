package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/phase"
)

// TestRetriesThenFallback: a user container that keeps failing is re-run
// WAITDAEMON_RETRIES times, then the fallback runs once; every attempt is
// in the result line and in the result file.
func TestRetriesThenFallback(t *testing.T) {
	onEngines(t, func(t *testing.T, e rig) {
		out := t.TempDir()
		r := e.run(t, tinkWorker, action{
			name:    "e2e retries",
			command: []string{"--exit=3"},
			env: map[string]string{
				"IMAGE": probeImage, "WAIT_SECONDS": "0",
				"WAITDAEMON_RETRIES": "2", "WAITDAEMON_FALLBACK_COMMAND": `["--exit=0","fallback"]`,
				"WAITDAEMON_RESULT_FILE": filepath.Join(out, "result.json"), "WAITDAEMON_LOG_TAIL": "1",
			},
			volumes: []string{out + ":/out"},
		})
		if r.ExitCode != 0 {
			t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
		}
		evs := events(e.waiter(t, r.ID))
		line, ok := find(evs, "result")
		if !ok {
			t.Fatalf("no result line: %v", evs)
		}
		var res struct {
			Action   string `json:"action"`
			ExitCode int    `json:"exit_code"`
			BootID   string `json:"boot_id"`
			Attempts []struct {
				Attempt  int      `json:"attempt"`
				ExitCode int      `json:"exit_code"`
				LogTail  []string `json:"log_tail"`
				Kept     bool     `json:"kept"`
			} `json:"attempts"`
			Fallback *struct {
				Command  []string `json:"command"`
				ExitCode int      `json:"exit_code"`
				Kept     bool     `json:"kept"`
			} `json:"fallback"`
		}
		data, err := os.ReadFile(filepath.Join(out, "result.json"))
		if err != nil {
			t.Fatalf("result file: %v", err)
		}
		if err := json.Unmarshal(data, &res); err != nil {
			t.Fatalf("result file: %v\n%s", err, data)
		}
		if len(res.Attempts) != 3 || res.ExitCode != 3 || res.Fallback == nil || res.Fallback.ExitCode != 0 || res.BootID == "" || res.Action != r.Name {
			t.Fatalf("result file = %s\nwant 3 attempts exiting 3, then a fallback exiting 0, with the boot ID", data)
		}
		// The probe's last line, on stderr; where the engine copies the
		// two streams apart, the last line of its stdout (the end of its
		// report) can land after it.
		last := []string{"probe: exiting 3 as asked"}
		if e.row().streamsApart {
			last = append(last, "}")
		}
		for i, a := range res.Attempts {
			if a.Attempt != i+1 || a.ExitCode != 3 || !a.Kept || len(a.LogTail) != 1 || !slices.Contains(last, a.LogTail[0]) {
				t.Errorf("attempt %d = %+v, want number %d, exit 3, kept, one of its last lines %q", i, a, i+1, last)
			}
		}
		if strings.Join(res.Fallback.Command, " ") != "/probe --exit=0 fallback" || res.Fallback.Kept {
			t.Errorf("fallback = %+v, want /probe --exit=0 fallback, removed", res.Fallback)
		}
		if attempts, _ := line["attempts"].([]any); len(attempts) != 3 {
			t.Errorf("the result line has %d attempts, want 3: %v", len(attempts), line)
		}
		if roleOf(t, e, r.ID, "fallback") != "" {
			t.Error("the fallback that succeeded was kept")
		}
		if kept := roleOf(t, e, r.ID, "user"); kept == "" || e.exitCode(t, kept) != 3 {
			t.Errorf("the failed user container was not kept (%q)", kept)
		}
	})
}

// TestRetrySucceeds: a user container that fails once and then succeeds
// is not followed by the fallback, and nothing is left.
func TestRetrySucceeds(t *testing.T) {
	onEngines(t, func(t *testing.T, e rig) {
		out := t.TempDir()
		r := e.run(t, tinkAgent, action{
			name:    "e2e retry ok",
			command: []string{"--fail-times=1"},
			env: map[string]string{
				"IMAGE": probeImage, "WAIT_SECONDS": "0",
				"WAITDAEMON_RETRIES": "3", "WAITDAEMON_FALLBACK_COMMAND": `["--exit=0","fallback"]`,
			},
			volumes: []string{out + ":/out"},
		})
		if r.ExitCode != 0 {
			t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
		}
		evs := events(e.waiter(t, r.ID))
		res, ok := find(evs, "result")
		attempts, _ := res["attempts"].([]any)
		if !ok || res.num("exit_code") != 0 || len(attempts) != 2 || res["fallback"] != nil {
			t.Fatalf("result = %v, want success on the second attempt, no fallback", res)
		}
		if _, ran := find(evs, "fallback exited"); ran {
			t.Error("the fallback ran although a retry succeeded")
		}
		waitDone(t, e, r.ID, 5*time.Second)
	})
}

// TestRetryFresh: each re-run starts from the image, as the first run
// did: a command that makes its mount point with mkdir(2), as
// tinkerbell/actions' kexec makes /mountAction, and fails, fails the same
// way on the re-run, not on the directory the first run left. Each
// attempt names its own container, and both are kept.
func TestRetryFresh(t *testing.T) {
	onEngines(t, func(t *testing.T, e rig) {
		out := t.TempDir()
		r := e.run(t, tinkAgent, action{
			name:    "e2e retry fresh",
			command: []string{"--mkdir=/mountAction", "--exit=3"},
			env: map[string]string{
				"IMAGE": probeImage, "WAIT_SECONDS": "0", "WAITDAEMON_RETRIES": "1",
				"WAITDAEMON_RESULT_FILE": filepath.Join(out, "result.json"),
			},
			volumes: []string{out + ":/out"},
		})
		if r.ExitCode != 0 {
			t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
		}
		evs := events(e.waiter(t, r.ID))
		var res struct {
			Attempts []struct {
				Container string   `json:"container"`
				ExitCode  int      `json:"exit_code"`
				LogTail   []string `json:"log_tail"`
				Kept      bool     `json:"kept"`
			} `json:"attempts"`
		}
		data, err := os.ReadFile(filepath.Join(out, "result.json"))
		if err != nil {
			t.Fatalf("result file: %v", err)
		}
		if err := json.Unmarshal(data, &res); err != nil {
			t.Fatalf("result file: %v\n%s", err, data)
		}
		var codes []int
		for _, a := range res.Attempts {
			codes = append(codes, a.ExitCode)
		}
		if !slices.Equal(codes, []int{3, 3}) {
			t.Fatalf("attempts exited %v, want [3 3]: each from the image, not from the file system the run before left\n%s", codes, data)
		}
		user := res.Attempts[0].Container
		if !strings.HasSuffix(user, "-waitdaemon-user") || res.Attempts[1].Container != user+"-2" || !res.Attempts[0].Kept || !res.Attempts[1].Kept {
			t.Errorf("attempts %+v; want them in %s and %s-2, both kept", res.Attempts, user, user)
		}
		if _, ok := find(evs, "result"); !ok {
			t.Errorf("no result line: %v", evs)
		}
		list, err := e.engine().List(testCtx(t), phase.LabelActionID, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for _, c := range list {
			if c.Labels[phase.LabelRole] == phase.RoleUser {
				kept = append(kept, c.Name)
			}
		}
		slices.Sort(kept)
		if !slices.Equal(kept, []string{user, user + "-2"}) {
			t.Errorf("user containers left: %q; want both attempts' kept", kept)
		}
	})
}

// TestDryRun prints the plan and creates nothing.
func TestDryRun(t *testing.T) {
	onDockerAPIs(t, func(t *testing.T, c *dockerapi.Client) {
		r := runAction(t, c, tinkWorker, action{
			name:    "e2e dry run",
			command: []string{"reboot"},
			env: map[string]string{
				"IMAGE": probeImage, "WAIT_SECONDS": "5", "WAITDAEMON_DRY_RUN": "true",
				"WAITDAEMON_REGISTRY_USERNAME": "operator", "WAITDAEMON_REGISTRY_PASSWORD": "hunter2-secret",
				"DB_PASSWORD": "user-s3cret",
			},
		})
		if r.ExitCode != 0 {
			t.Fatalf("the dry run exited %d:\n%s", r.ExitCode, r.Logs)
		}
		var plan struct {
			FoundBy string `json:"found_by"`
			Wait    int    `json:"wait_seconds"`
			Pull    []struct{ Decision string }
			User    struct{ Create *dockerapi.CreateRequest } `json:"user_container"`
			Waiter  struct{ Create *dockerapi.CreateRequest } `json:"waiter"`
		}
		logs := strings.ReplaceAll(r.Logs, "\r\n", "\n")
		if err := json.Unmarshal([]byte(logs), &plan); err != nil {
			t.Fatalf("the dry run's output is not the plan: %v\n%s", err, r.Logs)
		}
		if plan.FoundBy != "cgroup" || plan.Wait != 5 || len(plan.Pull) != 1 || plan.Pull[0].Decision != "present" ||
			plan.User.Create == nil || plan.User.Create.Image != probeImage || plan.Waiter.Create == nil || plan.Waiter.Create.HostConfig.Privileged {
			t.Errorf("plan = %+v", plan)
		}
		if strings.Contains(r.Logs, "hunter2-secret") {
			t.Errorf("the plan shows the registry password:\n%s", r.Logs)
		}
		if strings.Contains(r.Logs, "user-s3cret") || !slices.Contains(plan.User.Create.Env, "DB_PASSWORD=<redacted>") {
			t.Errorf("the plan shows the user's DB_PASSWORD, or leaves it out: env %q", plan.User.Create.Env)
		}
		waitGone(t, rigOf(c), r.ID, 0)
		ctx := testCtx(t)
		for _, n := range []string{"user", "waiter"} {
			if _, err := c.ContainerInspect(ctx, actionContainer(tinkWorker, "e2e dry run")+"-waitdaemon-"+n); err == nil {
				t.Errorf("the dry run created the %s container", n)
			}
		}
	})
}

// TestPlanContainer: `waitdaemon plan --container ID`, run on a host (here
// with the image's binary and the socket), prints for an existing
// container what the action would do, from that container's settings,
// and creates nothing.
func TestPlanContainer(t *testing.T) {
	onDockerAPIs(t, func(t *testing.T, c *dockerapi.Client) {
		ctx := testCtx(t)
		target, err := c.ContainerCreate(ctx, sanitize(scoped("e2e plan target")), dockerapi.CreateRequest{
			Config: dockerapi.Config{
				Image: actionImage, Cmd: []string{"reboot", "-f"},
				Env: []string{"IMAGE=" + probeImage, "WAIT_SECONDS=7", "BLOCK_DEVICE=/dev/sda", "API_TOKEN=user-t0ken"},
			},
			HostConfig: dockerapi.HostConfig{PidMode: "host", Binds: []string{"/tmp:/scratch", c.SocketPath() + ":/var/run/docker.sock"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeAction(c, target.ID) })
		r := runAction(t, c, tinkAgent, action{
			name:       "e2e plan",
			entrypoint: []string{"/waitdaemon", "plan", "--container", target.ID},
		})
		if r.ExitCode != 0 {
			t.Fatalf("plan exited %d:\n%s", r.ExitCode, r.Logs)
		}
		var plan struct {
			Action  struct{ ID string }
			FoundBy string `json:"found_by"`
			Wait    int    `json:"wait_seconds"`
			User    struct {
				Name   string
				Create *dockerapi.CreateRequest
			} `json:"user_container"`
		}
		if err := json.Unmarshal([]byte(r.Logs), &plan); err != nil {
			t.Fatalf("plan's output is not the plan: %v\n%s", err, r.Logs)
		}
		u := plan.User.Create
		if plan.Action.ID != target.ID || plan.FoundBy != "plan --container" || plan.Wait != 7 || u == nil {
			t.Fatalf("plan = %+v, want the target, found by plan --container, a 7 s wait and a user container", plan)
		}
		if u.Image != probeImage || strings.Join(u.Cmd, " ") != "reboot -f" || u.HostConfig.PidMode != "host" ||
			!slices.Contains(u.Env, "BLOCK_DEVICE=/dev/sda") || !slices.Contains(u.Env, "API_TOKEN=<redacted>") ||
			!slices.ContainsFunc(u.HostConfig.Binds, func(b string) bool { return strings.HasPrefix(b, "/tmp:/scratch") }) { // Podman adds options
			t.Errorf("user container = image %s, cmd %q, pid %q, env %q, binds %q; want the target's settings, its token redacted",
				u.Image, u.Cmd, u.HostConfig.PidMode, u.Env, u.HostConfig.Binds)
		}
		if strings.Contains(r.Logs, "user-t0ken") || slices.ContainsFunc(u.Env, func(kv string) bool {
			return strings.HasPrefix(kv, "IMAGE=") || strings.HasPrefix(kv, "WAIT_SECONDS=")
		}) {
			t.Errorf("the plan shows a secret or passes on a control variable: %q", u.Env)
		}
		list, err := c.ContainerList(ctx, "org.waitdaemon.action-id="+target.ID)
		if err != nil || len(list) != 0 {
			t.Errorf("plan created %d containers (%v)", len(list), err)
		}
	})
}

// TestRerun: the same action run again while its first run still waits
// ends with exactly one waiter, and a failed user container kept from an
// earlier run does not block the next.
func TestRerun(t *testing.T) {
	onEngines(t, func(t *testing.T, e rig) {
		ctx := testCtx(t)
		out := t.TempDir()
		a := action{name: "e2e rerun", env: map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "30"}, volumes: []string{out + ":/out"}}
		first := e.run(t, tinkWorker, a)
		if first.ExitCode != 0 {
			t.Fatalf("the first run exited %d:\n%s", first.ExitCode, first.Logs)
		}
		a.env["WAIT_SECONDS"] = "1"
		second := e.run(t, tinkWorker, a)
		removed := `"msg":"removed an earlier run's container","name":"` + second.Name + `-waitdaemon-waiter"`
		if second.ExitCode != 0 || !strings.Contains(second.Logs, removed) {
			t.Fatalf("the second run exited %d, want 0 and the earlier waiter removed (%s):\n%s", second.ExitCode, removed, second.Logs)
		}
		list, err := e.engine().List(ctx, phase.LabelAction, second.Name)
		var waiters []string
		for _, l := range list {
			if l.Labels[phase.LabelRole] == phase.RoleWaiter {
				waiters = append(waiters, l.Labels[phase.LabelActionID])
			}
		}
		if err != nil || len(waiters) != 1 || waiters[0] != second.ID {
			t.Fatalf("the waiters of the action are those of actions %q (%v), want exactly the second run's", waiters, err)
		}
		e.waiter(t, second.ID)
		waitDone(t, e, second.ID, 5*time.Second)
		waitGone(t, e, first.ID, 0)

		// A kept failure, then a new run.
		a.env["PROBE_EXIT"] = "3"
		failed := e.run(t, tinkWorker, a)
		e.waiter(t, failed.ID)
		kept := roleOf(t, e, failed.ID, phase.RoleUser)
		delete(a.env, "PROBE_EXIT")
		again := e.run(t, tinkWorker, a)
		if again.ExitCode != 0 {
			t.Fatalf("a run after a kept failure exited %d:\n%s", again.ExitCode, again.Logs)
		}
		// Kept under a name of its own (containerd IDs are not renamed:
		// only the name in the label is).
		keptName := again.Name + "-waitdaemon-user-" + failed.ID[:12]
		left := settled(t, e.engine(), failed.ID, 5*time.Second, phase.RoleUser)
		if kept == "" || len(left) != 1 || left[0].ID != kept || left[0].Name != keptName || e.exitCode(t, kept) != 3 {
			t.Errorf("the earlier failure %q is %+v, want it kept as %s, exit 3", kept, left, keptName)
		}
		res, _ := find(events(e.waiter(t, again.ID)), "result")
		if res.num("exit_code") != 0 {
			t.Errorf("the new run's result = %v, want exit 0", res)
		}
		waitDone(t, e, again.ID, 5*time.Second)
	})
}
