// Package imageref parses image references the way Docker and containerd
// read them, [domain[:port]/]path[:tag][@digest], and names their parts:
// the registry to pull from (and so whose credentials apply), the name and
// the tag or digest, and the fully qualified form containerd wants.
package imageref

import (
	"fmt"
	"strings"
)

// Ref is a parsed image reference:
// [domain[:port]/]path[:tag][@algorithm:hex].
type Ref struct {
	Domain string // empty for Docker Hub short names
	Path   string // "library/alpine", "alpine", "org/tool"
	Tag    string
	Digest string
}

// DockerHub is the registry host implied by a reference with no domain.
const DockerHub = "docker.io"

// Parse parses an image reference the way the engines do.
func Parse(s string) (Ref, error) {
	bad := func(why string) (Ref, error) {
		return Ref{}, fmt.Errorf("image reference %q: %s; expected NAME[:TAG][@DIGEST], like alpine:3.20 or registry.example:5000/tools/reboot:v1", s, why)
	}
	if s == "" {
		return bad("it is empty")
	}
	var r Ref
	rest := s
	if name, digest, ok := strings.Cut(rest, "@"); ok {
		if !validDigest(digest) {
			return bad("the digest is not algorithm:hex")
		}
		r.Digest, rest = digest, name
	}
	// A tag follows the last colon, unless that colon is a port in the
	// domain (then a slash follows it).
	if i := strings.LastIndexByte(rest, ':'); i >= 0 && !strings.Contains(rest[i:], "/") {
		tag := rest[i+1:]
		if !validTag(tag) {
			return bad("the tag must be 1-128 of [A-Za-z0-9_.-], not starting with . or -")
		}
		r.Tag, rest = tag, rest[:i]
	}
	if first, path, ok := strings.Cut(rest, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost" || strings.ToLower(first) != first) {
		if !validDomain(first) {
			return bad("the registry host is not HOST[:PORT]")
		}
		r.Domain, rest = first, path
	}
	if len(rest)+len(r.Domain)+min(len(r.Domain), 1) > 255 {
		return bad("the name is longer than 255 characters")
	}
	for _, comp := range strings.Split(rest, "/") {
		if !validComponent(comp) {
			return bad(fmt.Sprintf("the name part %q must be lowercase letters and digits, separated by '.', '_', '__' or '-'", comp))
		}
	}
	r.Path = rest
	return r, nil
}

// Name is the reference without tag or digest, as written.
func (r Ref) Name() string {
	if r.Domain == "" {
		return r.Path
	}
	return r.Domain + "/" + r.Path
}

// Registry is the registry host the image comes from.
func (r Ref) Registry() string {
	if r.Domain == "" || r.Domain == "index.docker.io" {
		return DockerHub
	}
	return r.Domain
}

// TagOrDigest is what a pull must ask for: the digest, else the tag, else
// "latest". A pull without one would fetch every tag.
func (r Ref) TagOrDigest() string {
	switch {
	case r.Digest != "":
		return r.Digest
	case r.Tag != "":
		return r.Tag
	}
	return "latest"
}

// String is the reference with an explicit tag or digest.
func (r Ref) String() string {
	s := r.Name()
	if r.Tag != "" || r.Digest == "" {
		s += ":" + r.tagOrLatest()
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// Qualified is the reference in full, as containerd stores images:
// docker.io/library/alpine:3.20 for alpine:3.20.
func (r Ref) Qualified() string {
	path := r.Path
	if r.Registry() == DockerHub && !strings.Contains(path, "/") {
		path = "library/" + path
	}
	s := r.Registry() + "/" + path
	if r.Tag != "" || r.Digest == "" {
		s += ":" + r.tagOrLatest()
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

func (r Ref) tagOrLatest() string {
	if r.Tag == "" {
		return "latest"
	}
	return r.Tag
}

func validTag(t string) bool {
	if t == "" || len(t) > 128 || t[0] == '.' || t[0] == '-' {
		return false
	}
	for _, c := range t {
		if !isAlnum(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

// validDigest accepts the digests the engine can verify: sha256, sha384
// and sha512, in lowercase hex of their full length.
func validDigest(d string) bool {
	alg, hex, _ := strings.Cut(d, ":")
	if want := map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}[alg]; want == 0 || len(hex) != want {
		return false
	}
	for _, c := range hex {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func validDomain(d string) bool {
	host, port, hasPort := strings.Cut(d, ":")
	if hasPort {
		if port == "" || len(port) > 5 {
			return false
		}
		for _, c := range port {
			if c < '0' || c > '9' {
				return false
			}
		}
	}
	if host == "" {
		return false
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !isAlnum(c) && c != '-' {
				return false
			}
		}
	}
	return true
}

// validComponent checks one path component: lowercase alphanumerics
// joined by single separators ".", "_", "__", or runs of "-".
func validComponent(s string) bool {
	if s == "" || !isLowerAlnum(rune(s[0])) || !isLowerAlnum(rune(s[len(s)-1])) {
		return false
	}
	for i := 0; i < len(s); {
		if isLowerAlnum(rune(s[i])) {
			i++
			continue
		}
		j := i
		for j < len(s) && !isLowerAlnum(rune(s[j])) {
			j++
		}
		if sep := s[i:j]; sep != "." && sep != "_" && sep != "__" && strings.Trim(sep, "-") != "" {
			return false
		}
		i = j
	}
	return true
}

func isLowerAlnum(c rune) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
func isAlnum(c rune) bool      { return isLowerAlnum(c) || 'A' <= c && c <= 'Z' }
