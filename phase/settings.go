package phase

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/inherit"
	"github.com/waitdaemon/waitdaemon/internal/redact"
)

// Bounds and defaults of the settings; the README documents them.
const (
	DefaultWaitSeconds = 10
	MaxWaitSeconds     = 3600 // a longer wait is taken for a typo (milliseconds, say)
	DefaultLogTail     = 20
	MaxLogTail         = 1000
	MaxRetries         = 10
	MaxDownWithin      = 3600
)

// Pull policies.
const (
	PullIfNotPresent = "if-not-present"
	PullAlways       = "always"
	PullNever        = "never"
)

// bad builds the InputError for variable name with value v: the value is
// shown, unless the name says it is a secret.
func bad(name, v, expected string) error {
	if redact.SecretName(name) {
		return engine.InputError(fmt.Sprintf("%s (value not shown): expected %s", name, expected))
	}
	return engine.InputError(fmt.Sprintf("%s=%q: expected %s", name, v, expected))
}

// Inputs are the action's settings as written: one field per variable.
type Inputs struct {
	Image, WaitSeconds, Container, LogTail, ResultFile, Retries string
	FallbackCommand, FallbackImage, PullPolicy                  string
	RegistryUsername, RegistryPassword, DryRun                  string
	DownWithin, ResultDevice                                    string
	// Env is the whole environment they were read from.
	Env []string
}

// Variable is one environment variable an action can set. Every value is
// read by the same rules: trimmed of surrounding spaces, empty the same as
// unset; a keyword (a pull policy, an engine, a switch) in any case, any
// other value as written.
type Variable struct {
	Name string
	Help string
	// Example is a valid value that is not the default, for the tests:
	// every variable has one.
	Example string
	// Keyword: its values are words, read in any case.
	Keyword bool
	// Required: unset or empty is bad input (an alias may stand in).
	Required bool
	// With names a variable this one needs set too: the registry pair's
	// each the other, the result device its file.
	With string
	// field is the input it sets; nil for those read elsewhere (by the
	// command line, or by the engine's client).
	field func(*Inputs) *string
}

