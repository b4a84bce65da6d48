package phase

import (
	"io"
	"strconv"
	"time"

	"github.com/waitdaemon/waitdaemon/engine"
)

// What phase 1 tells phase 2, how every container waitdaemon makes is
// named and marked, and what the waiter reports: each written here once.

// Labels on every container waitdaemon creates.
const (
	LabelRole     = "org.waitdaemon.role"      // one of the roles below
	LabelAction   = "org.waitdaemon.action"    // the action container's name
	LabelActionID = "org.waitdaemon.action-id" // the action container's ID
)

// Roles, in the role label.
const (
	RoleUser     = "user"
	RoleFallback = "fallback"
	RoleWaiter   = "waiter"
)

// containerName is the name phase 1 gives the container of role for the
// action named action. A container of an earlier run that still carries
// it is that run's own; one kept since carries a name of its own.
func containerName(action, role string) string { return action + "-waitdaemon-" + role }

// attemptName is the name of the user container of attempt n (from 1) of
// an action whose first is named user: that one's own for the first, and
// for each re-run a fresh container's, user-n. Two digits at most, so
// that none looks like a kept one's name, user-<12 hex digits>.
func attemptName(user string, n int) string {
	if n == 1 {
		return user
	}
	return user + "-" + strconv.Itoa(n)
}

// isAttemptName reports whether name is a re-run's container of the user
// container named user.
func isAttemptName(user, name string) bool {
	for n := 2; n <= MaxRetries+1; n++ {
		if name == attemptName(user, n) {
			return true
		}
	}
	return false
}

// labels marks a container of role for the action self.
func labels(role, action, actionID string) map[string]string {
	return map[string]string{LabelRole: role, LabelAction: action, LabelActionID: actionID}
}

// ResultDir is where the waiter sees the result file's host directory.
const ResultDir = "/run/waitdaemon-result"

// The waiter's answer to phase 1 about the result file: phase 1 waits for
// one of these two lines, so that a result that could never be written
// fails the action.
const (
	msgResultWritable   = "result file writable"
	msgResultUnwritable = "result file not writable"
)

// WaiterArgs is the waiter's command line: everything phase 1 tells phase
// 2. The waiter command parses it; Args writes it.
type WaiterArgs struct {
	UserContainer     string `required:"" help:"The user container to start."`
	ActionContainer   string `required:"" help:"The action container whose exit starts the wait."`
	ActionName        string `help:"The action container's name, for the result."`
	WaitSeconds       int    `required:"" help:"Seconds to wait after the action container exits."`
	Retries           int    `help:"Re-runs of a user container that exits non-zero."`
	DownWithin        int    `help:"Seconds within which the machine must go down after a run exits 0; 0: no such wait."`
	LogTail           int    `required:"" help:"Lines of output kept in the result."`
	FallbackContainer string `help:"A container to start once when the user container and its retries failed."`
	ResultFile        string `help:"Where to write the result, inside the waiter, or on ResultDevice's file system."`
	ResultDevice      string `help:"The block device the result file is on, mounted for each write."`
	UserImage         string `help:"The user container's image, for the result of a run that could not start."`
	FallbackImage     string `help:"The fallback's image, likewise."`
}

// Waiter is the name of the waiter's own container.
func (w WaiterArgs) Waiter() string { return containerName(w.ActionName, RoleWaiter) }

// Args is the waiter's command line for w, from the command's name on.
func (w WaiterArgs) Args() []string {
	args := []string{"waiter",
		"--user-container=" + w.UserContainer,
		"--action-container=" + w.ActionContainer,
		"--action-name=" + w.ActionName,
		"--wait-seconds=" + strconv.Itoa(w.WaitSeconds),
		"--retries=" + strconv.Itoa(w.Retries),
		"--log-tail=" + strconv.Itoa(w.LogTail),
	}
	if w.DownWithin > 0 {
		args = append(args, "--down-within="+strconv.Itoa(w.DownWithin))
	}
	if w.FallbackContainer != "" {
		args = append(args, "--fallback-container="+w.FallbackContainer)
	}
	if w.ResultFile != "" {
		args = append(args, "--result-file="+w.ResultFile)
	}
	if w.ResultDevice != "" {
		args = append(args, "--result-device="+w.ResultDevice)
	}
	if w.UserImage != "" {
		args = append(args, "--user-image="+w.UserImage)
	}
	if w.FallbackImage != "" {
		args = append(args, "--fallback-image="+w.FallbackImage)
	}
	return args
}

