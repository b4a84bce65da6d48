package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/waitdaemon/waitdaemon/containerdapi"
)

// grpcFaultProxy stands between waitdaemon and the test containerd, as
// faultProxy does for Docker, and breaks the calls its faults pick. It
// speaks gRPC's HTTP/2 without TLS on both sides, and forwards headers,
// messages and trailers as they come, so that streams flow. Its socket,
// containerd.sock, lives in a directory of its own under /tmp, which an
// action binds at /run/containerd (cdAction.socket; the waiter then binds
// it too), so that the socket can be absent at first.
type grpcFaultProxy struct {
	t    *testing.T
	dir  string
	sock string
	up   *http.Transport // the test containerd

	// The faults, and what the proxy saw: "Service/Method subject: what
	// happened", in order.
	ledger[*grpcFault]

	mu  sync.Mutex
	srv *http.Server
}

// What a fault does to a matching call.
type grpcFaultKind int

const (
	// unavailable answers trailers-only with UNAVAILABLE, never
	// forwarding: a daemon that cannot serve the call now.
	unavailable grpcFaultKind = iota
	// resetUnsent resets the stream without forwarding: the call broke
	// on its way, and the daemon never had it.
	resetUnsent
	// lostAnswer forwards the call, lets the daemon finish it, reads its
	// whole answer, then resets the stream: the daemon did the work, and
	// the client never hears so.
	lostAnswer
	// cutInFlight forwards the call, and delay later resets the stream on
	// both sides (containerd's call cancelled, as a client's broken
	// connection cancels it), whatever containerd answered by then
	// withheld: the connection cut while the daemon is still acting.
	cutInFlight
)

// grpcFault breaks the first times calls (0: all) of method (such as
// "Containers/Create") whose subject matches; or, with call set, the one
// call that is call.nth of those that norm names call.key.
type grpcFault struct {
	method  string
	subject *regexp.Regexp // nil: any
	call    sweepCall
	times   int
	kind    grpcFaultKind
	delay   time.Duration // cutInFlight's
	hits    int
}

// newGRPCFaultProxy makes a proxy to the test containerd whose own socket
// does not exist until listen.
func newGRPCFaultProxy(t *testing.T) *grpcFaultProxy {
	t.Helper()
	dir, err := os.MkdirTemp("", "grpcfaultproxy")
	if err != nil {
		t.Fatal(err)
	}
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	p := &grpcFaultProxy{
		t: t, dir: dir, sock: filepath.Join(dir, filepath.Base(containerdapi.DefaultSocket)),
		up: &http.Transport{
			Protocols: &h2c,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", containerdSocket)
			},
			DisableCompression: true,
		},
	}
	t.Cleanup(func() {
		// Every failure is judged against what the proxy saw.
		if t.Failed() || testing.Verbose() {
			t.Logf("the proxy saw:\n%s", p.log())
		}
		p.mu.Lock()
		srv := p.srv
		p.mu.Unlock()
		if srv != nil {
			srv.Close()
		}
		p.up.CloseIdleConnections()
		os.RemoveAll(dir)
	})
	return p
}

func (f *grpcFault) pick() (sweepCall, int, *int) { return f.call, f.times, &f.hits }

// listen makes the socket and serves it.
func (p *grpcFaultProxy) listen() {
	ln, err := net.Listen("unix", p.sock)
	if err != nil {
		// listen may run on a timer, off the test's goroutine.
		p.t.Errorf("the proxy cannot listen: %v", err)
		return
	}
	srv := &http.Server{Handler: p, Protocols: new(http.Protocols)}
	srv.Protocols.SetUnencryptedHTTP2(true)
	p.mu.Lock()
	p.srv = srv
	p.mu.Unlock()
	p.note("-- listening")
	go func() { _ = srv.Serve(ln) }()
}

