package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/containerd"
	"github.com/waitdaemon/waitdaemon/engine/docker"
)

// Engine kinds, for WAITDAEMON_ENGINE.
const (
	engineDocker     = "docker"
	engineContainerd = "containerd"
)

// engine returns the engine the phases work on: the one WAITDAEMON_ENGINE
// names; else Docker when its socket (DOCKER_HOST, or
// /var/run/docker.sock) is there; else containerd when its socket
// (CONTAINERD_ADDRESS, or /run/containerd/containerd.sock) is there. With
// neither, Docker, whose wait for a socket ends in a message that names
// both volumes. The waiter's engine waits longer for an engine that
// restarts.
func (g *globals) engine(waiter bool) (engine.Engine, error) {
	kind := os.Getenv("WAITDAEMON_ENGINE")
	switch kind {
	case engineDocker, engineContainerd:
	case "":
		dockerSocket, err := dockerapi.SocketFromEnv()
		if err != nil {
			return nil, err
		}
		containerdSocket, err := containerdapi.SocketFromEnv()
		if err != nil {
			return nil, engine.InputError(err.Error())
		}
		switch {
		case exists(dockerSocket):
			kind = engineDocker
		case exists(containerdSocket):
			kind = engineContainerd
		default:
			return neither{g.docker(waiter), dockerSocket, containerdSocket}, nil
		}
	default:
		return nil, engine.InputError(fmt.Sprintf("WAITDAEMON_ENGINE=%q: expected docker or containerd (default: whichever socket is mounted)", kind))
	}
	if kind == engineContainerd {
		return g.containerd(waiter)
	}
	return g.docker(waiter), nil
}

func (g *globals) docker(waiter bool) *docker.Engine {
	c := g.client()
	if waiter {
		c.WaitForEngine = docker.WaiterWaitForEngine
	}
	return &docker.Engine{C: c, Log: g.stdout}
}

func (g *globals) containerd(waiter bool) (*containerd.Engine, error) {
	socket, err := containerdapi.SocketFromEnv()
	if err != nil {
		return nil, engine.InputError(err.Error())
	}
	c := &containerdapi.Client{Socket: socket, Namespace: containerd.DetectNamespace(), UserAgent: "waitdaemon/" + version}
	if g.verbose {
		c.Trace = g.stderr
	}
	if waiter {
		c.WaitForEngine = containerd.WaiterWaitForEngine
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
