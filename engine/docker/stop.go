package docker

import (
	"context"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// Stop stops the container's run at once, if it runs, and returns once
// the engine's record has it stopped: Docker 26.1 can answer a stop with
// no grace while its record still says running, so a wait for not-running
// follows (at once for a container stopped already, or never started).
func (e *Engine) Stop(ctx context.Context, id string) error {
	if err := e.C.ContainerStop(ctx, id); err != nil {
		return err
	}
	_, err := e.C.ContainerWait(ctx, id, dockerapi.WaitNotRunning)
	return err
}
