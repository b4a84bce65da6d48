package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/phase"
)

// TestDeps keeps the binary shell-free and SDK-free: it must import
// neither os/exec nor testing, nor any Docker or moby package, nor gRPC's
// or containerd's own client (containerdapi speaks gRPC by hand).
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %d packages: %q", len(deps), deps)
	}
	for _, d := range deps {
		if d == "os/exec" || d == "testing" || strings.HasPrefix(d, "github.com/docker/") || strings.HasPrefix(d, "github.com/moby/") ||
			d == "google.golang.org/grpc" || strings.HasPrefix(d, "google.golang.org/grpc/") || strings.HasPrefix(d, "github.com/containerd/") {
			t.Errorf("the binary imports %s", d)
		}
	}
}

// runCLI runs the command line in-process and returns its output and
// exit code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var o, e bytes.Buffer
	err := run(ctx, args, &o, &e)
	if err != nil && err.Error() != "" {
		e.WriteString("waitdaemon: " + err.Error() + "\n")
	}
	return o.String(), e.String(), exitCode(err)
}

func TestCLIWithoutEngine(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		env      map[string]string
		wantCode int
		wantOut  string // in stdout
		wantErr  string // in stderr
	}{
		{name: "help lists the variables", args: []string{"--help"}, wantCode: 0, wantOut: "$WAITDAEMON_VERBOSE"},
		{name: "api needs a path", args: []string{"api", "GET"}, wantCode: exitUsage, wantErr: "expected \"<path>\""},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: exitUsage, wantErr: "unexpected argument frobnicate"},
		{name: "bad DOCKER_HOST", args: []string{"api", "GET", "/_ping"}, env: map[string]string{"DOCKER_HOST": "tcp://10.0.0.1:2375"}, wantCode: exitInput, wantErr: "DOCKER_HOST=\"tcp://10.0.0.1:2375\": expected unix://"},
		{name: "api body must be JSON", args: []string{"api", "POST", "/containers/create", "{not json"}, env: map[string]string{"DOCKER_HOST": "unix:///nonexistent.sock"}, wantCode: exitFailure, wantErr: "expected JSON"},
		{name: "bad WAITDAEMON_VERBOSE is bad input", args: []string{"action", "--", "reboot"}, env: map[string]string{"WAITDAEMON_VERBOSE": "banana"}, wantCode: exitInput, wantErr: `from envar WAITDAEMON_VERBOSE="banana"`},
		// The action's command is the user image's: --help, version and
		// -v after "--" are never waitdaemon's, so each reaches the check
		// of IMAGE instead of printing help, a version, or a trace.
		{name: "action without IMAGE", args: []string{"action", "--", "--help"}, env: map[string]string{"IMAGE": ""}, wantCode: exitInput, wantErr: "IMAGE is not set"},
		{name: "action command version", args: []string{"action", "--", "version"}, env: map[string]string{"IMAGE": ""}, wantCode: exitInput, wantErr: "IMAGE is not set"},
		{name: "action command -v", args: []string{"action", "--", "-v"}, env: map[string]string{"IMAGE": ""}, wantCode: exitInput, wantErr: "IMAGE is not set"},
		{name: "action command api", args: []string{"action", "--", "api", "GET", "/_ping"}, env: map[string]string{"IMAGE": ""}, wantCode: exitInput, wantErr: "IMAGE is not set"},
		{name: "unknown engine", args: []string{"action", "--", "reboot"}, env: map[string]string{"IMAGE": "alpine", "WAITDAEMON_ENGINE": "podman"}, wantCode: exitInput, wantErr: `WAITDAEMON_ENGINE="podman": expected docker or containerd`},
		{name: "version with containerd", args: []string{"version"}, env: map[string]string{"DOCKER_HOST": "unix:///nonexistent.sock", "CONTAINERD_ADDRESS": "/dev/null"}, wantCode: 0, wantOut: "containerd: not reachable on /dev/null"},
		{name: "version without engine", args: []string{"version"}, env: map[string]string{"DOCKER_HOST": "unix:///nonexistent.sock"}, wantCode: 0, wantOut: "engine: not reachable on /nonexistent.sock"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DOCKER_HOST", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			out, errOut, code := runCLI(t, tc.args...)
			if code != tc.wantCode || !strings.Contains(out, tc.wantOut) || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("waitdaemon %q: exit %d, want %d\nstdout (want %q):\n%s\nstderr (want %q):\n%s", tc.args, code, tc.wantCode, tc.wantOut, out, tc.wantErr, errOut)
			}
		})
	}
}

// TestVariables checks that every variable an action can set is in the
// one list (phase.Variables), and that --help, the reading of an
// environment (for the action and for plan), and the check for unknown
// variables all follow it: a variable added anywhere else, or missing from
// any of them, fails here.
func TestVariables(t *testing.T) {
	out, _, code := runCLI(t, "--help")
	if code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	listed := map[string]bool{}
	for _, v := range phase.Variables {
		listed[v.Name] = true
		if !regexp.MustCompile(`(?m)^\s+` + v.Name + `\s+\S`).MatchString(out) {
			t.Errorf("--help does not list %s", v.Name)
		}
	}
	if len(listed) < 19 {
		t.Fatalf("phase.Variables has only %d variables", len(listed))
	}
	// The command line's own env tags (WAITDAEMON_VERBOSE) are in the list.
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		for f := range ty.Fields() {
			for name := range strings.SplitSeq(f.Tag.Get("env"), ",") {
				if name != "" && !listed[name] {
					t.Errorf("the command line reads %s, which phase.Variables does not list", name)
				}
			}
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type)
			}
		}
	}
	walk(reflect.TypeFor[cli]())
	// Every WAITDAEMON_ variable the sources name is in the list, but for
	// the misspelling they show.
	for _, file := range []string{"README.md", "main.go", "engines.go", "phase/settings.go", "phase/one.go", "phase/two.go"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range regexp.MustCompile(`\bWAITDAEMON_[A-Z_]*[A-Z]\b`).FindAllString(string(data), -1) {
			if !listed[name] && name != "WAITDAEMON_RETRY" {
				t.Errorf("%s names %s, which phase.Variables does not list", file, name)
			}
		}
	}
	// Each variable that is an input is read, and is known to the check
	// for unknown variables; each value lands in its own input.
	var env []string
	for i, v := range phase.Variables {
		env = append(env, fmt.Sprintf("%s=value-%d", v.Name, i))
	}
	in := phase.ReadInputs(env)
	in.Env = nil
	got := fmt.Sprintf("%+v", in)
	for i, v := range phase.Variables {
		value := fmt.Sprintf("value-%d", i)
		read := strings.Contains(got, value+" ") || strings.Contains(got, value+"}")
		switch {
		case v.Name == "IMAGE" || v.Name == "WAIT_SECONDS":
			// Its alias is set too, and wins.
		case !v.Input():
			if read {
				t.Errorf("%s is read by the command line or the engine's client, yet ReadInputs took it", v.Name)
			}
		case !read:
			t.Errorf("ReadInputs does not read %s", v.Name)
		}
	}
	for _, name := range phase.Known() {
		if !listed[name] {
			t.Errorf("phase.Known() has %s, which phase.Variables does not list", name)
		}
	}
	if _, err := phase.ReadInputs([]string{"IMAGE=alpine", "WAITDAEMON_RETRIES=1", "WAITDAEMON_DRY_RUN=true", "WAITDAEMON_VERBOSE=1", "WAITDAEMON_CONTAINER=x"}).Validate(); err != nil {
		t.Errorf("known variables refused: %v", err)
	}
}
