package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// TestWaitRun: a wait that answers for an earlier run (the container
// still running, or its StartedAt before the start was sent) is asked
// again, and the run returned is the one that was started.
func TestWaitRun(t *testing.T) {
	started := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	type state struct {
		running bool
		started time.Time
		code    int
	}
	earlier := state{started: started.Add(-3 * time.Second), code: 3}
	cases := []struct {
		name      string
		states    []state // what each inspect shows, in turn; the last repeats
		wantCode  int
		wantWaits int
	}{
		{"the run that was started", []state{{started: started.Add(5 * time.Millisecond), code: 7}}, 7, 1},
		{"an earlier run's answer, then this run's", []state{earlier, earlier, {started: started.Add(time.Millisecond)}}, 0, 3},
		{"still running, then stopped", []state{{running: true, started: started}, {started: started, code: 4}}, 4, 2},
		{"a coarse clock a little behind", []state{{started: started.Add(-200 * time.Millisecond), code: 5}}, 5, 1},
		{"never this run: the last answer after the bound", []state{earlier}, 3, staleWaits},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			waits, inspects := 0, 0
			mux := http.NewServeMux()
			mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Api-Version", "1.41")
				fmt.Fprint(w, "OK")
			})
			mux.HandleFunc("/v1.41/containers/u/wait", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				waits++
				s := tc.states[min(inspects, len(tc.states)-1)]
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"StatusCode":%d}`, s.code)
			})
			mux.HandleFunc("/v1.41/containers/u/json", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				s := tc.states[min(inspects, len(tc.states)-1)]
				inspects++
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"Id":"u","State":{"Running":%v,"ExitCode":%d,"StartedAt":%q}}`,
					s.running, s.code, s.started.Format(time.RFC3339Nano))
			})
			c := &dockerapi.Client{Socket: rr.Serve(t, mux)}
			// Bounded: a wait that asks on and on fails here, not at the
			// test binary's timeout.
			ctx, cancel := context.WithTimeout(context.Background(), 4*staleWaits*staleWaitPause)
			defer cancel()
			ctr, code, err := waitRun(ctx, c, "u", started)
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode || waits != tc.wantWaits || ctr.ID != "u" {
				t.Errorf("waitRun() = exit %d after %d waits, want exit %d after %d", code, waits, tc.wantCode, tc.wantWaits)
			}
		})
	}
}

// TestWaitRunCancelled: a signal while waitRun pauses between asks ends it
// at once.
func TestWaitRunCancelled(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "1.41") })
	mux.HandleFunc("/v1.41/containers/u/wait", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"StatusCode":0}`) })
	mux.HandleFunc("/v1.41/containers/u/json", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"Id":"u","State":{"Running":true,"StartedAt":"2026-01-01T00:00:10Z"}}`)
	})
	c := &dockerapi.Client{Socket: rr.Serve(t, mux)}
	ctx, cancel := context.WithTimeout(context.Background(), 3*staleWaitPause)
	defer cancel()
	_, _, err := waitRun(ctx, c, "u", time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC))
	if err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Errorf("waitRun() = %v, want the context's deadline", err)
	}
}

