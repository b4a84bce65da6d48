package dockerapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/internal/linediff"
)

// TestRaw: the api subcommand's request goes out as asked, under the
// negotiated version (here pinned) unless its path names one; its body must be JSON; an
// answer under 400 is the caller's to read, one from 400 an *Error; and
// only a GET or HEAD is sent again after a 503.
func TestRaw(t *testing.T) {
	cases := []struct {
		name, method, path, body string
		status                   []int // the engine's answers, in turn
		want                     string
		wantSent                 []string
	}{
		{name: "a path without a version", method: "GET", path: "containers/json?all=1", status: []int{200},
			want: "200 answer", wantSent: []string{"GET /v1.41/containers/json?all=1 "}},
		{name: "a path with its version, lowercase method", method: "get", path: "/v1.43/info", status: []int{200},
			want: "200 answer", wantSent: []string{"GET /v1.43/info "}},
		{name: "a version-like path that is none", method: "GET", path: "/vx/info", status: []int{200},
			want: "200 answer", wantSent: []string{"GET /v1.41/vx/info "}},
		{name: "the ping", method: "HEAD", path: "/_ping", status: []int{200},
			want: "200 ", wantSent: []string{"HEAD /_ping "}},
		{name: "a JSON body", method: "POST", path: "/containers/x/rename", body: `{"a": 1}`, status: []int{204},
			want: "204 ", wantSent: []string{`POST /v1.41/containers/x/rename {"a":1}`}},
		{name: "a body that is not JSON", method: "POST", path: "/x", body: "{", want: `error: body "{": expected JSON`},
		{name: "a bad path", method: "GET", path: "%zz", want: `error: path "%zz": parse "%zz": invalid URL escape "%zz"`},
		{name: "the last status that is no error", method: "GET", path: "/x", status: []int{399},
			want: "399 answer", wantSent: []string{"GET /v1.41/x "}},
		{name: "the first that is", method: "GET", path: "/x", status: []int{400},
			want: "error 400: answer", wantSent: []string{"GET /v1.41/x "}},
		{name: "a GET is sent again after a 503", method: "GET", path: "/x", status: []int{503, 200},
			want: "200 answer", wantSent: []string{"GET /v1.41/x ", "GET /v1.41/x "}},
		{name: "so is a HEAD", method: "HEAD", path: "/x", status: []int{503, 200},
			want: "200 ", wantSent: []string{"HEAD /v1.41/x ", "HEAD /v1.41/x "}},
		{name: "a POST is not", method: "POST", path: "/x", status: []int{503, 200},
			want: "error 503: answer", wantSent: []string{"POST /v1.41/x "}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var sent []string
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				body, _ := io.ReadAll(r.Body)
				sent = append(sent, fmt.Sprintf("%s %s %s", r.Method, r.URL.RequestURI(), body))
				status := tc.status[min(len(sent), len(tc.status))-1]
				if status >= 400 {
					writeJSON(w, status, map[string]string{"message": "answer"})
					return
				}
				w.WriteHeader(status)
				fmt.Fprint(w, "answer")
			})
			var got string
			resp, err := c.Raw(context.Background(), tc.method, tc.path, []byte(tc.body))
			var api *dockerapi.Error
			switch {
			case errors.As(err, &api):
				got = fmt.Sprintf("error %d: %s", api.Status, api.Message)
			case err != nil:
				got = "error: " + err.Error()
			default:
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got = fmt.Sprintf("%d %s", resp.StatusCode, body)
			}
			if got != tc.want {
				t.Errorf("Raw() = %s, want %s", got, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := linediff.Lines(tc.wantSent, sent); diff != "" {
				t.Errorf("sent (-want +got):\n%s", diff)
			}
		})
	}
}
