package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// callProxy stands on a socket of its own between an action and the
// engine, forwards every call as it comes (streams flow, gRPC's trailers
// pass), and notes when each began and ended: the timeline of where
// phase 1's time goes. It speaks HTTP/1.1 to Docker and Podman, and
// HTTP/2 without TLS (gRPC) to containerd.
type callProxy struct {
	sock string
	dir  string
	srv  *http.Server

	mu    sync.Mutex
	calls []call
}

// call is one call through the proxy: its name (method and path, IDs
// folded; or gRPC's Service/Method), when it arrived and when its answer
// was through.
type call struct {
	name       string
	pid        int32 // the caller's, on the host
	start, end time.Time
}

// peerKey is the context key of the calling process's pid.
type peerKey struct{}

// peerPID is the pid of the process at the other end of a unix socket.
func peerPID(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	_ = raw.Control(func(fd uintptr) {
		if cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED); err == nil {
			ctx = context.WithValue(ctx, peerKey{}, cred.Pid)
		}
	})
	return ctx
}

func newCallProxy(upstream string, grpc bool) (*callProxy, error) {
	dir, err := os.MkdirTemp("", "waitdaemon-bench-proxy-")
	if err != nil {
		return nil, err
	}
	p := &callProxy{dir: dir, sock: filepath.Join(dir, "engine.sock")}
	var protocols http.Protocols
	if grpc {
		protocols.SetUnencryptedHTTP2(true)
	} else {
		protocols.SetHTTP1(true)
	}
	up := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", upstream)
		},
		Protocols: &protocols,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "engine"
		},
		Transport:     p.timed(up),
		FlushInterval: -1,
	}
	l, err := net.Listen("unix", p.sock)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	rp.ErrorLog = log.New(io.Discard, "", 0) // calls cut short as a waiter ends
	p.srv = &http.Server{Handler: rp, Protocols: &protocols, ConnContext: peerPID}
	go p.srv.Serve(l)
	return p, nil
}

func (p *callProxy) close() {
	p.srv.Close()
	os.RemoveAll(p.dir)
}

// reset forgets the calls noted so far.
func (p *callProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = nil
}

// noted is the calls noted so far, in the order they began.
func (p *callProxy) noted() []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	calls := slices.Clone(p.calls)
	slices.SortStableFunc(calls, func(a, b call) int { return a.start.Compare(b.start) })
	return calls
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// timed notes each call's start, and its end once its answer's body has
// been read to the end or closed.
func (p *callProxy) timed(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		pid, _ := r.Context().Value(peerKey{}).(int32)
		c := call{name: callName(r), pid: pid, start: time.Now()}
		resp, err := next.RoundTrip(r)
		if err != nil {
			c.end = time.Now()
			p.note(c)
			return nil, err
		}
		resp.Body = &endBody{ReadCloser: resp.Body, done: func() { c.end = time.Now(); p.note(c) }}
		return resp, nil
	})
}

func (p *callProxy) note(c call) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, c)
}

// endBody calls done once, at its end or its close.
type endBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *endBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	if err != nil {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *endBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}

// ids are what callName folds: engine IDs, and the random part of a
// bench action's name.
var ids = regexp.MustCompile(`tinkerbell_bench-[a-z0-9-]+_01JBENCH[0-9A-F]+|[0-9a-f]{12,64}|/v1\.[0-9]+`)

// callName names a call: gRPC's Service/Method, or an HTTP method and
// path without the API version, IDs folded.
func callName(r *http.Request) string {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		service, method, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		return service[strings.LastIndex(service, ".")+1:] + "/" + method
	}
	return r.Method + " " + ids.ReplaceAllStringFunc(r.URL.Path, func(s string) string {
		if strings.HasPrefix(s, "/v1.") {
			return ""
		}
		return "…"
	})
}

// printTimeline prints one run's calls on a timeline from the action's
// start (the engine's record) to its exit, with a bar for each.
func printTimeline(title string, began, exited time.Time, calls []call) {
	const width = 48
	total := exited.Sub(began)
	col := func(t time.Time) int {
		return min(width, max(0, int(float64(width)*float64(t.Sub(began))/float64(total))))
	}
	fmt.Printf("\n%s: one run's calls, in ms from the action's start (the engine's record) to its exit at %d ms; each █ is %.0f ms\n\n",
		title, total.Milliseconds(), float64(total.Milliseconds())/width)
	fmt.Printf("| call | by | start | end | took | |\n|---|---|---|---|---|---|\n")
	for _, c := range calls {
		by := "waiter"
		if c.pid == calls[0].pid { // the first caller is the action
			by = "action"
		}
		if c.start.After(exited) {
			continue // the waiter's, once the action is gone
		}
		from, to := col(c.start), col(c.end)
		bar := strings.Repeat("·", from) + strings.Repeat("█", max(1, to-from))
		fmt.Printf("| %s | %s | %d | %d | %.1f | `%s` |\n", c.name, by, c.start.Sub(began).Milliseconds(), c.end.Sub(began).Milliseconds(),
			ms(c.end.Sub(c.start)), bar)
	}
	fmt.Printf("| (the action exits) | | %d | | | |\n", total.Milliseconds())
}

// phase1Run is one action's phase 1 through a callProxy: the engine's
// record of its start and exit, and the calls it made.
type phase1Run struct {
	began, exited time.Time
	calls         []call
}

// medianRun is the run whose phase 1 took the median time.
func medianRun(runs []phase1Run) phase1Run {
	s := slices.Clone(runs)
	slices.SortFunc(s, func(a, b phase1Run) int { return cmp.Compare(a.exited.Sub(a.began), b.exited.Sub(b.began)) })
	return s[len(s)/2]
}