// TestActionExited: the action's exit time comes from the engine, through
// the wait or, on Podman, through polling its state, whichever learns it
// first; a container gone counts as removed. Docker's comes from the
// wait's answer alone, with no poll.
func TestActionExited(t *testing.T) {
	finished := time.Now().Add(-time.Second).UTC().Truncate(time.Millisecond)
	cases := []struct {
		name        string
		docker      bool // the engine is Docker, not Podman
		waitBlocks  bool // the wait answers only when cancelled (Podman, late)
		gone        bool
		runningFor  int // inspects that still show it running
		wantExited  time.Time
		wantRemoved bool
		wantCode    int // known unless the container is gone
	}{
		{name: "the poll sees the exit first", waitBlocks: true, runningFor: 2, wantExited: finished, wantCode: 137},
		{name: "the wait answers first", wantExited: finished, wantCode: 3},
		{name: "Docker: the wait alone", docker: true, wantExited: finished, wantCode: 3},
		{name: "gone", gone: true, wantRemoved: true},
		// Phase 1 pulls while the waiter waits: the action can run long
		// after the waiter began, and its exit is still seen by the poll.
		{name: "the action runs on while phase 1 pulls", waitBlocks: true, runningFor: 25, wantExited: finished, wantCode: 137},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			inspects := 0
			mux := http.NewServeMux()
			mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Api-Version", "1.41")
				if !tc.docker {
					w.Header().Set("Libpod-Api-Version", "4.3.1")
				}
			})
			mux.HandleFunc("/v1.41/containers/act/wait", func(w http.ResponseWriter, r *http.Request) {
				switch {
				case tc.docker:
					time.Sleep(5 * exitPollEvery)
					fmt.Fprint(w, `{"StatusCode":3}`)
				case tc.gone:
					w.WriteHeader(http.StatusNotFound)
					fmt.Fprint(w, `{"message":"No such container: act"}`)
				case tc.waitBlocks:
					<-r.Context().Done()
				default:
					fmt.Fprint(w, `{"StatusCode":3}`)
				}
			})
			mux.HandleFunc("/v1.41/containers/act/json", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				inspects++
				running := inspects <= tc.runningFor
				mu.Unlock()
				if tc.gone {
					w.WriteHeader(http.StatusNotFound)
					fmt.Fprint(w, `{"message":"No such container: act"}`)
					return
				}
				fmt.Fprintf(w, `{"Id":"act","State":{"Running":%v,"ExitCode":%d,"FinishedAt":%q}}`, running, tc.wantCode, finished.Format(time.RFC3339Nano))
			})
			c := &dockerapi.Client{Socket: rr.Serve(t, mux)}
			e := &Engine{C: c}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			began := time.Now()
			exit, err := e.ActionExited(ctx, "act")
			exited, removed := exit.At, exit.Removed
			if err != nil || removed != tc.wantRemoved {
				t.Fatalf("ActionExited() = %v, removed %v, %v; want removed %v", exited, removed, err, tc.wantRemoved)
			}
			if exit.Known != !tc.gone || exit.Code != tc.wantCode {
				t.Errorf("ActionExited() = exit code %d (known %v), want %d (known %v)", exit.Code, exit.Known, tc.wantCode, !tc.gone)
			}
			if !tc.wantExited.IsZero() && !exited.Equal(tc.wantExited) {
				t.Errorf("ActionExited() = %v, want the engine's FinishedAt %v", exited, tc.wantExited)
			}
			if took := time.Since(began); !tc.docker && took > time.Duration(tc.runningFor)*exitPollEvery+2*time.Second {
				t.Errorf("ActionExited() took %v", took)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.docker && inspects != 1 {
				t.Errorf("%d inspects of the action on Docker; want one, for the exit's time once the wait answers, and no poll", inspects)
			}
		})
	}
}

