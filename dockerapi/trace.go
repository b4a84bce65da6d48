package dockerapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// redactedHeaders never appear in a trace with their values.
var redactedHeaders = []string{"X-Registry-Auth", "Authorization"}

// secretEnv matches an environment entry in a JSON body whose name says
// it holds a secret, like "REGISTRY_PASSWORD=…": its value is redacted.
var secretEnv = regexp.MustCompile(`"([A-Za-z0-9_]*(?i:password|passwd|secret|token|credential|api_?key)[A-Za-z0-9_]*)=(?:[^"\\]|\\.)*"`)

// Redact hides the values of secret-looking environment entries in a JSON
// body: the trace and the dry-run plan show them as <redacted>.
func Redact(b []byte) []byte {
	return secretEnv.ReplaceAll(b, []byte(`"$1=<redacted>"`))
}

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
		b.Write(Redact(body))
		b.WriteString("\n")
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
	b.Write(Redact(body))
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

// tracedBody copies a response body to the trace as it is read.
type tracedBody struct {
	io.ReadCloser
	t    *tracer
	last byte
	once sync.Once
}

func (b *tracedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.t.write(Redact(p[:n]))
		b.last = p[n-1]
	}
	if err == io.EOF {
		b.end()
	}
	return n, err
}

func (b *tracedBody) Close() error {
	b.end()
	return b.ReadCloser.Close()
}

// end closes the body's part of the trace on a line of its own.
func (b *tracedBody) end() {
	b.once.Do(func() {
		if b.last != 0 && b.last != '\n' {
			b.t.write([]byte("\n"))
		}
	})
}
