package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/testkit/grpcrr"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// TestAPI is curl for the socket (README, Debugging): it prints the
// answer as indented JSON, a stream's every line, at the negotiated
// version unless the path names one, and exits 1 with the engine's
// message on a status of 400 or more.
func TestAPI(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "1.43") })
	mux.HandleFunc("/v1.43/containers/json", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `[{"Id":"a1","Names":["/act"]}]`)
	})
	mux.HandleFunc("/v1.40/events", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "{\"status\":\"start\",\"id\":\"a1\"}\n{\"status\":\"die\",\"id\":\"a1\"}\n")
	})
	mux.HandleFunc("/v1.43/containers/none/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"No such container: none"}`)
	})
	t.Setenv("DOCKER_HOST", "unix://"+rr.Serve(t, mux))
	cases := []struct {
		args     []string
		wantCode int
		wantOut  string
		wantErr  string // in stderr
	}{
		{args: []string{"api", "GET", "/containers/json"}, wantOut: "[\n  {\n    \"Id\": \"a1\",\n    \"Names\": [\n      \"/act\"\n    ]\n  }\n]\n"},
		{args: []string{"api", "GET", "/v1.40/events"}, wantOut: "{\n  \"status\": \"start\",\n  \"id\": \"a1\"\n}\n{\n  \"status\": \"die\",\n  \"id\": \"a1\"\n}\n"},
		{args: []string{"api", "GET", "/containers/none/json"}, wantCode: exitFailure, wantErr: "404: No such container: none"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := runCLI(t, tc.args...)
			if diff := linediff.Text(tc.wantOut, out); diff != "" || code != tc.wantCode || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("exit %d, want %d; stderr %q, want %q; stdout (-want +got):\n%s", code, tc.wantCode, errOut, tc.wantErr, diff)
			}
		})
	}
}

// The containerd fixtures (testdata/README.md): recorded from the test
// containerd, in the recordings' namespace, with their busybox image.
const (
	cdFixtures  = "testdata/fixtures"
	cdEngine    = "containerd-2.2.1"
	cdNamespace = "waitdaemon-rr"
	cdImage     = "docker.io/library/waitdaemon-fixture:1"
)

// TestAPIContainerd is `api` on containerd (README, Debugging), chosen as
// the action chooses it (the only socket there is containerd's), in the
// namespace CONTAINERD_NAMESPACE names: each call prints the daemon's
// answer as indented JSON, secret-looking values redacted; --verbose
// traces the call on stderr; a call the daemon refuses exits 1 with its
// message. It replays a recording of the real containerd: a container
// and a snapshot the test made, asked for by the command.
func TestAPIContainerd(t *testing.T) {
	s := grpcrr.Open(t, cdFixtures, cdEngine, "API", containerdapi.Codec)
	sock := s.Socket
	if s.Transport != nil { // recording: the command reaches the recorder
		sock = proxy(t, s.Transport)
	}
	c := &containerdapi.Client{Socket: s.Socket, Transport: s.Transport, Namespace: cdNamespace}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const id = "rr-api"
	ctr := containerdapi.Container{
		ID:      id,
		Labels:  map[string]string{"org.waitdaemon.action": "rr-api"},
		Image:   cdImage,
		Runtime: containerdapi.Runtime{Name: containerdapi.RuncV2},
		Spec:    containerdapi.SpecAny([]byte(`{"ociVersion":"1.2.0","process":{"args":["true"],"env":["PATH=/bin","REGISTRY_PASSWORD=hunter2"],"cwd":"/"},"root":{"path":"rootfs"}}`)),
	}
	if _, err := c.ContainerCreate(ctx, ctr); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LeaseCreate(ctx, id, time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SnapshotPrepare(containerdapi.WithLease(ctx, id), containerdapi.DefaultSnapshotter, id, ""); err != nil {
		t.Fatal(err)
	}

	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	t.Setenv("CONTAINERD_ADDRESS", sock)
	t.Setenv("CONTAINERD_NAMESPACE", cdNamespace)
	cases := []struct {
		args     []string
		wantCode int
		want     map[string]any // the answer's fields, by their path in it
		wantErr  []string       // in stderr
	}{
		{args: []string{"api", "version"}, want: map[string]any{"version": "2.2.1+unknown"}},
		{args: []string{"api", "namespaces.list"}, want: map[string]any{"namespaces.name": cdNamespace}},
		{args: []string{"--verbose", "api", "containers.get", id},
			want: map[string]any{"container.id": id, "container.labels.org.waitdaemon.action": "rr-api", "container.image": cdImage, "container.runtime.name": containerdapi.RuncV2,
				"container.spec.type_url": containerdapi.SpecTypeURL, "container.spec.json.process.env": "REGISTRY_PASSWORD=<redacted>"},
			wantErr: []string{
				"> containerd.services.containers.v1.Containers/Get\n> containerd-namespace: waitdaemon-rr\n> {\n>   \"id\": \"rr-api\"\n> }\n",
				"< containerd.services.containers.v1.Containers/Get\n< {\n<   \"container\": {\n<     \"id\": \"rr-api\",",
				"< containerd.services.containers.v1.Containers/Get: OK\n",
			}},
		{args: []string{"api", "containers.list", `labels."org.waitdaemon.action"==rr-api`}, want: map[string]any{"containers.id": id}},
		{args: []string{"api", "images.get", cdImage}, want: map[string]any{"image.name": cdImage, "image.target.media_type": "application/vnd.docker.distribution.manifest.v2+json"}},
		{args: []string{"api", "snapshots.stat", containerdapi.DefaultSnapshotter, id}, want: map[string]any{"info.name": id, "info.kind": float64(containerdapi.SnapshotActive)}},
		{args: []string{"api", "snapshots.mounts", containerdapi.DefaultSnapshotter, id}, want: map[string]any{"mounts.type": "bind"}},
		{args: []string{"--verbose", "api", "tasks.get", id}, wantCode: exitFailure, wantErr: []string{
			"> containerd.services.tasks.v1.Tasks/Get\n",
			`< containerd.services.tasks.v1.Tasks/Get: NotFound: `,
			`waitdaemon: tasks.get ["rr-api"]: containerd.services.tasks.v1.Tasks/Get: NotFound: task rr-api not found`,
		}},
	}
	for _, tc := range cases {
		out, errOut, code := runCLI(t, tc.args...)
		if code != tc.wantCode || strings.Contains(out+errOut, "hunter2") {
			t.Errorf("%q: exit %d, want %d; stdout:\n%s\nstderr:\n%s", tc.args, code, tc.wantCode, out, errOut)
		}
		for _, want := range tc.wantErr {
			if !strings.Contains(errOut, want) {
				t.Errorf("%q: stderr lacks %q:\n%s", tc.args, want, errOut)
			}
		}
		if tc.want == nil {
			if out != "" {
				t.Errorf("%q: stdout %q, want nothing", tc.args, out)
			}
			continue
		}
		var answer any
		if err := json.Unmarshal([]byte(out), &answer); err != nil || !strings.HasPrefix(out, "{\n  \"") {
			t.Errorf("%q: stdout is not indented JSON (%v):\n%s", tc.args, err, out)
			continue
		}
		for path, want := range tc.want {
			if got := lookup(answer, path); !slices.Contains(got, want) {
				t.Errorf("%q: %s = %v, want %v among them; stdout:\n%s", tc.args, path, got, want, out)
			}
		}
	}

	if err := c.SnapshotRemove(ctx, containerdapi.DefaultSnapshotter, id); err != nil {
		t.Error(err)
	}
	if err := c.LeaseDelete(ctx, id, false); err != nil {
		t.Error(err)
	}
	if err := c.ContainerDelete(ctx, id); err != nil {
		t.Error(err)
	}
}

// lookup is every value at path in v, a dotted path of object keys
// through any lists on the way; a key with dots of its own (a label) is
// found by the longest key that matches.
func lookup(v any, path string) []any {
	switch v := v.(type) {
	case []any:
		var all []any
		for _, e := range v {
			all = append(all, lookup(e, path)...)
		}
		return all
	case map[string]any:
		if path == "" {
			return []any{v}
		}
		for k, e := range v {
			if k == path {
				return lookup(e, "")
			}
			if rest, ok := strings.CutPrefix(path, k+"."); ok {
				if got := lookup(e, rest); len(got) > 0 {
					return got
				}
			}
		}
		return nil
	}
	if path == "" {
		return []any{v}
	}
	return nil
}

// proxy serves rt on a unix socket, for the command, which dials a
// socket, to reach the recorder of a session being recorded.
func proxy(t *testing.T, rt http.RoundTripper) string {
	return rr.ServeH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = "http", "containerd"
		resp, err := rt.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		maps.Copy(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		for k, v := range resp.Trailer {
			w.Header()[http.TrailerPrefix+k] = v
		}
	}))
}

