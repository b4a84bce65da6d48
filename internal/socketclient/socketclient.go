// Package socketclient is what the two engine clients, dockerapi and
// containerdapi, share: the engine's socket and the variable that names
// it, the unix transport, the retrying HTTP client with its bounds and
// backoff, waiting for an engine that is not up yet, and how many times
// what may be tried again is. Each client keeps only its own rule: what
// its answers mean (Rule), and which of its calls are safe to send again.
package socketclient

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// DefaultWaitForEngine is how long a client waits for an engine that is
// not answering yet, unless told otherwise.
const DefaultWaitForEngine = 10 * time.Second

// DefaultRequestTimeout is how long a call that does not wait on the
// engine's events may take once the engine answers, unless told
// otherwise.
const DefaultRequestTimeout = 30 * time.Second

// MaxRetries bounds the retries of anything but an engine not up yet.
const MaxRetries = 4

// ErrUnsupported is a socket address that is not a unix socket.
var ErrUnsupported = errors.New("only unix sockets are supported")

// Address is the socket path of value, the variable's value: unix:///path,
// or (bare) a plain /path too; empty means fallback. expected says what
// a good value looks like.
func Address(variable, value, fallback, expected string, bare bool) (string, error) {
	if value == "" {
		return fallback, nil
	}
	path, ok := strings.CutPrefix(value, "unix://")
	if !ok && bare {
		path, ok = value, true
	}
	if !ok || !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("%s=%q: expected %s (%w)", variable, value, expected, ErrUnsupported)
	}
	return path, nil
}

// UnixTransport dials socket whatever a request's URL says, never through
// a proxy, asks for no compression, and closes a connection left idle
// 30 s; h2c speaks HTTP/2 without TLS ("prior knowledge", as gRPC does),
// else HTTP/1.1.
func UnixTransport(socket string, h2c bool) *http.Transport {
	// No dial timeout: a unix socket's connect never waits (Go's
	// non-blocking connect answers at once, connected, refused or
	// EAGAIN); the call's context bounds the rest.
	var d net.Dialer
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "unix", socket)
	}
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           dial,
		MaxIdleConns:          4,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 0, // waits and pulls answer late; contexts bound them
		DisableCompression:    true,
	}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		t.Protocols = &p
	}
	return t
}

// Bounds are a client's time limits: WaitForEngine bounds how long calls
// are retried while the socket is missing or refuses connections (zero:
// DefaultWaitForEngine; negative: do not wait); RequestTimeout bounds
// each call that does not wait on the engine's events, retries included
// (zero: DefaultRequestTimeout beyond the wait for the engine).
type Bounds struct {
	WaitForEngine  time.Duration
	RequestTimeout time.Duration
}

// Wait is how long calls wait for an engine not up yet.
func (b Bounds) Wait() time.Duration {
	if b.WaitForEngine == 0 {
		return DefaultWaitForEngine
	}
	return max(b.WaitForEngine, 0)
}

// Request is the bound of one call that does not wait on events.
func (b Bounds) Request() time.Duration {
	if b.RequestTimeout > 0 {
		return b.RequestTimeout
	}
	return b.Wait() + DefaultRequestTimeout
}

// Bound is ctx within Request, the bound of one call that does not wait
// on events; its end names the bound.
func (b Bounds) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	limit := b.Request()
	return context.WithTimeoutCause(ctx, limit, fmt.Errorf("%w: no answer within %v", context.DeadlineExceeded, limit))
}

// Answer is what a client's Rule makes of an answer that came.
type Answer int

const (
	// Final: the engine's answer, not tried again.
	Final Answer = iota
	// MayHaveActed: the engine may have done the work (Docker's 503,
	// gRPC's UNAVAILABLE); tried again only if the call may be repeated.
	MayHaveActed
	// Busy: the engine did nothing and asks to be tried again (429).
	Busy
)

// Rule is a client's reading of the answers that came.
type Rule func(*http.Response) Answer

// Client is the retrying HTTP client of one engine client: the one retry
// policy of both, decided after each attempt from its answer alone:
//   - an engine that is not listening (socket missing, connection
//     refused) is waited for below it, by the transport (see New), since
//     the request never reached it;
//   - a connection that broke after the request may have reached the
//     engine, and an answer the rule says the engine may have acted on,
//     are retried, for calls that may be repeated (Do's again);
//   - an answer the rule calls busy is retried;
//   - nothing else is; and nothing more than MaxRetries times.
type Client struct {
	once, again *retryablehttp.Client
}

