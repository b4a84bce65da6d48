package dockerapi_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// These tests replay fixtures recorded from real engines (see
// testdata/README.md). Each runs the real client over a unix socket.

const fixtures = "../testdata/fixtures"

// The engines whose happy paths were recorded.
var engines = []string{"docker-20.10", "podman-4.3", "docker-29.8", "docker-28.2", "docker-26.1"}

// The Docker engines, whose pulls and refused versions were recorded too.
var dockers = []string{"docker-20.10", "docker-29.8", "docker-28.2", "docker-26.1"}

// fixtureImage is built by `make record` from busybox; its Env carries
// PATH=/bin and its label org.waitdaemon.fixture=1.
const fixtureImage = "waitdaemon-fixture:1"

// registry is the local registry `make record` runs and fills.
const registry = "127.0.0.1:5000"

// authRegistry serves the same images, to user rr with password
// rr-password only.
const authRegistry = "127.0.0.1:5001"

func client(t *testing.T, engine, name string) *dockerapi.Client {
	t.Helper()
	s := rr.Open(t, fixtures, engine, name)
	return &dockerapi.Client{Socket: s.Socket, Transport: s.Transport}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestPing(t *testing.T) {
	want := map[string]string{"docker-20.10": "1.41", "podman-4.3": "1.41", "docker-29.8": "1.56", "docker-28.2": "1.50", "docker-26.1": "1.45"}
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			c := client(t, engine, "Ping")
			p, err := c.Ping(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			if p.APIVersion != want[engine] || p.Server == "" {
				t.Errorf("Ping() = %+v, want Api-Version %s and a Server", p, want[engine])
			}
			v, err := c.EngineVersion(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			if v.APIVersion != want[engine] || v.Version == "" {
				t.Errorf("EngineVersion() = %+v, want API %s and a version", v, want[engine])
			}
		})
	}
}

// TestRunToExit runs a container that writes to both streams and exits 3,
// the way a waiter runs a user container.
func TestRunToExit(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			c := client(t, engine, "RunToExit")
			ctx := ctx(t)
			name := "rr-run-to-exit"
			body := dockerapi.CreateRequest{Config: dockerapi.Config{
				Image:  fixtureImage,
				Cmd:    []string{"sh", "-c", "echo out; echo err >&2; exit 3"},
				Labels: map[string]string{"org.waitdaemon.test": "run-to-exit"},
			}}
			created, err := c.ContainerCreate(ctx, name, body)
			if err != nil {
				t.Fatal(err)
			}
			if len(created.ID) != 64 {
				t.Fatalf("ContainerCreate() ID = %q, want 64 hex", created.ID)
			}
			if err := c.ContainerStart(ctx, created.ID); err != nil {
				t.Fatal(err)
			}
			res, err := c.ContainerWait(ctx, created.ID, dockerapi.WaitNotRunning)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != 3 {
				t.Errorf("ContainerWait() StatusCode = %d, want 3", res.StatusCode)
			}
			got, err := c.ContainerInspect(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != created.ID || got.State.ExitCode != 3 || got.State.Running || got.Config.Labels["org.waitdaemon.test"] != "run-to-exit" {
				t.Errorf("ContainerInspect() = ID %s state %+v labels %v; want ID %s, exited 3, with the label", got.ID, got.State, got.Config.Labels, created.ID)
			}
			var stdout, stderr bytes.Buffer
			if err := c.ContainerLogs(ctx, created.ID, dockerapi.LogsOptions{Tail: 10}, &stdout, &stderr); err != nil {
				t.Fatal(err)
			}
			if stdout.String() != "out\n" || stderr.String() != "err\n" {
				t.Errorf("ContainerLogs() stdout %q stderr %q, want \"out\\n\" and \"err\\n\"", stdout.String(), stderr.String())
			}
			if err := c.ContainerRemove(ctx, created.ID, dockerapi.RemoveOptions{Volumes: true}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStartTwice covers the conflicts of a running container: a second
// start (304), a second create with the same name (409), and a remove
// without force (409).
func TestStartTwice(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			c := client(t, engine, "StartTwice")
			ctx := ctx(t)
			name := "rr-start-twice"
			body := dockerapi.CreateRequest{Config: dockerapi.Config{
				Image:  fixtureImage,
				Cmd:    []string{"sleep", "60"},
				Labels: map[string]string{"org.waitdaemon.test": "start-twice"},
			}}
			created, err := c.ContainerCreate(ctx, name, body)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.ContainerCreate(ctx, name, body); !errors.Is(err, dockerapi.ErrConflict) {
				t.Errorf("second ContainerCreate(%q) error = %v, want a conflict", name, err)
			}
			if err := c.ContainerStart(ctx, created.ID); err != nil {
				t.Fatal(err)
			}
			if err := c.ContainerStart(ctx, created.ID); !errors.Is(err, dockerapi.ErrNotModified) {
				t.Errorf("second ContainerStart() error = %v, want not modified (304)", err)
			}
			list, err := c.ContainerList(ctx, "org.waitdaemon.test=start-twice")
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 || list[0].ID != created.ID || list[0].State != "running" {
				t.Errorf("ContainerList() = %+v, want just %s, running", list, created.ID)
			}
			if err := c.ContainerRemove(ctx, created.ID, dockerapi.RemoveOptions{}); !errors.Is(err, dockerapi.ErrConflict) {
				t.Errorf("ContainerRemove(no force) of a running container: error = %v, want a conflict", err)
			}
			if err := c.ContainerRemove(ctx, created.ID, dockerapi.RemoveOptions{Force: true, Volumes: true}); err != nil {
				t.Fatal(err)
			}
			_, err = c.ContainerInspect(ctx, created.ID)
			var apiErr *dockerapi.Error
			if !errors.Is(err, dockerapi.ErrNotFound) || !errors.As(err, &apiErr) || !strings.Contains(strings.ToLower(apiErr.Message), "no such container") {
				t.Errorf("ContainerInspect() after remove: error = %v, want 404 No such container", err)
			}
		})
	}
}

