package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
		{name: "help lists the variables", args: []string{"--help"}, wantCode: 0, wantOut: "WAITDAEMON_VERBOSE=true does too"},
		{name: "api needs a path", args: []string{"api", "GET"}, wantCode: exitUsage, wantErr: "expected \"<path>\""},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: exitUsage, wantErr: "unexpected argument frobnicate"},
		{name: "bad DOCKER_HOST", args: []string{"api", "GET", "/_ping"}, env: map[string]string{"DOCKER_HOST": "tcp://10.0.0.1:2375"}, wantCode: exitInput, wantErr: "DOCKER_HOST=\"tcp://10.0.0.1:2375\": expected unix://"},
		{name: "api body must be JSON", args: []string{"api", "POST", "/containers/create", "{not json"}, env: map[string]string{"DOCKER_HOST": "unix:///nonexistent.sock"}, wantCode: exitFailure, wantErr: "expected JSON"},
		{name: "bad WAITDAEMON_VERBOSE is bad input", args: []string{"action", "--", "reboot"}, env: map[string]string{"WAITDAEMON_VERBOSE": "banana"}, wantCode: exitInput, wantErr: `WAITDAEMON_VERBOSE="banana": expected true or false`},
		// WAITDAEMON_VERBOSE is read by the rule of every switch; -v
		// still traces.
		{name: "WAITDAEMON_VERBOSE trimmed, any case", args: []string{"version"}, env: map[string]string{"DOCKER_HOST": "unix:///nonexistent.sock", "WAITDAEMON_VERBOSE": " True "}, wantCode: 0, wantErr: "> GET /_ping"},
		{name: "WAITDAEMON_VERBOSE empty", args: []string{"version"}, env: map[string]string{"DOCKER_HOST": "unix:///nonexistent.sock", "WAITDAEMON_VERBOSE": ""}, wantCode: 0, wantOut: "engine: not reachable"},
		{name: "-v traces", args: []string{"-v", "version"}, env: map[string]string{"DOCKER_HOST": "unix:///nonexistent.sock", "WAITDAEMON_VERBOSE": "no"}, wantCode: 0, wantErr: "> GET /_ping"},
		{name: "--verbose after the command traces", args: []string{"version", "--verbose"}, env: map[string]string{"DOCKER_HOST": "unix:///nonexistent.sock"}, wantCode: 0, wantErr: "> GET /_ping"},
		{name: "engine in any case", args: []string{"version"}, env: map[string]string{"DOCKER_HOST": " unix:///nonexistent.sock ", "WAITDAEMON_ENGINE": "Docker"}, wantCode: 0, wantOut: "engine: not reachable on /nonexistent.sock"},
		// The action's command is the user image's: --help, version and
		// -v after "--" are never waitdaemon's, so each reaches the check
		// of IMAGE instead of printing help, a version, or a trace.
		{name: "action without IMAGE", args: []string{"action", "--", "--help"}, env: map[string]string{"IMAGE": ""}, wantCode: exitInput, wantErr: "IMAGE is not set"},
		{name: "action command version", args: []string{"action", "--", "version"}, env: map[string]string{"IMAGE": ""}, wantCode: exitInput, wantErr: "IMAGE is not set"},
		{name: "action command -v", args: []string{"action", "--", "-v"}, env: map[string]string{"IMAGE": ""}, wantCode: exitInput, wantErr: "IMAGE is not set"},
		{name: "action command api", args: []string{"action", "--", "api", "GET", "/_ping"}, env: map[string]string{"IMAGE": ""}, wantCode: exitInput, wantErr: "IMAGE is not set"},
		{name: "unknown engine", args: []string{"action", "--", "reboot"}, env: map[string]string{"IMAGE": "alpine", "WAITDAEMON_ENGINE": "podman"}, wantCode: exitInput, wantErr: `WAITDAEMON_ENGINE="podman": expected docker or containerd`},
		{name: "result file on /", args: []string{"action", "--", "reboot"}, env: map[string]string{"IMAGE": "alpine", "WAITDAEMON_RESULT_FILE": "/r.json", "DOCKER_HOST": "unix:///nonexistent.sock"}, wantCode: exitInput, wantErr: `WAITDAEMON_RESULT_FILE="/r.json": expected a file in a directory of its own`},
		{name: "version with containerd", args: []string{"version"}, env: map[string]string{"DOCKER_HOST": "unix:///nonexistent.sock", "CONTAINERD_ADDRESS": "/dev/null"}, wantCode: 0, wantOut: "containerd: not reachable on /dev/null"},
		{name: "version without engine", args: []string{"version"}, env: map[string]string{"DOCKER_HOST": "unix:///nonexistent.sock"}, wantCode: 0, wantOut: "engine: not reachable on /nonexistent.sock"},
		{name: "version names the binary's", args: []string{"version"}, env: map[string]string{"DOCKER_HOST": "unix:///nonexistent.sock"}, wantCode: 0, wantOut: "waitdaemon " + version + " (API up to 1."},
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
	// Every WAITDAEMON_ variable the sources and the docs name is in the
	// list, but for the misspelling they show.
	docs, err := filepath.Glob("docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	for _, file := range append([]string{"README.md", "main.go", "engines.go", "phase/settings.go", "phase/one.go", "phase/two.go"}, docs...) {
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

// TestEveryVariable holds every variable of phase.Variables to the
// settings' rules, through the function that reads it (ReadInputs and
// Validate for the action's inputs, readEnvironment for the others):
//   - its example is valid, and read: it changes what is read;
//   - surrounding spaces change nothing;
//   - empty is unset, or bad input naming it for a required variable;
//   - a keyword reads the same in any case, and a word it does not know
//     is bad input naming it; its help says so;
//   - any other value is read as written: in another case it reads
//     differently, or is refused (an image's name is lowercase).
//
// A variable added to the list is held to them with no change here; one
// without an example fails.
func TestEveryVariable(t *testing.T) {
	byName := map[string]phase.Variable{}
	for _, v := range phase.Variables {
		byName[v.Name] = v
	}
	config := t.TempDir() // no config.json
	type result struct {
		settings phase.Settings
		env      environment
		err      string
		code     int
	}
	read := func(t *testing.T, vars map[string]string) result {
		t.Helper()
		for _, v := range phase.Variables {
			t.Setenv(v.Name, "")
			os.Unsetenv(v.Name)
		}
		env := []string{"DOCKER_CONFIG=" + config}
		for k, val := range vars {
			t.Setenv(k, val)
			env = append(env, k+"="+val)
		}
		var r result
		var err, eerr error
		r.settings, err = phase.ReadInputs(env).Validate()
		r.env, eerr = readEnvironment()
		if err = cmp.Or(err, eerr); err != nil {
			r = result{err: err.Error(), code: exitCode(err)}
		}
		return r
	}
	// describe shows a result without its secrets: exported fields only.
	describe := func(r result) string {
		if r.err != "" {
			return fmt.Sprintf("error (exit %d): %s", r.code, r.err)
		}
		return fmt.Sprintf("%+v %+v", exported(r.settings), r.env)
	}
	for _, v := range phase.Variables {
		t.Run(v.Name, func(t *testing.T) {
			if v.Example == "" {
				t.Fatalf("%s has no example value", v.Name)
			}
			if v.Keyword && !strings.Contains(v.Help, "any case") {
				t.Errorf("%s is a keyword, but its help %q does not say it is read in any case", v.Name, v.Help)
			}
			with := func(value *string) map[string]string {
				vars := map[string]string{}
				for _, w := range phase.Variables {
					if w.Required && w.Name != v.Name {
						vars[w.Name] = w.Example
					}
				}
				if v.With != "" {
					vars[v.With] = byName[v.With].Example
				}
				if value != nil {
					vars[v.Name] = *value
				}
				return vars
			}
			same := func(what string, got, want result) {
				t.Helper()
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: reads as\n  %s\nwant as\n  %s", what, describe(got), describe(want))
				}
			}
			unset := read(t, with(nil))
			example := read(t, with(&v.Example))
			if example.err != "" {
				t.Fatalf("%s=%q (its example): %s", v.Name, v.Example, describe(example))
			}
			if reflect.DeepEqual(example, unset) {
				t.Errorf("%s=%q reads as if unset: nothing reads it", v.Name, v.Example)
			}
			for _, value := range []string{" " + v.Example + " ", "\t" + v.Example + "\n"} {
				same(fmt.Sprintf("%s=%q", v.Name, value), read(t, with(&value)), example)
			}
			for _, value := range []string{"", "  "} {
				got := read(t, with(&value))
				if !v.Required {
					same(fmt.Sprintf("%s=%q", v.Name, value), got, unset)
					continue
				}
				if got.code != exitInput || !strings.Contains(got.err, v.Name) {
					t.Errorf("%s=%q, a required variable: %s; want bad input naming it", v.Name, value, describe(got))
				}
			}
			if v.Required && (unset.code != exitInput || !strings.Contains(unset.err, v.Name)) {
				t.Errorf("%s unset, a required variable: %s; want bad input naming it", v.Name, describe(unset))
			}
			upper := strings.ToUpper(v.Example)
			switch {
			case v.Keyword:
				title := strings.ToUpper(v.Example[:1]) + v.Example[1:]
				for _, value := range []string{upper, title} {
					same(fmt.Sprintf("%s=%q, a keyword", v.Name, value), read(t, with(&value)), example)
				}
				value := "banana"
				if got := read(t, with(&value)); got.code != exitInput || !strings.Contains(got.err, v.Name) {
					t.Errorf("%s=%q: %s; want bad input naming %s", v.Name, value, describe(got), v.Name)
				}
			case upper != v.Example:
				if got := read(t, with(&upper)); reflect.DeepEqual(got, example) {
					t.Errorf("%s=%q reads as %q: a value read as written should not", v.Name, upper, v.Example)
				}
			}
		})
	}
}

// exported is a struct's exported fields, by name: no secret is kept
// in an unexported one.
func exported(x any) map[string]any {
	out := map[string]any{}
	rv := reflect.ValueOf(x)
	for i := range rv.NumField() {
		if f := rv.Type().Field(i); f.IsExported() {
			out[f.Name] = rv.Field(i).Interface()
		}
	}
	return out
}

// TestLastWord: the action and the waiter say why they failed on stdout,
// their log, which containerd's shim keeps whole; the commands people
// type say it on stderr.
func TestLastWord(t *testing.T) {
	var out, errOut bytes.Buffer
	for args, want := range map[string]*bytes.Buffer{
		"action -- reboot": &out, "waiter --wait-seconds=1": &out,
		"api GET /version": &errOut, "plan --container x": &errOut, "version": &errOut, "": &errOut,
	} {
		if got := lastWord(strings.Fields(args), &out, &errOut); got != want {
			t.Errorf("lastWord(%q) is the other stream", args)
		}
	}
}
