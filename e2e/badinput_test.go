package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// TestBadInput checks that bad input fails the action with a message that
// names the cause, and leaves no container behind.
func TestBadInput(t *testing.T) {
	onEngines(t, func(t *testing.T, e rig) {
		cases := []struct {
			name     string
			env      map[string]string
			noSocket bool
			wantCode int
			want     string
		}{
			{"WAIT_SECONDS not a number", map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "abc"}, false, 2, `WAIT_SECONDS="abc": expected a whole number of seconds from 0 to 3600`},
			{"WAIT_SECONDS negative", map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "-1"}, false, 2, `WAIT_SECONDS="-1": expected a whole number of seconds`},
			{"WAIT_SECONDS fractional", map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "1.5"}, false, 2, `WAIT_SECONDS="1.5": expected a whole number of seconds`},
			{"WAIT_SECONDS too large", map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "3601"}, false, 2, `WAIT_SECONDS="3601": expected a whole number of seconds from 0 to 3600`},
			{"WAITDAEMON_WAIT_SECONDS named", map[string]string{"IMAGE": probeImage, "WAITDAEMON_WAIT_SECONDS": "10s"}, false, 2, `WAITDAEMON_WAIT_SECONDS="10s": expected`},
			{"IMAGE unset", map[string]string{"WAIT_SECONDS": "1"}, false, 2, "IMAGE is not set: expected the image to run"},
			{"IMAGE malformed", map[string]string{"IMAGE": "Not/A:Valid:Ref", "WAIT_SECONDS": "1"}, false, 2, `IMAGE: image reference "Not/A:Valid:Ref"`},
			{"IMAGE cannot be pulled", map[string]string{"IMAGE": "127.0.0.1:1/waitdaemon/none:1", "WAIT_SECONDS": "1"}, false, 1, "pulling image 127.0.0.1:1/waitdaemon/none:1"},
			{"no socket mounted", map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "1"}, true, 1, "volumes:\n    - /var/run/docker.sock:/var/run/docker.sock\nand on CaptainOS with\n  volumes:\n    - /run/containerd/containerd.sock:/run/containerd/containerd.sock"},
			{"WAIT_SECONDS huge", map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "99999999999999999999"}, false, 2, `WAIT_SECONDS="99999999999999999999": expected a whole number of seconds from 0 to 3600`},
			{"DOCKER_HOST not a unix socket", map[string]string{"IMAGE": probeImage, "DOCKER_HOST": "tcp://127.0.0.1:2375"}, false, 2, `DOCKER_HOST="tcp://127.0.0.1:2375": expected unix:///path/to/docker.sock`},
			{"WAITDAEMON_RETRIES not a number", map[string]string{"IMAGE": probeImage, "WAITDAEMON_RETRIES": "many"}, false, 2, `WAITDAEMON_RETRIES="many": expected a whole number of re-runs from 0 to 10`},
			{"WAITDAEMON_RETRIES too many", map[string]string{"IMAGE": probeImage, "WAITDAEMON_RETRIES": "11"}, false, 2, `WAITDAEMON_RETRIES="11": expected a whole number of re-runs from 0 to 10`},
			{"WAITDAEMON_FALLBACK_COMMAND not JSON", map[string]string{"IMAGE": probeImage, "WAITDAEMON_FALLBACK_COMMAND": "reboot -f"}, false, 2, `WAITDAEMON_FALLBACK_COMMAND="reboot -f": expected a JSON array of strings, like ["reboot","-f"]`},
			{"WAITDAEMON_FALLBACK_IMAGE malformed", map[string]string{"IMAGE": probeImage, "WAITDAEMON_FALLBACK_IMAGE": "UP/Per:x:y"}, false, 2, `WAITDAEMON_FALLBACK_IMAGE: image reference "UP/Per:x:y"`},
			{"WAITDAEMON_PULL_POLICY unknown", map[string]string{"IMAGE": probeImage, "WAITDAEMON_PULL_POLICY": "sometimes"}, false, 2, `WAITDAEMON_PULL_POLICY="sometimes": expected if-not-present, always or never`},
			{"WAITDAEMON_LOG_TAIL negative", map[string]string{"IMAGE": probeImage, "WAITDAEMON_LOG_TAIL": "-5"}, false, 2, `WAITDAEMON_LOG_TAIL="-5": expected a whole number of lines from 0 to 1000`},
			{"WAITDAEMON_DOWN_WITHIN zero", map[string]string{"IMAGE": probeImage, "WAITDAEMON_DOWN_WITHIN": "0"}, false, 2, `WAITDAEMON_DOWN_WITHIN="0": expected a whole number of seconds from 1 to 3600, like 30`},
			{"WAITDAEMON_RESULT_DEVICE without a file", map[string]string{"IMAGE": probeImage, "WAITDAEMON_RESULT_DEVICE": "/dev/sda1"}, false, 2, `WAITDAEMON_RESULT_DEVICE="/dev/sda1": expected it with WAITDAEMON_RESULT_FILE`},
			{"WAITDAEMON_RESULT_FILE relative", map[string]string{"IMAGE": probeImage, "WAITDAEMON_RESULT_FILE": "result.json"}, false, 2, `WAITDAEMON_RESULT_FILE="result.json": expected an absolute path to a file on the host`},
			{"WAITDAEMON_REGISTRY_PASSWORD without a user", map[string]string{"IMAGE": probeImage, "WAITDAEMON_REGISTRY_PASSWORD": "x"}, false, 2, "WAITDAEMON_REGISTRY_USERNAME and WAITDAEMON_REGISTRY_PASSWORD: expected both or neither"},
			{"WAITDAEMON_ variable misspelt", map[string]string{"IMAGE": probeImage, "WAITDAEMON_RETRY": "2"}, false, 2, `WAITDAEMON_RETRY: waitdaemon has no such variable; did you mean WAITDAEMON_RETRIES?`},
			{"WAITDAEMON_VERBOSE not a boolean", map[string]string{"IMAGE": probeImage, "WAITDAEMON_VERBOSE": "loud"}, false, 2, `WAITDAEMON_VERBOSE="loud": expected true or false`},
		}
		if len(cases) < 12 {
			t.Fatalf("only %d kinds of bad input", len(cases))
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				began := time.Now()
				r := e.run(t, tinkAgent, action{name: "e2e bad " + tc.name, command: []string{"x"}, env: tc.env, noSocket: tc.noSocket})
				if r.ExitCode != tc.wantCode || !strings.Contains(r.Logs, tc.want) {
					t.Errorf("exit %d, output:\n%s\nwant exit %d and %q", r.ExitCode, r.Logs, tc.wantCode, tc.want)
				}
				t.Logf("failed in %v", time.Since(began).Round(time.Millisecond))
				waitGone(t, e, r.ID, time.Second)
			})
		}
	})
}

