package containerd

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/waitdaemon/waitdaemon/containerdapi"
)

// Stop kills the container's task, if it runs, and returns once it has
// exited (within killWait). No task, or one stopped or never started, is
// left as it is.
func (e *Engine) Stop(ctx context.Context, ref string) error {
	ctr, err := e.find(ctx, ref)
	if err != nil {
		return fmt.Errorf("stopping container %s: %w", ref, err)
	}
	t, err := e.C.TaskGet(ctx, ctr.ID)
	if errors.Is(err, containerdapi.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stopping container %s: %w", ref, err)
	}
	if t.Status == containerdapi.TaskStopped || t.Status == containerdapi.TaskCreated {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, killWait)
	defer cancel()
	waited := make(chan error, 1)
	go func() { _, err := e.C.TaskWait(wctx, ctr.ID); waited <- err }()
	if err := e.C.TaskKill(ctx, ctr.ID, syscall.SIGKILL, true); err != nil && !errors.Is(err, containerdapi.ErrNotFound) {
		return fmt.Errorf("stopping container %s: killing its task: %w", ref, err)
	}
	if err := <-waited; err != nil && !errors.Is(err, containerdapi.ErrNotFound) {
		return fmt.Errorf("stopping container %s: waiting for its killed task: %w", ref, err)
	}
	return nil
}
