package containerdapi

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/testkit/linediff"
	"google.golang.org/protobuf/encoding/protowire"
)

// Hand-built wire bytes, field by field with protowire: an account of the
// field numbers independent of the messages' own.
func tag(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
func s(num protowire.Number, v string) []byte {
	return protowire.AppendString(tag(num, protowire.BytesType), v)
}
func v(num protowire.Number, n uint64) []byte {
	return protowire.AppendVarint(tag(num, protowire.VarintType), n)
}
func m(num protowire.Number, parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return protowire.AppendBytes(tag(num, protowire.BytesType), b)
}
func join(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func TestMarshal(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	cases := []struct {
		name string
		msg  message
		want []byte
	}{
		{name: "container", msg: &Container{
			ID: "web", Labels: map[string]string{"b": "2", "a": "1"}, Image: "docker.io/library/alpine:3.20",
			Runtime: Runtime{Name: RuncV2}, Spec: SpecAny([]byte(`{}`)), Snapshotter: "overlayfs", SnapshotKey: "web", CreatedAt: created,
		}, want: join(s(1, "web"), m(2, s(1, "a"), s(2, "1")), m(2, s(1, "b"), s(2, "2")), s(3, "docker.io/library/alpine:3.20"),
			m(4, s(1, RuncV2)), m(5, s(1, SpecTypeURL), s(2, "{}")), s(6, "overlayfs"), s(7, "web"), m(8, v(1, uint64(created.Unix())), v(2, 6)))},
		{name: "empty container", msg: &Container{}, want: nil},
		{name: "update mask", msg: &updateContainerRequest{Container: Container{ID: "web"}, UpdateMask: fieldMask{Paths: []string{"labels.x"}}},
			want: join(m(1, s(1, "web")), m(2, s(1, "labels.x")))},
		{name: "task create", msg: &createTaskRequest{ContainerID: "web", Rootfs: []Mount{{Type: "overlay", Source: "overlay", Options: []string{"lowerdir=/l", "upperdir=/u"}}}, Stdout: "file:///log", Stderr: "file:///log", Terminal: true},
			want: join(s(1, "web"), m(3, s(1, "overlay"), s(2, "overlay"), s(4, "lowerdir=/l"), s(4, "upperdir=/u")), s(5, "file:///log"), s(6, "file:///log"), v(7, 1))},
		{name: "kill", msg: &killRequest{ContainerID: "web", Signal: 9, All: true}, want: join(s(1, "web"), v(3, 9), v(4, 1))},
		{name: "lease delete", msg: &deleteLeaseRequest{ID: "l", Sync: true}, want: join(s(1, "l"), v(2, 1))},
		{name: "snapshot prepare", msg: &snapshotRequest{Snapshotter: "overlayfs", Key: "k", Parent: "sha256:p"}, want: join(s(1, "overlayfs"), s(2, "k"), s(3, "sha256:p"))},
		{name: "image store", msg: &imageStore{Name: "r", Platforms: []Platform{{OS: "linux", Architecture: "arm64"}}, Unpacks: []unpackConfiguration{{Platform: Platform{OS: "linux", Architecture: "arm64"}, Snapshotter: "overlayfs"}}},
			want: join(s(1, "r"), m(3, s(1, "linux"), s(2, "arm64")), m(10, m(1, s(1, "linux"), s(2, "arm64")), s(2, "overlayfs")))},
		{name: "auth response", msg: &authResponse{AuthType: 1, Username: "u", Secret: "p"}, want: join(v(1, 1), s(2, "p"), s(3, "u"))},
		{name: "transfer", msg: &transferRequest{Source: Any{TypeURL: "t"}, Options: transferOptions{ProgressStream: "p"}}, want: join(m(1, s(1, "t")), m(3, s(1, "p")))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := marshal(tc.msg)
			if hex.EncodeToString(got) != hex.EncodeToString(tc.want) {
				t.Errorf("marshal() = %x\nwant       %x", got, tc.want)
			}
			// And back: the same bytes again.
			again := newLike(tc.msg)
			if err := unmarshal(got, again); err != nil {
				t.Fatal(err)
			}
			if b := marshal(again); hex.EncodeToString(b) != hex.EncodeToString(got) {
				t.Errorf("marshal(unmarshal(x)) = %x, want %x", b, got)
			}
			// And through the fixtures' JSON.
			var fromJSON = newLike(tc.msg)
			if err := decodeJSON(encodeJSON(tc.msg), fromJSON); err != nil {
				t.Fatal(err)
			}
			if b := marshal(fromJSON); hex.EncodeToString(b) != hex.EncodeToString(got) && tc.name != "auth response" {
				t.Errorf("through JSON %s: %x, want %x", encodeJSON(tc.msg), b, got)
			}
		})
	}
}

// TestUnmarshal reads what the daemon sends, including fields the package
// does not declare, which it skips, and refuses wire types that do not
// fit.
func TestUnmarshal(t *testing.T) {
	exited := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var p Process
	in := join(s(1, "web"), s(2, "web"), v(3, 4242), v(4, 3), s(6, "file:///x"), v(9, 137), m(10, v(1, uint64(exited.Unix()))), v(11, 2), m(99, s(1, "future")))
	if err := unmarshal(in, &p); err != nil {
		t.Fatal(err)
	}
	want := Process{ContainerID: "web", ID: "web", Pid: 4242, Status: TaskStopped, ExitStatus: 137, ExitedAt: exited}
	if p != want {
		t.Errorf("unmarshal(Process) = %+v, want %+v", p, want)
	}
	bad := []struct {
		name string
		in   []byte
		want string
	}{
		{"varint for a string", v(1, 3), "field container_id (1): unexpected wire type 0"},
		{"string for a varint", s(3, "x"), "field pid (3): unexpected wire type 2"},
		{"truncated", join(s(1, "web"))[:3], "unexpected EOF"},
		{"a message truncated", m(10, v(1, 5))[:2], "field exited_at (10): unexpected EOF"},
		{"bad tag", []byte{0xff}, "unexpected EOF"},
	}
	for _, tc := range bad {
		var p Process
		if err := unmarshal(tc.in, &p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: unmarshal() error = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestTree is the readable form of the trace and fixtures: proto names in
// proto order, times in RFC 3339, bytes as text or base64, known Anys
// decoded, secrets redacted.
func TestTree(t *testing.T) {
	cases := []struct {
		name string
		msg  message
		want string
	}{
		{"process", &Process{ContainerID: "web", Pid: 7, Status: TaskRunning, ExitedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)},
			`{"container_id":"web","pid":7,"status":2,"exited_at":"2026-01-02T03:04:05.000000006Z"}`},
		{"text and binary", &readContentResponse{Offset: 1, Data: []byte("{}")}, `{"offset":1,"data":"{}"}`},
		{"binary", &readContentResponse{Data: []byte{0xff, 0}}, `{"data":{"base64":"/wA="}}`},
		{"known any", &Envelope{Topic: "/tasks/exit", Event: anyOf("containerd.events.TaskExit", &TaskExit{ContainerID: "web", ExitStatus: 3})},
			`{"topic":"/tasks/exit","event":{"type_url":"containerd.events.TaskExit","fields":{"container_id":"web","exit_status":3}}}`},
		{"unknown any", &Envelope{Event: Any{TypeURL: "x.Y", Value: []byte{1, 2}}}, `{"event":{"type_url":"x.Y","base64":"AQI="}}`},
		{"credentials in a stream", ptr(anyOf("containerd.types.transfer.AuthResponse", &authResponse{AuthType: 1, Username: "u", Secret: "hunter2"})),
			`{"type_url":"containerd.types.transfer.AuthResponse","fields":{"authType":1,"secret":"<redacted>","username":"<redacted>"}}`},
		{"empty", &empty{}, `{}`},
		{"empty lists", &subscribeRequest{Filters: []string{}}, `{}`},
		{"no messages", &listContainersResponse{Containers: []Container{}}, `{}`},
		{"secret entry in text bytes", &readContentResponse{Data: []byte(`{"Env":["PATH=/bin","API_TOKEN=s3cr3t"]}`)},
			`{"data":"{\"Env\":[\"PATH=/bin\",\"API_TOKEN=<redacted>\"]}"}`},
		{"secret entry in binary bytes", &readContentResponse{Data: []byte("\xff[\"API_TOKEN=s3cr3t\"]")},
			`{"data":{"base64":"` + base64.StdEncoding.EncodeToString([]byte("\xff[\"API_TOKEN=<redacted>\"]")) + `"}}`},
		{"secret entry in an unknown any", &Envelope{Event: Any{TypeURL: "x.Y", Value: []byte(`["DB_PASSWORD=s3cr3t"]`)}},
			`{"event":{"type_url":"x.Y","base64":"` + base64.StdEncoding.EncodeToString([]byte(`["DB_PASSWORD=<redacted>"]`)) + `"}}`},
		{"secret entry in a spec that is not JSON", ptr(SpecAny([]byte(`{"env":["DB_PASSWORD=s3cr3t"]`))),
			`{"type_url":"` + SpecTypeURL + `","base64":"` + base64.StdEncoding.EncodeToString([]byte(`{"env":["DB_PASSWORD=<redacted>"]`)) + `"}`},
	}
	for _, tc := range cases {
		got := string(encodeJSON(tc.msg))
		if d := linediff.Text(indentJSON(tc.want), indentJSON(got)); d != "" {
			t.Errorf("%s: tree (-want +got):\n%s", tc.name, d)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func indentJSON(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
