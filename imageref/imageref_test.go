package imageref_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/imageref"
)

const testDigest = "sha256:7cc4b5aefd1d0cadf8d97d4350462ba51c694ebca145b08d7d41b41acc8db5aa"

func TestParse(t *testing.T) {
	tag128 := "v" + strings.Repeat("1", 127)
	cases := []struct {
		in   string
		want imageref.Ref
		// What the methods return.
		name, registry, tagOrDigest, str string
	}{
		{"alpine", imageref.Ref{Path: "alpine"}, "alpine", "docker.io", "latest", "alpine:latest"},
		{"alpine:3.20", imageref.Ref{Path: "alpine", Tag: "3.20"}, "alpine", "docker.io", "3.20", "alpine:3.20"},
		{"library/alpine", imageref.Ref{Path: "library/alpine"}, "library/alpine", "docker.io", "latest", "library/alpine:latest"},
		{"docker.io/library/alpine:3.20", imageref.Ref{Domain: "docker.io", Path: "library/alpine", Tag: "3.20"}, "docker.io/library/alpine", "docker.io", "3.20", "docker.io/library/alpine:3.20"},
		{"index.docker.io/library/alpine", imageref.Ref{Domain: "index.docker.io", Path: "library/alpine"}, "index.docker.io/library/alpine", "docker.io", "latest", "index.docker.io/library/alpine:latest"},
		{"quay.io/org/img:v1", imageref.Ref{Domain: "quay.io", Path: "org/img", Tag: "v1"}, "quay.io/org/img", "quay.io", "v1", "quay.io/org/img:v1"},
		{"localhost:5000/a/b:tag", imageref.Ref{Domain: "localhost:5000", Path: "a/b", Tag: "tag"}, "localhost:5000/a/b", "localhost:5000", "tag", "localhost:5000/a/b:tag"},
		{"localhost/a", imageref.Ref{Domain: "localhost", Path: "a"}, "localhost/a", "localhost", "latest", "localhost/a:latest"},
		{"127.0.0.1:5000/rr/good:1", imageref.Ref{Domain: "127.0.0.1:5000", Path: "rr/good", Tag: "1"}, "127.0.0.1:5000/rr/good", "127.0.0.1:5000", "1", "127.0.0.1:5000/rr/good:1"},
		// A port but no tag: the colon belongs to the domain.
		{"registry.example:5000/tools/reboot", imageref.Ref{Domain: "registry.example:5000", Path: "tools/reboot"}, "registry.example:5000/tools/reboot", "registry.example:5000", "latest", "registry.example:5000/tools/reboot:latest"},
		{"img@" + testDigest, imageref.Ref{Path: "img", Digest: testDigest}, "img", "docker.io", testDigest, "img@" + testDigest},
		{"img:tag@" + testDigest, imageref.Ref{Path: "img", Tag: "tag", Digest: testDigest}, "img", "docker.io", testDigest, "img:tag@" + testDigest},
		{"quay.io/org/img:v1@" + testDigest, imageref.Ref{Domain: "quay.io", Path: "org/img", Tag: "v1", Digest: testDigest}, "quay.io/org/img", "quay.io", testDigest, "quay.io/org/img:v1@" + testDigest},
		{"my-org/my__img.v2--x_y:T_a.g-1", imageref.Ref{Path: "my-org/my__img.v2--x_y", Tag: "T_a.g-1"}, "my-org/my__img.v2--x_y", "docker.io", "T_a.g-1", "my-org/my__img.v2--x_y:T_a.g-1"},
		{"a:_x", imageref.Ref{Path: "a", Tag: "_x"}, "a", "docker.io", "_x", "a:_x"},
		{"img@sha512:" + strings.Repeat("f", 128), imageref.Ref{Path: "img", Digest: "sha512:" + strings.Repeat("f", 128)}, "img", "docker.io", "sha512:" + strings.Repeat("f", 128), "img@sha512:" + strings.Repeat("f", 128)},
		// A name of 255 characters, the most any engine takes.
		{"a.io/" + strings.Repeat("b", 250), imageref.Ref{Domain: "a.io", Path: strings.Repeat("b", 250)}, "a.io/" + strings.Repeat("b", 250), "a.io", "latest", "a.io/" + strings.Repeat("b", 250) + ":latest"},
		{"a:" + tag128, imageref.Ref{Path: "a", Tag: tag128}, "a", "docker.io", tag128, "a:" + tag128},
		// As in the engine (distribution/reference splitDockerDomain), a
		// first component with uppercase letters is a registry host, not
		// a path component; the engine then fails to reach host UPPER.
		{"UPPER/case", imageref.Ref{Domain: "UPPER", Path: "case"}, "UPPER/case", "UPPER", "latest", "UPPER/case:latest"},
		// Each end of the ranges of characters allowed, and a port of 5 digits.
		{"az09/z9a0:AZaz09", imageref.Ref{Path: "az09/z9a0", Tag: "AZaz09"}, "az09/z9a0", "docker.io", "AZaz09", "az09/z9a0:AZaz09"},
		{"Reg-9Z.A0-z:65535/zz", imageref.Ref{Domain: "Reg-9Z.A0-z:65535", Path: "zz"}, "Reg-9Z.A0-z:65535/zz", "Reg-9Z.A0-z:65535", "latest", "Reg-9Z.A0-z:65535/zz:latest"},
		{"r.io:90/a", imageref.Ref{Domain: "r.io:90", Path: "a"}, "r.io:90/a", "r.io:90", "latest", "r.io:90/a:latest"},
	}
	for _, tc := range cases {
		t.Run(label(tc.in), func(t *testing.T) {
			got, err := imageref.Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse(%s) error = %v", short(tc.in), err)
			}
			if got != tc.want {
				t.Errorf("Parse(%q) (-want +got):\n-%+v\n+%+v", tc.in, tc.want, got)
			}
			if q, err := imageref.Parse(got.Qualified()); err != nil || q.Registry() != got.Registry() || q.TagOrDigest() != got.TagOrDigest() || q.Qualified() != got.Qualified() {
				t.Errorf("Qualified() = %q does not read back as the same image: %+v, %v", got.Qualified(), q, err)
			}
			methods := [4]string{got.Name(), got.Registry(), got.TagOrDigest(), got.String()}
			want := [4]string{tc.name, tc.registry, tc.tagOrDigest, tc.str}
			if methods != want {
				t.Errorf("Name, Registry, TagOrDigest, String (-want +got):\n-%q\n+%q", want, methods)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		in   string
		why  string // a substring of the error
	}{
		{"empty", "", "it is empty"},
		{"uppercase name", "Upper", `the name part "Upper"`},
		{"uppercase path", "library/Alpine", `the name part "Alpine"`},
		{"uppercase path after a domain", "quay.io/Org/img", `the name part "Org"`},
		{"double colon", "a::b", `the name part "a:"`},
		{"empty tag", "a:", "the tag"},
		{"leading dash", "-bad", `the name part "-bad"`},
		{"trailing separator", "bad-", `the name part "bad-"`},
		{"empty component", "a//b", `the name part ""`},
		{"leading slash", "/a", `the name part ""`},
		{"trailing slash", "a/", `the name part ""`},
		{"three underscores", "a___b", `the name part "a___b"`},
		{"mixed separator", "a_-b", `the name part "a_-b"`},
		{"space", "a b", `the name part "a b"`},
		{"tag with a leading dash", "a/b:-tag", "the tag"},
		{"tag with a leading dot", "a:.tag", "the tag"},
		{"tag of 129 characters", "a:" + strings.Repeat("t", 129), "the tag"},
		{"digest not hex", "img@sha256:xyz", "the digest"},
		{"digest uppercase hex", "img@sha256:" + strings.Repeat("F", 64), "the digest"},
		{"empty digest", "img@", "the digest"},
		{"digest without name", "@" + testDigest, `the name part ""`},
		// The engine checks a digest's length against its algorithm
		// (go-digest's Validate): a sha256 has 64 hex digits.
		{"sha256 digest too short", "img@sha256:" + strings.Repeat("f", 34), "the digest"},
		{"sha256 digest too long", "img@sha256:" + strings.Repeat("f", 65), "the digest"},
		{"port not numeric", "localhost:abc/x", "the registry host"},
		{"host label with a leading dash", "-host.io/a", "the registry host"},
		{"empty port", "host.io:/a", "the registry host"},
		{"path of 256 characters", strings.Repeat("a", 256), "longer than 255"},
		{"a domain and path of 256 characters", "a.io/" + strings.Repeat("b", 251), "longer than 255"},
		{"a tag without a name", ":3.20", `the name part ""`},
		{"a port of 6 digits", "host.io:500000/a", "the registry host"},
		{"a port with a character after '9'", "host.io:50:0/a", "the registry host"},
		{"an underscore in the host", "my_reg.io/a", "the registry host"},
		{"a character before 'a' in a name", "a`b", "the name part"},
		{"a character after 'z' in a name", "a{b", "the name part"},
		{"a character after '9' in a host", "reg:9.io/a", "the registry host"},
		{"a character before 'A' in a tag", "a:x@y", "the digest"},
		{"a character after 'Z' in a tag", "a:x[", "the tag"},
		// The engine knows only these algorithms (go-digest's Available).
		{"unsupported digest algorithm", "img@md5:" + strings.Repeat("f", 32), "the digest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := imageref.Parse(tc.in)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want an error", tc.in, got)
			}
			if got != (imageref.Ref{}) {
				t.Errorf("Parse(%q) = %+v on error, want the zero Reference", tc.in, got)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.why) || !strings.Contains(msg, "expected NAME[:TAG][@DIGEST]") {
				t.Errorf("Parse(%q) error = %q, want it to contain %q and the expected form", tc.in, msg, tc.why)
			}
		})
	}
}

