// Package containerdapi is a small, hand-written client for containerd's
// gRPC API over its unix socket: the calls waitdaemon needs to run a
// container on containerd 2.x, and nothing else.
//
// Its contract:
//   - It speaks gRPC with the standard library alone: HTTP/2 without TLS
//     (net/http's unencrypted HTTP/2), gRPC framing written by hand, and
//     messages encoded with protowire from hand-written structs. It never
//     imports google.golang.org/grpc nor containerd's own client.
//   - Every unary call goes through one funnel, and every stream through
//     one stream path, which send the namespace (Client.Namespace) and the
//     lease (WithLease) as metadata, read the status from the trailers (or
//     from the headers of a trailers-only answer), and turn a status that
//     is not OK into an *Error: errors.Is(err, ErrNotFound) and its kin
//     work. A call that got no answer fails with a *TransportError.
//   - Retries follow the Docker client's rules: a socket that is missing
//     or refusing (a daemon starting) is waited for up to WaitForEngine;
//     UNAVAILABLE and broken connections are retried a few times for the
//     calls that are safe to repeat. The creates (Containers, Leases,
//     Snapshots/Prepare, Tasks) and Tasks/Start are sent once: a lost
//     answer fails with an error whose Lost method answers true, and the
//     caller settles it (engine/containerd does).
//   - With Trace set, every call is written out: the method, the metadata,
//     each message decoded field by field, and the status. Registry
//     secrets and secret-looking environment values are redacted.
//
// Images are pulled by the daemon (Transfer), with credentials given only
// when the daemon asks for a host, through a callback (see Pull).
package containerdapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/waitdaemon/waitdaemon/internal/socketclient"
)

// DefaultSocket is the daemon's socket used when neither Client.Socket nor
// CONTAINERD_ADDRESS names one.
const DefaultSocket = "/run/containerd/containerd.sock"

// DefaultNamespace is the containerd namespace used when Client.Namespace
// is empty: Tinkerbell's.
const DefaultNamespace = "tinkerbell"

// fakeHost is the authority of every request; the transport dials the
// socket whatever it says.
const fakeHost = "http://containerd"

// maxMessage bounds one received message.
const maxMessage = 64 << 20

// Client talks to one containerd daemon. The zero value is ready to use:
// it reads CONTAINERD_ADDRESS, falls back to DefaultSocket, and works in
// DefaultNamespace. A Client is safe for concurrent use once its fields
// are set.
type Client struct {
	// Socket is the path of the daemon's unix socket. Empty means
	// CONTAINERD_ADDRESS, then DefaultSocket.
	Socket string
	// Namespace is the containerd namespace of every call. Empty means
	// DefaultNamespace.
	Namespace string
	// Transport carries the requests. Nil means an HTTP/2 (h2c) transport
	// dialling Socket. Tests inject their own.
	Transport http.RoundTripper
	// Trace, when set, receives every call: method, metadata, messages
	// (decoded) and status.
	Trace io.Writer
	// UserAgent is sent with every call. Empty means "waitdaemon".
	UserAgent string
	// WaitForEngine bounds how long calls are retried while the socket is
	// missing or refuses connections (a daemon still starting). Zero means
	// DefaultWaitForEngine; negative means do not wait.
	WaitForEngine time.Duration
	// RequestTimeout bounds each unary call that does not wait on the
	// daemon's events (all but Tasks/Wait and Pull), retries included.
	// Zero means DefaultRequestTimeout beyond the wait for the engine.
	RequestTimeout time.Duration

	once    sync.Once
	initErr error
	http    *socketclient.Client
	traceMu sync.Mutex
	// traceLast is the last message traced on each method, in each
	// direction, for the trace to name a repeat rather than print it.
	traceLast map[string]string
	// newID names streams and leases, now dates leases; tests make both
	// deterministic.
	newID func() string
	now   func() time.Time
}

// DefaultWaitForEngine is how long a Client waits for a daemon that is
// not answering yet, unless WaitForEngine says otherwise.
const DefaultWaitForEngine = socketclient.DefaultWaitForEngine

// DefaultRequestTimeout is how long a unary call may take once the daemon
// answers, unless RequestTimeout says otherwise.
const DefaultRequestTimeout = socketclient.DefaultRequestTimeout

