package containerdapi_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestRaw makes each call Raw takes by name: the method it reaches, the
// request its arguments make (field numbers from containerd's protos,
// written by hand), and the answer shown as the trace shows it.
func TestRaw(t *testing.T) {
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	container := sub(1, str(1, "web"), sub(2, str(1, "org.waitdaemon.role"), str(2, "user")), str(3, "docker.io/library/alpine:3.20"))
	cases := []struct {
		name    string
		args    []string
		method  string
		request []byte
		answer  []byte
		want    string
	}{
		{name: "version", method: "containerd.services.version.v1.Version/Version",
			answer: cat(str(1, "v2.2.1"), str(2, "dea7da5")), want: `{"version":"v2.2.1","revision":"dea7da5"}`},
		{name: "namespaces.list", method: "containerd.services.namespaces.v1.Namespaces/List",
			answer: sub(1, str(1, "tinkerbell")), want: `{"namespaces":[{"name":"tinkerbell"}]}`},
		{name: "containers.list", method: "containerd.services.containers.v1.Containers/List",
			answer: container, want: `{"containers":[{"id":"web","labels":{"org.waitdaemon.role":"user"},"image":"docker.io/library/alpine:3.20"}]}`},
		{name: "containers.list", args: []string{`labels."org.waitdaemon.role"==user`}, method: "containerd.services.containers.v1.Containers/List",
			request: str(1, `labels."org.waitdaemon.role"==user`), answer: container,
			want: `{"containers":[{"id":"web","labels":{"org.waitdaemon.role":"user"},"image":"docker.io/library/alpine:3.20"}]}`},
		{name: "Containers.Get", args: []string{"web"}, method: "containerd.services.containers.v1.Containers/Get",
			request: str(1, "web"), answer: container, want: `{"container":{"id":"web","labels":{"org.waitdaemon.role":"user"},"image":"docker.io/library/alpine:3.20"}}`},
		{name: "containerd.services.containers.v1.Containers/Get", args: []string{"web"}, method: "containerd.services.containers.v1.Containers/Get",
			request: str(1, "web"), answer: container, want: `{"container":{"id":"web","labels":{"org.waitdaemon.role":"user"},"image":"docker.io/library/alpine:3.20"}}`},
		{name: "tasks.list", args: []string{"status==running"}, method: "containerd.services.tasks.v1.Tasks/List",
			request: str(1, "status==running"), answer: sub(1, str(1, "web"), varint(3, 4242), varint(4, 2)),
			want: `{"tasks":[{"container_id":"web","pid":4242,"status":2}]}`},
		{name: "tasks.list", method: "containerd.services.tasks.v1.Tasks/List", want: `{}`},
		{name: "tasks.get", args: []string{"web"}, method: "containerd.services.tasks.v1.Tasks/Get",
			request: str(1, "web"), answer: sub(1, str(1, "web"), varint(4, 3), varint(9, 137)),
			want: `{"process":{"container_id":"web","status":3,"exit_status":137}}`},
		{name: "images.get", args: []string{"docker.io/library/alpine:3.20"}, method: "containerd.services.images.v1.Images/Get",
			request: str(1, "docker.io/library/alpine:3.20"), answer: sub(1, str(1, "docker.io/library/alpine:3.20"), sub(3, str(2, "sha256:ab"))),
			want: `{"image":{"name":"docker.io/library/alpine:3.20","target":{"digest":"sha256:ab"}}}`},
		{name: "snapshots.stat", args: []string{"overlayfs", "web"}, method: "containerd.services.snapshots.v1.Snapshots/Stat",
			request: cat(str(1, "overlayfs"), str(2, "web")), answer: sub(1, str(1, "web"), str(2, "sha256:cd"), varint(3, 2)),
			want: `{"info":{"name":"web","parent":"sha256:cd","kind":2}}`},
		{name: "snapshots.mounts", args: []string{"overlayfs", "web"}, method: "containerd.services.snapshots.v1.Snapshots/Mounts",
			request: cat(str(1, "overlayfs"), str(2, "web")), answer: sub(1, str(1, "overlay"), str(2, "overlay"), str(4, "lowerdir=/l")),
			want: `{"mounts":[{"type":"overlay","source":"overlay","options":["lowerdir=/l"]}]}`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(append([]string{tc.name}, tc.args...), " "), func(t *testing.T) {
			var path string
			var msg []byte
			c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
				path, msg = r.URL.Path, readRequest(t, r)
				answer(w, tc.answer)
			})
			got, err := c.Raw(shortCtx(t), tc.name, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if path != "/"+tc.method || string(msg) != string(tc.request) {
				t.Errorf("sent %s %x; want %s %x", path, msg, tc.method, tc.request)
			}
			if string(got) != tc.want {
				t.Errorf("answer (-want +got):\n%s", linediff.Text(tc.want, string(got)))
			}
		})
	}
}

