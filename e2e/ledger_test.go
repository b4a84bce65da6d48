package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// ledger is what both fault proxies keep: the faults asked for, what the
// proxy saw (one line a call, in order), and the calls made as a sweep
// names them. F is the proxy's own fault.
type ledger[F pickable] struct {
	// norm, when set, names each call as a sweep knows it (IDs and names
	// made general), for faults that pick the nth call of a kind and for
	// the list of calls made.
	norm func(call string) string

	mu     sync.Mutex
	faults []F
	seen   []string
	made   []sweepCall
	occur  map[string]int
}

// pickable is a fault: the one call it picks (call.key set), or else how
// many of the calls it matches (0: all), and how many it broke.
type pickable interface {
	pick() (call sweepCall, times int, hits *int)
}

func (l *ledger[F]) add(f F) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults = append(l.faults, f)
}

func (l *ledger[F]) note(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, fmt.Sprintf(format, args...))
}

// log is what the proxy saw, in order, one call a line.
func (l *ledger[F]) log() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.seen, "\n")
}

// count counts the lines of the log that match re.
func (l *ledger[F]) count(re string) int {
	r := regexp.MustCompile(re)
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.seen {
		if r.MatchString(line) {
			n++
		}
	}
	return n
}

// calls is the list of calls made, as norm names them, in order.
func (l *ledger[F]) calls() []sweepCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sweepCall(nil), l.made...)
}

// fired is how many calls the faults broke.
func (l *ledger[F]) fired() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, f := range l.faults {
		_, _, hits := f.pick()
		n += *hits
	}
	return n
}

// match notes the call name (when norm is set) and returns the fault
// that breaks it: the one that picks it, else the first that matches it
// with times left; ok is false when none does.
func (l *ledger[F]) match(name string, matches func(F) bool) (f F, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var call sweepCall
	if l.norm != nil {
		if l.occur == nil {
			l.occur = map[string]int{}
		}
		call.key = l.norm(name)
		l.occur[call.key]++
		call.nth = l.occur[call.key]
		l.made = append(l.made, call)
	}
	for _, f := range l.faults {
		picked, times, hits := f.pick()
		if picked.key != "" && picked == call || picked.key == "" && matches(f) && (times == 0 || *hits < times) {
			*hits++
			return f, true
		}
	}
	return f, false
}

// prefix is a count's expression for the lines that begin with s.
func prefix(s string) string { return "^" + regexp.QuoteMeta(s) }
