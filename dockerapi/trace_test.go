package dockerapi_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// traceBuffer is a trace writer the test can read while the client writes.
type traceBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *traceBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *traceBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// traceLines splits a trace into lines, with the Date header, which
// changes with every run, replaced by <date>.
func traceLines(trace string) []string {
	trace = regexp.MustCompile(`(?m)^< Date: .*$`).ReplaceAllString(trace, "< Date: <date>")
	return strings.Split(strings.TrimSuffix(trace, "\n"), "\n")
}

// TestTraceCreate traces a negotiation then a create: both sides of each
// exchange, with the request body and the response body.
func TestTraceCreate(t *testing.T) {
	c := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		if answerPing(w, r, "1.41") {
			return
		}
		writeJSON(w, 201, map[string]any{"Id": "abc", "Warnings": []string{}})
	})
	var trace traceBuffer
	c.Trace = &trace
	body := dockerapi.CreateRequest{Config: dockerapi.Config{Image: "alpine:3.20", Labels: map[string]string{"app": "web"}}}
	got, err := c.ContainerCreate(shortCtx(t), "x", body)
	if err != nil || got.ID != "abc" {
		t.Fatalf("ContainerCreate() = %+v, %v; want ID abc", got, err)
	}
	want := []string{
		"> GET /_ping HTTP/1.1",
		"> Host: docker",
		"> User-Agent: waitdaemon",
		">",
		"< HTTP/1.1 200 OK",
		"< Api-Version: 1.41",
		"< Content-Length: 2",
		"< Content-Type: text/plain; charset=utf-8",
		"< Date: <date>",
		"< Ostype: linux",
		"< Server: Docker/20.10.24 (linux)",
		"<",
		"OK",
		"> POST /v1.41/containers/create?name=x HTTP/1.1",
		"> Host: docker",
		"> Content-Type: application/json",
		"> User-Agent: waitdaemon",
		">",
		`{"Image":"alpine:3.20","Labels":{"app":"web"},"HostConfig":{"MaskedPaths":null,"ReadonlyPaths":null}}`,
		"< HTTP/1.1 201 Created",
		"< Api-Version: 1.41",
		"< Content-Length: 27",
		"< Content-Type: application/json",
		"< Date: <date>",
		"<",
		`{"Id":"abc","Warnings":[]}`,
	}
	if d := linediff.Lines(want, traceLines(trace.String())); d != "" {
		t.Errorf("trace (-want +got):\n%s", d)
	}
}

// TestTracePutArchive: a tar stream copied into a container is sent as
// application/x-tar, and the trace names its size, not its bytes, which
// are neither text nor redacted.
func TestTracePutArchive(t *testing.T) {
	var gotType string
	var gotBody []byte
	c := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		if answerPing(w, r, "1.41") {
			return
		}
		gotType = r.Header.Get("Content-Type")
		gotBody, _ = io.ReadAll(r.Body)
	})
	var trace traceBuffer
	c.Trace = &trace
	archive := oneFile(t, "handed", `{"password":"hunter2"}`)
	if err := c.ContainerPutArchive(shortCtx(t), "w", "/", archive); err != nil {
		t.Fatal(err)
	}
	if gotType != "application/x-tar" || !bytes.Equal(gotBody, archive) {
		t.Errorf("the engine got %q, %d bytes; want application/x-tar, the %d bytes of the archive", gotType, len(gotBody), len(archive))
	}
	lines := traceLines(trace.String())
	if i := slices.Index(lines, "> PUT /v1.41/containers/w/archive?path=%2F HTTP/1.1"); i < 0 || !slices.Contains(lines[i:], fmt.Sprintf("[%d bytes of application/x-tar]", len(archive))) {
		t.Errorf("trace:\n%s\nwant the PUT, and its body as its size", trace.String())
	}
	if strings.Contains(trace.String(), "hunter2") {
		t.Errorf("trace shows the archive's content:\n%s", trace.String())
	}
}

// TestTraceTransportError traces an exchange that got no answer.
func TestTraceTransportError(t *testing.T) {
	c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) { rr.HangUp(t, w) })
	var trace traceBuffer
	c.Trace = &trace
	if _, err := c.ContainerCreate(shortCtx(t), "", dockerapi.CreateRequest{}); err == nil {
		t.Fatal("ContainerCreate() succeeded, want an error")
	}
	lines := traceLines(trace.String())
	want := []string{"> POST /v1.41/containers/create HTTP/1.1", "> Host: docker", "> Content-Type: application/json", "> User-Agent: waitdaemon", ">", `{"HostConfig":{"MaskedPaths":null,"ReadonlyPaths":null}}`}
	if len(lines) != len(want)+1 || !strings.HasPrefix(lines[len(lines)-1], "* ") {
		t.Fatalf("trace = %q, want the request then one \"* error\" line", lines)
	}
	if d := linediff.Lines(want, lines[:len(want)]); d != "" {
		t.Errorf("trace (-want +got):\n%s", d)
	}
}

