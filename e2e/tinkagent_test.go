package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine/containerd"
	"github.com/waitdaemon/waitdaemon/phase"
	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
)

var toolOnce struct {
	sync.Once
	path string
	err  error
	out  []byte
}

// tinkagentTool builds tools/tinkagent, static, once.
func tinkagentTool(t *testing.T) string {
	t.Helper()
	toolOnce.Do(func() {
		dir, err := os.MkdirTemp("", "waitdaemon-tinkagent-")
		if err != nil {
			toolOnce.err = err
			return
		}
		toolOnce.path = filepath.Join(dir, "tinkagent")
		cmd := exec.Command("go", "build", "-o", toolOnce.path, "../tools/tinkagent")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		toolOnce.out, toolOnce.err = cmd.CombinedOutput()
	})
	if toolOnce.err != nil {
		t.Fatalf("building tools/tinkagent: %v\n%s", toolOnce.err, toolOnce.out)
	}
	return toolOnce.path
}

// readmeTemplate is the README's template under heading, the first YAML
// block after it.
func readmeTemplate(t *testing.T, heading string) string {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(data), heading)
	if i < 0 {
		t.Fatalf("the README has no %q", heading)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(string(data)[i:])
	if m == nil {
		t.Fatalf("no template after %q in the README", heading)
	}
	return m[1]
}

