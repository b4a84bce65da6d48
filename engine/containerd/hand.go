package containerd

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/selfid"
)

var _ engine.Hander = (*Engine)(nil)

// LabelHanded holds what phase 1 hands the waiter (engine.Hander), on the
// waiter's container: the first part of it, which is set last; each
// label holds at most maxSaid bytes, and the rest follows in
// LabelHanded.1, .2 and on.
const LabelHanded = "org.waitdaemon.handed"

// handedPart is the label of part n of what phase 1 handed over.
func handedPart(n int) string {
	if n == 0 {
		return LabelHanded
	}
	return LabelHanded + "." + strconv.Itoa(n)
}

// Hand labels the waiter's container, its ID or a name this engine made
// it under, with data, in parts of at most maxSaid bytes cut at a rune's
// start (containerd refuses a label of more than 4096 bytes, key
// included, and one that is not UTF-8). The first part goes last: Handed
// reads nothing until every part is there.
func (e *Engine) Hand(ctx context.Context, waiter string, data []byte) error {
	if !utf8.Valid(data) {
		return fmt.Errorf("handing the waiter: %d bytes that are not UTF-8, which no label holds", len(data))
	}
	e.mu.Lock()
	id := cmp.Or(e.ids[waiter], waiter)
	e.mu.Unlock()
	var parts []string
	for rest := string(data); rest != ""; {
		part := cutRunes(rest, maxSaid)
		parts, rest = append(parts, part), rest[len(part):]
	}
	for n := len(parts) - 1; n >= 0; n-- {
		if _, err := e.C.ContainerSetLabel(ctx, id, handedPart(n), parts[n]); err != nil {
			return fmt.Errorf("handing the waiter: %w", err)
		}
	}
	return nil
}

// Handed reads what phase 1 handed over from the labels of the container
// this process runs in (found as Tell finds it).
func (e *Engine) Handed(ctx context.Context) ([]byte, error) {
	own, err := e.ownID(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading what phase 1 handed over: %w", err)
	}
	ctr, err := e.C.ContainerGet(ctx, own)
	if err != nil {
		return nil, fmt.Errorf("reading what phase 1 handed over: %w", err)
	}
	first, ok := ctr.Labels[LabelHanded]
	if !ok {
		return nil, nil
	}
	var b strings.Builder
	b.WriteString(first)
	for n := 1; ; n++ {
		part, ok := ctr.Labels[handedPart(n)]
		if !ok {
			return []byte(b.String()), nil
		}
		b.WriteString(part)
	}
}

// ownID is the ID of the container this process runs in, found once: by
// its cgroup path, as the waiter's is /<namespace>/<its ID> (waiterSpec),
// an ID that selfid's 64-hex rule does not take; else as Self finds the
// action.
func (e *Engine) ownID(ctx context.Context) (string, error) {
	e.mu.Lock()
	own := e.own
	e.mu.Unlock()
	if own != "" {
		return own, nil
	}
	if id := selfid.ContainerIn(e.readProc("cgroup"), e.namespace()); id != "" {
		if _, err := e.C.ContainerGet(ctx, id); err == nil {
			own = id
		}
	}
	if own == "" {
		s, err := e.Self(ctx, "")
		if err != nil {
			return "", err
		}
		own = s.ID
	}
	e.mu.Lock()
	e.own = own
	e.mu.Unlock()
	return own, nil
}
