package dockerapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/internal/socketclient"
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
		{name: "503 then 201 on named create", call: create("web"), path: "/v1.41/containers/create", statuses: []int{503, 201}, wantTries: 2},
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
		{"named create retried", func(ctx context.Context, c *dockerapi.Client) error {
			_, err := c.ContainerCreate(ctx, "web", webBody)
			return err
		}, 1, 2, false},
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
					hangUp(t, w)
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
		})
	}
}

// TestCreateRetryConflict covers a named create whose first attempt
// reached the engine (which created the container) but whose answer was
// lost (or answered 503): the retry meets a name conflict, and the container already there
// is ours only if it carries every label asked for.
func TestCreateRetryConflict(t *testing.T) {
	const id = "0123456789ab0123456789ab0123456789ab0123456789ab0123456789abcdef"
	dockerConflict := func(w http.ResponseWriter) {
		writeJSON(w, 409, map[string]string{"message": `Conflict. The container name "/web" is already in use by container "` + id + `". You have to remove (or rename) that container to be able to reuse that name.`})
	}
	podmanConflict := func(w http.ResponseWriter) {
		writeJSON(w, 500, map[string]string{"message": `container create: creating container storage: the container name "web" is already in use by ` + id + `. You have to remove that container to be able to reuse that name: that name is already in use`})
	}
	cases := []struct {
		name         string
		firstHangsUp bool // the first create is done, then its answer lost
		first503     bool // the first create is done, then answered 503 (a proxy's timeout, say)
		conflict     func(http.ResponseWriter)
		labels       func(asked map[string]string) map[string]string // what inspect shows
		wantID       string
		wantInspects int
	}{
		{
			name: "same labels", firstHangsUp: true, conflict: dockerConflict,
			labels: func(asked map[string]string) map[string]string {
				// The image's labels come on top of the asked ones.
				return merge(asked, map[string]string{"org.opencontainers.image.title": "alpine"})
			},
			wantID: id, wantInspects: 1,
		},
		{
			name: "same labels after a 503", first503: true, conflict: dockerConflict,
			labels: func(asked map[string]string) map[string]string { return asked },
			wantID: id, wantInspects: 1,
		},
		{
			name: "same labels on podman", firstHangsUp: true, conflict: podmanConflict,
			labels: func(asked map[string]string) map[string]string { return asked },
			wantID: id, wantInspects: 1,
		},
		{
			name: "a label differs", firstHangsUp: true, conflict: dockerConflict,
			labels: func(asked map[string]string) map[string]string {
				return merge(asked, map[string]string{"app": "someone-else"})
			},
			wantInspects: 1,
		},
		{
			name: "a label is missing", firstHangsUp: true, conflict: dockerConflict,
			labels: func(map[string]string) map[string]string {
				return map[string]string{"org.waitdaemon.owner": "test"}
			},
			wantInspects: 1,
		},
		{
			// A conflict on the first attempt is someone else's container,
			// whatever its labels.
			name: "plain conflict", firstHangsUp: false, conflict: dockerConflict,
			labels:       func(asked map[string]string) map[string]string { return asked },
			wantInspects: 0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got hits
			var created seen // the JSON labels of the container the engine made
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				n := got.add(r)
				switch r.Method + " " + r.URL.Path {
				case "POST /v1.41/containers/create":
					if r.URL.Query().Get("name") != "web" {
						t.Errorf("create query = %q, want name=web", r.URL.RawQuery)
					}
					var body dockerapi.CreateRequest
					if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
						t.Errorf("decoding the create body: %v", err)
					}
					if n == 1 {
						data, _ := json.Marshal(body.Labels)
						created.add(string(data))
						if tc.firstHangsUp {
							hangUp(t, w)
							return
						}
						if tc.first503 {
							w.Header().Set("Retry-After", "0")
							writeJSON(w, 503, map[string]string{"message": "busy"})
							return
						}
					}
					tc.conflict(w)
				case "GET /v1.41/containers/web/json":
					var asked map[string]string
					if list := created.get(); len(list) == 1 {
						_ = json.Unmarshal([]byte(list[0]), &asked)
					}
					writeJSON(w, 200, dockerapi.Container{ID: id, Name: "/web", Config: dockerapi.Config{Image: "alpine:3.20", Labels: tc.labels(asked)}})
				default:
					t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
					http.Error(w, "unexpected", http.StatusTeapot)
				}
			})
			got1, err := c.ContainerCreate(shortCtx(t), "web", webBody)
			if tc.wantID != "" {
				if err != nil || got1.ID != tc.wantID {
					t.Errorf("ContainerCreate() = %+v, %v; want ID %s, nil", got1, err, tc.wantID)
				}
			} else if !errors.Is(err, dockerapi.ErrConflict) || got1.ID != "" {
				t.Errorf("ContainerCreate() = %+v, %v; want no ID and a conflict", got1, err)
			}
			wantCreates := 1
			if tc.firstHangsUp || tc.first503 {
				wantCreates = 2
			}
			if n := got.get("POST /v1.41/containers/create"); n != wantCreates {
				t.Errorf("the engine got %d creates, want %d", n, wantCreates)
			}
			if n := got.get("GET /v1.41/containers/web/json"); n != tc.wantInspects {
				t.Errorf("the engine got %d inspects, want %d", n, tc.wantInspects)
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

// TestRepeatAfterLostAnswer is a call whose first attempt the engine
// carries out and whose answer is then lost (the connection hangs up):
// the repeat meets the work already done, and that is success. Without
// the rule, the repeated remove fails with 404 once the container is
// gone. (A start is not repeated blindly: TestStartAfterAmbiguousAttempt.)
func TestRepeatAfterLostAnswer(t *testing.T) {
	const id = "0123456789ab0123456789ab0123456789ab0123456789ab0123456789abcdef"
	cases := []struct {
		name    string
		call    func(context.Context, *dockerapi.Client) error
		path    string
		again   func(w http.ResponseWriter) // the engine's answer to the repeat
		wantErr error                       // nil: success
	}{
		{
			name: "connect meets already exists",
			call: func(ctx context.Context, c *dockerapi.Client) error {
				return c.NetworkConnect(ctx, "lan", "web", dockerapi.EndpointSettings{})
			},
			path: "/v1.41/networks/lan/connect",
			again: func(w http.ResponseWriter) {
				writeJSON(w, 403, map[string]string{"message": "endpoint with name web already exists in network lan"})
			},
		},
		{
			name: "connect meets already connected, in a 400",
			call: func(ctx context.Context, c *dockerapi.Client) error {
				return c.NetworkConnect(ctx, "lan", "web", dockerapi.EndpointSettings{})
			},
			path: "/v1.41/networks/lan/connect",
			again: func(w http.ResponseWriter) {
				writeJSON(w, 400, map[string]string{"message": "container web is already connected to network lan"})
			},
		},
		{
			name: "remove meets 404",
			call: func(ctx context.Context, c *dockerapi.Client) error {
				return c.ContainerRemove(ctx, "web", dockerapi.RemoveOptions{Force: true})
			},
			path:  "/v1.41/containers/web",
			again: func(w http.ResponseWriter) { writeJSON(w, 404, map[string]string{"message": "No such container: web"}) },
		},
		{
			name: "rename meets itself",
			call: func(ctx context.Context, c *dockerapi.Client) error { return c.ContainerRename(ctx, id, "web-1") },
			path: "/v1.41/containers/" + id + "/rename",
			again: func(w http.ResponseWriter) {
				writeJSON(w, 409, map[string]string{"message": `Error when allocating new name: Conflict. The container name "/web-1" is already in use by container "` + id + `". You have to remove (or rename) that container to be able to reuse that name.`})
			},
		},
		{
			name: "rename meets another container",
			call: func(ctx context.Context, c *dockerapi.Client) error { return c.ContainerRename(ctx, id, "web-1") },
			path: "/v1.41/containers/" + id + "/rename",
			again: func(w http.ResponseWriter) {
				writeJSON(w, 409, map[string]string{"message": `Error when allocating new name: Conflict. The container name "/web-1" is already in use by container "fedcba". You have to remove (or rename) that container to be able to reuse that name.`})
			},
			wantErr: dockerapi.ErrConflict,
		},
		{
			name: "connect meets another error",
			call: func(ctx context.Context, c *dockerapi.Client) error {
				return c.NetworkConnect(ctx, "lan", "web", dockerapi.EndpointSettings{})
			},
			path:    "/v1.41/networks/lan/connect",
			again:   func(w http.ResponseWriter) { writeJSON(w, 404, map[string]string{"message": "network lan not found"}) },
			wantErr: dockerapi.ErrNotFound,
		},
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
				if got.add(r) == 1 {
					hangUp(t, w) // done, and the answer lost
					return
				}
				tc.again(w)
			})
			err := tc.call(shortCtx(t), c)
			if n := got.total(); n != 2 {
				t.Errorf("the engine got %d requests, want 2", n)
			}
			switch {
			case tc.wantErr == nil && err != nil:
				t.Errorf("error = %v, want success: the first attempt did the work", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("error = %v, want one that is %v", err, tc.wantErr)
			}
		})
	}
	// A 304 to a first attempt is the engine's plain answer: the
	// container was already running before this call.
	t.Run("start meets 304 at once", func(t *testing.T) {
		c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotModified) })
		if err := c.ContainerStart(shortCtx(t), "web"); !errors.Is(err, dockerapi.ErrNotModified) {
			t.Errorf("error = %v, want ErrNotModified", err)
		}
	})
}

