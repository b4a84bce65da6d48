package docker

import (
	"archive/tar"
	"bytes"
	"context"
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
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// TestReach: an engine that answers is reached; a socket that is missing
// or refuses is one not mounted, and the error says how to mount it; a
// socket that answers otherwise is no Docker engine.
func TestReach(t *testing.T) {
	dir := t.TempDir()
	refusing := filepath.Join(dir, "refusing.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: refusing, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close() // the file stays, and nothing listens: refused
	notDocker := http.NewServeMux()
	notDocker.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>not found</html>", http.StatusNotFound)
	})
	ping := recorded(t, "docker-20.10", "Gone", http.MethodGet, "/_ping", "")
	docker := http.NewServeMux()
	docker.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		answer(w, ping)
	})
	cases := []struct {
		name    string
		socket  string
		wantErr []string // in the error; none: no error
		wantIs  error
	}{
		{name: "a Docker engine", socket: rr.Serve(t, docker)},
		{name: "no socket", socket: filepath.Join(dir, "missing.sock"), wantErr: []string{"cannot reach the Docker engine", "missing.sock", "- /var/run/docker.sock:/var/run/docker.sock"}, wantIs: syscall.ENOENT},
		{name: "refused", socket: refusing, wantErr: []string{"cannot reach the Docker engine", "refusing.sock", "mount its socket"}, wantIs: syscall.ECONNREFUSED},
		{name: "not Docker", socket: rr.Serve(t, notDocker), wantErr: []string{"does not answer like a Docker engine", "404"}, wantIs: dockerapi.ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{C: &dockerapi.Client{Socket: tc.socket, WaitForEngine: -1}}
			err := e.Reach(context.Background())
			if tc.wantErr == nil {
				if err != nil {
					t.Errorf("Reach() = %v, want none", err)
				}
				return
			}
			if err == nil || !errors.Is(err, tc.wantIs) {
				t.Fatalf("Reach() = %v, want an error that is %v", err, tc.wantIs)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Reach() = %q, want it to say %q", err, w)
				}
			}
		})
	}
	t.Run("an engine too old", func(t *testing.T) {
		mux := http.NewServeMux()
		mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "1.11") })
		e := &Engine{C: &dockerapi.Client{Socket: rr.Serve(t, mux)}}
		err := e.Reach(context.Background())
		if err == nil || !strings.Contains(err.Error(), "too old") || strings.Contains(err.Error(), "does not answer like") {
			t.Errorf("Reach() = %v, want the negotiation's error as it is", err)
		}
	})
}

// TestPlanOwnImage: Plan reads the action's own image once (its defaults
// are not the user container's), and its labels join the ones wanted,
// the wanted ones winning; an image that cannot be read fails the plan.
func TestPlanOwnImage(t *testing.T) {
	img := recorded(t, "docker-20.10", "ImageInspect", http.MethodGet, "/images/waitdaemon-fixture:1/json", "")
	gone := recorded(t, "docker-20.10", "ImageInspect", http.MethodGet, "/images/waitdaemon-no-such-image:1/json", "")
	var mu sync.Mutex
	reads := 0
	e := fakeDocker(t, map[string]http.HandlerFunc{
		"/images/{name}/json": func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			reads++
			mu.Unlock()
			if r.PathValue("name") == "waitdaemon-fixture:1" {
				answer(w, img)
				return
			}
			answer(w, gone)
		},
	})
	ref, _ := imageref.Parse("fb:2")
	ctr := dockerapi.Container{ID: "act", Name: "/act", Image: "waitdaemon-fixture:1",
		Config: dockerapi.Config{Image: "waitdaemon-fixture:1", Cmd: []string{"reboot"}, Labels: map[string]string{"team": "a", "role": "action"}}}
	s := engine.Self{ID: "act", Name: "act", Detail: &self{ctr: ctr}}
	want := engine.Want{Name: "act-waitdaemon-user", Image: ref, Labels: map[string]string{"role": "user", "org.waitdaemon.run": "r1"}}
	for range 2 {
		spec, err := e.Plan(context.Background(), s, want)
		if err != nil {
			t.Fatal(err)
		}
		c := spec.Create.(*planned).CreateRequest
		got := fmt.Sprintf("%s %q %v", c.Image, c.Cmd, c.Labels)
		if w := `fb:2 ["reboot"] map[org.waitdaemon.run:r1 role:user team:a]`; got != w {
			t.Errorf("Plan() = %s, want %s", got, w)
		}
		if spec.Name != want.Name {
			t.Errorf("Plan() named %q, want %q", spec.Name, want.Name)
		}
	}
	mu.Lock()
	if reads != 1 {
		t.Errorf("own image read %d times, want once", reads)
	}
	mu.Unlock()
	if got := want.Labels; len(got) != 2 || got["role"] != "user" {
		t.Errorf("the wanted labels changed: %v", got)
	}

	ctr.Image = "waitdaemon-no-such-image:1"
	_, err := e.Plan(context.Background(), engine.Self{ID: "act", Detail: &self{ctr: ctr}}, want)
	if !errors.Is(err, dockerapi.ErrNotFound) || !strings.Contains(err.Error(), "reading this action's own image") {
		t.Errorf("Plan() = %v, want the own image's not found, said so", err)
	}

	t.Run("no version", func(t *testing.T) {
		mux := http.NewServeMux()
		mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "0.9") })
		e := &Engine{C: &dockerapi.Client{Socket: rr.Serve(t, mux)}}
		cfg := dockerapi.Config{}
		_, err := e.Plan(context.Background(), engine.Self{Detail: &self{ctr: ctr, image: &cfg}}, want)
		if err == nil || !strings.Contains(err.Error(), "too old") {
			t.Errorf("Plan() = %v, want the engine's version refused", err)
		}
	})
}

