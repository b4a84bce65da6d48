package containerdapi_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestRetryStatus runs calls against daemons that answer a sequence of
// statuses (the last one repeats): UNAVAILABLE is retried for calls safe
// to repeat, a few times; other statuses never are.
func TestRetryStatus(t *testing.T) {
	get := func(c *containerdapi.Client) error { _, err := c.ContainerGet(shortCtx(t), "web"); return err }
	start := func(c *containerdapi.Client) error { _, err := c.TaskStart(shortCtx(t), "web"); return err }
	cases := []struct {
		name      string
		call      func(*containerdapi.Client) error
		codes     []containerdapi.Code
		wantTries int
		wantCode  containerdapi.Code // OK: success
	}{
		{name: "unavailable unavailable ok", call: get, codes: []containerdapi.Code{14, 14, 0}, wantTries: 3},
		{name: "persistent unavailable", call: get, codes: []containerdapi.Code{14}, wantTries: 5, wantCode: containerdapi.Unavailable},
		// Sent once: the engine settles a start whose answer was lost.
		{name: "unavailable on a start", call: start, codes: []containerdapi.Code{14, 0}, wantTries: 1, wantCode: containerdapi.Unavailable},
		{name: "not found", call: get, codes: []containerdapi.Code{5, 0}, wantTries: 1, wantCode: containerdapi.NotFound},
		{name: "unknown", call: get, codes: []containerdapi.Code{2, 0}, wantTries: 1, wantCode: containerdapi.Unknown},
		{name: "deadline exceeded", call: get, codes: []containerdapi.Code{4, 0}, wantTries: 1, wantCode: containerdapi.DeadlineExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got hits
			c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				readRequest(t, r)
				n := got.add()
				code := tc.codes[min(n, len(tc.codes))-1]
				if code != containerdapi.OK {
					fail(w, code, "answer "+string(rune('0'+n)))
					return
				}
				answer(w, sub(1, str(1, "web")))
			})
			err := tc.call(c)
			var apiErr *containerdapi.Error
			switch {
			case tc.wantCode == containerdapi.OK && err != nil:
				t.Errorf("error %v, want success", err)
			case tc.wantCode != containerdapi.OK && (!errors.As(err, &apiErr) || apiErr.Code != tc.wantCode):
				t.Errorf("error %v, want code %v", err, tc.wantCode)
			}
			if got.count() != tc.wantTries {
				t.Errorf("%d tries, want %d", got.count(), tc.wantTries)
			}
		})
	}
}

// TestWaitForEngine: a socket that appears late (a daemon starting) is
// waited for within WaitForEngine; with no wait, or past it, the call
// fails as a transport error naming the socket.
func TestWaitForEngine(t *testing.T) {
	cases := []struct {
		name    string
		wait    time.Duration
		appear  time.Duration // when the daemon starts listening; 0: never
		refused bool          // a socket file that refuses connections first
		wantErr bool
	}{
		{name: "appears within the wait", wait: 3 * time.Second, appear: 300 * time.Millisecond},
		{name: "refused, then up", wait: 3 * time.Second, appear: 300 * time.Millisecond, refused: true},
		{name: "never", wait: 300 * time.Millisecond, wantErr: true},
		{name: "no wait", wait: -1, appear: 300 * time.Millisecond, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			sock := filepath.Join(dir, "containerd.sock")
			if tc.refused {
				// A socket file nobody listens on: ECONNREFUSED.
				l, err := net.Listen("unix", sock)
				if err != nil {
					t.Fatal(err)
				}
				l.(*net.UnixListener).SetUnlinkOnClose(false)
				l.Close()
			}
			if tc.appear > 0 {
				timer := time.AfterFunc(tc.appear, func() {
					real := rr.ServeH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						readRequest(t, r)
						answer(w, str(1, "v2.2.1"))
					}))
					os.Remove(sock)
					if err := os.Symlink(real, sock); err != nil {
						t.Error(err)
					}
				})
				t.Cleanup(func() { timer.Stop() })
			}
			c := &containerdapi.Client{Socket: sock, WaitForEngine: tc.wait}
			start := time.Now()
			v, err := c.Version(shortCtx(t))
			if tc.wantErr {
				var te *containerdapi.TransportError
				if !errors.As(err, &te) || te.Socket != sock || !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ECONNREFUSED) {
					t.Errorf("Version() error = %v, want a transport error on %s: no such file or refused", err, sock)
				}
				if tc.wait < 0 && time.Since(start) > 200*time.Millisecond {
					t.Errorf("with no wait, the call took %v", time.Since(start))
				}
				return
			}
			if err != nil || v.Version != "v2.2.1" {
				t.Errorf("Version() = %+v, %v; want v2.2.1 once the daemon is up", v, err)
			}
		})
	}
}

// lost reports whether err says its call's answer was lost (what
// engine.IsLost reads).
func lost(err error) bool {
	var l interface{ Lost() bool }
	return errors.As(err, &l) && l.Lost()
}

