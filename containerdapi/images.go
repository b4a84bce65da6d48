package containerdapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

// Image is containerd.services.images.v1.Image: a name and the content
// it points at.
type Image struct {
	Name      string            // 1
	Labels    map[string]string // 2
	Target    Descriptor        // 3
	CreatedAt time.Time         // 7
	UpdatedAt time.Time         // 8
}

func (m *Image) fields() []field {
	return []field{
		{1, "name", (*stringValue)(&m.Name)},
		{2, "labels", (*mapValue)(&m.Labels)},
		{3, "target", msgValue{&m.Target}},
		{7, "created_at", (*timeValue)(&m.CreatedAt)},
		{8, "updated_at", (*timeValue)(&m.UpdatedAt)},
	}
}

// Descriptor is containerd.types.Descriptor, an OCI descriptor. Its JSON
// form is the OCI one, as manifests and indexes hold it.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`             // 1
	Digest      string            `json:"digest"`                // 2
	Size        int64             `json:"size"`                  // 3
	Annotations map[string]string `json:"annotations,omitempty"` // 5
	Platform    *Platform         `json:"platform,omitempty"`    // (JSON only: an index's entries)
}

func (m *Descriptor) fields() []field {
	return []field{
		{1, "media_type", (*stringValue)(&m.MediaType)},
		{2, "digest", (*stringValue)(&m.Digest)},
		{3, "size", uintValue[int64]{&m.Size}},
		{5, "annotations", (*mapValue)(&m.Annotations)},
	}
}

// Platform is containerd.types.Platform, and an OCI platform in JSON.
type Platform struct {
	OS           string `json:"os"`                // 1
	Architecture string `json:"architecture"`      // 2
	Variant      string `json:"variant,omitempty"` // 3
}

func (m *Platform) fields() []field {
	return []field{
		{1, "os", (*stringValue)(&m.OS)},
		{2, "architecture", (*stringValue)(&m.Architecture)},
		{3, "variant", (*stringValue)(&m.Variant)},
	}
}

// platformList is a repeated Platform (see msgList).
type platformList []Platform

func (l *platformList) len() int         { return len(*l) }
func (l *platformList) at(i int) message { return &(*l)[i] }
func (l *platformList) add() message     { *l = append(*l, Platform{}); return &(*l)[len(*l)-1] }

// DefaultPlatform is linux on the architecture waitdaemon was built for.
func DefaultPlatform() Platform {
	return Platform{OS: "linux", Architecture: runtime.GOARCH}
}

func (p Platform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

type (
	imageName struct {
		Name string // 1
	}
	imageMsg struct {
		Image Image // 1
	}
	readContentRequest struct {
		Digest string // 1
		Offset int64  // 2
		Size   int64  // 3
	}
	readContentResponse struct {
		Offset int64  // 1
		Data   []byte // 2
	}
)

func (m *imageName) fields() []field { return []field{{1, "name", (*stringValue)(&m.Name)}} }
func (m *imageMsg) fields() []field  { return []field{{1, "image", msgValue{&m.Image}}} }
func (m *readContentRequest) fields() []field {
	return []field{
		{1, "digest", (*stringValue)(&m.Digest)},
		{2, "offset", uintValue[int64]{&m.Offset}},
		{3, "size", uintValue[int64]{&m.Size}},
	}
}
func (m *readContentResponse) fields() []field {
	return []field{{1, "offset", uintValue[int64]{&m.Offset}}, {2, "data", (*bytesValue)(&m.Data)}}
}

func (m *readContentResponse) piece() []byte { return m.Data }

var (
	imagesGet   = newRPC("containerd.services.images.v1.Images/Get", &imageName{}, &imageMsg{}, true)
	contentRead = newRPC("containerd.services.content.v1.Content/Read", &readContentRequest{}, &readContentResponse{}, true)
)

// ImageGet returns the image named name, a fully qualified reference
// such as docker.io/library/alpine:3.20.
func (c *Client) ImageGet(ctx context.Context, name string) (Image, error) {
	var out imageMsg
	if err := c.call(ctx, imagesGet, &imageName{Name: name}, &out, callOptions{}); err != nil {
		return Image{}, fmt.Errorf("getting image %q: %w", name, err)
	}
	return out.Image, nil
}

// maxBlob bounds a manifest, an index or a config read whole.
const maxBlob = 8 << 20

// ContentRead returns the blob digest from the content store, whole. It
// is meant for manifests and configs: it refuses more than 8 MiB.
func (c *Client) ContentRead(ctx context.Context, digest string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.bounds().Request())
	defer cancel()
	s, err := c.openStream(ctx, contentRead, &readContentRequest{Digest: digest}, false)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	s.joinPieces()
	var data []byte
	for {
		var m readContentResponse
		err := s.Recv(&m)
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", digest, err)
		}
		if m.Offset != int64(len(data)) {
			return nil, fmt.Errorf("reading %s: a chunk at offset %d, expected %d", digest, m.Offset, len(data))
		}
		if len(data)+len(m.Data) > maxBlob {
			return nil, fmt.Errorf("reading %s: larger than %d bytes", digest, maxBlob)
		}
		data = append(data, m.Data...)
	}
}

