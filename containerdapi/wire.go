package containerdapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/waitdaemon/waitdaemon/internal/redact"
	"google.golang.org/protobuf/encoding/protowire"
)

// This file is the one protobuf codec of the package. Each message type
// lists its fields once, in fields(): number, proto name, and a value
// bound to the Go field. From that list alone come the wire encoding, the
// decoding, and the readable tree that the trace prints and the fixtures
// store. Fields a message does not list are skipped when decoding.

// message is a Go struct that mirrors a proto message.
type message interface {
	fields() []field
}

// field is one proto field of a message, bound to its Go field.
type field struct {
	num  protowire.Number
	name string
	v    value
}

// value encodes, decodes and shows one Go field.
type value interface {
	// encode appends the field (tag included) when it is set.
	encode(b []byte, num protowire.Number) []byte
	// decode consumes one occurrence's payload, after its tag.
	decode(typ protowire.Type, b []byte) (int, error)
	// tree is the readable form; ok is false when the field is unset.
	tree() (v any, ok bool)
}

// treeSetter sets a field, or a message, from its readable form parsed
// from JSON. Every value implements it; only the fixtures' replay needs
// it, so it is kept out of value, and out of the binary.
type treeSetter interface {
	fromTree(v any) error
}

// newLike returns a new zero message of proto's type.
func newLike(proto message) message {
	return reflect.New(reflect.TypeOf(proto).Elem()).Interface().(message)
}

// marshal encodes m.
func marshal(m message) []byte {
	var b []byte
	for _, f := range m.fields() {
		b = f.v.encode(b, f.num)
	}
	return b
}

// unmarshal decodes b into m, skipping the fields m does not list.
func unmarshal(b []byte, m message) error {
	fs := m.fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		i := slices.IndexFunc(fs, func(f field) bool { return f.num == num })
		if i < 0 {
			n = protowire.ConsumeFieldValue(num, typ, b)
		} else {
			var err error
			if n, err = fs[i].v.decode(typ, b); err != nil {
				return fmt.Errorf("field %s (%d): %w", fs[i].name, num, err)
			}
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil
}

// consumeBytes reads a length-delimited field of wire type typ from b:
// its bytes, and the length of the field.
func consumeBytes(typ protowire.Type, b []byte) ([]byte, int, error) {
	if typ != protowire.BytesType {
		return nil, 0, errWireType(typ)
	}
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return nil, 0, protowire.ParseError(n)
	}
	return v, n, nil
}

// tree is a message's readable form: its set fields, in proto order. It
// marshals as a JSON object.
type tree []kv

type kv struct {
	k string
	v any
}

func (t tree) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range t {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := marshalJSON(e.k)
		v, err := marshalJSON(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// customTree is a message with a readable form of its own: an Any shows
// its value decoded.
type customTree interface {
	tree() tree
}

// toTree is m's readable form.
func toTree(m message) tree {
	if c, ok := m.(customTree); ok {
		return c.tree()
	}
	t := tree{}
	for _, f := range m.fields() {
		if v, ok := f.v.tree(); ok {
			t = append(t, kv{f.name, v})
		}
	}
	return t
}

// fromTree sets m from its readable form, as JSON decodes it (with
// UseNumber).
func fromTree(v any, m message) error {
	if c, ok := m.(treeSetter); ok {
		return c.fromTree(v)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("expected an object, got %T", v)
	}
	fs := m.fields()
	for k, fv := range obj {
		i := slices.IndexFunc(fs, func(f field) bool { return f.name == k })
		if i < 0 {
			return fmt.Errorf("unknown field %q", k)
		}
		if err := fs[i].v.(treeSetter).fromTree(fv); err != nil {
			return fmt.Errorf("field %s: %w", k, err)
		}
	}
	return nil
}

// encodeJSON and decodeJSON turn a message into its readable JSON and
// back: the form of the trace and of the fixtures.
func encodeJSON(m message) json.RawMessage {
	data, err := marshalJSON(toTree(m))
	if err != nil {
		return json.RawMessage(strconv.Quote(err.Error()))
	}
	return data
}

// marshalJSON is json.Marshal without the escaping of <, > and &, which
// would make "<redacted>" unreadable.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func decodeJSON(data []byte, m message) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return err
	}
	return fromTree(v, m)
}

