package dockerapi

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// maxRetries bounds retries of anything but an engine that is not up yet.
const maxRetries = 4

// attempts is the retry state of one call, shared with the policy through
// the request context.
type attempts struct {
	repeat  repeat
	started time.Time
	retries int
	// ambiguous is set once an attempt failed after the request may have
	// reached the engine: a retried create may then meet its own work.
	ambiguous bool
}

type attemptsKey struct{}

func withPolicy(ctx context.Context, a *attempts) context.Context {
	a.started = time.Now()
	return context.WithValue(ctx, attemptsKey{}, a)
}

// retryPolicy decides, after each attempt, whether to try again:
//   - an engine that is not listening yet (socket missing, connection
//     refused) is retried for up to waitForEngine, whatever the method,
//     since the request never reached it;
//   - 429 is retried, a few times, and so is 503 for calls that are safe
//     to repeat (a named create is: its retry adopts its own container);
//   - other transport errors are retried a few times for calls that may
//     be repeated (see repeat) only;
//   - nothing else is: Docker answers 500 for permanent failures.
func retryPolicy(waitForEngine time.Duration) func(context.Context, *http.Response, error) (bool, error) {
	return func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		a, _ := ctx.Value(attemptsKey{}).(*attempts)
		if a == nil {
			a = &attempts{started: time.Now()}
		}
		switch {
		case err != nil && engineNotUp(err):
			return time.Since(a.started) < waitForEngine, nil
		case err != nil:
			a.ambiguous = true
			if a.repeat == never || a.retries >= maxRetries {
				return false, nil
			}
		case resp.StatusCode == http.StatusServiceUnavailable:
			// A 5xx: the engine (or a proxy before it) may have done the
			// work. Only what is safe to repeat goes again.
			a.ambiguous = true
			if a.repeat == never || a.retries >= maxRetries {
				return false, nil
			}
		case resp.StatusCode == http.StatusTooManyRequests:
			if a.retries >= maxRetries {
				return false, nil
			}
		default:
			return false, nil
		}
		a.retries++
		return true, nil
	}
}

// repeat says whether a call may be sent again once an attempt may have
// reached the engine (its answer was lost, or was a 503), and what the
// answer to such a repeat means. It is the one place that knows this.
type repeat int

const (
	// never: the call is not sent again; an unnamed create would make a
	// second container.
	never repeat = iota
	// asFirst: a repeat's answer means what the first's would have: reads,
	// waits, logs and pulls.
	asFirst
	// connected: "already exists" to a repeated network connect means
	// that an earlier attempt connected the container.
	connected
	// removed: 404 to a repeated remove means that an earlier attempt
	// removed the container.
	removed
	// renamed: a name conflict with the renamed container itself, on a
	// repeated rename, means that an earlier attempt renamed it.
	renamed
	// adopted: a name conflict on a repeated named create may be the
	// container an earlier attempt made; ContainerCreate adopts it if it
	// carries every label asked for.
	adopted
)

// doneEarlier reports whether e, the engine's answer to a repeat of r,
// says that an earlier attempt of r did the work.
func (r request) doneEarlier(e *Error) bool {
	switch r.repeat {
	case connected:
		return e.Status >= 400 && strings.Contains(strings.ToLower(e.Message), "already")
	case removed:
		return errors.Is(e, ErrNotFound)
	case renamed:
		return errors.Is(e, ErrConflict) && r.subject != "" && strings.Contains(e.Message, r.subject)
	}
	return false
}

// engineNotUp reports a dial that failed because nothing listens on the
// socket yet: it does not exist, or refuses connections.
func engineNotUp(err error) bool {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return false
	}
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// cappedBackoff is exponential backoff between min and max that honours
// an engine's Retry-After only up to max.
func cappedBackoff(min, max time.Duration, attempt int, resp *http.Response) time.Duration {
	return time.Duration(math.Min(float64(retryablehttp.DefaultBackoff(min, max, attempt, resp)), float64(max)))
}
