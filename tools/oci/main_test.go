package main

import (
	"debug/elf"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeELF writes the smallest ELF64 executable header for machine, with
// a PT_INTERP program header when dynamic.
func fakeELF(t *testing.T, machine elf.Machine, dynamic bool) string {
	t.Helper()
	b := make([]byte, 64, 64+56)
	copy(b, []byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)})
	le := binary.LittleEndian
	le.PutUint16(b[16:], uint16(elf.ET_EXEC))
	le.PutUint16(b[18:], uint16(machine))
	le.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	le.PutUint16(b[52:], 64) // e_ehsize
	le.PutUint16(b[54:], 56) // e_phentsize
	le.PutUint16(b[58:], 64) // e_shentsize
	if dynamic {
		le.PutUint64(b[32:], 64) // e_phoff
		le.PutUint16(b[56:], 1)  // e_phnum
		ph := make([]byte, 56)
		le.PutUint32(ph, uint32(elf.PT_INTERP))
		b = append(b, ph...)
	}
	name := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(name, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestRunRejects(t *testing.T) {
	amd64, arm64 := fakeELF(t, elf.EM_X86_64, false), fakeELF(t, elf.EM_AARCH64, false)
	dynamic := fakeELF(t, elf.EM_X86_64, true)
	notELF := filepath.Join(t.TempDir(), "notelf")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dockerfile := "../../Dockerfile.scratch"
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no -created", []string{"-binary", "linux/amd64=" + amd64}, "-created=\"\": expected seconds since 1970"},
		{"bad -created", []string{"-created", "yesterday", "-binary", "linux/amd64=" + amd64}, "-created=\"yesterday\""},
		{"no -binary", []string{"-created", "1700000000"}, "-binary is required"},
		{"bad -binary", []string{"-created", "1700000000", "-binary", amd64}, "expected os/arch=path"},
		{"wrong architecture", []string{"-created", "1700000000", "-binary", "linux/amd64=" + arm64}, "built for EM_AARCH64"},
		{"dynamic", []string{"-created", "1700000000", "-binary", "linux/amd64=" + dynamic}, "dynamically linked"},
		{"not ELF", []string{"-created", "1700000000", "-binary", "linux/amd64=" + notELF}, "not an ELF executable"},
		{"a platform twice", []string{"-created", "1700000000", "-binary", "linux/amd64=" + amd64, "-binary", "linux/amd64=" + amd64}, "given twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-out", filepath.Join(t.TempDir(), "oci"), "-dockerfile", dockerfile}, tc.args...)
			err := run(args, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("oci %q: error %v, want one saying %q", tc.args, err, tc.want)
			}
		})
	}
}
