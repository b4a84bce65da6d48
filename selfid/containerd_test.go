package selfid

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recordedDir holds what containerd containers saw of themselves; see its
// README.md.
const recordedDir = "../testdata/selfid"

// recordedCases must each be there: a lost directory fails the tests
// rather than shrinking them.
var recordedCases = []string{"pid-host-network-host", "private"}

// recordedProc is one recorded container: its ID, /proc/self/cgroup,
// /proc/self/mountinfo, and the overlay upperdir of its snapshot as
// containerd's Snapshots/Mounts gave it.
type recordedProc struct {
	ID, Cgroup, Mountinfo, Upperdir string
}

func readProc(tb testing.TB, name string) recordedProc {
	tb.Helper()
	read := func(file string) string {
		b, err := os.ReadFile(filepath.Join(recordedDir, name, file))
		if err != nil {
			tb.Fatal(err)
		}
		return string(b)
	}
	var raw []struct {
		Type    string
		Options []string
	}
	if err := json.Unmarshal([]byte(read("snapshot-mounts.json")), &raw); err != nil {
		tb.Fatal(err)
	}
	if len(raw) != 1 || raw[0].Type != "overlay" {
		tb.Fatalf("%s: snapshot mounts are not one overlay: %+v", name, raw)
	}
	upper, ok := Upperdir(raw[0].Options)
	if !ok {
		tb.Fatalf("%s: no upperdir in the snapshot's options %q", name, raw[0].Options)
	}
	return recordedProc{
		ID:        strings.TrimSpace(read("id")),
		Cgroup:    read("cgroup"),
		Mountinfo: read("mountinfo"),
		Upperdir:  upper,
	}
}

func TestContainerdRecorded(t *testing.T) {
	for _, name := range recordedCases {
		t.Run(name, func(t *testing.T) {
			p := readProc(t, name)
			if !isID(p.ID) {
				t.Fatalf("recorded ID %q is not a full ID", p.ID)
			}
			ns, id, ok := ContainerdCgroup(p.Cgroup)
			if ns != "tinkerbell" || id != p.ID || !ok {
				t.Errorf("ContainerdCgroup() = %q, %q, %v; want %q, %q, true", ns, id, ok, "tinkerbell", p.ID)
			}
			upper, ok := RootUpperdir(p.Mountinfo)
			if upper != p.Upperdir || !ok {
				t.Errorf("RootUpperdir() = %q, %v; want the snapshot's %q, true", upper, ok, p.Upperdir)
			}
			// The Docker-era candidates find the ID in the cgroup too.
			got := Candidates(Sources{Cgroup: p.Cgroup, Mountinfo: p.Mountinfo, Hostname: "captainos"})
			if d := diff([]Candidate{{p.ID, Cgroup}, {"captainos", Hostname}}, got); d != "" {
				t.Errorf("Candidates() mismatch (-want +got):\n%s", d)
			}
		})
	}
}

func TestContainerdCgroup(t *testing.T) {
	other := strings.Repeat("ab", 32)
	cases := []struct {
		name, cgroup string
		ns, id       string
		ok           bool
	}{
		{"cgroup v2", fill("0::/tinkerbell/{own}\n"), "tinkerbell", own, true},
		{"cgroup v1 with an rdma line at the root", fill("3:pids:/tinkerbell/{own}\n2:rdma:/\n1:name=systemd:/tinkerbell/{own}\n0::/tinkerbell/{own}\n"), "tinkerbell", own, true},
		{"hybrid: the unified line is containerd's service", fill("2:pids:/k8s.io/{own}\n0::/system.slice/containerd.service\n"), "k8s.io", own, true},
		{"under a parent cgroup", fill("0::/machine.slice/tink_er-bell.2/{own}\n"), "tink_er-bell.2", own, true},
		{"docker's reads as a namespace", fill("0::/docker/{own}\n"), "docker", own, true},
		{"private cgroup namespace", "0::/\n", "", "", false},
		{"two containers", fill("1:pids:/tinkerbell/{own}\n0::/tinkerbell/") + other + "\n", "", "", false},
		{"two namespaces", fill("1:pids:/tinkerbell/{own}\n0::/default/{own}\n"), "", "", false},
		{"no namespace", fill("0::/{own}\n"), "", "", false},
		{"a namespace that cannot be", fill("0::/-x/{own}\n1:a:/x-/{own}\n2:b:/x..y/{own}\n3:c:/x y/{own}\n4:d:/") + strings.Repeat("n", 77) + fill("/{own}\n"), "", "", false},
		{"a namespace of 76", "0::/" + strings.Repeat("n", 76) + fill("/{own}\n"), strings.Repeat("n", 76), own, true},
		{"systemd scope", fill("0::/system.slice/docker-{own}.scope\n"), "", "", false},
		{"not an ID", "0::/tinkerbell/" + strings.ToUpper(own) + "\n1:a:/tinkerbell/" + own[:63] + "\n", "", "", false},
		{"a line of junk, no trailing newline", fill("junk\n0::/tinkerbell/{own}"), "tinkerbell", own, true},
		{"empty", "", "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns, id, ok := ContainerdCgroup(tc.cgroup)
			if ns != tc.ns || id != tc.id || ok != tc.ok {
				t.Errorf("ContainerdCgroup() = %q, %q, %v; want %q, %q, %v", ns, id, ok, tc.ns, tc.id, tc.ok)
			}
		})
	}
}

