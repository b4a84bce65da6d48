package tarfile

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// entry is what both readers give of an entry.
type entry struct {
	name    string
	regular bool
	data    string
}

// entries reads an archive with this package's reader.
func entries(t testing.TB, archive []byte) ([]entry, error) {
	t.Helper()
	var out []entry
	tr := NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return out, err
		}
		out = append(out, entry{h.Name, h.Regular(), string(data)})
	}
}

// stdEntries reads an archive with archive/tar, as this package's reader
// should: global headers are no entries, and sparse files are left out
// (ok is false) since the two give different bytes for them.
func stdEntries(archive []byte) (out []entry, ok bool, err error) {
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, true, nil
		}
		if err != nil {
			return out, true, err
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if h.Typeflag == tar.TypeGNUSparse || len(h.PAXRecords) > 0 && strings.Contains(strings.Join(keys(h.PAXRecords), " "), "GNU.sparse") {
			return nil, false, nil
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return out, true, err
		}
		out = append(out, entry{h.Name, h.Typeflag == tar.TypeReg, string(data)})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// archive writes files in format with archive/tar.
func archive(t testing.TB, format tar.Format, files []entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg, Format: format, ModTime: time.Unix(1700000000, 0)}
		if !f.regular {
			h.Typeflag, h.Size, h.Mode = tar.TypeDir, 0, 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("%v %s: %v", format, f.name, err)
		}
		if _, err := tw.Write([]byte(f.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func files(long bool) []entry {
	fs := []entry{
		{"etc/", false, ""},
		{"etc/passwd", true, "root:x:0:0:root:/root:/bin/sh\n"},
		{"etc/.wh.group", true, ""},
		{"etc/group", true, strings.Repeat("g", 511)},
		{"usr/share/a", true, strings.Repeat("a", 512)},
		{"usr/share/b", true, strings.Repeat("b", 513)},
	}
	if long {
		fs = append(fs,
			entry{strings.Repeat("d/", 70) + "file", true, "split into prefix and name"},
			entry{strings.Repeat("long/", 60) + "passwd", true, "beyond USTAR's 255 bytes"})
	}
	return fs
}

// TestReaderAsArchiveTar reads what archive/tar writes, in each format,
// as archive/tar reads it back: names (USTAR's prefix, PAX's path, GNU's
// long name), types and bytes, across the block's edges.
func TestReaderAsArchiveTar(t *testing.T) {
	for _, tc := range []struct {
		format tar.Format
		long   bool
	}{{tar.FormatUSTAR, false}, {tar.FormatPAX, true}, {tar.FormatGNU, true}} {
		t.Run(tc.format.String(), func(t *testing.T) {
			a := archive(t, tc.format, files(tc.long))
			want, _, err := stdEntries(a)
			if err != nil {
				t.Fatal(err)
			}
			got, err := entries(t, a)
			if err != nil {
				t.Fatalf("reading a %v archive: %v", tc.format, err)
			}
			if len(got) != len(want) || len(got) != len(files(tc.long)) {
				t.Fatalf("%d entries, archive/tar %d, written %d", len(got), len(want), len(files(tc.long)))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("entry %d: got %q (regular %v, %d bytes), archive/tar %q (regular %v, %d bytes)",
						i, got[i].name, got[i].regular, len(got[i].data), want[i].name, want[i].regular, len(want[i].data))
				}
			}
		})
	}
}

// TestReaderPAXOverrides takes the size and path from an entry's PAX
// records over its header's, ignores a global header, and marks a PAX
// sparse file as not regular.
func TestReaderPAXOverrides(t *testing.T) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	global := paxRecords("comment=x")
	a := append(header(t, "global", 'g', int64(len(global))), pad(global)...)
	records := paxRecords("mtime=1.5", "path=etc/group", "size=3")
	a = append(a, header(t, "PaxHeaders/passwd", 'x', int64(len(records)))...)
	a = append(a, pad(records)...)
	a = append(a, header(t, "etc/passwd", TypeReg, 0)...)
	a = append(a, pad([]byte("abc"))...)
	a = append(a, make([]byte, 2*block)...)
	got, err := entries(t, a)
	must(err)
	if want, _, _ := stdEntries(a); len(want) != 1 || len(got) != 1 || got[0] != want[0] {
		t.Errorf("got %+v, archive/tar %+v", got, want)
	}
	if want := (entry{"etc/group", true, "abc"}); len(got) != 1 || got[0] != want {
		t.Errorf("got %+v, want %+v", got, want)
	}

	records = paxRecords("path=etc/passwd", "GNU.sparse.major=1", "GNU.sparse.minor=0", "size=600")
	sparse := append(header(t, "PaxHeaders/x", 'x', int64(len(records))), pad(records)...)
	sparse = append(sparse, header(t, "x", TypeReg, 0)...)
	sparse = append(sparse, make([]byte, 1024+2*block)...) // 600 bytes, padded
	h, err := NewReader(bytes.NewReader(sparse)).Next()
	must(err)
	if h.Name != "etc/passwd" || h.Regular() || h.Size != 600 {
		t.Errorf("a PAX sparse file: %+v, want etc/passwd, not regular, 600 bytes", h)
	}
}

// TestReaderGNUSparseExtensions skips an old GNU sparse header's
// extension blocks: the next entry is read whole.
func TestReaderGNUSparseExtensions(t *testing.T) {
	h := header(t, "sparse", 'S', 2)
	h[482] = 1 // an extension block follows
	setChecksum(h)
	ext1 := make([]byte, block)
	ext1[504] = 1 // and another
	ext2 := make([]byte, block)
	a := append(append(append(h, ext1...), ext2...), pad([]byte("xy"))...)
	a = append(a, header(t, "etc/passwd", TypeReg, 4)...)
	a = append(a, pad([]byte("root"))...)
	a = append(a, make([]byte, 2*block)...)
	got, err := entries(t, a)
	if err != nil {
		t.Fatal(err)
	}
	want := []entry{{"sparse", false, "xy"}, {"etc/passwd", true, "root"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestReaderBase256Size reads GNU's base-256 size.
func TestReaderBase256Size(t *testing.T) {
	h := header(t, "f", TypeReg, 0)
	copy(h[124:136], []byte{0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x01})
	setChecksum(h)
	a := append(h, make([]byte, 513+511+2*block)...)
	got, err := NewReader(bytes.NewReader(a)).Next()
	if err != nil || got.Size != 513 {
		t.Errorf("got %+v, %v; want 513 bytes", got, err)
	}
}

// TestReaderBad refuses a bad checksum and a cut stream, and ends at the
// stream's end without zero blocks.
func TestReaderBad(t *testing.T) {
	a := archive(t, tar.FormatUSTAR, files(false))
	bad := bytes.Clone(a)
	bad[0] ^= 1
	if _, err := NewReader(bytes.NewReader(bad)).Next(); !errors.Is(err, ErrHeader) {
		t.Errorf("a bad checksum: %v, want ErrHeader", err)
	}
	for _, cut := range []int{100, block + 10, 3*block + 5} {
		if _, err := entries(t, a[:cut]); err != io.ErrUnexpectedEOF {
			t.Errorf("cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
	end := len(a) - 2*block
	got, err := entries(t, a[:end])
	if err != nil || len(got) != len(files(false)) {
		t.Errorf("with no zero blocks: %d entries, %v", len(got), err)
	}
	huge := header(t, "meta", 'x', 2<<20)
	if _, err := NewReader(bytes.NewReader(append(huge, make([]byte, 2<<20)...))).Next(); !errors.Is(err, ErrHeader) {
		t.Errorf("PAX records of 2 MiB: %v, want ErrHeader", err)
	}
	if _, err := NewReader(bytes.NewReader(append(header(t, "meta", 'x', 9), pad([]byte("9 path=x\n"[:8]+"!"))...))).Next(); !errors.Is(err, ErrHeader) {
		t.Errorf("a PAX record without its newline: %v, want ErrHeader", err)
	}
}

// TestOne writes what archive/tar writes for the same file, byte for
// byte, and archive/tar reads it back.
func TestOne(t *testing.T) {
	data := []byte(strings.Repeat("handed\n", 100))
	got, err := One("waitdaemon-handed", data)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	tw := tar.NewWriter(&want)
	if err := tw.WriteHeader(&tar.Header{Name: "waitdaemon-handed", Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		for i := range min(len(got), want.Len()) {
			if got[i] != want.Bytes()[i] {
				t.Fatalf("differs from archive/tar's from byte %d: %q, want %q (%d and %d bytes)", i, got[i:min(i+16, len(got))], want.Bytes()[i:min(i+16, want.Len())], len(got), want.Len())
			}
		}
		t.Fatalf("%d bytes, archive/tar's %d", len(got), want.Len())
	}
	if _, err := One(strings.Repeat("n", 101), nil); err == nil {
		t.Error("a name of 101 bytes was taken")
	}
	if _, err := One("", nil); err == nil {
		t.Error("an empty name was taken")
	}
}

// FuzzReader reads whatever archive/tar reads whole as archive/tar does.
func FuzzReader(f *testing.F) {
	for _, format := range []tar.Format{tar.FormatUSTAR, tar.FormatPAX, tar.FormatGNU} {
		f.Add(archive(f, format, files(format != tar.FormatUSTAR)))
	}
	f.Fuzz(func(t *testing.T, a []byte) {
		want, ok, err := stdEntries(a)
		if err != nil || !ok {
			return
		}
		got, err := entries(t, a)
		if err != nil {
			t.Fatalf("archive/tar read %d entries; this reader: %v", len(want), err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d entries, archive/tar %d", len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("entry %d: %+v, archive/tar %+v", i, got[i], want[i])
			}
		}
	})
}

// header is a USTAR header for name.
func header(t testing.TB, name string, typ byte, size int64) []byte {
	t.Helper()
	h := make([]byte, block)
	copy(h, name)
	octal(h[100:108], 0o644)
	octal(h[124:136], size)
	h[156] = typ
	copy(h[257:265], "ustar\x0000")
	setChecksum(h)
	return h
}

func pad(data []byte) []byte {
	return append(bytes.Clone(data), make([]byte, padding(int64(len(data))))...)
}

// paxRecords makes PAX records, each with its own length.
func paxRecords(kvs ...string) []byte {
	var out []byte
	for _, kv := range kvs {
		n := len(kv) + 3 // " ", "\n" and one digit
		for len(itoa(n))+len(kv)+2 != n {
			n++
		}
		out = append(out, itoa(n)+" "+kv+"\n"...)
	}
	return out
}

func itoa(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// TestReaderEdges: the values at the edges of what the reader takes.
func TestReaderEdges(t *testing.T) {
	// A PAX size of 0 overrides the header's.
	records := paxRecords("size=0")
	a := append(header(t, "PaxHeaders/f", 'x', int64(len(records))), pad(records)...)
	a = append(a, header(t, "f", TypeReg, 5)...)
	a = append(a, make([]byte, 2*block)...)
	if got, err := entries(t, a); err != nil || len(got) != 1 || got[0] != (entry{"f", true, ""}) {
		t.Errorf("PAX size=0 over a header's 5: %+v, %v; want f, empty", got, err)
	}
	// Metadata of exactly 1 MiB is read; a byte more is refused.
	for _, n := range []int{1 << 20, 1<<20 + 1} {
		long := append(bytes.Repeat([]byte("n"), n-1), 0)
		b := append(header(t, "././@LongLink", 'L', int64(n)), pad(long)...)
		b = append(b, header(t, "short", TypeReg, 0)...)
		b = append(b, make([]byte, 2*block)...)
		h, err := NewReader(bytes.NewReader(b)).Next()
		if n == 1<<20 && (err != nil || len(h.Name) != n-1) {
			t.Errorf("a long name of 1 MiB: %v, want it read", err)
		}
		if n > 1<<20 && !errors.Is(err, ErrHeader) {
			t.Errorf("a long name of 1 MiB and a byte: %v, want ErrHeader", err)
		}
	}
	// Base-256: the largest int64 is read, one more is refused.
	maxField := []byte{0x80, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	if n, err := number(maxField); err != nil || n != 1<<63-1 {
		t.Errorf("base-256 2^63-1: %d, %v", n, err)
	}
	over := []byte{0x80, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0}
	if n, err := number(over); !errors.Is(err, ErrHeader) {
		t.Errorf("base-256 2^63: %d, %v; want ErrHeader", n, err)
	}
	// One takes a name of 100 bytes, and refuses 101.
	if _, err := One(strings.Repeat("n", 100), nil); err != nil {
		t.Errorf("One with a 100-byte name: %v", err)
	}
	if _, err := One(strings.Repeat("n", 101), nil); err == nil {
		t.Error("One with a 101-byte name: no error")
	}
}

// TestReaderEnds: an entry whose last bytes come with the stream's end is
// read whole; one cut short is io.ErrUnexpectedEOF; a failure within the
// padding, or within a header, is that failure.
func TestReaderEnds(t *testing.T) {
	data := bytes.Repeat([]byte("x"), block)
	a := append(header(t, "f", TypeReg, block), data...) // no padding, no zero blocks
	tr := NewReader(iotest.DataErrReader(bytes.NewReader(a)))
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(tr); err != nil || len(got) != block {
		t.Errorf("the last bytes with the stream's end: %d bytes, %v; want %d", len(got), err, block)
	}
	tr = NewReader(bytes.NewReader(a[:block+100]))
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(tr); err != io.ErrUnexpectedEOF {
		t.Errorf("an entry cut short: %v, want io.ErrUnexpectedEOF", err)
	}
	broken := errors.New("the disk failed")
	b := append(header(t, "f", TypeReg, 3), "abc"...)
	tr = NewReader(io.MultiReader(bytes.NewReader(b), iotest.ErrReader(broken)))
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Next(); err != broken {
		t.Errorf("a failure within the padding: %v, want it", err)
	}
	// A failure reading a header is not the archive's end: the next Next
	// reads again, and meets it again.
	tr = NewReader(iotest.ErrReader(broken))
	for i := 1; i <= 2; i++ {
		if _, err := tr.Next(); err != broken {
			t.Errorf("Next %d on a failing stream: %v, want the failure", i, err)
		}
	}
}
