package ocispec

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/waitdaemon/waitdaemon/testkit/linediff"
)

// sameJSON reports how a and b differ as JSON values (key order and
// spacing aside), or "".
func sameJSON(t *testing.T, a, b []byte) string {
	t.Helper()
	var av, bv any
	if err := json.Unmarshal(a, &av); err != nil {
		t.Fatalf("%v in %s", err, a)
	}
	if err := json.Unmarshal(b, &bv); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	if reflect.DeepEqual(av, bv) {
		return ""
	}
	ai, _ := json.MarshalIndent(av, "", "  ")
	bi, _ := json.MarshalIndent(bv, "", "  ")
	return linediff.Text(string(ai), string(bi))
}

// TestSpecRoundTrip decodes and encodes each recorded spec: nothing
// containerd stored is lost.
func TestSpecRoundTrip(t *testing.T) {
	for _, name := range caseNames(t) {
		t.Run(name, func(t *testing.T) {
			value := readCase(t, name).Container.Spec.Value
			var s Spec
			if err := json.Unmarshal(value, &s); err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if d := sameJSON(t, value, got); d != "" {
				t.Errorf("spec changed through Spec (-recorded +encoded):\n%s", d)
			}
		})
	}
}

// TestSpecRest keeps members of every level that the types do not
// declare, and drops none that they do.
func TestSpecRest(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{
			name: "unknown members at every level",
			in: `{"ociVersion":"1.3.0","annotations":{"a":"b"},"hooks":{"prestart":[{"path":"/x"}]},"domainname":"d",
				"process":{"terminal":true,"user":{"uid":1,"gid":2,"umask":18,"username":"u"},"args":["a"],"cwd":"/","consoleSize":{"height":1,"width":2}},
				"root":{"path":"/abs","readonly":true,"future":1},
				"mounts":[{"destination":"/m","type":"bind","source":"/s","options":["rbind"],"uidMappings":[{"containerID":0,"hostID":1000,"size":1}]}],
				"linux":{"namespaces":[{"type":"network","path":"/p","x":1}],"cgroupsPath":"/a/b","sysctl":{"net.ipv4.ip_forward":"1"},"seccomp":null}}`,
			want: `{"ociVersion":"1.3.0","annotations":{"a":"b"},"hooks":{"prestart":[{"path":"/x"}]},"domainname":"d",
				"process":{"terminal":true,"user":{"uid":1,"gid":2,"umask":18,"username":"u"},"args":["a"],"cwd":"/","consoleSize":{"height":1,"width":2}},
				"root":{"path":"/abs","readonly":true,"future":1},
				"mounts":[{"destination":"/m","type":"bind","source":"/s","options":["rbind"],"uidMappings":[{"containerID":0,"hostID":1000,"size":1}]}],
				"linux":{"namespaces":[{"type":"network","path":"/p","x":1}],"cgroupsPath":"/a/b","sysctl":{"net.ipv4.ip_forward":"1"},"seccomp":null}}`,
		},
		{
			// encoding/json takes a member whose name differs in case for
			// the declared one; it is not kept a second time.
			name: "case-insensitive names",
			in:   `{"OCIVERSION":"1.0.0","Process":{"Args":["a"],"user":{"UID":3}},"MOUNTS":[{"Destination":"/x"}]}`,
			want: `{"ociVersion":"1.0.0","process":{"args":["a"],"user":{"uid":3,"gid":0},"cwd":""},"mounts":[{"destination":"/x"}]}`,
		},
		{
			name: "a section of unknown members alone, and one after a known member",
			in:   `{"linux":{"resources":{"cpu":{}},"devices":[]},"root":{"path":"/r","future":1}}`,
			want: `{"ociVersion":"","linux":{"devices":[],"resources":{"cpu":{}}},"root":{"path":"/r","future":1}}`,
		},
		{
			name: "empty",
			in:   `{}`,
			want: `{"ociVersion":""}`,
		},
		{
			name: "nulls",
			in:   `{"process":null,"linux":null,"root":null,"mounts":null,"annotations":null}`,
			want: `{"ociVersion":"","annotations":null}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s Spec
			if err := json.Unmarshal([]byte(tc.in), &s); err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if d := sameJSON(t, []byte(tc.want), got); d != "" {
				t.Errorf("encoded spec differs (-want +got):\n%s", d)
			}
		})
	}
}

// TestSpecRestOrder puts the declared members first, then the others by
// name, and never a declared name twice.
func TestSpecRestOrder(t *testing.T) {
	s := Spec{
		OCIVersion: "1.3.0",
		Hostname:   "h",
		Rest: Rest{
			"zeta":     json.RawMessage(`1`),
			"alpha":    json.RawMessage(`{"b": 2}`),
			"hostname": json.RawMessage(`"shadow"`),
			"empty":    nil,
		},
	}
	got, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ociVersion":"1.3.0","hostname":"h","alpha":{"b":2},"empty":null,"zeta":1}`
	if string(got) != want {
		t.Errorf("encoded spec differs (-want +got):\n%s", linediff.Text(want, string(got)))
	}
	got, err = json.Marshal(Mount{Rest: Rest{"x": json.RawMessage(`true`)}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"destination":"","x":true}`; string(got) != want {
		t.Errorf("encoded mount = %s, want %s", got, want)
	}
}

func TestSpecBadJSON(t *testing.T) {
	for _, in := range []string{`[]`, `{"process":[]}`, `{"linux":{"namespaces":{}}}`, `{"mounts":[1]}`, `{"process":{"user":{"uid":-1}}}`, `{`} {
		var s Spec
		if err := json.Unmarshal([]byte(in), &s); err == nil {
			t.Errorf("Unmarshal(%s) = nil error, want one", in)
		}
	}
}

// TestImage reads the recorded image configs.
func TestImage(t *testing.T) {
	r := readCase(t, "kexec")
	is(t, "action image", r.Image.Config, waitdaemonImage)
	is(t, "user image", r.UserImage.Config, ImageConfig{
		Env:        []string{"PATH=/usr/bin:/bin", "BLOCK_DEVICE=/dev/vda", "KEXEC_OPTS=-l"},
		Entrypoint: []string{"/bin/sh", "-c"},
		Cmd:        []string{"echo kexec"},
		WorkingDir: "/work",
	})
}
