package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// apiCmd is curl for the engine's socket, for an OS with no shell.
type apiCmd struct {
	Method string `arg:"" help:"HTTP method: GET, POST, DELETE, HEAD…"`
	Path   string `arg:"" help:"Path and query, like /containers/json?all=1. Without a /vX.Y prefix the negotiated version is used."`
	Body   string `arg:"" optional:"" help:"JSON request body."`
}

func (a *apiCmd) Run(ctx context.Context, g *globals) error {
	c := g.client()
	resp, err := c.Raw(ctx, a.Method, a.Path, []byte(a.Body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return printJSON(g.stdout, resp.Body)
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
