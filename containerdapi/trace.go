package containerdapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The trace shows each call the way the Docker client's shows each
// exchange: what was sent after "> ", what came back after "< ", a
// failure to get an answer after "* ". Messages are decoded field by
// field (proto names) and printed as indented JSON; registry secrets and
// secret-looking environment values are redacted by the codec itself. A
// stream's messages appear as they are sent and read, but for a blob
// read in pieces (Content/Read), which appears whole, as one message,
// once read (see joinPieces). A message the same as the last one sent
// (or read) on the same method is not printed again but named as such,
// so that a poll shows each of its calls without repeating the spec it
// reads each time.
//
//	> containerd.services.containers.v1.Containers/Get
//	> containerd-namespace: tinkerbell
//	> {
//	>   "id": "web"
//	> }
//	< containerd.services.containers.v1.Containers/Get
//	< {
//	…
//	< containerd.services.containers.v1.Containers/Get: OK

func (c *Client) traceRequest(ctx context.Context, r *rpc, m message) {
	if c.Trace == nil {
		return
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "> %s\n", r.name)
	fmt.Fprintf(&b, "> containerd-namespace: %s\n", c.Namespace)
	if lease := leaseOf(ctx); lease != "" {
		fmt.Fprintf(&b, "> containerd-lease: %s\n", lease)
	}
	c.writeMessageTrace(b.Bytes(), ">", r, m)
}

func (c *Client) traceMessage(dir string, r *rpc, m message) {
	if c.Trace == nil {
		return
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s\n", dir, r.name)
	c.writeMessageTrace(b.Bytes(), dir, r, m)
}

// writeMessageTrace writes head, then m, or, when m is the same as the
// last message written in that direction on that method, a line saying
// so.
func (c *Client) writeMessageTrace(head []byte, dir string, r *rpc, m message) {
	var body bytes.Buffer
	writeMessage(&body, dir, m)
	key := dir + " " + r.name
	c.traceMu.Lock()
	defer c.traceMu.Unlock()
	if c.traceLast == nil {
		c.traceLast = map[string]string{}
	}
	if c.traceLast[key] == body.String() {
		what := "read"
		if dir == ">" {
			what = "sent"
		}
		body.Reset()
		fmt.Fprintf(&body, "%s (the same message as the last one %s)\n", dir, what)
	} else {
		c.traceLast[key] = body.String()
	}
	_, _ = c.Trace.Write(append(head, body.Bytes()...))
}

// traceEnd writes a call's outcome: its status, or why it got none.
func (c *Client) traceEnd(r *rpc, err error) {
	if c.Trace == nil {
		return
	}
	var apiErr *Error
	var line string
	switch {
	case err == nil:
		line = fmt.Sprintf("< %s: OK\n", r.name)
	case errors.As(err, &apiErr):
		line = fmt.Sprintf("< %s: %s: %s\n", r.name, apiErr.Code, apiErr.Message)
	default:
		line = fmt.Sprintf("* %s: %v\n", r.name, err)
	}
	c.writeTrace([]byte(line))
}

func (c *Client) writeTrace(p []byte) {
	c.traceMu.Lock()
	defer c.traceMu.Unlock()
	_, _ = c.Trace.Write(p)
}

// writeMessage writes m as indented JSON, each line after prefix.
func writeMessage(b *bytes.Buffer, prefix string, m message) {
	var out bytes.Buffer
	if err := json.Indent(&out, encodeJSON(m), "", "  "); err != nil {
		out.Reset()
		out.Write(encodeJSON(m))
	}
	for line := range strings.SplitSeq(out.String(), "\n") {
		fmt.Fprintf(b, "%s %s\n", prefix, line)
	}
}