// ContentReader reads the blob digest from the content store as it
// streams, with no bound on its size but the request's time: a layer.
// The trace shows how many bytes came, not the bytes. Close it.
func (c *Client) ContentReader(ctx context.Context, digest string) (io.ReadCloser, error) {
	ctx, cancel := context.WithTimeout(ctx, c.bounds().Request())
	s, err := c.openStream(ctx, contentRead, &readContentRequest{Digest: digest}, false)
	if err != nil {
		cancel()
		return nil, err
	}
	s.countPieces()
	return &blobReader{s: s, digest: digest, cancel: cancel}, nil
}

// blobReader reads a blob's pieces as they come.
type blobReader struct {
	s      *stream
	digest string
	cancel context.CancelFunc
	buf    []byte
	at     int64
	err    error
}

func (b *blobReader) Read(p []byte) (int, error) {
	for len(b.buf) == 0 && b.err == nil {
		var m readContentResponse
		err := b.s.Recv(&m)
		switch {
		case err == io.EOF:
			b.err = io.EOF
		case err != nil:
			b.err = fmt.Errorf("reading %s: %w", b.digest, err)
		case m.Offset != b.at:
			b.err = fmt.Errorf("reading %s: a chunk at offset %d, expected %d", b.digest, m.Offset, b.at)
		default:
			b.buf, b.at = m.Data, b.at+int64(len(m.Data))
		}
	}
	if len(b.buf) == 0 {
		return 0, b.err
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

func (b *blobReader) Close() error {
	b.s.Close()
	b.cancel()
	return nil
}

// Media types of manifests and indexes, OCI and Docker.
const (
	MediaTypeOCIIndex       = "application/vnd.oci.image.index.v1+json"
	MediaTypeOCIManifest    = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeDockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
	MediaTypeDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
)

// Manifest is an image manifest (OCI or Docker v2).
type Manifest struct {
	MediaType string       `json:"mediaType,omitempty"`
	Config    Descriptor   `json:"config"`
	Layers    []Descriptor `json:"layers"`
}

// index is an image index or a Docker manifest list.
type index struct {
	MediaType string       `json:"mediaType,omitempty"`
	Manifests []Descriptor `json:"manifests"`
}

// ImageConfig is the part of an image's config waitdaemon reads.
type ImageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User       string            `json:"User,omitempty"`
		Env        []string          `json:"Env,omitempty"`
		Entrypoint []string          `json:"Entrypoint,omitempty"`
		Cmd        []string          `json:"Cmd,omitempty"`
		WorkingDir string            `json:"WorkingDir,omitempty"`
		Labels     map[string]string `json:"Labels,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// ResolvedImage is an image read down to what running it needs.
type ResolvedImage struct {
	Image    Image
	Manifest Manifest // for the platform asked for
	Config   ImageConfig
	// ChainID names the snapshot of the unpacked image: the parent of a
	// container's snapshot.
	ChainID string
}

// ErrNoPlatform is an index with no manifest for the platform asked for.
var ErrNoPlatform = errors.New("no manifest for the platform")

// ImageResolve reads the image name: its manifest for platform (picked
// from an index), its config and its chain ID.
func (c *Client) ImageResolve(ctx context.Context, name string, platform Platform) (ResolvedImage, error) {
	img, err := c.ImageGet(ctx, name)
	if err != nil {
		return ResolvedImage{}, err
	}
	m, err := c.ReadManifest(ctx, img.Target, platform)
	if err != nil {
		return ResolvedImage{}, fmt.Errorf("image %q: %w", name, err)
	}
	cfg, err := c.ReadImageConfig(ctx, m)
	if err != nil {
		return ResolvedImage{}, fmt.Errorf("image %q: %w", name, err)
	}
	chain, err := ChainID(cfg.RootFS.DiffIDs)
	if err != nil {
		return ResolvedImage{}, fmt.Errorf("image %q: %w", name, err)
	}
	return ResolvedImage{Image: img, Manifest: m, Config: cfg, ChainID: chain}, nil
}

// ImageUnpacked resolves the image name for platform and checks that its
// snapshot is unpacked in snapshotter: what running it needs. An error for
// which errors.Is(err, ErrNotFound) holds means it must be pulled first
// (a pull of an image already in the store only unpacks it).
func (c *Client) ImageUnpacked(ctx context.Context, name string, platform Platform, snapshotter string) (ResolvedImage, error) {
	img, err := c.ImageResolve(ctx, name, platform)
	if err != nil {
		return ResolvedImage{}, err
	}
	if _, err := c.SnapshotStat(ctx, snapshotter, img.ChainID); err != nil {
		return ResolvedImage{}, fmt.Errorf("image %q is not unpacked: %w", name, err)
	}
	return img, nil
}

// ReadManifest reads the manifest target points at; when target is an
// index, the one for platform.
func (c *Client) ReadManifest(ctx context.Context, target Descriptor, platform Platform) (Manifest, error) {
	data, err := c.ContentRead(ctx, target.Digest)
	if err != nil {
		return Manifest{}, err
	}
	switch target.MediaType {
	case MediaTypeOCIIndex, MediaTypeDockerList:
		var idx index
		if err := json.Unmarshal(data, &idx); err != nil {
			return Manifest{}, fmt.Errorf("decoding index %s: %w", target.Digest, err)
		}
		d, err := PickManifest(idx.Manifests, platform)
		if err != nil {
			return Manifest{}, fmt.Errorf("index %s: %w", target.Digest, err)
		}
		return c.ReadManifest(ctx, d, platform)
	case MediaTypeOCIManifest, MediaTypeDockerManifest:
	default:
		return Manifest{}, fmt.Errorf("manifest %s: unsupported media type %q", target.Digest, target.MediaType)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("decoding manifest %s: %w", target.Digest, err)
	}
	return m, nil
}

// PickManifest picks the entry of an index for platform: same OS and
// architecture, and the same variant when both name one.
func PickManifest(manifests []Descriptor, platform Platform) (Descriptor, error) {
	for _, d := range manifests {
		p := d.Platform
		if p == nil || p.OS != platform.OS || p.Architecture != platform.Architecture {
			continue
		}
		if platform.Variant != "" && p.Variant != "" && p.Variant != platform.Variant {
			continue
		}
		return d, nil
	}
	return Descriptor{}, fmt.Errorf("%w %s", ErrNoPlatform, platform)
}

// ReadImageConfig reads and decodes the config m points at.
func (c *Client) ReadImageConfig(ctx context.Context, m Manifest) (ImageConfig, error) {
	data, err := c.ContentRead(ctx, m.Config.Digest)
	if err != nil {
		return ImageConfig{}, err
	}
	var cfg ImageConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return ImageConfig{}, fmt.Errorf("decoding config %s: %w", m.Config.Digest, err)
	}
	return cfg, nil
}

// ChainID is the identity of the stack of layers diffIDs, which names
// their unpacked snapshot: the first diff ID, then for each next one,
// sha256 of "previous chain ID" + " " + "diff ID".
func ChainID(diffIDs []string) (string, error) {
	if len(diffIDs) == 0 {
		return "", errors.New("the image has no layers")
	}
	chain := diffIDs[0]
	for _, d := range diffIDs[1:] {
		if !strings.HasPrefix(d, "sha256:") {
			return "", fmt.Errorf("diff ID %q: expected sha256:…", d)
		}
		sum := sha256.Sum256(bytes.Join([][]byte{[]byte(chain), []byte(d)}, []byte(" ")))
		chain = "sha256:" + hex.EncodeToString(sum[:])
	}
	return chain, nil
}