// handedRuns is what phase 1 hands the waiter once it has made the user
// container and the fallback (engine.Hander), after the waiter's own
// create: what each will run, by container name, as the engine says
// (engine.Describer), for the result written before each run. The
// waiter's command line cannot carry it: the waiter is made while they
// are, before the engine has made their command of the image's.
type handedRuns map[string]plannedRun

// plannedRun is what a container will run.
type plannedRun struct {
	Image   string   `json:"image"`
	Command []string `json:"command"`
}

// What the waiter reports: its JSON lines, the last of which is the
// result, and the result file, which holds the same.

// waited is the waiter's account of the wait, logged when it starts the
// user container.
type waited struct {
	User         string `json:"user_container"`
	ActionExited string `json:"action_exited"`
	// CountedFrom is when the wait counted from: the later of the
	// action's exit and its removal (countFrom).
	CountedFrom   string `json:"counted_from"`
	StartSent     string `json:"start_sent"`
	Wait          int    `json:"wait_seconds"`
	LateMS        int64  `json:"late_ms"` // start_sent - counted_from - wait
	ActionRemoved bool   `json:"action_removed,omitempty"`
}

// result is what became of the user container: the waiter's last JSON
// line, and the result file.
type result struct {
	Action string `json:"action"`
	// State is stateRunning in what the waiter writes before each run
	// (the run under way is the one not Ended, and ExitCode is -1),
	// stateDone in the result.
	State    string    `json:"state,omitempty"`
	Image    string    `json:"image"`
	Command  []string  `json:"command"`
	ExitCode int       `json:"exit_code"`
	Note     string    `json:"note,omitempty"` // the last attempt's
	Attempts []attempt `json:"attempts"`
	Fallback *attempt  `json:"fallback,omitempty"`
	// ActionExitCode is the action's, when it failed: then NotStarted
	// says why nothing was started, and ExitCode is -1.
	ActionExitCode *int   `json:"action_exit_code,omitempty"`
	NotStarted     string `json:"not_started,omitempty"`
	// Stopped says why the waiter stopped before the re-runs were spent:
	// a signal before one's start (in the pause, the make of its
	// container, the write before it), or before the fallback's.
	Stopped string `json:"stopped,omitempty"`
	// unstarted are containers made for a run that a signal kept from
	// starting: the finish removes them.
	unstarted []string
	// WriteNote says which writes before a run did not finish in time
	// (a device that does not answer): the run started without them.
	WriteNote string `json:"write_note,omitempty"`
	BootID    string `json:"boot_id,omitempty"`
	WrittenAt string `json:"written_at,omitempty"`
}

// The result's states.
const (
	stateRunning = "running" // a run was about to start, and has not ended
	stateDone    = "done"    // the last run ended, or none will run
)

// attempt is one run of the user container, or the fallback's.
type attempt struct {
	Attempt    int      `json:"attempt,omitempty"`
	Container  string   `json:"container"`
	Image      string   `json:"image,omitempty"`
	Command    []string `json:"command,omitempty"`
	ExitCode   int      `json:"exit_code"`
	StartedAt  string   `json:"started_at,omitempty"`
	FinishedAt string   `json:"finished_at,omitempty"`
	// TimeNote says how the engine dated the run, when it dated its end
	// before its start: StartedAt is then FinishedAt.
	TimeNote string   `json:"time_note,omitempty"`
	LogTail  []string `json:"log_tail"`
	LogNote  string   `json:"log_note,omitempty"`
	// Ended is false for the run under way when the file was written:
	// then ExitCode is -1.
	Ended bool `json:"ended"`
	// Note says why a run that exited 0 failed: the machine did not go
	// down.
	Note string `json:"note,omitempty"`
	Kept bool   `json:"kept"`
	// lost: its end could not be followed, and it may run on; sent is
	// when its start was sent. unsure: its start failed, and may have
	// taken effect all the same (an answer lost or cut): it may run.
	lost   bool
	unsure bool
	sent   time.Time
}

// failed reports whether the run failed: it exited non-zero, or the
// machine did not go down after it.
func (a attempt) failed() bool { return a.ExitCode != 0 || a.Note != "" }

// Options are what both phases get from the command line.
type Options struct {
	Stdout, Stderr io.Writer
	Verbose        bool
}

// logEvent writes one line of waitdaemon's output.
func logEvent(w io.Writer, msg string, details any) { engine.Log(w, msg, details) }
