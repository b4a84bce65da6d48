package containerdapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/waitdaemon/waitdaemon/internal/redact"
)

// SpecTypeURL is the type of a container's OCI runtime spec (JSON) in
// Container.Spec. The daemon accepts any type at Containers/Create, but
// Tasks/Create fails with another.
const SpecTypeURL = "types.containerd.io/opencontainers/runtime-spec/1/Spec"

// Any is a google.protobuf.Any {type_url 1, value 2}.
type Any struct {
	TypeURL string // 1
	Value   []byte // 2
}

func (a *Any) fields() []field {
	return []field{{1, "type_url", (*stringValue)(&a.TypeURL)}, {2, "value", (*bytesValue)(&a.Value)}}
}

// SpecAny wraps an OCI runtime spec (JSON) for Container.Spec.
func SpecAny(specJSON []byte) Any {
	return Any{TypeURL: SpecTypeURL, Value: specJSON}
}

// anyTypes are the Any payloads this package reads and writes; the trace
// and the fixtures show them decoded. Type URLs are bare proto names, as
// the daemon's Transfer and Streaming services use them.
var anyTypes = map[string]message{
	"containerd.services.streaming.v1.StreamInit": &streamInit{},
	"google.protobuf.Empty":                       &empty{},
	"containerd.types.transfer.OCIRegistry":       &ociRegistry{},
	"containerd.types.transfer.ImageStore":        &imageStore{},
	"containerd.types.transfer.AuthRequest":       &authRequest{},
	"containerd.types.transfer.AuthResponse":      &authResponse{},
	"containerd.types.transfer.Progress":          &Progress{},
	"containerd.events.TaskExit":                  &TaskExit{},
}

// anyOf wraps m, whose type URL is name.
func anyOf(name string, m message) Any {
	return Any{TypeURL: name, Value: marshal(m)}
}

// tree shows a's value decoded where its type is known: a runtime spec as
// JSON, with secret-looking environment values redacted; a known message
// as its fields; anything else as base64, redacted before it is encoded.
func (a *Any) tree() tree {
	t := tree{{"type_url", a.TypeURL}}
	if len(a.Value) == 0 {
		return t
	}
	if a.TypeURL == SpecTypeURL && json.Valid(a.Value) {
		var compact bytes.Buffer
		if json.Compact(&compact, a.Value) == nil {
			return append(t, kv{"json", json.RawMessage(redact.Secrets(compact.Bytes()))})
		}
	}
	if proto, ok := anyTypes[a.TypeURL]; ok {
		m := newLike(proto)
		if unmarshal(a.Value, m) == nil {
			return append(t, kv{"fields", toTree(m)})
		}
	}
	return append(t, kv{"base64", base64.StdEncoding.EncodeToString(redact.Secrets(a.Value))})
}

func (a *Any) fromTree(v any) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("expected an object, got %T", v)
	}
	a.TypeURL, _ = obj["type_url"].(string)
	switch {
	case obj["json"] != nil:
		data, err := json.Marshal(obj["json"])
		a.Value = data
		return err
	case obj["fields"] != nil:
		proto, ok := anyTypes[a.TypeURL]
		if !ok {
			return fmt.Errorf("type %q: fields given for a type this package does not know", a.TypeURL)
		}
		m := newLike(proto)
		if err := fromTree(obj["fields"], m); err != nil {
			return err
		}
		a.Value = marshal(m)
	case obj["base64"] != nil:
		s, _ := obj["base64"].(string)
		data, err := base64.StdEncoding.DecodeString(s)
		a.Value = data
		return err
	}
	return nil
}

// empty is google.protobuf.Empty, the answer of many calls.
type empty struct{}

func (*empty) fields() []field { return nil }
