package containerdapi_test

import (
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/waitdaemon/waitdaemon/containerdapi"
)

// TestTaskKillFails: a kill the daemon refuses is an error that names
// the signal and the container.
func TestTaskKillFails(t *testing.T) {
	c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		readRequest(t, r)
		fail(w, containerdapi.NotFound, "task web not found")
	})
	err := c.TaskKill(shortCtx(t), "web", syscall.SIGKILL, true)
	if err == nil || !strings.HasPrefix(err.Error(), `sending killed to the task of container "web": `) || !strings.Contains(err.Error(), "task web not found") {
		t.Errorf("TaskKill() = %v, want the daemon's error, with the signal and the container", err)
	}
}

// TestTaskCallsNotSent: a create or start that never reached the daemon
// (its socket is not there) lost no answer: it fails as a transport
// error that is not lost.
func TestTaskCallsNotSent(t *testing.T) {
	c := &containerdapi.Client{Socket: filepath.Join(t.TempDir(), "containerd.sock"), WaitForEngine: -1}
	_, cerr := c.TaskCreate(shortCtx(t), "web", containerdapi.TaskSpec{})
	_, serr := c.TaskStart(shortCtx(t), "web")
	for _, err := range []error{cerr, serr} {
		var te *containerdapi.TransportError
		if !errors.As(err, &te) || lost(err) {
			t.Errorf("got %v; want the dial's transport error, not lost", err)
		}
	}
}