// TestWaiterResultMount: the result file's directory reaches the waiter
// as a bind mount, which the engine refuses when the host lacks its
// source (a bind it would make, on the host's in-memory root), and Create
// says which source is missing. The message is Docker 20.10's.
func TestWaiterResultMount(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "1.41") })
	var body []byte
	mux.HandleFunc("/v1.41/containers/create", func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"message":"invalid mount config for type \"bind\": bind source path does not exist: /mnt/target/var/wd"}`)
	})
	e := &Engine{C: &dockerapi.Client{Socket: rr.Serve(t, mux)}}
	act := engine.Self{ID: "act", Name: "act", Detail: &self{ctr: dockerapi.Container{ID: "act", Image: "sha256:wd"}}}
	spec := e.PlanWaiter(act, engine.Waiter{Name: "act-waitdaemon-waiter", Bind: engine.Bind{Host: "/mnt/target/var/wd", Container: "/run/waitdaemon-result"}})
	hc := spec.Create.(*planned).HostConfig
	want := []dockerapi.Mount{{Type: "bind", Source: "/mnt/target/var/wd", Target: "/run/waitdaemon-result"}}
	if !slices.EqualFunc(hc.Mounts, want, func(a, b dockerapi.Mount) bool {
		return a.Type == b.Type && a.Source == b.Source && a.Target == b.Target && !a.ReadOnly
	}) ||
		slices.ContainsFunc(hc.Binds, func(b string) bool { return strings.Contains(b, "/mnt/target") }) {
		t.Errorf("binds %q, mounts %+v; want the result directory as a bind mount alone", hc.Binds, hc.Mounts)
	}
	_, err := e.Create(context.Background(), spec)
	var missing *engine.MissingSourceError
	if !errors.As(err, &missing) || missing.Source != "/mnt/target/var/wd" || missing.Target != "/run/waitdaemon-result" {
		t.Errorf("Create() = %v; want the missing source named", err)
	}
	if !strings.Contains(string(body), `"Mounts":[{"Type":"bind","Source":"/mnt/target/var/wd","Target":"/run/waitdaemon-result"}]`) {
		t.Errorf("create body %s; want the bind mount", body)
	}
}

// TestWaitActionRefused: a wait the engine refuses (it answered, and
// cannot wait) is asked again while the action still runs, a second
// later; once it does not run, the inspect says how and when it stopped
// (a failed action must not hand off); one gone counts as removed, and
// one the engine cannot inspect either exits from now, its code unknown.
func TestWaitActionRefused(t *testing.T) {
	finished := time.Now().Add(-time.Second).UTC().Truncate(time.Millisecond)
	cases := []struct {
		name        string
		runningFor  int // inspects that show it running
		finished    string
		inspect     int // the inspect's status when it fails
		wantWaits   int
		wantKnown   bool
		wantAt      time.Time // zero: at or after the call
		wantRemoved bool
	}{
		{name: "the action runs on: asked again", runningFor: 1, wantWaits: 2, wantKnown: true},
		{name: "the action stopped", runningFor: 0, wantWaits: 1, wantKnown: true},
		{name: "the action stopped, and the engine says when", finished: finished.Format(time.RFC3339Nano), wantWaits: 1, wantKnown: true, wantAt: finished},
		{name: "the action gone", inspect: http.StatusNotFound, wantWaits: 1, wantRemoved: true},
		{name: "the inspect fails too", inspect: http.StatusInternalServerError, wantWaits: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			waits, inspects := 0, 0
			mux := http.NewServeMux()
			mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "1.41") })
			mux.HandleFunc("/v1.41/containers/act/wait", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				if waits++; waits == 1 {
					w.WriteHeader(http.StatusBadRequest)
					fmt.Fprint(w, `{"message":"cannot wait on this container"}`)
					return
				}
				fmt.Fprint(w, `{"StatusCode":5}`)
			})
			mux.HandleFunc("/v1.41/containers/act/json", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				inspects++
				if tc.inspect != 0 {
					refuse(w, tc.inspect, "no such container: act")
					return
				}
				fmt.Fprintf(w, `{"Id":"act","State":{"Running":%v,"ExitCode":5,"FinishedAt":%q}}`, inspects <= tc.runningFor, tc.finished)
			})
			e := &Engine{C: &dockerapi.Client{Socket: rr.Serve(t, mux)}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			began := time.Now()
			exit, err := e.waitAction(ctx, "act")
			at := tc.wantAt.Equal(exit.At) || tc.wantAt.IsZero() && !exit.At.Before(began)
			if err != nil || exit.Known != tc.wantKnown || tc.wantKnown && exit.Code != 5 || !at || exit.Removed != tc.wantRemoved {
				t.Errorf("waitAction() = %+v, %v; want known %v (code 5), removed %v, at %v (zero: at or after %v)", exit, err, tc.wantKnown, tc.wantRemoved, tc.wantAt, began)
			}
			mu.Lock()
			defer mu.Unlock()
			if waits != tc.wantWaits {
				t.Errorf("asked to wait %d times, want %d", waits, tc.wantWaits)
			}
			if took := time.Since(began); tc.wantWaits > 1 && took < time.Second {
				t.Errorf("asked again after %v, want a second", took)
			}
		})
	}
}

// TestFinishedAt: the engine's FinishedAt counts when it is a time, not
// Docker's zero time for a container that never stopped, and not after
// now.
func TestFinishedAt(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	cases := []struct {
		finished string
		want     bool
	}{
		{"2026-01-01T00:00:09.5Z", true},
		{"0001-01-01T00:00:00Z", false},
		{"0002-01-01T00:00:00Z", true},
		{"2026-01-01T00:00:10Z", false},
		{"2026-01-01T00:00:11Z", false},
		{"", false},
		{"yesterday", false},
	}
	for _, tc := range cases {
		ctr := dockerapi.Container{}
		ctr.State.FinishedAt = tc.finished
		if got, ok := finishedAt(ctr, now); ok != tc.want || ok && got.Format(time.RFC3339Nano) != tc.finished {
			t.Errorf("finishedAt(%q) = %v, %v; want %v", tc.finished, got, ok, tc.want)
		}
	}
}

// TestPlanWaiter: the waiter of a privileged tink-worker action (recorded)
// runs waitdaemon's own image by ID, as /waitdaemon with phase 1's
// arguments, unprivileged, in a pid namespace of its own, on the host's
// network, with only the socket's directory bound in, read-only at
// /run/waitdaemon-engine, the action's log config, and auto-remove; null
// masked and read-only paths leave the engine's defaults
// (docs/how-it-works.md: Phase 2, the waiter).
func TestPlanWaiter(t *testing.T) {
	data, err := os.ReadFile("../../testdata/inherit/tink-worker-reboot.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ Container dockerapi.Container }
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	act := rec.Container
	if !act.HostConfig.Privileged || act.HostConfig.PidMode != "host" {
		t.Fatalf("the recorded action is not privileged with pid host: %+v", act.HostConfig)
	}
	e := &Engine{C: &dockerapi.Client{Socket: "/var/run/docker.sock"}}
	spec := e.PlanWaiter(engine.Self{ID: act.ID, Name: "action_reboot", Detail: &self{ctr: act}}, engine.Waiter{
		Name: "action_reboot-waitdaemon-waiter", Labels: map[string]string{"org.waitdaemon.role": "waiter"},
		Args: []string{"waiter", "--user-container=action_reboot-waitdaemon-user"}, Env: []string{"WAITDAEMON_VERBOSE=true"},
	})
	got, err := json.MarshalIndent(spec.Create.(*planned).CreateRequest, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "Env": [
    "DOCKER_HOST=unix:///run/waitdaemon-engine/docker.sock",
    "WAITDAEMON_VERBOSE=true"
  ],
  "Cmd": [
    "waiter",
    "--user-container=action_reboot-waitdaemon-user"
  ],
  "Image": "` + act.Image + `",
  "Entrypoint": [
    "/waitdaemon"
  ],
  "Labels": {
    "org.waitdaemon.role": "waiter"
  },
  "HostConfig": {
    "Binds": [
      "/var/run:/run/waitdaemon-engine:ro"
    ],
    "LogConfig": {
      "Type": "json-file"
    },
    "NetworkMode": "host",
    "MaskedPaths": null,
    "ReadonlyPaths": null
  }
}`
	if diff := linediff.Text(want+"\n", string(got)+"\n"); diff != "" {
		t.Errorf("the waiter's create request (-want +got):\n%s", diff)
	}
	if spec.Name != "action_reboot-waitdaemon-waiter" || !strings.HasPrefix(act.Image, "sha256:") {
		t.Errorf("the waiter is %s from %s; want its own name, from the action's image ID", spec.Name, act.Image)
	}
}

