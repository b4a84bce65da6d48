// Package grpcrr records gRPC calls to a real containerd as readable JSON
// fixtures, and replays them from a fake daemon speaking HTTP/2 without
// TLS on a unix socket, so that tests run the client's real dial,
// framing, status and decode code with no daemon present. It is rr's
// sibling for gRPC, and shares its -record flag, its sockets and its
// scrubbing.
//
// It is for tests only. Record with the -record flag (see
// testdata/README.md):
//
//	CONTAINERD_ADDRESS=/run/containerd-test/containerd.sock go test ./containerdapi/ -record=containerd-2.2.1
package grpcrr

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// Codec turns the messages of a method into readable JSON and back. The
// client package under test provides it: it alone knows the messages.
type Codec interface {
	// Decode shows msg, sent by the client (fromClient) or by the daemon
	// as part of method, as JSON.
	Decode(method string, fromClient bool, msg []byte) (json.RawMessage, error)
	// Encode is the inverse of Decode.
	Encode(method string, fromClient bool, js json.RawMessage) ([]byte, error)
}

// Fixture is one recorded test: the daemon it came from, and its calls in
// the order they ended. Every message and every end carries its place in
// the order of the whole recording (seq), which the replay keeps.
type Fixture struct {
	Engine string `json:"engine"`
	Note   string `json:"note,omitempty"`
	Calls  []Call `json:"calls"`
}

// Call is one gRPC call: unary or a stream, in the order its messages
// went.
type Call struct {
	Method string `json:"method"` // "containerd.services.containers.v1.Containers/Get"
	// Metadata is the containerd-namespace and containerd-lease sent.
	Metadata map[string]string `json:"metadata,omitempty"`
	Messages []Message         `json:"messages"`
	// Status is how the daemon ended the call; nil when the client did.
	Status *Status `json:"status,omitempty"`
	EndSeq int     `json:"end_seq"`
}

// Message is one message of a call: sent by the client or by the daemon.
type Message struct {
	Seq    int             `json:"seq"`
	Client json.RawMessage `json:"client,omitempty"`
	Daemon json.RawMessage `json:"daemon,omitempty"`
}

// Status is a call's gRPC status.
type Status struct {
	Code    int    `json:"code"`
	Message string `json:"message,omitempty"`
	// TrailersOnly is an answer of headers alone, as containerd gives
	// every error.
	TrailersOnly bool `json:"trailers_only,omitempty"`
}

// metadataKeys are the request headers recorded and matched.
var metadataKeys = []string{"Containerd-Namespace", "Containerd-Lease"}

// Session is what a test talks to: a socket, and the transport to reach
// it with (nil means the client's own).
type Session struct {
	Socket    string
	Transport http.RoundTripper
}

// Open starts a session for fixture file dir/engine/name.json. In replay
// mode it serves the fixture from a fake daemon on a fresh unix socket;
// with -record=engine it talks to the real daemon at CONTAINERD_ADDRESS
// and writes the fixture when the test ends.
func Open(t testing.TB, dir, engine, name string, codec Codec) *Session {
	t.Helper()
	file := filepath.Join(dir, engine, name+".json")
	if rr.Recording(engine) {
		return startRecording(t, file, engine, codec)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("reading fixture: %v (record it with `make record-containerd`, see testdata/README.md)", err)
	}
	var f Fixture
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("decoding fixture %s: %v", file, err)
	}
	r := &replayer{t: t, file: file, codec: codec, calls: f.Calls, used: make([]bool, len(f.Calls)), happened: map[int]bool{}}
	r.cond.L = &r.mu
	for _, c := range f.Calls {
		r.events = max(r.events, c.EndSeq+1)
		for _, m := range c.Messages {
			r.events = max(r.events, m.Seq+1)
		}
	}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i, u := range r.used {
			if !u {
				t.Errorf("replay %s: recorded call %d (%s) was never made", file, i+1, r.calls[i].Method)
			}
		}
	})
	return &Session{Socket: rr.ServeH2C(t, r)}
}

// replayer is the fake daemon. It matches each call to the first unused
// recorded call with the same method, metadata and first message, and
// plays its messages in order, checking the client's and sending the
// daemon's. The daemon's messages and ends wait until everything recorded
// before them has happened again, so that answers keep their recorded
// order: a Wait's answer after the Start it waited on, a transfer's after
// the credentials it asked for.
type replayer struct {
	t        testing.TB
	file     string
	codec    Codec
	mu       sync.Mutex
	cond     sync.Cond
	calls    []Call
	used     []bool
	events   int
	happened map[int]bool
}

// happen marks the event seq as replayed.
func (r *replayer) happen(seq int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.happened[seq] = true
	r.cond.Broadcast()
}

