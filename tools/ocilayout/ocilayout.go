// Package ocilayout writes an OCI image layout that holds one image index
// of single-file images, one per platform, reproducibly: every byte
// follows from its inputs, and nothing reads the clock. It uses the
// standard library alone and is no part of the waitdaemon binary.
package ocilayout

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// The media types of the OCI image spec (v1.0).
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// DefaultPath is the PATH that Docker's builder gives a Linux image that
// sets none.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// The OCI annotations every image and the index carry.
const (
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationVersion  = "org.opencontainers.image.version"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationCreated  = "org.opencontainers.image.created"
)

// gzipLevel is fixed: the layer's bytes depend on it.
const gzipLevel = gzip.BestCompression

// Spec is what to write: the same file, entrypoint and environment for
// every platform, each with its own content of the file.
type Spec struct {
	Created     time.Time         // every timestamp: the config's, the history's, the file's
	Annotations map[string]string // on the index and on each manifest
	Path        string            // the file's absolute path in the image, like /waitdaemon
	Entrypoint  []string
	Env         []string
	History     []History // the build steps, for the config; Created is set from Spec.Created
	Images      []Image
}

// Image is one platform's image: its platform and the file's content.
type Image struct {
	Platform Platform
	File     []byte
}

// Platform is a descriptor's platform, as in the image index.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
}