// TestTinkagentTool runs the README's reboot templates, for HookOS on
// Docker 20.10 and for CaptainOS on containerd, through tools/tinkagent
// as the VM suite does, with only the images, the wait, the socket's
// host path and a volume for the probe's report changed: the action hands
// off, the tool says how it ended in one JSON line and exits 0, and the
// user container runs.
func TestTinkagentTool(t *testing.T) {
	tool := tinkagentTool(t)
	for _, tc := range []struct {
		runtime, heading, socket, hostSocket string
		args                                 []string
	}{
		{"docker", "### HookOS", "/var/run/docker.sock", "", []string{"-unprivileged"}},
		// In the tests' namespace, where their images are (E2E_TAG).
		{"containerd", "### CaptainOS", "/run/containerd/containerd.sock", containerdSocket, []string{"-namespace", containerdNS}},
	} {
		t.Run(tc.runtime, func(t *testing.T) {
			image, probe := actionImage, probeImage
			if tc.runtime == "containerd" {
				setupContainerd(t)
				image, probe = "docker.io/library/"+actionImage, "docker.io/library/"+probeImage
			} else {
				c := setup(t)
				tc.hostSocket = c.SocketPath()
			}
			out := t.TempDir()
			tmpl := readmeTemplate(t, tc.heading)
			// The action's image, whichever the README names.
			actionLine := regexp.MustCompile(`\n  image: \S+\n`)
			if !actionLine.MatchString(tmpl) {
				t.Fatalf("the README's template names no action image:\n%s", tmpl)
			}
			tmpl = actionLine.ReplaceAllLiteralString(tmpl, "\n  image: "+image+"\n")
			for _, r := range [][2]string{
				{"WAIT_SECONDS: 10", "WAIT_SECONDS: 1\n    PROBE_DIR: /out\n    PROBE_NAME: tool"},
				// The probe exits 0 and the host stays up: the fallback
				// follows the wait, 5 s here, after the probe has reported.
				{"WAITDAEMON_DOWN_WITHIN: 30", "WAITDAEMON_DOWN_WITHIN: 5"},
				{"- " + tc.socket + ":", "- " + out + ":/out\n    - " + tc.hostSocket + ":"},
			} {
				if !strings.Contains(tmpl, r[0]) {
					t.Fatalf("the README's template lacks %q:\n%s", r[0], tmpl)
				}
				tmpl = strings.Replace(tmpl, r[0], r[1], 1)
			}
			userImage := regexp.MustCompile(`\n    IMAGE: \S+\n`)
			if !userImage.MatchString(tmpl) {
				t.Fatalf("the README's template has no IMAGE:\n%s", tmpl)
			}
			tmpl = userImage.ReplaceAllString(tmpl, "\n    IMAGE: "+probe+"\n")
			command := regexp.MustCompile(`\n  command: (\[.*\])\n`).FindStringSubmatch(tmpl)
			var want []string
			if command == nil || json.Unmarshal([]byte(command[1]), &want) != nil {
				t.Fatalf("the README's template has no command:\n%s", tmpl)
			}
			want = append([]string{"/probe"}, want...)
			file := filepath.Join(t.TempDir(), "action.yaml")
			if err := os.WriteFile(file, []byte(tmpl), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(tool, append(tc.args, "-runtime", tc.runtime, "-socket", tc.hostSocket, "-action", file)...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var hand struct {
				Action struct{ ID string } `json:"action"`
			}
			for _, e := range events(stderr.String()) {
				if e.str("msg") == "handed off" {
					b, _ := json.Marshal(e)
					_ = json.Unmarshal(b, &hand)
				}
			}
			if hand.Action.ID != "" {
				t.Cleanup(func() { cleanAction(t, tc.runtime, hand.Action.ID) })
			}
			if err != nil {
				t.Fatalf("tinkagent: %v\nstdout:\n%s\nstderr (the action's output):\n%s", err, stdout.String(), stderr.String())
			}
			if hand.Action.ID == "" {
				t.Fatalf("the action's output, relayed on stderr, has no hand-off:\n%s", stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			var line struct {
				Msg      string `json:"msg"`
				Action   string `json:"action"`
				ExitCode *int   `json:"exit_code"`
				At       string `json:"at"`
			}
			if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &line) != nil {
				t.Fatalf("stdout %q, want one JSON line", stdout.String())
			}
			at, err := time.Parse(time.RFC3339Nano, line.At)
			if line.Msg != "action exited" || line.Action != "reboot" || line.ExitCode == nil || *line.ExitCode != 0 || err != nil || time.Since(at) > time.Minute {
				t.Errorf("stdout %s, want the action reboot exited 0, at an RFC 3339 time just now", lines[0])
			}
			deadline := time.Now().Add(time.Minute)
			for {
				if p, ok := readProbe(t, out, "tool"); ok {
					if !slices.Equal(p.Args, want) {
						t.Errorf("the user container ran %q, want the template's command", p.Args)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the user container did not run within a minute; the action said:\n%s", stderr.String())
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// cleanAction removes what action id left: on Docker the containers
// labelled with it, on containerd those and their output directories.
func cleanAction(t *testing.T, runtime, id string) {
	if runtime == "docker" {
		removeAction(setup(t), id)
		return
	}
	c := &containerdapi.Client{Socket: containerdSocket, Namespace: containerdNS}
	eng := containerd.New(c)
	ctx := testCtx(t)
	// The probe exits 0 and the host stays up: with the template's
	// WAITDAEMON_DOWN_WITHIN, the run and the fallback are failed
	// attempts, kept.
	settled(t, eng, id, 30*time.Second, phase.RoleFallback+" stopped", phase.RoleUser+" stopped", phase.RoleWaiter+" stopped")
	list, _ := eng.List(ctx, phase.LabelActionID, id)
	for _, l := range list {
		_ = eng.Remove(ctx, l.ID)
		_ = os.RemoveAll(filepath.Join(containerd.DefaultLogDir, l.ID))
	}
}

// TestAgentTimeout: at the action's timeout the agent kills it (on
// containerd SIGKILL; on Docker a stop: SIGTERM, and SIGKILL 5 s later), counts
// it failed, and on containerd keeps its container, deleting its task and
// its /etc files; on Docker it removes it, as it removes every action.
func TestAgentTimeout(t *testing.T) {
	sleepy := func(image string) tinkagent.Action {
		return tinkagent.Action{ID: "e2e", Name: "e2e timeout " + randomHex(4), Image: image, Env: []string{"PROBE_SLEEP=60"}, Timeout: 2 * time.Second}
	}
	t.Run("containerd", func(t *testing.T) {
		c, eng, _ := setupContainerd(t)
		ctx := testCtx(t)
		r := &tinkagent.Containerd{C: c}
		ctr, err := r.Create(ctx, sleepy("docker.io/library/"+probeImage))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = eng.Remove(context.Background(), ctr.ID) })
		ctx2, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		began := time.Now()
		res, err := ctr.Run(ctx2)
		if err != nil {
			t.Fatal(err)
		}
		if err := ctr.Finish(ctx, res); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); !res.TimedOut || res.ExitCode != 137 || took > 10*time.Second {
			t.Errorf("result %+v after %v, want timed out, killed (137), at once", res, took)
		}
		if _, err := c.ContainerGet(ctx, ctr.ID); err != nil {
			t.Errorf("the timed-out action's container: %v, want it kept", err)
		}
		if _, err := c.TaskGet(ctx, ctr.ID); !errors.Is(err, containerdapi.ErrNotFound) {
			t.Errorf("the timed-out action's task: %v, want it deleted", err)
		}
		if _, err := os.Stat(ctr.Etc); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the action's /etc files %s: %v, want them deleted", ctr.Etc, err)
		}
	})
	onDockers(t, func(t *testing.T, c *dockerapi.Client) {
		ctx := testCtx(t)
		d := &tinkagent.Docker{C: c, Unprivileged: !engineOf(c).privileged}
		a := sleepy(probeImage)
		began := time.Now()
		res, err := d.Run(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		// The stop's SIGTERM ends the probe (Go's runtime exits 2).
		if took := time.Since(began); !res.TimedOut || res.ExitCode == 0 || took < 2*time.Second || took > 10*time.Second {
			t.Errorf("result %+v after %v, want timed out, stopped, at the 2 s timeout", res, took)
		}
		if _, err := c.ContainerInspect(ctx, res.ContainerID); !errors.Is(err, dockerapi.ErrNotFound) {
			t.Errorf("the timed-out action's container: %v, want it removed", err)
		}
	})
}