// TestAPIBadCall: on containerd, a call api does not make, or one with
// an argument missing, is a command line that did not parse (exit 80),
// named, with the calls it makes; on Docker, a containerd call or a
// missing path likewise, naming the socket and how to reach containerd.
// Nothing reaches an engine.
func TestAPIBadCall(t *testing.T) {
	calls := "version, namespaces.list, containers.list [FILTER], containers.get ID, tasks.list [FILTER], tasks.get ID, images.get NAME, snapshots.stat SNAPSHOTTER KEY, snapshots.mounts SNAPSHOTTER KEY"
	cases := []struct {
		engine string
		args   []string
		want   string
	}{
		{engine: "containerd", args: []string{"api", "containers.gte", "web"}, want: `waitdaemon: api on containerd at /nonexistent/containerd.sock, namespace rr-bad: bad call "containers.gte": expected one of ` + calls + "\n"},
		{engine: "containerd", args: []string{"api", "GET", "/containers/json"}, want: `bad call "GET": expected one of ` + calls + "\n"},
		{engine: "containerd", args: []string{"api", "containers.get"}, want: `waitdaemon: api on containerd at /nonexistent/containerd.sock, namespace rr-bad: bad call containers.get []: expected containers.get ID` + "\n"},
		{engine: "containerd", args: []string{"api", "snapshots.stat", "", "key"}, want: `bad call snapshots.stat ["" "key"]: expected snapshots.stat SNAPSHOTTER KEY` + "\n"},
		{engine: "docker", args: []string{"api", "containers.get", "web"}, want: "waitdaemon: api containers.get: expected an HTTP method and a path, like GET /containers/json, for Docker at /nonexistent/docker.sock; containerd's calls, such as containers.list, need containerd: WAITDAEMON_ENGINE=containerd\n"},
		{engine: "docker", args: []string{"api", "GET"}, want: `waitdaemon: api GET: expected "<path>" after the HTTP method, like /containers/json, for Docker at /nonexistent/docker.sock` + "\n"},
	}
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	t.Setenv("CONTAINERD_ADDRESS", "/nonexistent/containerd.sock")
	t.Setenv("CONTAINERD_NAMESPACE", "rr-bad")
	for _, tc := range cases {
		t.Run(tc.engine+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			t.Setenv("WAITDAEMON_ENGINE", tc.engine)
			out, errOut, code := runCLI(t, tc.args...)
			if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, want %d; stdout %q, want none; stderr:\n%s\nwant in it:\n%s", code, exitUsage, out, errOut, tc.want)
			}
		})
	}
}
