package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// The answers Docker 20.10 gave about a container whose log driver is
// none: its log (501), a file found in it, and a path that is not there.
func logNone(t *testing.T) (logs, found, missing rr.Message) {
	t.Helper()
	return recorded(t, "docker-20.10", "Archive", http.MethodGet, "/logs", "stderr=1&stdout=1&tail=5"),
		recorded(t, "docker-20.10", "Archive", http.MethodGet, "/archive", "path=%2Fsaid"),
		recorded(t, "docker-20.10", "Archive", http.MethodGet, "/archive", "path=%2Fmissing")
}

// TestFollowUnreadableLog: a run whose log cannot be read back (log
// driver none: 501) has an empty tail and a note that says why, not an
// error.
func TestFollowUnreadableLog(t *testing.T) {
	logs, _, _ := logNone(t)
	sent := time.Now()
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "1.41") })
	mux.HandleFunc("/v1.41/containers/u/wait", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"StatusCode":3}`) })
	mux.HandleFunc("/v1.41/containers/u/json", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"Id":"u","Path":"sh","Args":["-c","exit 3"],"Config":{"Image":"x:1"},"HostConfig":{"LogConfig":{"Type":"none"}},"State":{"ExitCode":3,"StartedAt":%q}}`,
			sent.Add(10*time.Millisecond).Format(time.RFC3339Nano))
	})
	mux.HandleFunc("/v1.41/containers/u/logs", func(w http.ResponseWriter, r *http.Request) { answer(w, logs) })
	e := &Engine{C: &dockerapi.Client{Socket: rr.Serve(t, mux)}}
	run, err := e.Follow(context.Background(), "u", sent, 5, "")
	if err != nil {
		t.Fatalf("Follow() error = %v, want none", err)
	}
	if run.ExitCode != 3 || run.Output == nil || len(run.Output) != 0 {
		t.Errorf("Follow() = exit %d, output %#v; want exit 3 and an empty tail", run.ExitCode, run.Output)
	}
	if !strings.Contains(run.Note, "does not support reading") || !strings.Contains(run.Note, `"none"`) {
		t.Errorf("Follow() note = %q, want it to name the log driver and the engine's word", run.Note)
	}
}

// TestOutputUnreadableLog: phase 1 follows a waiter whose log cannot be
// read back (501): the engine reads what the waiter told instead, from
// the waiter's own file system, until the waiter stops.
func TestOutputUnreadableLog(t *testing.T) {
	logs, found, missing := logNone(t)
	var mu sync.Mutex
	inspects, archives := 0, 0
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "1.41") })
	mux.HandleFunc("/v1.41/containers/waiter/logs", func(w http.ResponseWriter, r *http.Request) { answer(w, logs) })
	mux.HandleFunc("/v1.41/containers/waiter/json", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		inspects++
		fmt.Fprintf(w, `{"Id":"waiter","State":{"Running":%v,"Status":"running"}}`, inspects < 5)
	})
	mux.HandleFunc("/v1.41/containers/waiter/archive", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		archives++
		if q, _ := url.ParseQuery(r.URL.RawQuery); q.Get("path") != saidFile {
			t.Errorf("archive of %q, want %q", q.Get("path"), saidFile)
		}
		if archives <= 2 { // nothing told yet
			answer(w, missing)
			return
		}
		answer(w, found)
	})
	e := &Engine{C: &dockerapi.Client{Socket: rr.Serve(t, mux)}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := e.Output(ctx, "waiter", &out); err != nil {
		t.Fatalf("Output() error = %v, want none", err)
	}
	if diff := linediff.Text("told\n", out.String()); diff != "" {
		t.Errorf("Output() (-want +got):\n%s", diff)
	}
}

// TestTell: the waiter leaves the line in its own file system, whole,
// and a later line replaces it.
func TestTell(t *testing.T) {
	root := t.TempDir()
	e := &Engine{root: root}
	for _, line := range []string{`{"msg":"first"}`, `{"msg":"result file writable"}`} {
		if err := e.Tell(context.Background(), []byte(line)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, saidFile))
		if err != nil {
			t.Fatal(err)
		}
		if diff := linediff.Text(line+"\n", string(got)); diff != "" {
			t.Errorf("told file (-want +got):\n%s", diff)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(root, "*")); len(left) != 1 {
		t.Errorf("files left in the root: %q, want the told file alone", left)
	}
}

// TestUnreadable: the engines' words for a log that cannot be read back
// (Podman 4.3's is a 500), and not another failure's.
func TestUnreadable(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{&dockerapi.Error{Status: 501, Message: "configured logging driver does not support reading"}, true},
		{&dockerapi.Error{Status: 500, Message: "failed to obtain logs for Container 'ee0f': this container is using the 'none' log driver, cannot read logs: this container is not logging output"}, true},
		{&dockerapi.Error{Status: 500, Message: "no such container"}, false},
		{fmt.Errorf("reading: %w", &dockerapi.Error{Status: 404, Message: "No such container: u"}), false},
		{context.Canceled, false},
	}
	for _, tc := range cases {
		if _, got := unreadable(tc.err); got != tc.want {
			t.Errorf("unreadable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// failingWriter refuses every write.
type failingWriter struct{}

var errClosedPipe = errors.New("write: broken pipe")

func (failingWriter) Write([]byte) (int, error) { return 0, errClosedPipe }

// TestOutputWriteFails: a line told that cannot be passed on ends Output
// with the writer's error.
func TestOutputWriteFails(t *testing.T) {
	logs, found, _ := logNone(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "1.41") })
	mux.HandleFunc("/v1.41/containers/waiter/logs", func(w http.ResponseWriter, r *http.Request) { answer(w, logs) })
	mux.HandleFunc("/v1.41/containers/waiter/json", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"Id":"waiter","State":{"Running":true,"Status":"running"}}`)
	})
	mux.HandleFunc("/v1.41/containers/waiter/archive", func(w http.ResponseWriter, r *http.Request) { answer(w, found) })
	e := &Engine{C: &dockerapi.Client{Socket: rr.Serve(t, mux)}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Output(ctx, "waiter", failingWriter{}); !errors.Is(err, errClosedPipe) {
		t.Errorf("Output() = %v, want the writer's error", err)
	}
}

// TestFollowNoTail: a run followed with no tail asked for reads no log.
func TestFollowNoTail(t *testing.T) {
	sent := time.Now()
	var mu sync.Mutex
	logReads := 0
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "1.41") })
	mux.HandleFunc("/v1.41/containers/u/wait", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"StatusCode":0}`) })
	mux.HandleFunc("/v1.41/containers/u/json", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"Id":"u","Path":"true","Config":{"Image":"x:1"},"State":{"StartedAt":%q}}`, sent.Add(10*time.Millisecond).Format(time.RFC3339Nano))
	})
	mux.HandleFunc("/v1.41/containers/u/logs", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		logReads++
		mu.Unlock()
		fmt.Fprint(w, "")
	})
	e := &Engine{C: &dockerapi.Client{Socket: rr.Serve(t, mux)}}
	run, err := e.Follow(context.Background(), "u", sent, 0, "")
	mu.Lock()
	defer mu.Unlock()
	if err != nil || run.Output == nil || len(run.Output) != 0 || logReads != 0 {
		t.Errorf("Follow() = output %#v, %v after %d log reads; want an empty tail, no log read", run.Output, err, logReads)
	}
}