// New is the retrying client of one engine client, on rt, with a wait
// for an engine not listening of b.Wait() within each attempt.
func New(rt http.RoundTripper, b Bounds, rule Rule) *Client {
	hc := &http.Client{Transport: &waitForEngine{next: rt, wait: b.Wait()}}
	retrying := func(again bool) *retryablehttp.Client {
		return &retryablehttp.Client{
			HTTPClient:   hc,
			RetryWaitMin: 50 * time.Millisecond,
			RetryWaitMax: time.Second,
			RetryMax:     MaxRetries,
			CheckRetry:   policy(again, rule),
			Backoff:      cappedBackoff,
			ErrorHandler: retryablehttp.PassthroughErrorHandler,
		}
	}
	return &Client{once: retrying(false), again: retrying(true)}
}

// Do sends req; again says whether it may be sent again once an attempt
// may have reached the engine: a call whose repeat means what the first
// would have (a read, a wait, a pull). Any other call is sent once, and
// a lost answer is the engine layer's to settle.
func (c *Client) Do(req *retryablehttp.Request, again bool) (*http.Response, error) {
	if again {
		return c.again.Do(req)
	}
	return c.once.Do(req)
}

func policy(again bool, rule Rule) retryablehttp.CheckRetry {
	return func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if err != nil && EngineNotUp(err) {
			return false, nil // waited for below, as long as it may be
		}
		answer := MayHaveActed // the connection broke: the request may have reached it
		if err == nil {
			answer = rule(resp)
		}
		return answer == Busy || answer == MayHaveActed && again, nil
	}
}

// waitForEngine sends a request again while the engine is not listening
// (socket missing, connection refused: nothing was sent), pausing as
// Pause does, for up to wait from when it found it so: a call made an
// hour into a wait still waits in full for an engine restarting.
type waitForEngine struct {
	next http.RoundTripper
	wait time.Duration
}

func (w *waitForEngine) RoundTrip(req *http.Request) (*http.Response, error) {
	var down time.Time
	for try := 0; ; try++ {
		resp, err := w.next.RoundTrip(req)
		if err == nil || !EngineNotUp(err) || req.Body != nil && req.GetBody == nil {
			return resp, err
		}
		if down.IsZero() {
			down = time.Now()
		}
		if time.Since(down) >= w.wait {
			return nil, err
		}
		if perr := pause(req.Context(), try); perr != nil {
			return nil, fmt.Errorf("%w (%w)", err, perr)
		}
		if req, err = rewound(req); err != nil {
			return nil, err
		}
	}
}

// rewound is req to send again, its body from the start.
func rewound(req *http.Request) (*http.Request, error) {
	again := req.Clone(req.Context())
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		again.Body = body
	}
	return again, nil
}

// WithCause names why ctx ended, when it did, in an error it caused.
func WithCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("%w (%v)", err, cause)
	}
	return err
}

// Unwrap drops the *url.Error wrapper of a failed request, whose URL
// (the clients' fake host) says nothing useful.
func Unwrap(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// EngineNotUp reports a dial that failed because nothing listens on the
// socket yet: it does not exist, or refuses connections.
func EngineNotUp(err error) bool {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return false
	}
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// Sent reports whether the request of a call that failed with err may
// have reached the engine: it failed after its connection was made, not
// in the dial, when nothing was sent.
func Sent(err error) bool {
	var op *net.OpError
	return !errors.As(err, &op) || op.Op != "dial"
}

// pause waits before a request is sent again, the try-th time (from 0),
// as the client's own retries wait: 50 ms, doubling up to 1 s. It returns
// ctx's cause if ctx ends first.
func pause(ctx context.Context, try int) error {
	t := time.NewTimer(cappedBackoff(50*time.Millisecond, time.Second, try, nil))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// cappedBackoff is exponential backoff between min and max that honours
// an engine's Retry-After only up to max.
func cappedBackoff(min, max time.Duration, attempt int, resp *http.Response) time.Duration {
	return time.Duration(math.Min(float64(retryablehttp.DefaultBackoff(min, max, attempt, resp)), float64(max)))
}