// TestStartAfterAmbiguousAttempt: a start whose first attempt may have
// reached the engine (its answer lost, or a 503) is sent again only if
// the container has not started since the first was sent. A container
// that exits at once is not running by the repeat, which would start it
// a second time: the repeat would then run it twice.
func TestStartAfterAmbiguousAttempt(t *testing.T) {
	cases := []struct {
		name     string
		first    func(t *testing.T, w http.ResponseWriter, start func()) // the engine's first answer
		running  bool                                                    // the container runs on after a start
		wantRuns int
	}{
		{name: "started, exited at once, answer lost", first: func(t *testing.T, w http.ResponseWriter, start func()) { start(); hangUp(t, w) }, wantRuns: 1},
		{name: "started, runs on, answer lost", running: true, first: func(t *testing.T, w http.ResponseWriter, start func()) { start(); hangUp(t, w) }, wantRuns: 1},
		{name: "never reached the engine", first: func(t *testing.T, w http.ResponseWriter, _ func()) { hangUp(t, w) }, wantRuns: 1},
		{name: "503, not started", first: func(t *testing.T, w http.ResponseWriter, _ func()) {
			writeJSON(w, 503, map[string]string{"message": "busy"})
		}, wantRuns: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var runs, starts int
			var startedAt time.Time
			running := false
			start := func() {
				runs++
				startedAt = time.Now()
				running = tc.running
			}
			// An earlier run, before this call: its start is no answer.
			startedAt = time.Now().Add(-time.Minute)
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				switch r.Method + " " + r.URL.Path {
				case "POST /v1.41/containers/web/start":
					starts++
					switch {
					case starts == 1:
						tc.first(t, w, start)
					case running:
						w.WriteHeader(http.StatusNotModified)
					default:
						start()
						w.WriteHeader(http.StatusNoContent)
					}
				case "GET /v1.41/containers/web/json":
					writeJSON(w, 200, map[string]any{"Id": "web", "State": map[string]any{
						"Running": running, "StartedAt": startedAt.UTC().Format(time.RFC3339Nano)}})
				default:
					t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
					http.Error(w, "unexpected", http.StatusTeapot)
				}
			})
			err := c.ContainerStart(shortCtx(t), "web")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("ContainerStart() error = %v, want success", err)
			}
			if runs != tc.wantRuns {
				t.Errorf("the container ran %d times, want %d (%d starts sent)", runs, tc.wantRuns, starts)
			}
		})
	}
}