func TestRootUpperdir(t *testing.T) {
	const snap = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots"
	root := func(opts string) string {
		return "72 48 0:38 / / rw,relatime - overlay overlay rw,lowerdir=" + snap + "/1/fs," + opts + "\n" +
			"73 72 0:41 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
	}
	cases := []struct {
		name, mountinfo string
		want            string
		ok              bool
	}{
		{"containerd's overlay", root("upperdir=" + snap + "/9/fs,workdir=" + snap + "/9/work,uuid=on"), snap + "/9/fs", true},
		{"optional fields", "590 512 0:52 / / rw,relatime master:297 shared:4 - overlay overlay rw,upperdir=/u/fs,workdir=/u/work\n", "/u/fs", true},
		{"escaped space and comma", root(`upperdir=/var/lib/my\040root/a\054b/fs,workdir=/w`), "/var/lib/my root/a,b/fs", true},
		{"a backslash that is no escape", root(`upperdir=/a\9b\04`), `/a\9b\04`, true},
		{"stacked: the last root counts", root("upperdir=/first/fs") + "99 72 0:50 / / rw - overlay overlay rw,lowerdir=/l,upperdir=/second/fs,workdir=/w\n", "/second/fs", true},
		{"stacked: a later root that is no overlay", root("upperdir=/first/fs") + "99 72 254:1 / / rw - ext4 /dev/vda rw\n", "", false},
		{"an overlay elsewhere", "72 48 0:38 / /mnt rw - overlay overlay rw,upperdir=/x/fs\n", "", false},
		{"read-only overlay without upperdir", root("workdir=/w"), "", false},
		{"empty upperdir", root("upperdir=,workdir=/w"), "", false},
		{"no separator", "72 48 0:38 / / rw upperdir=/x\n", "", false},
		{"stacked: a later root line without a separator is skipped", root("upperdir=/first/fs") + "99 72 0:50 / / rw overlay overlay rw,upperdir=/x\n", "/first/fs", true},
		{"an escape that ends it", root(`upperdir=/a\040`), "/a ", true},
		{"truncated after the separator", "72 48 0:38 / / rw - overlay\n", "", false},
		{"empty", "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := RootUpperdir(tc.mountinfo)
			if got != tc.want || ok != tc.ok {
				t.Errorf("RootUpperdir() = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestUpperdir(t *testing.T) {
	cases := []struct {
		options []string
		want    string
		ok      bool
	}{
		{[]string{"workdir=/w", "upperdir=/u/fs", "lowerdir=/l", "index=off"}, "/u/fs", true},
		{[]string{"lowerdir=/l"}, "", false},
		{[]string{"upperdir="}, "", false},
		{nil, "", false},
	}
	for _, tc := range cases {
		got, ok := Upperdir(tc.options)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Upperdir(%q) = %q, %v; want %q, %v", tc.options, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzContainerd(f *testing.F) {
	for _, name := range recordedCases {
		p := readProc(f, name)
		f.Add(p.Cgroup, p.Mountinfo)
	}
	f.Add(fill("1:pids:/docker/{outer}/tinkerbell/{own}\n0::/\n"), `1 2 0:3 / / rw - overlay overlay upperdir=/a\054b`)
	f.Fuzz(func(t *testing.T, cgroup, mountinfo string) {
		if ns, id, ok := ContainerdCgroup(cgroup); ok {
			if !isFullID(id) || !isNamespace(ns) || !strings.Contains(cgroup, ns+"/"+id) {
				t.Fatalf("ContainerdCgroup() = %q, %q: not a namespace and ID of the input", ns, id)
			}
		} else if ns != "" || id != "" {
			t.Fatalf("ContainerdCgroup() = %q, %q, false", ns, id)
		}
		if upper, ok := RootUpperdir(mountinfo); ok != (upper != "") || ok && !strings.Contains(mountinfo, "upperdir=") {
			t.Fatalf("RootUpperdir() = %q, %v", upper, ok)
		}
	})
}

// TestIsNamespace: containerd's rule for a namespace name: runs of ASCII
// letters and digits joined by one '.', '_' or '-', at most 76 bytes.
func TestIsNamespace(t *testing.T) {
	cases := []struct {
		s    string
		want bool
	}{
		{"tinkerbell", true},
		{"k8s.io", true},
		{"azAZ09", true},
		{"a.b_c-d", true},
		{"Z", true},
		{"9", true},
		{strings.Repeat("n", 76), true},
		{strings.Repeat("n", 77), false},
		{"", false},
		{"a..b", false},
		{"a.-b", false},
		{".a", false},
		{"a-", false},
		{"a/b", false},
		{"a b", false},
		{"é", false},
		// the bytes beside each range: '`' '{' '@' '[' '/' ':'
		{"`", false}, {"{", false}, {"@", false}, {"[", false}, {"/", false}, {":", false},
		{"a`", false}, {"a{", false}, {"a@", false}, {"a[", false}, {"a/", false}, {"a:", false},
	}
	for _, tc := range cases {
		if got := isNamespace(tc.s); got != tc.want {
			t.Errorf("isNamespace(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

// TestContainerIn: the waiter's own ID, a name, from its cgroup paths
// under its namespace.
func TestContainerIn(t *testing.T) {
	id := "tinkerbell_x_01J-waitdaemon-waiter-0000000a"
	cases := []struct{ cgroup, want string }{
		{"12:pids:/tinkerbell/" + id + "\n1:name=systemd:/tinkerbell/" + id + "\n0::/tinkerbell/" + id + "\n", id},
		{"0::/tinkerbell/" + id, id},
		{"0::/other/" + id, ""},
		{"0::/\n", ""},
		{"12:pids:/tinkerbell/a\n0::/tinkerbell/b\n", ""},
	}
	for _, tc := range cases {
		if got := ContainerIn(tc.cgroup, "tinkerbell"); got != tc.want {
			t.Errorf("ContainerIn(%q) = %q, want %q", tc.cgroup, got, tc.want)
		}
	}
}
