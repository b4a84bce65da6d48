// Package rr records exchanges with a real Docker engine as readable JSON
// fixtures, and replays them from a fake engine on a unix socket, so that
// tests run the real dial, retry and decode code with no engine present.
//
// It is for tests only. Record with the -record flag (see testdata/README.md):
//
//	go test ./dockerapi/ -record=docker-20.10
package rr

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

var record = flag.String("record", "", "record the fixtures of this engine directory (docker-20.10, podman-4.3) from the engine at DOCKER_HOST instead of replaying them")

// Fixture is one recorded test: the engine it came from, and its
// exchanges in order.
type Fixture struct {
	Engine    string     `json:"engine"`
	Note      string     `json:"note,omitempty"`
	Exchanges []Exchange `json:"exchanges"`
}

// Exchange is one request and its response.
type Exchange struct {
	Request  Message `json:"request"`
	Response Message `json:"response"`
}

// Message is one side of an exchange. The body is JSON where it is JSON,
// text lines where it is a stream of text, base64 otherwise.
type Message struct {
	Method  string            `json:"method,omitempty"`
	Path    string            `json:"path,omitempty"`
	Query   string            `json:"query,omitempty"`
	Status  int               `json:"status,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	JSON    json.RawMessage   `json:"json,omitempty"`
	Lines   []string          `json:"lines,omitempty"`
	Base64  string            `json:"base64,omitempty"`
}

// Session is what a test talks to: a socket, and the transport to reach
// it with (nil means the client's own unix transport).
type Session struct {
	Socket    string
	Transport http.RoundTripper
}

// Open starts a session for fixture file dir/engine/name.json. In replay
// mode it serves the fixture from a fake engine on a fresh unix socket;
// with -record=engine it talks to the real engine at DOCKER_HOST and
// writes the fixture when the test ends.
func Open(t testing.TB, dir, engine, name string) *Session {
	t.Helper()
	file := filepath.Join(dir, engine, name+".json")
	if *record == engine {
		return startRecording(t, file, engine)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("reading fixture: %v (record it with `make record`, see testdata/README.md)", err)
	}
	var f Fixture
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("decoding fixture %s: %v", file, err)
	}
	r := &replayer{t: t, file: file, want: f.Exchanges}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.next < len(r.want) {
			t.Errorf("replay %s: %d recorded exchanges were never asked for; the first:\n%s", file, len(r.want)-r.next, dump(r.want[r.next].Request))
		}
	})
	return &Session{Socket: Serve(t, r)}
}

// Recording reports whether the test binary records the fixtures of
// engine (-record=engine) instead of replaying them.
func Recording(engine string) bool { return *record == engine }

// Serve runs h on a fresh unix socket until the test ends, and returns
// the socket's path.
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	return serve(t, &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, true)
}

// ServeH2C is Serve for HTTP/2 without TLS ("prior knowledge"), as gRPC

// HangUp closes the connection of w without an answer, as an engine
// whose answer is lost: the call was carried out, or not.
func HangUp(t testing.TB, w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Errorf("hijacking the connection: %v", err)
		return
	}
	_ = conn.Close()
}

// clients such as containerd's speak it.
func ServeH2C(t testing.TB, h http.Handler) string {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	// Closed at once when the test ends: a shutdown would wait for the
	// client's idle HTTP/2 connection to go.
	return serve(t, &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, Protocols: &p}, false)
}

func serve(t testing.TB, srv *http.Server, graceful bool) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rr")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		if graceful {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
		}
		_ = srv.Close()
		os.RemoveAll(dir)
	})
	return sock
}

// replayer is the fake engine: it answers each request with the next
// recorded exchange, if the request matches it.
type replayer struct {
	t    testing.TB
	file string
	mu   sync.Mutex
	want []Exchange
	next int
}

func (r *replayer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	got := Message{Method: req.Method, Path: req.URL.Path, Query: canonicalQuery(req.URL.RawQuery)}
	setBody(&got, body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next >= len(r.want) {
		r.t.Errorf("replay %s: unexpected request after the last recorded one:\n%s", r.file, dump(got))
		http.Error(w, "replay: no more recorded exchanges", http.StatusTeapot)
		return
	}
	ex := r.want[r.next]
	if !matches(ex.Request, got) {
		r.t.Errorf("replay %s: request %d does not match the recording\nasked:\n%s\nrecorded:\n%s", r.file, r.next+1, dump(got), dump(ex.Request))
		http.Error(w, "replay: unmatched request", http.StatusTeapot)
		return
	}
	r.next++
	for k, v := range ex.Response.Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(ex.Response.Status)
	_, _ = w.Write(bodyOf(ex.Response))
}

func matches(want, got Message) bool {
	return want.Method == got.Method && want.Path == got.Path &&
		canonicalQuery(want.Query) == got.Query &&
		canonicalJSON(want.JSON) == canonicalJSON(got.JSON) &&
		strings.Join(want.Lines, "\n") == strings.Join(got.Lines, "\n") &&
		want.Base64 == got.Base64
}

func dump(m Message) string {
	data, _ := json.MarshalIndent(m, "  ", "  ")
	return "  " + string(data)
}

func canonicalQuery(raw string) string {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return raw
	}
	for k, vs := range q {
		for i, v := range vs {
			// Filters are JSON: compare them canonically too.
			if c := canonicalJSON(json.RawMessage(v)); c != "" && json.Valid([]byte(v)) {
				q[k][i] = c
			}
		}
	}
	return q.Encode()
}

func canonicalJSON(m json.RawMessage) string {
	if len(m) == 0 {
		return ""
	}
	var v any
	if err := json.Unmarshal(m, &v); err != nil {
		return string(m)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// setBody stores body in m in its most readable form.
func setBody(m *Message, body []byte) {
	trimmed := bytes.TrimSpace(body)
	switch {
	case len(trimmed) == 0:
	case json.Valid(trimmed):
		var buf bytes.Buffer
		_ = json.Indent(&buf, trimmed, "", "  ")
		m.JSON = buf.Bytes()
	case utf8.Valid(body) && !bytes.ContainsAny(body, "\x00\x01\x02"):
		m.Lines = strings.SplitAfter(string(body), "\n")
		if m.Lines[len(m.Lines)-1] == "" {
			m.Lines = m.Lines[:len(m.Lines)-1]
		}
	default:
		m.Base64 = base64.StdEncoding.EncodeToString(body)
	}
}

func bodyOf(m Message) []byte {
	switch {
	case len(m.JSON) > 0:
		return append(bytes.Clone(m.JSON), '\n')
	case len(m.Lines) > 0:
		return []byte(strings.Join(m.Lines, ""))
	case m.Base64 != "":
		b, _ := base64.StdEncoding.DecodeString(m.Base64)
		return b
	}
	return nil
}

// keptHeaders are the response headers worth recording.
var keptHeaders = []string{"Api-Version", "Content-Type", "Ostype", "Server", "X-Docker-Container-Path-Stat"}

// recorder forwards to the real engine and keeps every exchange.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	ex   []Exchange
}

func startRecording(t testing.TB, file, engine string) *Session {
	sock := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		sock = strings.TrimPrefix(h, "unix://")
	}
	base := &http.Transport{Proxy: nil, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	rec := &recorder{next: base}
	t.Cleanup(func() {
		server := ""
		for _, e := range rec.ex {
			if s := e.Response.Headers["Server"]; s != "" {
				server = s
				break
			}
		}
		f := Fixture{Engine: engine + " (" + server + ")", Exchanges: rec.ex}
		Save(t, file, f, Scrub, fmt.Sprintf("%d exchanges", len(rec.ex)))
	})
	return &Session{Socket: sock, Transport: rec}
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	ex := Exchange{
		Request:  Message{Method: req.Method, Path: req.URL.Path, Query: canonicalQuery(req.URL.RawQuery)},
		Response: Message{Status: resp.StatusCode, Headers: map[string]string{}},
	}
	setBody(&ex.Request, reqBody)
	setBody(&ex.Response, respBody)
	for _, k := range keptHeaders {
		if v := resp.Header.Get(k); v != "" {
			ex.Response.Headers[k] = v
		}
	}
	r.mu.Lock()
	r.ex = append(r.ex, ex)
	r.mu.Unlock()
	return resp, nil
}

var (
	hexID     = regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	timestamp = regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
	unixTime  = regexp.MustCompile(`"(Created|created)": \d{9,}`)
)

// Save writes a fixture to file, once its test has passed: indented JSON
// ("<redacted>" stays readable), through scrub when it is not nil.
// recorded says what it holds, for the test's log.
func Save(t testing.TB, file string, fixture any, scrub func([]byte) []byte, recorded string) {
	if t.Failed() {
		t.Logf("not writing %s: the test failed", file)
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(fixture); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if scrub != nil {
		data = scrub(data)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s in %s", recorded, file)
}

// Scrub replaces what differs from one recording to the next: random
// 64-hex IDs (and their 12-character short forms) become stable,
// numbered ones, and dates become one fixed date.
func Scrub(data []byte) []byte {
	ids := map[string]string{}
	for _, id := range hexID.FindAll(data, -1) {
		if _, ok := ids[string(id)]; !ok {
			ids[string(id)] = fmt.Sprintf("%012x", len(ids)+1) + strings.Repeat("f", 52)
		}
	}
	s := string(data)
	for id, fake := range ids {
		s = strings.ReplaceAll(s, id, fake)
	}
	for id, fake := range ids {
		s = regexp.MustCompile(`\b`+id[:12]+`\b`).ReplaceAllString(s, fake[:12])
	}
	return ScrubTimes([]byte(s))
}

// ScrubTimes makes every date one fixed date (the engine's "never",
// 0001-01-01…, is kept), leaving IDs alone: for recordings whose IDs are
// content digests or chosen by the test.
func ScrubTimes(data []byte) []byte {
	s := timestamp.ReplaceAllStringFunc(string(data), func(ts string) string {
		if strings.HasPrefix(ts, "0001-") { // the engine's "never"
			return ts
		}
		return "2026-01-01T00:00:00Z"
	})
	s = unixTime.ReplaceAllString(s, `"$1": 1767225600`)
	return []byte(s)
}

// CanonicalJSON is m with its object keys sorted and no spaces, for
// comparing two JSON texts; m itself when it is not JSON.
func CanonicalJSON(m json.RawMessage) string { return canonicalJSON(m) }
