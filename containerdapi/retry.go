package containerdapi

import (
	"errors"
	"net"
	"net/http"
	"strconv"

	"github.com/waitdaemon/waitdaemon/internal/socketclient"
)

// answer is containerd's reading of an answer, for the retry policy (see
// socketclient.New): UNAVAILABLE means the daemon may have done the work,
// so only a call safe to repeat goes again (Containers/Create is: its
// retry adopts its own container); any other status is the daemon's
// answer. Tasks/Create and Tasks/Start are not safe to repeat blindly,
// and are not retried here; their methods ask Tasks/Get what became of a
// call whose answer was lost (see lostAnswer and TaskCreate, TaskStart).
func answer(resp *http.Response) socketclient.Answer {
	if resp.StatusCode == http.StatusOK && headerCode(resp) == Unavailable {
		return socketclient.MayHaveActed
	}
	return socketclient.Final
}

// lostAnswer reports whether a failed call may or may not have been
// carried out: its answer was lost (the exchange broke off after the
// request may have reached the daemon, or the daemon answered
// UNAVAILABLE), as opposed to a dial that failed, when nothing was sent,
// or any other status, which is the daemon's answer.
func lostAnswer(err error, a *socketclient.Attempts) bool {
	var te *TransportError
	switch {
	case err == nil:
		return false
	case a != nil && a.Ambiguous:
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
