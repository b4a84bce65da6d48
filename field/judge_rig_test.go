package field

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Which run took the machine down.
const (
	ByCommand  = "command"  // the template's own command, its first run
	ByRetry    = "retry"    // a re-run of it
	ByFallback = "fallback" // WAITDAEMON_FALLBACK_*
	ByNothing  = "-"        // nothing the waiter started did
)

// WaiterPrefix starts each line of the waiter's that the guest copies to
// the console (runScript follows the waiter's output).
const WaiterPrefix = "FIELD-WAITER "

// ShutdownLine is the last line of HookOS's shutdown script: the grace,
// the SIGKILL, the sync and the unmounts all ran.
const ShutdownLine = "FIELD-SHUTDOWN"

// LinuxKitGrace is how long LinuxKit's shutdown waits between its SIGTERM
// and its SIGKILL.
const LinuxKitGrace = 5

// judging reads from an action's environment and command what the field
// checks of the run that takes the machine down: the template's own
// command should (a scenario of the field's own may say otherwise), its
// retries and fallback, WAITDAEMON_DOWN_WITHIN, and whether HookOS's init
// shuts down (busybox reboot or poweroff, no -f), so that LinuxKit's
// grace comes first.
func judging(sc *Scenario, env map[string]string, command []string) {
	sc.By = ByCommand
	sc.Retries, _ = strconv.Atoi(env["WAITDAEMON_RETRIES"])
	sc.DownWithin, _ = strconv.Atoi(env["WAITDAEMON_DOWN_WITHIN"])
	sc.Fallback = env["WAITDAEMON_FALLBACK_COMMAND"] != "" || env["WAITDAEMON_FALLBACK_IMAGE"] != ""
	cmd := strings.Join(command, " ")
	sc.InitShutdown = strings.HasPrefix(sc.OS, "hookos") && (cmd == "reboot" || cmd == "poweroff")
}

// waiterLine is what the field reads of one of the waiter's lines.
type waiterLine struct {
	Msg      string `json:"msg"`
	Attempt  int    `json:"attempt"`
	ExitCode int    `json:"exit_code"`
	Note     string `json:"note"`
}

// TookDown says which run took the machine down, from the waiter's lines
// the console showed before it went down: the first run, unless a run
// ended ("user container exited") and failed; then the next, a retry
// while retries are left, else the fallback. A run that ended and
// succeeded took the machine down itself (a reboot that returns, and
// init then resets). HookOS's init shutdown (its last line on the
// console) with no run ended counts as the first run's: the SIGTERM it
// starts with may end the console's copy of the waiter's lines before
// the first came, and a fallback (reboot -f, poweroff -f) goes through
// no init. With no line of a run at all, the first run did if it is the
// only one the waiter can start (no retries, no fallback): a command that
// takes the machine down at once (reboot -f) leaves no time for its line
// to reach the console; else nothing the waiter started did.
func TookDown(lines []string, retries int, fallback bool) string {
	started := false
	var last *waiterLine
	for _, l := range lines {
		if strings.HasPrefix(l, ShutdownLine) && last == nil {
			started = true
		}
		rest, ok := strings.CutPrefix(l, WaiterPrefix)
		if !ok {
			continue
		}
		var w waiterLine
		if decodeFirst(rest, &w) != nil {
			continue
		}
		switch w.Msg {
		case "started user container", "waiting for the machine to go down", "stopping; the user container runs on":
			started = true
		case "user container exited":
			started, last = true, &w
		}
	}
	switch {
	case !started && retries == 0 && !fallback:
		return ByCommand
	case !started:
		return ByNothing
	case last == nil:
		return ByCommand
	case last.ExitCode == 0 && last.Note == "":
		if last.Attempt > 1 {
			return ByRetry
		}
		return ByCommand
	case last.Attempt <= retries:
		return ByRetry
	case fallback:
		return ByFallback
	}
	return ByNothing
}

// resultRun is what the field reads of a run in the result file.
type resultRun struct {
	Attempt  int    `json:"attempt"`
	ExitCode int    `json:"exit_code"`
	Ended    bool   `json:"ended"`
	Note     string `json:"note"`
}

// fileResult is what the field reads of the result file.
type fileResult struct {
	State    string      `json:"state"`
	Attempts []resultRun `json:"attempts"`
	Fallback *resultRun  `json:"fallback"`
	BootID   string      `json:"boot_id"`
}

// ByResult says which run the result file the next boot found names as
// under way when the machine went down, the one that took it down: the
// waiter writes each run as started and not ended before it starts it.
// Each run before it must have ended and failed.
func ByResult(data []byte) (string, error) {
	var r fileResult
	if err := decodeFirst(string(data), &r); err != nil {
		return "", fmt.Errorf("the result file: %w", err)
	}
	if r.State != "running" || r.BootID == "" || len(r.Attempts) == 0 {
		return "", fmt.Errorf("the result file: state %q, boot_id %q, %d attempts; want running, a boot ID and an attempt", r.State, r.BootID, len(r.Attempts))
	}
	by, down, before := ByCommand, r.Attempts[len(r.Attempts)-1], r.Attempts[:len(r.Attempts)-1]
	if r.Fallback != nil {
		by, down, before = ByFallback, *r.Fallback, r.Attempts
	} else if down.Attempt > 1 {
		by = ByRetry
	}
	for _, a := range before {
		if !a.Ended || (a.ExitCode == 0 && a.Note == "") {
			return "", fmt.Errorf("the result file: a run %+v before the %s's; want each ended and failed", a, by)
		}
	}
	if down.Ended || down.ExitCode != -1 {
		return "", fmt.Errorf("the result file: the last run %+v; want it not ended, exit code -1", down)
	}
	return by, nil
}

// decodeFirst decodes the JSON value s starts with into v: the kernel's
// messages share the serial console, and one may follow on the same line.
func decodeFirst(s string, v any) error {
	return json.NewDecoder(strings.NewReader(s)).Decode(v)
}
