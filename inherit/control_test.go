package inherit

import (
	"slices"
	"strings"
	"testing"
)

func TestControl(t *testing.T) {
	cases := []struct {
		env         []string
		control     []string // sorted
		image, wait string   // the names in force
	}{
		{nil, []string{"IMAGE", "WAIT_SECONDS"}, "IMAGE", "WAIT_SECONDS"},
		{[]string{"IMAGE=a", "WAIT_SECONDS=3", "PATH=/bin"}, []string{"IMAGE", "WAIT_SECONDS"}, "IMAGE", "WAIT_SECONDS"},
		{
			[]string{"WAITDAEMON_IMAGE=a", "IMAGE=mine"},
			[]string{"WAITDAEMON_IMAGE", "WAIT_SECONDS"},
			"WAITDAEMON_IMAGE", "WAIT_SECONDS",
		},
		{
			[]string{"WAITDAEMON_WAIT_SECONDS=3", "WAITDAEMON_VERBOSE=1", "WAIT_SECONDS=mine"},
			[]string{"IMAGE", "WAITDAEMON_VERBOSE", "WAITDAEMON_WAIT_SECONDS"},
			"IMAGE", "WAITDAEMON_WAIT_SECONDS",
		},
		{
			// An alias set empty, to spaces, or named without a value is
			// none: the plain names stay waitdaemon's, as phase 1 reads
			// them.
			[]string{"WAITDAEMON_IMAGE=", "WAITDAEMON_WAIT_SECONDS", "IMAGE=a", "WAIT_SECONDS=3"},
			[]string{"IMAGE", "WAITDAEMON_IMAGE", "WAITDAEMON_WAIT_SECONDS", "WAIT_SECONDS"},
			"IMAGE", "WAIT_SECONDS",
		},
		{
			[]string{"WAITDAEMON_IMAGE=  ", "WAITDAEMON_WAIT_SECONDS= 7 ", "IMAGE=a", "WAIT_SECONDS=mine"},
			[]string{"IMAGE", "WAITDAEMON_IMAGE", "WAITDAEMON_WAIT_SECONDS"},
			"IMAGE", "WAITDAEMON_WAIT_SECONDS",
		},
		{[]string{"WAITDAEMON_IMAGEX=a", "XWAITDAEMON_Y=1"}, []string{"IMAGE", "WAITDAEMON_IMAGEX", "WAIT_SECONDS"}, "IMAGE", "WAIT_SECONDS"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.env, ","), func(t *testing.T) {
			var got []string
			for name, ok := range Control(tc.env) {
				if ok {
					got = append(got, name)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.control) {
				t.Errorf("Control = %q, want %q", got, tc.control)
			}
			if got := Image.Name(tc.env); got != tc.image {
				t.Errorf("Image.Name = %q, want %q", got, tc.image)
			}
			if got := WaitSeconds.Name(tc.env); got != tc.wait {
				t.Errorf("WaitSeconds.Name = %q, want %q", got, tc.wait)
			}
		})
	}
}

// TestRoot: root is no user, root by name, or uid 0 however written, in
// any group; any other name or number is not.
func TestRoot(t *testing.T) {
	for user, want := range map[string]bool{"": true, "root": true, "0": true, "00": true, "0:0": true, "root:wheel": true, ":5": true,
		"1000": false, "0123": false, "nobody": false, "toor:0": false, "1000:0": false} {
		if got := Root(user); got != want {
			t.Errorf("Root(%q) = %v, want %v", user, got, want)
		}
	}
}
