package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// TestAPIVerbose is the curl-like trace, run as a container of the image
// with the engine's socket, as an operator on a box without curl would.
func TestAPIVerbose(t *testing.T) {
	onDockerAPIs(t, func(t *testing.T, c *dockerapi.Client) {
		r := runAction(t, c, tinkAgent, action{name: "e2e api verbose", entrypoint: []string{"/waitdaemon", "api", "GET", "/containers/json", "--verbose"}})
		if r.ExitCode != 0 {
			t.Fatalf("api GET /containers/json: exit %d:\n%s", r.ExitCode, r.Logs)
		}
		for _, want := range []string{
			`(?m)^> GET /_ping HTTP/1\.1$`,
			`(?m)^< Api-Version: 1\.\d+$`,
			`(?m)^> GET /v1\.\d+/containers/json HTTP/1\.1$`,
			`(?m)^> User-Agent: waitdaemon/`,
			`(?m)^< HTTP/1\.1 200 OK$`,
			`(?m)^< Content-Type: application/json$`,
			`(?m)^\[`,
		} {
			if !regexp.MustCompile(want).MatchString(r.Logs) {
				t.Errorf("trace lacks %s:\n%s", want, r.Logs)
			}
		}

		r = runAction(t, c, tinkAgent, action{name: "e2e api missing", entrypoint: []string{"/waitdaemon", "api", "GET", "/containers/waitdaemon-no-such-container/json"}})
		if r.ExitCode != 1 || !regexp.MustCompile(`404: .*waitdaemon-no-such-container`).MatchString(r.Logs) {
			t.Errorf("api GET of a missing container: exit %d, output %q; want exit 1, the status and the engine's message naming it", r.ExitCode, r.Logs)
		}

		r = runAction(t, c, tinkAgent, action{name: "e2e api pinned", entrypoint: []string{"/waitdaemon", "api", "GET", "/v1.40/version"}})
		if r.ExitCode != 0 || !strings.Contains(r.Logs, `"ApiVersion"`) {
			t.Errorf("api GET /v1.40/version: exit %d, output %q", r.ExitCode, r.Logs)
		}
	})
}

// TestVersion prints the binary's version and the engine's.
func TestVersion(t *testing.T) {
	onDockerAPIs(t, func(t *testing.T, c *dockerapi.Client) {
		r := runAction(t, c, tinkAgent, action{name: "e2e version", entrypoint: []string{"/waitdaemon", "version"}})
		if r.ExitCode != 0 || !regexp.MustCompile(`(?m)^engine: linux \S+, API 1\.\d+ \(minimum 1\.\d+\), using 1\.\d+$`).MatchString(r.Logs) {
			t.Errorf("version: exit %d, output %q", r.ExitCode, r.Logs)
		}
	})
}
