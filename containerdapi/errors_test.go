package containerdapi_test

import (
	"testing"

	"github.com/waitdaemon/waitdaemon/containerdapi"
)

// TestCodeString: a status code reads as its gRPC name, the last one
// too; a code beyond them as its number.
func TestCodeString(t *testing.T) {
	for code, want := range map[containerdapi.Code]string{
		containerdapi.OK:                  "OK",
		containerdapi.NotFound:            "NotFound",
		containerdapi.Unauthenticated:     "Unauthenticated",
		containerdapi.Unauthenticated + 1: "Code(17)",
		99:                                "Code(99)",
	} {
		if got := code.String(); got != want {
			t.Errorf("Code(%d).String() = %q, want %q", uint32(code), got, want)
		}
	}
}
