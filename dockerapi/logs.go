package dockerapi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Demux splits the engine's multiplexed output stream (used for logs and
// attach when the container has no TTY) into stdout and stderr. Each frame
// is an 8-byte header, [stream, 0, 0, 0, size (big-endian uint32)], then
// size bytes.
func Demux(r io.Reader, stdout, stderr io.Writer) error {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading frame header: %w", err)
		}
		size := int64(binary.BigEndian.Uint32(hdr[4:]))
		var w io.Writer
		switch hdr[0] {
		case 0, 1: // stdin (never sent), stdout
			w = stdout
		case 2:
			w = stderr
		default:
			return fmt.Errorf("reading frame header: unknown stream %d", hdr[0])
		}
		if _, err := io.CopyN(w, r, size); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading frame of %d bytes: %w", size, err)
		}
	}
}
