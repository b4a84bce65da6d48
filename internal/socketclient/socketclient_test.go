package socketclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// docker reads answers as Docker's client does.
func docker(resp *http.Response) Answer {
	switch resp.StatusCode {
	case 503:
		return MayHaveActed
	case 429:
		return Busy
	}
	return Final
}

// TestRetryPolicy: what is sent again, from the answer alone: a broken
// connection or an answer that may have acted only for a call that may be
// repeated; a busy answer always; an engine not listening never (it is
// waited for below); nothing else.
func TestRetryPolicy(t *testing.T) {
	dialErr := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", errno)}
	}
	resp := func(status int) *http.Response { return &http.Response{StatusCode: status} }
	cases := []struct {
		name  string
		again bool
		resp  *http.Response
		err   error
		want  bool
	}{
		{name: "missing socket", again: true, err: dialErr(syscall.ENOENT)},
		{name: "refused", again: true, err: dialErr(syscall.ECONNREFUSED)},
		{name: "reset, again", again: true, err: io.ErrUnexpectedEOF, want: true},
		{name: "reset, once", err: io.EOF},
		{name: "503, again", again: true, resp: resp(503), want: true},
		{name: "503, once", resp: resp(503)},
		{name: "429", resp: resp(429), want: true},
		{name: "500", again: true, resp: resp(500)},
		{name: "502", again: true, resp: resp(502)},
		{name: "404", again: true, resp: resp(404)},
		{name: "200", again: true, resp: resp(200)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := policy(tc.again, docker)(context.Background(), tc.resp, tc.err)
			if got != tc.want || err != nil {
				t.Errorf("retry = %v, %v; want %v, nil", got, err, tc.want)
			}
		})
	}
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		got, err := policy(true, docker)(ctx, resp(503), nil)
		if got || !errors.Is(err, context.Canceled) {
			t.Errorf("retry = %v, %v; want false, context.Canceled", got, err)
		}
	})
}

// dialFails is a transport that fails its first n dials as a missing
// socket does, then answers 200 with the body it was sent, and keeps the
// times of its attempts.
type dialFails struct {
	n  int
	at []time.Time
}

func (d *dialFails) RoundTrip(r *http.Request) (*http.Response, error) {
	d.at = append(d.at, time.Now())
	if r.Body != nil {
		defer r.Body.Close()
	}
	if len(d.at) <= d.n {
		if r.Body != nil {
			_, _ = io.ReadFull(r.Body, make([]byte, 4)) // a transport may read some of a body it then fails
		}
		return nil, &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.ENOENT)}
	}
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(string(body))), Request: r}, nil
}

