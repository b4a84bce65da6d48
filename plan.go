package main

import (
	"context"
	"fmt"

	"github.com/waitdaemon/waitdaemon/inherit"
)

// planCmd answers, on a host, "what would waitdaemon run if this container
// were the action?": the dry run, for any existing container, with the
// settings taken from that container's environment.
type planCmd struct {
	Container string `required:"" placeholder:"ID" help:"The container to take for the action: a name or ID."`
}

func (p *planCmd) Run(ctx context.Context, g *globals) error {
	c := g.client()
	self, err := c.ContainerInspect(ctx, p.Container)
	if err != nil {
		return err
	}
	a := actionFromEnv(self.Config.Env)
	s, err := a.settings(self.Config.Env)
	if err != nil {
		return fmt.Errorf("container %s as an action: %w", p.Container, err)
	}
	h := newHandoff(self, "plan --container", s, c.SocketPath(), g.verbose)
	if err := h.plan(ctx, c, s, self); err != nil {
		return err
	}
	return printPlan(g.stdout, h)
}

// actionFromEnv reads an action's settings from an environment list the
// way they are read from the process's environment in an action.
func actionFromEnv(env []string) *actionCmd {
	get := func(name string) string { return envValue(env, name) }
	return &actionCmd{
		Image:            get(inherit.Image.Name(env)),
		WaitSeconds:      get(inherit.WaitSeconds.Name(env)),
		LogTail:          get("WAITDAEMON_LOG_TAIL"),
		ResultFile:       get("WAITDAEMON_RESULT_FILE"),
		Retries:          get("WAITDAEMON_RETRIES"),
		FallbackCommand:  get("WAITDAEMON_FALLBACK_COMMAND"),
		FallbackImage:    get("WAITDAEMON_FALLBACK_IMAGE"),
		PullPolicy:       get("WAITDAEMON_PULL_POLICY"),
		RegistryUsername: get("WAITDAEMON_REGISTRY_USERNAME"),
		RegistryPassword: get("WAITDAEMON_REGISTRY_PASSWORD"),
	}
}
