package docker

import (
	"slices"
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// TestEngineSocketForTheWaiter follows the engine socket from the
// action's binds to what the waiter gets: the socket's directory,
// read-only, and the socket's path inside it.
func TestEngineSocketForTheWaiter(t *testing.T) {
	cases := []struct {
		name      string
		binds     []string
		mounts    []dockerapi.Mount
		socket    string // as the action sees it
		wantBinds []string
		wantSock  string
	}{
		{"the usual bind", []string{"/worker/wf:/workflow", "/var/run/docker.sock:/var/run/docker.sock"}, nil, "/var/run/docker.sock",
			[]string{"/var/run:/run/waitdaemon-engine:ro"}, "/run/waitdaemon-engine/docker.sock"},
		{"Podman's options", []string{"/tmp/p/podman.sock:/var/run/docker.sock:rw,rprivate,rbind"}, nil, "/var/run/docker.sock",
			[]string{"/tmp/p:/run/waitdaemon-engine:ro"}, "/run/waitdaemon-engine/podman.sock"},
		{"a directory above it", []string{"/srv/engine/:/proxy"}, nil, "/proxy/docker.sock",
			[]string{"/srv/engine:/run/waitdaemon-engine:ro"}, "/run/waitdaemon-engine/docker.sock"},
		{"a mount", nil, []dockerapi.Mount{{Type: "bind", Source: "/run/docker.sock", Target: "/var/run/docker.sock"}}, "/var/run/docker.sock",
			[]string{"/run:/run/waitdaemon-engine:ro"}, "/run/waitdaemon-engine/docker.sock"},
		{"no bind says", []string{"/a:/b"}, nil, "/var/run/docker.sock",
			[]string{"/var/run:/run/waitdaemon-engine:ro"}, "/run/waitdaemon-engine/docker.sock"},
		{"a socket in the root", []string{"/docker.sock:/var/run/docker.sock"}, nil, "/var/run/docker.sock",
			[]string{"/docker.sock:/var/run/docker.sock"}, "/var/run/docker.sock"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			self := dockerapi.Container{HostConfig: dockerapi.HostConfig{Binds: tc.binds, Mounts: tc.mounts}}
			binds, sock := engineBind(socketSource(self, tc.socket))
			if !slices.Equal(binds, tc.wantBinds) || sock != tc.wantSock {
				t.Errorf("got binds %q, socket %q; want %q, %q", binds, sock, tc.wantBinds, tc.wantSock)
			}
		})
	}
}
