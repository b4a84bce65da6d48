package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTail: the last lines of a container's output, as a terminal shows
// them.
func TestTail(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want []string
	}{
		{"", 3, []string{}},
		{"\n", 3, []string{}},
		{"a\nb\nc\n", 2, []string{"b", "c"}},
		{"a\r\nb\r\n", 5, []string{"a", "b"}},
		{"}\rprobe: exiting 3 as asked\r", 2, []string{"probe: exiting 3 as asked"}},
		{"10%\r50%\r100%\ndone\n", 2, []string{"100%", "done"}},
		{"no newline at the end", 1, []string{"no newline at the end"}},
	}
	for _, tc := range cases {
		if got := Tail(tc.in, tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("Tail(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// TestLog: each line is one JSON object, the time and what happened
// first, then the fields of the details when they are an object with
// fields; anything else adds nothing. A nil writer is silence.
func TestLog(t *testing.T) {
	cases := []struct {
		details any
		want    map[string]string // besides time and msg
	}{
		{map[string]string{"container": "c1"}, map[string]string{"container": "c1"}},
		{struct {
			ID string `json:"id"`
		}{"a1"}, map[string]string{"id": "a1"}},
		{nil, map[string]string{}},
		{struct{}{}, map[string]string{}},
		{[]string{"x"}, map[string]string{}},
		{func() {}, map[string]string{}},
	}
	for _, tc := range cases {
		var buf bytes.Buffer
		Log(&buf, "happened", tc.details)
		line, ok := strings.CutSuffix(buf.String(), "\n")
		if !ok || strings.Contains(line, "\n") {
			t.Errorf("Log(%#v) wrote %q, want one line", tc.details, buf.String())
			continue
		}
		var got map[string]string
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Errorf("Log(%#v) wrote %q, no JSON object of strings: %v", tc.details, line, err)
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, got["time"]); err != nil || got["msg"] != "happened" {
			t.Errorf("Log(%#v) wrote %q, want the time and the msg", tc.details, line)
		}
		if !strings.HasPrefix(line, `{"time":`) {
			t.Errorf("Log(%#v) wrote %q, want the time first", tc.details, line)
		}
		delete(got, "time")
		delete(got, "msg")
		if !maps.Equal(got, tc.want) {
			t.Errorf("Log(%#v) wrote the fields %v, want %v", tc.details, got, tc.want)
		}
	}
	Log(nil, "nobody hears", map[string]string{"a": "b"})
}

// TestAuthString: a credential is named by its user, or as an identity
// token, and its registry; never by its secret.
func TestAuthString(t *testing.T) {
	cases := []struct {
		auth *Auth
		want string
	}{
		{nil, "anonymous"},
		{&Auth{Username: "ci", Password: "s3cret", Registry: "docker.io"}, "ci@docker.io"},
		{&Auth{IdentityToken: "t0ken", Registry: "ghcr.io"}, "identity token@ghcr.io"},
	}
	for _, tc := range cases {
		for _, s := range []string{tc.auth.String(), fmt.Sprintf("%v", tc.auth), fmt.Sprintf("%#v", tc.auth)} {
			if s != tc.want {
				t.Errorf("%q, want %q", s, tc.want)
			}
		}
	}
}

// TestSleep: Sleep waits its time, and reports false at once for a
// context that has ended.
func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep(1ms) = false, want true")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	began := time.Now()
	if Sleep(ctx, time.Hour) || time.Since(began) > time.Second {
		t.Errorf("Sleep(ended, 1h) = true or took %v, want false at once", time.Since(began))
	}
}
