package field

import (
	"compress/gzip"
	"fmt"
	"io"
	"strings"
)

// File is one entry of a cpio archive: a regular file (Data), a directory
// (Mode with 040000), a symlink (Link) or a device (Mode with 020000 and
// Rdev's major and minor).
type File struct {
	Name         string
	Mode         uint32 // type and permission bits, as stat's st_mode
	Data         []byte
	Link         string
	Major, Minor uint32
}

const (
	modeDir  = 0o040000
	modeReg  = 0o100000
	modeLink = 0o120000
	modeChar = 0o020000
)

// WriteCPIO writes files as a gzip-compressed newc cpio archive, which
// the kernel unpacks after the zstd root it follows: each part of an
// initramfs may be compressed its own way.
func WriteCPIO(w io.Writer, files []File) error {
	zw := gzip.NewWriter(w)
	for i, f := range files {
		data := f.Data
		mode := f.Mode
		if f.Link != "" {
			data = []byte(f.Link)
			mode = modeLink | 0o777
		} else if mode&0o170000 == 0 {
			mode |= modeReg
		}
		name := strings.TrimPrefix(f.Name, "/")
		if err := writeEntry(zw, uint32(i+1), name, mode, data, f.Major, f.Minor); err != nil {
			return err
		}
	}
	if err := writeEntry(zw, 0, "TRAILER!!!", 0, nil, 0, 0); err != nil {
		return err
	}
	return zw.Close()
}

func writeEntry(w io.Writer, ino uint32, name string, mode uint32, data []byte, major, minor uint32) error {
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, mode, 0, 0, 1, 0, len(data), 0, 0, major, minor, len(name)+1, 0)
	buf := []byte(hdr + name + "\x00")
	buf = append(buf, make([]byte, pad4(len(buf)))...)
	buf = append(buf, data...)
	buf = append(buf, make([]byte, pad4(len(data)))...)
	_, err := w.Write(buf)
	return err
}

func pad4(n int) int { return (4 - n%4) % 4 }
