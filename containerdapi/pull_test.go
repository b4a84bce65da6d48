package containerdapi_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"google.golang.org/protobuf/encoding/protowire"
)

// readFrame reads one gRPC frame of a stream.
func readFrame(r io.Reader) ([]byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	msg := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
	_, err := io.ReadFull(r, msg)
	return msg, err
}

func writeFrame(w http.ResponseWriter, msg []byte) {
	hdr := make([]byte, 5)
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(msg)))
	_, _ = w.Write(append(hdr, msg...))
	w.(http.Flusher).Flush()
}

// fields decodes the top-level string and varint fields of a message.
func fields(t *testing.T, msg []byte) map[protowire.Number]string {
	t.Helper()
	out := map[protowire.Number]string{}
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		msg = msg[n:]
		switch typ {
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(msg)
			out[num] = string(v)
			msg = msg[n:]
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(msg)
			out[num] = string(rune('0' + v))
			msg = msg[n:]
		default:
			t.Fatalf("unexpected wire type %d", typ)
		}
	}
	return out
}

// TestPullCredentials: the daemon asks for credentials for each host it
// talks to, on the one auth stream; the pull answers each ask, with them
// only for the host they are for, and with none (auth type NONE) for
// another, such as a mirror.
func TestPullCredentials(t *testing.T) {
	asks := []struct {
		host         string
		wantUser     string
		wantSecret   string
		wantAuthType string
	}{
		{host: "mirror.example", wantAuthType: ""},
		{host: "registry.example:5000", wantUser: "u", wantSecret: "p", wantAuthType: "1"},
		{host: "registry.example:5000", wantUser: "u", wantSecret: "p", wantAuthType: "1"}, // asked again, for a new token
	}
	var mu sync.Mutex
	var answered []map[protowire.Number]string
	var authStream string
	answeredc := make(chan struct{})
	c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		method := r.URL.Path[1:]
		switch method {
		case "containerd.services.streaming.v1.Streaming/Stream":
			first, err := readFrame(r.Body)
			if err != nil {
				t.Error(err)
				return
			}
			streamInit := fields(t, first)
			id := fields(t, []byte(streamInit[2]))[1]
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			writeFrame(w, str(1, "google.protobuf.Empty"))
			for _, ask := range asks {
				writeFrame(w, cat(str(1, "containerd.types.transfer.AuthRequest"), str(2, string(cat(str(1, ask.host), str(2, "registry.example:5000/x:1"))))))
				resp, err := readFrame(r.Body)
				if err != nil {
					t.Errorf("no answer to the ask for %s: %v", ask.host, err)
					break
				}
				a := fields(t, resp)
				if a[1] != "containerd.types.transfer.AuthResponse" {
					t.Errorf("answer of type %q, want an AuthResponse", a[1])
				}
				mu.Lock()
				answered, authStream = append(answered, fields(t, []byte(a[2]))), id
				mu.Unlock()
			}
			close(answeredc)
			<-r.Context().Done()
		case "containerd.services.transfer.v1.Transfer/Transfer":
			msg := readRequest(t, r)
			src := fields(t, []byte(fields(t, []byte(fields(t, msg)[1]))[2]))
			resolver := fields(t, []byte(src[2]))
			<-answeredc
			mu.Lock()
			if resolver[1] != authStream || src[1] != "registry.example:5000/x:1" {
				t.Errorf("transfer of %q with auth stream %q, want registry.example:5000/x:1 and %q", src[1], resolver[1], authStream)
			}
			mu.Unlock()
			answer(w, nil)
		case "containerd.services.leases.v1.Leases/Create":
			answer(w, sub(1, str(1, fields(t, readRequest(t, r))[1])))
		default:
			readRequest(t, r)
			answer(w, nil)
		}
	})
	err := c.Pull(shortCtx(t), containerdapi.PullRequest{
		Ref:  "registry.example:5000/x:1",
		Auth: containerdapi.StaticAuth("registry.example:5000", "u", "p"),
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(answered) != len(asks) {
		t.Fatalf("%d asks answered, want %d", len(answered), len(asks))
	}
	for i, ask := range asks {
		if a := answered[i]; a[3] != ask.wantUser || a[2] != ask.wantSecret || a[1] != ask.wantAuthType {
			t.Errorf("credentials sent for %s: user %q secret %q type %q; want %q %q %q", ask.host, a[3], a[2], a[1], ask.wantUser, ask.wantSecret, ask.wantAuthType)
		}
	}
	if !strings.HasPrefix(authStream, "waitdaemon-") {
		t.Errorf("auth stream %q, want a waitdaemon- ID", authStream)
	}
}

// TestPullBrokenOff: a pull that breaks off (its answer lost, or
// UNAVAILABLE) is one transfer, and fails as lost: the engine layer pulls
// again. A refusal is no lost answer.
func TestPullBrokenOff(t *testing.T) {
	cases := []struct {
		name      string
		first     func(w http.ResponseWriter)
		always    bool // every transfer fails as the first
		wantErr   bool
		transfers int
	}{
		{"answer lost", func(http.ResponseWriter) { panic(http.ErrAbortHandler) }, false, true, 1},
		{"unavailable", func(w http.ResponseWriter) { fail(w, containerdapi.Unavailable, "restarting") }, false, true, 1},
		{"refused", func(w http.ResponseWriter) { fail(w, containerdapi.Unknown, "401 Unauthorized") }, false, true, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			ended := map[string]bool{} // progress streams of transfers that ended
			var streams []string
			var sent []time.Time
			c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path[1:] {
				case "containerd.services.streaming.v1.Streaming/Stream":
					if _, err := readFrame(r.Body); err != nil {
						t.Error(err)
						return
					}
					w.Header().Set("Content-Type", "application/grpc")
					writeFrame(w, str(1, "google.protobuf.Empty"))
					<-r.Context().Done()
				case "containerd.services.transfer.v1.Transfer/Transfer":
					msg := readRequest(t, r)
					// No platform asked for: this host's, in the image store.
					if dst := fields(t, msg)[2]; !strings.Contains(dst, "linux") || !strings.Contains(dst, runtime.GOARCH) {
						t.Errorf("transfer to %q, want this host's platform", dst)
					}
					progress := fields(t, []byte(fields(t, msg)[3]))[1]
					mu.Lock()
					streams = append(streams, progress)
					sent = append(sent, time.Now())
					n, forgotten := len(streams), ended[progress]
					ended[progress] = true
					mu.Unlock()
					switch {
					case forgotten:
						fail(w, containerdapi.NotFound, "stream "+progress+" not found")
					case n == 1 || tc.always:
						tc.first(w)
					default:
						answer(w, nil)
					}
				case "containerd.services.leases.v1.Leases/Create":
					answer(w, sub(1, str(1, fields(t, readRequest(t, r))[1])))
				default:
					readRequest(t, r)
					answer(w, nil)
				}
			})
			err := c.Pull(shortCtx(t), containerdapi.PullRequest{Ref: "registry.example:5000/x:1", Progress: func(containerdapi.Progress) {}})
			mu.Lock()
			defer mu.Unlock()
			if (err != nil) != tc.wantErr || len(streams) != tc.transfers {
				t.Fatalf("Pull() = %v after %d transfers (progress streams %q); want error %v after %d", err, len(streams), streams, tc.wantErr, tc.transfers)
			}
			var lost interface{ Lost() bool }
			if isLost := errors.As(err, &lost) && lost.Lost(); isLost != (tc.name != "refused") {
				t.Errorf("Pull() = %v, lost %v; want lost only when the pull broke off", err, isLost)
			}
		})
	}
}

