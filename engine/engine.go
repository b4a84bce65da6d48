// Package engine is the contract between waitdaemon's two phases and a
// container engine. The phases (package phase) decide what happens and in
// which order; an Engine carries it out on one kind of engine: Docker and
// Podman's Docker-compatible API (package engine/docker), or containerd.
// What only one engine knows (its API versions, its quirks, how it binds
// its socket into the waiter, how it keeps a failed run) stays behind it.
//
// Every method is safe to call again after a lost answer, whatever the
// first answer was (the connection broke before or after the engine
// acted, or the engine said it was unavailable), and after any error: a
// container that is already gone counts as removed, a create whose
// answer was lost adopts its own container, and a start whose answer was
// lost asks the engine what became of it: a container running, or one
// that ran and already stopped, counts as started (its exit is then read
// as any run's), one still created is started again. Within a method, an
// engine request whose answer was lost is settled the same way, so that
// its work is done once.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/imageref"
)

// Engine is what the phases need of a container engine.
type Engine interface {
	// String names the engine and its socket, for messages.
	String() string

	// Reach waits, within a bound, until the engine answers. Its error
	// says how to mount the engine's socket into the action.
	Reach(ctx context.Context) error
	// Self finds and inspects the action's own container. override
	// (WAITDAEMON_CONTAINER) names it when detection cannot.
	Self(ctx context.Context, override string) (Self, error)
	// Inspect reads any container as if it were the action, for plan.
	Inspect(ctx context.Context, container string) (Self, error)

	// List returns the containers labelled label=value.
	List(ctx context.Context, label, value string) ([]Container, error)
	// Keep keeps an earlier run's container that ran, so that its output
	// can still be read, out of the way of this run's: under name where
	// the engine renames, else under its own. It returns the name it is
	// kept under.
	Keep(ctx context.Context, c Container, name string) (string, error)
	// Remove removes a container, running or not, with everything that
	// goes with it. One that is not there is not an error.
	Remove(ctx context.Context, id string) error

	// HasImage reports whether the image is present.
	HasImage(ctx context.Context, ref imageref.Ref) (bool, error)
	// Pull pulls the image, with auth for its registry (nil: anonymous),
	// calling progress with the bytes done so far and the total known.
	Pull(ctx context.Context, ref imageref.Ref, auth *Auth, progress func(done, total int64)) error

	// Plan plans a container like the action (self) for another image:
	// the user container, or the fallback. It creates nothing.
	Plan(ctx context.Context, self Self, want Want) (Spec, error)
	// PlanWaiter plans the waiter: a container of waitdaemon's own image,
	// with the least it needs to reach the engine.
	PlanWaiter(self Self, want Waiter) Spec
	// Create creates a planned container, not started, and returns its ID.
	// Called again for the same spec, as after a lost answer, it adopts
	// the container it made.
	Create(ctx context.Context, spec Spec) (string, error)
	// Again makes the container of another run of container first: a
	// fresh one called name, from first's image and settings as first
	// was created, with nothing of what first's runs left in its file
	// system, not started. Called again for the same name, as after a
	// lost answer, it adopts the container it made.
	Again(ctx context.Context, first, name string) (string, error)
	// Start starts a created container. A start whose answer was lost is
	// not sent again blindly: a container that started, even one that has
	// already stopped, counts as started.
	Start(ctx context.Context, id string) error
	// Stop ends the run of a started container, if it runs, and returns
	// once the engine has it stopped. One stopped already, or never
	// started, is left as it is.
	Stop(ctx context.Context, id string) error
	// Output follows a container's output into w until the container
	// stops or ctx ends.
	Output(ctx context.Context, id string, w io.Writer) error

	// ActionExited waits until the action container has stopped, or is
	// gone, and says when that was. A ctx that ends first returns early,
	// with no error: the caller looks at ctx.
	ActionExited(ctx context.Context, id string) (Exit, error)
	// ActionGone waits until the action container is gone, as every
	// worker removes it before it reports the action's end, or until by,
	// and says when it saw it gone; gone is false when by or ctx's end
	// came first (an engine that does not answer counts as not gone).
	ActionGone(ctx context.Context, id string, by time.Time) (at time.Time, gone bool)
	// Follow waits for the run of container id whose start was sent at
	// sent to end, and returns it, with the last tail lines of its output
	// since since (a run's FinishedAt; empty: all of this run's).
	Follow(ctx context.Context, id string, sent time.Time, tail int, since string) (Run, error)
}

// Teller is an engine on which phase 1 cannot read the waiter's output
// (containerd's goes to a file on the host). The waiter tells it, besides
// writing it, each line phase 1 waits for, and the engine's Output passes
// them on to phase 1.
type Teller interface {
	// Tell hands one line (no newline) to phase 1's Output of the
	// container this process runs in.
	Tell(ctx context.Context, line []byte) error
}