// SocketFromEnv returns the socket named by CONTAINERD_ADDRESS, trimmed of
// surrounding spaces, or DefaultSocket when it is unset or empty.
func SocketFromEnv() (string, error) {
	return ParseAddress(strings.TrimSpace(os.Getenv("CONTAINERD_ADDRESS")))
}

// ErrUnsupportedAddress is a CONTAINERD_ADDRESS that is not a unix socket.
var ErrUnsupportedAddress = socketclient.ErrUnsupported

// ParseAddress turns a CONTAINERD_ADDRESS value (a path, or
// unix:///path) into a socket path. Empty means DefaultSocket.
func ParseAddress(addr string) (string, error) {
	return socketclient.Address("CONTAINERD_ADDRESS", addr, DefaultSocket, "/path/to/containerd.sock or unix:///path", true)
}

func (c *Client) init() error {
	c.once.Do(func() {
		if c.Socket == "" {
			if c.Socket, c.initErr = SocketFromEnv(); c.initErr != nil {
				return
			}
		}
		if c.Namespace == "" {
			c.Namespace = DefaultNamespace
		}
		if c.newID == nil {
			c.newID = randomID
		}
		if c.now == nil {
			c.now = time.Now
		}
		rt := c.Transport
		if rt == nil {
			rt = socketclient.UnixTransport(c.Socket, true)
		}
		c.http = socketclient.New(rt, c.bounds(), answer)
	})
	return c.initErr
}

// bounds are the client's time limits.
// RequestTime is the bound of one call that does not wait on events.
func (c *Client) RequestTime() time.Duration { return c.bounds().Request() }

func (c *Client) bounds() socketclient.Bounds {
	return socketclient.Bounds{WaitForEngine: c.WaitForEngine, RequestTimeout: c.RequestTimeout}
}

// SocketPath returns the socket this client dials.
func (c *Client) SocketPath() string {
	_ = c.init()
	return c.Socket
}

type leaseKey struct{}

// WithLease makes every call made with the returned context carry the
// lease id (the containerd-lease header): what it creates is kept from the
// garbage collector until the lease is deleted.
func WithLease(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, leaseKey{}, id)
}

// leaseOf is the lease a call made with ctx carries, if any.
func leaseOf(ctx context.Context) string {
	id, _ := ctx.Value(leaseKey{}).(string)
	return id
}

// rpc is one method of the daemon's API: its full name, the messages it
// takes and answers (for the trace, the fixtures and the funnel), and
// whether it is safe to repeat after an attempt that may have reached
// the daemon.
type rpc struct {
	name string // "containerd.services.containers.v1.Containers/Get"
	// req and resp are zero messages of the request's and the answer's
	// types, for the fixtures' codec.
	req, resp  message
	idempotent bool
}

// rpcs holds every rpc by name, for the fixtures' codec.
var rpcs = map[string]*rpc{}

func newRPC(name string, req, resp message, idempotent bool) *rpc {
	r := &rpc{name: name, req: req, resp: resp, idempotent: idempotent}
	rpcs[name] = r
	return r
}

// callOptions adjust one call.
type callOptions struct {
	// long exempts a call that waits on the daemon (Tasks/Wait, a pull)
	// from RequestTimeout.
	long bool
}

// call is the funnel of unary calls: it frames in, sends it with the
// metadata and retries, reads the answer and its status, and decodes it
// into out.
func (c *Client) call(ctx context.Context, r *rpc, in, out message, opts callOptions) error {
	if err := c.init(); err != nil {
		return err
	}
	if !opts.long {
		var cancel context.CancelFunc
		ctx, cancel = c.bounds().Bound(ctx)
		defer cancel()
	}
	c.traceRequest(ctx, r, in)
	body := frame(marshal(in))
	resp, err := c.send(ctx, r, body)
	if err != nil {
		c.traceEnd(r, err)
		return socketclient.WithCause(ctx, err)
	}
	defer resp.Body.Close()
	if err := statusOf(r, resp, true); err != nil {
		c.traceEnd(r, err)
		return err
	}
	fr := frameReader{r: resp.Body}
	got := false
	for {
		msg, err := fr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			err = &TransportError{Method: r.name, Socket: c.Socket, Err: fmt.Errorf("reading the answer: %w", err)}
			c.traceEnd(r, err)
			return socketclient.WithCause(ctx, err)
		}
		if got {
			continue // a unary call has one answer; more is not ours to read
		}
		got = true
		if err := unmarshal(msg, out); err != nil {
			err = fmt.Errorf("decoding the answer of %s: %w", r.name, err)
			c.traceEnd(r, err)
			return err
		}
		c.traceMessage("<", r, out)
	}
	err = statusOf(r, resp, false)
	if err == nil && !got {
		err = &Error{Code: Internal, Method: r.name, Message: "the daemon answered OK without a message"}
	}
	c.traceEnd(r, err)
	return err
}

