package dockerapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/testkit/linediff"

	"github.com/waitdaemon/waitdaemon/internal/redact"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// eofWithLast reads b, and returns io.EOF with its last bytes.
type eofWithLast struct{ b []byte }

func (r *eofWithLast) Read(p []byte) (int, error) {
	n := copy(p, r.b)
	r.b = r.b[n:]
	if len(r.b) == 0 {
		return n, io.EOF
	}
	return n, nil
}

// traceHead is what the trace of a GET /x shows before a streamed body.
const traceHead = "> GET /x HTTP/1.1\n> Host: docker\n>\n< HTTP/1.1 200 OK\n<\n"

// traceStream traces a GET whose answer is body, streamed, read by the
// caller in reads of sizes (in turn, over and over) up to upTo bytes (the
// whole body when upTo < 0), then closed. With eofLast, the body's last
// read returns its bytes and io.EOF at once. It returns the trace of the
// body.
func traceStream(t testing.TB, body []byte, sizes []int, upTo int, eofLast bool) string {
	t.Helper()
	var w bytes.Buffer
	tr := &tracer{w: &w, next: roundTripFunc(func(*http.Request) (*http.Response, error) {
		var r io.Reader = bytes.NewReader(body)
		if eofLast {
			r = &eofWithLast{body}
		}
		return &http.Response{
			Status: "200 OK", StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, ContentLength: -1, Body: io.NopCloser(r),
		}, nil
	})}
	req, err := http.NewRequest(http.MethodGet, "http://docker/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if upTo < 0 {
		upTo = len(body) + 1
	}
	var got []byte
	for i := 0; len(got) < upTo; i++ {
		p := make([]byte, min(sizes[i%len(sizes)], upTo-len(got)))
		n, err := resp.Body.Read(p)
		got = append(got, p[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	resp.Body.Close()
	if want := body[:min(upTo, len(body))]; !bytes.Equal(got, want) {
		t.Fatalf("the caller read %q, want %q", got, want)
	}
	trace, ok := strings.CutPrefix(w.String(), traceHead)
	if !ok {
		t.Fatalf("trace %q does not begin with %q", w.String(), traceHead)
	}
	return trace
}

// TestTraceStreamSplits traces streamed bodies read in pieces that cut
// secret entries anywhere: the trace is the body redacted whole, whatever
// the reads.
func TestTraceStreamSplits(t *testing.T) {
	cases := []struct {
		name  string
		body  string
		sizes []int
		want  string
	}{
		{
			name:  "a read ends in the value",
			body:  `{"Env":["PATH=/bin","REGISTRY_PASSWORD=hunter2-abc"]}` + "\n",
			sizes: []int{44, 100},
			want:  `{"Env":["PATH=/bin","REGISTRY_PASSWORD=<redacted>"]}` + "\n",
		},
		{
			name:  "a read ends in the name",
			body:  `{"Env":["PATH=/bin","REGISTRY_PASSWORD=hunter2-abc"]}` + "\n",
			sizes: []int{25, 100},
			want:  `{"Env":["PATH=/bin","REGISTRY_PASSWORD=<redacted>"]}` + "\n",
		},
		{
			name:  "a read ends at the equals sign",
			body:  `{"Env":["GITHUB_TOKEN=ghp_s3cr3t"]}` + "\n",
			sizes: []int{22, 100},
			want:  `{"Env":["GITHUB_TOKEN=<redacted>"]}` + "\n",
		},
		{
			name:  "a read ends between a backslash and the quote it escapes",
			body:  `{"Env":["API_KEY=ab\"cd-s3cr3t"]}` + "\n",
			sizes: []int{20, 100},
			want:  `{"Env":["API_KEY=<redacted>"]}` + "\n",
		},
		{
			name:  "a read ends before the closing quote",
			body:  `["DB_PASSWD=s3cr3t","X=1"]` + "\n",
			sizes: []int{18, 100},
			want:  `["DB_PASSWD=<redacted>","X=1"]` + "\n",
		},
		{
			name:  "one byte at a time, lines and a last line without a newline",
			body:  "{\"status\":\"Pulling\"}\n{\"Env\":[\"MY_SECRET_VALUE=s3cr3t\"]}\n[\"PASSWORD=s3cr3t\"]",
			sizes: []int{1},
			want:  "{\"status\":\"Pulling\"}\n{\"Env\":[\"MY_SECRET_VALUE=<redacted>\"]}\n[\"PASSWORD=<redacted>\"]\n",
		},
		{
			name:  "a value across lines, as Redact sees it whole",
			body:  "\"API_TOKEN=s3\ncr3t\" and after\n",
			sizes: []int{3, 5},
			want:  "\"API_TOKEN=<redacted>\" and after\n",
		},
		{
			name:  "a read ends in a name with dots and dashes",
			body:  `{"Env":["spring.datasource.password=s3cr3t","DB-PASSWORD=s3cr3t"]}` + "\n",
			sizes: []int{20, 30, 100},
			want:  `{"Env":["spring.datasource.password=<redacted>","DB-PASSWORD=<redacted>"]}` + "\n",
		},
		{
			name:  "a quote that opens no secret",
			body:  `{"message":"password is wrong","x":"a=b"}` + "\n",
			sizes: []int{7},
			want:  `{"message":"password is wrong","x":"a=b"}` + "\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := traceStream(t, []byte(tc.body), tc.sizes, -1, false)
			if d := linediff.Text(tc.want, got); d != "" {
				t.Errorf("trace of the body (-want +got):\n%s", d)
			}
		})
	}
}

// TestTraceStreamClosedEarly: a body closed before its end never shows
// the beginning of a secret entry it cut off.
func TestTraceStreamClosedEarly(t *testing.T) {
	body := []byte("{\"status\":\"Pulling\"}\n{\"Env\":[\"REGISTRY_PASSWORD=hunter2-abc\"]}\n")
	upTo := bytes.Index(body, []byte("-abc"))
	got := traceStream(t, body, []int{8}, upTo, false)
	want := "{\"status\":\"Pulling\"}\n{\"Env\":[<redacted>\n"
	if d := linediff.Text(want, got); d != "" {
		t.Errorf("trace of the body (-want +got):\n%s", d)
	}
}

// TestTraceStreamLongValue: a secret entry longer than the trace holds
// back is never shown; the trace says so and shows no more of the body,
// even when the body ends in the read that made the entry too long.
func TestTraceStreamLongValue(t *testing.T) {
	long := strings.Repeat("s3cr3t", 1<<20/6)
	head := "{\"status\":\"Pulling\"}\n{\"Env\":[\"REGISTRY_PASSWORD=" + long
	want := "{\"status\":\"Pulling\"}\n{\"Env\":[\n* the trace withholds the rest of this body: a value too long to tell whether it is secret\n"
	cases := []struct {
		name    string
		body    string
		sizes   []int
		eofLast bool
	}{
		{"read in pieces", head + "\"]}\n{\"status\":\"done\"}\n", []int{4096}, false},
		{"unfinished, read at once with its end", head, []int{1 << 21}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := traceStream(t, []byte(tc.body), tc.sizes, -1, tc.eofLast)
			if d := linediff.Text(want, got); d != "" {
				t.Errorf("trace of the body (-want +got):\n%s", d)
			}
		})
	}
}

// streamSecrets are the secrets streamBody seeds.
var streamSecrets = []string{"hunter2-a1b2c3", `ghp_0123"4567\89`, "xoxb-s3cr3t-9876"}

// streamBody is a pull-like stream of JSON lines padded with pad, holding
// secret entries.
func streamBody(pad string) []byte {
	line := func(v any) []byte {
		b, _ := json.Marshal(v)
		return append(b, '\n')
	}
	var b []byte
	b = append(b, line(map[string]any{"status": "Downloading", "progress": pad, "id": "abc"})...)
	b = append(b, line(map[string]any{"Env": []string{"PATH=/bin", "REGISTRY_PASSWORD=" + streamSecrets[0], "PAD=" + pad, "GITHUB_TOKEN=" + streamSecrets[1]}})...)
	b = append(b, line(map[string]any{"pad": pad, "Env": []string{"SLACK_API_KEY=" + streamSecrets[2]}, "more": pad})...)
	b = append(b, line(map[string]any{"Cmd": []string{"Credential=" + streamSecrets[0], pad}})...)
	return b
}

// readSizes turns fuzzed bytes into the sizes of the caller's reads.
func readSizes(splits []byte, whole int) []int {
	if len(splits) == 0 {
		return []int{whole + 1}
	}
	sizes := make([]int, len(splits))
	for i, s := range splits {
		sizes[i] = int(s) + 1
	}
	return sizes
}

// FuzzTraceStream streams a body of JSON lines with secret entries and
// fuzzed padding, read in fuzzed pieces: no secret ever shows in the
// trace, and the trace is the body redacted whole.
func FuzzTraceStream(f *testing.F) {
	// As the issue tried it: padding growing by 101 bytes a run.
	for run := range 42 {
		f.Add(strings.Repeat("x", 101*run), []byte{255, 127, 63})
	}
	f.Add("", []byte{0})
	f.Add(`a"b\c"PASSWORD=`, []byte{1, 2, 3})
	f.Add("\n\"\\", []byte{16, 200})
	f.Fuzz(func(t *testing.T, pad string, splits []byte) {
		body := streamBody(pad)
		got := traceStream(t, body, readSizes(splits, len(body)), -1, len(splits)%2 == 1)
		if want := string(redact.Secrets(body)); got != want {
			t.Errorf("trace of the body (-want +got):\n%s", linediff.Text(want, got))
		}
		for _, s := range streamSecrets {
			escaped, _ := json.Marshal(s) // as the body holds it
			if strings.Contains(got, s) || strings.Contains(got, string(escaped[1:len(escaped)-1])) {
				t.Errorf("the trace shows the secret %q:\n%s", s, got)
			}
		}
	})
}

// FuzzTraceAnyBody streams any body, read in fuzzed pieces: the trace is
// the body redacted whole.
func FuzzTraceAnyBody(f *testing.F) {
	f.Add([]byte(`{"Env":["REGISTRY_PASSWORD=hunter2"]}`+"\n"), []byte{20})
	f.Add([]byte(`"TOKEN=a\"b" "x" "MY_SECRET=`), []byte{0, 1})
	f.Add([]byte("\"API_KEY=a\nb\"\n\"PASSWORD\n"), []byte{2})
	f.Fuzz(func(t *testing.T, body []byte, splits []byte) {
		got := traceStream(t, body, readSizes(splits, len(body)), -1, len(splits)%2 == 1)
		want := string(redact.Secrets(body))
		if want != "" && !strings.HasSuffix(want, "\n") {
			want += "\n"
		}
		if got != want {
			t.Errorf("trace of %q (-want +got):\n%s", body, linediff.Text(want, got))
		}
	})
}

// TestTraceBufferedOrStreamed: a body of known length up to maxBuffered
// is traced whole with the headers, before the caller reads any of it; a
// longer one, or one of unknown length, is traced as the caller reads it.
// Either way the trace ends with the whole body.
func TestTraceBufferedOrStreamed(t *testing.T) {
	cases := []struct {
		name     string
		size     int   // of the body
		length   int64 // the response's ContentLength
		buffered bool
	}{
		{name: "empty", size: 0, length: 0, buffered: true},
		{name: "small", size: 100, length: 100, buffered: true},
		{name: "the most traced whole", size: maxBuffered, length: maxBuffered, buffered: true},
		{name: "a byte more", size: maxBuffered + 1, length: maxBuffered + 1},
		{name: "unknown length", size: 100, length: -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := linesOf(tc.size)
			var w bytes.Buffer
			tr := &tracer{w: &w, next: roundTripFunc(func(*http.Request) (*http.Response, error) {
				return &http.Response{
					Status: "200 OK", StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1,
					Header: http.Header{}, ContentLength: tc.length, Body: io.NopCloser(bytes.NewReader(body)),
				}, nil
			})}
			req, err := http.NewRequest(http.MethodGet, "http://docker/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			before := w.Len() - len(traceHead)
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("the caller read %d bytes (%v), want %d", len(got), err, len(body))
			}
			wantBefore := 0
			if tc.buffered {
				wantBefore = len(body)
			}
			if before != wantBefore {
				t.Errorf("traced %d bytes of the body before the caller read it, want %d", before, wantBefore)
			}
			if trace := w.String(); trace != traceHead+string(body) {
				t.Errorf("the trace is %d bytes, not the head and the whole body (%d): %.200q…", len(trace), len(traceHead)+len(body), trace)
			}
		})
	}
}

// linesOf is a body of size bytes in short JSON lines, with no secret;
// it ends with a newline unless empty.
func linesOf(size int) []byte {
	var b []byte
	for len(b) < size {
		line := []byte(`{"status":"Downloading","progress":"[==>   ]"}` + "\n")
		if rest := size - len(b); rest < len(line) {
			line = append(bytes.Repeat([]byte(" "), rest-1), '\n')
		}
		b = append(b, line...)
	}
	return b
}
