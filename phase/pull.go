package phase

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
)

// pullPlan is what phase 1 decided about one image.
type pullPlan struct {
	Image    string `json:"image"`
	Policy   string `json:"policy"`
	Decision string `json:"decision"` // decisionPresent or decisionPull
	Auth     string `json:"auth,omitempty"`

	ref imageref.Ref
}

const (
	decisionPresent = "present"
	decisionPull    = "pull"
)

// decidePull looks an image up and decides, by policy, whether to pull
// it. Under "never", an image that is not there fails the action.
func decidePull(ctx context.Context, eng engine.Engine, s Settings, ref imageref.Ref) (pullPlan, error) {
	p := pullPlan{Image: ref.String(), Policy: s.PullPolicy, Decision: decisionPull, ref: ref}
	auth, err := s.Auth(ref)
	if err != nil {
		return p, err
	}
	if auth != nil {
		p.Auth = auth.String()
	}
	if s.PullPolicy == PullAlways {
		return p, nil
	}
	present, err := eng.HasImage(ctx, ref)
	switch {
	case err != nil:
		return p, err
	case present:
		p.Decision = decisionPresent
	case s.PullPolicy == PullNever:
		return p, fmt.Errorf("image %s is not present, and WAITDAEMON_PULL_POLICY=never forbids pulling it", p.Image)
	}
	return p, nil
}

// pullEvery is how often a pull's progress is logged, at most.
const pullEvery = time.Second

// pull pulls an image with the credentials for its own registry, logging
// its progress at most once a second as bytes done out of the total.
func pull(ctx context.Context, eng engine.Engine, s Settings, ref imageref.Ref, out io.Writer) error {
	auth, err := s.Auth(ref)
	if err != nil {
		return err
	}
	last := time.Now()
	return eng.Pull(ctx, ref, auth, func(done, total int64) {
		if time.Since(last) < pullEvery {
			return
		}
		last = time.Now()
		logEvent(out, "pulling", map[string]any{"image": ref.String(), "done_bytes": done, "total_bytes": total})
	})
}
