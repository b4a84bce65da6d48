package phase

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
)

func TestWholeNumber(t *testing.T) {
	cases := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"", 10, false}, {"0", 0, false}, {"5", 5, false}, {" 45 ", 45, false}, {"3600", 3600, false}, {"007", 7, false},
		{"3601", 0, true}, {"-1", 0, true}, {"1.5", 0, true}, {"abc", 0, true}, {"10s", 0, true}, {"+5", 0, true},
		{"1e3", 0, true}, {"0x10", 0, true}, {"99999999999999999999", 0, true}, {"٣", 0, true},
	}
	for _, tc := range cases {
		got, err := wholeNumber(tc.in, 10, 3600, "seconds")
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("wholeNumber(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err != nil && err.Error() != "a whole number of seconds from 0 to 3600, like 10" {
			t.Errorf("wholeNumber(%q) error = %q", tc.in, err)
		}
	}
}

// FuzzWaitSeconds: the WAIT_SECONDS parser never panics, accepts only
// plain decimal digits, and returns a value within bounds that reads back
// as the input.
func FuzzWaitSeconds(f *testing.F) {
	for _, s := range []string{"", "10", "0", "3600", "3601", "-1", "1.5", "abc", " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n, err := wholeNumber(in, DefaultWaitSeconds, MaxWaitSeconds, "seconds")
		trimmed := strings.TrimSpace(in)
		if err != nil {
			if n != 0 {
				t.Errorf("wholeNumber(%q) = %d with an error", in, n)
			}
			return
		}
		if n < 0 || n > MaxWaitSeconds {
			t.Fatalf("wholeNumber(%q) = %d, out of bounds", in, n)
		}
		if trimmed == "" {
			if n != DefaultWaitSeconds {
				t.Errorf("wholeNumber(%q) = %d, want the default", in, n)
			}
			return
		}
		if strings.TrimLeft(trimmed, "0123456789") != "" {
			t.Fatalf("wholeNumber(%q) accepted a non-digit", in)
		}
		if back, _ := strconv.Atoi(trimmed); back != n {
			t.Errorf("wholeNumber(%q) = %d, want %d", in, n, back)
		}
	})
}

