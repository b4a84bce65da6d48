package main

import (
	"bytes"
	"context"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/internal/enginetest"
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

// TestHelpListsEveryVariable checks --help against the action's own
// variables, so that a new one cannot go undocumented.
func TestHelpListsEveryVariable(t *testing.T) {
	out, _, code := runCLI(t, "--help")
	if code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	vars := []string{"WAITDAEMON_VERBOSE", "DOCKER_HOST"}
	ty := reflect.TypeOf(actionCmd{})
	for i := range ty.NumField() {
		if env := ty.Field(i).Tag.Get("env"); env != "" {
			vars = append(vars, strings.Split(env, ",")...)
		}
	}
	if len(vars) < 15 {
		t.Fatalf("found only %d variables: %q", len(vars), vars)
	}
	for _, v := range vars {
		if !regexp.MustCompile(`(?m)^\s+` + v + `\s`).MatchString(out) {
			t.Errorf("--help does not list %s", v)
		}
	}
}

// TestAPIVerbose is the curl-like trace against the local engine.
func TestAPIVerbose(t *testing.T) {
	enginetest.Require(t)
	out, errOut, code := runCLI(t, "api", "GET", "/containers/json", "--verbose")
	if code != 0 || !strings.HasPrefix(out, "[") {
		t.Fatalf("api GET /containers/json: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		`(?m)^> GET /_ping HTTP/1\.1$`,
		`(?m)^< Api-Version: 1\.\d+$`,
		`(?m)^> GET /v1\.\d+/containers/json HTTP/1\.1$`,
		`(?m)^> User-Agent: waitdaemon/`,
		`(?m)^< HTTP/1\.1 200 OK$`,
		`(?m)^< Content-Type: application/json$`,
		`(?m)^\[`,
	} {
		if !regexp.MustCompile(want).MatchString(errOut) {
			t.Errorf("trace lacks %s:\n%s", want, errOut)
		}
	}

	_, errOut, code = runCLI(t, "api", "GET", "/containers/waitdaemon-no-such-container/json")
	if code != exitFailure || !strings.Contains(errOut, "404: No such container: waitdaemon-no-such-container") {
		t.Errorf("api GET of a missing container: exit %d, stderr %q; want exit 1 and the engine's message", code, errOut)
	}

	out, errOut, code = runCLI(t, "api", "GET", "/v1.24/version")
	if code != 0 || !strings.Contains(out, `"ApiVersion"`) {
		t.Errorf("api GET /v1.24/version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestVersion(t *testing.T) {
	enginetest.Require(t)
	out, errOut, code := runCLI(t, "version")
	if code != 0 || !regexp.MustCompile(`(?m)^engine: linux \S+, API 1\.\d+ \(minimum 1\.\d+\), using 1\.\d+$`).MatchString(out) {
		t.Errorf("version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