func (p Platform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// Descriptor points at a blob.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *Platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Index is an image index, and the layout's index.json.
type Index struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Manifests     []Descriptor      `json:"manifests"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Manifest is an image manifest.
type Manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Config is an image configuration: what the engine reads to run it.
type Config struct {
	Created      string          `json:"created"`
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Variant      string          `json:"variant,omitempty"`
	Config       ExecutionConfig `json:"config"`
	RootFS       RootFS          `json:"rootfs"`
	History      []History       `json:"history,omitempty"`
}

// ExecutionConfig is the config's "config": how a container starts.
type ExecutionConfig struct {
	Env        []string `json:"Env,omitempty"`
	Entrypoint []string `json:"Entrypoint,omitempty"`
}

// RootFS lists the layers' uncompressed digests.
type RootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

// History is one build step.
type History struct {
	Created    string `json:"created,omitempty"`
	CreatedBy  string `json:"created_by,omitempty"`
	EmptyLayer bool   `json:"empty_layer,omitempty"`
}

// Written is what Write wrote: the index's descriptor, which names the
// whole multi-platform image, and each platform's image.
type Written struct {
	Index  Descriptor
	Images []WrittenImage
}

// WrittenImage is one platform's image as written.
type WrittenImage struct {
	Platform Platform
	Manifest Descriptor
	Config   Descriptor
	Layer    Descriptor
	DiffID   string
	FileSize int64
}

// Compressed is what pulling the image moves over the network: its
// manifest, config and gzipped layer.
func (w WrittenImage) Compressed() int64 { return w.Manifest.Size + w.Config.Size + w.Layer.Size }

// Uncompressed is what the image takes once stored unpacked: the file
// and the config.
func (w WrittenImage) Uncompressed() int64 { return w.FileSize + w.Config.Size }

// Write writes the layout of spec into dir, which must be absent or
// empty. The layout's index.json names one image index; it is the
// digest to push and pin.
func Write(dir string, spec Spec) (Written, error) {
	if err := spec.check(); err != nil {
		return Written{}, err
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return Written{}, fmt.Errorf("writing the layout: %s is not empty", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return Written{}, fmt.Errorf("writing the layout: %w", err)
	}
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return Written{}, fmt.Errorf("writing the layout: %w", err)
	}
	put := func(mediaType string, data []byte) (Descriptor, error) {
		d := Descriptor{MediaType: mediaType, Digest: Digest(data), Size: int64(len(data))}
		name := filepath.Join(blobs, strings.TrimPrefix(d.Digest, "sha256:"))
		if err := os.WriteFile(name, data, 0o644); err != nil {
			return Descriptor{}, fmt.Errorf("writing a blob: %w", err)
		}
		return d, nil
	}

	var w Written
	index := Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Annotations: spec.Annotations}
	for _, img := range spec.Images {
		layer, diffID, err := Layer(spec.Path, img.File, spec.Created)
		if err != nil {
			return Written{}, fmt.Errorf("%s: %w", img.Platform, err)
		}
		config, err := marshal(spec.config(img.Platform, diffID))
		if err != nil {
			return Written{}, err
		}
		wi := WrittenImage{Platform: img.Platform, DiffID: diffID, FileSize: int64(len(img.File))}
		if wi.Layer, err = put(MediaTypeLayer, layer); err != nil {
			return Written{}, err
		}
		if wi.Config, err = put(MediaTypeConfig, config); err != nil {
			return Written{}, err
		}
		manifest, err := marshal(Manifest{
			SchemaVersion: 2, MediaType: MediaTypeManifest,
			Config: wi.Config, Layers: []Descriptor{wi.Layer},
			Annotations: spec.Annotations,
		})
		if err != nil {
			return Written{}, err
		}
		if wi.Manifest, err = put(MediaTypeManifest, manifest); err != nil {
			return Written{}, err
		}
		p := img.Platform
		d := wi.Manifest
		d.Platform = &p
		index.Manifests = append(index.Manifests, d)
		w.Images = append(w.Images, wi)
	}
	data, err := marshal(index)
	if err != nil {
		return Written{}, err
	}
	if w.Index, err = put(MediaTypeIndex, data); err != nil {
		return Written{}, err
	}
	top, err := marshal(Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: []Descriptor{w.Index}})
	if err != nil {
		return Written{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), top, 0o644); err != nil {
		return Written{}, fmt.Errorf("writing the layout: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		return Written{}, fmt.Errorf("writing the layout: %w", err)
	}
	return w, nil
}

func (s Spec) check() error {
	switch {
	case s.Created.IsZero():
		return errors.New("the spec has no creation time")
	case !path.IsAbs(s.Path) || path.Clean(s.Path) != s.Path || s.Path == "/":
		return fmt.Errorf("the file's path in the image %q: expected a clean absolute path, like /waitdaemon", s.Path)
	case len(s.Images) == 0:
		return errors.New("the spec has no image")
	}
	seen := map[Platform]bool{}
	for _, img := range s.Images {
		if img.Platform.OS == "" || img.Platform.Architecture == "" {
			return fmt.Errorf("platform %q: expected an OS and an architecture", img.Platform)
		}
		if seen[img.Platform] {
			return fmt.Errorf("platform %s: given twice", img.Platform)
		}
		seen[img.Platform] = true
	}
	return nil
}

// config is the image configuration of one platform.
func (s Spec) config(p Platform, diffID string) Config {
	created := Timestamp(s.Created)
	history := make([]History, len(s.History))
	for i, h := range s.History {
		h.Created = created
		history[i] = h
	}
	return Config{
		Created:      created,
		Architecture: p.Architecture,
		OS:           p.OS,
		Variant:      p.Variant,
		Config:       ExecutionConfig{Env: s.Env, Entrypoint: s.Entrypoint},
		RootFS:       RootFS{Type: "layers", DiffIDs: []string{diffID}},
		History:      history,
	}
}

// Layer returns the gzipped tar of one file at name (an absolute path in
// the image), mode 0755, owned by root, modified at mtime, and the
// digest of the tar (the layer's diff ID). The tar headers are USTAR
// with no user or group names and no access or change times; the gzip
// header has no name and no time. The same arguments always give the
// same bytes.
func Layer(name string, content []byte, mtime time.Time) (gz []byte, diffID string, err error) {
	var t bytes.Buffer
	tw := tar.NewWriter(&t)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     strings.TrimPrefix(name, "/"),
		Mode:     0o755,
		Size:     int64(len(content)),
		ModTime:  mtime.UTC().Truncate(time.Second),
		Format:   tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, "", fmt.Errorf("the layer's tar header: %w", err)
	}
	if _, err := tw.Write(content); err != nil {
		return nil, "", fmt.Errorf("the layer's tar: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, "", fmt.Errorf("the layer's tar: %w", err)
	}
	var z bytes.Buffer
	zw, err := gzip.NewWriterLevel(&z, gzipLevel)
	if err != nil {
		return nil, "", err
	}
	// The header stays empty: no name, ModTime zero (written as 0).
	if _, err := zw.Write(t.Bytes()); err != nil {
		return nil, "", fmt.Errorf("the layer's gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, "", fmt.Errorf("the layer's gzip: %w", err)
	}
	return z.Bytes(), Digest(t.Bytes()), nil
}

// Digest is data's sha256 digest, "sha256:<hex>".
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Timestamp formats t as the image spec wants it: RFC 3339, in UTC.
func Timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// marshal is json.Marshal: struct fields in their order, map keys
// sorted, so the same value always gives the same bytes.
func marshal(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	return data, nil
}
