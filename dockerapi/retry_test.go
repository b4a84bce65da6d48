package dockerapi_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

var webBody = dockerapi.CreateRequest{Config: dockerapi.Config{
	Image:  "alpine:3.20",
	Cmd:    []string{"sleep", "60"},
	Labels: map[string]string{"org.waitdaemon.owner": "test", "app": "web"},
}}

// TestRetryStatus runs calls against engines that answer a sequence of
// statuses (the last one repeats): 429 is retried for any method, 503
// for calls safe to repeat (not an unnamed create), a few times; other
// statuses never are.
func TestRetryStatus(t *testing.T) {
	list := func(c *dockerapi.Client) error { _, err := c.ContainerList(shortCtx(t)); return err }
	create := func(name string) func(c *dockerapi.Client) error {
		return func(c *dockerapi.Client) error { _, err := c.ContainerCreate(shortCtx(t), name, webBody); return err }
	}
	cases := []struct {
		name       string
		call       func(*dockerapi.Client) error
		path       string // the path the call asks for
		statuses   []int
		retryAfter string // the Retry-After header of 503 and 429 answers
		wantTries  int
		wantStatus int    // 0: success
		wantMsg    string // the *Error's message, when it fails
	}{
		{name: "503 503 200", call: list, path: "/v1.41/containers/json", statuses: []int{503, 503, 200}, wantTries: 3},
		{name: "429 200", call: list, path: "/v1.41/containers/json", statuses: []int{429, 200}, wantTries: 2},
		{name: "503 on named create", call: create("web"), path: "/v1.41/containers/create", statuses: []int{503, 201}, wantTries: 1,
			wantStatus: 503, wantMsg: "answer 1: 503 Service Unavailable"},
		{name: "503 on unnamed create", call: create(""), path: "/v1.41/containers/create", statuses: []int{503, 201}, wantTries: 1,
			wantStatus: 503, wantMsg: "answer 1: 503 Service Unavailable"},
		{name: "429 then 201 on unnamed create", call: create(""), path: "/v1.41/containers/create", statuses: []int{429, 201}, wantTries: 2},
		{name: "500 on create", call: create("web"), path: "/v1.41/containers/create", statuses: []int{500, 201}, wantTries: 1,
			wantStatus: 500, wantMsg: "answer 1: 500 Internal Server Error"},
		{name: "500 on list", call: list, path: "/v1.41/containers/json", statuses: []int{500, 200}, wantTries: 1,
			wantStatus: 500, wantMsg: "answer 1: 500 Internal Server Error"},
		{name: "404", call: list, path: "/v1.41/containers/json", statuses: []int{404, 200}, wantTries: 1,
			wantStatus: 404, wantMsg: "answer 1: 404 Not Found"},
		{name: "persistent 503", call: list, path: "/v1.41/containers/json", statuses: []int{503}, retryAfter: "0", wantTries: 5,
			wantStatus: 503, wantMsg: "answer 5: 503 Service Unavailable"},
		{name: "persistent 429 on create", call: create("web"), path: "/v1.41/containers/create", statuses: []int{429}, retryAfter: "0", wantTries: 5,
			wantStatus: 429, wantMsg: "answer 5: 429 Too Many Requests"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got hits
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != tc.path {
					t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
					http.Error(w, "unexpected", http.StatusTeapot)
					return
				}
				n := got.add(r)
				status := tc.statuses[min(n, len(tc.statuses))-1]
				switch status {
				case 200:
					writeJSON(w, 200, []any{})
				case 201:
					writeJSON(w, 201, map[string]any{"Id": "abc", "Warnings": []string{}})
				case 429, 503:
					if tc.retryAfter != "" {
						w.Header().Set("Retry-After", tc.retryAfter)
					}
					fallthrough
				default:
					writeJSON(w, status, map[string]string{"message": fmt.Sprintf("answer %d: %d %s", n, status, http.StatusText(status))})
				}
			})
			err := tc.call(c)
			if n := got.total(); n != tc.wantTries {
				t.Errorf("the engine got %d requests, want %d", n, tc.wantTries)
			}
			if tc.wantStatus == 0 {
				if err != nil {
					t.Errorf("error = %v, want success", err)
				}
				return
			}
			var apiErr *dockerapi.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("error = %v (%T), want a *dockerapi.Error", err, err)
			}
			if apiErr.Status != tc.wantStatus || apiErr.Message != tc.wantMsg {
				t.Errorf("*Error = status %d message %q, want status %d message %q", apiErr.Status, apiErr.Message, tc.wantStatus, tc.wantMsg)
			}
			if apiErr.Lost() != (tc.wantStatus == 503) {
				t.Errorf("*Error.Lost() = %v for a %d: only a 503 says the engine may have acted", apiErr.Lost(), tc.wantStatus)
			}
			if strings.Contains(err.Error(), "giving up") {
				t.Errorf("error = %q, want the engine's own message, not go-retryablehttp's", err)
			}
		})
	}
}