// TestTraceRedactsAuth pulls with credentials: the engine gets them, the
// trace never shows them, in clear or encoded.
func TestTraceRedactsAuth(t *testing.T) {
	cases := []struct {
		name     string
		auth     dockerapi.AuthConfig
		secret   string
		wantJSON string // what X-Registry-Auth decodes to
	}{
		{
			name:     "password",
			auth:     dockerapi.AuthConfig{Username: "u", Password: "s3cret-pw", ServerAddress: "127.0.0.1:5000"},
			secret:   "s3cret-pw",
			wantJSON: `{"username":"u","password":"s3cret-pw","serveraddress":"127.0.0.1:5000"}`,
		},
		{
			// Its base64 differs between the standard and URL alphabets.
			name:     "password with URL-unsafe base64",
			auth:     dockerapi.AuthConfig{Username: "u", Password: "s3cret~?pw", ServerAddress: "127.0.0.1:5000"},
			secret:   "s3cret~?pw",
			wantJSON: `{"username":"u","password":"s3cret~?pw","serveraddress":"127.0.0.1:5000"}`,
		},
		{
			name:     "identity token",
			auth:     dockerapi.AuthConfig{IdentityToken: "t0ken-s3cret", ServerAddress: "127.0.0.1:5000"},
			secret:   "t0ken-s3cret",
			wantJSON: `{"identitytoken":"t0ken-s3cret","serveraddress":"127.0.0.1:5000"}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var headers seen
			c := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
				if answerPing(w, r, "1.41") {
					return
				}
				headers.add(r.Header.Get("X-Registry-Auth"))
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"status":"Status: Image is up to date for 127.0.0.1:5000/rr/good:1"}`+"\n")
			})
			var trace traceBuffer
			c.Trace = &trace
			ref, err := imageref.Parse("127.0.0.1:5000/rr/good:1")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.ImagePull(shortCtx(t), ref, &tc.auth, nil); err != nil {
				t.Fatalf("ImagePull() error = %v", err)
			}

			got := headers.get()
			if len(got) != 1 {
				t.Fatalf("the engine got %d pulls, want 1", len(got))
			}
			decoded, err := base64.URLEncoding.DecodeString(got[0])
			if err != nil || string(decoded) != tc.wantJSON {
				t.Errorf("X-Registry-Auth %q decodes (base64url) to %q, %v; want %s", got[0], decoded, err, tc.wantJSON)
			}

			text := trace.String()
			if !strings.Contains(text, "\n> X-Registry-Auth: <redacted>\n") {
				t.Errorf("trace has no \"> X-Registry-Auth: <redacted>\" line:\n%s", text)
			}
			forbidden := []string{tc.secret, got[0], strings.TrimRight(got[0], "=")}
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
				forbidden = append(forbidden, enc.EncodeToString([]byte(tc.secret)), enc.EncodeToString([]byte(tc.wantJSON)))
			}
			for _, f := range forbidden {
				if f != "" && strings.Contains(text, f) {
					t.Errorf("trace contains %q, which reveals the secret:\n%s", f, text)
				}
			}
		})
	}
}

// TestTraceStreams checks that a streamed body is traced as it arrives:
// when the first progress message reaches the caller, the trace already
// shows it, while the engine still holds back the rest.
func TestTraceStreams(t *testing.T) {
	first := `{"status":"Pulling from rr/good","id":"1"}`
	rest := []string{
		`{"status":"Downloading","progressDetail":{"current":5,"total":10},"id":"abc"}`,
		`{"status":"Status: Downloaded newer image for 127.0.0.1:5000/rr/good:1"}`,
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, first+"\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		case <-time.After(5 * time.Second):
			t.Errorf("the pull was never released")
			return
		}
		_, _ = io.WriteString(w, strings.Join(rest, "\n")+"\n")
	})
	var trace traceBuffer
	c.Trace = &trace
	ref, _ := imageref.Parse("127.0.0.1:5000/rr/good:1")
	var statuses []string
	var traceAtFirst string
	err := c.ImagePull(shortCtx(t), ref, nil, func(m dockerapi.PullMessage) {
		if len(statuses) == 0 {
			traceAtFirst = trace.String()
			unblock()
		}
		statuses = append(statuses, m.Status)
	})
	if err != nil {
		t.Fatalf("ImagePull() error = %v", err)
	}
	if !strings.HasSuffix(traceAtFirst, "<\n"+first+"\n") {
		t.Errorf("trace when the first message arrived, want it to end with that message:\n%s", traceAtFirst)
	}
	wantStatuses := []string{"Pulling from rr/good", "Downloading", "Status: Downloaded newer image for 127.0.0.1:5000/rr/good:1"}
	if d := linediff.Lines(wantStatuses, statuses); d != "" {
		t.Errorf("progress statuses (-want +got):\n%s", d)
	}
	lines := traceLines(trace.String())
	wantTail := append([]string{"<", first}, rest...)
	if len(lines) < len(wantTail) {
		t.Fatalf("trace too short:\n%s", trace.String())
	}
	if d := linediff.Lines(wantTail, lines[len(lines)-len(wantTail):]); d != "" {
		t.Errorf("end of the trace (-want +got):\n%s", d)
	}
}