// TestUnknownVariables: a WAITDAEMON_ variable waitdaemon does not read is
// bad input, named, with the nearest real one when there is one.
func TestUnknownVariables(t *testing.T) {
	cases := []struct {
		env  []string
		want string // "" means no error
	}{
		{[]string{"IMAGE=alpine:3.20", "WAITDAEMON_RETRIES=2", "WAITDAEMON_VERBOSE=1", "WAITDAEMON_DRY_RUN=true", "FOO_WAITDAEMON_X=1"}, ""},
		{[]string{"WAITDAEMON_RETRY=2"}, `WAITDAEMON_RETRY: waitdaemon has no such variable; did you mean WAITDAEMON_RETRIES?`},
		{[]string{"WAITDAEMON_WAITSECONDS=5"}, `did you mean WAITDAEMON_WAIT_SECONDS?`},
		{[]string{"WAITDAEMON_PULLPOLICY=always"}, `did you mean WAITDAEMON_PULL_POLICY?`},
		{[]string{"WAITDAEMON_RETRIESXYZ=1"}, `did you mean WAITDAEMON_RETRIES?`},
		{[]string{"WAITDAEMON_RETRIESWXYZ=1"}, `WAITDAEMON_RETRIESWXYZ: waitdaemon has no such variable; expected one of`}, // 4 edits: too far
		{[]string{"WAITDAEMON_COLOUR=blue"}, `WAITDAEMON_COLOUR: waitdaemon has no such variable; expected one of WAITDAEMON_CONTAINER, WAITDAEMON_DOWN_WITHIN, WAITDAEMON_DRY_RUN,`},
		// The prefix in another case, or misspelt, would pass the
		// variable on to the user container, and do nothing.
		{[]string{"waitdaemon_retries=1"}, `waitdaemon_retries: waitdaemon has no such variable; did you mean WAITDAEMON_RETRIES?`},
		{[]string{"WaitDaemon_Log_Tail=5"}, `did you mean WAITDAEMON_LOG_TAIL?`},
		{[]string{"WAITDEAMON_RESULT_FILE=/var/lib/r.json"}, `WAITDEAMON_RESULT_FILE: waitdaemon has no such variable; did you mean WAITDAEMON_RESULT_FILE?`},
		{[]string{"WAIT_DAEMON_DOWN_WITHIN=30"}, `WAIT_DAEMON_DOWN_WITHIN: waitdaemon has no such variable; did you mean WAITDAEMON_DOWN_WITHIN?`},
		{[]string{"WAITDAMON_COLOUR=blue"}, `WAITDAMON_COLOUR: waitdaemon has no such variable (is WAITDAMON_ a misspelt WAITDAEMON_?); expected one of WAITDAEMON_CONTAINER,`},
		{[]string{"wait_daemon_registry_passwrd=hunter2-S3cret"}, `did you mean WAITDAEMON_REGISTRY_PASSWORD?`},
		{[]string{"WAIT_DAEMONS_COLOUR=blue"}, `WAIT_DAEMONS_COLOUR: waitdaemon has no such variable (is WAIT_DAEMONS_ a misspelt WAITDAEMON_?)`},
		// Two starts as near: the shorter is the prefix.
		{[]string{"WAITDAEMO_N_COLOUR=blue"}, `WAITDAEMO_N_COLOUR: waitdaemon has no such variable (is WAITDAEMO_ a misspelt WAITDAEMON_?)`},
		// Names of the user's own, near nothing of waitdaemon's, pass.
		{[]string{"WAIT_SECONDS=5", "WAITER=1", "DAEMON_RETRIES=3", "WAIT_TIME=2", "MAIDEN_NAME=x", "waitdaemon=1"}, ""},
		// A misspelt password's value is never shown, nor any unknown one's.
		{[]string{"WAITDAEMON_REGISTRY_PASSWROD=hunter2-S3cret"}, `WAITDAEMON_REGISTRY_PASSWROD: waitdaemon has no such variable; did you mean WAITDAEMON_REGISTRY_PASSWORD?`},
	}
	for _, tc := range cases {
		err := unknownVariables(tc.env)
		if tc.want == "" {
			if err != nil {
				t.Errorf("unknownVariables(%q) = %v, want nil", tc.env, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || exitCode(err) != engine.ExitInput {
			t.Errorf("unknownVariables(%q) = %v (exit %d), want %q (exit %d)", tc.env, err, exitCode(err), tc.want, engine.ExitInput)
		}
		if _, v, _ := strings.Cut(tc.env[0], "="); err != nil && strings.Contains(err.Error(), v) {
			t.Errorf("unknownVariables(%q) = %v: it shows the value", tc.env, err)
		}
	}
	if got := Known(); len(got) != 16 || !slices.Contains(got, "WAITDAEMON_VERBOSE") || !slices.Contains(got, "WAITDAEMON_IMAGE") {
		t.Errorf("Known() = %q, want the 16 of --help", got)
	}
}

// TestResultFile: WAITDAEMON_RESULT_FILE is a file in a directory of its
// own on the host, since that directory is bound into the waiter, and
// has no ':', which the bind's syntax would split on (a ',' is a name's,
// as a test directory's can be).
func TestResultFile(t *testing.T) {
	cases := []struct {
		value string
		want  string // the path read; "" with wantErr
		// wantErr is what the error says, beyond the variable's name.
		wantErr string
	}{
		{value: "/var/lib/waitdaemon/result.json", want: "/var/lib/waitdaemon/result.json"},
		{value: " /var/lib/wd/r.json ", want: "/var/lib/wd/r.json"},
		{value: "/var/lib/wd:ro/r.json", wantErr: "no ':'"},
		{value: "/tmp/retries,_then_fallback/r.json", want: "/tmp/retries,_then_fallback/r.json"},
		{value: "/r.json", wantErr: "its directory is bound into the waiter"},
		{value: "/", wantErr: "an absolute path"},
		{value: "r.json", wantErr: "an absolute path"},
		{value: "/var/lib/wd/", wantErr: "an absolute path"},
		{value: "/var/lib/../r.json", wantErr: "an absolute path"},
	}
	for _, tc := range cases {
		s, err := ReadInputs([]string{"IMAGE=alpine", "DOCKER_CONFIG=" + t.TempDir(), "WAITDAEMON_RESULT_FILE=" + tc.value}).Validate()
		if tc.wantErr == "" {
			if err != nil || s.ResultFile != tc.want {
				t.Errorf("WAITDAEMON_RESULT_FILE=%q: %q, %v; want %q", tc.value, s.ResultFile, err, tc.want)
			}
			continue
		}
		if err == nil || exitCode(err) != engine.ExitInput || !strings.Contains(err.Error(), "WAITDAEMON_RESULT_FILE") || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("WAITDAEMON_RESULT_FILE=%q: %q, %v; want bad input naming it, saying %q", tc.value, s.ResultFile, err, tc.wantErr)
		}
	}
}

// TestSwitch: every switch is read by one rule: trimmed, empty is false,
// true/1/yes and false/0/no in any case; another value is bad input
// naming the variable.
func TestSwitch(t *testing.T) {
	cases := []struct {
		value   string
		want    bool
		wantErr bool
	}{
		{"", false, false}, {"  ", false, false}, {"true", true, false}, {" True ", true, false}, {"YES", true, false},
		{"1", true, false}, {"no", false, false}, {"False", false, false}, {"0", false, false},
		{"banana", false, true}, {"on", false, true}, {"t", false, true}, {"2", false, true},
	}
	for _, tc := range cases {
		got, err := Switch("WAITDAEMON_X", tc.value)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("Switch(%q) = %v, %v; want %v, error %v", tc.value, got, err, tc.want, tc.wantErr)
		}
		if err != nil && (exitCode(err) != engine.ExitInput || !strings.Contains(err.Error(), `WAITDAEMON_X="`+tc.value+`"`)) {
			t.Errorf("Switch(%q) error %v, want bad input naming WAITDAEMON_X and its value", tc.value, err)
		}
	}
}

// TestValidateReadsRegistryConfig: a config.json that cannot be read or
// parsed fails the settings, before any engine call, and is named; the
// fallback's image is checked too.
func TestValidateReadsRegistryConfig(t *testing.T) {
	cases := []struct {
		name    string
		config  string // config.json; "dir" makes it a directory
		env     []string
		wantErr string // "" for none
		// input: the error is bad input, exit 2 (README, Exit codes: a
		// malformed config.json).
		input bool
	}{
		{name: "a good one", config: `{"auths":{}}`},
		{name: "malformed", config: `{"auths":`, wantErr: "config.json: expected a Docker config.json", input: true},
		{name: "a directory", config: "dir", wantErr: "reading registry credentials"},
		{
			name: "malformed, read for the fallback's image alone", config: `{"auths":`, // IMAGE's registry has its pair
			env:     []string{"WAITDAEMON_REGISTRY_USERNAME=u", "WAITDAEMON_REGISTRY_PASSWORD=p", `WAITDAEMON_FALLBACK_COMMAND=["x"]`, "WAITDAEMON_FALLBACK_IMAGE=other.example/x:1"},
			wantErr: "config.json: expected a Docker config.json", input: true,
		},
		{
			name: "malformed, never read", config: `{"auths":`,
			env: []string{"WAITDAEMON_REGISTRY_USERNAME=u", "WAITDAEMON_REGISTRY_PASSWORD=p"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "config.json")
			var err error
			if tc.config == "dir" {
				err = os.Mkdir(file, 0o700)
			} else {
				err = os.WriteFile(file, []byte(tc.config), 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = ReadInputs(append([]string{"IMAGE=reboot:1", "DOCKER_CONFIG=" + dir}, tc.env...)).Validate()
			if got := fmt.Sprint(err); (tc.wantErr == "") != (err == nil) || !strings.Contains(got, tc.wantErr) || err != nil && !strings.Contains(got, file) {
				t.Errorf("Validate: %v, want %q naming %s", err, tc.wantErr, file)
			}
			if (exitCode(err) == engine.ExitInput) != tc.input {
				t.Errorf("Validate: %v exits %d; bad input: %v", err, exitCode(err), tc.input)
			}
		})
	}
}

// TestEditDistance: the Levenshtein distance that picks the suggestion.
func TestEditDistance(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "", 3},
		{"", "abc", 3},
		{"abc", "abc", 0},
		{"kitten", "sitting", 3},
		{"WAITDAEMON_RETRY", "WAITDAEMON_RETRIES", 3},
		{"ab", "ba", 2},
		{"flaw", "lawn", 2},
	}
	for _, tc := range cases {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestVariableInput: the action's settings are inputs, read by
// ReadInputs; the command line's and the engine's choice are not.
func TestVariableInput(t *testing.T) {
	var inputs, others []string
	for _, v := range Variables {
		if v.Input() {
			inputs = append(inputs, v.Name)
		} else {
			others = append(others, v.Name)
		}
	}
	want := []string{"WAITDAEMON_VERBOSE", "WAITDAEMON_ENGINE", "DOCKER_HOST", "CONTAINERD_ADDRESS", "CONTAINERD_NAMESPACE"}
	if diff := linediff.Lines(want, others); diff != "" {
		t.Errorf("not inputs (-want +got):\n%s", diff)
	}
	for _, name := range []string{"IMAGE", "WAIT_SECONDS", "WAITDAEMON_RETRIES", "WAITDAEMON_CONTAINER"} {
		if !slices.Contains(inputs, name) {
			t.Errorf("inputs %q lack %s", inputs, name)
		}
	}
}

// TestSettingsDefaults holds Validate to the README's Settings table: each
// variable's default, the ends of its range, and an alias that wins over
// its plain name.
func TestSettingsDefaults(t *testing.T) {
	cases := []struct {
		name    string
		env     []string
		want    string // the settings that matter, as summary prints them
		wantErr string // "" for none: the variable named in the bad input
	}{
		{name: "defaults", env: nil, want: "image alpine:3.20, wait 10, retries 0, log tail 20, policy if-not-present, fallback none, config /root/.docker"},
		{name: "the least", env: []string{"WAIT_SECONDS=0", "WAITDAEMON_RETRIES=0", "WAITDAEMON_LOG_TAIL=0"},
			want: "image alpine:3.20, wait 0, retries 0, log tail 0, policy if-not-present, fallback none, config /root/.docker"},
		{name: "the most", env: []string{"WAIT_SECONDS=3600", "WAITDAEMON_RETRIES=10", "WAITDAEMON_LOG_TAIL=1000"},
			want: "image alpine:3.20, wait 3600, retries 10, log tail 1000, policy if-not-present, fallback none, config /root/.docker"},
		{name: "wait beyond", env: []string{"WAIT_SECONDS=3601"}, wantErr: "WAIT_SECONDS"},
		{name: "retries beyond", env: []string{"WAITDAEMON_RETRIES=11"}, wantErr: "WAITDAEMON_RETRIES"},
		{name: "log tail beyond", env: []string{"WAITDAEMON_LOG_TAIL=1001"}, wantErr: "WAITDAEMON_LOG_TAIL"},
		{name: "the aliases win", env: []string{"WAITDAEMON_IMAGE=busybox:1.36", "WAIT_SECONDS=99", "WAITDAEMON_WAIT_SECONDS=7"},
			want: "image busybox:1.36, wait 7, retries 0, log tail 20, policy if-not-present, fallback none, config /root/.docker"},
		{name: "a fallback command runs on IMAGE", env: []string{`WAITDAEMON_FALLBACK_COMMAND=["reboot","-f"]`},
			want: "image alpine:3.20, wait 10, retries 0, log tail 20, policy if-not-present, fallback alpine:3.20 [reboot -f], config /root/.docker"},
		{name: "policies in any case", env: []string{"WAITDAEMON_PULL_POLICY=Never", "DOCKER_CONFIG=/etc/dc"},
			want: "image alpine:3.20, wait 10, retries 0, log tail 20, policy never, fallback none, config /etc/dc"},
	}
	summary := func(s Settings) string {
		fb := "none"
		if s.FallbackImage != nil {
			fb = fmt.Sprintf("%s %v", s.FallbackImage, s.FallbackCommand)
		}
		return fmt.Sprintf("image %s, wait %d, retries %d, log tail %d, policy %s, fallback %s, config %s",
			s.Image, s.Wait, s.Retries, s.LogTail, s.PullPolicy, fb, s.RegistryConfig)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// With the credentials pair, no config.json is read: the
			// host's /root/.docker stays out of it.
			base := []string{"IMAGE=alpine:3.20", "WAITDAEMON_REGISTRY_USERNAME=u", "WAITDAEMON_REGISTRY_PASSWORD=p"}
			s, err := ReadInputs(append(base, tc.env...)).Validate()
			if tc.wantErr != "" {
				if exitCode(err) != engine.ExitInput || !strings.HasPrefix(fmt.Sprint(err), tc.wantErr+"=") {
					t.Errorf("Validate: %v (exit %d); want bad input naming %s", err, exitCode(err), tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := linediff.Text(tc.want+"\n", summary(s)+"\n"); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBadHidesSecrets: a value under a secret-looking name is never
// shown, even where a bad value is.
func TestBadHidesSecrets(t *testing.T) {
	if err := bad("WAIT_SECONDS", "soon", "a number"); err.Error() != `WAIT_SECONDS="soon": expected a number` {
		t.Errorf("bad() = %v; want the value shown", err)
	}
	if err := bad("X_REGISTRY_TOKEN", "hunter2-S3cret", "a token"); strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "X_REGISTRY_TOKEN") {
		t.Errorf("bad() = %v; want the name without its value", err)
	}
}

// TestDockerConfigCleaned: DOCKER_CONFIG is taken clean, so that the
// directory withheld from the user container is the one the action
// binds, however it was spelt; one that is not absolute is bad input.
func TestDockerConfigCleaned(t *testing.T) {
	for _, v := range []string{"/root//.docker", "/root/./.docker", "/root/.docker/.", "/root/.docker/", " /root/.docker "} {
		s, err := ReadInputs([]string{"IMAGE=alpine", "DOCKER_CONFIG=" + v}).Validate()
		if err != nil || s.RegistryConfig != "/root/.docker" {
			t.Errorf("DOCKER_CONFIG=%q: config %q, %v; want /root/.docker", v, s.RegistryConfig, err)
		}
	}
	for _, v := range []string{"root/.docker", ".docker", "./x"} {
		_, err := ReadInputs([]string{"IMAGE=alpine", "DOCKER_CONFIG=" + v}).Validate()
		if exitCode(err) != engine.ExitInput || !strings.Contains(fmt.Sprint(err), "DOCKER_CONFIG") || !strings.Contains(fmt.Sprint(err), "absolute") {
			t.Errorf("DOCKER_CONFIG=%q: %v (exit %d); want bad input naming it, asking for an absolute path", v, err, exitCode(err))
		}
	}
}