// TestWaitForEngine: a request that finds no engine listening is sent
// again, its body whole, after a pause each, for up to the wait from
// when it found it so; with no wait, not at all; a context that ends
// meanwhile ends it, saying so.
func TestWaitForEngine(t *testing.T) {
	t.Run("up in time", func(t *testing.T) {
		d := &dialFails{n: 3}
		body := "the body"
		req, _ := http.NewRequest("POST", "http://engine/x", strings.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
		resp, err := (&waitForEngine{next: d, wait: 10 * time.Second}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		if len(d.at) != 4 || string(got) != "the body" {
			t.Errorf("%d attempts, body %q; want 4, the body whole", len(d.at), got)
		}
		if d.at[1].Sub(d.at[0]) < 50*time.Millisecond || d.at[3].Sub(d.at[2]) < 200*time.Millisecond {
			t.Errorf("attempts at %v; want pauses of 50, 100, 200 ms at least", d.at)
		}
	})
	t.Run("not up in time", func(t *testing.T) {
		d := &dialFails{n: 99}
		req, _ := http.NewRequest("GET", "http://engine/x", nil)
		began := time.Now()
		_, err := (&waitForEngine{next: d, wait: 300 * time.Millisecond}).RoundTrip(req)
		if !EngineNotUp(err) || time.Since(began) < 300*time.Millisecond || len(d.at) < 3 {
			t.Errorf("error %v after %v and %d attempts; want the engine not up after the wait", err, time.Since(began), len(d.at))
		}
	})
	t.Run("no wait", func(t *testing.T) {
		d := &dialFails{n: 1}
		req, _ := http.NewRequest("GET", "http://engine/x", nil)
		if _, err := (&waitForEngine{next: d, wait: 0}).RoundTrip(req); !EngineNotUp(err) || len(d.at) != 1 {
			t.Errorf("error %v after %d attempts; want the engine not up at once", err, len(d.at))
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		d := &dialFails{n: 99}
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(100*time.Millisecond, func() { cancel(errors.New("the action ended")) })
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://engine/x", nil)
		_, err := (&waitForEngine{next: d, wait: time.Minute}).RoundTrip(req)
		if !EngineNotUp(err) || !strings.Contains(fmt.Sprint(err), "the action ended") {
			t.Errorf("error %v; want the engine not up, and why the wait ended", err)
		}
	})
}

// TestBounds: a call's bound is RequestTimeout, else the wait for the
// engine (its default when unset, none when negative) and 30 s more.
func TestBounds(t *testing.T) {
	cases := []struct {
		request, wait, want, wantWait time.Duration
	}{
		{time.Second, time.Minute, time.Second, time.Minute},
		{0, 0, DefaultWaitForEngine + DefaultRequestTimeout, DefaultWaitForEngine},
		{0, 5 * time.Second, 5*time.Second + DefaultRequestTimeout, 5 * time.Second},
		{0, -1, DefaultRequestTimeout, 0},
	}
	for _, tc := range cases {
		b := Bounds{RequestTimeout: tc.request, WaitForEngine: tc.wait}
		if got, wait := b.Request(), b.Wait(); got != tc.want || wait != tc.wantWait {
			t.Errorf("%+v: Request() = %v, Wait() = %v; want %v, %v", b, got, wait, tc.want, tc.wantWait)
		}
	}
}

func TestAddress(t *testing.T) {
	cases := []struct {
		value     string
		bare      bool
		want      string
		wantError bool
	}{
		{"", false, "/fallback.sock", false},
		{"unix:///run/docker.sock", false, "/run/docker.sock", false},
		{"/run/docker.sock", false, "", true},
		{"/run/containerd.sock", true, "/run/containerd.sock", false},
		{"unix:///run/containerd.sock", true, "/run/containerd.sock", false},
		{"tcp://10.0.0.1:2375", false, "", true},
		{"tcp://10.0.0.1:2375", true, "", true},
		{"unix://", false, "", true},
		{"unix://relative.sock", true, "", true},
		{"relative.sock", true, "", true},
	}
	for _, tc := range cases {
		got, err := Address("X_HOST", tc.value, "/fallback.sock", "unix:///path", tc.bare)
		if got != tc.want || (err != nil) != tc.wantError {
			t.Errorf("Address(%q, bare %v) = %q, %v; want %q, error %v", tc.value, tc.bare, got, err, tc.want, tc.wantError)
		}
		if err != nil && (!errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `X_HOST="`+tc.value+`": expected unix:///path`)) {
			t.Errorf("Address(%q) error %q: want it to name the variable, its value and what is expected", tc.value, err)
		}
	}
}

// TestUnwrap: a failed request's error loses the *url.Error wrapper and
// its fake URL; any other error stays as it is.
func TestUnwrap(t *testing.T) {
	inner := errors.New("connection reset by peer")
	if got := Unwrap(&url.Error{Op: "Post", URL: "http://docker/v1.41/containers/create", Err: inner}); got != inner {
		t.Errorf("Unwrap(url.Error) = %v, want %v", got, inner)
	}
	if got := Unwrap(inner); got != inner {
		t.Errorf("Unwrap(%v) = %v, want it as it is", inner, got)
	}
}

// serve answers on a unix socket of its own with h, over HTTP/1.1 or
// HTTP/2 without TLS, and returns the socket.
func serve(t *testing.T, h2c bool, h http.HandlerFunc) string {
	t.Helper()
	sock := t.TempDir() + "/engine.sock"
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var p http.Protocols
	p.SetHTTP1(!h2c)
	p.SetUnencryptedHTTP2(h2c)
	srv := &http.Server{Handler: h, Protocols: &p}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// TestUnixTransport: the transport dials its socket whatever the URL
// names, in the protocol asked for, asks for no compression, and closes
// a connection left idle 30 s.
func TestUnixTransport(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://proxy.invalid:3128")
	for _, h2c := range []bool{false, true} {
		sock := serve(t, h2c, func(w http.ResponseWriter, r *http.Request) {
			if ae := r.Header.Get("Accept-Encoding"); ae != "" {
				t.Errorf("h2c %v: Accept-Encoding %q sent, want none", h2c, ae)
			}
			w.Write([]byte(r.Proto))
		})
		tr := UnixTransport(sock, h2c)
		if tr.IdleConnTimeout != 30*time.Second {
			t.Errorf("h2c %v: idle connections closed after %v, want 30s", h2c, tr.IdleConnTimeout)
		}
		resp, err := (&http.Client{Transport: tr}).Get("http://elsewhere.example/x")
		if err != nil {
			t.Fatalf("h2c %v: %v", h2c, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2c]
		if string(body) != want || resp.Proto != want {
			t.Errorf("h2c %v: the engine saw %s, the client %s; want %s", h2c, body, resp.Proto, want)
		}
	}
}

// TestNew: the client New makes sends again what the rule says may be
// sent again, as many times as MaxRetries allows, and reads the rule
// for each answer.
func TestNew(t *testing.T) {
	cases := []struct {
		name       string
		status     int // answered to every attempt but the last
		repeatable bool
		fails      int // attempts answered status before a 200
		wantTries  int
		wantStatus int
	}{
		{"may have acted, repeatable", 503, true, 2, 3, 200},
		{"may have acted, not repeatable", 503, false, 2, 1, 503},
		{"busy, not repeatable", 429, false, 1, 2, 200},
		{"busy on and on", 429, false, 99, 1 + MaxRetries, 429},
		{"final", 500, true, 1, 1, 500},
	}
	rule := func(resp *http.Response) Answer {
		return map[int]Answer{503: MayHaveActed, 429: Busy}[resp.StatusCode]
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			sock := serve(t, false, func(w http.ResponseWriter, r *http.Request) {
				if tries++; tries <= tc.fails {
					w.WriteHeader(tc.status)
				}
			})
			c := New(UnixTransport(sock, false), Bounds{WaitForEngine: -1}, rule)
			req, err := retryablehttp.NewRequestWithContext(context.Background(), "GET", "http://engine/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req, tc.repeatable)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if tries != tc.wantTries || resp.StatusCode != tc.wantStatus {
				t.Errorf("%d tries, then %d; want %d, then %d", tries, resp.StatusCode, tc.wantTries, tc.wantStatus)
			}
		})
	}
}

// TestPause: a pause ends with its context, saying why; one whose
// context goes on ends by itself.
func TestPauseEnds(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("the action ended"))
	if err := pause(ctx, 3); err == nil || err.Error() != "the action ended" {
		t.Errorf("pause(cancelled) = %v, want the context's cause", err)
	}
	began := time.Now()
	if err := pause(context.Background(), 1); err != nil || time.Since(began) < 100*time.Millisecond {
		t.Errorf("pause(1) = %v after %v; want nil after 100 ms at least", err, time.Since(began))
	}
}

// TestNewWaits: a call sent again waits first, 50 ms at least: a busy
// engine is not asked again in a loop.
func TestNewWaits(t *testing.T) {
	var at []time.Time
	sock := serve(t, false, func(w http.ResponseWriter, r *http.Request) {
		if at = append(at, time.Now()); len(at) == 1 {
			w.WriteHeader(429)
		}
	})
	c := New(UnixTransport(sock, false), Bounds{WaitForEngine: -1}, func(r *http.Response) Answer {
		if r.StatusCode == 429 {
			return Busy
		}
		return Final
	})
	req, err := retryablehttp.NewRequest("GET", "http://engine/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req, false)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(at) != 2 || at[1].Sub(at[0]) < 50*time.Millisecond {
		t.Errorf("attempts at %v; want two, 50 ms apart at least", at)
	}
}

// TestBackoff: an engine's Retry-After is honoured up to the cap, and
// the wait doubles from the floor.
func TestBackoff(t *testing.T) {
	slow := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": []string{"30"}}}
	if got := cappedBackoff(50*time.Millisecond, time.Second, 0, slow); got != time.Second {
		t.Errorf("with Retry-After 30 s: %v, want the cap, 1 s", got)
	}
	for n, want := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond} {
		if got := cappedBackoff(50*time.Millisecond, time.Second, n, nil); got != want {
			t.Errorf("attempt %d: %v, want %v", n, got, want)
		}
	}
}

