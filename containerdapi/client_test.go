package containerdapi_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
	"google.golang.org/protobuf/encoding/protowire"
)

// The helpers below build fake daemons: handlers served over HTTP/2
// without TLS on a unix socket by rr.ServeH2C, so that the real dial,
// framing, retry and decode code runs. Their messages are built with
// protowire by hand: an account of the field numbers independent of the
// package's own.

// fakeDaemon serves h and returns a client of it that waits for nothing.
func fakeDaemon(t *testing.T, h http.HandlerFunc) *containerdapi.Client {
	t.Helper()
	return &containerdapi.Client{Socket: rr.ServeH2C(t, h), WaitForEngine: -1}
}

// readRequest reads the one message of a unary request.
func readRequest(t *testing.T, r *http.Request) []byte {
	t.Helper()
	body, err := io.ReadAll(r.Body)
	if err != nil || len(body) < 5 || body[0] != 0 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
		t.Errorf("request body %q, %v: want one uncompressed gRPC frame", body, err)
		return nil
	}
	return body[5:]
}

// answer writes msg and an OK status in the trailers.
func answer(w http.ResponseWriter, msg []byte) {
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
	hdr := make([]byte, 5)
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(msg)))
	_, _ = w.Write(append(hdr, msg...))
	w.Header().Set("Grpc-Status", "0")
}

// fail answers trailers-only, as containerd answers every error.
func fail(w http.ResponseWriter, code containerdapi.Code, message string) {
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Grpc-Status", strconv.Itoa(int(code)))
	w.Header().Set("Grpc-Message", message)
	w.WriteHeader(http.StatusOK)
}

// str and sub encode a string field and a sub-message field.
func str(num protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), s)
}

func sub(num protowire.Number, parts ...[]byte) []byte {
	var m []byte
	for _, p := range parts {
		m = append(m, p...)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), m)
}

func cat(parts ...[]byte) []byte {
	var m []byte
	for _, p := range parts {
		m = append(m, p...)
	}
	return m
}

// hits counts a fake daemon's calls.
type hits struct {
	mu sync.Mutex
	n  int
}

func (h *hits) add() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	return h.n
}

func (h *hits) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// TestRequest checks what a call sends: the path, the gRPC headers, the
// namespace (the default, or the client's), the lease of the context, and
// the message.
func TestRequest(t *testing.T) {
	cases := []struct {
		name      string
		namespace string
		lease     string
		want      map[string]string
	}{
		{name: "defaults", want: map[string]string{"Content-Type": "application/grpc", "Te": "trailers", "Containerd-Namespace": "tinkerbell", "Containerd-Lease": "", "User-Agent": "waitdaemon"}},
		{name: "namespace and lease", namespace: "other", lease: "l1", want: map[string]string{"Containerd-Namespace": "other", "Containerd-Lease": "l1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got http.Header
			var path string
			var msg []byte
			c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				got, path, msg = r.Header.Clone(), r.URL.Path, readRequest(t, r)
				answer(w, sub(1, str(1, "web")))
			})
			c.Namespace = tc.namespace
			ctx := shortCtx(t)
			if tc.lease != "" {
				ctx = containerdapi.WithLease(ctx, tc.lease)
			}
			ctr, err := c.ContainerGet(ctx, "web")
			if err != nil || ctr.ID != "web" {
				t.Fatalf("ContainerGet() = %+v, %v; want web", ctr, err)
			}
			if path != "/containerd.services.containers.v1.Containers/Get" {
				t.Errorf("path %q, want /containerd.services.containers.v1.Containers/Get", path)
			}
			if want := str(1, "web"); string(msg) != string(want) {
				t.Errorf("message %x, want %x", msg, want)
			}
			for k, v := range tc.want {
				if got.Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, got.Get(k), v)
				}
			}
		})
	}
}