// Variables are every variable an action can set, in the order --help
// lists them. --help's table, ReadInputs and the check for unknown
// WAITDAEMON_ variables all come from this list. An alias comes after
// its plain name: when both are set, the alias wins.
var Variables = []Variable{
	{Name: inherit.Image.Plain, Help: "the image to run after the wait, as written: its name is lowercase (required)", Example: "alpine:3.20", Required: true, field: func(in *Inputs) *string { return &in.Image }},
	{Name: inherit.WaitSeconds.Plain, Help: fmt.Sprintf("whole seconds to wait before the run, 0 to %d, counted from the later of the action's exit and the worker's removal of the action, at most %d s after the exit (default %d)", MaxWaitSeconds, int(removalBound/time.Second), DefaultWaitSeconds), Example: "30", field: func(in *Inputs) *string { return &in.WaitSeconds }},
	{Name: inherit.Image.Alias, Help: "alias of IMAGE; when set, IMAGE passes to the user container", Example: "busybox:1.36", field: func(in *Inputs) *string { return &in.Image }},
	{Name: inherit.WaitSeconds.Alias, Help: "alias of WAIT_SECONDS; when set, WAIT_SECONDS passes to the user container", Example: "45", field: func(in *Inputs) *string { return &in.WaitSeconds }},
	{Name: "WAITDAEMON_RETRIES", Help: fmt.Sprintf("re-runs of the user container after a run that failed, 0 to %d, each a fresh container, after a pause of %d s doubling up to %d s. A run fails when it exits non-zero; when its start, or the make of its container, is refused (exit code 125, 126 or 127); when the waiter cannot follow it to its end; or when it exits 0 and, with WAITDAEMON_DOWN_WITHIN, the machine is still up that long after (default 0)", MaxRetries, int(retryBase/time.Second), int(retryCap/time.Second)), Example: "2", field: func(in *Inputs) *string { return &in.Retries }},
	{Name: "WAITDAEMON_FALLBACK_COMMAND", Help: `a JSON array run once when every run of the user container failed, like ["reboot","-f"] (default none)`, Example: `["reboot","-f"]`, field: func(in *Inputs) *string { return &in.FallbackCommand }},
	{Name: "WAITDAEMON_FALLBACK_IMAGE", Help: "the fallback's image; set alone, the fallback runs this image's default command (default IMAGE)", Example: "busybox:1.36", field: func(in *Inputs) *string { return &in.FallbackImage }},
	{Name: "WAITDAEMON_DOWN_WITHIN", Help: fmt.Sprintf("whole seconds, 1 to %d: a run that exits 0 succeeds only if the machine goes down within them of its exit, else it fails, and is re-run as any failed run; needs pid: host and CAP_SYS_BOOT (default none)", MaxDownWithin), Example: "30", field: func(in *Inputs) *string { return &in.DownWithin }},
	{Name: "WAITDAEMON_LOG_TAIL", Help: fmt.Sprintf("lines of each run's output kept in the result, 0 to %d (default %d)", MaxLogTail, DefaultLogTail), Example: "50", field: func(in *Inputs) *string { return &in.LogTail }},
	{Name: "WAITDAEMON_RESULT_FILE", Help: "where the waiter writes the result as JSON, before each run and when the last has ended: an absolute host path in a directory of its own (bound into the waiter), like /var/lib/waitdaemon/result.json, or a path on WAITDAEMON_RESULT_DEVICE (default none)", Example: "/var/lib/waitdaemon/result.json", field: func(in *Inputs) *string { return &in.ResultFile }},
	{Name: "WAITDAEMON_RESULT_DEVICE", Help: "a block device, like /dev/sda1, that the waiter mounts for each write of the result (its file system's type found as mount(8) finds it); WAITDAEMON_RESULT_FILE is then a path on that file system (default none)", Example: "/dev/sda1", With: "WAITDAEMON_RESULT_FILE", field: func(in *Inputs) *string { return &in.ResultDevice }},
	{Name: "WAITDAEMON_PULL_POLICY", Help: "if-not-present, always or never, in any case (default if-not-present)", Example: "always", Keyword: true, field: func(in *Inputs) *string { return &in.PullPolicy }},
	{Name: "WAITDAEMON_REGISTRY_USERNAME", Help: "user for the registry named in IMAGE", Example: "robot", With: "WAITDAEMON_REGISTRY_PASSWORD", field: func(in *Inputs) *string { return &in.RegistryUsername }},
	{Name: "WAITDAEMON_REGISTRY_PASSWORD", Help: "its password; without the pair, the config.json in DOCKER_CONFIG, else in /root/.docker", Example: "example-Secret-0", With: "WAITDAEMON_REGISTRY_USERNAME", field: func(in *Inputs) *string { return &in.RegistryPassword }},
	{Name: "WAITDAEMON_DRY_RUN", Help: "true (or 1, yes; false, 0, no; in any case): print the whole plan, create nothing, exit 0 (default false)", Example: "true", Keyword: true, field: func(in *Inputs) *string { return &in.DryRun }},
	{Name: "WAITDAEMON_CONTAINER", Help: "this action container's ID or name, when detection cannot find it (default detected)", Example: "tinkerbell_reboot_01JEXAMPLE", field: func(in *Inputs) *string { return &in.Container }},
	{Name: "WAITDAEMON_VERBOSE", Help: "true (or 1, yes; false, 0, no; in any case): trace every exchange with the engine on stderr (default false)", Example: "true", Keyword: true},
	{Name: "WAITDAEMON_ENGINE", Help: "docker or containerd, in any case (default Docker if its socket is there, else containerd)", Example: "containerd", Keyword: true},
	{Name: "DOCKER_HOST", Help: "Docker's socket, unix:///path (nothing else); it also reaches the user container (default unix:///var/run/docker.sock)", Example: "unix:///run/docker.sock"},
	{Name: "CONTAINERD_ADDRESS", Help: "containerd's socket, a path or unix:///path; it also reaches the user container (default /run/containerd/containerd.sock)", Example: "/run/k3s/containerd/containerd.sock"},
	{Name: "CONTAINERD_NAMESPACE", Help: "containerd's namespace; it also reaches the user container (default the action's, else tinkerbell)", Example: "k8s.io"},
}

// Input reports whether ReadInputs reads the variable; the others are
// read by the command line or when the engine is chosen.
func (v Variable) Input() bool { return v.field != nil }

