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

// goneEvery is the pause between two looks of WaitGone.
const goneEvery = 100 * time.Millisecond

// WaitGone asks gone every 100 ms until it says yes, by passes, or ctx
// ends, and says when it said yes; false if it never did. gone answers
// false when it cannot tell.
func WaitGone(ctx context.Context, by time.Time, gone func(context.Context) bool) (time.Time, bool) {
	ctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	for {
		if gone(ctx) {
			return time.Now(), true
		}
		if !Sleep(ctx, goneEvery) {
			return time.Now(), false
		}
	}
}
