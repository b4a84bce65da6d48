package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/internal/linediff"
	"github.com/waitdaemon/waitdaemon/internal/rr"
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
