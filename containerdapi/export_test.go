package containerdapi

import (
	"context"

	"github.com/waitdaemon/waitdaemon/internal/socketclient"
)

// unimplemented is a method no containerd has.
var unimplemented = newRPC("containerd.services.waitdaemon.v1.Nothing/Nothing", &empty{}, &empty{}, true)

// CallUnimplemented calls it.
func CallUnimplemented(ctx context.Context, c *Client) error {
	return c.call(ctx, unimplemented, &empty{}, &empty{}, callOptions{})
}

// MaxRetries bounds the attempts beyond the first.
const MaxRetries = socketclient.MaxRetries

// MaxBlob bounds what ContentRead reads.
const MaxBlob = maxBlob
