package containerdapi_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
	"google.golang.org/protobuf/encoding/protowire"
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

// TestTraceCall traces a create: the method, the metadata, the message
// field by field with the spec as JSON (its secret-looking env value
// redacted), the answer, and the status; then a call that fails.
func TestTraceCall(t *testing.T) {
	c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		readRequest(t, r)
		if strings.HasSuffix(r.URL.Path, "/Get") {
			fail(w, containerdapi.NotFound, `container "gone" in namespace "tinkerbell": not found`)
			return
		}
		answer(w, sub(1, str(1, "web"), sub(4, str(1, containerdapi.RuncV2))))
	})
	var trace traceBuffer
	c.Trace = &trace
	ctx := containerdapi.WithLease(shortCtx(t), "l1")
	_, err := c.ContainerCreate(ctx, containerdapi.Container{
		ID:      "web",
		Labels:  map[string]string{"app": "web"},
		Runtime: containerdapi.Runtime{Name: containerdapi.RuncV2},
		Spec:    containerdapi.SpecAny([]byte(`{"process":{"env":["PATH=/bin", "API_TOKEN=s3cr3t"]}}`)),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.ContainerGet(shortCtx(t), "gone")
	want := `> containerd.services.containers.v1.Containers/Create
> containerd-namespace: tinkerbell
> containerd-lease: l1
> {
>   "container": {
>     "id": "web",
>     "labels": {
>       "app": "web"
>     },
>     "runtime": {
>       "name": "io.containerd.runc.v2"
>     },
>     "spec": {
>       "type_url": "types.containerd.io/opencontainers/runtime-spec/1/Spec",
>       "json": {
>         "process": {
>           "env": [
>             "PATH=/bin",
>             "API_TOKEN=<redacted>"
>           ]
>         }
>       }
>     }
>   }
> }
< containerd.services.containers.v1.Containers/Create
< {
<   "container": {
<     "id": "web",
<     "runtime": {
<       "name": "io.containerd.runc.v2"
<     }
<   }
< }
< containerd.services.containers.v1.Containers/Create: OK
> containerd.services.containers.v1.Containers/Get
> containerd-namespace: tinkerbell
> {
>   "id": "gone"
> }
< containerd.services.containers.v1.Containers/Get: NotFound: container "gone" in namespace "tinkerbell": not found
`
	if d := linediff.Text(want, trace.String()); d != "" {
		t.Errorf("trace (-want +got):\n%s", d)
	}
	if strings.Contains(trace.String(), "s3cr3t") {
		t.Errorf("the trace shows a secret env value")
	}
}

// TestTraceRepeat: a poll's call whose message is the same as the last
// one sent, or read, on its method names it so rather than print it
// again; another message, on that method or another, is printed whole.
func TestTraceRepeat(t *testing.T) {
	c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		id := string(readRequest(t, r)[2:])
		answer(w, sub(1, str(1, id), str(3, "img")))
	})
	var trace traceBuffer
	c.Trace = &trace
	for _, id := range []string{"web", "web", "db", "web"} {
		if _, err := c.ContainerGet(shortCtx(t), id); err != nil {
			t.Fatal(err)
		}
	}
	block := func(id string) string {
		return `> containerd.services.containers.v1.Containers/Get
> containerd-namespace: tinkerbell
> {
>   "id": "` + id + `"
> }
< containerd.services.containers.v1.Containers/Get
< {
<   "container": {
<     "id": "` + id + `",
<     "image": "img"
<   }
< }
< containerd.services.containers.v1.Containers/Get: OK
`
	}
	want := block("web") + `> containerd.services.containers.v1.Containers/Get
> containerd-namespace: tinkerbell
> (the same message as the last one sent)
< containerd.services.containers.v1.Containers/Get
< (the same message as the last one read)
< containerd.services.containers.v1.Containers/Get: OK
` + block("db") + block("web")
	if d := linediff.Text(want, trace.String()); d != "" {
		t.Errorf("trace (-want +got):\n%s", d)
	}
}

