package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBadInput: bad input exits 2, naming the input and what it wants,
// before reaching any engine.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("name: a\nimage: i\ntimeout: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("name: a\ntimeout: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "none.sock")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no socket", []string{"-runtime", "docker", "-action", good}, "-socket: want the engine's unix socket"},
		{"no action", []string{"-runtime", "docker", "-socket", sock}, "-action: want a file holding one action"},
		{"a runtime unknown", []string{"-runtime", "podman", "-socket", sock, "-action", good}, `-runtime "podman": want containerd or docker`},
		{"no runtime", []string{"-socket", sock, "-action", good}, `-runtime "": want containerd or docker`},
		{"a missing file", []string{"-runtime", "docker", "-socket", sock, "-action", filepath.Join(dir, "none.yaml")}, "none.yaml: no such file"},
		{"no image", []string{"-runtime", "docker", "-socket", sock, "-action", bad}, "bad.yaml: an action needs a name and an image"},
		{"a release unknown", []string{"-runtime", "docker", "-socket", sock, "-release", "v0.22", "-action", good}, `-release: release "v0.22": want one of tink-worker, v0.23, v0.24, v0.25, head`},
		{"-cni on docker", []string{"-runtime", "docker", "-cni", "-socket", sock, "-action", good}, "-cni: want -runtime containerd"},
		{"an argument", []string{"-runtime", "docker", "-socket", sock, "-action", good, "more"}, `unexpected arguments ["more"]`},
		{"a flag unknown", []string{"-runtime", "docker", "-socket", sock, "-action", good, "-x"}, "flag provided but not defined: -x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit %d, want 2; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout has %q, want nothing", stdout.String())
			}
		})
	}
}

// TestZeroTimeout: an action without a timeout has timed out before
// anything starts, as under tink-agent, whose deadline is then 0 s: the
// tool says so, and exits 1, reaching no engine.
func TestZeroTimeout(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "action.yaml")
	if err := os.WriteFile(file, []byte("name: no-timeout\nimage: waitdaemon:latest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, runtime := range []string{"containerd", "docker"} {
		t.Run(runtime, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			before := time.Now()
			if code := run([]string{"-runtime", runtime, "-socket", filepath.Join(dir, "none.sock"), "-action", file}, &stdout, &stderr); code != 1 {
				t.Errorf("exit %d, want 1; stderr:\n%s", code, stderr.String())
			}
			var line struct {
				Msg      string    `json:"msg"`
				Action   string    `json:"action"`
				ExitCode int       `json:"exit_code"`
				KilledAt time.Time `json:"killed_at"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &line); err != nil || line.Msg != "action timed out" || line.Action != "no-timeout" || line.ExitCode != -1 {
				t.Errorf("stdout %q, want one line: action no-timeout timed out, exit code -1", stdout.String())
			}
			// The deadline, 0 s after the run began.
			if line.KilledAt.Before(before) || line.KilledAt.After(time.Now()) {
				t.Errorf("killed_at %v; want when its timeout passed, during the run (stdout %q)", line.KilledAt, stdout.String())
			}
		})
	}
}