// TestRetryHangUp runs calls against engines that close the connection
// without answering for the first hangUps requests: a call that may have
// reached the engine is retried only when it is safe to repeat.
func TestRetryHangUp(t *testing.T) {
	cases := []struct {
		name      string
		call      func(context.Context, *dockerapi.Client) error
		hangUps   int
		wantTries int
		wantErr   bool
	}{
		{"GET retried", func(ctx context.Context, c *dockerapi.Client) error { _, err := c.ContainerList(ctx); return err }, 1, 2, false},
		{"GET retried twice", func(ctx context.Context, c *dockerapi.Client) error {
			_, err := c.ContainerInspect(ctx, "web")
			return err
		}, 2, 3, false},
		{"named create not retried", func(ctx context.Context, c *dockerapi.Client) error {
			_, err := c.ContainerCreate(ctx, "web", webBody)
			return err
		}, 1, 1, true},
		{"unnamed create not retried", func(ctx context.Context, c *dockerapi.Client) error {
			_, err := c.ContainerCreate(ctx, "", webBody)
			return err
		}, 1, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got hits
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				if got.add(r) <= tc.hangUps {
					rr.HangUp(t, w)
					return
				}
				switch {
				case r.Method == http.MethodPost:
					writeJSON(w, 201, map[string]any{"Id": "abc", "Warnings": []string{}})
				case strings.HasSuffix(r.URL.Path, "/containers/json"):
					writeJSON(w, 200, []any{})
				default:
					writeJSON(w, 200, map[string]any{"Id": "abc"})
				}
			})
			err := tc.call(shortCtx(t), c)
			if n := got.total(); n != tc.wantTries {
				t.Errorf("the engine got %d requests, want %d", n, tc.wantTries)
			}
			if !tc.wantErr {
				if err != nil {
					t.Errorf("error = %v, want success", err)
				}
				return
			}
			var te *dockerapi.TransportError
			if !errors.As(err, &te) || te.Method != http.MethodPost || te.Path != "/v1.41/containers/create" || te.Socket != c.SocketPath() {
				t.Errorf("error = %v (%T), want a *dockerapi.TransportError for POST /v1.41/containers/create on %s", err, err, c.SocketPath())
			}
			if te != nil && !te.Lost() {
				t.Errorf("TransportError.Lost() = false for a hang-up after the request was sent")
			}
		})
	}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// tempSocket returns the path of a socket that does not exist yet, short
// enough for a unix socket address.
func tempSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wfe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "docker.sock")
}

