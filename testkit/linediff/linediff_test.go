package linediff

import "testing"

func TestText(t *testing.T) {
	cases := []struct{ name, want, got, diff string }{
		{"same", "a\nb\n", "a\nb\n", ""},
		{"changed and added", "a\nb\nc\nd\ne\nf\ng\nh\ni\n", "a\nb\nc\nd\nE\nf\ng\nh\ni\nj\n", "  ...\n b\n c\n d\n-e\n+E\n f\n g\n h\n i\n+j\n \n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Text(tc.want, tc.got); got != tc.diff {
				t.Errorf("Text() = %q, want %q", got, tc.diff)
			}
		})
	}
}
