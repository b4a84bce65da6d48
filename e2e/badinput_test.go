package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestBadInput checks that bad input fails the action with a message that
// names the cause, and leaves no container behind.
func TestBadInput(t *testing.T) {
	c := setup(t)
	cases := []struct {
		name     string
		env      map[string]string
		noSocket bool
		wantCode int
		want     string
	}{
		{"WAIT_SECONDS not a number", map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "abc"}, false, 2, `WAIT_SECONDS="abc": expected a whole number of seconds from 0 to 3600`},
		{"WAIT_SECONDS negative", map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "-1"}, false, 2, `WAIT_SECONDS="-1": expected a whole number of seconds`},
		{"WAIT_SECONDS fractional", map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "1.5"}, false, 2, `WAIT_SECONDS="1.5": expected a whole number of seconds`},
		{"WAIT_SECONDS too large", map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "3601"}, false, 2, `WAIT_SECONDS="3601": expected a whole number of seconds from 0 to 3600`},
		{"WAITDAEMON_WAIT_SECONDS named", map[string]string{"IMAGE": probeImage, "WAITDAEMON_WAIT_SECONDS": "10s"}, false, 2, `WAITDAEMON_WAIT_SECONDS="10s": expected`},
		{"IMAGE unset", map[string]string{"WAIT_SECONDS": "1"}, false, 2, "IMAGE is not set: expected the image to run"},
		{"IMAGE malformed", map[string]string{"IMAGE": "Not/A:Valid:Ref", "WAIT_SECONDS": "1"}, false, 2, `IMAGE: image reference "Not/A:Valid:Ref"`},
		{"IMAGE cannot be pulled", map[string]string{"IMAGE": "127.0.0.1:1/waitdaemon/none:1", "WAIT_SECONDS": "1"}, false, 1, "pulling image 127.0.0.1:1/waitdaemon/none:1"},
		{"no socket mounted", map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "1"}, true, 1, "mount its socket into the action with\n  volumes:\n    - /var/run/docker.sock:/var/run/docker.sock"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			began := time.Now()
			r := runAction(t, c, tinkAgent, action{name: "e2e bad " + tc.name, command: []string{"x"}, env: tc.env, noSocket: tc.noSocket})
			if r.ExitCode != tc.wantCode || !strings.Contains(r.Logs, tc.want) {
				t.Errorf("exit %d, output:\n%s\nwant exit %d and %q", r.ExitCode, r.Logs, tc.wantCode, tc.want)
			}
			t.Logf("failed in %v", time.Since(began).Round(time.Millisecond))
			waitGone(t, c, r.ID, time.Second)
		})
	}
}