// TestCreatesSentOnce: the creates and Tasks/Start, which are not safe to
// repeat blindly, are sent once: an answer lost (the connection broke
// after the daemon acted, or the daemon answered UNAVAILABLE) fails as
// lost, for the caller to settle; AlreadyExists is the daemon's answer,
// nothing is adopted.
func TestCreatesSentOnce(t *testing.T) {
	calls := map[string]func(context.Context, *containerdapi.Client) error{
		"Containers/Create": func(ctx context.Context, c *containerdapi.Client) error {
			_, err := c.ContainerCreate(ctx, containerdapi.Container{ID: "web", Labels: map[string]string{"a": "1"}})
			return err
		},
		"Leases/Create": func(ctx context.Context, c *containerdapi.Client) error {
			_, err := c.LeaseCreate(ctx, "l1", time.Time{})
			return err
		},
		"Snapshots/Prepare": func(ctx context.Context, c *containerdapi.Client) error {
			_, err := c.SnapshotPrepare(ctx, "overlayfs", "k1", "sha256:p")
			return err
		},
		"Tasks/Create": func(ctx context.Context, c *containerdapi.Client) error {
			_, err := c.TaskCreate(ctx, "web", containerdapi.TaskSpec{})
			return err
		},
		"Tasks/Start": func(ctx context.Context, c *containerdapi.Client) error {
			_, err := c.TaskStart(ctx, "web")
			return err
		},
	}
	for method, call := range calls {
		for _, fault := range []string{"hang-up", "unavailable", "exists"} {
			t.Run(method+", "+fault, func(t *testing.T) {
				var seen []string
				c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
					readRequest(t, r)
					seen = append(seen, r.URL.Path[strings.LastIndex(r.URL.Path[:strings.LastIndex(r.URL.Path, "/")], ".")+1:])
					switch fault {
					case "hang-up":
						panic(http.ErrAbortHandler) // done, perhaps; the answer never came
					case "unavailable":
						fail(w, containerdapi.Unavailable, "the daemon is busy")
					default:
						fail(w, containerdapi.AlreadyExists, "already exists")
					}
				})
				err := call(shortCtx(t), c)
				switch {
				case fault == "exists" && (!errors.Is(err, containerdapi.ErrAlreadyExists) || lost(err)):
					t.Errorf("error %v; want AlreadyExists, not lost", err)
				case fault != "exists" && !lost(err):
					t.Errorf("error %v; want one whose answer was lost", err)
				}
				if want := []string{method}; !slices.Equal(seen, want) {
					t.Errorf("calls %q, want %q", seen, want)
				}
			})
		}
	}
}

// TestBrokenConnection: a call whose connection breaks is retried when it
// is safe to repeat; one that is not (a task or lease create) is sent
// once, and fails as a transport error whose answer was lost.
func TestBrokenConnection(t *testing.T) {
	cases := []struct {
		name      string
		call      func(context.Context, *containerdapi.Client) error
		wantTries int
		wantErr   bool
	}{
		{name: "get", call: func(ctx context.Context, c *containerdapi.Client) error {
			_, err := c.ContainerGet(ctx, "web")
			return err
		}, wantTries: 2},
		{name: "task create", call: func(ctx context.Context, c *containerdapi.Client) error {
			_, err := c.TaskCreate(ctx, "web", containerdapi.TaskSpec{})
			return err
		}, wantTries: 1, wantErr: true},
		{name: "lease create", call: func(ctx context.Context, c *containerdapi.Client) error {
			_, err := c.LeaseCreate(ctx, "web", time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
			return err
		}, wantTries: 1, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n hits
			c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				readRequest(t, r)
				if n.add() == 1 {
					panic(http.ErrAbortHandler)
				}
				answer(w, sub(1, str(1, "web")))
			})
			err := tc.call(shortCtx(t), c)
			var te *containerdapi.TransportError
			if tc.wantErr != (err != nil) || tc.wantErr && (!errors.As(err, &te) || !lost(err)) {
				t.Errorf("error %v, want a transport error, lost: %v", err, tc.wantErr)
			}
			if n.count() != tc.wantTries {
				t.Errorf("%d tries, want %d", n.count(), tc.wantTries)
			}
		})
	}
}

// varint encodes a varint field.
func varint(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

// TestRetryWaits: a call sent again after UNAVAILABLE waits between the
// attempts, at least the 50 ms the backoff starts at: a daemon that is
// busy is not asked again in a loop.
func TestRetryWaits(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		readRequest(t, r)
		mu.Lock()
		defer mu.Unlock()
		if at = append(at, time.Now()); len(at) == 1 {
			fail(w, containerdapi.Unavailable, "busy")
			return
		}
		answer(w, sub(1, str(1, "web")))
	})
	if _, err := c.ContainerGet(shortCtx(t), "web"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 2 || at[1].Sub(at[0]) < 50*time.Millisecond {
		t.Errorf("attempts at %v, want two, 50 ms apart at least", at)
	}
}
