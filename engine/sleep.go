package engine

import (
	"context"
	"time"
)

// Sleep waits d, and reports false if ctx ended first, or had already.
func Sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// The looks of WaitGone: while the engine's events are followed, a look
// now and then catches a removal the stream missed (one before it began
// listening, on an engine that does not replay what came before);
// once the stream breaks, looks are all there is, soon at first, then
// less often.
const (
	watchedEvery  = 2 * time.Second
	watchedAtMost = 16 * time.Second
	goneEvery     = 100 * time.Millisecond
	goneAtMost    = time.Second
)

// Watch starts to follow one container's removal in the engine's events
// and returns at once. Its channel gets the removal's time, by the
// engine's clock, or is closed without one when the stream breaks or ctx
// ends.
type Watch func(ctx context.Context) <-chan time.Time

// WaitGone waits until the container is gone, by passes, or ctx ends, and
// says when it went; false if it never did. It learns the removal from
// watch (nil: none) and from gone, a look that answers false when it
// cannot tell: a few while the stream runs, from watchedEvery on, and
// more once it breaks (or with none), at once and then backing off.
func WaitGone(ctx context.Context, by time.Time, watch Watch, gone func(context.Context) bool) (time.Time, bool) {
	ctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	var removed <-chan time.Time
	first, pause, most := time.Duration(0), goneEvery, goneAtMost
	if watch != nil {
		removed = watch(ctx)
		first, pause, most = watchedEvery, 2*watchedEvery, watchedAtMost
	}
	look := time.NewTimer(first)
	defer look.Stop()
	for {
		select {
		case at, ok := <-removed:
			if ok {
				return earlier(at, time.Now()), true
			}
			if ctx.Err() != nil { // the stream ended with ctx
				return time.Now(), false
			}
			removed = nil
			pause, most = goneEvery, goneAtMost
			look.Reset(0)
		case <-look.C:
			if ctx.Err() != nil {
				return time.Now(), false
			}
			if gone(ctx) {
				return removedAt(removed, time.Now()), true
			}
			look.Reset(pause)
			pause = min(2*pause, most)
		case <-ctx.Done():
			return time.Now(), false
		}
	}
}

// removedAt is when a container a look saw gone at seen was removed: the
// time in removed, the events' stream, if it tells within goneEvery, as a
// stream that replays what it missed does.
func removedAt(removed <-chan time.Time, seen time.Time) time.Time {
	if removed == nil {
		return seen
	}
	t := time.NewTimer(goneEvery)
	defer t.Stop()
	select {
	case at, ok := <-removed:
		if ok {
			return earlier(at, seen)
		}
	case <-t.C:
	}
	return seen
}

func earlier(a, b time.Time) time.Time {
	if a.After(b) {
		return b
	}
	return a
}
