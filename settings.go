package main

import (
	"encoding/json"
	"fmt"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/inherit"
)

// Bounds and defaults of the settings; the README documents them.
const (
	defaultWaitSeconds = 10
	maxWaitSeconds     = 3600 // a longer wait is taken for a typo (milliseconds, say)
	defaultLogTail     = 20
	maxLogTail         = 1000
	maxRetries         = 10
)

// Pull policies.
const (
	pullIfNotPresent = "if-not-present"
	pullAlways       = "always"
	pullNever        = "never"
)

// actionCmd is phase 1, run as the action container. Its settings come
// from the action's environment; the action's command arrives as
// arguments and is the user image's, never parsed here.
type actionCmd struct {
	Image            string   `env:"WAITDAEMON_IMAGE,IMAGE" placeholder:"REF" help:"The image to run after the wait. Required."`
	WaitSeconds      string   `env:"WAITDAEMON_WAIT_SECONDS,WAIT_SECONDS" placeholder:"N" help:"Whole seconds to wait after the action exits, 0 to 3600 (default 10)."`
	Container        string   `env:"WAITDAEMON_CONTAINER" placeholder:"ID" help:"This action container's ID or name, when detection cannot find it."`
	LogTail          string   `env:"WAITDAEMON_LOG_TAIL" placeholder:"N" help:"Lines of the user container's output in the result, 0 to 1000 (default 20)."`
	ResultFile       string   `env:"WAITDAEMON_RESULT_FILE" placeholder:"PATH" help:"Absolute host path where the waiter writes the result as JSON."`
	Retries          string   `env:"WAITDAEMON_RETRIES" placeholder:"N" help:"Re-runs of a user container that exited non-zero, 0 to 10 (default 0)."`
	FallbackCommand  string   `env:"WAITDAEMON_FALLBACK_COMMAND" placeholder:"JSON" help:"A command, as a JSON array, run once when the user container and its retries failed, like [\"reboot\",\"-f\"]."`
	FallbackImage    string   `env:"WAITDAEMON_FALLBACK_IMAGE" placeholder:"REF" help:"The fallback's image (default IMAGE)."`
	PullPolicy       string   `env:"WAITDAEMON_PULL_POLICY" placeholder:"POLICY" help:"if-not-present (default), always or never."`
	RegistryUsername string   `env:"WAITDAEMON_REGISTRY_USERNAME" placeholder:"USER" help:"User for the registry named in IMAGE (else DOCKER_CONFIG's config.json)."`
	RegistryPassword string   `env:"WAITDAEMON_REGISTRY_PASSWORD" placeholder:"PASSWORD" help:"Password for WAITDAEMON_REGISTRY_USERNAME."`
	DryRun           bool     `env:"WAITDAEMON_DRY_RUN" help:"Print the whole plan, create nothing, and exit 0."`
	Command          []string `arg:"" optional:"" passthrough:"" help:"The action's command: the user image's command."`
}

// settings are the validated inputs of phase 1.
type settings struct {
	image           dockerapi.Reference
	wait            int // seconds
	logTail         int
	resultFile      string
	retries         int
	fallbackCommand []string             // nil: none
	fallbackImage   *dockerapi.Reference // nil: no fallback
	pullPolicy      string
	auth            *dockerapi.AuthConfig // nil: anonymous
	registryConfig  string                // the directory of config.json: DOCKER_CONFIG, else /root/.docker
	dryRun          bool
}

// defaultDockerConfig is where config.json is looked for without
// DOCKER_CONFIG.
const defaultDockerConfig = "/root/.docker"

// inputError is bad input: it names the variable, shows the value and
// says what was expected.
type inputError struct{ msg string }

func (e inputError) Error() string { return e.msg }
func (inputError) ExitCode() int   { return exitInput }

// bad builds the inputError for variable name with value v.
func bad(name, v, expected string) error {
	return inputError{fmt.Sprintf("%s=%q: expected %s", name, v, expected)}
}

