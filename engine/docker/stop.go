package docker

import "context"

// Stop stops the container's run at once, if it runs: the engine answers
// once it has stopped.
func (e *Engine) Stop(ctx context.Context, id string) error {
	return e.C.ContainerStop(ctx, id)
}
