package dockerapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestRetryPolicy(t *testing.T) {
	dialErr := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", errno)}
	}
	resp := func(status int) *http.Response { return &http.Response{StatusCode: status} }
	const wait = time.Second
	cases := []struct {
		name       string
		idempotent bool
		age        time.Duration // since the call started
		retries    int           // retries so far
		resp       *http.Response
		err        error
		want       bool
		wantRetry  int  // retries after the decision
		wantAmbig  bool // the attempt may have reached the engine
	}{
		{name: "missing socket", err: dialErr(syscall.ENOENT), want: true},
		{name: "missing socket, many retries", retries: 50, err: dialErr(syscall.ENOENT), want: true, wantRetry: 50},
		{name: "missing socket, waited enough", age: wait, err: dialErr(syscall.ENOENT), want: false},
		{name: "refused", err: dialErr(syscall.ECONNREFUSED), want: true},
		{name: "refused, waited enough", age: 2 * wait, err: dialErr(syscall.ECONNREFUSED), want: false},
		{name: "reset, idempotent", idempotent: true, err: io.ErrUnexpectedEOF, want: true, wantRetry: 1, wantAmbig: true},
		{name: "reset, idempotent, last retry", idempotent: true, retries: 3, err: io.EOF, want: true, wantRetry: 4, wantAmbig: true},
		{name: "reset, idempotent, retries spent", idempotent: true, retries: 4, err: io.EOF, want: false, wantRetry: 4, wantAmbig: true},
		{name: "reset, not idempotent", err: io.EOF, want: false, wantAmbig: true},
		{name: "503, idempotent", idempotent: true, resp: resp(503), want: true, wantRetry: 1, wantAmbig: true},
		{name: "503, not idempotent", resp: resp(503), want: false, wantAmbig: true},
		{name: "429", resp: resp(429), want: true, wantRetry: 1},
		{name: "503, retries spent", idempotent: true, resp: resp(503), retries: 4, want: false, wantRetry: 4, wantAmbig: true},
		{name: "500", idempotent: true, resp: resp(500), want: false},
		{name: "502", idempotent: true, resp: resp(502), want: false},
		{name: "404", idempotent: true, resp: resp(404), want: false},
		{name: "200", idempotent: true, resp: resp(200), want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &attempts{repeat: never}
			if tc.idempotent {
				a.repeat = asFirst
			}
			ctx := withPolicy(context.Background(), a)
			a.started = a.started.Add(-tc.age)
			a.retries = tc.retries
			got, err := retryPolicy(wait)(ctx, tc.resp, tc.err)
			if got != tc.want || err != nil {
				t.Errorf("retry = %v, %v; want %v, nil", got, err, tc.want)
			}
			if a.retries != tc.wantRetry || a.ambiguous != tc.wantAmbig {
				t.Errorf("after: retries %d ambiguous %v; want %d %v", a.retries, a.ambiguous, tc.wantRetry, tc.wantAmbig)
			}
		})
	}
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(withPolicy(context.Background(), &attempts{repeat: asFirst}))
		cancel()
		got, err := retryPolicy(wait)(ctx, resp(503), nil)
		if got || !errors.Is(err, context.Canceled) {
			t.Errorf("retry = %v, %v; want false, context.Canceled", got, err)
		}
	})
	t.Run("no wait", func(t *testing.T) {
		ctx := withPolicy(context.Background(), &attempts{})
		if got, err := retryPolicy(0)(ctx, nil, dialErr(syscall.ENOENT)); got || err != nil {
			t.Errorf("retry = %v, %v; want false, nil", got, err)
		}
	})
}

// TestRequestTimeoutBound: a call's bound is the client's RequestTimeout,
// else the wait for the engine (its default when unset, none when
// negative) and 30 s more.
func TestRequestTimeoutBound(t *testing.T) {
	cases := []struct {
		request, wait, want time.Duration
	}{
		{time.Second, time.Minute, time.Second},
		{0, 0, DefaultWaitForEngine + DefaultRequestTimeout},
		{0, 5 * time.Second, 5*time.Second + DefaultRequestTimeout},
		{0, -1, DefaultRequestTimeout},
	}
	for _, tc := range cases {
		c := &Client{RequestTimeout: tc.request, WaitForEngine: tc.wait}
		if got := c.requestTimeout(); got != tc.want {
			t.Errorf("requestTimeout() with RequestTimeout %v, WaitForEngine %v = %v, want %v", tc.request, tc.wait, got, tc.want)
		}
	}
}