// settings validates every input before anything is created.
func (a *actionCmd) settings(env []string) (settings, error) {
	s := settings{dryRun: a.DryRun}
	if err := unknownVariables(env); err != nil {
		return s, err
	}
	imageVar := inherit.Image.Name(env)
	if strings.TrimSpace(a.Image) == "" {
		return s, inputError{fmt.Sprintf("%s is not set: expected the image to run after the wait, like alpine:3.20", imageVar)}
	}
	ref, err := dockerapi.ParseReference(strings.TrimSpace(a.Image))
	if err != nil {
		return s, inputError{fmt.Sprintf("%s: %v", imageVar, err)}
	}
	s.image = ref
	waitVar := inherit.WaitSeconds.Name(env)
	if s.wait, err = wholeNumber(a.WaitSeconds, defaultWaitSeconds, maxWaitSeconds, "seconds"); err != nil {
		return s, bad(waitVar, a.WaitSeconds, err.Error())
	}
	if s.logTail, err = wholeNumber(a.LogTail, defaultLogTail, maxLogTail, "lines"); err != nil {
		return s, bad("WAITDAEMON_LOG_TAIL", a.LogTail, err.Error())
	}
	if s.retries, err = wholeNumber(a.Retries, 0, maxRetries, "re-runs"); err != nil {
		return s, bad("WAITDAEMON_RETRIES", a.Retries, err.Error())
	}
	if s.resultFile = strings.TrimSpace(a.ResultFile); s.resultFile != "" {
		if !strings.HasPrefix(s.resultFile, "/") || strings.HasSuffix(s.resultFile, "/") || s.resultFile != path.Clean(s.resultFile) {
			return s, bad("WAITDAEMON_RESULT_FILE", a.ResultFile, "an absolute path to a file on the host, like /var/lib/waitdaemon/result.json")
		}
	}
	if v := strings.TrimSpace(a.FallbackCommand); v != "" {
		if err := json.Unmarshal([]byte(v), &s.fallbackCommand); err != nil || len(s.fallbackCommand) == 0 {
			return s, bad("WAITDAEMON_FALLBACK_COMMAND", a.FallbackCommand, `a JSON array of strings, like ["reboot","-f"]`)
		}
	}
	if v := strings.TrimSpace(a.FallbackImage); v != "" {
		fb, err := dockerapi.ParseReference(v)
		if err != nil {
			return s, inputError{fmt.Sprintf("WAITDAEMON_FALLBACK_IMAGE: %v", err)}
		}
		s.fallbackImage = &fb
	} else if s.fallbackCommand != nil {
		s.fallbackImage = &s.image
	}
	switch s.pullPolicy = strings.TrimSpace(a.PullPolicy); s.pullPolicy {
	case "":
		s.pullPolicy = pullIfNotPresent
	case pullIfNotPresent, pullAlways, pullNever:
	default:
		return s, bad("WAITDAEMON_PULL_POLICY", a.PullPolicy, "if-not-present, always or never")
	}
	s.registryConfig = defaultDockerConfig
	if dir := envValue(env, "DOCKER_CONFIG"); dir != "" {
		s.registryConfig = dir
	}
	if s.auth, err = registryAuth(a.RegistryUsername, a.RegistryPassword, s.registryConfig, s.image); err != nil {
		return s, err
	}
	return s, nil
}

// wholeNumber reads a whole number of unit from 0 to limit; empty means
// def.
func wholeNumber(v string, def, limit int, unit string) (int, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return def, nil
	}
	expected := fmt.Errorf("a whole number of %s from 0 to %d, like %d", unit, limit, def)
	for _, r := range v {
		if r < '0' || r > '9' {
			return 0, expected
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n > limit {
		return 0, expected
	}
	return n, nil
}

// variables are the WAITDAEMON_ variables waitdaemon reads: the env tags
// of the command line.
func variables() []string {
	var out []string
	for _, t := range []reflect.Type{reflect.TypeFor[cli](), reflect.TypeFor[actionCmd]()} {
		for f := range t.Fields() {
			for name := range strings.SplitSeq(f.Tag.Get("env"), ",") {
				if strings.HasPrefix(name, inherit.Prefix) {
					out = append(out, name)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// unknownVariables fails on a WAITDAEMON_ variable that waitdaemon does not
// read: a misspelt WAITDAEMON_RETRY would otherwise do nothing, silently.
func unknownVariables(env []string) error {
	known := variables()
	for _, kv := range env {
		name, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, inherit.Prefix) || slices.Contains(known, name) {
			continue
		}
		if near := nearest(name, known); near != "" {
			return inputError{fmt.Sprintf("%s=%q: waitdaemon has no such variable; did you mean %s?", name, v, near)}
		}
		return inputError{fmt.Sprintf("%s=%q: waitdaemon has no such variable; expected one of %s", name, v, strings.Join(known, ", "))}
	}
	return nil
}

// nearest is the name in names closest to name by edit distance, if it is
// at most 3 edits away.
func nearest(name string, names []string) string {
	best, bestD := "", 4
	for _, n := range names {
		if d := editDistance(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// envValue is the value of name in env, or "".
func envValue(env []string, name string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}