// VariablesHelp is the table of Variables for --help.
func VariablesHelp() string {
	var b strings.Builder
	for _, v := range Variables {
		fmt.Fprintf(&b, "  %-29s %s\n", v.Name, v.Help)
	}
	return b.String()
}

// ReadInputs reads the action's settings from an environment list: the
// process's own in an action, a container's for plan. Each value is
// trimmed, and an empty one is taken as unset: an empty alias leaves its
// plain name's value.
func ReadInputs(env []string) Inputs {
	in := Inputs{Env: env}
	for _, v := range Variables {
		if v.field == nil {
			continue
		}
		if value, _ := lookup(env, v.Name); value != "" {
			*v.field(&in) = value
		}
	}
	return in
}

// Settings are the validated inputs of phase 1.
type Settings struct {
	Image      imageref.Ref
	Wait       int // seconds
	LogTail    int
	ResultFile string
	// ResultDevice is the block device ResultFile is on, as the action
	// sees it; empty: ResultFile is a host path.
	ResultDevice string
	// device is ResultDevice's numbers, once phase 1 has found it.
	device          engine.Device
	Retries         int
	DownWithin      int           // seconds; 0: unset
	FallbackCommand []string      // nil: none
	FallbackImage   *imageref.Ref // nil: no fallback
	PullPolicy      string
	Container       string // WAITDAEMON_CONTAINER
	DryRun          bool
	// RegistryConfig is the directory of config.json: DOCKER_CONFIG,
	// else /root/.docker. Its bind stays with the action.
	RegistryConfig string
	// registry holds the WAITDAEMON_REGISTRY_ pair, for IMAGE's registry
	// alone.
	registry credentials
}

// DefaultDockerConfig is where config.json is looked for without
// DOCKER_CONFIG.
const DefaultDockerConfig = "/root/.docker"

// Validate checks every input before anything is created.
func (in Inputs) Validate() (Settings, error) {
	var s Settings
	if err := unknownVariables(in.Env); err != nil {
		return s, err
	}
	for _, read := range []func(Inputs) error{s.readImage, s.readNumbers, s.readFallback, s.readSwitches, s.readRegistry} {
		if err := read(in); err != nil {
			return s, err
		}
	}
	return s, nil
}

// readImage reads IMAGE (or its alias).
func (s *Settings) readImage(in Inputs) error {
	imageVar := inherit.Image.Name(in.Env)
	if strings.TrimSpace(in.Image) == "" {
		return engine.InputError(fmt.Sprintf("%s is not set: expected the image to run after the wait, like alpine:3.20", imageVar))
	}
	ref, err := imageref.Parse(strings.TrimSpace(in.Image))
	if err != nil {
		return engine.InputError(fmt.Sprintf("%s: %v", imageVar, err))
	}
	s.Image = ref
	return nil
}

// readNumbers reads the wait, the log tail, the retries, the time to go
// down and the result file.
func (s *Settings) readNumbers(in Inputs) (err error) {
	if s.Wait, err = wholeNumber(in.WaitSeconds, DefaultWaitSeconds, MaxWaitSeconds, "seconds"); err != nil {
		return bad(inherit.WaitSeconds.Name(in.Env), in.WaitSeconds, err.Error())
	}
	if s.LogTail, err = wholeNumber(in.LogTail, DefaultLogTail, MaxLogTail, "lines"); err != nil {
		return bad("WAITDAEMON_LOG_TAIL", in.LogTail, err.Error())
	}
	if s.Retries, err = wholeNumber(in.Retries, 0, MaxRetries, "re-runs"); err != nil {
		return bad("WAITDAEMON_RETRIES", in.Retries, err.Error())
	}
	if s.DownWithin, err = wholeNumber(in.DownWithin, 0, MaxDownWithin, "seconds"); err != nil || (s.DownWithin == 0 && strings.TrimSpace(in.DownWithin) != "") {
		return bad("WAITDAEMON_DOWN_WITHIN", in.DownWithin, fmt.Sprintf("a whole number of seconds from 1 to %d, like 30", MaxDownWithin))
	}
	return s.readResult(in)
}

