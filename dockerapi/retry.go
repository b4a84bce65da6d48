package dockerapi

import (
	"net/http"

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
