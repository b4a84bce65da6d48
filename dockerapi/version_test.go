package dockerapi_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

func TestNegotiate(t *testing.T) {
	cases := []struct {
		engine  string
		want    string
		wantErr string // a substring of the error; "" means success
	}{
		{engine: "", want: "1.24"},
		{engine: "1.23", wantErr: "too old"},
		{engine: "1.12", wantErr: "too old"},
		{engine: "1.24", want: "1.24"},
		{engine: "1.41", want: "1.41"},
		{engine: "1.44", want: "1.44"},
		{engine: "1.50", want: "1.50"},
		{engine: "1.52", want: "1.50"},
		{engine: "1.53", want: "1.50"},
		{engine: "1.100", want: "1.50"}, // numeric, not string, order
		{engine: "2.0", want: "1.50"},
		{engine: "x", wantErr: `"x"`},
		{engine: "1", wantErr: "MAJOR.MINOR"},
		{engine: "1.x", wantErr: "MAJOR.MINOR"},
		{engine: "1.41.0", wantErr: "MAJOR.MINOR"},
		{engine: "1.-1", wantErr: "MAJOR.MINOR"},
		{engine: "-1.41", wantErr: "MAJOR.MINOR"},
		{engine: "0.9", wantErr: "too old"},
		{engine: "1.0", wantErr: "too old"},
	}
	for _, tc := range cases {
		t.Run(tc.engine, func(t *testing.T) {
			got, err := dockerapi.Negotiate(tc.engine)
			if tc.wantErr == "" {
				if err != nil || got != tc.want {
					t.Errorf("Negotiate(%q) = %q, %v; want %q, nil", tc.engine, got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || got != "" {
				t.Errorf("Negotiate(%q) = %q, %v; want \"\" and an error containing %q", tc.engine, got, err, tc.wantErr)
			}
		})
	}
}

func TestVersionLess(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"1.24", "1.41", true},
		{"1.41", "1.24", false},
		{"1.41", "1.41", false},
		{"1.9", "1.10", true},
		{"1.50", "2.0", true},
		{"2.0", "1.50", false},
		{"x", "1.0", true}, // unparsable sorts first
	}
	for _, tc := range cases {
		if got := dockerapi.VersionLess(tc.a, tc.b); got != tc.want {
			t.Errorf("VersionLess(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestNegotiateRecorded replays negotiations recorded from real engines:
// Docker 29 answers the ping with Api-Version 1.56, newer than the client,
// and refuses versions below 1.40; HookOS's Docker 28.2 answers 1.50, the
// client's own maximum, and 26.1 answers 1.45, below it. The client must
// prefix its requests with min(MaxVersion, the engine's version), and
// that must lie within the engine's range.
func TestNegotiateRecorded(t *testing.T) {
	cases := []struct{ engine, api, want string }{
		{"docker-29.8", "1.56", dockerapi.MaxVersion},
		{"docker-28.2", "1.50", "1.50"},
		{"docker-26.1", "1.45", "1.45"},
	}
	for _, tc := range cases {
		t.Run(tc.engine, func(t *testing.T) {
			s := rr.Open(t, "../testdata/fixtures", tc.engine, "Negotiate")
			c := &dockerapi.Client{Socket: s.Socket, Transport: s.Transport}
			v, err := c.EngineVersion(shortCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if v.APIVersion != tc.api {
				t.Fatalf("EngineVersion() = API %s, want %s", v.APIVersion, tc.api)
			}
			speaksAt(t, c, tc.want, "org.waitdaemon.test=negotiate")
			if dockerapi.VersionLess(tc.want, v.MinAPIVersion) {
				t.Errorf("APIVersion() = %s, below the engine's minimum %s", tc.want, v.MinAPIVersion)
			}
		})
	}
}

// speaksAt lists the containers the filters select, finds none, and
// checks that c negotiated want.
func speaksAt(t *testing.T, c *dockerapi.Client, want string, filters ...string) {
	t.Helper()
	list, err := c.ContainerList(shortCtx(t), filters...)
	if err != nil {
		t.Fatalf("ContainerList() error = %v", err)
	}
	if len(list) != 0 {
		t.Errorf("ContainerList() = %+v, want none", list)
	}
	got, err := c.APIVersion(shortCtx(t))
	if err != nil || got != want {
		t.Errorf("APIVersion() = %q, %v; want %q, nil", got, err, want)
	}
}

// TestNegotiateHandmade replays hand-made fixtures of engines that no
// engine here can stand in for (see the note in each): the client must
// prefix its requests with min(MaxVersion, the engine's version).
func TestNegotiateHandmade(t *testing.T) {
	cases := []struct {
		name string
		want string
	}{
		{"Negotiate-1.44", "1.44"},
		{"Negotiate-1.50", "1.50"},
		{"Negotiate-none", "1.24"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := rr.Open(t, "../testdata/fixtures", "handmade", tc.name)
			speaksAt(t, &dockerapi.Client{Socket: s.Socket, Transport: s.Transport}, tc.want)
		})
	}
}

// TestNegotiateTooOld talks to an engine older than MinVersion: the call
// fails with the negotiation error, and nothing is sent after the ping.
func TestNegotiateTooOld(t *testing.T) {
	var got hits
	c := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		got.add(r)
		if answerPing(w, r, "1.23") {
			return
		}
		writeJSON(w, 200, []any{})
	})
	_, err := c.ContainerList(shortCtx(t))
	if err == nil || !strings.Contains(err.Error(), "engine API version 1.23 is too old") {
		t.Errorf("ContainerList() error = %v, want one saying engine API version 1.23 is too old", err)
	}
	if n, pings := got.total(), got.get("GET /_ping"); n != 1 || pings != 1 {
		t.Errorf("the engine got %d requests (%d pings), want just 1 ping", n, pings)
	}
	if v, err := c.APIVersion(shortCtx(t)); err == nil || v != "" {
		t.Errorf("APIVersion() = %q, %v; want \"\" and an error", v, err)
	}
}

// TestNegotiateOnce checks that the version is negotiated once per client,
// even by concurrent first calls, and that a pinned version skips the ping.
func TestNegotiateOnce(t *testing.T) {
	cases := []struct {
		name       string
		pin        string
		wantPings  int
		wantPrefix string
	}{
		{"negotiated", "", 1, "/v1.41/"},
		{"pinned", "1.30", 0, "/v1.30/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got hits
			var paths seen
			c := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
				got.add(r)
				if answerPing(w, r, "1.41") {
					return
				}
				paths.add(r.URL.Path)
				writeJSON(w, 200, []any{})
			})
			c.Version = tc.pin
			const calls = 16
			var wg sync.WaitGroup
			errs := make(chan error, calls)
			for range calls / 2 {
				wg.Go(func() {
					_, err := c.ContainerList(shortCtx(t))
					errs <- err
				})
			}
			wg.Wait()
			for range calls / 2 {
				_, err := c.ContainerList(shortCtx(t))
				errs <- err
			}
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("ContainerList() error = %v", err)
				}
			}
			if n := got.get("GET /_ping"); n != tc.wantPings {
				t.Errorf("the engine got %d pings for %d calls, want %d", n, calls, tc.wantPings)
			}
			ps := paths.get()
			if len(ps) != calls {
				t.Errorf("the engine got %d list requests, want %d", len(ps), calls)
			}
			for _, p := range ps {
				if p != tc.wantPrefix+"containers/json" {
					t.Errorf("request path = %q, want %scontainers/json", p, tc.wantPrefix)
				}
			}
		})
	}
}

// TestPingHeaders checks what Ping reads from the headers, and that it is sent
// without a version prefix.
func TestPingHeaders(t *testing.T) {
	var paths seen
	c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
		paths.add(r.URL.Path)
		answerPing(w, r, "1.47")
	})
	got, err := c.Ping(shortCtx(t))
	want := dockerapi.Ping{APIVersion: "1.47", OSType: "linux", Server: "Docker/20.10.24 (linux)"}
	if err != nil || got != want {
		t.Errorf("Ping() = %+v, %v; want %+v, nil", got, err, want)
	}
	if ps := paths.get(); len(ps) != 1 || ps[0] != "/_ping" {
		t.Errorf("paths = %q, want [/_ping]", ps)
	}
}