// TestStartLostOnAndOn: a start whose answer is lost on every attempt
// (503), the container neither running nor started since, is sent
// MaxRetries times more, then fails with the engine's last answer.
func TestStartLostOnAndOn(t *testing.T) {
	var got hits
	c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1.41/containers/web/start":
			got.add(r)
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"message": "busy"})
		case "/v1.41/containers/web/json":
			writeJSON(w, http.StatusOK, map[string]any{"Id": "web", "State": map[string]any{"Running": false, "StartedAt": "0001-01-01T00:00:00Z"}})
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.Error(w, "unexpected", http.StatusTeapot)
		}
	})
	err := c.ContainerStart(shortCtx(t), "web")
	var apiErr *dockerapi.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable {
		t.Errorf("ContainerStart() = %v, want the engine's 503", err)
	}
	if n := got.total(); n != 1+socketclient.MaxRetries {
		t.Errorf("the start was sent %d times, want %d", n, 1+socketclient.MaxRetries)
	}
}

// TestCreateNameHeld: a named create whose first attempt was cut off
// while the engine was still at it holds the name for a moment, answering
// a repeat with a conflict while no container of that name can be
// inspected yet (it is being made, or undone). The repeat is sent again
// until the engine settles it: the container made adopted, or made anew.
func TestCreateNameHeld(t *testing.T) {
	const id = "0123456789ab0123456789ab0123456789ab0123456789ab0123456789abcdef"
	for _, made := range []bool{false, true} {
		t.Run(fmt.Sprintf("made %v", made), func(t *testing.T) {
			var got hits
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				n := got.add(r)
				switch r.Method + " " + r.URL.Path {
				case "POST /v1.41/containers/create":
					switch {
					case n == 1:
						hangUp(t, w)
					case n < 4 || made:
						writeJSON(w, 409, map[string]string{"message": `Conflict. The container name "/web" is already in use by container "` + id + `". You have to remove (or rename) that container to be able to reuse that name.`})
					default:
						writeJSON(w, 201, dockerapi.CreateResponse{ID: id})
					}
				case "GET /v1.41/containers/web/json":
					if !made || n < 3 {
						writeJSON(w, 404, map[string]string{"message": "No such container: web"})
						return
					}
					writeJSON(w, 200, dockerapi.Container{ID: id, Name: "/web", Config: dockerapi.Config{Image: "alpine:3.20", Labels: webBody.Labels}})
				default:
					t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
					http.Error(w, "unexpected", http.StatusTeapot)
				}
			})
			created, err := c.ContainerCreate(shortCtx(t), "web", webBody)
			if err != nil || created.ID != id {
				t.Errorf("ContainerCreate() = %+v, %v; want %s: the name held by the cut create, then settled", created, err, id)
			}
			if n, want := got.get("GET /v1.41/containers/web/json"), map[bool]int{false: 2, true: 3}[made]; n != want {
				t.Errorf("%d inspects, want %d", n, want)
			}
		})
	}
}
