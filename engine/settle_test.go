package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/engine"
)

// lostErr is a client's error: lost or not, as its Lost says.
type lostErr bool

func (l lostErr) Error() string { return fmt.Sprintf("lost=%v", bool(l)) }
func (l lostErr) Lost() bool    { return bool(l) }

var errMet = errors.New("met")

func TestIsLost(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("plain"), false},
		{lostErr(false), false},
		{lostErr(true), true},
		{fmt.Errorf("wrapped: %w", lostErr(true)), true},
	}
	for _, tc := range cases {
		if got := engine.IsLost(tc.err); got != tc.want {
			t.Errorf("IsLost(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestSettle: a call whose answer was lost is made again, Repeats times
// at most; an again's answer that met says an earlier attempt did the
// work is success, the first call's never is; any other answer ends it.
func TestSettle(t *testing.T) {
	met := func(err error) bool { return errors.Is(err, errMet) }
	cases := []struct {
		name      string
		answers   []error // the last one repeats
		wantCalls int
		wantErr   error
	}{
		{"done at once", []error{nil}, 1, nil},
		{"refused", []error{lostErr(false)}, 1, lostErr(false)},
		{"met on the first call is the engine's answer", []error{errMet}, 1, errMet},
		{"lost, then done", []error{lostErr(true), nil}, 2, nil},
		{"lost, then met", []error{lostErr(true), errMet}, 2, nil},
		{"lost, then refused", []error{lostErr(true), lostErr(false)}, 2, lostErr(false)},
		{"lost on and on", []error{lostErr(true)}, 1 + engine.Repeats, lostErr(true)},
		{"out of its time", []error{fmt.Errorf("%w: %w", lostErr(true), context.DeadlineExceeded)}, 1, context.DeadlineExceeded},
		{"its caller gone", []error{fmt.Errorf("%w: %w", lostErr(true), context.Canceled)}, 1, context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := engine.Settle(context.Background(), func() error {
				a := tc.answers[min(calls, len(tc.answers)-1)]
				calls++
				return a
			}, met)
			if calls != tc.wantCalls || !errors.Is(err, tc.wantErr) && err != tc.wantErr {
				t.Errorf("Settle: %d calls, %v; want %d, %v", calls, err, tc.wantCalls, tc.wantErr)
			}
		})
	}
	t.Run("ctx ends in a pause", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		err := engine.Settle(ctx, func() error { calls++; cancel(); return lostErr(true) }, nil)
		if calls != 1 || !errors.Is(err, context.Canceled) || !engine.IsLost(err) || err.Error() != "lost=true (context canceled)" {
			t.Errorf("Settle: %d calls, %v; want 1, the lost answer and context.Canceled, once", calls, err)
		}
	})
	t.Run("no met", func(t *testing.T) {
		calls := 0
		err := engine.Settle(context.Background(), func() error {
			calls++
			if calls == 1 {
				return lostErr(true)
			}
			return errMet
		}, nil)
		if calls != 2 || !errors.Is(err, errMet) {
			t.Errorf("Settle: %d calls, %v; want 2, met", calls, err)
		}
	})
}

// TestBackoff: 50 ms, doubling, up to a second, however many tries.
func TestBackoff(t *testing.T) {
	for try, want := range map[int]time.Duration{0: 50 * time.Millisecond, 1: 100 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 64: time.Second} {
		if got := engine.Backoff(try); got != want {
			t.Errorf("Backoff(%d) = %v, want %v", try, got, want)
		}
	}
}

// TestFinal: a final error is never lost, and wraps what it was given;
// none stays none.
func TestFinal(t *testing.T) {
	if engine.Final(nil) != nil {
		t.Errorf("Final(nil) = %v, want nil", engine.Final(nil))
	}
	err := engine.Final(fmt.Errorf("starting: %w", lostErr(true)))
	if engine.IsLost(err) || !errors.Is(err, lostErr(true)) || err.Error() != "starting: lost=true" {
		t.Errorf("Final = %v, lost %v; want the error as it was, not lost", err, engine.IsLost(err))
	}
}