// TestNotDockerSocket mounts a socket that answers HTTP, but not like a
// Docker engine, where the engine's should be.
func TestNotDockerSocket(t *testing.T) {
	onDockers(t, func(t *testing.T, c *dockerapi.Client) {
		sock := rr.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "this is not the engine you are looking for", http.StatusNotFound)
		}))
		r := runAction(t, c, tinkAgent, action{
			name: "e2e not docker", command: []string{"x"}, noSocket: true,
			env:     map[string]string{"IMAGE": probeImage},
			volumes: []string{sock + ":/var/run/docker.sock"},
		})
		want := "/var/run/docker.sock does not answer like a Docker engine: GET /_ping: 404: this is not the engine you are looking for"
		if r.ExitCode != 1 || !strings.Contains(r.Logs, want) {
			t.Errorf("exit %d, output:\n%s\nwant exit 1 and %q", r.ExitCode, r.Logs, want)
		}
		waitGone(t, rigOf(c), r.ID, time.Second)
	})
}

// TestUnwritableResultFile: a result file the waiter could never write
// fails the action, as bad input, with nothing left. Only the waiter sees
// the host's file, so phase 1 waits for its word.
func TestUnwritableResultFile(t *testing.T) {
	onEngines(t, func(t *testing.T, e rig) {
		isDir := t.TempDir()
		if err := os.Mkdir(filepath.Join(isDir, "result.json"), 0o755); err != nil {
			t.Fatal(err)
		}
		readOnly := t.TempDir()
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", readOnly).CombinedOutput(); err != nil {
			t.Fatalf("mounting a read-only tmpfs (the tests run as root): %v\n%s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("umount", readOnly).Run() })
		cases := []struct {
			name, file, want string
		}{
			{"a directory", filepath.Join(isDir, "result.json"), "is a directory"},
			{"a read-only file system", filepath.Join(readOnly, "result.json"), "read-only file system"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				out := t.TempDir()
				r := e.run(t, tinkAgent, action{
					name: "e2e result " + tc.name, command: []string{"x"}, volumes: []string{out + ":/out"},
					env: map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "0", "WAITDAEMON_RESULT_FILE": tc.file},
				})
				want := fmt.Sprintf("WAITDAEMON_RESULT_FILE=%q: expected a file the waiter can write on the host (", tc.file)
				if r.ExitCode != 2 || !strings.Contains(r.Logs, want) || !strings.Contains(r.Logs, tc.want) {
					t.Errorf("exit %d, output:\n%s\nwant exit 2, %q and %q", r.ExitCode, r.Logs, want, tc.want)
				}
				waitGone(t, e, r.ID, 5*time.Second)
				if _, ran := readProbe(t, out, "probe"); ran {
					t.Error("the user container ran")
				}
			})
		}
		// A directory the host lacks is never made: on the host's
		// in-memory root, the result would vanish at the reboot.
		t.Run("a directory the host lacks", func(t *testing.T) {
			out, missing := t.TempDir(), filepath.Join(t.TempDir(), "target", "var")
			file := filepath.Join(missing, "result.json")
			r := e.run(t, tinkAgent, action{
				name: "e2e result no dir", command: []string{"x"}, volumes: []string{out + ":/out"},
				env: map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "0", "WAITDAEMON_RESULT_FILE": file},
			})
			if e.row().makesBindSource {
				// Podman makes it: the action hands off, and the
				// result goes where the engine made the directory.
				if r.ExitCode != 0 {
					t.Errorf("exit %d, output:\n%s\nwant the hand-off, as Podman makes the directory", r.ExitCode, r.Logs)
				}
				// The waiter may be gone already (WAIT_SECONDS=0): wait for
				// what it leaves, not for the waiter itself.
				waitDone(t, e, r.ID, 30*time.Second)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("the result file in the directory Podman made: %v", err)
				}
				return
			}
			want := fmt.Sprintf("WAITDAEMON_RESULT_FILE=%q: expected a file in a directory the host has; the host has no %s", file, missing)
			if r.ExitCode != 2 || !strings.Contains(r.Logs, want) {
				t.Errorf("exit %d, output:\n%s\nwant exit 2 and %q", r.ExitCode, r.Logs, want)
			}
			waitGone(t, e, r.ID, 5*time.Second)
			if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the missing directory: %v; want it still missing", err)
			}
			if _, ran := readProbe(t, out, "probe"); ran {
				t.Error("the user container ran")
			}
		})
	})
}
