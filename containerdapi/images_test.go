package containerdapi_test

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"google.golang.org/protobuf/encoding/protowire"
)

func TestChainID(t *testing.T) {
	// The expected values are sha256sum's, of the strings the formula
	// names (`printf 'sha256:aaaa sha256:bbbb' | sha256sum`).
	cases := []struct {
		name    string
		diffIDs []string
		want    string
		wantErr bool
	}{
		{name: "one layer", diffIDs: []string{"sha256:aaaa"}, want: "sha256:aaaa"},
		{name: "two", diffIDs: []string{"sha256:aaaa", "sha256:bbbb"}, want: "sha256:2c4d8760379f05d0ad1ed610712309f0114e7345e6e6a351494cff030ffdf197"},
		{name: "three", diffIDs: []string{"sha256:aaaa", "sha256:bbbb", "sha256:cccc"}, want: "sha256:10f847b3ece58353f298bec20c58125235b631360ad43ac162131980750211ff"},
		{name: "none", wantErr: true},
		{name: "not sha256", diffIDs: []string{"sha256:aaaa", "md5:bbbb"}, wantErr: true},
	}
	for _, tc := range cases {
		got, err := containerdapi.ChainID(tc.diffIDs)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: ChainID(%q) = %q, %v; want %q (error %v)", tc.name, tc.diffIDs, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestPickManifest(t *testing.T) {
	d := func(digest, os, arch, variant string) containerdapi.Descriptor {
		return containerdapi.Descriptor{Digest: digest, Platform: &containerdapi.Platform{OS: os, Architecture: arch, Variant: variant}}
	}
	index := []containerdapi.Descriptor{
		{Digest: "sha256:attestation"}, // no platform: skipped
		d("sha256:win", "windows", "amd64", ""),
		d("sha256:amd64", "linux", "amd64", ""),
		d("sha256:armv6", "linux", "arm", "v6"),
		d("sha256:armv7", "linux", "arm", "v7"),
		d("sha256:arm64", "linux", "arm64", "v8"),
	}
	cases := []struct {
		platform containerdapi.Platform
		want     string // "" for ErrNoPlatform
	}{
		{containerdapi.Platform{OS: "linux", Architecture: "amd64"}, "sha256:amd64"},
		{containerdapi.Platform{OS: "linux", Architecture: "arm64"}, "sha256:arm64"},
		{containerdapi.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}, "sha256:armv7"},
		{containerdapi.Platform{OS: "linux", Architecture: "arm"}, "sha256:armv6"},
		{containerdapi.Platform{OS: "linux", Architecture: "riscv64"}, ""},
	}
	for _, tc := range cases {
		got, err := containerdapi.PickManifest(index, tc.platform)
		if got.Digest != tc.want || tc.want == "" && !errors.Is(err, containerdapi.ErrNoPlatform) {
			t.Errorf("PickManifest(%s) = %s, %v; want %q", tc.platform, got.Digest, err, tc.want)
		}
	}
}

func TestIsQualified(t *testing.T) {
	cases := []struct {
		ref  string
		want bool
	}{
		{"docker.io/library/alpine:3.20", true},
		{"127.0.0.1:5000/rr/good:1", true},
		{"localhost/x:1", true},
		{"alpine:3.20", false},
		{"library/alpine", false},
	}
	for _, tc := range cases {
		if got := containerdapi.IsQualified(tc.ref); got != tc.want {
			t.Errorf("IsQualified(%q) = %v, want %v", tc.ref, got, tc.want)
		}
	}
}

func TestStaticAuth(t *testing.T) {
	auth := containerdapi.StaticAuth("registry.example:5000", "u", "p")
	cases := []struct {
		host           string
		wantUser, want string
		wantOK         bool
	}{
		{"registry.example:5000", "u", "p", true},
		{"registry.example", "", "", false},
		{"mirror.example:5000", "", "", false},
	}
	for _, tc := range cases {
		user, secret, ok := auth(tc.host, tc.host+"/x:1")
		if user != tc.wantUser || secret != tc.want || ok != tc.wantOK {
			t.Errorf("StaticAuth(registry.example:5000)(%q) = %q, %q, %v; want %q, %q, %v", tc.host, user, secret, ok, tc.wantUser, tc.want, tc.wantOK)
		}
	}
}