// FuzzParseReference checks that ParseReference never panics, and that
// what it accepts prints (String) as a reference it accepts again, for the
// same image.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"alpine", "alpine:3.20", "localhost:5000/a/b:tag", "img:tag@" + testDigest, "UPPER/case", "a::b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := imageref.Parse(s)
		if err != nil {
			return
		}
		printed := r.String()
		r2, err := imageref.Parse(printed)
		if err != nil {
			t.Fatalf("Parse(%s) succeeds, but not on its String() %s: %v", short(s), short(printed), err)
		}
		if r2.Name() != r.Name() || r2.TagOrDigest() != r.TagOrDigest() {
			t.Errorf("Parse(%s) names %s %s, but its String() %s names %s %s", short(s), short(r.Name()), r.TagOrDigest(), short(printed), short(r2.Name()), r2.TagOrDigest())
		}
		if r2.String() != printed {
			t.Errorf("String() is not stable: %s, then %s", short(printed), short(r2.String()))
		}
	})
}

// short quotes s, shortened in the middle when it is long.
func short(s string) string {
	if len(s) <= 80 {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q...%q (%d bytes)", s[:40], s[len(s)-30:], len(s))
}

// label names a subtest after s, shortened when it is long.
func label(s string) string {
	if len(s) <= 60 {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:20], len(s))
}

func TestQualified(t *testing.T) {
	cases := []struct{ in, want string }{
		{"alpine", "docker.io/library/alpine:latest"},
		{"alpine:3.20", "docker.io/library/alpine:3.20"},
		{"org/tool:v1", "docker.io/org/tool:v1"},
		{"index.docker.io/alpine:1", "docker.io/library/alpine:1"},
		{"docker.io/library/alpine:3.20", "docker.io/library/alpine:3.20"},
		{"127.0.0.1:5000/rr/good:1", "127.0.0.1:5000/rr/good:1"},
		{"localhost/a", "localhost/a:latest"},
		{"img@" + testDigest, "docker.io/library/img@" + testDigest},
		{"quay.io/org/img:v1@" + testDigest, "quay.io/org/img:v1@" + testDigest},
	}
	for _, tc := range cases {
		r, err := imageref.Parse(tc.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.in, err)
		}
		if got := r.Qualified(); got != tc.want {
			t.Errorf("Parse(%q).Qualified() = %q, want %q", tc.in, got, tc.want)
		}
	}
}
