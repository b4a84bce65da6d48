package containerdapi

import (
	"net/http"
	"strconv"

	"github.com/waitdaemon/waitdaemon/internal/socketclient"
)

// answer is containerd's reading of an answer, for the retry policy (see
// socketclient.New): UNAVAILABLE means the daemon may have done the work,
// so only a call safe to repeat goes again; any other status is the
// daemon's answer. The creates (of a container, a lease, a snapshot, a
// task) and Tasks/Start are not safe to repeat blindly: they are sent
// once, and the engine settles a lost answer (engine/containerd).
func answer(resp *http.Response) socketclient.Answer {
	if resp.StatusCode == http.StatusOK && headerCode(resp) == Unavailable {
		return socketclient.MayHaveActed
	}
	return socketclient.Final
}

// headerCode is the status of a trailers-only answer, OK when the headers
// carry none.
func headerCode(resp *http.Response) Code {
	c, _ := strconv.ParseUint(resp.Header.Get("Grpc-Status"), 10, 32)
	return Code(c)
}