// Scalars.

type stringValue string

func (s *stringValue) encode(b []byte, num protowire.Number) []byte {
	p := (*string)(s)
	if *p == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, *p)
}

func (s *stringValue) decode(typ protowire.Type, b []byte) (int, error) {
	p := (*string)(s)
	if typ != protowire.BytesType {
		return 0, errWireType(typ)
	}
	v, n := protowire.ConsumeString(b)
	*p = v
	return n, nil
}

func (s *stringValue) tree() (any, bool) { return string(*s), *s != "" }

func (s *stringValue) fromTree(v any) error {
	p := (*string)(s)
	str, ok := v.(string)
	if !ok {
		return fmt.Errorf("expected a string, got %T", v)
	}
	*p = str
	return nil
}

// secretValue is a string that is never shown: the trace and the
// fixtures see <redacted>.
type secretValue string

func (s *secretValue) encode(b []byte, num protowire.Number) []byte {
	return (*stringValue)(s).encode(b, num)
}

func (s *secretValue) decode(typ protowire.Type, b []byte) (int, error) {
	return (*stringValue)(s).decode(typ, b)
}

func (s *secretValue) fromTree(v any) error { return (*stringValue)(s).fromTree(v) }

func (s *secretValue) tree() (any, bool) {
	if *s == "" {
		return nil, false
	}
	return "<redacted>", true
}

type stringsValue []string

func (s *stringsValue) encode(b []byte, num protowire.Number) []byte {
	p := (*[]string)(s)
	for _, v := range *p {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendString(b, v)
	}
	return b
}

func (s *stringsValue) decode(typ protowire.Type, b []byte) (int, error) {
	p := (*[]string)(s)
	if typ != protowire.BytesType {
		return 0, errWireType(typ)
	}
	v, n := protowire.ConsumeString(b)
	*p = append(*p, v)
	return n, nil
}

func (s *stringsValue) tree() (any, bool) { return []string(*s), len(*s) > 0 }

func (s *stringsValue) fromTree(v any) error {
	p := (*[]string)(s)
	list, ok := v.([]any)
	if !ok {
		return fmt.Errorf("expected a list, got %T", v)
	}
	for _, e := range list {
		str, ok := e.(string)
		if !ok {
			return fmt.Errorf("expected strings, got %T", e)
		}
		*p = append(*p, str)
	}
	return nil
}

// bytesValue shows bytes as text when they are UTF-8 (a manifest, a
// config), and as {"base64": …} otherwise; either way with secret-looking
// environment entries redacted (showBytes).
type bytesValue []byte

func (s *bytesValue) encode(b []byte, num protowire.Number) []byte {
	p := (*[]byte)(s)
	if len(*p) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, *p)
}

func (s *bytesValue) decode(typ protowire.Type, b []byte) (int, error) {
	p := (*[]byte)(s)
	v, n, err := consumeBytes(typ, b)
	if err != nil {
		return 0, err
	}
	*p = bytes.Clone(v)
	return n, nil
}

func (s *bytesValue) tree() (any, bool) {
	p := (*[]byte)(s)
	if len(*p) == 0 {
		return nil, false
	}
	text, b64 := showBytes(*p)
	if b64 {
		return map[string]string{"base64": text}, true
	}
	return text, true
}

// showBytes is how the trace and the fixtures show bytes: redacted as the
// Docker client's trace redacts a body, then as text when they are UTF-8,
// else in base64 (b64).
func showBytes(b []byte) (text string, b64 bool) {
	b = redact.Secrets(b)
	if utf8.Valid(b) {
		return string(b), false
	}
	return base64.StdEncoding.EncodeToString(b), true
}

