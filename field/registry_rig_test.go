package field

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// RegistryName is the registry's name in the guest: its /etc/hosts maps
// it to GuestForwardAddr, and each OS declares it as a plain-HTTP
// registry (scripts/field-image.sh). Port 5017 in the guest reaches the
// registry's port on the host's loopback, whichever that is.
const RegistryName = "registry.waitdaemon.test:5017"

// Registry is Debian's docker-registry (Distribution 2.8) on the host's
// loopback.
type Registry struct {
	Port int
	cmd  *exec.Cmd
	log  bytes.Buffer
}

// StartRegistry runs a registry on a free port of 127.0.0.1, its storage
// in dir.
func StartRegistry(dir string) (*Registry, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	config := fmt.Sprintf("version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%d\n", filepath.Join(dir, "storage"), port)
	file := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		return nil, err
	}
	r := &Registry{Port: port}
	r.cmd = exec.Command("docker-registry", "serve", file)
	r.cmd.Stdout, r.cmd.Stderr = &r.log, &r.log
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // gone with the test, however it ends
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting docker-registry: %w", err)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v2/", port))
		if err == nil {
			resp.Body.Close()
			return r, nil
		}
	}
	r.Stop()
	return nil, fmt.Errorf("docker-registry did not answer on 127.0.0.1:%d within 20 s:\n%s", port, r.log.String())
}

// Push pushes the host Docker's image local to the registry as name
// (repository:tag).
func (r *Registry) Push(ctx context.Context, local, name string) error {
	ref := fmt.Sprintf("127.0.0.1:%d/%s", r.Port, name)
	for _, args := range [][]string{{"tag", local, ref}, {"push", ref}, {"rmi", ref}} {
		if out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("docker %v: %v\n%s", args, err, out)
		}
	}
	return nil
}

// Stop ends the registry.
func (r *Registry) Stop() {
	if r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	}
}
