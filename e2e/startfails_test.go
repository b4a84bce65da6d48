package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// noStartImage is the probe image with an entrypoint that is not there:
// a user container of it is created, and cannot start.
var noStartImage = "waitdaemon-nostart:" + e2eTag

var noStartOnce struct {
	sync.Once
	err error
	out []byte
}

// needNoStart builds noStartImage on the Docker engine, once, and puts it
// on the row's engine.
func needNoStart(t *testing.T, e rig) {
	t.Helper()
	noStartOnce.Do(func() {
		cmd := exec.Command("docker", "build", "-q", "-t", noStartImage, "-")
		cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
		cmd.Stdin = strings.NewReader("FROM " + probeImage + "\nENTRYPOINT [\"/no-such-binary\"]\n")
		noStartOnce.out, noStartOnce.err = cmd.CombinedOutput()
	})
	if noStartOnce.err != nil {
		t.Fatalf("building %s: %v\n%s", noStartImage, noStartOnce.err, noStartOnce.out)
	}
	switch row := e.row(); {
	case row.containerd:
		importImages(t, noStartImage)
	case row.name != "docker":
		if out, err := exec.Command("sh", "-c", "docker save "+noStartImage+" | docker -H unix://"+e.(dockerRig).c.SocketPath()+" load -q").CombinedOutput(); err != nil {
			t.Fatalf("loading %s: %v\n%s", noStartImage, err, out)
		}
	}
}

// TestStartFailsThenFallback: a user container whose command is not there
// is a failed attempt on Docker, which finds out at the start: it is
// re-run, then the fallback runs, and the result file holds every
// attempt with the engine's word and exit code 127. containerd finds out
// at the task's create, in phase 1, which fails while the agent listens,
// naming the command, and leaves nothing.
func TestStartFailsThenFallback(t *testing.T) {
	onEngines(t, func(t *testing.T, e rig) {
		needNoStart(t, e)
		out := t.TempDir()
		r := e.run(t, tinkAgent, action{
			name: "e2e no start", volumes: []string{out + ":/out"},
			env: map[string]string{
				"IMAGE": noStartImage, "WAIT_SECONDS": "0", "WAITDAEMON_RETRIES": "1",
				"WAITDAEMON_FALLBACK_IMAGE": probeImage, "WAITDAEMON_FALLBACK_COMMAND": `["--exit=0","fallback"]`,
				"WAITDAEMON_RESULT_FILE": filepath.Join(out, "result.json"),
			},
		})
		if e.row().containerd {
			if r.ExitCode == 0 || !strings.Contains(r.Logs, "/no-such-binary") {
				t.Errorf("the action exited %d:\n%s\nwant it to fail naming /no-such-binary", r.ExitCode, r.Logs)
			}
			waitGone(t, e, r.ID, 5*time.Second)
			return
		}
		if r.ExitCode != 0 {
			t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
		}
		e.waiter(t, r.ID)
		data, err := os.ReadFile(filepath.Join(out, "result.json"))
		if err != nil {
			t.Fatalf("result file: %v", err)
		}
		var res struct {
			ExitCode int `json:"exit_code"`
			Attempts []struct {
				ExitCode int      `json:"exit_code"`
				LogTail  []string `json:"log_tail"`
				Kept     bool     `json:"kept"`
			} `json:"attempts"`
			Fallback *struct {
				ExitCode int `json:"exit_code"`
			} `json:"fallback"`
		}
		if err := json.Unmarshal(data, &res); err != nil {
			t.Fatalf("result file: %v\n%s", err, data)
		}
		if res.ExitCode != 127 || len(res.Attempts) != 2 || res.Fallback == nil || res.Fallback.ExitCode != 0 {
			t.Fatalf("result file:\n%s\nwant two attempts exiting 127, then the fallback exiting 0", data)
		}
		for _, a := range res.Attempts {
			if a.ExitCode != 127 || !a.Kept || len(a.LogTail) != 1 || !strings.Contains(a.LogTail[0], "no-such-binary") {
				t.Errorf("attempt %+v; want exit 127, kept, the engine's word naming the command", a)
			}
		}
		if p, ran := readProbe(t, out, "probe"); !ran || !strings.Contains(strings.Join(p.Args, " "), "fallback") {
			t.Errorf("the fallback's probe report: %+v (ran %v)", p, ran)
		}
		kept := findRole(t, e, r.ID, "user")
		// The next run of the action keeps it, for inspection.
		again := e.run(t, tinkAgent, action{
			name: "e2e no start", volumes: []string{out + ":/out"},
			env: map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "0"},
		})
		if again.ExitCode != 0 {
			t.Fatalf("the next run exited %d:\n%s", again.ExitCode, again.Logs)
		}
		list, err := e.engine().List(testCtx(t), "org.waitdaemon.action-id", r.ID)
		found := false
		for _, l := range list {
			found = found || l.ID == kept
		}
		if err != nil || found == e.row().forgetsFailedStart {
			t.Errorf("after the next run: %+v, %v; want the container that could not start kept (unless the engine forgets its start)", list, err)
		}
		for _, l := range list {
			_ = e.engine().Remove(testCtx(t), l.ID)
		}
		// The next run's waiter may be gone already (WAIT_SECONDS=0):
		// wait for what it leaves, not for the waiter itself.
		waitDone(t, e, again.ID, 30*time.Second)
	})
}

// TestUnreadableLog: an action whose log cannot be read back (log driver
// none, which the waiter and the user container inherit) still hands off
// with a result file: phase 1 reads the waiter's answer from the file it
// tells, not from its log, and each attempt's tail is empty, with a note
// that says why. containerd has no log drivers: its rows are Docker's.
func TestUnreadableLog(t *testing.T) {
	onDockerAPIs(t, func(t *testing.T, c *dockerapi.Client) {
		out := t.TempDir()
		r := runAction(t, c, dockerAPI, action{
			name: "e2e no log", command: []string{"--exit=0"}, volumes: []string{out + ":/out"}, logDriver: "none",
			env: map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "0", "WAITDAEMON_RESULT_FILE": filepath.Join(out, "result.json")},
		})
		if r.ExitCode != 0 {
			t.Fatalf("the action exited %d; want the hand-off\n%s", r.ExitCode, r.Logs)
		}
		var res struct {
			ExitCode int `json:"exit_code"`
			Attempts []struct {
				LogTail []string `json:"log_tail"`
				LogNote string   `json:"log_note"`
			} `json:"attempts"`
		}
		var data []byte
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var done bool
			if data, done = resultDone(filepath.Join(out, "result.json")); done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no result file in state done after 30 s:\n%s", data)
			}
		}
		if err := json.Unmarshal(data, &res); err != nil || res.ExitCode != 0 || len(res.Attempts) != 1 {
			t.Fatalf("result file (%v):\n%s\nwant one attempt exiting 0", err, data)
		}
		if a := res.Attempts[0]; len(a.LogTail) != 0 || !strings.Contains(a.LogNote, "none") {
			t.Errorf("attempt %+v; want an empty tail and a note naming the log driver", a)
		}
		waitGone(t, rigOf(c), r.ID, 10*time.Second)
	})
}