// Describer is an engine that can say, before a container's start, what
// it will run: the waiter names it in the result it writes before each
// run, which the next boot reads if that run took the machine down.
type Describer interface {
	// Describe returns the image and command of container id, created
	// and not necessarily started, as Follow would give them.
	Describe(ctx context.Context, id string) (image string, command []string, err error)
}

// Hander is an engine on which phase 1 can hand the waiter, once the
// waiter is made, what it learnt after the waiter's create: the waiter is
// made while the user container is, and cannot be told at its create
// what that container, not yet made, will run. It is Teller's way back.
type Hander interface {
	// Hand leaves data with the waiter, container id, for its Handed.
	// Called again with the same data, as after a lost answer, it leaves
	// the same.
	Hand(ctx context.Context, waiter string, data []byte) error
	// Handed returns what phase 1 left with the container this process
	// runs in: nil when it left nothing.
	Handed(ctx context.Context) ([]byte, error)
}

// Ender is an engine on which the waiter removes its own container as
// its last act, rather than have the engine remove it when it ends:
// Docker before 25.0, restarted with live-restore, removes a running
// container marked for auto-removal, and would end the waiter with it.
type Ender interface {
	// End removes the container this process runs in, called name. Once
	// the engine has done so, this process is gone: it returns only what
	// kept it from doing so.
	End(ctx context.Context, name string) error
}

// Self is a container taken for the action.
type Self struct {
	ID      string
	Name    string
	FoundBy string   // how it was found, for the hand-off line
	Env     []string // its environment, where the action's settings are
	// HostPID: it shares the host's pid namespace, and so does a
	// container planned from it (inheritance keeps it).
	HostPID bool
	// CanBoot: its process holds CAP_SYS_BOOT, which reboot(2) needs,
	// and so does a container planned from it that runs as the same
	// user: a process other than root has no effective capabilities
	// after its exec, unless they are ambient.
	CanBoot bool
	// User is who its process runs as, the engine's record of it for
	// messages (Docker's USER, containerd's uid:gid; "" is root): see
	// inherit.Root.
	User string
	// Detail is the engine's own record of the container. Only the
	// engine that made it reads it.
	Detail any
}

// Container is one of waitdaemon's containers, as a list shows it.
type Container struct {
	ID     string
	Name   string
	Labels map[string]string
	// Ran is false for a container no start was ever asked of: a waiter
	// cannot have done anything, nor a user container that was never
	// run. One whose start failed ran, and is kept like one that failed.
	Ran bool
	// Running is true while it runs (or is paused): a waiter still
	// waiting, which belongs to its action.
	Running bool
	// State is the engine's word for it, for messages.
	State string
}

// Want is what the phases want of a container planned from the action.
type Want struct {
	Name   string
	Image  imageref.Ref
	Labels map[string]string
	// Command, when set, replaces the action's command, and the image's
	// entrypoint applies: the fallback's. Nil: the action's command, by
	// the rules of inheritance, unless ImageDefault.
	Command []string
	// ImageDefault, with no Command, runs the image's own default
	// command (its ENTRYPOINT and CMD) instead of the action's: the
	// fallback's when its image is set without a command.
	ImageDefault bool
	// Withhold are directories of the action container whose binds and
	// mounts do not travel, and which are hidden where a bind of a parent
	// directory would carry them along: the registry config with its
	// credentials.
	Withhold []string
}

// Waiter is what the phases want of the waiter container.
type Waiter struct {
	Name   string
	Labels map[string]string
	Args   []string // the waitdaemon command line, from "waiter" on
	Env    []string // besides what the engine adds to reach itself
	// Bind, when its Host is set, binds a host directory into the waiter
	// (the result file's).
	Bind Bind
	// Device, when set, is a block device the waiter mounts, in a mount
	// namespace of its own, for each write of the result: it is given
	// that device at the same path, and the right to mount (CAP_SYS_ADMIN,
	// no AppArmor profile that forbids mount), and no other privilege.
	Device *Device
}

// Device is a block device, as the action sees it.
type Device struct {
	Path         string
	Major, Minor uint32
}

// How a waiter reaches its engine: each engine's PlanWaiter sets these in
// the waiter's environment (Waiter.Env comes after them), and the waiter's
// command chooses and reaches the engine by them, as phase 1's does.
const (
	// EnvEngine names the engine's kind: KindDocker or KindContainerd.
	EnvEngine      = "WAITDAEMON_ENGINE"
	KindDocker     = "docker"
	KindContainerd = "containerd"
	// EnvDockerHost is Docker's socket, unix:///path.
	EnvDockerHost = "DOCKER_HOST"
	// EnvContainerdAddress and EnvContainerdNamespace are containerd's
	// socket and the namespace of the action's containers.
	EnvContainerdAddress   = "CONTAINERD_ADDRESS"
	EnvContainerdNamespace = "CONTAINERD_NAMESPACE"
)

