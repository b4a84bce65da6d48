package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// faultProxy stands between waitdaemon and the real engine's socket and
// breaks the exchanges its faults pick. Its socket lives in a directory
// of its own, which an action binds at /proxy (the waiter then binds it
// too), so that the socket can be absent, refuse, or come back anew.
type faultProxy struct {
	t    *testing.T
	dir  string
	sock string
	up   *http.Client // the real engine, on upstream

	// The faults, and what the proxy saw: "METHOD /path: what
	// happened", in order.
	ledger[*fault]

	mu    sync.Mutex
	ln    net.Listener
	srv   *http.Server
	conns map[net.Conn]bool
}

// What a fault does to a matching exchange.
type faultKind int

const (
	answer     faultKind = iota // answer status with a message (after delay, if set), never forwarding
	hangUp                      // close the connection without an answer
	hangUpLate                  // forward, let the engine act, then close without an answer
	slow                        // forward after delay
	cut                         // forward, and close the connection after cutAfter bytes of the body
	cutActing                   // forward, and delay later cut both sides, the engine's request cancelled, whatever it answered by then withheld
)

// fault breaks the first times exchanges (0: all) whose method and
// unversioned path match; or, with call set, the one exchange that is
// call.nth of those that norm names call.key.
type fault struct {
	method   string
	path     *regexp.Regexp
	call     sweepCall
	times    int
	kind     faultKind
	status   int
	delay    time.Duration
	cutAfter int
	hits     int
}

var versionPrefix = regexp.MustCompile(`^/v[0-9]+\.[0-9]+`)

// newFaultProxy makes a proxy to the engine on the socket upstream whose
// own socket does not exist until listen. The directory is under /tmp,
// where the engine can bind it.
func newFaultProxy(t *testing.T, upstream string) *faultProxy {
	t.Helper()
	dir, err := os.MkdirTemp("", "faultproxy")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{
		t: t, dir: dir, sock: filepath.Join(dir, "docker.sock"),
		up: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", upstream)
			},
			DisableCompression: true,
		}},
		conns: map[net.Conn]bool{},
	}
	t.Cleanup(func() {
		p.stop()
		os.RemoveAll(dir)
	})
	return p
}

// env and volumes make an action talk to the engine through the proxy.
func (p *faultProxy) env() (string, string) { return "DOCKER_HOST", "unix:///proxy/docker.sock" }
func (p *faultProxy) volume() string        { return p.dir + ":/proxy" }

func (f *fault) pick() (sweepCall, int, *int) { return f.call, f.times, &f.hits }

