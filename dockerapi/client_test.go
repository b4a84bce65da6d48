package dockerapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// The helpers below build fake engines: plain handlers served on a unix
// socket by rr.Serve, so that the real dial, retry and decode code runs.

// fakeEngine serves h on a fresh unix socket and returns a client pinned
// to nothing: it negotiates through h's /_ping like a real one.
func fakeEngine(t *testing.T, h http.HandlerFunc) *dockerapi.Client {
	t.Helper()
	return &dockerapi.Client{Socket: rr.Serve(t, h), WaitForEngine: 100 * time.Millisecond}
}

// pinnedEngine is fakeEngine with the version pinned to 1.41, so that no
// ping comes first: the call under test is the first on its connection.
func pinnedEngine(t *testing.T, h http.HandlerFunc) *dockerapi.Client {
	t.Helper()
	c := fakeEngine(t, h)
	c.Version = "1.41"
	return c
}

// answerPing answers GET /_ping the way Docker 20.10 does, with version as
// Api-Version (none when empty), and reports whether it did.
func answerPing(w http.ResponseWriter, r *http.Request, version string) bool {
	if r.URL.Path != "/_ping" {
		return false
	}
	if version != "" {
		w.Header().Set("Api-Version", version)
	}
	w.Header().Set("Ostype", "linux")
	w.Header().Set("Server", "Docker/20.10.24 (linux)")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "OK")
	return true
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// hits counts requests by "METHOD /path".
type hits struct {
	mu sync.Mutex
	n  map[string]int
}

// add counts r and returns how many such requests came so far, r included.
func (h *hits) add(r *http.Request) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	k := r.Method + " " + r.URL.Path
	h.n[k]++
	return h.n[k]
}

func (h *hits) get(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[key]
}

func (h *hits) total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, v := range h.n {
		n += v
	}
	return n
}

// seen keeps what a fake engine saw, for the test to read afterwards.
type seen struct {
	mu   sync.Mutex
	list []string
}

func (s *seen) add(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, v)
}

func (s *seen) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.list...)
}

// shortCtx bounds a call that should end much sooner, so that a hung
// test fails instead of waiting for the test binary's timeout.
func shortCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestParseHost(t *testing.T) {
	cases := []struct {
		host    string
		want    string
		wantErr []string // substrings of the error; nil means success
	}{
		{host: "", want: "/var/run/docker.sock"},
		{host: "unix:///tmp/x.sock", want: "/tmp/x.sock"},
		{host: "unix:///var/run/docker.sock", want: "/var/run/docker.sock"},
		{host: "tcp://1.2.3.4:2375", wantErr: []string{"DOCKER_HOST", `"tcp://1.2.3.4:2375"`, "unix://"}},
		{host: "unix://", wantErr: []string{"DOCKER_HOST", "unix://"}},
		{host: "ssh://h", wantErr: []string{"DOCKER_HOST", "ssh://h", "unix://"}},
		{host: "/var/run/docker.sock", wantErr: []string{"DOCKER_HOST", "unix://"}},
	}
	for _, tc := range cases {
		t.Run(tc.host, func(t *testing.T) {
			got, err := dockerapi.ParseHost(tc.host)
			if tc.wantErr == nil {
				if err != nil || got != tc.want {
					t.Errorf("ParseHost(%q) = %q, %v; want %q, nil", tc.host, got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseHost(%q) = %q, nil; want an error", tc.host, got)
			}
			if got != "" {
				t.Errorf("ParseHost(%q) path = %q on error, want \"\"", tc.host, got)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("ParseHost(%q) error = %q, want it to mention %q", tc.host, err, s)
				}
			}
		})
	}
}

// TestDockerHost runs a zero-value client, which must find its socket in
// DOCKER_HOST.
func TestDockerHost(t *testing.T) {
	t.Run("unix", func(t *testing.T) {
		var got hits
		sock := rr.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got.add(r)
			if answerPing(w, r, "1.41") {
				return
			}
			writeJSON(w, 200, []any{})
		}))
		t.Setenv("DOCKER_HOST", "unix://"+sock)
		var c dockerapi.Client
		if _, err := c.ContainerList(shortCtx(t)); err != nil {
			t.Fatalf("ContainerList() through DOCKER_HOST: %v", err)
		}
		if got := c.SocketPath(); got != sock {
			t.Errorf("SocketPath() = %q, want %q", got, sock)
		}
		if n := got.get("GET /v1.41/containers/json"); n != 1 {
			t.Errorf("the fake engine got %d GET /v1.41/containers/json, want 1", n)
		}
	})
	t.Run("tcp", func(t *testing.T) {
		t.Setenv("DOCKER_HOST", "tcp://x:1")
		var c dockerapi.Client
		calls := []struct {
			name string
			call func() error
		}{
			{"ContainerList", func() error { _, err := c.ContainerList(shortCtx(t)); return err }},
			{"Ping", func() error { _, err := c.Ping(shortCtx(t)); return err }},
			{"APIVersion", func() error { _, err := c.APIVersion(shortCtx(t)); return err }},
		}
		for _, tc := range calls {
			err := tc.call()
			if err == nil || !strings.Contains(err.Error(), `DOCKER_HOST="tcp://x:1"`) || !strings.Contains(err.Error(), "unix://") {
				t.Errorf("%s() error = %v, want the DOCKER_HOST error naming tcp://x:1 and unix://", tc.name, err)
			}
		}
	})
}

