package e2e

// Docker 29 (API 1.56, with the containerd image store), Docker 28.2.2
// (API 1.50, HookOS v0.11's) and Docker 26.1.4 (API 1.45, HookOS v0.9's
// line), each built and started beside Debian's 20.10 by
// scripts/docker.sh, as rows of the engine table: the action containers
// run on each with its socket bound at /var/run/docker.sock.

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// builtDocker is one of the Docker engines scripts/docker.sh builds and
// starts, by its major version.
type builtDocker struct {
	version string
	once    sync.Once
	err     error
	socket  string
}

var (
	docker29 = &builtDocker{version: "29"}
	docker28 = &builtDocker{version: "28"}
	docker26 = &builtDocker{version: "26"}
	// builtDockers are the rows' engines by row name.
	builtDockers = map[string]*builtDocker{"docker29": docker29, "docker28": docker28, "docker26": docker26}
)

func setupDocker29(t *testing.T) *dockerapi.Client { return docker29.setup(t) }
func setupDocker28(t *testing.T) *dockerapi.Client { return docker28.setup(t) }
func setupDocker26(t *testing.T) *dockerapi.Client { return docker26.setup(t) }

// setup returns a client for the engine, with the action and probe images
// (built by Docker 20.10 in setup) loaded into it. It starts the engine
// with scripts/docker.sh, which builds it the first time; it fails the
// test, saying how to get one, when that fails. It never skips.
func (d *builtDocker) setup(t *testing.T) *dockerapi.Client {
	t.Helper()
	setup(t) // Docker 20.10 builds waitdaemon:e2e and waitdaemon-probe:e2e
	d.once.Do(func() { d.socket, d.err = d.start() })
	if d.err != nil {
		t.Fatalf("Docker %s: %v\n(start it with `make docker%s`: the first run builds it into /var/cache/waitdaemon, about 10 minutes)", d.version, d.err, d.version)
	}
	return &dockerapi.Client{Socket: d.socket, WaitForEngine: 2 * time.Second}
}

func (d *builtDocker) start() (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("../scripts/docker.sh", d.version)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/docker.sh %s: %v\n%s", d.version, err, tailOf(stderr.Bytes(), 20))
	}
	socket := strings.TrimSpace(string(out))
	// docker save | docker -H unix://… load: the same names. (Not the
	// same IDs on Docker 29: its is the manifest's digest, not the
	// config's.)
	if err := loadImages(exec.Command("docker", "-H", "unix://"+socket, "load", "-q")); err != nil {
		return "", fmt.Errorf("loading the images into Docker %s: %w", d.version, err)
	}
	return socket, nil
}