// TestRawRefused: a name Raw does not know, the wrong number of
// arguments or an empty one is ErrBadCall, named, with what it takes; nothing is sent.
// The daemon's refusal is its own error, named after the call.
func TestRawRefused(t *testing.T) {
	var h hits
	c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		h.add()
		fail(w, containerdapi.NotFound, `container "gone" in namespace "tinkerbell": not found`)
	})
	cases := []struct {
		name string
		args []string
		want string
	}{
		{name: "containers.gte", args: []string{"web"}, want: `bad call "containers.gte": expected one of version, namespaces.list, containers.list [FILTER], containers.get ID, tasks.list [FILTER], tasks.get ID, images.get NAME, snapshots.stat SNAPSHOTTER KEY, snapshots.mounts SNAPSHOTTER KEY`},
		// Calls that write are not made.
		{name: "containers.delete", args: []string{"web"}, want: `bad call "containers.delete": expected one of version,`},
		{name: "containerd.services.tasks.v1.Tasks/Kill", args: []string{"web"}, want: `bad call "containerd.services.tasks.v1.Tasks/Kill": expected one of`},
		{name: "containers.get", want: `bad call containers.get []: expected containers.get ID`},
		{name: "version", args: []string{"now"}, want: `bad call version ["now"]: expected version`},
		{name: "tasks.list", args: []string{"a", "b"}, want: `bad call tasks.list ["a" "b"]: expected tasks.list [FILTER]`},
		{name: "snapshots.stat", args: []string{"web"}, want: `bad call snapshots.stat ["web"]: expected snapshots.stat SNAPSHOTTER KEY`},
		{name: "snapshots.stat", args: []string{"", "web"}, want: `bad call snapshots.stat ["" "web"]: expected snapshots.stat SNAPSHOTTER KEY`},
		{name: "snapshots.mounts", args: []string{"overlayfs", "web", "more"}, want: `bad call snapshots.mounts ["overlayfs" "web" "more"]: expected snapshots.mounts SNAPSHOTTER KEY`},
	}
	for _, tc := range cases {
		_, err := c.Raw(shortCtx(t), tc.name, tc.args...)
		if !errors.Is(err, containerdapi.ErrBadCall) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Raw(%q, %q) error = %v; want ErrBadCall, %s", tc.name, tc.args, err, tc.want)
		}
	}
	if h.count() != 0 {
		t.Errorf("%d calls reached the daemon; want none", h.count())
	}
	_, err := c.Raw(shortCtx(t), "tasks.get", "gone")
	want := `tasks.get ["gone"]: containerd.services.tasks.v1.Tasks/Get: NotFound: container "gone" in namespace "tinkerbell": not found`
	if !errors.Is(err, containerdapi.ErrNotFound) || errors.Is(err, containerdapi.ErrBadCall) || err.Error() != want {
		t.Errorf("Raw(tasks.get gone) error = %v; want NotFound, %s", err, want)
	}
}

// TestRawCalls: the list names each call once, as Raw takes it.
func TestRawCalls(t *testing.T) {
	seen := map[string]bool{}
	for _, u := range containerdapi.RawCalls() {
		name, _, _ := strings.Cut(u, " ")
		if seen[name] || name != strings.ToLower(name) || strings.Count(name, ".") > 1 {
			t.Errorf("RawCalls() has %q: want each name once, lower case, service.method", u)
		}
		seen[name] = true
	}
	if len(seen) != 9 {
		t.Errorf("RawCalls() = %q; want the nine calls", containerdapi.RawCalls())
	}
}
