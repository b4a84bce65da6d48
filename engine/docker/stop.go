package docker

import (
	"context"
	"errors"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// Stop stops the container's run at once, if it runs, and returns once
// the engine's record has it stopped: Docker 26.1 can answer a stop with
// no grace while its record still says running, so a wait for not-running
// follows (at once for a container stopped already, or never started).
// A wait that ends with the container's own error (a start that failed:
// the engine's word on why) or finds it gone has found it not running.
func (e *Engine) Stop(ctx context.Context, id string) error {
	if err := e.C.ContainerStop(ctx, id); err != nil {
		return err
	}
	wr, err := e.C.ContainerWait(ctx, id, dockerapi.WaitNotRunning)
	if err != nil && wr.Error == nil && !errors.Is(err, dockerapi.ErrNotFound) {
		return err
	}
	return nil
}
