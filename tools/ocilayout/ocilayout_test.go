package ocilayout

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var commit = time.Date(2026, 11, 23, 22, 34, 39, 0, time.UTC)

func TestLayer(t *testing.T) {
	content := []byte("\x7fELF not really")
	gz, diffID, err := Layer("/waitdaemon", content, commit.In(time.FixedZone("UTC+14", 14*3600)))
	if err != nil {
		t.Fatal(err)
	}

	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || zr.Comment != "" || !zr.ModTime.IsZero() || zr.Extra != nil {
		t.Errorf("gzip header: name %q, comment %q, time %v, extra %q; want all empty", zr.Name, zr.Comment, zr.ModTime, zr.Extra)
	}
	// The header's modification time is 4 zero bytes at offset 4.
	if !bytes.Equal(gz[4:8], []byte{0, 0, 0, 0}) {
		t.Errorf("gzip MTIME bytes %x, want 00000000", gz[4:8])
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if got := Digest(raw); got != diffID {
		t.Errorf("diff ID %s, but the tar's digest is %s", diffID, got)
	}
	if string(raw[257:265]) != "ustar\x0000" {
		t.Errorf("tar magic %q, want USTAR's", raw[257:265])
	}

	tr := tar.NewReader(bytes.NewReader(raw))
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	want := tar.Header{Typeflag: tar.TypeReg, Name: "waitdaemon", Mode: 0o755, Size: int64(len(content)), ModTime: commit, Format: tar.FormatUSTAR}
	got := tar.Header{Typeflag: hdr.Typeflag, Name: hdr.Name, Mode: hdr.Mode, Size: hdr.Size, ModTime: hdr.ModTime.UTC(), Format: hdr.Format,
		Uid: hdr.Uid, Gid: hdr.Gid, Uname: hdr.Uname, Gname: hdr.Gname, AccessTime: hdr.AccessTime, ChangeTime: hdr.ChangeTime, PAXRecords: hdr.PAXRecords}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tar header:\n got %+v\nwant %+v", got, want)
	}
	body, _ := io.ReadAll(tr)
	if !bytes.Equal(body, content) {
		t.Errorf("the file's content: got %q, want %q", body, content)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("a second entry in the layer: %v", err)
	}

	again, againID, _ := Layer("/waitdaemon", content, commit)
	if !bytes.Equal(again, gz) || againID != diffID {
		t.Error("the same file and time in another zone gave another layer")
	}
	later, _, _ := Layer("/waitdaemon", content, commit.Add(time.Second))
	if bytes.Equal(later, gz) {
		t.Error("another modification time gave the same layer")
	}
}

func testSpec() Spec {
	return Spec{
		Created:     commit,
		Annotations: map[string]string{AnnotationCreated: Timestamp(commit), AnnotationVersion: "v1.2.3"},
		Path:        "/waitdaemon",
		Entrypoint:  []string{"/waitdaemon", "action", "--"},
		Env:         []string{DefaultPath},
		History:     []History{{CreatedBy: "COPY waitdaemon /waitdaemon"}, {CreatedBy: `ENTRYPOINT ["/waitdaemon", "action", "--"]`, EmptyLayer: true}},
		Images: []Image{
			{Platform: Platform{OS: "linux", Architecture: "amd64"}, File: []byte("amd64 binary")},
			{Platform: Platform{OS: "linux", Architecture: "arm64"}, File: []byte("arm64 binary, longer")},
		},
	}
}

