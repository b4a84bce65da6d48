package engine_test

import (
	"testing"

	"github.com/waitdaemon/waitdaemon/engine"
)

// TestSocketSource: the bind of the socket itself comes first, then one
// of a directory above it, else the fallback.
func TestSocketSource(t *testing.T) {
	const sock = "/var/run/docker.sock"
	cases := []struct {
		name  string
		binds []engine.Bind
		want  string
	}{
		{"none", nil, "/fallback.sock"},
		{"itself", []engine.Bind{{Host: "/run/user/1/docker.sock", Container: sock}}, "/run/user/1/docker.sock"},
		{"itself, unclean", []engine.Bind{{Host: "/run/d.sock", Container: "/var/run//docker.sock"}}, "/run/d.sock"},
		{"its directory", []engine.Bind{{Host: "/host/run", Container: "/var/run"}}, "/host/run/docker.sock"},
		{"itself before its directory", []engine.Bind{{Host: "/host/run", Container: "/var/run/"}, {Host: "/s.sock", Container: sock}}, "/s.sock"},
		{"a directory beside", []engine.Bind{{Host: "/host/var", Container: "/var/ru"}}, "/fallback.sock"},
	}
	for _, tc := range cases {
		if got := engine.SocketSource(tc.binds, sock, "/fallback.sock"); got != tc.want {
			t.Errorf("%s: SocketSource = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestEngineBind: the socket's directory, read-only, at EngineDir; a
// socket at the root, itself, at the fallback.
func TestEngineBind(t *testing.T) {
	b, sock := engine.EngineBind("/run/containerd/containerd.sock", "/fallback.sock")
	if want := (engine.Bind{Host: "/run/containerd", Container: engine.EngineDir, ReadOnly: true}); b != want || sock != engine.EngineDir+"/containerd.sock" {
		t.Errorf("EngineBind = %+v, %q; want %+v, %s/containerd.sock", b, sock, want, engine.EngineDir)
	}
	b, sock = engine.EngineBind("/docker.sock", "/fallback.sock")
	if want := (engine.Bind{Host: "/docker.sock", Container: "/fallback.sock"}); b != want || sock != "/fallback.sock" {
		t.Errorf("EngineBind(root) = %+v, %q; want %+v, /fallback.sock", b, sock, want)
	}
}
