package tinkagent

import (
	"testing"

	"github.com/waitdaemon/waitdaemon/containerdapi"
)

// TestPullHostDir: the runner's pull reads containerd's certs.d, as the
// agent's does, so a plain-HTTP registry its hosts.toml declares is
// reached by name.
func TestPullHostDir(t *testing.T) {
	got := pullRequest("registry.waitdaemon.test:5017/waitdaemon:latest", "overlayfs")
	if got.HostDir != containerdapi.DefaultHostDir || got.Ref != "registry.waitdaemon.test:5017/waitdaemon:latest" || got.Snapshotter != "overlayfs" {
		t.Errorf("pullRequest() = %+v, want HostDir %s", got, containerdapi.DefaultHostDir)
	}
}