// readResult reads the result file and its device: a host path, or with
// the device, a path on its file system.
func (s *Settings) readResult(in Inputs) error {
	s.ResultFile, s.ResultDevice = strings.TrimSpace(in.ResultFile), strings.TrimSpace(in.ResultDevice)
	check := resultFile
	if s.ResultDevice != "" {
		if err := resultDevice(s.ResultDevice); err != nil {
			return bad("WAITDAEMON_RESULT_DEVICE", in.ResultDevice, err.Error())
		}
		if s.ResultFile == "" {
			return bad("WAITDAEMON_RESULT_DEVICE", in.ResultDevice, "it with WAITDAEMON_RESULT_FILE, the result file's path on that device's file system, like /var/log/waitdaemon.json")
		}
		check = fileOnDevice
	}
	if s.ResultFile != "" {
		if err := check(s.ResultFile); err != nil {
			return bad("WAITDAEMON_RESULT_FILE", in.ResultFile, err.Error())
		}
	}
	return nil
}

// readFallback reads the fallback's command and image; a command alone
// runs on IMAGE.
func (s *Settings) readFallback(in Inputs) error {
	if v := strings.TrimSpace(in.FallbackCommand); v != "" {
		if err := json.Unmarshal([]byte(v), &s.FallbackCommand); err != nil || len(s.FallbackCommand) == 0 {
			return bad("WAITDAEMON_FALLBACK_COMMAND", in.FallbackCommand, `a JSON array of strings, like ["reboot","-f"]`)
		}
	}
	if v := strings.TrimSpace(in.FallbackImage); v != "" {
		fb, err := imageref.Parse(v)
		if err != nil {
			return engine.InputError(fmt.Sprintf("WAITDAEMON_FALLBACK_IMAGE: %v", err))
		}
		s.FallbackImage = &fb
	} else if s.FallbackCommand != nil {
		s.FallbackImage = &s.Image
	}
	return nil
}

// readSwitches reads the pull policy, the dry run and the container
// named for the action.
func (s *Settings) readSwitches(in Inputs) (err error) {
	switch s.PullPolicy = strings.ToLower(strings.TrimSpace(in.PullPolicy)); s.PullPolicy {
	case "":
		s.PullPolicy = PullIfNotPresent
	case PullIfNotPresent, PullAlways, PullNever:
	default:
		return bad("WAITDAEMON_PULL_POLICY", in.PullPolicy, "if-not-present, always or never (in any case)")
	}
	if s.DryRun, err = Switch("WAITDAEMON_DRY_RUN", in.DryRun); err != nil {
		return err
	}
	s.Container = strings.TrimSpace(in.Container)
	return nil
}

// readRegistry reads the credentials: the pair, and the registry config,
// one that cannot be read failing now, not at the pull.
func (s *Settings) readRegistry(in Inputs) error {
	s.RegistryConfig = DefaultDockerConfig
	if dir, _ := lookup(in.Env, "DOCKER_CONFIG"); dir != "" {
		// Clean, so that the directory withheld from the user container
		// is the one the action binds, however it was spelt.
		if !path.IsAbs(dir) {
			return bad("DOCKER_CONFIG", dir, "an absolute path to the directory of config.json, like /root/.docker")
		}
		s.RegistryConfig = path.Clean(dir)
	}
	user, password := strings.TrimSpace(in.RegistryUsername), strings.TrimSpace(in.RegistryPassword)
	if user != "" || password != "" {
		if user == "" || password == "" {
			return engine.InputError("WAITDAEMON_REGISTRY_USERNAME and WAITDAEMON_REGISTRY_PASSWORD: expected both or neither")
		}
		s.registry = credentials{username: user, password: password}
	}
	for _, img := range s.Images() {
		if _, err := s.Auth(img); err != nil {
			return err
		}
	}
	return nil
}

