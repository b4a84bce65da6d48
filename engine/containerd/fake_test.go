package containerd

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// reply is one answer of a fake daemon: a message, in the fixtures' JSON
// (see testdata/fixtures/containerd-2.2.1), or a status; before either,
// a connection that breaks, with no answer, while broken says so.
type reply struct {
	msg    string
	code   containerdapi.Code
	status string
	broken func() bool
	// hangs: no answer at all, until the client gives the call up.
	hangs bool
}

// fakeDaemon is a daemon that answers each method ("Tasks/Wait") with its
// replies in turn, the last one again and again, and counts its calls.
// It checks nothing the client sends: the fixtures' replay does.
type fakeDaemon struct {
	t       *testing.T
	mu      sync.Mutex
	replies map[string][]reply
	calls   map[string]int
	// sent is each call's request, in the fixtures' JSON, by method.
	sent map[string][]string
}

// withImageX is replies with the daemon's answers to reading the image
// docker.io/library/x:1 (one layer, no config) and finding its snapshot
// unpacked.
func withImageX(replies map[string][]reply) map[string][]reply {
	replies["Images/Get"] = []reply{{msg: `{"image":{"name":"docker.io/library/x:1","target":{"media_type":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:m"}}}`}}
	replies["Content/Read"] = []reply{
		{msg: `{"data":"{\"config\":{\"digest\":\"sha256:c\"},\"layers\":[{\"digest\":\"sha256:l\"}]}"}`},
		{msg: `{"data":"{\"architecture\":\"amd64\",\"os\":\"linux\",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:aaaa\"]}}"}`},
	}
	replies["Snapshots/Stat"] = []reply{{msg: `{}`}}
	return replies
}

// newFake serves replies and returns an engine on them that waits for no
// socket, and the daemon.
func newFake(t *testing.T, replies map[string][]reply) (*Engine, *fakeDaemon) {
	t.Helper()
	d := &fakeDaemon{t: t, replies: replies, calls: map[string]int{}}
	return engineOn(t, d.ServeHTTP), d
}

func (d *fakeDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	method := strings.TrimPrefix(r.URL.Path, "/")
	short := method[strings.LastIndex(method[:strings.LastIndex(method, "/")], ".")+1:]
	var req json.RawMessage
	if len(body) >= 5 {
		req, _ = containerdapi.Codec.Decode(method, true, body[5:])
	}
	d.mu.Lock()
	n := d.calls[short]
	d.calls[short]++
	if d.sent == nil {
		d.sent = map[string][]string{}
	}
	d.sent[short] = append(d.sent[short], string(req))
	rs := d.replies[short]
	d.mu.Unlock()
	w.Header().Set("Content-Type", "application/grpc")
	if len(rs) == 0 {
		d.t.Errorf("fake daemon: unexpected call %s", short)
		w.Header().Set("Grpc-Status", strconv.Itoa(int(containerdapi.Unimplemented)))
		w.WriteHeader(http.StatusOK)
		return
	}
	rep := rs[min(n, len(rs)-1)]
	if rep.hangs {
		<-r.Context().Done()
		panic(http.ErrAbortHandler)
	}
	switch {
	case rep.broken != nil && rep.broken():
		panic(http.ErrAbortHandler)
	case rep.code != containerdapi.OK:
		failWith(w, rep.code, rep.status)
		return
	}
	answerWith(d.t, w, r, rep.msg)
}

// count is how often method was called.
func (d *fakeDaemon) count(method string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[method]
}

// requests is what the client sent to method, in order.
func (d *fakeDaemon) requests(method string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.sent[method]...)
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

// engineOn is an engine on a daemon that h serves, which waits for no
// socket.
func engineOn(t *testing.T, h http.HandlerFunc) *Engine {
	t.Helper()
	c := &containerdapi.Client{Socket: rr.ServeH2C(t, h), Namespace: namespace, WaitForEngine: -1}
	e := New(c)
	e.ProcSelf = t.TempDir()
	return e
}

// methodOf is the short name of r's method: "Create" for Tasks/Create.
func methodOf(r *http.Request) string {
	_, _ = io.ReadAll(r.Body)
	return r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
}

// answerWith answers r with msg, in the fixtures' JSON.
func answerWith(t *testing.T, w http.ResponseWriter, r *http.Request, msg string) {
	method := strings.TrimPrefix(r.URL.Path, "/")
	b, err := containerdapi.Codec.Encode(method, false, json.RawMessage(msg))
	if err != nil {
		t.Errorf("encoding the answer to %s: %v", method, err)
		return
	}
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
	hdr := make([]byte, 5)
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(b)))
	_, _ = w.Write(append(hdr, b...))
	w.Header().Set("Grpc-Status", "0")
}

// failWith answers a status, trailers-only.
func failWith(w http.ResponseWriter, code containerdapi.Code, message string) {
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Grpc-Status", strconv.Itoa(int(code)))
	w.Header().Set("Grpc-Message", message)
	w.WriteHeader(http.StatusOK)
}
