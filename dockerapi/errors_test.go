package dockerapi_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

func TestErrorIs(t *testing.T) {
	const podmanInUse = `container create: creating container storage: the container name "web" is already in use by 0123. You have to remove that container to be able to reuse that name: that name is already in use`
	const podmanRunning = `cannot remove container 0123 as it is running - running or paused containers cannot be removed without force: container state improper`
	cases := []struct {
		name                            string
		status                          int
		message                         string
		notFound, conflict, notModified bool
	}{
		{name: "404", status: 404, message: "No such container: web", notFound: true},
		{name: "409", status: 409, message: "Conflict.", conflict: true},
		{name: "304", status: 304, notModified: true},
		{name: "500", status: 500, message: "driver failed programming external connectivity"},
		{name: "podman 500 name in use", status: 500, message: podmanInUse, conflict: true},
		{name: "podman 500 running", status: 500, message: podmanRunning, conflict: true},
		// Only Podman's 500s are conflicts, and only these messages.
		{name: "400 name in use", status: 400, message: podmanInUse},
		{name: "500 in use mid-message", status: 500, message: "that name is already in use, says the middle of a message: no"},
		{name: "200", status: 200},
		{name: "503 no such", status: 503, message: "No such container: web"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &dockerapi.Error{Status: tc.status, Method: "GET", Path: "/v1.41/x", Message: tc.message}
			for _, w := range []error{e, fmt.Errorf("doing something: %w", e)} {
				got := [3]bool{errors.Is(w, dockerapi.ErrNotFound), errors.Is(w, dockerapi.ErrConflict), errors.Is(w, dockerapi.ErrNotModified)}
				want := [3]bool{tc.notFound, tc.conflict, tc.notModified}
				if got != want {
					t.Errorf("errors.Is(%v, NotFound, Conflict, NotModified) = %v, want %v", w, got, want)
				}
			}
			if errors.Is(e, errors.New("not found")) {
				t.Errorf("errors.Is(%v, a look-alike of ErrNotFound) = true, want false", e)
			}
		})
	}
}

func TestErrorString(t *testing.T) {
	cases := []struct {
		err  dockerapi.Error
		want string
	}{
		{dockerapi.Error{Status: 404, Method: "GET", Path: "/v1.41/containers/web/json", Message: "No such container: web"}, "GET /v1.41/containers/web/json: 404: No such container: web"},
		{dockerapi.Error{Status: 304, Method: "POST", Path: "/v1.41/containers/web/start"}, "POST /v1.41/containers/web/start: 304: Not Modified"},
		{dockerapi.Error{Status: 500, Method: "DELETE", Path: "/v1.41/containers/web"}, "DELETE /v1.41/containers/web: 500: Internal Server Error"},
	}
	for _, tc := range cases {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() (-want +got):\n-%s\n+%s", tc.want, got)
		}
	}
}

// TestErrorFromEngine runs a start against engines answering errors the
// way Docker 20.10 and Podman 4.3 do, and checks what the caller gets.
func TestErrorFromEngine(t *testing.T) {
	cases := []struct {
		name        string
		status      int
		contentType string
		body        string
		wantMsg     string
		wantIs      error // nil: none of the sentinels
	}{
		{"json 404", 404, "application/json", `{"message":"No such container: web"}` + "\n", "No such container: web", dockerapi.ErrNotFound},
		{"json 409", 409, "application/json", `{"message":"Conflict. The container name \"/web\" is already in use"}`, `Conflict. The container name "/web" is already in use`, dockerapi.ErrConflict},
		{"304 without body", 304, "", "", "", dockerapi.ErrNotModified},
		{"json 500", 500, "application/json", `{"message":"error while creating mount source path '/x': mkdir /x: read-only file system"}`, "error while creating mount source path '/x': mkdir /x: read-only file system", nil},
		{"podman 500 in use", 500, "application/json", `{"cause":"that name is already in use","message":"creating container storage: the container name \"web\" is already in use by 0123: that name is already in use","response":500}`, `creating container storage: the container name "web" is already in use by 0123: that name is already in use`, dockerapi.ErrConflict},
		{"podman 500 gone", 500, "application/json", `{"cause":"no such container","message":"no container with name or ID \"web\" found: no such container","response":500}`, `no container with name or ID "web" found: no such container`, dockerapi.ErrNotFound},
		{"text/plain 400", 400, "text/plain; charset=utf-8", "client version 1.11 is too old. Minimum supported API version is 1.12, please upgrade your client to a newer version\n", "client version 1.11 is too old. Minimum supported API version is 1.12, please upgrade your client to a newer version", nil},
		{"json without message", 500, "application/json", `{"error":"boom"}`, `{"error":"boom"}`, nil},
		{"empty 500", 500, "", "", "", nil},
	}
	sentinels := []error{dockerapi.ErrNotFound, dockerapi.ErrConflict, dockerapi.ErrNotModified}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.contentType != "" {
					w.Header().Set("Content-Type", tc.contentType)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})
			err := c.ContainerStart(shortCtx(t), "web")
			var apiErr *dockerapi.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("ContainerStart() error = %v (%T), want a *dockerapi.Error inside", err, err)
			}
			want := dockerapi.Error{Status: tc.status, Method: "POST", Path: "/v1.41/containers/web/start", Message: tc.wantMsg}
			if *apiErr != want {
				t.Errorf("*Error (-want +got):\n-%+v\n+%+v", want, *apiErr)
			}
			wantText := `starting container "web": ` + want.Error()
			if err.Error() != wantText {
				t.Errorf("error text (-want +got):\n-%s\n+%s", wantText, err)
			}
			for _, s := range sentinels {
				if got := errors.Is(err, s); got != (s == tc.wantIs) {
					t.Errorf("errors.Is(err, %v) = %v, want %v", s, got, !got)
				}
			}
		})
	}
}

// TestErrorWrapped checks that endpoint methods keep the *Error reachable
// through their own context.
func TestErrorWrapped(t *testing.T) {
	c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 404, map[string]string{"message": "No such container: web"})
	})
	cases := []struct {
		name     string
		call     func() error
		wantText string
	}{
		{"ContainerInspect", func() error { _, err := c.ContainerInspect(shortCtx(t), "web"); return err },
			`inspecting container "web": GET /v1.41/containers/web/json: 404: No such container: web`},
		{"ContainerRemove", func() error { return c.ContainerRemove(shortCtx(t), "web", dockerapi.RemoveOptions{Force: true}) },
			`removing container "web": DELETE /v1.41/containers/web: 404: No such container: web`},
		{"ContainerStart", func() error { return c.ContainerStart(shortCtx(t), "web") },
			`starting container "web": POST /v1.41/containers/web/start: 404: No such container: web`},
		{"ImageInspect", func() error { _, err := c.ImageInspect(shortCtx(t), "alpine:3.20"); return err },
			`inspecting image "alpine:3.20": GET /v1.41/images/alpine:3.20/json: 404: No such container: web`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var apiErr *dockerapi.Error
			if !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Message != "No such container: web" {
				t.Errorf("errors.As(%v) = %+v, want the engine's 404", err, apiErr)
			}
			if !errors.Is(err, dockerapi.ErrNotFound) {
				t.Errorf("errors.Is(%v, ErrNotFound) = false, want true", err)
			}
			if err == nil || err.Error() != tc.wantText {
				t.Errorf("error text (-want +got):\n-%s\n+%v", tc.wantText, err)
			}
		})
	}
}
