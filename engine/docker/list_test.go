package docker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// fakeDocker is an engine on a fake daemon of handlers, by path after the
// API version (1.41).
func fakeDocker(t *testing.T, handlers map[string]http.HandlerFunc) *Engine {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "1.41") })
	for p, h := range handlers {
		mux.HandleFunc("/v1.41"+p, h)
	}
	return &Engine{C: &dockerapi.Client{Socket: rr.Serve(t, mux)}}
}

// refuse answers with the daemon's message and status (none that is
// asked again).
func refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"message":%q}`, msg)
}

// TestList: List names each container labelled so, says whether it runs
// (running, paused, restarting) and whether it ran: every state but
// created, and a created one whose start was tried and failed, which only
// its inspect shows.
func TestList(t *testing.T) {
	list := `[
		{"Id":"run","Names":["/act-waitdaemon-waiter"],"State":"running","Labels":{"k":"v"}},
		{"Id":"pau","Names":["/p"],"State":"paused"},
		{"Id":"res","Names":["/r"],"State":"restarting"},
		{"Id":"exi","Names":["/e"],"State":"exited"},
		{"Id":"dea","Names":["/d"],"State":"dead"},
		{"Id":"new","Names":["/n"],"State":"created"},
		{"Id":"bad","Names":["/b"],"State":"created"},
		{"Id":"cod","Names":["/c"],"State":"created"},
		{"Id":"gon","Names":["/g"],"State":"created"},
		{"Id":"noname","State":"created"}
	]`
	inspect := map[string]string{
		"new":    `{"Id":"new","State":{"Status":"created"}}`,
		"bad":    `{"Id":"bad","State":{"Status":"created","Error":"exec: \"/x\": no such file","ExitCode":127}}`,
		"cod":    `{"Id":"cod","State":{"Status":"created","ExitCode":126}}`,
		"noname": `{"Id":"noname","State":{"Status":"created"}}`,
	}
	var mu sync.Mutex
	var inspected []string
	var filters string
	e := fakeDocker(t, map[string]http.HandlerFunc{
		"/containers/json": func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			filters = r.URL.Query().Get("filters")
			mu.Unlock()
			fmt.Fprint(w, list)
		},
		"/containers/{id}/json": func(w http.ResponseWriter, r *http.Request) {
			id := r.PathValue("id")
			mu.Lock()
			inspected = append(inspected, id)
			mu.Unlock()
			if s, ok := inspect[id]; ok {
				fmt.Fprint(w, s)
				return
			}
			refuse(w, http.StatusNotFound, "No such container: "+id) // gone since the list
		},
	})
	got, err := e.List(context.Background(), "org.waitdaemon.role", "waiter")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, c := range got {
		lines = append(lines, fmt.Sprintf("%s %s ran=%v running=%v state=%s labels=%v", c.ID, c.Name, c.Ran, c.Running, c.State, c.Labels))
	}
	want := []string{
		"run act-waitdaemon-waiter ran=true running=true state=running labels=map[k:v]",
		"pau p ran=true running=true state=paused labels=map[]",
		"res r ran=true running=true state=restarting labels=map[]",
		"exi e ran=true running=false state=exited labels=map[]",
		"dea d ran=true running=false state=dead labels=map[]",
		"new n ran=false running=false state=created labels=map[]",
		"bad b ran=true running=false state=created labels=map[]",
		"cod c ran=true running=false state=created labels=map[]",
		"gon g ran=false running=false state=created labels=map[]",
		"noname noname ran=false running=false state=created labels=map[]",
	}
	if diff := linediff.Lines(want, lines); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if diff := linediff.Lines([]string{"new", "bad", "cod", "gon", "noname"}, inspected); diff != "" {
		t.Errorf("inspected (-want +got):\n%s", diff)
	}
	if filters != `{"label":["org.waitdaemon.role=waiter"]}` {
		t.Errorf("filters = %s", filters)
	}

	t.Run("the list fails", func(t *testing.T) {
		e := fakeDocker(t, map[string]http.HandlerFunc{"/containers/json": func(w http.ResponseWriter, r *http.Request) {
			refuse(w, http.StatusBadRequest, "invalid filter")
		}})
		if got, err := e.List(context.Background(), "k", "v"); err == nil || !strings.Contains(err.Error(), "invalid filter") || got != nil {
			t.Errorf("List = %v, %v; want the daemon's error", got, err)
		}
	})
}

// TestKeepRemoveHasImage: the calls that answer yes, no or the daemon's
// error: a container already gone is removed; an image not there is not
// present, which is no error.
func TestKeepRemoveHasImage(t *testing.T) {
	type call struct {
		status int
		msg    string
	}
	cases := []struct {
		name   string
		answer call
		want   string
	}{
		{name: "done", answer: call{status: 0}, want: "keep: kept-name <nil>; remove: <nil>; has image: true <nil>"},
		{name: "not found", answer: call{http.StatusNotFound, "no such thing"}, want: `keep:  renaming container "c1" to "kept-name": 404 no such thing; remove: <nil>; has image: false <nil>`},
		{name: "conflict", answer: call{http.StatusConflict, "in use"}, want: `keep:  renaming container "c1" to "kept-name": 409 in use; remove: removing container "c1": 409 in use; has image: false inspecting image "reboot:1": 409 in use`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var queries []string
			reply := func(ok int, body string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					queries = append(queries, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
					mu.Unlock()
					if tc.answer.status != 0 {
						refuse(w, tc.answer.status, tc.answer.msg)
						return
					}
					w.WriteHeader(ok)
					fmt.Fprint(w, body)
				}
			}
			e := fakeDocker(t, map[string]http.HandlerFunc{
				"/containers/c1/rename": reply(http.StatusNoContent, ""),
				"/containers/c1":        reply(http.StatusNoContent, ""),
				"/images/reboot:1/json": reply(http.StatusOK, `{"Id":"sha256:1"}`),
			})
			ctx := context.Background()
			name, kerr := e.Keep(ctx, engine.Container{ID: "c1", Name: "act-waitdaemon-user"}, "kept-name")
			rerr := e.Remove(ctx, "c1")
			ref, err := imageref.Parse("reboot:1")
			if err != nil {
				t.Fatal(err)
			}
			has, herr := e.HasImage(ctx, ref)
			got := fmt.Sprintf("keep: %s %v; remove: %v; has image: %v %v", name, errText(kerr), errText(rerr), has, errText(herr))
			if diff := linediff.Text(tc.want+"\n", got+"\n"); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			want := []string{"POST /v1.41/containers/c1/rename?name=kept-name", "DELETE /v1.41/containers/c1?force=1&v=1", "GET /v1.41/images/reboot:1/json?"}
			mu.Lock()
			defer mu.Unlock()
			if diff := linediff.Lines(want, queries); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// errText is an error's message without the API error's method and
// path, or <nil>.
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	var api *dockerapi.Error
	if errors.As(err, &api) {
		return strings.Replace(err.Error(), api.Error(), fmt.Sprintf("%d %s", api.Status, api.Message), 1)
	}
	return err.Error()
}

// TestInspect: any container reads as the action, by name or ID; one the
// engine does not have is the daemon's error. The engine names its socket.
func TestInspect(t *testing.T) {
	e := fakeDocker(t, map[string]http.HandlerFunc{
		"/containers/{id}/json": func(w http.ResponseWriter, r *http.Request) {
			if r.PathValue("id") != "reboot" {
				refuse(w, http.StatusNotFound, "No such container: "+r.PathValue("id"))
				return
			}
			fmt.Fprint(w, `{"Id":"c0ffee","Name":"/reboot","Config":{"Env":["A=1"]}}`)
		},
	})
	s, err := e.Inspect(context.Background(), "reboot")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%s %s %s %q", s.ID, s.Name, s.FoundBy, s.Env); got != `c0ffee reboot plan --container ["A=1"]` {
		t.Errorf("Inspect = %s", got)
	}
	if _, err := e.Inspect(context.Background(), "gone"); !errors.Is(err, dockerapi.ErrNotFound) {
		t.Errorf("Inspect of a missing container: %v, want not found", err)
	}
	if got, want := e.String(), "the Docker engine on "+e.C.SocketPath(); got != want || !strings.HasSuffix(got, ".sock") {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestCreateConnects: Create connects the networks the create could not
// take, and a connect that fails is the error, with the ID of what was
// created, for phase 1 to remove.
func TestCreateConnects(t *testing.T) {
	cases := []struct {
		name     string
		refuse   bool
		wantErr  string
		wantSent []string
	}{
		{name: "connected", wantSent: []string{"POST /v1.41/containers/create?name=act-waitdaemon-user", "POST /v1.41/networks/back/connect"}},
		{name: "the connect fails", refuse: true, wantErr: "no such network",
			wantSent: []string{"POST /v1.41/containers/create?name=act-waitdaemon-user", "POST /v1.41/networks/back/connect"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var sent []string
			log := func(r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				sent = append(sent, r.Method+" "+r.URL.RequestURI())
			}
			e := fakeDocker(t, map[string]http.HandlerFunc{
				"/containers/create": func(w http.ResponseWriter, r *http.Request) {
					log(r)
					w.WriteHeader(http.StatusCreated)
					fmt.Fprint(w, `{"Id":"c1","Warnings":[]}`)
				},
				"/networks/{net}/connect": func(w http.ResponseWriter, r *http.Request) {
					log(r)
					if tc.refuse {
						refuse(w, http.StatusNotFound, "no such network")
						return
					}
					w.WriteHeader(http.StatusOK)
				},
			})
			spec := engine.Spec{Name: "act-waitdaemon-user", Create: &planned{
				CreateRequest: dockerapi.CreateRequest{Config: dockerapi.Config{Image: "reboot:1"}},
				connect:       map[string]dockerapi.EndpointSettings{"back": {Aliases: []string{"db"}}},
			}}
			id, err := e.Create(context.Background(), spec)
			if id != "c1" || (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Create() = %q, %v; want c1, error %q", id, err, tc.wantErr)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := linediff.Lines(tc.wantSent, sent); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// inspectOrGone answers a container's inspect with body, or as the daemon
// answers for a container it does not have when body is "".
func inspectOrGone(id, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if body == "" {
			refuse(w, http.StatusNotFound, "No such container: "+id)
			return
		}
		fmt.Fprint(w, body)
	}
}

// TestKeepAgain: a Keep whose rename the daemon refuses keeps the
// container when it already has the name (a Keep called again), and
// fails with the daemon's refusal when it has another, or cannot be read.
func TestKeepAgain(t *testing.T) {
	cases := []struct {
		name    string
		inspect string // the container's inspect; "" for none
		want    string
	}{
		{name: "named so already", inspect: `{"Id":"c1","Name":"/kept-name"}`, want: "kept-name <nil>"},
		{name: "named otherwise", inspect: `{"Id":"c1","Name":"/act-waitdaemon-user"}`, want: ` renaming container "c1" to "kept-name": 409 name in use`},
		{name: "gone", want: ` renaming container "c1" to "kept-name": 409 name in use`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := fakeDocker(t, map[string]http.HandlerFunc{
				"/containers/c1/rename": func(w http.ResponseWriter, r *http.Request) {
					refuse(w, http.StatusConflict, "name in use")
				},
				"/containers/c1/json": inspectOrGone("c1", tc.inspect),
			})
			name, err := e.Keep(context.Background(), engine.Container{ID: "c1", Name: "act-waitdaemon-user"}, "kept-name")
			if got := name + " " + errText(err); got != tc.want {
				t.Errorf("Keep = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCreateAgain: a Create the daemon refuses because the name is taken
// adopts the container of that name when it has the planned image and
// every planned label (a Create called again), and connects what is not
// connected yet, a network it is in already counting as connected;
// otherwise it fails with the daemon's refusal.
func TestCreateAgain(t *testing.T) {
	labels := map[string]string{"org.waitdaemon.action": "act", "org.waitdaemon.role": "user"}
	cases := []struct {
		name    string
		inspect string // the named container's inspect; "" for none
		wantID  string
		wantErr string
	}{
		{name: "the same spec's, with a label more", inspect: `{"Id":"there","Config":{"Image":"reboot:1","Labels":{"org.waitdaemon.action":"act","org.waitdaemon.role":"user","x":"y"}}}`, wantID: "there"},
		{name: "another image", inspect: `{"Id":"there","Config":{"Image":"other:1","Labels":{"org.waitdaemon.action":"act","org.waitdaemon.role":"user"}}}`, wantErr: "409 name taken"},
		{name: "a label that differs", inspect: `{"Id":"there","Config":{"Image":"reboot:1","Labels":{"org.waitdaemon.action":"other","org.waitdaemon.role":"user"}}}`, wantErr: "409 name taken"},
		{name: "a label missing", inspect: `{"Id":"there","Config":{"Image":"reboot:1","Labels":{"org.waitdaemon.role":"user"}}}`, wantErr: "409 name taken"},
		{name: "gone since", wantErr: "409 name taken"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			connected := 0
			e := fakeDocker(t, map[string]http.HandlerFunc{
				"/containers/create": func(w http.ResponseWriter, r *http.Request) {
					refuse(w, http.StatusConflict, "name taken")
				},
				"/containers/act-waitdaemon-user/json": inspectOrGone("act-waitdaemon-user", tc.inspect),
				"/networks/{net}/connect": func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					connected++
					mu.Unlock()
					if r.PathValue("net") == "back" {
						refuse(w, http.StatusForbidden, "endpoint with name act-waitdaemon-user already exists in network back")
						return
					}
					w.WriteHeader(http.StatusOK)
				},
			})
			spec := engine.Spec{Name: "act-waitdaemon-user", Create: &planned{
				CreateRequest: dockerapi.CreateRequest{Config: dockerapi.Config{Image: "reboot:1", Labels: labels}},
				connect:       map[string]dockerapi.EndpointSettings{"back": {}, "front": {}},
			}}
			id, err := e.Create(context.Background(), spec)
			if id != tc.wantID || (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(errText(err), tc.wantErr) {
				t.Errorf("Create() = %q, %v; want %q, error %q", id, errText(err), tc.wantID, tc.wantErr)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := map[bool]int{true: 2, false: 0}[tc.wantID != ""]; connected != want {
				t.Errorf("%d connects, want %d", connected, want)
			}
		})
	}

	t.Run("a fresh container already in a network is an error", func(t *testing.T) {
		e := fakeDocker(t, map[string]http.HandlerFunc{
			"/containers/create": func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusCreated)
				fmt.Fprint(w, `{"Id":"c1"}`)
			},
			"/networks/{net}/connect": func(w http.ResponseWriter, r *http.Request) {
				refuse(w, http.StatusForbidden, "endpoint with name act-waitdaemon-user already exists in network back")
			},
		})
		spec := engine.Spec{Name: "act-waitdaemon-user", Create: &planned{
			CreateRequest: dockerapi.CreateRequest{Config: dockerapi.Config{Image: "reboot:1"}},
			connect:       map[string]dockerapi.EndpointSettings{"back": {}},
		}}
		if id, err := e.Create(context.Background(), spec); id != "c1" || err == nil || !strings.Contains(err.Error(), "already exists") {
			t.Errorf("Create() = %q, %v; want c1 and the daemon's refusal", id, err)
		}
	})
}