// listenAt serves a fake 1.41 engine on socket until the test ends.
func listenAt(t *testing.T, socket string) {
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Errorf("listening on %s: %v", socket, err)
		return
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if answerPing(w, r, "1.41") {
			return
		}
		writeJSON(w, 200, []any{})
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// staleSocket leaves a socket file that nothing listens on, as an engine
// that died does: connecting to it is refused.
func staleSocket(t *testing.T, socket string) {
	t.Helper()
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
}

// TestWaitForEngine covers an engine that is not up yet: its socket is
// missing or refuses connections. Requests wait for it, for up to
// WaitForEngine.
func TestWaitForEngine(t *testing.T) {
	cases := []struct {
		name    string
		stale   bool          // a socket file is there, refusing
		upAfter time.Duration // 0: never
		wait    time.Duration
		// The call must end within [minTime, maxTime).
		minTime, maxTime time.Duration
		wantErrno        syscall.Errno // 0: success
	}{
		{name: "socket appears", upAfter: 300 * time.Millisecond, wait: 3 * time.Second, minTime: 300 * time.Millisecond, maxTime: 30 * time.Second},
		{name: "stale socket, engine restarts", stale: true, upAfter: 300 * time.Millisecond, wait: 3 * time.Second, minTime: 300 * time.Millisecond, maxTime: 30 * time.Second},
		{name: "never, 200ms", wait: 200 * time.Millisecond, minTime: 200 * time.Millisecond, maxTime: 2 * time.Second, wantErrno: syscall.ENOENT},
		{name: "refused, 200ms", stale: true, wait: 200 * time.Millisecond, minTime: 200 * time.Millisecond, maxTime: 2 * time.Second, wantErrno: syscall.ECONNREFUSED},
		{name: "never, no wait", wait: -1, maxTime: 100 * time.Millisecond, wantErrno: syscall.ENOENT},
		{name: "refused, no wait", stale: true, wait: -1, maxTime: 100 * time.Millisecond, wantErrno: syscall.ECONNREFUSED},
		{name: "appears too late", upAfter: 500 * time.Millisecond, wait: -1, maxTime: 100 * time.Millisecond, wantErrno: syscall.ENOENT},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			socket := tempSocket(t)
			if tc.stale {
				staleSocket(t, socket)
			}
			if tc.upAfter > 0 {
				timer := time.AfterFunc(tc.upAfter, func() {
					_ = os.Remove(socket)
					listenAt(t, socket)
				})
				t.Cleanup(func() { timer.Stop() })
			}
			c := &dockerapi.Client{Socket: socket, WaitForEngine: tc.wait}
			start := time.Now()
			_, err := c.ContainerList(shortCtx(t))
			d := time.Since(start)
			if d < tc.minTime || d >= tc.maxTime {
				t.Errorf("ContainerList() returned after %v, want within [%v, %v)", d, tc.minTime, tc.maxTime)
			}
			if tc.wantErrno == 0 {
				if err != nil {
					t.Errorf("ContainerList() error = %v, want success", err)
				}
				return
			}
			var te *dockerapi.TransportError
			if !errors.As(err, &te) || !strings.Contains(err.Error(), socket) || !errors.Is(err, tc.wantErrno) {
				t.Errorf("ContainerList() error = %v (%T), want a *dockerapi.TransportError naming %s, with %v", err, err, socket, tc.wantErrno)
			}
		})
	}
}