// TestWithCause: an error a context's end caused names the cause the
// context was given, and only such a cause.
func TestWithCause(t *testing.T) {
	failed := errors.New("read: connection reset")
	ctx, cancel := context.WithTimeoutCause(context.Background(), time.Nanosecond, errors.New("no answer within 1ns"))
	defer cancel()
	<-ctx.Done()
	err := WithCause(ctx, failed)
	if !errors.Is(err, failed) || err.Error() != "read: connection reset (no answer within 1ns)" {
		t.Errorf("with a cause: %v, want the error and its cause", err)
	}
	plain, cancelPlain := context.WithCancel(context.Background())
	cancelPlain()
	if err := WithCause(plain, failed); err != failed {
		t.Errorf("canceled with no cause of its own: %v, want the error alone", err)
	}
	if err := WithCause(context.Background(), failed); err != failed {
		t.Errorf("a context still live: %v, want the error alone", err)
	}
}

// TestBound: a call's context ends at Request, and its cause names the
// bound.
func TestBound(t *testing.T) {
	b := Bounds{RequestTimeout: 20 * time.Millisecond}
	began := time.Now()
	ctx, cancel := b.Bound(context.Background())
	defer cancel()
	<-ctx.Done()
	if took := time.Since(began); took < 20*time.Millisecond {
		t.Errorf("ended after %v, want 20ms at least", took)
	}
	cause := context.Cause(ctx)
	if !errors.Is(cause, context.DeadlineExceeded) || cause.Error() != "context deadline exceeded: no answer within 20ms" {
		t.Errorf("cause %v, want the deadline and the bound named", cause)
	}
}

// TestSent: a call that failed in its dial sent nothing; one that failed
// after (a read, a write, EOF) may have reached the engine.
func TestSent(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "unix", Err: syscall.ECONNREFUSED}
	read := &net.OpError{Op: "read", Net: "unix", Err: syscall.ECONNRESET}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{dial, false},
		{&net.OpError{Op: "dial", Net: "unix", Err: &os.PathError{Op: "connect", Err: syscall.ENOENT}}, false},
		{read, true},
		{io.EOF, true},
	} {
		if got := Sent(tc.err); got != tc.want {
			t.Errorf("Sent(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
