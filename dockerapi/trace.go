package dockerapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/waitdaemon/waitdaemon/internal/redact"
)

// redactedHeaders never appear in a trace with their values.
var redactedHeaders = []string{"X-Registry-Auth", "Authorization"}

// maxBuffered bounds a response body traced whole: a body of known length
// up to it is redacted as a whole; anything else is a stream, traced as it
// arrives.
const maxBuffered = 1 << 20

// tracer writes every exchange to w the way curl -v shows it: the request
// line, headers and body after "> ", the status line and headers after
// "< ", then the response body as it is read, so that streams (pull, wait,
// logs) appear as they arrive.
type tracer struct {
	next http.RoundTripper
	w    io.Writer
	mu   sync.Mutex
}

func (t *tracer) RoundTrip(req *http.Request) (*http.Response, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "> %s %s HTTP/1.1\n", req.Method, req.URL.RequestURI())
	fmt.Fprintf(&b, "> Host: %s\n", req.URL.Host)
	writeHeaders(&b, ">", req.Header)
	b.WriteString(">\n")
	if req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if ct := req.Header.Get("Content-Type"); ct == "application/x-tar" {
			// A file copied in: bytes, not text, and not shown.
			fmt.Fprintf(&b, "[%d bytes of %s]\n", len(body), ct)
		} else {
			b.Write(redact.Secrets(body))
			b.WriteString("\n")
		}
	}
	t.write(b.Bytes())

	resp, err := t.next.RoundTrip(req)
	if err != nil {
		t.write([]byte("* " + err.Error() + "\n"))
		return nil, err
	}
	b.Reset()
	fmt.Fprintf(&b, "< HTTP/%d.%d %s\n", resp.ProtoMajor, resp.ProtoMinor, resp.Status)
	writeHeaders(&b, "<", resp.Header)
	b.WriteString("<\n")
	if resp.ContentLength < 0 || resp.ContentLength > maxBuffered {
		t.write(b.Bytes())
		resp.Body = &tracedBody{ReadCloser: resp.Body, t: t}
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	b.Write(redact.Secrets(body))
	if len(body) > 0 && body[len(body)-1] != '\n' {
		b.WriteByte('\n')
	}
	t.write(b.Bytes())
	return resp, err
}

func (t *tracer) write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = t.w.Write(p)
}

func writeHeaders(b *bytes.Buffer, prefix string, h http.Header) {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			if slices.ContainsFunc(redactedHeaders, func(r string) bool { return strings.EqualFold(r, k) }) {
				v = "<redacted>"
			}
			fmt.Fprintf(b, "%s %s: %s\n", prefix, k, v)
		}
	}
}

// tracedBody copies a response body to the trace as it is read, line by
// line, redacted as redact.Secrets would redact it whole (see redact.Stream).
type tracedBody struct {
	io.ReadCloser
	t    *tracer
	mu   sync.Mutex // Close may come while a Read runs
	red  redact.Stream
	mid  bool // the trace is in a line of the body
	done bool
}

// heldTooLong ends the trace of a body whose open entry outgrew what a redact.Stream holds.
const heldTooLong = "* the trace withholds the rest of this body: a value too long to tell whether it is secret\n"

func (b *tracedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return n, err
	}
	out, tooLong := b.red.Next(p[:n])
	b.write(out)
	if tooLong {
		b.end(nil)
		b.t.write([]byte(heldTooLong))
	}
	if err == io.EOF && !b.done {
		b.end(b.red.End())
	}
	return n, err
}

func (b *tracedBody) Close() error {
	b.mu.Lock()
	if !b.done {
		b.end(b.red.CutOff())
	}
	b.mu.Unlock()
	return b.ReadCloser.Close()
}

func (b *tracedBody) write(p []byte) {
	if len(p) > 0 {
		b.t.write(p)
		b.mid = p[len(p)-1] != '\n'
	}
}

// end writes the last of the body's trace, rest, and closes it on a line
// of its own.
func (b *tracedBody) end(rest []byte) {
	b.write(rest)
	if b.mid {
		b.t.write([]byte("\n"))
	}
	b.done = true
}