func (s *bytesValue) fromTree(v any) error {
	p := (*[]byte)(s)
	switch v := v.(type) {
	case string:
		*p = []byte(v)
		return nil
	case map[string]any:
		str, _ := v["base64"].(string)
		data, err := base64.StdEncoding.DecodeString(str)
		*p = data
		return err
	}
	return fmt.Errorf("expected a string or {\"base64\": …}, got %T", v)
}

// uintValue is a uint32, int32, int64 or enum field: varints all, and
// each fits an int64 (no field is a uint64).
type uintValue[T ~uint32 | ~int32 | ~int64] struct{ p *T }

func (s uintValue[T]) encode(b []byte, num protowire.Number) []byte {
	if *s.p == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(*s.p))
}

func (s uintValue[T]) decode(typ protowire.Type, b []byte) (int, error) {
	if typ != protowire.VarintType {
		return 0, errWireType(typ)
	}
	v, n := protowire.ConsumeVarint(b)
	*s.p = T(v)
	return n, nil
}

func (s uintValue[T]) tree() (any, bool) { return *s.p, *s.p != 0 }

func (s uintValue[T]) fromTree(v any) error {
	n, ok := v.(json.Number)
	if !ok {
		return fmt.Errorf("expected a number, got %T", v)
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return err
	}
	*s.p = T(i)
	return nil
}

type boolValue bool

func (s *boolValue) encode(b []byte, num protowire.Number) []byte {
	p := (*bool)(s)
	if !*p {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, 1)
}

func (s *boolValue) decode(typ protowire.Type, b []byte) (int, error) {
	p := (*bool)(s)
	if typ != protowire.VarintType {
		return 0, errWireType(typ)
	}
	v, n := protowire.ConsumeVarint(b)
	*p = v != 0
	return n, nil
}

func (s *boolValue) tree() (any, bool) { return bool(*s), bool(*s) }

func (s *boolValue) fromTree(v any) error {
	p := (*bool)(s)
	t, ok := v.(bool)
	if !ok {
		return fmt.Errorf("expected a bool, got %T", v)
	}
	*p = t
	return nil
}

// mapValue is a map<string, string>: repeated {key 1, value 2}.
type mapValue map[string]string

func (s *mapValue) encode(b []byte, num protowire.Number) []byte {
	p := (*map[string]string)(s)
	keys := make([]string, 0, len(*p))
	for k := range *p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		var e []byte
		e = protowire.AppendTag(e, 1, protowire.BytesType)
		e = protowire.AppendString(e, k)
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		e = protowire.AppendString(e, (*p)[k])
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendBytes(b, e)
	}
	return b
}

func (s *mapValue) decode(typ protowire.Type, b []byte) (int, error) {
	p := (*map[string]string)(s)
	e, n, err := consumeBytes(typ, b)
	if err != nil {
		return 0, err
	}
	var entry struct{ k, v string }
	if err := unmarshal(e, entryFields{&entry.k, &entry.v}); err != nil {
		return 0, err
	}
	if *p == nil {
		*p = map[string]string{}
	}
	(*p)[entry.k] = entry.v
	return n, nil
}

type entryFields struct{ k, v *string }

func (e entryFields) fields() []field {
	return []field{{1, "key", (*stringValue)(e.k)}, {2, "value", (*stringValue)(e.v)}}
}

func (s *mapValue) tree() (any, bool) { return map[string]string(*s), len(*s) > 0 }

func (s *mapValue) fromTree(v any) error {
	p := (*map[string]string)(s)
	obj, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("expected an object, got %T", v)
	}
	*p = map[string]string{}
	for k, e := range obj {
		str, ok := e.(string)
		if !ok {
			return fmt.Errorf("key %q: expected a string, got %T", k, e)
		}
		(*p)[k] = str
	}
	return nil
}

// Messages.

// msgValue is a sub-message held by value: sent when it is not empty.
type msgValue struct{ m message }

func (s msgValue) encode(b []byte, num protowire.Number) []byte {
	e := marshal(s.m)
	if len(e) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, e)
}

func (s msgValue) decode(typ protowire.Type, b []byte) (int, error) {
	v, n, err := consumeBytes(typ, b)
	if err != nil {
		return 0, err
	}
	return n, unmarshal(v, s.m)
}