func (p *grpcFaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// "/containerd.services.containers.v1.Containers/Create" →
	// "Containers/Create".
	full := strings.TrimPrefix(r.URL.Path, "/")
	service, name, _ := strings.Cut(full, "/")
	method := service[strings.LastIndex(service, ".")+1:] + "/" + name
	var body io.Reader = r.Body
	subject := ""
	if r.ContentLength >= 0 {
		// A unary call or a server stream: one message, read whole to
		// name what it is about. A bidirectional stream (no length)
		// flows as it comes.
		msg, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		if err != nil {
			p.note("%s: the request broke: %v", method, err)
			panic(http.ErrAbortHandler)
		}
		subject = callSubject(method, msg)
		body = bytes.NewReader(msg)
	}
	call := strings.TrimSpace(method + " " + subject)
	f, _ := p.match(strings.TrimSpace(method+" "+subject), func(f *grpcFault) bool {
		return f.method == method && (f.subject == nil || f.subject.MatchString(subject))
	})
	if f != nil && f.kind == unavailable {
		p.note("%s: Unavailable (fault)", call)
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Status", strconv.Itoa(int(containerdapi.Unavailable)))
		w.Header().Set("Grpc-Message", "fault%20injected")
		w.WriteHeader(http.StatusOK)
		return
	}
	if f != nil && f.kind == resetUnsent {
		p.note("%s: hung up (fault)", call)
		panic(http.ErrAbortHandler)
	}
	if f != nil && f.kind == cutInFlight {
		p.note("%s: %s (fault)", call, cutWhileActing(r.Context(), f.delay, func(ctx context.Context) (string, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://containerd/"+full, body)
			if err != nil {
				return "", err
			}
			req.Header = r.Header.Clone()
			req.ContentLength = r.ContentLength
			resp, err := p.up.RoundTrip(req)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				return "", err
			}
			return grpcStatus(resp), nil
		}))
		panic(http.ErrAbortHandler)
	}
	ctx := r.Context()
	if f != nil && f.kind == lostAnswer {
		ctx = context.WithoutCancel(ctx) // the daemon finishes what it was asked
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://containerd/"+full, body)
	if err != nil {
		p.note("%s: %v", call, err)
		panic(http.ErrAbortHandler)
	}
	req.Header = r.Header.Clone()
	req.ContentLength = r.ContentLength
	resp, err := p.up.RoundTrip(req)
	if err != nil {
		p.note("%s: no answer from containerd: %v", call, err)
		panic(http.ErrAbortHandler)
	}
	defer resp.Body.Close()
	if f != nil && f.kind == lostAnswer {
		_, _ = io.Copy(io.Discard, resp.Body)
		p.note("%s: %s from containerd, answer lost (fault)", call, grpcStatus(resp))
		panic(http.ErrAbortHandler)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	w.(http.Flusher).Flush() // a stream's headers come before its first message
	if _, err := stream(w, resp.Body, -1); err != nil {
		p.note("%s: broken after the headers: %v", call, err)
		panic(http.ErrAbortHandler)
	}
	for k, vs := range resp.Trailer {
		w.Header()[http.TrailerPrefix+k] = vs
	}
	p.note("%s: %s", call, grpcStatus(resp))
}

// grpcStatus names the status of an answer read to its end: from the
// trailers, or from the headers of a trailers-only answer.
func grpcStatus(resp *http.Response) string {
	s := resp.Trailer.Get("Grpc-Status")
	if s == "" {
		s = resp.Header.Get("Grpc-Status")
	}
	code, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return fmt.Sprintf("HTTP %d, grpc-status %q", resp.StatusCode, s)
	}
	return containerdapi.Code(code).String()
}

// callSubject names what a call's one framed message is about, for the
// log and the faults: the container of a Containers or Tasks call, the
// reference of a pull; "" for the rest.
func callSubject(method string, framed []byte) string {
	if len(framed) < 5 || int(binary.BigEndian.Uint32(framed[1:5])) != len(framed)-5 {
		return ""
	}
	msg := framed[5:]
	switch {
	case method == "Containers/Create" || method == "Containers/Update":
		return string(protoField(protoField(msg, 1), 1)) // {container {id}}
	case strings.HasPrefix(method, "Containers/") || strings.HasPrefix(method, "Tasks/"):
		return string(protoField(msg, 1)) // {id} or {container_id}
	case strings.HasPrefix(method, "Snapshots/"):
		return string(protoField(msg, 2)) // {snapshotter, key}
	case strings.HasPrefix(method, "Leases/"):
		return string(protoField(msg, 1)) // {id}
	case method == "Transfer/Transfer":
		return string(protoField(protoField(protoField(msg, 1), 2), 1)) // {source Any {value {reference}}}
	}
	return ""
}

// protoField is the first length-delimited field num of msg, nil if there
// is none.
func protoField(msg []byte, num protowire.Number) []byte {
	for len(msg) > 0 {
		n, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return nil
		}
		msg = msg[l:]
		if typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(msg)
			if l < 0 {
				return nil
			}
			if n == num {
				return v
			}
			msg = msg[l:]
			continue
		}
		if l = protowire.ConsumeFieldValue(n, typ, msg); l < 0 {
			return nil
		}
		msg = msg[l:]
	}
	return nil
}

// waitAnswers waits until the test containerd answers on its socket,
// within limit.
func waitAnswers(c *containerdapi.Client, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		_, err := c.Version(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