// send makes one HTTP/2 request for r, with retries, and returns the
// response once its headers are in. body is a []byte (unary, server
// streams) or a retryablehttp.ReaderFunc (a client stream).
func (c *Client) send(ctx context.Context, r *rpc, body any) (*http.Response, error) {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, fakeHost+"/"+r.name, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.name, err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	req.Header.Set("Containerd-Namespace", c.Namespace)
	if lease := leaseOf(ctx); lease != "" {
		req.Header.Set("Containerd-Lease", lease)
	}
	ua := c.UserAgent
	if ua == "" {
		ua = "waitdaemon"
	}
	req.Header.Set("User-Agent", ua)
	if _, ok := body.([]byte); !ok {
		// A stream's length is unknown: HTTP/2 sends it as it comes.
		req.ContentLength = -1
	}
	resp, err := c.http.Do(req, r.idempotent)
	if err != nil {
		return nil, &TransportError{Method: r.name, Socket: c.Socket, Err: socketclient.Unwrap(err)}
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, &Error{Code: Unknown, Method: r.name, Message: fmt.Sprintf("HTTP %s: %s", resp.Status, bytes.TrimSpace(data))}
	}
	return resp, nil
}

// statusOf reads the call's status: from the headers of a trailers-only
// answer (headersOnly), else from the trailers, once the body is read.
// It returns nil for OK, and for a headers check that finds no status.
func statusOf(r *rpc, resp *http.Response, headersOnly bool) error {
	h := resp.Trailer
	if headersOnly {
		h = resp.Header
	}
	s := h.Get("Grpc-Status")
	if s == "" {
		if headersOnly {
			return nil
		}
		if s = resp.Header.Get("Grpc-Status"); s == "" {
			return &Error{Code: Unknown, Method: r.name, Message: "the answer ended without a status"}
		}
		h = resp.Header
	}
	code, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return &Error{Code: Unknown, Method: r.name, Message: fmt.Sprintf("grpc-status %q", s)}
	}
	if code == 0 {
		return nil
	}
	return &Error{Code: Code(code), Method: r.name, Message: decodeMessage(h.Get("Grpc-Message"))}
}

// decodeMessage undoes grpc-message's percent-encoding.
func decodeMessage(m string) string {
	if d, err := url.PathUnescape(m); err == nil {
		return d
	}
	return m
}

// frame prefixes msg with gRPC's 5-byte header: not compressed, length.
func frame(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// frameReader reads gRPC frames from a body.
type frameReader struct {
	r   io.Reader
	hdr [5]byte
}

// next returns the next message, or io.EOF at the end of the body.
func (f *frameReader) next() ([]byte, error) {
	if _, err := io.ReadFull(f.r, f.hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("a frame header broke off: %w", err)
		}
		return nil, err
	}
	if f.hdr[0] != 0 {
		return nil, fmt.Errorf("compressed message (flag %d): not asked for", f.hdr[0])
	}
	n := binary.BigEndian.Uint32(f.hdr[1:])
	if n > maxMessage {
		return nil, fmt.Errorf("message of %d bytes is larger than %d", n, maxMessage)
	}
	// The buffer grows as the bytes arrive: a header alone does not get
	// the size it declares.
	var msg bytes.Buffer
	msg.Grow(int(min(n, frameChunk)))
	if _, err := io.CopyN(&msg, f.r, int64(n)); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("a message broke off: %w", err)
	}
	return msg.Bytes(), nil
}

// frameChunk is what a message's buffer starts with, at most.
const frameChunk = 32 << 10
