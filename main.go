// Command waitdaemon runs a Tinkerbell action's real work after the action
// has reported success: it hands the work to a detached waiter container,
// exits 0 at once, and the waiter starts the user's image a few seconds
// later. Reboot, kexec and poweroff actions then finish cleanly.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/phase"
)

// version is stamped at build time with -X main.version=….
var version = "dev"

// cli is the whole command line. The image's ENTRYPOINT is
// ["/waitdaemon", "action", "--"], so an action's command arrives after
// "--" and is never parsed here; the other commands are for humans, with
// `docker run --entrypoint /waitdaemon` or on a host.
type cli struct {
	// Verbose is also set by WAITDAEMON_VERBOSE, read by the settings'
	// rule of switches (see readEnvironment), not by the parser.
	Verbose bool `short:"v" help:"Trace every exchange with the engine on stderr, like curl -v (credentials redacted); WAITDAEMON_VERBOSE=true does too."`

	Action  actionCmd  `cmd:"" help:"Phase 1, the image's entrypoint: hand the action's work to a waiter, and exit 0."`
	Waiter  waiterCmd  `cmd:"" hidden:"" help:"Phase 2, run by phase 1: wait, then run the user container."`
	Plan    planCmd    `cmd:"" help:"Print what waitdaemon would do if the given container were the action: the dry run, on a host."`
	API     apiCmd     `cmd:"" name:"api" help:"Send one request to the engine, like curl on its socket, and print the answer as indented JSON."`
	Version versionCmd `cmd:"" help:"Print waitdaemon's version, and the engine's when one answers."`
}

// description heads --help. It lists every variable an action can set.
var description = `Run a Tinkerbell action's work after the action has reported success.

As an action, waitdaemon reads its settings from the environment:

` + phase.VariablesHelp() + `
Every value is trimmed of surrounding spaces, and an empty one is the same as unset.
Keywords (the pull policy, the engine, true or false) are read in any case; other
values as written. No WAITDAEMON_ variable reaches the user container, nor do IMAGE
and WAIT_SECONDS unless their alias is set; DOCKER_HOST, DOCKER_CONFIG,
CONTAINERD_ADDRESS and CONTAINERD_NAMESPACE do. A WAITDAEMON_ variable not listed
here is bad input. The action's command is the user image's command.`

// globals is what every command gets from main.
type globals struct {
	stdout, stderr io.Writer
	verbose        bool
	env            environment
}

// client returns a Docker client that traces when asked to.
func (g *globals) client() *dockerapi.Client {
	c := &dockerapi.Client{Socket: g.env.DockerSocket, UserAgent: "waitdaemon/" + version}
	if g.verbose {
		c.Trace = g.stderr
	}
	return c
}

// options are what the phases get from the command line.
func (g *globals) options() phase.Options {
	return phase.Options{Stdout: g.stdout, Stderr: g.stderr, Verbose: g.verbose}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && err.Error() != "" {
		fmt.Fprintln(lastWord(os.Args[1:], os.Stdout, os.Stderr), "waitdaemon:", err)
	}
	os.Exit(exitCode(err))
}

// lastWord is where a failure is said: stderr, but stdout for the two
// commands that run as containers (the action and the waiter). Their
// output is their log, and containerd's shim, which writes a task's
// stdout and stderr to one file (tink-agent's, waitdaemon's), can lose
// what a process that ends at once wrote on stderr, never what it wrote
// on stdout (docs/development.md#why-the-code-is-as-it-is).
func lastWord(args []string, stdout, stderr io.Writer) io.Writer {
	if len(args) > 0 && (args[0] == "action" || args[0] == "waiter") {
		return stdout
	}
	return stderr
}

// run parses args and runs the chosen command. It never exits the process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	var c cli
	exited := -1
	parser, err := kong.New(&c,
		kong.Name("waitdaemon"),
		kong.Description(description),
		kong.UsageOnError(),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exited = code }),
		kong.BindTo(ctx, (*context.Context)(nil)),
	)
	if err != nil {
		return err
	}
	kctx, err := parser.Parse(args)
	if exited >= 0 { // --help
		return exitError{code: exited}
	}
	if err != nil {
		return usageError{err}
	}
	env, err := readEnvironment()
	if err != nil {
		return err
	}
	return kctx.Run(&globals{stdout: stdout, stderr: stderr, verbose: c.Verbose || env.Verbose, env: env})
}

// Exit codes; see the README.
const (
	exitFailure = 1                // the engine refused or failed a request
	exitInput   = engine.ExitInput // bad input: a variable, flag or argument
	exitUsage   = 80               // the command line did not parse
)

// exitCode maps an error to the process's exit code: errors that carry
// one say so with an ExitCode method.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var e interface{ ExitCode() int }
	if errors.As(err, &e) {
		return e.ExitCode()
	}
	if errors.Is(err, dockerapi.ErrUnsupportedHost) {
		return exitInput
	}
	return exitFailure
}

type usageError struct{ error }

func (usageError) ExitCode() int   { return exitUsage }
func (e usageError) Unwrap() error { return e.error }

// exitError ends the program with code and nothing to say (after --help).
type exitError struct{ code int }

func (e exitError) Error() string { return "" }
func (e exitError) ExitCode() int { return e.code }
