package containerdapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

// maxRetries bounds retries of anything but a daemon that is not up yet.
const maxRetries = 4

// attempts is the retry state of one call, shared with the policy through
// the request context.
type attempts struct {
	idempotent bool
	started    time.Time
	retries    int
	// ambiguous is set once an attempt failed after the request may have
	// reached the daemon: a retried create may then meet its own work.
	ambiguous bool
}

type attemptsKey struct{}

func withPolicy(ctx context.Context, a *attempts) context.Context {
	a.started = time.Now()
	return context.WithValue(ctx, attemptsKey{}, a)
}

// retryPolicy is the one retry rule of the package, decided after each
// attempt:
//   - a daemon that is not listening yet (socket missing, connection
//     refused) is retried for up to waitForEngine, whatever the call,
//     since the request never reached it;
//   - UNAVAILABLE, and a connection that broke after the request may have
//     reached the daemon, are retried a few times for calls that are safe
//     to repeat (Containers/Create is: its retry adopts its own
//     container);
//   - nothing else is: any other status is the daemon's answer.
//
// Tasks/Create and Tasks/Start are not safe to repeat blindly, and are
// not retried here; their methods ask Tasks/Get what became of a call
// whose answer was lost (see lostAnswer and TaskCreate, TaskStart).
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
		case err != nil, resp.StatusCode == http.StatusOK && headerCode(resp) == Unavailable:
			a.ambiguous = true
			if !a.idempotent || a.retries >= maxRetries {
				return false, nil
			}
		default:
			return false, nil
		}
		a.retries++
		return true, nil
	}
}

// lostAnswer reports whether a failed call may or may not have been
// carried out: its answer was lost (the exchange broke off after the
// request may have reached the daemon, or the daemon answered
// UNAVAILABLE), as opposed to a dial that failed, when nothing was sent,
// or any other status, which is the daemon's answer.
func lostAnswer(err error, a *attempts) bool {
	var te *TransportError
	switch {
	case err == nil:
		return false
	case a != nil && a.ambiguous:
		return true
	case errors.Is(err, ErrUnavailable):
		return true
	case errors.As(err, &te):
		var op *net.OpError
		return !errors.As(err, &op) || op.Op != "dial"
	}
	return false
}

// headerCode is the status of a trailers-only answer, OK when the headers
// carry none.
func headerCode(resp *http.Response) Code {
	c, _ := strconv.ParseUint(resp.Header.Get("Grpc-Status"), 10, 32)
	return Code(c)
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
