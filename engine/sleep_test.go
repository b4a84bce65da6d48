package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// looks is a look of WaitGone that counts how often it was asked, and
// says gone from goneAt on (zero: never).
type looks struct {
	n      atomic.Int32
	goneAt atomic.Int64
}

func (l *looks) gone(context.Context) bool {
	l.n.Add(1)
	at := l.goneAt.Load()
	return at != 0 && time.Now().UnixNano() >= at
}

// watching is a Watch whose stream sends at after wait, or, with no at,
// breaks after wait, or, with a negative wait, runs and says nothing.
func watching(wait time.Duration, at time.Time) Watch {
	return func(ctx context.Context) <-chan time.Time {
		ch := make(chan time.Time, 1)
		if wait < 0 {
			go func() { <-ctx.Done(); close(ch) }()
			return ch
		}
		go func() {
			defer close(ch)
			select {
			case <-time.After(wait):
				if !at.IsZero() {
					ch <- at
				}
			case <-ctx.Done():
			}
		}()
		return ch
	}
}

// TestWaitGoneFromEvent: the removal the stream tells is the one WaitGone
// gives, to the nanosecond, with no look besides.
func TestWaitGoneFromEvent(t *testing.T) {
	var l looks
	removed := time.Now().Add(100 * time.Millisecond).Round(0)
	at, gone := WaitGone(context.Background(), time.Now().Add(5*time.Second), watching(300*time.Millisecond, removed), l.gone)
	if !gone || !at.Equal(removed) {
		t.Errorf("WaitGone = %v, %v; want the event's time %v, gone", at, gone, removed)
	}
	if n := l.n.Load(); n != 0 {
		t.Errorf("%d looks; want none while the stream runs for 300 ms", n)
	}
}

// TestWaitGoneEventNotAhead: an engine's time a little ahead of the
// waiter's clock is not a removal in the future.
func TestWaitGoneEventNotAhead(t *testing.T) {
	var l looks
	at, gone := WaitGone(context.Background(), time.Now().Add(5*time.Second), watching(10*time.Millisecond, time.Now().Add(time.Hour)), l.gone)
	if !gone || at.After(time.Now()) {
		t.Errorf("WaitGone = %v, %v; want gone, at no later than now", at, gone)
	}
}

// TestWaitGoneLookWhileWatched: a removal the stream missed is seen by a
// look, the first at watchedEvery; the looks while it runs are few.
func TestWaitGoneLookWhileWatched(t *testing.T) {
	var l looks
	l.goneAt.Store(time.Now().Add(200 * time.Millisecond).UnixNano())
	start := time.Now()
	at, gone := WaitGone(context.Background(), time.Now().Add(10*time.Second), watching(-1, time.Time{}), l.gone)
	if !gone || at.Sub(start) < watchedEvery || at.Sub(start) > watchedEvery+goneEvery+500*time.Millisecond {
		t.Errorf("WaitGone = %v after %v, %v; want gone at the first look, %v after the start", at.Sub(start), time.Since(start), gone, watchedEvery)
	}
	if n := l.n.Load(); n != 1 {
		t.Errorf("%d looks; want 1", n)
	}
}

// TestWaitGoneReplayed: a removal a look sees, which the stream tells
// within goneEvery after, is at the stream's time.
func TestWaitGoneReplayed(t *testing.T) {
	var l looks
	l.goneAt.Store(1)
	removed := time.Now().Add(-time.Second).Round(0)
	at, gone := WaitGone(context.Background(), time.Now().Add(10*time.Second), watching(watchedEvery+goneEvery/2, removed), l.gone)
	if !gone || !at.Equal(removed) {
		t.Errorf("WaitGone = %v, %v; want the stream's time %v", at, gone, removed)
	}
}

// TestWaitGoneStreamBreaks: once the stream breaks, looks find the
// removal, soon at first, then less often.
func TestWaitGoneStreamBreaks(t *testing.T) {
	var l looks
	l.goneAt.Store(time.Now().Add(2 * time.Second).UnixNano())
	start := time.Now()
	at, gone := WaitGone(context.Background(), time.Now().Add(10*time.Second), watching(50*time.Millisecond, time.Time{}), l.gone)
	if !gone || at.Sub(start) < 2*time.Second || at.Sub(start) > 2*time.Second+goneAtMost+500*time.Millisecond {
		t.Errorf("WaitGone = %v after the start, %v; want gone within %v of the removal at 2 s", at.Sub(start), gone, goneAtMost)
	}
	// 100 ms each would be 21 looks; backing off from 100 ms to 1 s:
	// at once, at the break, then 0.15, 0.35, 0.75, 1.55, 2.55 s.
	if n := l.n.Load(); n < 4 || n > 9 {
		t.Errorf("%d looks in 2 s; want 4 to 9, backing off", n)
	}
}

// TestWaitGoneBy: a container never removed is not gone, once by passes.
func TestWaitGoneBy(t *testing.T) {
	var l looks
	start := time.Now()
	by := start.Add(300 * time.Millisecond)
	at, gone := WaitGone(context.Background(), by, watching(-1, time.Time{}), l.gone)
	if gone || at.Before(by) || time.Since(start) > 2*time.Second {
		t.Errorf("WaitGone = %v, %v after %v; want not gone, at the bound %v", at, gone, time.Since(start), by)
	}
	at, gone = WaitGone(context.Background(), time.Now().Add(300*time.Millisecond), nil, l.gone)
	if gone {
		t.Errorf("WaitGone with no stream = %v, %v; want not gone", at, gone)
	}
}

// TestWaitGoneByNoLook: at the bound, the stream's end with it starts no
// look: a look on an ended context can take the engine client's pause.
func TestWaitGoneByNoLook(t *testing.T) {
	for range 20 {
		var l looks
		by := time.Now().Add(50 * time.Millisecond)
		if _, gone := WaitGone(context.Background(), by, watching(-1, time.Time{}), l.gone); gone || l.n.Load() != 0 {
			t.Fatalf("WaitGone = gone %v after %d looks; want not gone, and no look", gone, l.n.Load())
		}
	}
}