// TestMissingSource: the engines' words for a bind whose source is not
// on the host name that bind; another bind, another failure, or a missing
// source no bind names stays the engine's error.
func TestMissingSource(t *testing.T) {
	mounts := []dockerapi.Mount{
		{Type: "volume", Source: "/data", Target: "/v"},
		{Type: "bind", Source: "/mnt/a", Target: "/a"},
		{Type: "bind", Source: "/mnt/b", Target: "/b"},
	}
	cases := []struct {
		name string
		msg  string
		want string // the source named; "": the error as it was
	}{
		{"Docker", "invalid mount config for type \"bind\": bind source path does not exist: /mnt/b", "/mnt/b"},
		{"Podman", "statfs /mnt/a: no such file or directory", "/mnt/a"},
		{"a volume's source", "statfs /data: no such file or directory", ""},
		{"no bind named", "bind source path does not exist: /elsewhere", ""},
		{"another failure naming a bind", "invalid mode for /mnt/a", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := &dockerapi.Error{Status: 400, Message: tc.msg}
			err := missingSource(in, mounts)
			var ms *engine.MissingSourceError
			switch {
			case tc.want == "" && err != error(in):
				t.Errorf("missingSource() = %v, want the engine's error as it was", err)
			case tc.want != "" && (!errors.As(err, &ms) || ms.Source != tc.want || ms.Target != strings.TrimPrefix(tc.want, "/mnt") || !errors.Is(err, error(in))):
				t.Errorf("missingSource() = %#v, want the bind of %s named, wrapping the engine's error", err, tc.want)
			}
		})
	}
}