// Bind is a host path seen inside a container, read-only or not.
type Bind struct {
	Host      string
	Container string
	ReadOnly  bool
}

// Spec is a planned container: the name the phases gave it, and the
// engine's own create request, which a dry run prints.
type Spec struct {
	Name   string `json:"name"`
	ID     string `json:"id,omitempty"`
	Create any    `json:"create,omitempty"`
	// Note is what the operator should know of the plan, for the
	// hand-off line: on containerd, a network of loopback only.
	Note string `json:"note,omitempty"`
}

// Auth is a registry credential.
type Auth struct {
	Username      string
	Password      string
	IdentityToken string
	// Registry is the registry it is for, as the reference names it
	// (docker.io for Docker Hub).
	Registry string
}

// String names the credential without its secret.
func (a *Auth) String() string {
	if a == nil {
		return "anonymous"
	}
	who := a.Username
	if who == "" {
		who = "identity token"
	}
	return who + "@" + a.Registry
}

// GoString keeps the secret out of %#v too.
func (a *Auth) GoString() string { return a.String() }

// Exit is when and how the action container stopped.
type Exit struct {
	At time.Time
	// Code is its exit code, when Known: the engine answered with it.
	Code  int
	Known bool
	// Removed: the container was gone before its exit could be read, and
	// At is when the waiter learnt so.
	Removed bool
}

// WaiterWaitForEngine is how long each of the waiter's requests waits for
// a socket that is not answering, on every engine: longer than phase 1's,
// as the waiter outlives engine restarts that phase 1 never sees.
const WaiterWaitForEngine = time.Minute

// ErrNoAnswer is a wait the engine broke off without an answer (an
// engine restarting drops its waits): what was waited for may well go
// on, and the caller may ask again.
var ErrNoAnswer = errors.New("no answer from the engine")

// Stamp is how a result writes a time: UTC, RFC 3339 to the nanosecond.
func Stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Run is one run of a container, once it has stopped.
type Run struct {
	ExitCode   int
	Image      string
	Command    []string
	StartedAt  string
	FinishedAt string
	Output     []string // the last lines
	// Note says why Output is empty when the engine cannot give it: a
	// log driver that cannot be read back.
	Note string
}

// ExitInput is the exit code of bad input.
const ExitInput = 2

// InputError is bad input: it names the variable or setting, shows its
// value and says what was expected.
type InputError string

func (e InputError) Error() string { return string(e) }

// ExitCode makes the process exit with ExitInput.
func (InputError) ExitCode() int { return ExitInput }

// MissingSourceError is a create or start that failed on a bind whose
// source the host lacks: Docker refuses a bind mount's missing source,
// and containerd never makes one.
type MissingSourceError struct {
	Source string // the host path
	Target string // where it was to be seen
	Err    error
}

func (e *MissingSourceError) Error() string {
	return fmt.Sprintf("%v (the host has no %s, bound at %s)", e.Err, e.Source, e.Target)
}

func (e *MissingSourceError) Unwrap() error { return e.Err }

// StartExitCode is the exit code a run that could not start is given, as
// a shell gives it: 127 when the runtime's exec of its command found no
// such command, 126 when it could not run it, and 125, as docker run
// gives it, for any other failure of the engine's, whatever words it
// holds (a device or bind source that is not there, a directory that
// cannot be made: all before the exec).
func StartExitCode(err error) int {
	msg := strings.ToLower(err.Error())
	i := -1
	for _, m := range execStep {
		if j := strings.Index(msg, m); j >= 0 && (i < 0 || j < i) {
			i = j
		}
	}
	if i < 0 {
		return 125
	}
	switch exec := msg[i:]; {
	case strings.Contains(exec, "not found"), strings.Contains(exec, "no such file or directory"):
		return 127
	case strings.Contains(exec, "permission denied"), strings.Contains(exec, "exec format error"):
		return 126
	}
	return 125
}

// execStep are how the runtimes word their exec of the command, lower
// case: runc's exec.LookPath and execve ("exec: \"/x\": stat /x: …", "exec
// /x: permission denied"), and crun's ("executable file `x` not found",
// "open executable: Permission denied"). What the exec met follows.
var execStep = []string{`exec: "`, `exec: \"`, "exec /", "exec user process", "executable file", "open executable"}
