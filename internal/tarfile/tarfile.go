// Package tarfile reads the entries of a tar stream and writes a one-file
// archive: what waitdaemon does with tar (an image layer's /etc/passwd and
// /etc/group, a file copied in or out of a container through Docker's
// archive calls), in a fraction of archive/tar's size in the binary.
//
// The reader knows the formats engines and image builders write: V7,
// USTAR (with its name prefix), PAX (path and size records, and the
// GNU.sparse.name of a sparse file) and GNU (long names, base-256 sizes,
// the old sparse headers' extension blocks). It gives each entry's name,
// type and stored bytes; nothing else of the header.
package tarfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

const block = 512

// Entry types, as a header's type flag.
const (
	TypeReg  = '0'
	TypeRegA = '\x00' // a regular file, as old archives mark it
)

// Header is what the reader gives of an entry.
type Header struct {
	Name     string
	Typeflag byte
	Size     int64 // the bytes stored in the archive
}

// Regular reports whether the entry is a regular file.
func (h *Header) Regular() bool { return h.Typeflag == TypeReg || h.Typeflag == TypeRegA }

// ErrHeader is an entry's header that cannot be read.
var ErrHeader = errors.New("tar: invalid header")

// Reader reads a tar stream's entries in turn.
type Reader struct {
	r    io.Reader
	left int64 // the current entry's bytes not yet read
	pad  int64 // the padding after them
	done bool
}

