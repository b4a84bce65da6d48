package dockerapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// Events as Docker 20.10.24 and Podman 4.3.1 streamed them for one
// container made and removed, asked with since and these filters
// (recorded 2026-12-04).
const (
	dockerEvents = `{"status":"create","id":"3ddd58e53b8e240040b9a850dcedf6e8bb08c51f47a73ce1beb45735dd986da8","from":"waitdaemon:dev","Type":"container","Action":"create","Actor":{"ID":"3ddd58e53b8e240040b9a850dcedf6e8bb08c51f47a73ce1beb45735dd986da8","Attributes":{"image":"waitdaemon:dev","name":"determined_kare"}},"scope":"local","time":1796400687,"timeNano":1796400687842068047}
{"status":"destroy","id":"3ddd58e53b8e240040b9a850dcedf6e8bb08c51f47a73ce1beb45735dd986da8","from":"waitdaemon:dev","Type":"container","Action":"destroy","Actor":{"ID":"3ddd58e53b8e240040b9a850dcedf6e8bb08c51f47a73ce1beb45735dd986da8","Attributes":{"image":"waitdaemon:dev","name":"determined_kare"}},"scope":"local","time":1796400688,"timeNano":1796400688867093014}
`
	podmanEvents = `{"status":"remove","id":"d3ed71caa0f2d0ff3809c01dd6b8adc21f470a948e23edea3600738956d235a2","from":"localhost/waitdaemon:e2e","Type":"container","Action":"remove","Actor":{"ID":"d3ed71caa0f2d0ff3809c01dd6b8adc21f470a948e23edea3600738956d235a2","Attributes":{"containerExitCode":"0","image":"localhost/waitdaemon:e2e","name":"evtest","podId":""}},"scope":"local","time":1796400385,"timeNano":1796400385967583310}
`
)

// TestEvents: the stream asks with since and the filters as JSON, and
// gives each event with its action, actor and time to the nanosecond,
// then io.EOF when the engine ends it.
func TestEvents(t *testing.T) {
	since := time.Unix(1796400686, 5)
	for _, tc := range []struct {
		name, stream string
		want         []string
		at           time.Time
	}{
		{"docker", dockerEvents, []string{"create", "destroy"}, time.Unix(0, 1796400688867093014)},
		{"podman", podmanEvents, []string{"remove"}, time.Unix(0, 1796400385967583310)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				var f map[string][]string
				if r.URL.Path != "/v1.41/events" || r.URL.Query().Get("since") != "1796400686.000000005" || json.Unmarshal([]byte(r.URL.Query().Get("filters")), &f) != nil || f["container"][0] != "abc" {
					http.Error(w, "unexpected "+r.URL.String(), http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.(http.Flusher).Flush()
				_, _ = io.WriteString(w, tc.stream)
			})
			s, err := c.Events(context.Background(), dockerapi.EventsOptions{Since: since, Filters: map[string][]string{"container": {"abc"}}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got []string
			var last dockerapi.Event
			for {
				ev, err := s.Next()
				if err == io.EOF { // the stream's end, as it is
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got, last = append(got, ev.Action), ev
			}
			if len(got) != len(tc.want) || got[len(got)-1] != tc.want[len(tc.want)-1] || !last.At().Equal(tc.at) || last.Type != "container" || last.Actor.ID == "" {
				t.Errorf("events %q, the last %+v at %v; want %q, the last at %v", got, last, last.At(), tc.want, tc.at)
			}
		})
	}
}

// TestEventsNoFilters: events asked for with no filters send none, and
// a stream that breaks in the middle of an event says so, not io.EOF.
func TestEventsNoFilters(t *testing.T) {
	c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.URL.Query()["filters"]; ok {
			http.Error(w, "unexpected filters "+r.URL.RawQuery, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"Type":"container","Action":"cre`)
	})
	s, err := c.Events(context.Background(), dockerapi.EventsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Next(); err == io.EOF || err == nil || !strings.Contains(err.Error(), "reading the engine's events") {
		t.Errorf("Next() = %v; want the broken event named, not the stream's end", err)
	}
}

// TestPodman: Podman is told from Docker by its ping's Libpod-Api-Version,
// from the ping the negotiation made.
func TestPodman(t *testing.T) {
	for _, podman := range []bool{false, true} {
		pings := 0
		c := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/_ping" {
				pings++
				if podman {
					w.Header().Set("Libpod-Api-Version", "4.3.1")
				}
			}
			if !answerPing(w, r, "1.41") {
				writeJSON(w, http.StatusOK, map[string]any{"Id": "x"})
			}
		})
		if _, err := c.ContainerInspect(context.Background(), "x"); err != nil {
			t.Fatal(err)
		}
		got, err := c.Podman(context.Background())
		if err != nil || got != podman || pings != 1 {
			t.Errorf("Podman() = %v, %v after %d pings; want %v after the negotiation's one", got, err, pings, podman)
		}
	}
}
