package containerd

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/waitdaemon/waitdaemon/engine/containerd/ocispec"
)

// Describe says what container ref will run, from its record, as Follow
// says what it ran: its image, and its spec's process arguments.
func (e *Engine) Describe(ctx context.Context, ref string) (string, []string, error) {
	ctr, err := e.find(ctx, ref)
	if err != nil {
		return "", nil, fmt.Errorf("describing %s: %w", ref, err)
	}
	var spec ocispec.Spec
	if err := json.Unmarshal(ctr.Spec.Value, &spec); err != nil {
		return "", nil, fmt.Errorf("describing %s: its spec: %w", ref, err)
	}
	var command []string
	if spec.Process != nil {
		command = spec.Process.Args
	}
	return ctr.Image, command, nil
}