func (s msgValue) tree() (any, bool) {
	t := toTree(s.m)
	return t, len(t) > 0
}

func (s msgValue) fromTree(v any) error { return fromTree(v, s.m) }

// msgList is a repeated sub-message, seen through a named slice type
// (such as mountList for []Mount) that implements repeated.
type msgList struct{ l repeated }

type repeated interface {
	len() int
	at(i int) message
	add() message // appends a zero element and returns it
}

func (s msgList) encode(b []byte, num protowire.Number) []byte {
	for i := range s.l.len() {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendBytes(b, marshal(s.l.at(i)))
	}
	return b
}

func (s msgList) decode(typ protowire.Type, b []byte) (int, error) {
	v, n, err := consumeBytes(typ, b)
	if err != nil {
		return 0, err
	}
	return n, unmarshal(v, s.l.add())
}

func (s msgList) tree() (any, bool) {
	list := make([]tree, s.l.len())
	for i := range list {
		list[i] = toTree(s.l.at(i))
	}
	return list, len(list) > 0
}

func (s msgList) fromTree(v any) error {
	list, ok := v.([]any)
	if !ok {
		return fmt.Errorf("expected a list, got %T", v)
	}
	for _, e := range list {
		if err := fromTree(e, s.l.add()); err != nil {
			return err
		}
	}
	return nil
}

// timeValue is a google.protobuf.Timestamp {seconds 1, nanos 2}, shown
// as RFC 3339.
type timeValue time.Time

type timestamp struct {
	Seconds int64 // 1
	Nanos   int32 // 2
}

func (t *timestamp) fields() []field {
	return []field{{1, "seconds", uintValue[int64]{&t.Seconds}}, {2, "nanos", uintValue[int32]{&t.Nanos}}}
}

func (s *timeValue) encode(b []byte, num protowire.Number) []byte {
	p := (*time.Time)(s)
	if p.IsZero() {
		return b
	}
	ts := timestamp{Seconds: p.Unix(), Nanos: int32(p.Nanosecond())}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, marshal(&ts))
}

func (s *timeValue) decode(typ protowire.Type, b []byte) (int, error) {
	p := (*time.Time)(s)
	v, n, err := consumeBytes(typ, b)
	if err != nil {
		return 0, err
	}
	var ts timestamp
	if err := unmarshal(v, &ts); err != nil {
		return 0, err
	}
	*p = time.Unix(ts.Seconds, int64(ts.Nanos)).UTC()
	return n, nil
}

func (s *timeValue) tree() (any, bool) {
	p := (*time.Time)(s)
	return p.Format(time.RFC3339Nano), !p.IsZero()
}

func (s *timeValue) fromTree(v any) error {
	p := (*time.Time)(s)
	str, ok := v.(string)
	if !ok {
		return fmt.Errorf("expected an RFC 3339 time, got %T", v)
	}
	t, err := time.Parse(time.RFC3339Nano, str)
	*p = t.UTC()
	return err
}

// anyValue is a google.protobuf.Any. Its value is shown decoded when its
// type is one this package knows (anyTypes): as JSON for a runtime spec,
// as a message tree for the rest.
type anyValue struct{ p *Any }

func (s anyValue) encode(b []byte, num protowire.Number) []byte {
	if s.p.TypeURL == "" && len(s.p.Value) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, marshal(s.p))
}

func (s anyValue) decode(typ protowire.Type, b []byte) (int, error) {
	v, n, err := consumeBytes(typ, b)
	if err != nil {
		return 0, err
	}
	return n, unmarshal(v, s.p)
}

func (s anyValue) tree() (any, bool) {
	if s.p.TypeURL == "" && len(s.p.Value) == 0 {
		return nil, false
	}
	return s.p.tree(), true
}

func (s anyValue) fromTree(v any) error { return s.p.fromTree(v) }

func errWireType(typ protowire.Type) error {
	return fmt.Errorf("unexpected wire type %d", typ)
}