// TestStart: a start is the engine's, as recorded: a container started
// twice is no error; one gone is.
func TestStart(t *testing.T) {
	id := "000000000001ffffffffffffffffffffffffffffffffffffffffffffffffffff"
	first := recorded(t, "docker-20.10", "StartTwice", http.MethodPost, id+"/start", "")
	gone := recorded(t, "docker-20.10", "Gone", http.MethodPost, "/rr-gone/start", "")
	var mu sync.Mutex
	starts := 0
	e := fakeDocker(t, map[string]http.HandlerFunc{
		"/containers/{id}/start": func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			starts++
			mu.Unlock()
			if r.PathValue("id") == id {
				answer(w, first)
				return
			}
			answer(w, gone)
		},
	})
	if err := e.Start(context.Background(), id); err != nil {
		t.Errorf("Start() = %v, want none", err)
	}
	if err := e.Start(context.Background(), "rr-gone"); !errors.Is(err, dockerapi.ErrNotFound) {
		t.Errorf("Start() of a container gone = %v, want not found", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if starts != 2 {
		t.Errorf("%d starts sent, want 2", starts)
	}
}

// TestSelfFails: an engine that fails an inspect or the look for the
// token fails Self; a candidate that does not run is passed over; an
// engine that answers it cannot look for the token leaves the one running
// candidate; with no sources given, Self reads its own.
func TestSelfFails(t *testing.T) {
	cases := []struct {
		name      string
		inspect   func(w http.ResponseWriter, id string)
		stat      func(w http.ResponseWriter)
		want      string // the ID found; "" for an error
		wantErr   string
		wantInput bool // the error is the InputError
	}{
		{
			name:    "the inspect fails",
			inspect: func(w http.ResponseWriter, id string) { refuse(w, http.StatusBadRequest, "bad request") },
			wantErr: "finding this action's container: ",
		},
		{
			name: "the other does not run",
			inspect: func(w http.ResponseWriter, id string) {
				fmt.Fprintf(w, `{"Id":%q,"State":{"Running":%v}}`, id, id == actionID)
			},
			stat:      func(w http.ResponseWriter) { refuse(w, http.StatusNotFound, "no such path") },
			wantErr:   "mountinfo " + otherID + " (not running)",
			wantInput: true,
		},
		{
			name: "the engine cannot look, one runs",
			inspect: func(w http.ResponseWriter, id string) {
				fmt.Fprintf(w, `{"Id":%q,"State":{"Running":%v}}`, id, id == actionID)
			},
			stat: func(w http.ResponseWriter) { refuse(w, http.StatusBadRequest, "cannot stat") },
			want: actionID,
		},
		{
			name:    "the look breaks",
			inspect: func(w http.ResponseWriter, id string) { fmt.Fprintf(w, `{"Id":%q,"State":{"Running":true}}`, id) },
			stat:    func(w http.ResponseWriter) { panic(http.ErrAbortHandler) },
			wantErr: "finding this action's container: ",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "1.41") })
			mux.HandleFunc("/v1.41/containers/{id}/json", func(w http.ResponseWriter, r *http.Request) { tc.inspect(w, r.PathValue("id")) })
			mux.HandleFunc("HEAD /v1.41/containers/{id}/archive", func(w http.ResponseWriter, r *http.Request) { tc.stat(w) })
			e := &Engine{C: &dockerapi.Client{Socket: rr.Serve(t, mux), WaitForEngine: -1}, root: t.TempDir(), sources: sharedNetwork}
			s, err := e.Self(context.Background(), "")
			var input engine.InputError
			switch {
			case tc.want != "" && (err != nil || s.ID != tc.want):
				t.Errorf("Self() = %s, %v; want %s", s.ID, err, tc.want)
			case tc.want == "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || errors.As(err, &input) != tc.wantInput):
				t.Errorf("Self() = %s, %v; want an error with %q (input error: %v)", s.ID, err, tc.wantErr, tc.wantInput)
			}
		})
	}

	t.Run("its own sources", func(t *testing.T) {
		t.Setenv("WAITDAEMON_CONTAINER", "")
		mux := http.NewServeMux()
		mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "1.41") })
		mux.HandleFunc("/v1.41/containers/{id}/json", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"Id":%q,"Name":"/self","State":{"Running":true}}`, r.PathValue("id"))
		})
		e := &Engine{C: &dockerapi.Client{Socket: rr.Serve(t, mux)}, root: t.TempDir()}
		s, err := e.Self(context.Background(), "given")
		if err != nil || s.ID != "given" || s.FoundBy != "override" {
			t.Errorf("Self() = %s (%s), %v; want the override", s.ID, s.FoundBy, err)
		}
	})
}

// TestRootDir: the root is / unless a test sets it.
func TestRootDir(t *testing.T) {
	if got := (&Engine{}).rootDir(); got != "/" {
		t.Errorf("rootDir() = %q, want /", got)
	}
	if got := (&Engine{root: "/tmp/r"}).rootDir(); got != "/tmp/r" {
		t.Errorf("rootDir() = %q, want /tmp/r", got)
	}
}

// tarOf is an archive as the engine gives a path: entries of name, type
// and body.
func tarOf(t *testing.T, entries ...tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range entries {
		body := h.Linkname
		if h.Typeflag == tar.TypeReg {
			h.Linkname, h.Size = "", int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write([]byte(body))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReadSaid: the told file is the first regular file of the archive,
// its last newline cut; an archive without one, or cut short, is an
// error that names the file.
func TestReadSaid(t *testing.T) {
	cases := []struct {
		name    string
		archive func(t *testing.T) []byte
		want    string
		wantErr string
	}{
		{"the file", func(t *testing.T) []byte {
			return tarOf(t, tar.Header{Name: "waitdaemon-said", Typeflag: tar.TypeReg, Linkname: "{\"msg\":\"ready\"}\n"})
		}, `{"msg":"ready"}`, ""},
		{"a link before it", func(t *testing.T) []byte {
			return tarOf(t, tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "x"}, tar.Header{Name: "waitdaemon-said", Typeflag: tar.TypeReg, Linkname: "two\n"})
		}, "two", ""},
		{"no file", func(t *testing.T) []byte { return tarOf(t, tar.Header{Name: "d", Typeflag: tar.TypeDir, Mode: 0o755}) }, "", "reading /waitdaemon-said: EOF"},
		{"cut short", func(t *testing.T) []byte {
			b := tarOf(t, tar.Header{Name: "waitdaemon-said", Typeflag: tar.TypeReg, Linkname: strings.Repeat("x", 2000)})
			return b[:1000]
		}, "", "reading /waitdaemon-said: unexpected EOF"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.archive(t)
			e := fakeDocker(t, map[string]http.HandlerFunc{
				"/containers/w/archive": func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/x-tar")
					_, _ = w.Write(body)
				},
			})
			got, err := e.readSaid(context.Background(), "w")
			if got != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && err.Error() != tc.wantErr {
				t.Errorf("readSaid() = %q, %v; want %q, %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestToldFails: following what a waiter tells ends with the engine's
// error when its inspect or archive fails; it ends quietly when the
// waiter is gone, and with the context's error when that ends first.
func TestToldFails(t *testing.T) {
	cases := []struct {
		name    string
		inspect func(w http.ResponseWriter)
		archive func(w http.ResponseWriter)
		timeout time.Duration
		want    string // in the error; "" for none
		wantOut string
	}{
		{
			name:    "the inspect fails",
			inspect: func(w http.ResponseWriter) { refuse(w, http.StatusBadRequest, "bad inspect") },
			want:    "following container waiter: ",
		},
		{
			name:    "gone",
			inspect: func(w http.ResponseWriter) { refuse(w, http.StatusNotFound, "No such container: waiter") },
		},
		{
			name:    "the archive fails",
			inspect: func(w http.ResponseWriter) { fmt.Fprint(w, `{"Id":"waiter","State":{"Running":true}}`) },
			archive: func(w http.ResponseWriter) { refuse(w, http.StatusBadRequest, "bad archive") },
			want:    "following container waiter: ",
		},
		{
			name: "created, not yet started: followed until the context ends",
			inspect: func(w http.ResponseWriter) {
				fmt.Fprint(w, `{"Id":"waiter","State":{"Running":false,"Status":"created"}}`)
			},
			archive: func(w http.ResponseWriter) { refuse(w, http.StatusNotFound, "no such path") },
			timeout: 3 * outputPoll,
			want:    context.DeadlineExceeded.Error(),
		},
		{
			name: "exited: what it told last, once",
			inspect: func(w http.ResponseWriter) {
				fmt.Fprint(w, `{"Id":"waiter","State":{"Running":false,"Status":"exited"}}`)
			},
			archive: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/x-tar")
				_, _ = w.Write(tarOf(t, tar.Header{Name: "waitdaemon-said", Typeflag: tar.TypeReg, Linkname: "last\n"}))
			},
			wantOut: "last\n",
		},
		{
			name: "exited, the file empty",
			inspect: func(w http.ResponseWriter) {
				fmt.Fprint(w, `{"Id":"waiter","State":{"Running":false,"Status":"exited"}}`)
			},
			archive: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/x-tar")
				_, _ = w.Write(tarOf(t, tar.Header{Name: "waitdaemon-said", Typeflag: tar.TypeReg, Linkname: ""}))
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			handlers := map[string]http.HandlerFunc{
				"/containers/waiter/json": func(w http.ResponseWriter, r *http.Request) { tc.inspect(w) },
			}
			if tc.archive != nil {
				handlers["/containers/waiter/archive"] = func(w http.ResponseWriter, r *http.Request) { tc.archive(w) }
			}
			e := fakeDocker(t, handlers)
			// Bounded even where no end is wanted: a follow that never
			// ends fails here, not at the test binary's timeout.
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			var out bytes.Buffer
			err := e.told(ctx, "waiter", &out)
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("told() = %v, want an error with %q", err, tc.want)
			}
			if out.String() != tc.wantOut {
				t.Errorf("told() wrote %q, want %q", out.String(), tc.wantOut)
			}
		})
	}
}

// TestOutputFails: a log that fails otherwise than unreadable is the
// error; a log read is passed on, its standard output alone (Docker
// 20.10's recorded frames: "err" on stderr, then "out" on stdout).
func TestOutputFails(t *testing.T) {
	logs := recorded(t, "docker-20.10", "RunToExit", http.MethodGet, "/logs", "stderr=1&stdout=1&tail=10")
	e := fakeDocker(t, map[string]http.HandlerFunc{
		"/containers/gone/logs": func(w http.ResponseWriter, r *http.Request) {
			refuse(w, http.StatusNotFound, "No such container: gone")
		},
		"/containers/w/logs": func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("follow") != "1" {
				refuse(w, http.StatusBadRequest, "not followed")
				return
			}
			answer(w, logs)
		},
	})
	var out bytes.Buffer
	if err := e.Output(context.Background(), "gone", &out); !errors.Is(err, dockerapi.ErrNotFound) || out.Len() != 0 {
		t.Errorf("Output() = %v, %q; want not found, nothing written", err, out.String())
	}
	if err := e.Output(context.Background(), "w", &out); err != nil || out.String() != "out\n" {
		t.Errorf("Output() = %v, %q; want the log", err, out.String())
	}
}

// TestTellFails: a line that cannot be written, or renamed into place,
// is an error, and leaves no file aside.
func TestTellFails(t *testing.T) {
	t.Run("no root", func(t *testing.T) {
		e := &Engine{root: filepath.Join(t.TempDir(), "missing")}
		if err := e.Tell(context.Background(), []byte("x")); err == nil || !strings.HasPrefix(err.Error(), "telling phase 1: ") {
			t.Errorf("Tell() = %v, want the write's error", err)
		}
	})
	t.Run("a directory in the way", func(t *testing.T) {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, saidFile, "x"), 0o755); err != nil {
			t.Fatal(err)
		}
		e := &Engine{root: root}
		if err := e.Tell(context.Background(), []byte("x")); err == nil || !strings.HasPrefix(err.Error(), "telling phase 1: ") {
			t.Errorf("Tell() = %v, want the rename's error", err)
		}
		if _, err := os.Stat(filepath.Join(root, saidFile+".new")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the line written aside is left: %v", err)
		}
	})
}

// TestFollowFails: a wait or a log read that fails is Follow's error; a
// TTY's log is asked for as one, from the given time.
func TestFollowFails(t *testing.T) {
	sent := time.Now()
	started := sent.Add(10 * time.Millisecond).Format(time.RFC3339Nano)
	var mu sync.Mutex
	var logQuery string
	e := fakeDocker(t, map[string]http.HandlerFunc{
		"/containers/gone/wait": func(w http.ResponseWriter, r *http.Request) {
			refuse(w, http.StatusNotFound, "No such container: gone")
		},
		"/containers/{id}/wait": func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"StatusCode":0}`) },
		"/containers/{id}/json": func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"Id":%q,"Path":"sh","Args":["-c","x"],"Config":{"Image":"x:1","Tty":true},"State":{"StartedAt":%q,"FinishedAt":"f"}}`, r.PathValue("id"), started)
		},
		"/containers/bad/logs": func(w http.ResponseWriter, r *http.Request) { refuse(w, http.StatusBadRequest, "bad logs") },
		"/containers/tty/logs": func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			logQuery = r.URL.RawQuery
			mu.Unlock()
			fmt.Fprint(w, "a\r\nb\r\nc\r\n")
		},
	})
	if _, err := e.Follow(context.Background(), "gone", sent, 5, ""); !errors.Is(err, dockerapi.ErrNotFound) {
		t.Errorf("Follow() of a container gone = %v, want not found", err)
	}
	run, err := e.Follow(context.Background(), "bad", sent, 5, "")
	if err == nil || !strings.Contains(err.Error(), "bad logs") || run.Image != "x:1" {
		t.Errorf("Follow() = %+v, %v; want the run with the log's error", run, err)
	}
	run, err = e.Follow(context.Background(), "tty", sent, 2, "2026-01-01T00:00:01.5Z")
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%q %q %s %s %q", run.Output, run.Command, run.StartedAt, run.FinishedAt, run.Note)
	if diff := linediff.Text(fmt.Sprintf(`["b" "c"] ["sh" "-c" "x"] %s f ""`, started)+"\n", got+"\n"); diff != "" {
		t.Errorf("Follow() (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	if logQuery != "since=1767225601.500000000&stderr=1&stdout=1&tail=2" {
		t.Errorf("logs asked with %q", logQuery)
	}
}
