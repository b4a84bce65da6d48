package containerdapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrBadCall is a call Raw does not make: a name it does not know, or
// the wrong number of arguments, or an empty one. The message lists what
// it takes.
var ErrBadCall = errors.New("bad call")

// rawCall is one read-only call of the daemon that Raw makes by name:
// its usage, the name as typed then its arguments ("containers.get ID",
// an optional one in brackets), which fill the request's first fields in
// order (the request's field table). min and max count the arguments.
type rawCall struct {
	usage    string
	min, max int
	rpc      *rpc
}

// rawCalls are the calls Raw makes, in the order RawCalls lists them.
var rawCalls = []rawCall{
	{"version", 0, 0, versionVersion},
	{"namespaces.list", 0, 0, namespacesList},
	{"containers.list [FILTER]", 0, 1, containersList},
	{"containers.get ID", 1, 1, containersGet},
	{"tasks.list [FILTER]", 0, 1, tasksList},
	{"tasks.get ID", 1, 1, tasksGet},
	{"images.get NAME", 1, 1, imagesGet},
	{"snapshots.stat SNAPSHOTTER KEY", 2, 2, snapshotsStat},
	{"snapshots.mounts SNAPSHOTTER KEY", 2, 2, snapshotsMounts},
}

// RawCalls lists the calls Raw makes, each with its arguments, as
// "containers.get ID".
func RawCalls() []string {
	list := make([]string, len(rawCalls))
	for i, r := range rawCalls {
		list[i] = r.usage
	}
	return list
}

// Raw makes one of the daemon's read-only calls, named as RawCalls lists
// it (in any case) or by its gRPC method, with its arguments in order,
// and returns the answer in the trace's form: JSON of the fields this
// package reads, under their proto names, with secret-looking values
// redacted. A name, a number of arguments or an empty argument that it
// does not take is ErrBadCall.
func (c *Client) Raw(ctx context.Context, name string, args ...string) (json.RawMessage, error) {
	for _, r := range rawCalls {
		short, _, _ := strings.Cut(r.usage, " ")
		if !strings.EqualFold(name, short) && !strings.EqualFold(name, r.rpc.name) {
			continue
		}
		if len(args) < r.min || len(args) > r.max || slices.Contains(args, "") {
			return nil, fmt.Errorf("%w %s %q: expected %s", ErrBadCall, short, args, r.usage)
		}
		in, out := newLike(r.rpc.req), newLike(r.rpc.resp)
		for i, f := range in.fields()[:len(args)] {
			switch v := f.v.(type) {
			case *stringValue:
				*v = stringValue(args[i])
			case *stringsValue:
				*v = append(*v, args[i])
			}
		}
		if err := c.call(ctx, r.rpc, in, out, callOptions{}); err != nil {
			return nil, fmt.Errorf("%s %q: %w", short, args, err)
		}
		return encodeJSON(out), nil
	}
	return nil, fmt.Errorf("%w %q: expected one of %s", ErrBadCall, name, strings.Join(RawCalls(), ", "))
}