func TestErrorIs(t *testing.T) {
	sentinels := []error{containerdapi.ErrNotFound, containerdapi.ErrAlreadyExists, containerdapi.ErrFailedPrecondition, containerdapi.ErrUnimplemented, containerdapi.ErrUnavailable}
	cases := []struct {
		code containerdapi.Code
		want error // the one sentinel it is; nil for none
	}{
		{containerdapi.NotFound, containerdapi.ErrNotFound},
		{containerdapi.AlreadyExists, containerdapi.ErrAlreadyExists},
		{containerdapi.FailedPrecondition, containerdapi.ErrFailedPrecondition},
		{containerdapi.Unimplemented, containerdapi.ErrUnimplemented},
		{containerdapi.Unavailable, containerdapi.ErrUnavailable},
		{containerdapi.Unknown, nil},
		{containerdapi.Internal, nil},
	}
	for _, tc := range cases {
		e := &containerdapi.Error{Code: tc.code, Method: "containerd.services.tasks.v1.Tasks/Start", Message: "m"}
		for _, s := range sentinels {
			if got := errors.Is(e, s); got != (s == tc.want) {
				t.Errorf("errors.Is(%v, %v) = %v", e, s, got)
			}
		}
	}
	e := &containerdapi.Error{Code: containerdapi.NotFound, Method: "containerd.services.tasks.v1.Tasks/Start", Message: `container "web": not found`}
	if got, want := e.Error(), `containerd.services.tasks.v1.Tasks/Start: NotFound: container "web": not found`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := containerdapi.Code(42).String(); got != "Code(42)" {
		t.Errorf("Code(42).String() = %q", got)
	}
}

// TestPlatformString: os/architecture, and /variant when there is one.
func TestPlatformString(t *testing.T) {
	for p, want := range map[containerdapi.Platform]string{
		{OS: "linux", Architecture: "amd64"}:                "linux/amd64",
		{OS: "linux", Architecture: "arm", Variant: "v7"}:   "linux/arm/v7",
		{OS: "linux", Architecture: "arm64", Variant: "v8"}: "linux/arm64/v8",
	} {
		if got := p.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", p, got, want)
		}
	}
}

// TestReadManifestIndex: an index is read for the platform's manifest;
// one that does not decode, or has none for the platform, is an error
// that names it; a media type neither index nor manifest is refused.
func TestReadManifestIndex(t *testing.T) {
	blobs := map[string]string{
		"sha256:index":  `{"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:arm","platform":{"os":"linux","architecture":"arm64"}}]}`,
		"sha256:broken": `{"manifests":`,
		"sha256:arm":    `{"config":{"digest":"sha256:config"},"layers":[{"digest":"sha256:l1"}]}`,
	}
	c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		req := readRequest(t, r)
		for digest, blob := range blobs {
			if bytes.Contains(req, []byte(digest)) { // no digest here is part of another
				answer(w, str(2, blob))
				return
			}
		}
		fail(w, containerdapi.NotFound, "content not found")
	})
	index := func(digest string) containerdapi.Descriptor {
		return containerdapi.Descriptor{MediaType: containerdapi.MediaTypeOCIIndex, Digest: digest}
	}
	arm64 := containerdapi.Platform{OS: "linux", Architecture: "arm64"}
	m, err := c.ReadManifest(shortCtx(t), index("sha256:index"), arm64)
	if err != nil || m.Config.Digest != "sha256:config" || len(m.Layers) != 1 {
		t.Errorf("ReadManifest() = %+v, %v; want the arm64 manifest", m, err)
	}
	cases := []struct {
		target   containerdapi.Descriptor
		platform containerdapi.Platform
		want     string
	}{
		{index("sha256:broken"), arm64, "decoding index sha256:broken: "},
		{index("sha256:index"), containerdapi.Platform{OS: "linux", Architecture: "riscv64"}, "index sha256:index: "},
		{containerdapi.Descriptor{MediaType: "text/plain", Digest: "sha256:arm"}, arm64, `manifest sha256:arm: unsupported media type "text/plain"`},
	}
	for _, tc := range cases {
		if _, err := c.ReadManifest(shortCtx(t), tc.target, tc.platform); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ReadManifest(%s, %s) = %v, want %q…", tc.target.Digest, tc.platform, err, tc.want)
		}
	}
}

// TestContentReadBound: a blob of MaxBlob bytes, sent in chunks, is read
// whole; one byte more is refused.
func TestContentReadBound(t *testing.T) {
	const chunk = 1 << 20
	for _, size := range []int{containerdapi.MaxBlob, containerdapi.MaxBlob + 1} {
		c := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
			readRequest(t, r)
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			for off := 0; off < size; off += chunk {
				data := bytes.Repeat([]byte{'x'}, min(chunk, size-off))
				writeFrame(w, cat(varint(1, uint64(off)), protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), data)))
			}
			w.Header().Set("Grpc-Status", "0")
		})
		data, err := c.ContentRead(shortCtx(t), "sha256:big")
		switch {
		case size <= containerdapi.MaxBlob && (err != nil || len(data) != size):
			t.Errorf("ContentRead() of %d bytes = %d bytes, %v; want them all", size, len(data), err)
		case size > containerdapi.MaxBlob && (err == nil || !strings.Contains(err.Error(), "larger than")):
			t.Errorf("ContentRead() of %d bytes = %d bytes, %v; want it refused", size, len(data), err)
		}
	}
}
