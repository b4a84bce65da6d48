package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// IsLost reports whether err is a call whose answer was lost: the request
// may have reached the engine, which may or may not have carried it out
// (the exchange broke off after it was sent, or the engine answered that
// it may have: Docker's 503, gRPC's UNAVAILABLE). A call never sent (no
// engine listening) is not lost. Both clients' errors say so by a method,
// Lost() bool.
func IsLost(err error) bool {
	var l interface{ Lost() bool }
	return errors.As(err, &l) && l.Lost()
}

// Repeats bounds how often Settle makes a call again.
const Repeats = 4

// Settle makes call and, while its answer is lost (IsLost), makes it
// again, Repeats times at most, after a pause each (Backoff). The error
// of a call made again for which met holds (nil: none) says that an
// earlier attempt did the work: Settle returns nil. A call that ran out
// of its time, or whose ctx ended, is not made again: an engine that
// hangs must not hold the caller Repeats times longer. Otherwise Settle
// returns the last call's error, with ctx's cause if ctx ended during a
// pause. This is the one place where a call whose answer was lost is
// made again: the clients send each such call once.
func Settle(ctx context.Context, call func() error, met func(error) bool) error {
	err := call()
	for try := 0; IsLost(err) && !ended(err) && try < Repeats; try++ {
		if !Sleep(ctx, Backoff(try)) {
			if cause := context.Cause(ctx); !errors.Is(err, cause) {
				err = fmt.Errorf("%w (%w)", err, cause)
			}
			return err
		}
		if err = call(); err != nil && met != nil && met(err) {
			return nil
		}
	}
	return err
}

// ended reports a call cut off by its context: its own bound, or its
// caller's end.
func ended(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// Backoff is the pause before the try-th call made again (from 0): 50 ms,
// doubling, up to a second, as the clients' own retries pause.
func Backoff(try int) time.Duration { return min(50*time.Millisecond<<min(try, 5), time.Second) }

// Final is err, whatever it wraps, as an answer Settle does not make the
// call again after: a call whose answer was lost, whose outcome the
// caller then could not tell, must not be made blindly again.
func Final(err error) error {
	if err == nil {
		return nil
	}
	return final{err}
}

type final struct{ error }

func (f final) Unwrap() error { return f.error }
func (final) Lost() bool      { return false }