// await waits until every event before seq has been replayed.
func (r *replayer) await(ctx context.Context, what string, seq int) bool {
	timeout := time.AfterFunc(10*time.Second, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.cond.Broadcast()
	})
	defer timeout.Stop()
	deadline := time.Now().Add(10 * time.Second)
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		missing := -1
		for i := range seq {
			if !r.happened[i] {
				missing = i
				break
			}
		}
		switch {
		case missing < 0:
			return true
		case ctx.Err() != nil:
			return false
		case time.Now().After(deadline):
			r.t.Errorf("replay %s: %s (event %d) waited 10 s for event %d, which never came", r.file, what, seq, missing)
			return false
		}
		stop := context.AfterFunc(ctx, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.cond.Broadcast()
		})
		r.cond.Wait()
		stop()
	}
}

func (r *replayer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	method := strings.TrimPrefix(req.URL.Path, "/")
	md := metadata(req.Header)
	fr := &frames{r: req.Body}
	first, err := r.read(method, fr)
	if err != nil {
		r.fail(w, "replay %s: %s: reading the first message: %v", r.file, method, err)
		return
	}
	i := r.match(method, md, first)
	if i < 0 {
		r.fail(w, "replay %s: call %s %v with first message\n  %s\nmatches no unused recorded call", r.file, method, md, first)
		return
	}
	call := r.calls[i]
	r.happen(call.Messages[0].Seq)
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
	wrote := false
	for _, m := range call.Messages[1:] {
		if m.Client != nil {
			got, err := r.read(method, fr)
			if err != nil || rr.CanonicalJSON(got) != rr.CanonicalJSON(m.Client) {
				r.fail(w, "replay %s: call %d (%s): the client sent\n  %s (%v)\nrecorded:\n  %s", r.file, i+1, method, got, err, m.Client)
				return
			}
			r.happen(m.Seq)
			continue
		}
		if !r.await(req.Context(), fmt.Sprintf("call %d (%s)'s message", i+1, method), m.Seq) {
			return
		}
		msg, err := r.codec.Encode(method, false, m.Daemon)
		if err != nil {
			r.fail(w, "replay %s: call %d (%s): encoding a recorded answer: %v", r.file, i+1, method, err)
			return
		}
		hdr := make([]byte, 5)
		binary.BigEndian.PutUint32(hdr[1:], uint32(len(msg)))
		_, _ = w.Write(append(hdr, msg...))
		w.(http.Flusher).Flush()
		r.happen(m.Seq)
		wrote = true
	}
	if call.Status == nil {
		<-req.Context().Done() // the client ended it
		r.happen(call.EndSeq)
		return
	}
	if !r.await(req.Context(), fmt.Sprintf("call %d (%s)'s end", i+1, method), call.EndSeq) {
		return
	}
	defer r.happen(call.EndSeq)
	if call.Status.TrailersOnly && !wrote {
		w.Header().Del("Trailer")
		w.Header().Set("Grpc-Status", strconv.Itoa(call.Status.Code))
		if call.Status.Message != "" {
			w.Header().Set("Grpc-Message", encodeMessage(call.Status.Message))
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Grpc-Status", strconv.Itoa(call.Status.Code))
	if call.Status.Message != "" {
		w.Header().Set("Grpc-Message", encodeMessage(call.Status.Message))
	}
}

func (r *replayer) read(method string, fr *frames) (json.RawMessage, error) {
	msg, err := fr.next()
	if err != nil {
		return nil, err
	}
	return r.codec.Decode(method, true, msg)
}

func (r *replayer) match(method string, md map[string]string, first json.RawMessage) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, c := range r.calls {
		if r.used[i] || c.Method != method || !sameMetadata(c.Metadata, md) || len(c.Messages) == 0 ||
			rr.CanonicalJSON(c.Messages[0].Client) != rr.CanonicalJSON(first) {
			continue
		}
		r.used[i] = true
		return i
	}
	return -1
}

func (r *replayer) fail(w http.ResponseWriter, format string, args ...any) {
	r.t.Errorf(format, args...)
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Grpc-Status", "2")
	w.Header().Set("Grpc-Message", encodeMessage("replay: unmatched call"))
	w.WriteHeader(http.StatusOK)
}

func sameMetadata(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func metadata(h http.Header) map[string]string {
	md := map[string]string{}
	for _, k := range metadataKeys {
		if v := h.Get(k); v != "" {
			md[strings.ToLower(k)] = v
		}
	}
	return md
}

// encodeMessage percent-encodes a grpc-message as gRPC does.
func encodeMessage(m string) string {
	var b strings.Builder
	for i := 0; i < len(m); i++ {
		c := m[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// frames reads gRPC frames from a body.
type frames struct {
	r io.Reader
}

func (f *frames) next() ([]byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(f.r, hdr[:]); err != nil {
		return nil, err
	}
	msg := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
	if _, err := io.ReadFull(f.r, msg); err != nil {
		return nil, err
	}
	return msg, nil
}

// recorder forwards to the real daemon and keeps every call, in the order
// the calls end.
type recorder struct {
	t     testing.TB
	next  http.RoundTripper
	codec Codec
	mu    sync.Mutex
	calls []Call
	seq   int
}

func startRecording(t testing.TB, file, engine string, codec Codec) *Session {
	sock := os.Getenv("CONTAINERD_ADDRESS")
	if sock == "" {
		t.Fatalf("recording %s needs CONTAINERD_ADDRESS: the socket of a containerd (`make containerd` starts one on /run/containerd-test/containerd.sock)", engine)
	}
	sock = strings.TrimPrefix(sock, "unix://")
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	base := &http.Transport{Protocols: &p, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	rec := &recorder{t: t, next: base, codec: codec}
	t.Cleanup(func() {
		base.CloseIdleConnections()
		rec.mu.Lock()
		f := Fixture{Engine: engine, Calls: rec.calls}
		rec.mu.Unlock()
		// The daemon's times change with every recording; the client's
		// are the test's own, and must still match.
		for _, c := range f.Calls {
			for i, m := range c.Messages {
				if m.Daemon != nil {
					c.Messages[i].Daemon = rr.ScrubTimes(m.Daemon)
				}
			}
		}
		rr.Save(t, file, f, nil, fmt.Sprintf("%d calls", len(f.Calls)))
	})
	return &Session{Socket: sock, Transport: rec}
}

// live is a call being recorded.
type live struct {
	rec    *recorder
	call   Call
	method string
	once   sync.Once
}

func (l *live) add(fromClient bool, msg []byte) {
	js, err := l.rec.codec.Decode(l.method, fromClient, msg)
	if err != nil {
		l.rec.t.Errorf("recording %s: decoding a message: %v", l.method, err)
		return
	}
	js = indent(js)
	l.rec.mu.Lock()
	defer l.rec.mu.Unlock()
	m := Message{Seq: l.rec.seq}
	l.rec.seq++
	if fromClient {
		m.Client = js
	} else {
		m.Daemon = js
	}
	l.call.Messages = append(l.call.Messages, m)
}

func (l *live) end(s *Status) {
	l.once.Do(func() {
		l.rec.mu.Lock()
		defer l.rec.mu.Unlock()
		l.call.Status = s
		l.call.EndSeq = l.rec.seq
		l.rec.seq++
		l.rec.calls = append(l.rec.calls, l.call)
	})
}

func indent(js json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Indent(&b, js, "", "  ") != nil {
		return js
	}
	return b.Bytes()
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	method := strings.TrimPrefix(req.URL.Path, "/")
	l := &live{rec: r, method: method, call: Call{Method: method, Metadata: metadata(req.Header), Messages: []Message{}}}
	if len(l.call.Metadata) == 0 {
		l.call.Metadata = nil
	}
	if req.Body != nil {
		req.Body = &tee{ReadCloser: req.Body, onMessage: func(m []byte) { l.add(true, m) }}
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if s := resp.Header.Get("Grpc-Status"); s != "" {
		code, _ := strconv.Atoi(s)
		l.end(&Status{Code: code, Message: decodeMessage(resp.Header.Get("Grpc-Message")), TrailersOnly: true})
		return resp, nil
	}
	resp.Body = &tee{ReadCloser: resp.Body, onMessage: func(m []byte) { l.add(false, m) }, onEnd: func(err error) {
		if err != io.EOF {
			l.end(nil)
			return
		}
		code, _ := strconv.Atoi(resp.Trailer.Get("Grpc-Status"))
		l.end(&Status{Code: code, Message: decodeMessage(resp.Trailer.Get("Grpc-Message"))})
	}}
	return resp, nil
}

func decodeMessage(m string) string {
	if d, err := url.PathUnescape(m); err == nil {
		return d
	}
	return m
}

// tee passes a body through, parsing the gRPC frames in it as they go.
type tee struct {
	io.ReadCloser
	buf       []byte
	onMessage func([]byte)
	onEnd     func(error)
	ended     bool
}

func (t *tee) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.buf = append(t.buf, p[:n]...)
	for len(t.buf) >= 5 {
		size := int(binary.BigEndian.Uint32(t.buf[1:5]))
		if len(t.buf) < 5+size {
			break
		}
		t.onMessage(bytes.Clone(t.buf[5 : 5+size]))
		t.buf = t.buf[5+size:]
	}
	if err != nil {
		t.finish(err)
	}
	return n, err
}

func (t *tee) Close() error {
	t.finish(context.Canceled)
	return t.ReadCloser.Close()
}

func (t *tee) finish(err error) {
	if !t.ended && t.onEnd != nil {
		t.ended = true
		t.onEnd(err)
	}
}
