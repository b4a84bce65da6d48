package engine

import (
	"slices"
	"testing"
)

// TestTail: the last lines of a container's output, as a terminal shows
// them.
func TestTail(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want []string
	}{
		{"", 3, []string{}},
		{"\n", 3, []string{}},
		{"a\nb\nc\n", 2, []string{"b", "c"}},
		{"a\r\nb\r\n", 5, []string{"a", "b"}},
		{"}\rprobe: exiting 3 as asked\r", 2, []string{"probe: exiting 3 as asked"}},
		{"10%\r50%\r100%\ndone\n", 2, []string{"100%", "done"}},
		{"no newline at the end", 1, []string{"no newline at the end"}},
	}
	for _, tc := range cases {
		if got := Tail(tc.in, tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("Tail(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
