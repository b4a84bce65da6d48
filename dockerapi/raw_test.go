package dockerapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
)

// TestRaw: the api subcommand's request goes out as asked, under the
// negotiated version (here pinned) unless its path names one; its body must be JSON; an
// answer under 400 is the caller's to read, one from 400 an *Error; and
// only a GET or HEAD is sent again after a 503.
func TestRaw(t *testing.T) {
	cases := []struct {
		name, method, path, body string
		status                   []int // the engine's answers, in turn
		want                     string
		wantSent                 []string
	}{
		{name: "a path without a version", method: "GET", path: "containers/json?all=1", status: []int{200},
			want: "200 answer", wantSent: []string{"GET /v1.41/containers/json?all=1 "}},
		{name: "a path with its version, lowercase method", method: "get", path: "/v1.43/info", status: []int{200},
			want: "200 answer", wantSent: []string{"GET /v1.43/info "}},
		{name: "a version-like path that is none", method: "GET", path: "/vx/info", status: []int{200},
			want: "200 answer", wantSent: []string{"GET /v1.41/vx/info "}},
		{name: "the ping", method: "HEAD", path: "/_ping", status: []int{200},
			want: "200 ", wantSent: []string{"HEAD /_ping "}},
		{name: "a JSON body", method: "POST", path: "/containers/x/rename", body: `{"a": 1}`, status: []int{204},
			want: "204 ", wantSent: []string{`POST /v1.41/containers/x/rename {"a":1}`}},
		{name: "a body that is not JSON", method: "POST", path: "/x", body: "{", want: `error: body "{": expected JSON`},
		{name: "a bad path", method: "GET", path: "%zz", want: `error: path "%zz": parse "%zz": invalid URL escape "%zz"`},
		{name: "the last status that is no error", method: "GET", path: "/x", status: []int{399},
			want: "399 answer", wantSent: []string{"GET /v1.41/x "}},
		{name: "the first that is", method: "GET", path: "/x", status: []int{400},
			want: "error 400: answer", wantSent: []string{"GET /v1.41/x "}},
		{name: "a GET is sent again after a 503", method: "GET", path: "/x", status: []int{503, 200},
			want: "200 answer", wantSent: []string{"GET /v1.41/x ", "GET /v1.41/x "}},
		{name: "so is a HEAD", method: "HEAD", path: "/x", status: []int{503, 200},
			want: "200 ", wantSent: []string{"HEAD /v1.41/x ", "HEAD /v1.41/x "}},
		{name: "a POST is not", method: "POST", path: "/x", status: []int{503, 200},
			want: "error 503: answer", wantSent: []string{"POST /v1.41/x "}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var sent []string
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				body, _ := io.ReadAll(r.Body)
				sent = append(sent, fmt.Sprintf("%s %s %s", r.Method, r.URL.RequestURI(), body))
				status := tc.status[min(len(sent), len(tc.status))-1]
				if status >= 400 {
					writeJSON(w, status, map[string]string{"message": "answer"})
					return
				}
				w.WriteHeader(status)
				fmt.Fprint(w, "answer")
			})
			var got string
			resp, err := c.Raw(context.Background(), tc.method, tc.path, []byte(tc.body))
			var api *dockerapi.Error
			switch {
			case errors.As(err, &api):
				got = fmt.Sprintf("error %d: %s", api.Status, api.Message)
			case err != nil:
				got = "error: " + err.Error()
			default:
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got = fmt.Sprintf("%d %s", resp.StatusCode, body)
			}
			if got != tc.want {
				t.Errorf("Raw() = %s, want %s", got, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := linediff.Lines(tc.wantSent, sent); diff != "" {
				t.Errorf("sent (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCallCause: a call that ends with its context says why: the
// client's own bound, or the caller's cause, and nothing more when the
// caller cancelled without one.
func TestCallCause(t *testing.T) {
	cases := []struct {
		name    string
		ctx     func() (context.Context, func())
		bound   time.Duration
		want    string // in the error
		wantNot string
	}{
		{
			name: "the client's bound", bound: 100 * time.Millisecond,
			ctx:  func() (context.Context, func()) { return context.Background(), func() {} },
			want: "(context deadline exceeded: no answer within 100ms)",
		},
		{
			name: "the caller's cause",
			ctx: func() (context.Context, func()) {
				ctx, cancel := context.WithCancelCause(context.Background())
				time.AfterFunc(50*time.Millisecond, func() { cancel(errors.New("the action was stopped")) })
				return ctx, func() { cancel(nil) }
			},
			want: "context canceled (the action was stopped)",
		},
		{
			name: "cancelled without a cause",
			ctx: func() (context.Context, func()) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(50*time.Millisecond, cancel)
				return ctx, cancel
			},
			want: "context canceled", wantNot: "(",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			defer close(done)
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) { // no answer
				select {
				case <-r.Context().Done():
				case <-done:
				}
			})
			c.RequestTimeout = tc.bound
			ctx, cancel := tc.ctx()
			defer cancel()
			_, err := c.ContainerInspect(ctx, "x")
			if err == nil || !strings.Contains(err.Error(), tc.want) || tc.wantNot != "" && strings.Contains(strings.TrimPrefix(err.Error(), `inspecting container "x": `), tc.wantNot) {
				t.Errorf("ContainerInspect() = %v, want %q in it", err, tc.want)
			}
		})
	}
}

// TestRetryWaits: a call sent again after a 503 waits between the
// attempts, at least the 50 ms the backoff starts at.
func TestRetryWaits(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if at = append(at, time.Now()); len(at) == 1 {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"message": "busy"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"Id": "x"})
	})
	if _, err := c.ContainerInspect(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 2 || at[1].Sub(at[0]) < 50*time.Millisecond {
		t.Errorf("attempts at %v, want two, 50 ms apart at least", at)
	}
}

// TestPingBounded: the first contact with the engine, its ping, has the
// client's RequestTimeout too: a hung engine fails phase 1 with a
// message, not when the agent kills it.
func TestPingBounded(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	c := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) { // no answer
		select {
		case <-r.Context().Done():
		case <-done:
		}
	})
	c.RequestTimeout = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Ping(ctx)
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "no answer within 100ms") {
		t.Errorf("Ping() of a hung engine = %v (the test's context: %v); want the client's bound, named", err, ctx.Err())
	}
	if _, err := c.APIVersion(ctx); err == nil || ctx.Err() != nil {
		t.Errorf("APIVersion() of a hung engine = %v (the test's context: %v); want the client's bound", err, ctx.Err())
	}
}