// TestTraceTransportError: a call that gets no answer is traced with *.
func TestTraceTransportError(t *testing.T) {
	var trace traceBuffer
	c := &containerdapi.Client{Socket: t.TempDir() + "/none.sock", WaitForEngine: -1, Trace: &trace}
	_, err := c.Version(shortCtx(t))
	if err == nil {
		t.Fatal("Version() of a missing socket succeeded")
	}
	lines := strings.Split(strings.TrimSpace(trace.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "* containerd.services.version.v1.Version/Version: ") || !strings.Contains(last, "no such file or directory") {
		t.Errorf("the trace ends with %q, want * and the method and the dial's error", last)
	}
}

// TestTraceBytesRedacted reads blobs whose bytes hold secret entries, as
// text (an image config) and as binary, shown in base64, in one message
// or split across several (a blob over 1 MiB comes so), even inside a
// secret's name or value: the trace shows neither the secrets nor their
// encodings, and the caller gets the blob as it is. A blob whose stream
// breaks off shows nothing of a secret it cut.
func TestTraceBytesRedacted(t *testing.T) {
	config := `{"architecture":"amd64","config":{"Env":["PATH=/bin","REGISTRY_PASSWORD=hunter2-cfg","GITHUB_TOKEN=ghp_s3cr3t"]}}`
	configShown := `<   "data": "{\"architecture\":\"amd64\",\"config\":{\"Env\":[\"PATH=/bin\",\"REGISTRY_PASSWORD=<redacted>\",\"GITHUB_TOKEN=<redacted>\"]}}"`
	cases := []struct {
		name    string
		data    string
		split   []int // where the daemon splits the blob into messages
		broken  bool  // the stream breaks off after the last split
		secrets []string
		want    string // a line the trace must show
	}{
		{
			name:    "image config, split in a name and in a value",
			data:    config,
			split:   []int{strings.Index(config, "PASSWORD"), strings.Index(config, "s3cr3t")},
			secrets: []string{"hunter2-cfg", "ghp_s3cr3t", "s3cr3t"},
			want:    configShown,
		},
		{
			name:    "image config, broken off in a value",
			data:    config,
			split:   []int{strings.Index(config, "cr3t")},
			broken:  true,
			secrets: []string{"hunter2-cfg", "ghp_s3"},
			want:    `<   "data": "{\"architecture\":\"amd64\",\"config\":{\"Env\":[\"PATH=/bin\",\"REGISTRY_PASSWORD=<redacted>\",<redacted>"`,
		},
		{
			name:    "image config",
			data:    `{"architecture":"amd64","config":{"Env":["PATH=/bin","REGISTRY_PASSWORD=hunter2-cfg","GITHUB_TOKEN=ghp_s3cr3t"]}}`,
			secrets: []string{"hunter2-cfg", "ghp_s3cr3t"},
			want:    `<   "data": "{\"architecture\":\"amd64\",\"config\":{\"Env\":[\"PATH=/bin\",\"REGISTRY_PASSWORD=<redacted>\",\"GITHUB_TOKEN=<redacted>\"]}}"`,
		},
		{
			name:    "binary",
			data:    "\xff\x00[\"API_KEY=k3y-s3cr3t\"]\xfe",
			secrets: []string{"k3y-s3cr3t"},
			want:    `<     "base64": "` + base64.StdEncoding.EncodeToString([]byte("\xff\x00[\"API_KEY=<redacted>\"]\xfe")) + `"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				readRequest(t, r)
				w.Header().Set("Content-Type", "application/grpc")
				w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
				at := 0
				for _, end := range append(tc.split, len(tc.data)) {
					if tc.broken && end == len(tc.data) {
						panic(http.ErrAbortHandler)
					}
					msg := cat(varint(1, uint64(at)), protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte(tc.data[at:end])))
					hdr := make([]byte, 5)
					binary.BigEndian.PutUint32(hdr[1:], uint32(len(msg)))
					_, _ = w.Write(append(hdr, msg...))
					w.(http.Flusher).Flush()
					at = end
				}
				w.Header().Set("Grpc-Status", "0")
			})
			var trace traceBuffer
			c.Trace = &trace
			got, err := c.ContentRead(shortCtx(t), "sha256:0123")
			if tc.broken != (err != nil) || !tc.broken && string(got) != tc.data {
				t.Fatalf("ContentRead() = %q, %v; want %q, an error %v", got, err, tc.data, tc.broken)
			}
			text := trace.String()
			if !slices.Contains(strings.Split(text, "\n"), tc.want) {
				t.Errorf("the trace has no line %s:\n%s", tc.want, text)
			}
			shown := text
			for _, m := range regexp.MustCompile(`"base64": "([^"]*)"`).FindAllStringSubmatch(text, -1) {
				decoded, _ := base64.StdEncoding.DecodeString(m[1])
				shown += "\n" + string(decoded)
			}
			for _, s := range tc.secrets {
				if strings.Contains(shown, s) {
					t.Errorf("the trace shows the secret %q, in clear or in base64:\n%s", s, text)
				}
			}
		})
	}
}

// TestTraceEmptyBlob: an empty blob, no message, is traced as no
// message: no empty one joined from none.
func TestTraceEmptyBlob(t *testing.T) {
	c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		readRequest(t, r)
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		w.Header().Set("Grpc-Status", "0")
	})
	var trace traceBuffer
	c.Trace = &trace
	got, err := c.ContentRead(shortCtx(t), "sha256:0123")
	if err != nil || len(got) != 0 {
		t.Fatalf("ContentRead() = %q, %v; want nothing, no error", got, err)
	}
	var read []string
	for _, l := range strings.Split(trace.String(), "\n") {
		if strings.HasPrefix(l, "<") {
			read = append(read, l)
		}
	}
	if want := []string{"< containerd.services.content.v1.Content/Read: OK"}; !slices.Equal(read, want) {
		t.Errorf("the trace shows %q read, want %q alone:\n%s", read, want, trace.String())
	}
}

// TestContentReader reads a blob as it streams, piece by piece, and
// traces how many bytes came, not the bytes; a piece at another offset
// than the next is an error.
func TestContentReader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offsets []int // of each piece; nil: where each should be
		wantErr string
	}{
		{name: "in order"},
		{name: "a piece out of place", offsets: []int{0, 3, 2}, wantErr: "a chunk at offset 3, expected 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pieces := []string{"ab", "cd", "e"}
			c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				readRequest(t, r)
				w.Header().Set("Content-Type", "application/grpc")
				w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
				at := 0
				for i, p := range pieces {
					off := at
					if tc.offsets != nil {
						off = tc.offsets[i]
					}
					msg := cat(varint(1, uint64(off)), protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte(p)))
					hdr := make([]byte, 5)
					binary.BigEndian.PutUint32(hdr[1:], uint32(len(msg)))
					_, _ = w.Write(append(hdr, msg...))
					at += len(p)
				}
				w.Header().Set("Grpc-Status", "0")
			})
			var trace traceBuffer
			c.Trace = &trace
			r, err := c.ContentReader(shortCtx(t), "sha256:0123")
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("read %q, %v; want an error saying %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || string(got) != "abcde" {
				t.Errorf("read %q, %v; want abcde", got, err)
			}
			if text := trace.String(); !strings.Contains(text, "< (5 bytes of a blob, not shown)") || strings.Contains(text, "abcde") || strings.Contains(text, `"cd"`) {
				t.Errorf("the trace shows the blob, or not its size:\n%s", text)
			}
		})
	}
}
