// Package dockerapi is a small, hand-written client for the Docker Engine
// HTTP API over a unix socket. It negotiates the API version once, sends
// every request through one funnel, retries only what is safe to retry,
// and can trace every exchange the way curl -v shows it.
package dockerapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/waitdaemon/waitdaemon/internal/socketclient"
)

// DefaultSocket is the engine socket used when neither Client.Socket nor
// DOCKER_HOST names one.
const DefaultSocket = "/var/run/docker.sock"

// fakeHost is the host part of every request URL; the transport dials the
// socket whatever the URL says.
const fakeHost = "http://docker"

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// Client talks to one Docker engine. The zero value is ready to use: it
// reads DOCKER_HOST, falls back to DefaultSocket, and negotiates the API
// version on its first request.
type Client struct {
	// Socket is the path of the engine's unix socket. Empty means
	// DOCKER_HOST (unix:// only), then DefaultSocket.
	Socket string
	// Transport carries the requests. Nil means a unix-socket transport
	// dialling Socket. Tests inject their own.
	Transport http.RoundTripper
	// Version pins the API version ("1.41"). Empty means negotiate.
	Version string
	// Trace, when set, receives a curl -v style trace of every exchange.
	Trace io.Writer
	// WaitForEngine bounds how long requests are retried while the socket
	// is missing or refuses connections (an engine still starting).
	// Zero means DefaultWaitForEngine; negative means do not wait.
	WaitForEngine time.Duration
	// UserAgent is sent with every request. Empty means "waitdaemon".
	UserAgent string
	// RequestTimeout bounds each call that is not a stream (all but
	// wait, pull and logs), retries included, so that an engine that
	// hangs fails the call instead of the action. Zero means
	// DefaultRequestTimeout beyond the wait for the engine.
	RequestTimeout time.Duration

	once      sync.Once
	initErr   error
	http      *socketclient.Client
	negotiate sync.Mutex
	version   string
	pinged    *Ping // the engine's ping, once asked
}

// DefaultWaitForEngine is how long a Client waits for an engine that is not
// answering yet, unless WaitForEngine says otherwise.
const DefaultWaitForEngine = socketclient.DefaultWaitForEngine

// DefaultRequestTimeout is how long a call that is not a stream may take
// once the engine answers, unless RequestTimeout says otherwise.
const DefaultRequestTimeout = socketclient.DefaultRequestTimeout

// bounds are the client's time limits.
func (c *Client) bounds() socketclient.Bounds {
	return socketclient.Bounds{WaitForEngine: c.WaitForEngine, RequestTimeout: c.RequestTimeout}
}

// SocketFromEnv returns the socket path named by DOCKER_HOST, trimmed of
// surrounding spaces, or DefaultSocket when it is unset or empty. Only
// unix:// hosts are supported.
func SocketFromEnv() (string, error) {
	return ParseHost(strings.TrimSpace(os.Getenv("DOCKER_HOST")))
}

// ErrUnsupportedHost is a DOCKER_HOST that is not unix:///path.
var ErrUnsupportedHost = socketclient.ErrUnsupported

// ParseHost turns a DOCKER_HOST value into a socket path.
func ParseHost(host string) (string, error) {
	return socketclient.Address("DOCKER_HOST", host, DefaultSocket, "unix:///path/to/docker.sock", false)
}

func (c *Client) init() error {
	c.once.Do(func() {
		if c.Socket == "" {
			c.Socket, c.initErr = SocketFromEnv()
			if c.initErr != nil {
				return
			}
		}
		rt := c.Transport
		if rt == nil {
			rt = socketclient.UnixTransport(c.Socket, false)
		}
		if c.Trace != nil {
			rt = &tracer{next: rt, w: c.Trace}
		}
		c.http = socketclient.New(rt, c.bounds(), answer)
		if c.Version != "" {
			c.version = c.Version
		}
	})
	return c.initErr
}

// SocketPath returns the socket this client dials.
func (c *Client) SocketPath() string {
	_ = c.init()
	return c.Socket
}

// request is everything the funnel needs to make one call.
type request struct {
	method string
	path   string // without the version prefix
	query  url.Values
	body   any // marshalled as JSON when non-nil
	// tar, when set, is sent as it is, as the body, an application/x-tar
	// stream.
	tar    []byte
	header http.Header
	// ok lists the statuses that count as success; others become *Error.
	ok []int
	// again: the call is sent again after an attempt that may have
	// reached the engine, as one whose repeat means what the first
	// would have (reads, waits, logs, pulls). Any other call is sent
	// once; a lost answer is the engine layer's to settle.
	again bool
	// raw skips the version prefix (for _ping and paths that carry one).
	raw bool
	// stream exempts a call that waits on the engine's events (a
	// container wait) from RequestTimeout.
	stream bool
	// answered, when set, receives the answer's headers.
	answered *http.Header
}

