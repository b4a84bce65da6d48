package dockerapi_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// frame is one frame of the engine's multiplexed stream.
func frame(stream byte, payload string) string {
	hdr := make([]byte, 8)
	hdr[0] = stream
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(payload)))
	return string(hdr) + payload
}

func TestDemux(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 4096) // 64 KiB, more than one read
	cases := []struct {
		name               string
		stream             string
		wantOut, wantErr   string
		wantFailure        string // a substring of the error; "" means nil
		wantFailureWrapped error  // what the error must wrap, if anything
	}{
		{name: "empty", stream: ""},
		{
			name:    "both streams",
			stream:  frame(1, "out 1\n") + frame(2, "err 1\n") + frame(1, "out 2\n") + frame(2, "err 2\n"),
			wantOut: "out 1\nout 2\n", wantErr: "err 1\nerr 2\n",
		},
		{
			name:    "zero-length frames",
			stream:  frame(1, "") + frame(2, "e") + frame(2, "") + frame(1, "o") + frame(1, ""),
			wantOut: "o", wantErr: "e",
		},
		{name: "stdin as stdout", stream: frame(0, "in"), wantOut: "in"},
		{name: "big frame", stream: frame(2, big) + frame(1, "tail"), wantOut: "tail", wantErr: big},
		{name: "binary payload", stream: frame(1, "\x00\x01\x02\xff") + frame(2, "\x02\x00\x00\x00"), wantOut: "\x00\x01\x02\xff", wantErr: "\x02\x00\x00\x00"},
		{
			name:        "truncated payload",
			stream:      frame(1, "whole\n") + frame(2, "cut short")[:8+3],
			wantOut:     "whole\n",
			wantErr:     "cut",
			wantFailure: "reading frame of 9 bytes: unexpected EOF", wantFailureWrapped: io.ErrUnexpectedEOF,
		},
		{
			name:        "truncated header",
			stream:      frame(1, "whole\n") + frame(1, "next")[:5],
			wantOut:     "whole\n",
			wantFailure: "reading frame header: unexpected EOF", wantFailureWrapped: io.ErrUnexpectedEOF,
		},
		{
			name:        "unknown stream 7",
			stream:      frame(1, "ok") + frame(7, "what") + frame(1, "never"),
			wantOut:     "ok",
			wantFailure: "reading frame header: unknown stream 7",
		},
		{
			// A TTY container's raw output, demultiplexed by mistake.
			name:        "raw text",
			stream:      "hello, world\n",
			wantFailure: "reading frame header: unknown stream 104",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []struct {
				name string
				wrap func(io.Reader) io.Reader
			}{
				{"whole", func(r io.Reader) io.Reader { return r }},
				{"one byte at a time", iotest.OneByteReader},
				{"half at a time", iotest.HalfReader},
			} {
				var stdout, stderr bytes.Buffer
				err := dockerapi.Demux(r.wrap(strings.NewReader(tc.stream)), &stdout, &stderr)
				if stdout.String() != tc.wantOut || stderr.String() != tc.wantErr {
					t.Errorf("%s: stdout, stderr (-want +got):\n-%q %q\n+%q %q", r.name, short(tc.wantOut), short(tc.wantErr), short(stdout.String()), short(stderr.String()))
				}
				switch {
				case tc.wantFailure == "" && err != nil:
					t.Errorf("%s: Demux() error = %v, want nil", r.name, err)
				case tc.wantFailure != "" && (err == nil || err.Error() != tc.wantFailure):
					t.Errorf("%s: Demux() error (-want +got):\n-%s\n+%v", r.name, tc.wantFailure, err)
				case tc.wantFailureWrapped != nil && !errors.Is(err, tc.wantFailureWrapped):
					t.Errorf("%s: Demux() error = %v, want it to wrap %v", r.name, err, tc.wantFailureWrapped)
				}
			}
		})
	}
}

// TestContainerLogs reads logs through the client: multiplexed without a
// TTY, raw with one.
func TestContainerLogs(t *testing.T) {
	cases := []struct {
		name             string
		opts             dockerapi.LogsOptions
		body             string
		wantQuery        string
		wantOut, wantErr string
	}{
		{
			name:      "multiplexed",
			opts:      dockerapi.LogsOptions{Tail: 10},
			body:      frame(1, "out\n") + frame(2, "err\n"),
			wantQuery: "stderr=1&stdout=1&tail=10",
			wantOut:   "out\n", wantErr: "err\n",
		},
		{
			name:      "tty",
			opts:      dockerapi.LogsOptions{TTY: true, Follow: true},
			body:      "hello\r\n" + frame(2, "not a frame\n"),
			wantQuery: "follow=1&stderr=1&stdout=1",
			wantOut:   "hello\r\n" + frame(2, "not a frame\n"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var queries seen
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/v1.41/containers/web/logs" {
					t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
				}
				queries.add(r.URL.RawQuery)
				w.Header().Set("Content-Type", "application/vnd.docker.raw-stream")
				_, _ = io.WriteString(w, tc.body)
			})
			var stdout, stderr bytes.Buffer
			if err := c.ContainerLogs(shortCtx(t), "web", tc.opts, &stdout, &stderr); err != nil {
				t.Fatalf("ContainerLogs() error = %v", err)
			}
			if stdout.String() != tc.wantOut || stderr.String() != tc.wantErr {
				t.Errorf("stdout, stderr (-want +got):\n-%q %q\n+%q %q", tc.wantOut, tc.wantErr, stdout.String(), stderr.String())
			}
			if got := queries.get(); len(got) != 1 || got[0] != tc.wantQuery {
				t.Errorf("queries = %q, want [%q]", got, tc.wantQuery)
			}
		})
	}
	t.Run("tty output demultiplexed by mistake", func(t *testing.T) {
		c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "hello, world\n")
		})
		err := c.ContainerLogs(shortCtx(t), "web", dockerapi.LogsOptions{}, io.Discard, io.Discard)
		want := `reading logs of container "web": reading frame header: unknown stream 104`
		if err == nil || err.Error() != want {
			t.Errorf("ContainerLogs() error (-want +got):\n-%s\n+%v", want, err)
		}
	})
}

// short quotes s, shortened when it is long.
func short(s string) string {
	if len(s) <= 80 {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q...%q (%d bytes)", s[:40], s[len(s)-30:], len(s))
}
