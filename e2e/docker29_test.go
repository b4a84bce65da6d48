package e2e

// Docker 29 (API 1.56, with the containerd image store), built and
// started beside Debian's 20.10 by scripts/docker29.sh, as a row of the
// engine table: the action containers run on it with its socket bound at
// /var/run/docker.sock.

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

var docker29 struct {
	once   sync.Once
	err    error
	socket string
}

// setupDocker29 returns a client for Docker 29, with the action and probe
// images (built by Docker 20.10 in setup) loaded into it. It starts the
// engine with scripts/docker29.sh, which builds it the first time; it
// fails the test, saying how to get one, when that fails. It never skips.
func setupDocker29(t *testing.T) *dockerapi.Client {
	t.Helper()
	setup(t) // Docker 20.10 builds waitdaemon:e2e and waitdaemon-probe:e2e
	docker29.once.Do(func() { docker29.socket, docker29.err = startDocker29() })
	if docker29.err != nil {
		t.Fatalf("Docker 29: %v\n(start it with `make docker29`: the first run builds it into /var/cache/waitdaemon, about 10 minutes)", docker29.err)
	}
	return &dockerapi.Client{Socket: docker29.socket, WaitForEngine: 2 * time.Second}
}

func startDocker29() (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("../scripts/docker29.sh")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/docker29.sh: %v\n%s", err, tailOf(stderr.Bytes(), 20))
	}
	socket := strings.TrimSpace(string(out))
	// docker save | docker -H unix://… load: the same names. (Not the
	// same IDs: Docker 29's is the manifest's digest, not the config's.)
	save := exec.Command("docker", "save", actionImage, probeImage)
	load := exec.Command("docker", "-H", "unix://"+socket, "load", "-q")
	var saveErr, loadOut bytes.Buffer
	save.Stderr = &saveErr
	load.Stdout, load.Stderr = &loadOut, &loadOut
	pipe, err := save.StdoutPipe()
	if err != nil {
		return "", err
	}
	load.Stdin = pipe
	if err := save.Start(); err != nil {
		return "", fmt.Errorf("docker save: %w", err)
	}
	lerr := load.Run()
	if err := save.Wait(); err != nil {
		return "", fmt.Errorf("docker save %s %s: %v\n%s", actionImage, probeImage, err, saveErr.String())
	}
	if lerr != nil {
		return "", fmt.Errorf("loading the images into Docker 29: %v\n%s", lerr, loadOut.String())
	}
	return socket, nil
}