// syncLog is a log written and read from several goroutines.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWaitActionLost: a wait the engine breaks off without an answer
// (each attempt of the client's too) is ErrNoAnswer, asked once, with no
// inspect: the action may well still run, and the waiter asks again.
func TestWaitActionLost(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	e := fakeDocker(t, map[string]http.HandlerFunc{
		"/containers/act/wait": func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			asked = append(asked, "wait")
			mu.Unlock()
			panic(http.ErrAbortHandler) // the connection breaks, no answer
		},
		"/containers/act/json": func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			asked = append(asked, "inspect")
			mu.Unlock()
			refuse(w, http.StatusNotFound, "No such container: act")
		},
	})
	e.C.WaitForEngine = -1
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exit, err := e.waitAction(ctx, "act")
	if !errors.Is(err, engine.ErrNoAnswer) || exit != (engine.Exit{}) {
		t.Errorf("waitAction() = %+v, %v; want no exit, ErrNoAnswer", exit, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(asked, "inspect") || len(asked) == 0 {
		t.Errorf("asked %q; want waits alone", asked)
	}
}

// TestWaitActionCancelled: a wait ended by the context counts the exit
// from now, its code unknown: the waiter is being stopped.
func TestWaitActionCancelled(t *testing.T) {
	e := fakeDocker(t, map[string]http.HandlerFunc{
		"/containers/act/wait": func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
	})
	ctx, cancel := context.WithCancel(context.Background())
	began := time.Now()
	go func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	exit, err := e.waitAction(ctx, "act")
	if err != nil || exit.Known || exit.Removed || exit.At.Before(began) {
		t.Errorf("waitAction() = %+v, %v; want an exit from now, code unknown", exit, err)
	}
}

// TestPollExitGivesUp: the poll stops quietly at the first inspect that
// fails, and sends nothing; a container stopped without a time sends
// nothing either.
func TestPollExitGivesUp(t *testing.T) {
	cases := []struct {
		name    string
		inspect func(w http.ResponseWriter)
	}{
		{"the inspect fails", func(w http.ResponseWriter) { refuse(w, http.StatusNotFound, "No such container: act") }},
		{"stopped, no time", func(w http.ResponseWriter) { fmt.Fprint(w, `{"Id":"act","State":{"Running":false,"ExitCode":1}}`) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			inspects := 0
			e := fakeDocker(t, map[string]http.HandlerFunc{
				"/containers/act/json": func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					inspects++
					mu.Unlock()
					tc.inspect(w)
				},
			})
			exited := make(chan engine.Exit, 1)
			pollExit(context.Background(), e.C, "act", exited)
			select {
			case x := <-exited:
				t.Errorf("pollExit() sent %+v, want nothing", x)
			default:
			}
			mu.Lock()
			defer mu.Unlock()
			if inspects != 1 {
				t.Errorf("%d inspects, want 1", inspects)
			}
		})
	}
}

