package dockerapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/internal/socketclient"
)

// TestAnswer: Docker's answers, as the retry policy reads them.
func TestAnswer(t *testing.T) {
	for status, want := range map[int]socketclient.Answer{
		503: socketclient.MayHaveActed, 429: socketclient.Busy,
		500: socketclient.Final, 502: socketclient.Final, 404: socketclient.Final, 304: socketclient.Final, 200: socketclient.Final, 201: socketclient.Final,
	} {
		if got := answer(&http.Response{StatusCode: status}); got != want {
			t.Errorf("answer(%d) = %v, want %v", status, got, want)
		}
	}
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
		if got := c.bounds().Request(); got != tc.want {
			t.Errorf("bounds().Request() with RequestTimeout %v, WaitForEngine %v = %v, want %v", tc.request, tc.wait, got, tc.want)
		}
	}
}
