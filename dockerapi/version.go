package dockerapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// MaxVersion is the newest API version this client was tested with. The
// client never asks for more, even from a newer engine.
const MaxVersion = "1.50"

// MinVersion is the oldest API version this client speaks, and the one
// assumed for an engine whose ping carries no Api-Version header.
const MinVersion = "1.24"

// APIVersion returns the negotiated API version, pinging the engine once
// to learn it: min(MaxVersion, the engine's Api-Version).
func (c *Client) APIVersion(ctx context.Context) (string, error) {
	if err := c.init(); err != nil {
		return "", err
	}
	c.negotiate.Lock()
	defer c.negotiate.Unlock()
	if c.version != "" {
		return c.version, nil
	}
	p, err := c.ping(ctx)
	if err != nil {
		return "", err
	}
	v, err := Negotiate(p.APIVersion)
	if err != nil {
		return "", err
	}
	c.version = v
	return v, nil
}

// Podman says whether the engine is Podman's Docker-compatible API, from
// the ping the negotiation made (one more when the version is pinned).
func (c *Client) Podman(ctx context.Context) (bool, error) {
	if err := c.init(); err != nil {
		return false, err
	}
	c.negotiate.Lock()
	defer c.negotiate.Unlock()
	p, err := c.ping(ctx)
	return p.Libpod, err
}

// ping is the engine's ping, asked once; negotiate is held.
func (c *Client) ping(ctx context.Context) (Ping, error) {
	if c.pinged == nil {
		p, err := c.Ping(ctx)
		if err != nil {
			return p, err
		}
		c.pinged = &p
	}
	return *c.pinged, nil
}

// Negotiate picks the version to use with an engine whose ping said
// engineVersion: min(MaxVersion, engineVersion), 1.24 when it said nothing,
// and an error when the engine is older than MinVersion.
func Negotiate(engineVersion string) (string, error) {
	if engineVersion == "" {
		return MinVersion, nil
	}
	if _, ok := parseVersion(engineVersion); !ok {
		return "", fmt.Errorf("engine API version %q: expected MAJOR.MINOR", engineVersion)
	}
	if VersionLess(engineVersion, MinVersion) {
		return "", fmt.Errorf("engine API version %s is too old: waitdaemon needs at least %s (Docker 1.12 or newer)", engineVersion, MinVersion)
	}
	if VersionLess(MaxVersion, engineVersion) {
		return MaxVersion, nil
	}
	return engineVersion, nil
}

// VersionLess reports whether API version a is older than b. Versions that
// do not parse sort first.
func VersionLess(a, b string) bool {
	va, _ := parseVersion(a)
	vb, _ := parseVersion(b)
	return slices.Compare(va[:], vb[:]) < 0
}

func parseVersion(v string) ([2]int, bool) {
	major, minor, ok := strings.Cut(v, ".")
	if !ok {
		return [2]int{}, false
	}
	a, err1 := strconv.Atoi(major)
	b, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil || a < 0 || b < 0 {
		return [2]int{}, false
	}
	return [2]int{a, b}, true
}

// hasVersionPrefix reports whether path starts with /vX.Y/.
func hasVersionPrefix(path string) bool {
	rest, ok := strings.CutPrefix(path, "/v")
	if !ok {
		return false
	}
	v, _, _ := strings.Cut(rest, "/")
	_, ok = parseVersion(v)
	return ok
}

// EngineVersion returns the engine's version, from GET /version.
func (c *Client) EngineVersion(ctx context.Context) (VersionInfo, error) {
	var out VersionInfo
	if err := c.do(ctx, request{method: http.MethodGet, path: "/version", ok: []int{200}, again: true}, &out); err != nil {
		return VersionInfo{}, fmt.Errorf("asking the engine's version: %w", err)
	}
	return out, nil
}