// TestGone asks for a container that is not there: start, wait, logs,
// remove and inspect each fail as not found, with the engine's message.
func TestGone(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			c := client(t, engine, "Gone")
			ctx := ctx(t)
			const name = "rr-gone"
			calls := []struct {
				name string
				call func() error
			}{
				{"ContainerStart", func() error { return c.ContainerStart(ctx, name) }},
				{"ContainerWait", func() error { _, err := c.ContainerWait(ctx, name, dockerapi.WaitNotRunning); return err }},
				{"ContainerLogs", func() error {
					var out bytes.Buffer
					return c.ContainerLogs(ctx, name, dockerapi.LogsOptions{Tail: 5}, &out, &out)
				}},
				{"ContainerRemove", func() error { return c.ContainerRemove(ctx, name, dockerapi.RemoveOptions{Force: true, Volumes: true}) }},
				{"ContainerInspect", func() error { _, err := c.ContainerInspect(ctx, name); return err }},
			}
			for _, call := range calls {
				err := call.call()
				if !errors.Is(err, dockerapi.ErrNotFound) || !strings.Contains(strings.ToLower(err.Error()), "no such container") {
					t.Errorf("%s(%q) error = %v, want not found, saying no such container", call.name, name, err)
				}
			}
		})
	}
}

func TestImageInspect(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			c := client(t, engine, "ImageInspect")
			img, err := c.ImageInspect(ctx(t), fixtureImage)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(img.ID, "sha256:") || img.Config.Labels["org.waitdaemon.fixture"] != "1" {
				t.Errorf("ImageInspect() = ID %q labels %v, want a sha256 ID and the fixture label", img.ID, img.Config.Labels)
			}
			_, err = c.ImageInspect(ctx(t), "waitdaemon-no-such-image:1")
			if !errors.Is(err, dockerapi.ErrNotFound) {
				t.Errorf("ImageInspect(missing) error = %v, want not found", err)
			}
		})
	}
}

// TestPull pulls from a local registry: an image that is there, one whose
// blob is missing (the error arrives mid-stream, after a 200), and one
// that does not exist (the error arrives up front). The engines word the
// errors differently; what the client promises is the kind of error, and
// the engine's own message in it.
func TestPull(t *testing.T) {
	for _, engine := range dockers {
		t.Run(engine, func(t *testing.T) {
			c := client(t, engine, "Pull")
			ctx := ctx(t)
			var statuses []string
			good, _ := imageref.Parse(registry + "/rr/good:1")
			err := c.ImagePull(ctx, good, nil, func(m dockerapi.PullMessage) { statuses = append(statuses, m.Status) })
			if err != nil {
				t.Fatal(err)
			}
			if len(statuses) == 0 || !strings.HasPrefix(statuses[len(statuses)-1], "Status: Downloaded newer image for "+registry+"/rr/good:1") {
				t.Errorf("ImagePull(good) progress = %q, want it to end with Downloaded newer image", statuses)
			}
			if _, err := c.ImageInspect(ctx, good.String()); err != nil {
				t.Errorf("ImageInspect() after the pull: %v", err)
			}

			broken, _ := imageref.Parse(registry + "/rr/broken:1")
			err = c.ImagePull(ctx, broken, nil, nil)
			var apiErr *dockerapi.Error
			prefix := "pulling image " + broken.String() + ": "
			if err == nil || errors.As(err, &apiErr) || !strings.HasPrefix(err.Error(), prefix) || len(err.Error()) == len(prefix) {
				t.Errorf("ImagePull(broken) error = %v, want %q and the stream's own error, not a status", err, prefix)
			}

			missing, _ := imageref.Parse(registry + "/rr/missing:1")
			err = c.ImagePull(ctx, missing, nil, nil)
			if !errors.As(err, &apiErr) || !errors.Is(err, dockerapi.ErrNotFound) || apiErr.Message == "" {
				t.Errorf("ImagePull(missing) error = %v, want not found, with the engine's message", err)
			}
		})
	}
}