// listen makes the socket and serves it.
func (p *faultProxy) listen() {
	p.t.Helper()
	ln, err := net.Listen("unix", p.sock)
	if err != nil {
		p.t.Fatal(err)
	}
	srv := &http.Server{Handler: p, ConnState: p.track}
	p.mu.Lock()
	p.ln, p.srv = ln, srv
	p.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// refuse leaves a socket that nobody listens on, as a crashed engine
// does: connections to it are refused.
func (p *faultProxy) refuse() {
	p.t.Helper()
	ln, err := net.Listen("unix", p.sock)
	if err != nil {
		p.t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
}

// stop drops every connection and removes the socket, as an engine
// that goes down does.
func (p *faultProxy) stop() {
	p.mu.Lock()
	srv := p.srv
	p.srv, p.ln = nil, nil
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
	os.Remove(p.sock)
}

// restart is an engine restart: connections dropped, the socket gone for
// down, then a new one.
func (p *faultProxy) restart(down time.Duration) {
	p.note("-- restart: down for %v", down)
	p.stop()
	time.Sleep(down)
	p.listen()
	p.note("-- restart: up")
}

func (p *faultProxy) track(c net.Conn, s http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch s {
	case http.StateNew:
		p.conns[c] = true
	case http.StateClosed, http.StateHijacked:
		delete(p.conns, c)
	}
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := versionPrefix.ReplaceAllString(r.URL.Path, "")
	if name := r.URL.Query().Get("name"); name != "" {
		path += "?name=" + name
	}
	exchange := r.Method + " " + path
	f, _ := p.match(exchange, func(f *fault) bool { return f.method == r.Method && f.path.MatchString(path) })
	if f != nil {
		switch f.kind {
		case answer:
			if f.delay > 0 { // answered late, as a long wait that fails
				select {
				case <-time.After(f.delay):
				case <-r.Context().Done():
					p.note("%s: gave up waiting after less than %v (fault)", exchange, f.delay)
					return
				}
			}
			p.note("%s: %d (fault)", exchange, f.status)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(f.status)
			_ = json.NewEncoder(w).Encode(map[string]string{"message": fmt.Sprintf("fault injected: %d", f.status)})
			return
		case hangUp:
			p.note("%s: hung up (fault)", exchange)
			panic(http.ErrAbortHandler)
		case slow:
			select {
			case <-time.After(f.delay):
			case <-r.Context().Done():
				p.note("%s: gave up waiting after less than %v (fault)", exchange, f.delay)
				return
			}
		}
	}
	if f != nil && f.kind == cutActing {
		p.note("%s: %s (fault)", exchange, cutWhileActing(r.Context(), f.delay, func(ctx context.Context) (string, error) {
			req, err := http.NewRequestWithContext(ctx, r.Method, "http://engine"+r.URL.RequestURI(), r.Body)
			if err != nil {
				return "", err
			}
			req.Header = r.Header.Clone()
			req.ContentLength = r.ContentLength
			resp, err := p.up.Do(req)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				return "", err
			}
			return strconv.Itoa(resp.StatusCode), nil
		}))
		panic(http.ErrAbortHandler)
	}
	ctx := r.Context()
	if f != nil && f.kind == hangUpLate {
		ctx = context.WithoutCancel(ctx) // the engine finishes what it was asked
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://engine"+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	req.ContentLength = r.ContentLength
	resp, err := p.up.Do(req)
	if err != nil {
		p.note("%s: engine unreachable: %v", exchange, err)
		panic(http.ErrAbortHandler)
	}
	defer resp.Body.Close()
	if f != nil && f.kind == hangUpLate {
		_, _ = io.Copy(io.Discard, resp.Body)
		p.note("%s: %d from the engine, hung up before answering (fault)", exchange, resp.StatusCode)
		panic(http.ErrAbortHandler)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	w.(http.Flusher).Flush() // the engine sends a stream's headers at once
	limit := int64(-1)
	if f != nil && f.kind == cut {
		limit = int64(f.cutAfter)
	}
	n, err := stream(w, resp.Body, limit)
	switch {
	case limit >= 0 && n >= limit:
		p.note("%s: %d, cut after %d bytes (fault)", exchange, resp.StatusCode, n)
		panic(http.ErrAbortHandler)
	case err != nil:
		p.note("%s: %d, broken after %d bytes: %v", exchange, resp.StatusCode, n, err)
	default:
		p.note("%s: %d", exchange, resp.StatusCode)
	}
}

// stream copies body to w as it comes, flushing each piece, up to limit
// bytes (-1: all).
func stream(w http.ResponseWriter, body io.Reader, limit int64) (int64, error) {
	var n int64
	buf := make([]byte, 32<<10)
	for limit < 0 || n < limit {
		want := int64(len(buf))
		if limit >= 0 {
			want = min(want, limit-n)
		}
		k, err := body.Read(buf[:want])
		if k > 0 {
			if _, werr := w.Write(buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
			w.(http.Flusher).Flush()
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// cutWhileActing is both proxies' fault of a connection cut while the
// engine is still acting: it has the engine carry out the call (forward,
// which reads the engine's whole answer and says what it was) under a
// context that it cancels delay after the call came (as a client whose
// connection goes cancels what it asked), whatever the engine answered
// by then withheld; and says which came first, the cut or the answer.
func cutWhileActing(ctx context.Context, delay time.Duration, forward func(context.Context) (string, error)) string {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		status string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		status, err := forward(ctx)
		done <- result{status, err}
	}()
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		cancel()
		r := <-done
		if r.err != nil {
			return fmt.Sprintf("cut %v after it came, while the engine was still at it", delay)
		}
		return fmt.Sprintf("cut %v after it came, as the engine answered %s", delay, r.status)
	case r := <-done:
		<-timer.C
		if r.err != nil {
			return fmt.Sprintf("cut %v after it came, the engine having failed: %v", delay, r.err)
		}
		return fmt.Sprintf("cut %v after it came, the engine's answer (%s) withheld", delay, r.status)
	}
}
