package containerdapi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

// TestFrameReaderDeclaredLength reads frames whose header declares more
// than the body carries: each fails with an unexpected EOF, and the
// reader allocates about what arrived, not what was declared.
func TestFrameReaderDeclaredLength(t *testing.T) {
	header := func(n uint32) []byte {
		b := make([]byte, 5)
		binary.BigEndian.PutUint32(b[1:], n)
		return b
	}
	cases := []struct {
		name     string
		declared uint32
		body     []byte
	}{
		{"the maximum, 3 bytes sent", maxMessage, []byte("abc")},
		{"16 MiB, none sent", 16 << 20, nil},
		{"16 MiB, 64 KiB sent", 16 << 20, bytes.Repeat([]byte{'x'}, 64<<10)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := append(header(tc.declared), tc.body...)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			fr := frameReader{r: bytes.NewReader(in)}
			msg, err := fr.next()
			runtime.ReadMemStats(&after)
			if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "a message broke off") {
				t.Errorf("next() = %d bytes, %v; want a message that broke off (unexpected EOF)", len(msg), err)
			}
			// Room for what arrived, grown as it came, and the small
			// allocations of the test and of the race detector; far from
			// the declared size.
			limit := uint64(8*len(tc.body) + 256<<10)
			if got := after.TotalAlloc - before.TotalAlloc; got > limit {
				t.Errorf("next() allocated %d bytes for a frame declaring %d and carrying %d; want at most %d", got, tc.declared, len(tc.body), limit)
			}
		})
	}
}

// TestFrameReader reads whole frames, back to back, and refuses what it
// must: a compressed message, a length over the maximum, a broken header.
func TestFrameReader(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789"), 100_000) // 1 MB, read in chunks
	in := join(frame([]byte("hello")), frame(nil), frame(big))
	fr := frameReader{r: bytes.NewReader(in)}
	for i, want := range [][]byte{[]byte("hello"), {}, big} {
		got, err := fr.next()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("message %d: next() = %d bytes, %v; want %d bytes", i, len(got), err, len(want))
		}
	}
	if _, err := fr.next(); err != io.EOF {
		t.Errorf("next() at the end = %v, want io.EOF", err)
	}

	tooBig := make([]byte, 5)
	binary.BigEndian.PutUint32(tooBig[1:], maxMessage+1)
	bad := []struct {
		name string
		in   []byte
		want string
	}{
		{"compressed", append([]byte{1}, frame([]byte("x"))[1:]...), "compressed message (flag 1)"},
		{"over the maximum", tooBig, "message of 67108865 bytes is larger than 67108864"},
		{"broken header", []byte{0, 0}, "a frame header broke off: unexpected EOF"},
	}
	for _, tc := range bad {
		fr := frameReader{r: bytes.NewReader(tc.in)}
		if _, err := fr.next(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: next() error = %v, want %q", tc.name, err, tc.want)
		}
	}
}