func TestUserAgent(t *testing.T) {
	cases := []struct {
		set  string
		want string
	}{
		{"", "waitdaemon"},
		{"waitdaemon/1.2.3", "waitdaemon/1.2.3"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			var got seen
			c := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
				got.add(r.URL.Path + " " + r.UserAgent())
				if answerPing(w, r, "1.41") {
					return
				}
				writeJSON(w, 200, []any{})
			})
			c.UserAgent = tc.set
			if _, err := c.ContainerList(shortCtx(t)); err != nil {
				t.Fatal(err)
			}
			want := []string{"/_ping " + tc.want, "/v1.41/containers/json " + tc.want}
			if got := got.get(); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("requests (-want +got):\n-%q\n+%q", want, got)
			}
		})
	}
}

// TestContainerWait checks that a wait has no timeout of its own: the
// engine answers the headers at once and the body only when the container
// exits, which may be long after; only the context ends it early.
func TestContainerWait(t *testing.T) {
	t.Run("late body", func(t *testing.T) {
		var query seen
		c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || r.URL.Path != "/v1.41/containers/abc/wait" {
				http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, 500)
				return
			}
			query.add(r.URL.RawQuery)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			select {
			case <-time.After(300 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, `{"StatusCode":3,"Error":null}`+"\n")
		})
		start := time.Now()
		got, err := c.ContainerWait(shortCtx(t), "abc", dockerapi.WaitNotRunning)
		if err != nil {
			t.Fatalf("ContainerWait() error = %v, want the exit code", err)
		}
		if got.StatusCode != 3 || got.Error != nil {
			t.Errorf("ContainerWait() = %+v, want StatusCode 3 and no error", got)
		}
		if got := query.get(); len(got) != 1 || got[0] != "condition=not-running" {
			t.Errorf("queries = %q, want one, condition=not-running", got)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Errorf("ContainerWait() returned after %v, before the engine answered (300ms)", d)
		}
	})
	t.Run("error message", func(t *testing.T) {
		c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 200, map[string]any{"StatusCode": 137, "Error": map[string]string{"Message": "container was killed"}})
		})
		got, err := c.ContainerWait(shortCtx(t), "abc", "")
		if err == nil || err.Error() != `waiting for container "abc": container was killed` || got.StatusCode != 137 {
			t.Errorf("ContainerWait() = %+v, %v; want StatusCode 137 and error \"waiting for container \\\"abc\\\": container was killed\"", got, err)
		}
	})
	t.Run("container gone, in the body", func(t *testing.T) {
		// Podman 4.3 answers a wait on a container removed meanwhile with
		// 200 and this message in the body.
		c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 200, map[string]any{"StatusCode": -1, "Error": map[string]string{"Message": `no container with ID abc found in database: no such container`}})
		})
		_, err := c.ContainerWait(shortCtx(t), "abc", "")
		if !errors.Is(err, dockerapi.ErrNotFound) {
			t.Errorf("ContainerWait() error = %v, want one for which errors.Is(err, ErrNotFound)", err)
		}
	})
	cancels := []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc)
		target error
	}{
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(150*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 150*time.Millisecond)
		}, context.DeadlineExceeded},
	}
	for _, tc := range cancels {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(200)
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
				case <-time.After(10 * time.Second):
				}
			})
			start := time.Now() // before the context's clock starts
			ctx, cancel := tc.ctx()
			defer cancel()
			_, err := c.ContainerWait(ctx, "abc", dockerapi.WaitNotRunning)
			d := time.Since(start)
			if !errors.Is(err, tc.target) {
				t.Errorf("ContainerWait() error = %v, want errors.Is(err, %v)", err, tc.target)
			}
			// The engine would answer after 10s: well before that means the
			// context ended the wait.
			if d < 150*time.Millisecond || d > 5*time.Second {
				t.Errorf("ContainerWait() returned after %v, want just after the context ended (150ms)", d)
			}
			if got := n.Load(); got != 1 {
				t.Errorf("the engine got %d waits, want 1 (no retry after the context ended)", got)
			}
		})
	}
}
