package containerdapi

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Codec is the codec of recorded fixtures (testkit/grpcrr's Codec):
// messages by method, as the trace shows them. It is for the tests of
// this package and of those built on it; nothing in the binary uses it.
var Codec codec

type codec struct{}

func (codec) newMessage(method string, fromClient bool) (message, error) {
	r, ok := rpcs[method]
	if !ok {
		return nil, fmt.Errorf("method %q is not one of this package's", method)
	}
	proto := r.resp
	if fromClient {
		proto = r.req
	}
	return newLike(proto), nil
}

func (c codec) Decode(method string, fromClient bool, msg []byte) (json.RawMessage, error) {
	m, err := c.newMessage(method, fromClient)
	if err != nil {
		return nil, err
	}
	if err := unmarshal(msg, m); err != nil {
		return nil, err
	}
	return encodeJSON(m), nil
}

func (c codec) Encode(method string, fromClient bool, js json.RawMessage) ([]byte, error) {
	m, err := c.newMessage(method, fromClient)
	if err != nil {
		return nil, err
	}
	if err := decodeJSON(js, m); err != nil {
		return nil, err
	}
	return marshal(m), nil
}

// SetStreamIDs is for tests that replay a recording: it names the
// client's streams and leases prefix-1, prefix-2, …, and dates them
// 2100-01-01, so that a recording replays.
func SetStreamIDs(c *Client, prefix string) {
	c.now = func() time.Time { return time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC) }
	n := 0
	c.newID = func() string {
		n++
		return prefix + "-" + strconv.Itoa(n)
	}
}
