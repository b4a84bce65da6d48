package containerd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadFrom: a run's output is read from where the run began, or its
// last maxTail bytes; an offset past the end is a new file, read whole.
func TestReadFrom(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("hello\nworld\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte("early"+strings.Repeat("x", maxTail-4)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		file   string
		offset int64
		want   string // "big" stands for the big file's last maxTail bytes
	}{
		{"from the start", small, 0, "hello\nworld\n"},
		{"from a later run's start", small, 6, "world\n"},
		{"nothing new", small, 12, ""},
		{"past the end: a new file", small, 13, "hello\nworld\n"},
		{"the last maxTail bytes", big, 0, "big"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readFrom(tc.file, tc.offset)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "big" {
				if len(got) != maxTail || !strings.HasPrefix(got, "rlyx") {
					t.Errorf("readFrom() = %d bytes starting %.8q, want the last %d, starting \"rlyx\"", len(got), got, maxTail)
				}
				return
			}
			if got != tc.want {
				t.Errorf("readFrom() = %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := readFrom(filepath.Join(dir, "none"), 0); !os.IsNotExist(err) {
		t.Errorf("readFrom() of a missing file: %v, want it not to exist", err)
	}
}

// TestSettle: settle returns once the output file has stopped growing,
// and at once when there is none.
func TestSettle(t *testing.T) {
	file := filepath.Join(t.TempDir(), "log")
	began := time.Now()
	settle(context.Background(), file)
	if took := time.Since(began); took >= settleEvery {
		t.Errorf("settle() without a file took %v", took)
	}
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(10 * time.Millisecond) // the shim, still copying
		f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return
		}
		f.WriteString("yz")
		f.Close()
	}()
	settle(context.Background(), file)
	if data, err := os.ReadFile(file); err != nil || string(data) != "xyz" {
		t.Errorf("settle() returned with the file at %q (%v), want it grown to \"xyz\"", data, err)
	}
}
