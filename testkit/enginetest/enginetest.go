// Package enginetest gives end-to-end tests a real Docker engine, and
// fails them, saying how to get one, when there is none. It never skips.
package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// Require returns a client for the engine at DOCKER_HOST (or the default
// socket), or fails the test when no engine answers.
func Require(t testing.TB) *dockerapi.Client {
	t.Helper()
	c := &dockerapi.Client{WaitForEngine: 2 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.APIVersion(ctx); err != nil {
		t.Fatalf("this test needs a Docker engine, and none answers: %v\n"+
			"start one with `sudo make engine` (it installs Debian's docker.io if needed), or point DOCKER_HOST at one", err)
	}
	return c
}