// NewReader reads the tar stream r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Read reads the current entry's bytes.
func (tr *Reader) Read(p []byte) (int, error) {
	if tr.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > tr.left {
		p = p[:tr.left]
	}
	n, err := tr.r.Read(p)
	tr.left -= int64(n)
	if err == io.EOF && tr.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// Next skips what is left of the current entry and reads the next
// header. At the archive's end it returns io.EOF.
func (tr *Reader) Next() (*Header, error) {
	if tr.done {
		return nil, io.EOF
	}
	if err := tr.skip(tr.left); err != nil {
		return nil, err
	}
	// A stream cut within the last entry's padding ends there, as
	// archive/tar takes it.
	if got, err := io.CopyN(io.Discard, tr.r, tr.pad); got < tr.pad {
		tr.done = true
		if err == nil || err == io.EOF {
			err = io.EOF
		}
		return nil, err
	}
	tr.left, tr.pad = 0, 0
	// From PAX records or a GNU long name, for the entry that follows.
	var name string
	var size int64 = -1
	sparse := false
	var raw [block]byte
	for {
		if _, err := io.ReadFull(tr.r, raw[:]); err != nil {
			// io.EOF: the stream ends at an entry's end, with no zero
			// blocks, as some writers leave it.
			tr.done = err == io.EOF
			return nil, err
		}
		if raw == [block]byte{} { // the end: two zero blocks, the second not needed
			tr.done = true
			return nil, io.EOF
		}
		if !checksum(raw[:]) {
			return nil, ErrHeader
		}
		hsize, err := number(raw[124:136])
		if err != nil || hsize < 0 {
			return nil, ErrHeader
		}
		h := &Header{Typeflag: raw[156], Size: hsize}
		switch h.Typeflag {
		case 'x', 'g', 'L', 'K': // PAX records (this entry's or global), GNU long name or link
			data, err := tr.body(hsize)
			if err != nil {
				return nil, err
			}
			switch h.Typeflag {
			case 'x':
				if err := pax(data, &name, &size, &sparse); err != nil {
					return nil, err
				}
			case 'L':
				name, _, _ = strings.Cut(string(data), "\x00")
			}
			continue
		case 'S': // old GNU sparse: extension blocks follow while marked
			for ext := raw[482] != 0; ext; {
				var more [block]byte
				if _, err := io.ReadFull(tr.r, more[:]); err != nil {
					return nil, unexpected(err)
				}
				ext = more[504] != 0
			}
		}
		h.Name = name
		if h.Name == "" {
			h.Name = cstring(raw[0:100])
			if string(raw[257:262]) == "ustar" && string(raw[257:265]) != "ustar  \x00" { // USTAR or PAX, not GNU
				if prefix := cstring(raw[345:500]); prefix != "" {
					h.Name = prefix + "/" + h.Name
				}
			}
		}
		if size >= 0 {
			h.Size = size
		}
		if sparse { // PAX's sparse formats: the stored bytes are not the file's
			h.Typeflag = 'S'
		}
		tr.left, tr.pad = h.Size, padding(h.Size)
		return h, nil
	}
}

// body reads a metadata entry's n bytes and their padding.
func (tr *Reader) body(n int64) ([]byte, error) {
	if n > 1<<20 {
		return nil, ErrHeader
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(tr.r, data); err != nil {
		return nil, unexpected(err)
	}
	return data, tr.skip(padding(n))
}

// skip discards n bytes.
func (tr *Reader) skip(n int64) error {
	if n <= 0 {
		return nil
	}
	got, err := io.CopyN(io.Discard, tr.r, n)
	if got < n {
		return unexpected(err)
	}
	return nil
}

func unexpected(err error) error {
	if err == nil || err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func padding(n int64) int64 { return -n & (block - 1) }

// checksum reports whether the header's checksum matches its bytes,
// summed unsigned or, as some old writers did, signed.
func checksum(raw []byte) bool {
	want, err := number(raw[148:156])
	if err != nil {
		return false
	}
	var unsigned, signed int64
	for i, c := range raw {
		if i >= 148 && i < 156 {
			c = ' '
		}
		unsigned += int64(c)
		signed += int64(int8(c))
	}
	return want == unsigned || want == signed
}

// number reads a numeric field: octal digits, or GNU's base-256 with the
// high bit of the first byte set.
func number(f []byte) (int64, error) {
	if len(f) > 0 && f[0]&0x80 != 0 {
		if f[0]&0x40 != 0 { // negative
			return 0, ErrHeader
		}
		var n int64
		for i, c := range f {
			if i == 0 {
				c &= 0x7f
			}
			if n > (1<<63-1)>>8 {
				return 0, ErrHeader
			}
			n = n<<8 | int64(c)
		}
		return n, nil
	}
	s := strings.Trim(cstring(f), " ")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 8, 64)
	if err != nil {
		return 0, ErrHeader
	}
	return n, nil
}

// cstring is a field up to its first NUL.
func cstring(f []byte) string {
	if i := bytes.IndexByte(f, 0); i >= 0 {
		f = f[:i]
	}
	return string(f)
}

// pax reads PAX records ("LEN key=value\n" each): the path (or a sparse
// file's real name), the size, and whether the file is sparse.
func pax(data []byte, name *string, size *int64, sparse *bool) error {
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		if sp <= 0 {
			return ErrHeader
		}
		n, err := strconv.Atoi(string(data[:sp]))
		if err != nil || n <= sp+1 || n > len(data) || data[n-1] != '\n' {
			return ErrHeader
		}
		key, value, ok := strings.Cut(string(data[sp+1:n-1]), "=")
		if !ok {
			return ErrHeader
		}
		switch key {
		case "path", "GNU.sparse.name":
			*name = value
		case "size":
			if *size, err = strconv.ParseInt(value, 10, 64); err != nil || *size < 0 {
				return ErrHeader
			}
		default:
			*sparse = *sparse || strings.HasPrefix(key, "GNU.sparse.")
		}
		data = data[n:]
	}
	return nil
}

// One is a tar archive of one regular file, name, holding data: mode 0644,
// owned by root, dated the epoch, in USTAR format. A name over 100 bytes
// is refused.
func One(name string, data []byte) ([]byte, error) {
	if len(name) > 100 || name == "" {
		return nil, fmt.Errorf("tar: the name %q must be 1 to 100 bytes", name)
	}
	var h [block]byte
	copy(h[0:100], name)
	octal(h[100:108], 0o644)
	octal(h[108:116], 0)
	octal(h[116:124], 0)
	octal(h[124:136], int64(len(data)))
	octal(h[136:148], 0)
	h[156] = TypeReg
	copy(h[257:265], "ustar\x0000")
	octal(h[329:337], 0) // device numbers
	octal(h[337:345], 0)
	setChecksum(h[:])
	out := make([]byte, 0, block+len(data)+int(padding(int64(len(data))))+2*block)
	out = append(out, h[:]...)
	out = append(out, data...)
	return append(out, make([]byte, padding(int64(len(data)))+2*block)...), nil
}

// setChecksum writes header h's checksum: its bytes summed, the field
// itself counted as spaces, as six octal digits, a NUL and a space.
func setChecksum(h []byte) {
	copy(h[148:156], "        ")
	var sum int64
	for _, c := range h {
		sum += int64(c)
	}
	octal(h[148:155], sum)
	h[155] = ' '
}

// octal writes n into f as zero-padded octal digits and a NUL.
func octal(f []byte, n int64) {
	s := strconv.FormatInt(n, 8)
	digits := len(f) - 1
	for len(s) < digits {
		s = "0" + s
	}
	copy(f, s)
	f[digits] = 0
}
