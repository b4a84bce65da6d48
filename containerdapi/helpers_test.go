package containerdapi_test

import (
	"context"
	"testing"
	"time"
)

func shortCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}
