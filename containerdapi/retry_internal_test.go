package containerdapi

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/waitdaemon/waitdaemon/internal/socketclient"
)

// TestAnswer: containerd's answers, as the retry policy reads them: only
// a trailers-only UNAVAILABLE may have been acted on.
func TestAnswer(t *testing.T) {
	cases := []struct {
		status int
		grpc   Code
		want   socketclient.Answer
	}{
		{200, Unavailable, socketclient.MayHaveActed},
		{200, OK, socketclient.Final},
		{200, NotFound, socketclient.Final},
		{200, AlreadyExists, socketclient.Final},
		{200, DeadlineExceeded, socketclient.Final},
		{503, Unavailable, socketclient.Final}, // not gRPC's answer
	}
	for _, tc := range cases {
		resp := &http.Response{StatusCode: tc.status, Header: http.Header{}}
		if tc.grpc != OK {
			resp.Header.Set("Grpc-Status", strconv.Itoa(int(tc.grpc)))
		}
		if got := answer(resp); got != tc.want {
			t.Errorf("answer(HTTP %d, grpc-status %d) = %v, want %v", tc.status, tc.grpc, got, tc.want)
		}
	}
}