// Images are the images phase 1 needs: IMAGE, and the fallback's when it
// is another.
func (s Settings) Images() []imageref.Ref {
	images := []imageref.Ref{s.Image}
	if s.FallbackImage != nil && *s.FallbackImage != s.Image {
		images = append(images, *s.FallbackImage)
	}
	return images
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

// resultFile checks a result file's host path. Its directory is bound
// into the waiter (host:container[:options]), read-write.
func resultFile(p string) error {
	switch {
	case !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || p != path.Clean(p):
		return errors.New("an absolute path to a file on the host, like /var/lib/waitdaemon/result.json")
	case strings.Contains(p, ":"):
		return errors.New("a path with no ':', which a bind's syntax reads as its separator, like /var/lib/waitdaemon/result.json")
	case path.Dir(p) == "/":
		return errors.New("a file in a directory of its own, like /var/lib/waitdaemon/result.json: its directory is bound into the waiter, read-write, and / is the whole host")
	}
	return nil
}

// resultDevice checks a result device's path: a device file under /dev.
func resultDevice(p string) error {
	if !strings.HasPrefix(p, "/dev/") || p != path.Clean(p) {
		return errors.New("a block device under /dev, like /dev/sda1")
	}
	return nil
}

// fileOnDevice checks a result file's path on its device's file system:
// absolute from that file system's root. Nothing is bound, so any
// directory does.
func fileOnDevice(p string) error {
	if !strings.HasPrefix(p, "/") || p == "/" || strings.HasSuffix(p, "/") || p != path.Clean(p) {
		return errors.New("an absolute path to a file on WAITDAEMON_RESULT_DEVICE's file system, like /var/log/waitdaemon.json")
	}
	return nil
}

// Switch reads the switch variable name (WAITDAEMON_DRY_RUN,
// WAITDAEMON_VERBOSE) by the one rule of switches: trimmed, empty is
// false, true, 1 or yes and false, 0 or no in any case. Another value is
// bad input naming the variable.
func Switch(name, v string) (bool, error) {
	b, err := boolean(v)
	if err != nil {
		return false, bad(name, v, err.Error())
	}
	return b, nil
}

// boolean reads a switch; empty is false.
func boolean(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "false", "0", "no":
		return false, nil
	case "true", "1", "yes":
		return true, nil
	}
	return false, errors.New("true or false (or 1, yes; 0, no; in any case)")
}

// Known are the WAITDAEMON_ variables waitdaemon reads.
func Known() []string {
	var out []string
	for _, v := range Variables {
		if strings.HasPrefix(v.Name, inherit.Prefix) {
			out = append(out, v.Name)
		}
	}
	slices.Sort(out)
	return out
}

// unknownVariables fails on a WAITDAEMON_ variable that waitdaemon does not
// read: a misspelt WAITDAEMON_RETRY would otherwise do nothing, silently.
// So does a name whose prefix is WAITDAEMON_ in another case or misspelt
// (waitdaemon_retries, WAITDEAMON_RESULT_FILE), or that is a few edits
// from a variable's: it would reach the user container, and do nothing.
// It names the variable, never its value: a misspelt password's is one.
func unknownVariables(env []string) error {
	known := Known()
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(known, name) {
			continue
		}
		upper := strings.ToUpper(name)
		prefix, ok := prefixOf(upper)
		if !ok {
			if near := nearest(upper, known, 2); near != "" {
				return engine.InputError(fmt.Sprintf("%s: waitdaemon has no such variable; did you mean %s?", name, near))
			}
			continue // the user's own
		}
		if near := nearest(inherit.Prefix+upper[len(prefix):], known, 3); near != "" {
			return engine.InputError(fmt.Sprintf("%s: waitdaemon has no such variable; did you mean %s?", name, near))
		}
		misspelt := ""
		if prefix != inherit.Prefix {
			misspelt = fmt.Sprintf(" (is %s a misspelt %s?)", prefix, inherit.Prefix)
		}
		return engine.InputError(fmt.Sprintf("%s: waitdaemon has no such variable%s; expected one of %s", name, misspelt, strings.Join(known, ", ")))
	}
	return nil
}

// prefixOf is the start of upper, a name in upper case, that is
// WAITDAEMON_, or two edits from it at most and ending in "_" as it does,
// and whether there is one.
func prefixOf(upper string) (string, bool) {
	if strings.HasPrefix(upper, inherit.Prefix) {
		return inherit.Prefix, true
	}
	best, bestD := "", 3
	for k := len(inherit.Prefix) - 2; k <= min(len(inherit.Prefix)+2, len(upper)); k++ {
		if upper[k-1] != '_' {
			continue
		}
		if d := editDistance(upper[:k], inherit.Prefix); d < bestD {
			best, bestD = upper[:k], d
		}
	}
	return best, best != ""
}

// nearest is the name in names closest to name by edit distance, if it is
// at most most edits away.
func nearest(name string, names []string, most int) string {
	best, bestD := "", most+1
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

// lookup is the value of name in env, trimmed, and whether it is there.
func lookup(env []string, name string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}
