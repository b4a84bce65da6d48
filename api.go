package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine/containerd"
)

// apiCmd is curl for the engine's socket, for an OS with no shell: an
// HTTP request to Docker, or one of containerd's read-only calls, on the
// engine the action would use.
type apiCmd struct {
	Method string `arg:"" help:"Docker: an HTTP method (GET, POST, DELETE, HEAD…). containerd: a read-only call, like containers.get; a wrong one lists them."`
	Path   string `arg:"" optional:"" help:"Docker: path and query, like /containers/json?all=1; without a /vX.Y prefix the negotiated version is used. containerd: the call's first argument, like an ID."`
	Body   string `arg:"" optional:"" help:"Docker: a JSON request body. containerd: the call's second argument."`
}

func (a *apiCmd) Run(ctx context.Context, g *globals) error {
	e, err := g.engine(false)
	if err != nil {
		return err
	}
	if cd, ok := e.(*containerd.Engine); ok {
		return a.containerd(ctx, g, cd.C)
	}
	c := g.client()
	switch {
	case strings.Contains(a.Method, "."): // no HTTP method has one
		return usageError{fmt.Errorf("api %s: expected an HTTP method and a path, like GET /containers/json, for Docker at %s; containerd's calls, such as containers.list, need containerd: WAITDAEMON_ENGINE=containerd", a.Method, c.SocketPath())}
	case a.Path == "":
		return usageError{fmt.Errorf(`api %s: expected "<path>" after the HTTP method, like /containers/json, for Docker at %s`, a.Method, c.SocketPath())}
	}
	resp, err := c.Raw(ctx, a.Method, a.Path, []byte(a.Body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return printJSON(g.stdout, resp.Body)
}

// containerd makes the call a names, with the arguments given, and
// prints the answer as indented JSON.
func (a *apiCmd) containerd(ctx context.Context, g *globals, c *containerdapi.Client) error {
	args := []string{a.Path, a.Body}
	for len(args) > 0 && args[len(args)-1] == "" {
		args = args[:len(args)-1] // those not given
	}
	answer, err := c.Raw(ctx, a.Method, args...)
	if errors.Is(err, containerdapi.ErrBadCall) {
		return usageError{fmt.Errorf("api on containerd at %s, namespace %s: %w", c.SocketPath(), c.Namespace, err)}
	}
	if err != nil {
		return err
	}
	return printJSON(g.stdout, bytes.NewReader(answer))
}

// printJSON copies r to w, indenting each JSON value it holds (a body, or
// every line of a stream); what is not JSON is copied as it is.
func printJSON(w io.Writer, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		var out bytes.Buffer
		if json.Indent(&out, line, "", "  ") != nil {
			out.Reset()
			out.Write(line)
		}
		if out.Len() == 0 {
			continue
		}
		out.WriteByte('\n')
		if _, err := w.Write(out.Bytes()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// versionCmd prints the binary's version and, for each engine whose
// socket answers, the engine's.
type versionCmd struct{}

func (versionCmd) Run(ctx context.Context, g *globals) error {
	fmt.Fprintf(g.stdout, "waitdaemon %s (API up to %s)\n", version, dockerapi.MaxVersion)
	c := g.client()
	c.WaitForEngine = -1
	v, err := c.EngineVersion(ctx)
	if err != nil {
		fmt.Fprintf(g.stdout, "engine: not reachable on %s: %s\n", c.SocketPath(), strings.TrimSpace(err.Error()))
	} else {
		negotiated, _ := c.APIVersion(ctx)
		fmt.Fprintf(g.stdout, "engine: %s %s, API %s (minimum %s), using %s\n", v.Os, v.Version, v.APIVersion, v.MinAPIVersion, negotiated)
	}
	// containerd's only when its socket is there: CaptainOS's.
	if e, err := g.containerd(false); err == nil && exists(e.C.Socket) {
		e.C.WaitForEngine = -1
		if v, err := e.C.Version(ctx); err != nil {
			fmt.Fprintf(g.stdout, "containerd: not reachable on %s: %s\n", e.C.SocketPath(), strings.TrimSpace(err.Error()))
		} else {
			fmt.Fprintf(g.stdout, "containerd: %s (revision %s), namespace %s\n", v.Version, v.Revision, e.C.Namespace)
		}
	}
	return nil
}
