package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/waitdaemon/waitdaemon/engine/containerd"
	"github.com/waitdaemon/waitdaemon/engine/docker"
)

// TestEngineChoice: WAITDAEMON_ENGINE names the engine; without it,
// Docker if its socket is there, else containerd if its socket is there,
// else Docker's wait, which names both sockets (README, Settings).
func TestEngineChoice(t *testing.T) {
	dir := t.TempDir()
	dockerSock, containerdSock := filepath.Join(dir, "docker.sock"), filepath.Join(dir, "containerd.sock")
	cases := []struct {
		kind                         string // WAITDAEMON_ENGINE
		dockerThere, containerdThere bool
		want                         string
	}{
		{dockerThere: true, containerdThere: true, want: "docker"},
		{dockerThere: false, containerdThere: true, want: "containerd"},
		{dockerThere: false, containerdThere: false, want: "neither"},
		{kind: "containerd", dockerThere: true, containerdThere: true, want: "containerd"},
		{kind: "docker", dockerThere: false, containerdThere: true, want: "docker"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%q, docker %v, containerd %v", tc.kind, tc.dockerThere, tc.containerdThere), func(t *testing.T) {
			for sock, there := range map[string]bool{dockerSock: tc.dockerThere, containerdSock: tc.containerdThere} {
				_ = os.Remove(sock)
				if there {
					if err := os.WriteFile(sock, nil, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			g := &globals{env: environment{Engine: tc.kind, DockerSocket: dockerSock, ContainerdSocket: containerdSock}}
			eng, err := g.engine(false)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			switch e := eng.(type) {
			case *docker.Engine:
				got = "docker"
			case *containerd.Engine:
				got = "containerd"
			case neither:
				got = "neither"
				if _, ok := e.Engine.(*docker.Engine); !ok || e.docker != dockerSock || e.containerd != containerdSock {
					t.Errorf("neither = %+v; want Docker's engine, naming both sockets", e)
				}
			}
			if got != tc.want {
				t.Errorf("engine %T, want %s", eng, tc.want)
			}
		})
	}
}