// readJSON decodes the blob of d, checking its digest and size.
func readJSON(t *testing.T, dir string, d Descriptor, v any) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(d.Digest, "sha256:")))
	if err != nil {
		t.Fatal(err)
	}
	if Digest(data) != d.Digest || int64(len(data)) != d.Size {
		t.Errorf("blob %s: digest %s, size %d; the descriptor says size %d", d.Digest, Digest(data), len(data), d.Size)
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("blob %s: %v", d.Digest, err)
		}
	}
	return data
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	spec := testSpec()
	w, err := Write(dir, spec)
	if err != nil {
		t.Fatal(err)
	}

	layout, _ := os.ReadFile(filepath.Join(dir, "oci-layout"))
	if string(layout) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout: %s", layout)
	}
	var top Index
	data, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || !reflect.DeepEqual(top.Manifests[0], w.Index) || w.Index.MediaType != MediaTypeIndex {
		t.Fatalf("index.json lists %+v, want only the image index %+v", top.Manifests, w.Index)
	}

	var index Index
	readJSON(t, dir, w.Index, &index)
	if index.SchemaVersion != 2 || index.MediaType != MediaTypeIndex || !reflect.DeepEqual(index.Annotations, spec.Annotations) {
		t.Errorf("index: %+v", index)
	}
	if len(index.Manifests) != len(spec.Images) {
		t.Fatalf("the index lists %d manifests, want %d", len(index.Manifests), len(spec.Images))
	}
	for i, md := range index.Manifests {
		img := spec.Images[i]
		if md.MediaType != MediaTypeManifest || md.Platform == nil || *md.Platform != img.Platform {
			t.Errorf("manifest %d: %+v, want a manifest for %s", i, md, img.Platform)
		}
		var m Manifest
		readJSON(t, dir, md, &m)
		if m.SchemaVersion != 2 || m.MediaType != MediaTypeManifest || m.Config.MediaType != MediaTypeConfig ||
			len(m.Layers) != 1 || m.Layers[0].MediaType != MediaTypeLayer || !reflect.DeepEqual(m.Annotations, spec.Annotations) {
			t.Errorf("%s manifest: %+v", img.Platform, m)
		}
		var c Config
		readJSON(t, dir, m.Config, &c)
		layer := readJSON(t, dir, m.Layers[0], nil)
		_, diffID, _ := Layer(spec.Path, img.File, spec.Created)
		want := Config{
			Created: "2026-11-23T22:34:39Z", Architecture: img.Platform.Architecture, OS: "linux",
			Config: ExecutionConfig{Env: []string{DefaultPath}, Entrypoint: []string{"/waitdaemon", "action", "--"}},
			RootFS: RootFS{Type: "layers", DiffIDs: []string{diffID}},
			History: []History{
				{Created: "2026-11-23T22:34:39Z", CreatedBy: "COPY waitdaemon /waitdaemon"},
				{Created: "2026-11-23T22:34:39Z", CreatedBy: `ENTRYPOINT ["/waitdaemon", "action", "--"]`, EmptyLayer: true},
			},
		}
		if !reflect.DeepEqual(c, want) {
			t.Errorf("%s config:\n got %+v\nwant %+v", img.Platform, c, want)
		}
		zr, err := gzip.NewReader(bytes.NewReader(layer))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		if _, err := tr.Next(); err != nil {
			t.Fatal(err)
		}
		if body, _ := io.ReadAll(tr); !bytes.Equal(body, img.File) {
			t.Errorf("%s layer holds %q, want %q", img.Platform, body, img.File)
		}
		wi := w.Images[i]
		if wi.Manifest.Digest != md.Digest || wi.Compressed() != md.Size+m.Config.Size+m.Layers[0].Size ||
			wi.Uncompressed() != int64(len(img.File))+m.Config.Size {
			t.Errorf("%s written: %+v", img.Platform, wi)
		}
	}

	entries, _ := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if len(entries) != 1+3*len(spec.Images) {
		t.Errorf("%d blobs, want the index and 3 per image: %d", len(entries), 1+3*len(spec.Images))
	}
	if _, err := Write(dir, spec); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("writing into a layout: %v, want an error saying it is not empty", err)
	}
}

// tree reads every file under dir.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestWriteSameBytes(t *testing.T) {
	spec := testSpec()
	a, b := t.TempDir(), t.TempDir()
	wa, err := Write(a, spec)
	if err != nil {
		t.Fatal(err)
	}
	spec.Created = commit.In(time.FixedZone("UTC-12", -12*3600)) // the same instant
	wb, err := Write(b, spec)
	if err != nil {
		t.Fatal(err)
	}
	if wa.Index.Digest != wb.Index.Digest || !reflect.DeepEqual(tree(t, a), tree(t, b)) {
		t.Errorf("the same spec gave two layouts: index %s and %s", wa.Index.Digest, wb.Index.Digest)
	}
	spec.Created = commit.Add(time.Second)
	wc, err := Write(t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if wc.Index.Digest == wa.Index.Digest {
		t.Error("another creation time gave the same index")
	}
}

func TestWriteRejects(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Spec)
		want string
	}{
		{"no time", func(s *Spec) { s.Created = time.Time{} }, "no creation time"},
		{"relative path", func(s *Spec) { s.Path = "waitdaemon" }, "clean absolute path"},
		{"no image", func(s *Spec) { s.Images = nil }, "no image"},
		{"no architecture", func(s *Spec) { s.Images[0].Platform.Architecture = "" }, "an OS and an architecture"},
		{"a platform twice", func(s *Spec) { s.Images[1].Platform = s.Images[0].Platform }, "given twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec()
			tc.edit(&spec)
			if _, err := Write(t.TempDir(), spec); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