// send is the request funnel: it negotiates, marshals, sends with retries,
// and turns unwanted statuses into *Error. On success the caller owns the
// response body.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	if err := c.init(); err != nil {
		return nil, err
	}
	path := r.path
	if !r.raw {
		v, err := c.APIVersion(ctx)
		if err != nil {
			return nil, err
		}
		path = "/v" + v + path
	}
	u := fakeHost + path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body []byte
	contentType := "application/json"
	if r.tar != nil {
		body, contentType = r.tar, "application/x-tar"
	} else if r.body != nil {
		var err error
		if body, err = json.Marshal(r.body); err != nil {
			return nil, fmt.Errorf("encoding %s %s: %w", r.method, r.path, err)
		}
	}
	var reader any
	if body != nil {
		reader = body
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, r.method, u, reader)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	ua := c.UserAgent
	if ua == "" {
		ua = "waitdaemon"
	}
	req.Header.Set("User-Agent", ua)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req, r.again)
	if err != nil {
		return nil, &TransportError{Method: r.method, Path: path, Socket: c.Socket, Err: socketclient.Unwrap(err)}
	}
	for _, s := range r.ok {
		if resp.StatusCode == s {
			return resp, nil
		}
	}
	defer resp.Body.Close()
	return nil, newError(resp, r.method, path)
}

// do sends r and decodes a JSON answer into out (when out is non-nil).
func (c *Client) do(ctx context.Context, r request, out any) error {
	if !r.stream {
		var cancel context.CancelFunc
		ctx, cancel = c.bounds().Bound(ctx)
		defer cancel()
	}
	resp, err := c.send(ctx, r)
	if err != nil {
		return socketclient.WithCause(ctx, err)
	}
	defer resp.Body.Close()
	if r.answered != nil {
		*r.answered = resp.Header
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		// An answer that breaks off is no answer.
		return socketclient.WithCause(ctx, &TransportError{Method: r.method, Path: r.path, Socket: c.Socket, Err: fmt.Errorf("reading the answer: %w", err)})
	}
	if err := json.Unmarshal(bytes.TrimSpace(data), out); err != nil {
		return fmt.Errorf("decoding %s %s: %w", r.method, r.path, err)
	}
	return nil
}

// Raw sends an arbitrary request, as the api subcommand does. A path that
// starts with /vX.Y is sent as it is; any other gets the negotiated prefix.
// A status of 400 or more is returned as *Error.
func (c *Client) Raw(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	u, err := url.Parse(path)
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", path, err)
	}
	if !strings.HasPrefix(u.Path, "/") {
		u.Path = "/" + u.Path
	}
	var payload any
	if len(body) > 0 {
		if !json.Valid(body) {
			return nil, fmt.Errorf("body %q: expected JSON", body)
		}
		payload = json.RawMessage(body)
	}
	ok := make([]int, 0, 300)
	for s := 100; s < 400; s++ {
		ok = append(ok, s)
	}
	method = strings.ToUpper(method)
	return c.send(ctx, request{
		method: method,
		path:   u.Path,
		query:  u.Query(),
		body:   payload,
		ok:     ok,
		again:  method == http.MethodGet || method == http.MethodHead,
		raw:    hasVersionPrefix(u.Path) || u.Path == "/_ping",
	})
}

// Ping is the answer to GET /_ping.
type Ping struct {
	APIVersion string
	OSType     string
	Server     string
	// Libpod: the engine is Podman's Docker-compatible API.
	Libpod bool
}

// Ping asks the engine for its API version. It is not version-prefixed.
func (c *Client) Ping(ctx context.Context) (Ping, error) {
	ctx, cancel := c.bounds().Bound(ctx) // the first contact: a hung engine fails it
	defer cancel()
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/_ping", ok: []int{200}, again: true, raw: true})
	if err != nil {
		return Ping{}, socketclient.WithCause(ctx, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return Ping{
		APIVersion: resp.Header.Get("Api-Version"),
		OSType:     resp.Header.Get("Ostype"),
		Server:     resp.Header.Get("Server"),
		Libpod:     resp.Header.Get("Libpod-Api-Version") != "",
	}, nil
}