// TestStatus reads the status from the trailers and from the headers of a
// trailers-only answer, percent-decoded, and refuses an answer without
// one.
func TestStatus(t *testing.T) {
	cases := []struct {
		name     string
		handler  http.HandlerFunc
		wantCode containerdapi.Code // OK: success
		wantMsg  string
	}{
		{name: "trailers OK", handler: func(w http.ResponseWriter, r *http.Request) { answer(w, str(1, "v2.2.1")) }},
		{name: "trailers-only NotFound", handler: func(w http.ResponseWriter, r *http.Request) {
			fail(w, containerdapi.NotFound, `container "web" in namespace "tinkerbell": not found`)
		}, wantCode: containerdapi.NotFound, wantMsg: `container "web" in namespace "tinkerbell": not found`},
		{name: "percent-encoded message", handler: func(w http.ResponseWriter, r *http.Request) {
			fail(w, containerdapi.Unknown, "failed to pull: 401 Unauthorized%0Aretry: 100%25 sure%E2%9C%93")
		}, wantCode: containerdapi.Unknown, wantMsg: "failed to pull: 401 Unauthorized\nretry: 100% sure✓"},
		{name: "error in trailers after a message", handler: func(w http.ResponseWriter, r *http.Request) {
			answer(w, str(1, "v2.2.1"))
			w.Header().Set("Grpc-Status", "13")
			w.Header().Set("Grpc-Message", "late")
		}, wantCode: containerdapi.Internal, wantMsg: "late"},
		{name: "no status", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/grpc")
			_, _ = w.Write([]byte{0, 0, 0, 0, 0})
		}, wantCode: containerdapi.Unknown, wantMsg: "the answer ended without a status"},
		{name: "OK without a message", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "Grpc-Status")
			w.Header().Set("Content-Type", "application/grpc")
			w.WriteHeader(http.StatusOK)
			w.Header().Set("Grpc-Status", "0")
		}, wantCode: containerdapi.Internal, wantMsg: "the daemon answered OK without a message"},
		{name: "HTTP 415", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "invalid gRPC request content-type", http.StatusUnsupportedMediaType)
		}, wantCode: containerdapi.Unknown, wantMsg: "HTTP 415 Unsupported Media Type: invalid gRPC request content-type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeDaemon(t, tc.handler)
			v, err := c.Version(shortCtx(t))
			if tc.wantCode == containerdapi.OK {
				if err != nil || v.Version != "v2.2.1" {
					t.Errorf("Version() = %+v, %v; want v2.2.1", v, err)
				}
				return
			}
			var apiErr *containerdapi.Error
			if !errors.As(err, &apiErr) || apiErr.Code != tc.wantCode || apiErr.Message != tc.wantMsg || apiErr.Method != "containerd.services.version.v1.Version/Version" {
				t.Errorf("Version() error = %#v, want code %v, message %q", err, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

func TestParseAddress(t *testing.T) {
	cases := []struct {
		addr, want string
		wantErr    bool
	}{
		{addr: "", want: "/run/containerd/containerd.sock"},
		{addr: "/run/containerd-test/containerd.sock", want: "/run/containerd-test/containerd.sock"},
		{addr: "unix:///run/c.sock", want: "/run/c.sock"},
		{addr: "tcp://10.0.0.1:2375", wantErr: true},
		{addr: "relative.sock", wantErr: true},
		{addr: "unix://", wantErr: true},
	}
	for _, tc := range cases {
		got, err := containerdapi.ParseAddress(tc.addr)
		if got != tc.want || (err != nil) != tc.wantErr || err != nil && !errors.Is(err, containerdapi.ErrUnsupportedAddress) {
			t.Errorf("ParseAddress(%q) = %q, %v; want %q (error %v)", tc.addr, got, err, tc.want, tc.wantErr)
		}
	}
	t.Setenv("CONTAINERD_ADDRESS", "/x/containerd.sock")
	if got := (&containerdapi.Client{}).SocketPath(); got != "/x/containerd.sock" {
		t.Errorf("a zero Client with CONTAINERD_ADDRESS=/x/containerd.sock dials %q", got)
	}
}

// TestSocketFromEnv: a client with no socket calls the daemon that
// CONTAINERD_ADDRESS names; one that names no unix socket fails the call.
func TestSocketFromEnv(t *testing.T) {
	sock := rr.ServeH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		readRequest(t, r)
		answer(w, cat(str(1, "v2.2.1"), str(2, "rev")))
	}))
	t.Setenv("CONTAINERD_ADDRESS", "unix://"+sock)
	v, err := (&containerdapi.Client{WaitForEngine: -1}).Version(shortCtx(t))
	if err != nil || v.Version != "v2.2.1" {
		t.Errorf("Version() = %+v, %v; want the daemon's at CONTAINERD_ADDRESS", v, err)
	}
	t.Setenv("CONTAINERD_ADDRESS", "tcp://10.0.0.1:2375")
	if _, err := (&containerdapi.Client{WaitForEngine: -1}).Version(shortCtx(t)); !errors.Is(err, containerdapi.ErrUnsupportedAddress) {
		t.Errorf("Version() = %v, want the address refused", err)
	}
}

func TestLabelFilter(t *testing.T) {
	cases := []struct{ key, value, want string }{
		{"org.waitdaemon.action", "a1", `labels."org.waitdaemon.action"=="a1"`},
		{"k", `say "hi" \ bye`, `labels."k"=="say \"hi\" \\ bye"`},
	}
	for _, tc := range cases {
		if got := containerdapi.LabelFilter(tc.key, tc.value); got != tc.want {
			t.Errorf("LabelFilter(%q, %q) = %s, want %s", tc.key, tc.value, got, tc.want)
		}
	}
}

// TestRequestTimeout: a daemon that never answers fails a unary call after
// RequestTimeout, saying so; Tasks/Wait is exempt and ends with its ctx.
func TestRequestTimeout(t *testing.T) {
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	})
	c.RequestTimeout = 200 * time.Millisecond
	start := time.Now()
	_, err := c.ContainerGet(shortCtx(t), "web")
	if err == nil || !strings.Contains(err.Error(), "no answer within 200ms") || time.Since(start) > 2*time.Second {
		t.Errorf("ContainerGet() of a silent daemon: error %v after %v, want no answer within 200ms", err, time.Since(start))
	}
	ctx, cancel := context.WithTimeout(shortCtx(t), 500*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = c.TaskWait(ctx, "web")
	if err == nil || time.Since(start) < 450*time.Millisecond {
		t.Errorf("TaskWait() ended after %v with %v; want it to wait for its context (500ms)", time.Since(start), err)
	}
}