// TestRetryContextCanceled checks that the context ends the retries, of
// an engine that stays busy and of one that is not up.
func TestRetryContextCanceled(t *testing.T) {
	cases := []struct {
		name  string
		busy  bool // an engine answering 503, retry after 3s
		hangs bool // an engine that answers after 10s
		wait  time.Duration
	}{
		{name: "busy engine", busy: true, wait: 100 * time.Millisecond},
		{name: "hanging engine", hangs: true, wait: 100 * time.Millisecond},
		{name: "missing engine", wait: 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got hits
			socket := tempSocket(t)
			switch {
			case tc.busy:
				socket = pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
					got.add(r)
					w.Header().Set("Retry-After", "3")
					writeJSON(w, 503, map[string]string{"message": "busy"})
				}).SocketPath()
			case tc.hangs:
				socket = pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
					got.add(r)
					select {
					case <-r.Context().Done():
					case <-time.After(10 * time.Second):
					}
				}).SocketPath()
			}
			c := &dockerapi.Client{Socket: socket, Version: "1.41", WaitForEngine: tc.wait}
			start := time.Now() // before the deadline is set, so that d cannot fall short of it
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancel()
			_, err := c.ContainerList(ctx)
			d := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) || strings.Contains(fmt.Sprint(err), "giving up") {
				t.Errorf("ContainerList() error = %v, want errors.Is(err, context.DeadlineExceeded), without go-retryablehttp's \"giving up\"", err)
			}
			// Without the deadline, the call would last 3s or more.
			if d < 150*time.Millisecond || d > 2500*time.Millisecond {
				t.Errorf("ContainerList() returned after %v, want just after the deadline (150ms)", d)
			}
			if n := got.total(); (tc.busy || tc.hangs) && n != 1 {
				t.Errorf("the engine got %d requests, want 1", n)
			}
		})
	}
}

// TestListPodmanRace: Podman's 500 "no such process", when a container
// exits while it lists, is asked again a few times; another 500 is not.
func TestListPodmanRace(t *testing.T) {
	const race = "read /proc/7748/cgroup: no such process"
	cases := []struct {
		name      string
		messages  []string // the 500s before a 200; "" ends them
		wantTries int
		wantErr   string
	}{
		{"two races, then the list", []string{race, race, ""}, 3, ""},
		{"another 500", []string{"database is locked", ""}, 1, "database is locked"},
		{"a race that goes on", []string{race, race, race, race, race, ""}, 4, race},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got hits
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				n := got.add(r)
				if msg := tc.messages[min(n, len(tc.messages))-1]; msg != "" {
					writeJSON(w, 500, map[string]string{"message": msg})
					return
				}
				writeJSON(w, 200, []map[string]any{{"Id": "abc", "State": "exited"}})
			})
			list, err := c.ContainerList(shortCtx(t), "org.waitdaemon.action=x")
			if n := got.total(); n != tc.wantTries {
				t.Errorf("the engine got %d lists, want %d", n, tc.wantTries)
			}
			if tc.wantErr == "" {
				if err != nil || len(list) != 1 {
					t.Errorf("ContainerList() = %v, %v; want one container", list, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ContainerList() error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestCallsRefused: a start, a connect, a rename and a removal the engine
// refuses fail with its answer, named for the call, sent once.
func TestCallsRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		call    func(context.Context, *dockerapi.Client) error
		status  int
		want    string
		wantErr error
	}{
		{"start", func(ctx context.Context, c *dockerapi.Client) error { return c.ContainerStart(ctx, "web") }, 304, `starting container "web"`, dockerapi.ErrNotModified},
		{"connect", func(ctx context.Context, c *dockerapi.Client) error {
			return c.NetworkConnect(ctx, "lan", "web", dockerapi.EndpointSettings{})
		}, 404, `connecting container "web" to network "lan"`, dockerapi.ErrNotFound},
		{"rename", func(ctx context.Context, c *dockerapi.Client) error { return c.ContainerRename(ctx, "web", "web-1") }, 409, `renaming container "web" to "web-1"`, dockerapi.ErrConflict},
		{"remove", func(ctx context.Context, c *dockerapi.Client) error {
			return c.ContainerRemove(ctx, "web", dockerapi.RemoveOptions{Force: true})
		}, 404, `removing container "web"`, dockerapi.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got hits
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				got.add(r)
				if tc.status == 304 {
					w.WriteHeader(304)
					return
				}
				writeJSON(w, tc.status, map[string]string{"message": "refused"})
			})
			err := tc.call(shortCtx(t), c)
			if !errors.Is(err, tc.wantErr) || !strings.Contains(errString(err), tc.want) || got.total() != 1 {
				t.Errorf("error = %v after %d requests; want %q, %v, after 1", err, got.total(), tc.want, tc.wantErr)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