// TestWaitRunFails: a wait or an inspect that fails is waitRun's error.
func TestWaitRunFails(t *testing.T) {
	e := fakeDocker(t, map[string]http.HandlerFunc{
		"/containers/nowait/wait":    func(w http.ResponseWriter, r *http.Request) { refuse(w, http.StatusBadRequest, "bad wait") },
		"/containers/noinspect/wait": func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"StatusCode":0}`) },
		"/containers/noinspect/json": func(w http.ResponseWriter, r *http.Request) { refuse(w, http.StatusBadRequest, "bad inspect") },
	})
	if _, _, err := waitRun(context.Background(), e.C, "nowait", time.Now()); err == nil || !strings.Contains(err.Error(), "following nowait: ") || !strings.Contains(err.Error(), "bad wait") {
		t.Errorf("waitRun() = %v, want the wait's error", err)
	}
	if _, _, err := waitRun(context.Background(), e.C, "noinspect", time.Now()); err == nil || !strings.Contains(err.Error(), "bad inspect") {
		t.Errorf("waitRun() = %v, want the inspect's error", err)
	}
}

// TestWaitRunLost: a wait the engine breaks off without an answer (each
// attempt of the client's too) is ErrNoAnswer: the run may go on, and the
// waiter asks again.
func TestWaitRunLost(t *testing.T) {
	e := fakeDocker(t, map[string]http.HandlerFunc{
		"/containers/run/wait": func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) },
	})
	e.C.WaitForEngine = -1
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, _, err := waitRun(ctx, e.C, "run", time.Now()); !errors.Is(err, engine.ErrNoAnswer) {
		t.Errorf("waitRun() error = %v; want ErrNoAnswer", err)
	}
}

// TestEnd: the waiter removes its own container, by name, forcibly (it
// runs: the engine kills it first), with its volumes.
func TestEnd(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	e := fakeDocker(t, map[string]http.HandlerFunc{
		"/containers/{id}": func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodDelete {
				refuse(w, http.StatusMethodNotAllowed, r.Method)
				return
			}
			mu.Lock()
			asked = append(asked, r.PathValue("id")+"?"+r.URL.RawQuery)
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		},
	})
	if err := e.End(context.Background(), "act-waitdaemon-waiter"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0] != "act-waitdaemon-waiter?force=1&v=1" {
		t.Errorf("removals asked: %q; want act-waitdaemon-waiter, forced, with its volumes", asked)
	}
}

// TestEndEngineGone: the removal of the waiter's own container on an
// engine that is gone (its socket unlinked, as a stopping dockerd leaves
// it) ends with its ctx, not the waiter's minute of waiting for it.
func TestEndEngineGone(t *testing.T) {
	e := &Engine{C: &dockerapi.Client{Socket: t.TempDir() + "/docker.sock", WaitForEngine: engine.WaiterWaitForEngine}}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := e.End(ctx, "act-waitdaemon-waiter")
	if took := time.Since(began); err == nil || took > 2*time.Second {
		t.Errorf("End() = %v after %v; want it cut at its ctx's end, 200 ms", err, took)
	}
}

// TestDescribe: what a created container will run is its inspect's
// image and command, as Follow gives them once it ran.
func TestDescribe(t *testing.T) {
	e := fakeDocker(t, map[string]http.HandlerFunc{
		"/containers/{id}/json": func(w http.ResponseWriter, r *http.Request) {
			if r.PathValue("id") != "act-waitdaemon-user" {
				refuse(w, http.StatusNotFound, "No such container: "+r.PathValue("id"))
				return
			}
			fmt.Fprint(w, `{"Id":"u","Path":"/usr/bin/kexec","Args":["-e"],"Config":{"Image":"quay.io/tinkerbell/actions/kexec:latest"},"State":{"Status":"created"}}`)
		},
	})
	image, command, err := e.Describe(context.Background(), "act-waitdaemon-user")
	if err != nil || image != "quay.io/tinkerbell/actions/kexec:latest" || !slices.Equal(command, []string{"/usr/bin/kexec", "-e"}) {
		t.Errorf("Describe() = %q, %q, %v; want the image and /usr/bin/kexec -e", image, command, err)
	}
	if _, _, err := e.Describe(context.Background(), "gone"); !errors.Is(err, dockerapi.ErrNotFound) {
		t.Errorf("Describe(gone) = %v; want not found", err)
	}
}
