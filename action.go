package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/phase"
)

// actionCmd is phase 1, run as the action container. Its settings come
// from the action's environment (phase.Variables); the action's command
// arrives as arguments and is the user image's, never parsed here.
type actionCmd struct {
	Command []string `arg:"" optional:"" passthrough:"" help:"The action's command: the user image's command."`
}

func (a *actionCmd) Run(ctx context.Context, g *globals) error {
	eng, err := g.engine(false)
	if err != nil {
		return err
	}
	return phase.One(ctx, eng, phase.ReadInputs(os.Environ()), g.options())
}

// waiterCmd is phase 2, run as the detached waiter container that phase 1
// started. It is not for humans; phase.WaiterArgs is both its command
// line and what phase 1 writes.
type waiterCmd struct {
	phase.WaiterArgs `embed:""`
}

func (w *waiterCmd) Run(ctx context.Context, g *globals) error {
	eng, err := g.engine(true)
	if err != nil {
		return err
	}
	return end(ctx, eng, w.WaiterArgs, phase.Two(ctx, eng, w.WaiterArgs, g.options()), g.stdout)
}

// end is the waiter's end, once phase 2 has returned err: on an engine on
// which the waiter removes its own container (engine.Ender), err is said
// first, as main would say it, since the removal ends this process. After
// a signal the removal gets the finish's grace: the shutdown may have
// stopped the engine, for which the client would otherwise wait.
func end(ctx context.Context, eng engine.Engine, args phase.WaiterArgs, err error, out io.Writer) error {
	ender, ok := eng.(engine.Ender)
	if !ok || args.ActionName == "" {
		return err
	}
	if err != nil && err.Error() != "" {
		fmt.Fprintln(out, "waitdaemon:", err)
		err = exitError{code: exitCode(err)}
	}
	ectx, stop := phase.Finishing(ctx)
	defer stop()
	if rerr := ender.End(ectx, args.Waiter()); rerr != nil {
		fmt.Fprintln(out, "waitdaemon: removing the waiter's own container:", rerr)
		return cmp.Or(err, error(exitError{code: exitFailure}))
	}
	return err
}

// planCmd answers, on a host, "what would waitdaemon run if this container
// were the action?": the dry run, for any existing container, with the
// settings taken from that container's environment.
type planCmd struct {
	Container string `required:"" placeholder:"ID" help:"The container to take for the action: a name or ID."`
}

func (p *planCmd) Run(ctx context.Context, g *globals) error {
	eng, err := g.engine(false)
	if err != nil {
		return err
	}
	return phase.Plan(ctx, eng, p.Container, g.options())
}
