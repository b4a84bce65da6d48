package dockerapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/waitdaemon/waitdaemon/internal/socketclient"
)

// answer is Docker's reading of an answer, for the retry policy (see
// socketclient.New): a 503 means the engine (or a proxy before it) may
// have done the work, so only what is safe to repeat goes again; a 429
// asks to be tried again; anything else is final: Docker answers 500 for
// permanent failures.
func answer(resp *http.Response) socketclient.Answer {
	switch resp.StatusCode {
	case http.StatusServiceUnavailable:
		return socketclient.MayHaveActed
	case http.StatusTooManyRequests:
		return socketclient.Busy
	}
	return socketclient.Final
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