// TestPullAuth pulls from a registry that wants a password: without
// credentials, with a wrong password, then with the right one. The
// refusals are worded differently by each engine (20.10: "unauthorized:
// authentication required"; Docker 29: "… 401 Unauthorized"); what the
// client promises is a status error that is not "not found", with the
// engine's own message, and a pull that works with the right credentials.
func TestPullAuth(t *testing.T) {
	for _, engine := range dockers {
		t.Run(engine, func(t *testing.T) {
			c := client(t, engine, "PullAuth")
			ctx := ctx(t)
			ref, _ := imageref.Parse(authRegistry + "/rr/good:1")
			refusals := []struct {
				name string
				auth *dockerapi.AuthConfig
			}{
				{"no credentials", nil},
				{"a wrong password", &dockerapi.AuthConfig{Username: "rr", Password: "not-rr-password", ServerAddress: authRegistry}},
			}
			for _, tc := range refusals {
				err := c.ImagePull(ctx, ref, tc.auth, nil)
				var apiErr *dockerapi.Error
				if !errors.As(err, &apiErr) || errors.Is(err, dockerapi.ErrNotFound) || apiErr.Message == "" ||
					!strings.HasPrefix(err.Error(), "pulling image "+ref.String()+": ") {
					t.Errorf("ImagePull() with %s: error = %v, want a status error other than not found, with the engine's message", tc.name, err)
				}
			}
			err := c.ImagePull(ctx, ref, &dockerapi.AuthConfig{Username: "rr", Password: "rr-password", ServerAddress: authRegistry}, nil)
			if err != nil {
				t.Fatalf("ImagePull() with the right password: %v", err)
			}
			if _, err := c.ImageInspect(ctx, ref.String()); err != nil {
				t.Errorf("ImageInspect() after the pull: %v", err)
			}
		})
	}
}

// TestVersionRefused pins versions the engine refuses: too new (JSON
// error) and too old (text/plain on 20.10 and 28.2, JSON on 26.1 and
// 29). Docker 29 refuses versions below 1.40, so a client pinned to an
// old version breaks on it; 28.2 and 26.1 refuse those below 1.24.
func TestVersionRefused(t *testing.T) {
	type refusal struct {
		version string
		want    string
	}
	cases := map[string][]refusal{
		"docker-20.10": {
			{"1.99", "client version 1.99 is too new. Maximum supported API version is 1.41"},
			{"1.11", "client version 1.11 is too old. Minimum supported API version is 1.12"},
		},
		"docker-29.8": {
			{"1.99", "client version 1.99 is too new. Maximum supported API version is 1.56"},
			{"1.39", "client version 1.39 is too old. Minimum supported API version is 1.40"},
		},
		"docker-28.2": {
			{"1.99", "client version 1.99 is too new. Maximum supported API version is 1.50"},
			{"1.23", "client version 1.23 is too old. Minimum supported API version is 1.24"},
		},
		"docker-26.1": {
			{"1.99", "client version 1.99 is too new. Maximum supported API version is 1.45"},
			{"1.23", "client version 1.23 is too old. Minimum supported API version is 1.24"},
		},
	}
	for _, engine := range dockers {
		t.Run(engine, func(t *testing.T) {
			s := rr.Open(t, fixtures, engine, "VersionRefused")
			for _, tc := range cases[engine] {
				c := &dockerapi.Client{Socket: s.Socket, Transport: s.Transport, Version: tc.version}
				_, err := c.ContainerList(ctx(t))
				var apiErr *dockerapi.Error
				if !errors.As(err, &apiErr) || apiErr.Status != 400 || !strings.Contains(apiErr.Message, tc.want) {
					t.Errorf("version %s: error = %v, want 400 %q", tc.version, err, tc.want)
				}
			}
		})
	}
}