// TestPullLastProgress: progress the daemon sends after it answered the
// transfer, on a stream it then ends, still reaches the caller before
// Pull returns.
func TestPullLastProgress(t *testing.T) {
	transferred := make(chan struct{})
	c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path[1:] {
		case "containerd.services.streaming.v1.Streaming/Stream":
			if _, err := readFrame(r.Body); err != nil {
				t.Error(err)
				return
			}
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			writeFrame(w, str(1, "google.protobuf.Empty"))
			<-transferred
			select {
			case <-r.Context().Done(): // the client stopped listening
				return
			case <-time.After(50 * time.Millisecond):
			}
			writeFrame(w, cat(str(1, "containerd.types.transfer.Progress"), str(2, string(str(1, "complete")))))
			w.Header().Set("Grpc-Status", "0")
		case "containerd.services.transfer.v1.Transfer/Transfer":
			readRequest(t, r)
			answer(w, nil)
			close(transferred)
		case "containerd.services.leases.v1.Leases/Create":
			answer(w, sub(1, str(1, fields(t, readRequest(t, r))[1])))
		default:
			readRequest(t, r)
			answer(w, nil)
		}
	})
	var mu sync.Mutex
	var events []string
	err := c.Pull(shortCtx(t), containerdapi.PullRequest{Ref: "registry.example:5000/x:1", Progress: func(p containerdapi.Progress) {
		mu.Lock()
		events = append(events, p.Event)
		mu.Unlock()
	}})
	mu.Lock()
	defer mu.Unlock()
	if err != nil || !slices.Equal(events, []string{"complete"}) {
		t.Errorf("Pull() = %v, with progress %q; want the last event before it returned", err, events)
	}
}
