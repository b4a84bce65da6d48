package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/containerd"
	"github.com/waitdaemon/waitdaemon/engine/docker"
	"github.com/waitdaemon/waitdaemon/phase"
)

// engine returns the engine the phases work on: the one WAITDAEMON_ENGINE
// names; else Docker when its socket (DOCKER_HOST, or
// /var/run/docker.sock) is there; else containerd when its socket
// (CONTAINERD_ADDRESS, or /run/containerd/containerd.sock) is there. With
// neither, Docker, whose wait for a socket ends in a message that names
// both volumes. The waiter's engine waits longer for an engine that
// restarts.
func (g *globals) engine(waiter bool) (engine.Engine, error) {
	kind := g.env.Engine
	if kind == "" {
		switch {
		case exists(g.env.DockerSocket):
			kind = engine.KindDocker
		case exists(g.env.ContainerdSocket):
			kind = engine.KindContainerd
		default:
			return neither{g.docker(waiter), g.env.DockerSocket, g.env.ContainerdSocket}, nil
		}
	}
	if kind == engine.KindContainerd {
		return g.containerd(waiter)
	}
	return g.docker(waiter), nil
}

func (g *globals) docker(waiter bool) *docker.Engine {
	c := g.client()
	if waiter {
		c.WaitForEngine = engine.WaiterWaitForEngine
	}
	return &docker.Engine{C: c}
}

func (g *globals) containerd(waiter bool) (*containerd.Engine, error) {
	c := &containerdapi.Client{Socket: g.env.ContainerdSocket, Namespace: g.env.Namespace, UserAgent: "waitdaemon/" + version}
	if g.verbose {
		c.Trace = g.stderr
	}
	if waiter {
		c.WaitForEngine = engine.WaiterWaitForEngine
	}
	e := containerd.New(c)
	e.Log = g.stdout
	return e, nil
}

// exists reports whether something is at path.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// neither is the Docker engine, chosen when no engine's socket is there:
// if none appears while it waits, it says how to mount either.
type neither struct {
	engine.Engine
	docker, containerd string
}

func (n neither) Reach(ctx context.Context) error {
	err := n.Engine.Reach(ctx)
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("cannot reach an engine: no socket at %s (Docker) or %s (containerd): mount the engine's socket into the action, on HookOS with\n"+
			"  volumes:\n    - /var/run/docker.sock:/var/run/docker.sock\n"+
			"and on CaptainOS with\n"+
			"  volumes:\n    - /run/containerd/containerd.sock:/run/containerd/containerd.sock", n.docker, n.containerd)
	}
	return err
}

// environment is what the command line and the choice of engine read of
// the environment: every variable of phase.Variables that ReadInputs does
// not read, each by the same rules (see phase.Variable).
type environment struct {
	Verbose          bool   // WAITDAEMON_VERBOSE
	Engine           string // WAITDAEMON_ENGINE: docker, containerd, or empty: by socket
	DockerSocket     string // DOCKER_HOST's
	ContainerdSocket string // CONTAINERD_ADDRESS's
	Namespace        string // CONTAINERD_NAMESPACE, else detected
}

// readEnvironment reads the environment; a bad value is bad input naming
// its variable.
func readEnvironment() (environment, error) {
	var env environment
	var err error
	if env.Verbose, err = phase.Switch("WAITDAEMON_VERBOSE", os.Getenv("WAITDAEMON_VERBOSE")); err != nil {
		return env, err
	}
	switch env.Engine = strings.ToLower(strings.TrimSpace(os.Getenv(engine.EnvEngine))); env.Engine {
	case "", engine.KindDocker, engine.KindContainerd:
	default:
		return env, engine.InputError(fmt.Sprintf("WAITDAEMON_ENGINE=%q: expected docker or containerd, in any case (default: whichever socket is mounted)", os.Getenv(engine.EnvEngine)))
	}
	if env.DockerSocket, err = dockerapi.SocketFromEnv(); err != nil {
		return env, err // ErrUnsupportedHost: bad input
	}
	if env.ContainerdSocket, err = containerdapi.SocketFromEnv(); err != nil {
		return env, engine.InputError(err.Error())
	}
	env.Namespace = containerd.DetectNamespace()
	return env, nil
}
