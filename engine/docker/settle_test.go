package docker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// counter counts the calls a fake daemon gets, by name.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[k]++
	return c.n[k]
}

func (c *counter) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

const settleID = "0123456789ab0123456789ab0123456789ab0123456789ab0123456789abcdef"

var settleLabels = map[string]string{"org.waitdaemon.action": "act", "org.waitdaemon.role": "user"}

// settleSpec is a user container's spec that connects to network lan.
func settleSpec() engine.Spec {
	return engine.Spec{Name: "web", Create: &planned{
		CreateRequest: dockerapi.CreateRequest{Config: dockerapi.Config{Image: "alpine:3.20", Labels: settleLabels}},
		connect:       map[string]dockerapi.EndpointSettings{"lan": {}},
	}}
}

// TestSettleLostAnswers: a call whose first attempt the engine carried
// out, its answer then lost (the connection hung up, or a 503), is made
// again by the engine layer, and the repeat meeting the work done is
// success: a removal that finds nothing, a rename that finds the
// container named so, a connect that finds it connected, a create that
// finds its own container (image and labels). A repeat that meets
// anything else fails with the engine's answer.
func TestSettleLostAnswers(t *testing.T) {
	conflict := func(w http.ResponseWriter) {
		refuse(w, http.StatusConflict, `Conflict. The container name "/web" is already in use by container "`+settleID+`". You have to remove (or rename) that container to be able to reuse that name.`)
	}
	created := func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"Id":%q}`, settleID)
	}
	ours := fmt.Sprintf(`{"Id":%q,"Name":"/web","Config":{"Image":"alpine:3.20","Labels":{"org.waitdaemon.action":"act","org.waitdaemon.role":"user","x":"y"}}}`, settleID)
	theirs := fmt.Sprintf(`{"Id":%q,"Name":"/web","Config":{"Image":"alpine:3.20","Labels":{"org.waitdaemon.action":"other","org.waitdaemon.role":"user"}}}`, settleID)
	lost := func(t *testing.T, w http.ResponseWriter) { rr.HangUp(t, w) }
	busy := func(t *testing.T, w http.ResponseWriter) { refuse(w, http.StatusServiceUnavailable, "busy") }
	type answers map[string]func(w http.ResponseWriter) // the answers after the first, by path
	cases := []struct {
		name    string
		call    func(context.Context, *Engine) error
		path    string // the call made again
		first   func(*testing.T, http.ResponseWriter)
		again   answers
		wantN   int    // how often path was sent
		wantErr string // "" for success
	}{
		{name: "remove meets 404", call: func(ctx context.Context, e *Engine) error { return e.Remove(ctx, "web") },
			path: "/containers/web", first: lost, wantN: 2,
			again: answers{"/containers/web": func(w http.ResponseWriter) { refuse(w, http.StatusNotFound, "No such container: web") }}},
		{name: "rename meets itself", call: func(ctx context.Context, e *Engine) error {
			_, err := e.Keep(ctx, engine.Container{ID: settleID, Name: "web"}, "web-1")
			return err
		}, path: "/containers/" + settleID + "/rename", first: lost, wantN: 2,
			again: answers{
				"/containers/" + settleID + "/rename": func(w http.ResponseWriter) { refuse(w, http.StatusConflict, "name web-1 in use") },
				"/containers/" + settleID + "/json":   func(w http.ResponseWriter) { fmt.Fprintf(w, `{"Id":%q,"Name":"/web-1"}`, settleID) },
			}},
		{name: "rename meets another container", call: func(ctx context.Context, e *Engine) error {
			_, err := e.Keep(ctx, engine.Container{ID: settleID, Name: "web"}, "web-1")
			return err
		}, path: "/containers/" + settleID + "/rename", first: lost, wantN: 2, wantErr: "409 name web-1 in use",
			again: answers{
				"/containers/" + settleID + "/rename": func(w http.ResponseWriter) { refuse(w, http.StatusConflict, "name web-1 in use") },
				"/containers/" + settleID + "/json":   func(w http.ResponseWriter) { fmt.Fprintf(w, `{"Id":%q,"Name":"/web"}`, settleID) },
			}},
		{name: "connect meets already exists", call: func(ctx context.Context, e *Engine) error { _, err := e.Create(ctx, settleSpec()); return err },
			path: "/networks/lan/connect", first: lost, wantN: 2,
			again: answers{
				"/containers/create": created,
				"/networks/lan/connect": func(w http.ResponseWriter) {
					refuse(w, http.StatusForbidden, "endpoint with name web already exists in network lan")
				},
			}},
		{name: "connect meets already connected, in a 400", call: func(ctx context.Context, e *Engine) error { _, err := e.Create(ctx, settleSpec()); return err },
			path: "/networks/lan/connect", first: busy, wantN: 2,
			again: answers{
				"/containers/create": created,
				"/networks/lan/connect": func(w http.ResponseWriter) {
					refuse(w, http.StatusBadRequest, "container web is already connected to network lan")
				},
			}},
		{name: "connect meets another error", call: func(ctx context.Context, e *Engine) error { _, err := e.Create(ctx, settleSpec()); return err },
			path: "/networks/lan/connect", first: lost, wantN: 2, wantErr: "404 network lan not found",
			again: answers{
				"/containers/create":    created,
				"/networks/lan/connect": func(w http.ResponseWriter) { refuse(w, http.StatusNotFound, "network lan not found") },
			}},
		{name: "create meets its own container", call: func(ctx context.Context, e *Engine) error { _, err := e.Create(ctx, settleSpec()); return err },
			path: "/containers/create", first: lost, wantN: 2,
			again: answers{
				"/containers/create":   conflict,
				"/containers/web/json": func(w http.ResponseWriter) { fmt.Fprint(w, ours) },
				"/networks/lan/connect": func(w http.ResponseWriter) {
					refuse(w, http.StatusForbidden, "endpoint with name web already exists in network lan")
				},
			}},
		{name: "create meets its own container, its image named otherwise (Podman)", call: func(ctx context.Context, e *Engine) error { _, err := e.Create(ctx, settleSpec()); return err },
			path: "/containers/create", first: lost, wantN: 2,
			again: answers{
				"/containers/create": conflict,
				"/containers/web/json": func(w http.ResponseWriter) {
					fmt.Fprint(w, strings.Replace(ours, `"alpine:3.20"`, `"docker.io/library/alpine:3.20"`, 1))
				},
				"/networks/lan/connect": func(w http.ResponseWriter) {
					refuse(w, http.StatusForbidden, "endpoint with name web already exists in network lan")
				},
			}},
		{name: "create after a 503", call: func(ctx context.Context, e *Engine) error { _, err := e.Create(ctx, settleSpec()); return err },
			path: "/containers/create", first: busy, wantN: 2,
			again: answers{"/containers/create": created, "/networks/lan/connect": func(w http.ResponseWriter) {}}},
		{name: "create meets another's container", call: func(ctx context.Context, e *Engine) error { _, err := e.Create(ctx, settleSpec()); return err },
			path: "/containers/create", first: lost, wantN: 2, wantErr: "is already in use",
			again: answers{
				"/containers/create":   conflict,
				"/containers/web/json": func(w http.ResponseWriter) { fmt.Fprint(w, theirs) },
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got counter
			handlers := map[string]http.HandlerFunc{}
			for p, h := range tc.again {
				handlers[p] = func(w http.ResponseWriter, r *http.Request) {
					if got.add(p) == 1 && p == tc.path {
						tc.first(t, w)
						return
					}
					h(w)
				}
			}
			e := fakeDocker(t, handlers)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := tc.call(ctx, e)
			if n := got.get(tc.path); n != tc.wantN {
				t.Errorf("%s sent %d times, want %d", tc.path, n, tc.wantN)
			}
			if got := errText(err); tc.wantErr == "" && err != nil || tc.wantErr != "" && !strings.Contains(got, tc.wantErr) {
				t.Errorf("error = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

// TestStartLost: a start whose answer was lost (a hang-up, or a 503) is
// made again only if the container has not started since the first was
// sent: a container that exits at once is not running by the repeat,
// which would run it a second time. One lost on and on, the container
// neither running nor started since, is made Repeats times more, then
// fails with the engine's last answer; one whose container cannot then be
// inspected is not made again.
func TestStartLost(t *testing.T) {
	start := func(t *testing.T, w http.ResponseWriter, run func()) { run(); rr.HangUp(t, w) }
	cases := []struct {
		name       string
		first      func(t *testing.T, w http.ResponseWriter, run func()) // the engine's first answer
		again      func(t *testing.T, w http.ResponseWriter, run func()) // nil: runs it unless it runs
		running    bool                                                  // the container runs on after a start
		noInspect  bool
		wantRuns   int
		wantStarts int
		wantErr    string
	}{
		{name: "started, exited at once, answer lost", first: start, wantRuns: 1, wantStarts: 1},
		{name: "started, runs on, answer lost", running: true, first: start, wantRuns: 1, wantStarts: 1},
		{name: "never reached the engine", first: func(t *testing.T, w http.ResponseWriter, _ func()) { rr.HangUp(t, w) }, wantRuns: 1, wantStarts: 2},
		{name: "503, not started", first: func(t *testing.T, w http.ResponseWriter, _ func()) { refuse(w, 503, "busy") }, wantRuns: 1, wantStarts: 2},
		{name: "503 on and on", first: func(t *testing.T, w http.ResponseWriter, _ func()) { refuse(w, 503, "busy") },
			again:    func(t *testing.T, w http.ResponseWriter, _ func()) { refuse(w, 503, "busy") },
			wantRuns: 0, wantStarts: 1 + engine.Repeats, wantErr: "503 busy"},
		{name: "lost, and no inspect", noInspect: true, first: func(t *testing.T, w http.ResponseWriter, _ func()) { refuse(w, 503, "busy") },
			wantRuns: 0, wantStarts: 1, wantErr: "503 busy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var runs, starts int
			startedAt := time.Now().Add(-time.Minute) // an earlier run, before this call
			running := false
			run := func() {
				runs++
				startedAt = time.Now()
				running = tc.running
			}
			e := fakeDocker(t, map[string]http.HandlerFunc{
				"/containers/web/start": func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					defer mu.Unlock()
					starts++
					switch {
					case starts == 1:
						tc.first(t, w, run)
					case tc.again != nil:
						tc.again(t, w, run)
					case running:
						w.WriteHeader(http.StatusNotModified)
					default:
						run()
						w.WriteHeader(http.StatusNoContent)
					}
				},
				"/containers/web/json": func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					defer mu.Unlock()
					if tc.noInspect {
						refuse(w, http.StatusInternalServerError, "cannot say")
						return
					}
					fmt.Fprintf(w, `{"Id":"web","State":{"Running":%v,"StartedAt":%q}}`, running, startedAt.UTC().Format(time.RFC3339Nano))
				},
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := e.Start(ctx, "web")
			mu.Lock()
			defer mu.Unlock()
			if got := errText(err); tc.wantErr == "" && err != nil || tc.wantErr != "" && !strings.Contains(got, tc.wantErr) {
				t.Errorf("Start() error = %q, want %q", got, tc.wantErr)
			}
			if tc.wantErr != "" && engine.IsLost(err) != (tc.name == "503 on and on") {
				t.Errorf("Start() error lost = %v: one not made again is final", engine.IsLost(err))
			}
			if runs != tc.wantRuns || starts != tc.wantStarts {
				t.Errorf("the container ran %d times, from %d starts; want %d, %d", runs, starts, tc.wantRuns, tc.wantStarts)
			}
		})
	}
}

// TestCreateNameHeld: a named create whose first attempt was cut off
// while the engine was still at it holds the name for a moment, answering
// a repeat with a conflict while no container of that name can be
// inspected yet (it is being made, or undone). The create is made again
// until the engine settles it: the container made adopted, or made anew.
// A conflict on a first attempt with no container there is the engine's
// answer.
func TestCreateNameHeld(t *testing.T) {
	for _, tc := range []struct {
		name        string
		made        bool
		lost        bool
		lostAgain   bool // the create that makes it loses its answer first
		wantInspect int
		wantErr     string
	}{
		{name: "made anew", lost: true, wantInspect: 2},
		{name: "made, adopted", made: true, lost: true, wantInspect: 3},
		{name: "not lost", wantInspect: 1, wantErr: "is already in use"},
		{name: "made anew, its answer lost too", lost: true, lostAgain: true, wantInspect: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got counter
			e := fakeDocker(t, map[string]http.HandlerFunc{
				"/containers/create": func(w http.ResponseWriter, r *http.Request) {
					n := got.add("create")
					switch {
					case n == 1 && tc.lost, n == 4 && tc.lostAgain:
						rr.HangUp(t, w)
					case n < 4 || tc.made:
						refuse(w, http.StatusConflict, `Conflict. The container name "/web" is already in use by container "`+settleID+`".`)
					default:
						w.WriteHeader(http.StatusCreated)
						fmt.Fprintf(w, `{"Id":%q}`, settleID)
					}
				},
				"/containers/web/json": func(w http.ResponseWriter, r *http.Request) {
					if n := got.add("inspect"); !tc.made || n < 3 {
						refuse(w, http.StatusNotFound, "No such container: web")
						return
					}
					fmt.Fprintf(w, `{"Id":%q,"Name":"/web","Config":{"Image":"alpine:3.20","Labels":{"org.waitdaemon.action":"act","org.waitdaemon.role":"user"}}}`, settleID)
				},
				"/networks/lan/connect": func(w http.ResponseWriter, r *http.Request) {},
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			id, err := e.Create(ctx, settleSpec())
			if tc.wantErr == "" && (err != nil || id != settleID) || tc.wantErr != "" && !strings.Contains(errText(err), tc.wantErr) {
				t.Errorf("Create() = %q, %v; want %s, error %q", id, err, settleID, tc.wantErr)
			}
			if n := got.get("inspect"); n != tc.wantInspect {
				t.Errorf("%d inspects, want %d", n, tc.wantInspect)
			}
			if !errors.Is(err, dockerapi.ErrConflict) && tc.wantErr != "" {
				t.Errorf("Create() = %v, want the engine's conflict", err)
			}
		})
	}
}

// TestCreateUnnamedLost: an unnamed create whose answer was lost is not
// made again: a second would make a second container.
func TestCreateUnnamedLost(t *testing.T) {
	var got counter
	e := fakeDocker(t, map[string]http.HandlerFunc{
		"/containers/create": func(w http.ResponseWriter, r *http.Request) { got.add("create"); rr.HangUp(t, w) },
	})
	spec := settleSpec()
	spec.Name = ""
	_, err := e.Create(context.Background(), spec)
	if !engine.IsLost(err) || got.get("create") != 1 {
		t.Errorf("Create() = %v after %d creates; want the lost answer after 1", err, got.get("create"))
	}
}
