package e2e

// Registries by name, as air-gapped sites run them: plain HTTP or behind
// a private CA, declared to the engine the way each OS does it. CaptainOS
// writes a hosts.toml under /etc/containerd/certs.d for each of its
// insecure_registries= entries; HookOS lists them in Docker's own
// insecure-registries. The registries run on 127.0.0.1, but the engines
// reach them by a name that /etc/hosts maps there, which they do not
// treat as local: containerd's resolver and Docker's take only localhost
// and loopback IP literals for plain-HTTP registries of their own accord.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
)

const (
	// registryName is the tests' registry by name; trapName another
	// registry's, one the credentials are not for.
	registryName = "registry.waitdaemon.test"
	trapName     = "trap.waitdaemon.test"
	// namedRegistryPort is the plain-HTTP registry's port:
	// scripts/docker.sh declares registry.waitdaemon.test:5017 in
	// Docker 29's, 28's and 26's insecure-registries, as HookOS would.
	namedRegistryPort = 5017
	// hostsMark ends the /etc/hosts line the tests add, so that they
	// find it again, even one left by a run that was killed.
	hostsMark = "# waitdaemon-e2e"
)

// namedHosts counts the tests that need the /etc/hosts line.
var namedHosts struct {
	sync.Mutex
	users int
}

// nameRegistries maps registryName and trapName to 127.0.0.1 in
// /etc/hosts until the test ends, and removes their hosts.toml files that
// an earlier run, killed, left. Go programs (containerd, dockerd) read
// /etc/hosts again at most every 5 s: it waits that long, so that no
// engine looks either name up in DNS, which would leave this machine.
func nameRegistries(t *testing.T) {
	t.Helper()
	namedHosts.Lock()
	defer namedHosts.Unlock()
	if namedHosts.users == 0 {
		// What a run that was killed left: the undeclared cases need none.
		for _, name := range []string{registryName, trapName} {
			stale, _ := filepath.Glob(filepath.Join(containerdapi.DefaultHostDir, name+":*"))
			for _, d := range stale {
				_ = os.RemoveAll(d)
			}
		}
		if err := editHosts(true); err != nil {
			t.Fatalf("adding %s to /etc/hosts (the tests run as root): %v", registryName, err)
		}
		time.Sleep(6 * time.Second)
	}
	namedHosts.users++
	t.Cleanup(func() {
		namedHosts.Lock()
		defer namedHosts.Unlock()
		if namedHosts.users--; namedHosts.users == 0 {
			if err := editHosts(false); err != nil {
				t.Errorf("removing %s from /etc/hosts: %v", registryName, err)
			}
		}
	})
}

// editHosts removes the tests' line from /etc/hosts, and adds it again
// when add. The new file replaces the old one whole (a rename), so that no
// reader ever sees half of it.
func editHosts(add bool) error {
	const path = "/etc/hosts"
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if l != "" && !strings.HasSuffix(strings.TrimRight(l, "\n"), hostsMark) {
			b.WriteString(l)
		}
	}
	if add {
		if s := b.String(); s != "" && !strings.HasSuffix(s, "\n") {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "127.0.0.1 %s %s %s\n", registryName, trapName, hostsMark)
	}
	if b.String() == string(data) {
		return nil
	}
	tmp := path + ".waitdaemon-e2e"
	if err := os.WriteFile(tmp, []byte(b.String()), fi.Mode().Perm()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		// /etc/hosts bound into a container cannot be replaced: rewrite it.
		_ = os.Remove(tmp)
		return os.WriteFile(path, []byte(b.String()), fi.Mode().Perm())
	}
	return nil
}

// declareRegistry writes /etc/containerd/certs.d/<host>/hosts.toml, and
// the files beside it (name: content), and removes them when the test
// ends, with certs.d itself if the test made it.
func declareRegistry(t *testing.T, host, hostsToml string, files map[string][]byte) {
	t.Helper()
	certsD := containerdapi.DefaultHostDir
	var made []string // directories the test made, deepest last
	for _, d := range []string{filepath.Dir(certsD), certsD} {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			made = append(made, d)
		}
	}
	dir := filepath.Join(certsD, host)
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
		for i := len(made) - 1; i >= 0; i-- {
			_ = os.Remove(made[i]) // only if still empty
		}
	})
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	all := map[string][]byte{"hosts.toml": []byte(hostsToml)}
	maps.Copy(all, files)
	for name, content := range all {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// captainHostsToml is what CaptainOS's tink-agent-setup writes for an
// insecure_registries= entry host (host:port).
func captainHostsToml(host string) string {
	return fmt.Sprintf(`server = "http://%[1]s"

[host."http://%[1]s"]
  capabilities = ["pull", "resolve", "push"]
  skip_verify = true
`, host)
}

// privateCA makes a CA and a server certificate it signs for registryName
// and 127.0.0.1: the CA's certificate (PEM) and the server's.
func privateCA(t *testing.T) (caPEM []byte, server *serverCert) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "waitdaemon e2e private CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: registryName},
		DNSNames:     []string{registryName},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		&serverCert{
			cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
			key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		}
}

// byName is ref (127.0.0.1:PORT/…) as pulled by the registry's name.
func byName(ref string) string { return strings.Replace(ref, "127.0.0.1:", registryName+":", 1) }

// pullByName runs an action whose IMAGE is ref, pulled by name, and
// checks that the action ran the probe from it, and that the registry at
// addr served its manifest to the engine.
func pullByName(t *testing.T, e rig, addr, ref string, env map[string]string) (r ran, waiterOut, report string) {
	t.Helper()
	e.removeImage(t, ref)
	t.Cleanup(func() { e.removeImage(t, ref) })
	before := manifestFetches(registryLog(t, addr))
	out := t.TempDir()
	env = merged(env, map[string]string{"IMAGE": ref, "WAIT_SECONDS": "1"})
	began := time.Now()
	r = e.run(t, tinkAgent, action{name: "e2e " + t.Name(), command: []string{"reboot"}, env: env, volumes: []string{out + ":/out"}})
	if d, handed := pullDecision(t, r.Logs); d != "pull" {
		t.Errorf("pull decision %q, want pull: %v", d, handed)
	}
	t.Logf("the action pulled %s and handed off in %v", ref, r.FinishedAt.Sub(began).Round(time.Millisecond))
	waiterOut, report = ranOK(t, e, r, out)
	if after := manifestFetches(registryLog(t, addr)); after <= before {
		t.Errorf("the registry served no manifest during the action: it was not pulled from there\n%s", registryLog(t, addr))
	}
	return r, waiterOut, report
}

// merged is a copy of a with b's entries added.
func merged(a, b map[string]string) map[string]string {
	out := maps.Clone(b)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}

// TestNamedRegistryContainerd pulls IMAGE, on containerd, from registries
// by name, as CaptainOS declares them: plain HTTP in the hosts.toml it
// writes for insecure_registries=, HTTPS with a private CA named in a
// hosts.toml, and with credentials that go to that registry alone; and
// without a hosts.toml, the pull fails saying where one goes.
func TestNamedRegistryContainerd(t *testing.T) {
	e := openRig(t, engineNamed("containerd"))
	nameRegistries(t)
	push := setup(t) // Docker 20.10 pushes to 127.0.0.1, which it takes as insecure

	// One registry of each kind, pulled from undeclared, then declared.
	plain := startRegistryWith(t, registryOptions{port: namedRegistryPort})
	plainRef := byName(pushProbe(t, push, plain, false))
	t.Run("plain HTTP undeclared", func(t *testing.T) {
		undeclared(t, e, plainRef, "server gave HTTP response to HTTPS client")
	})
	t.Run("plain HTTP declared as CaptainOS does", func(t *testing.T) {
		host := byName(plain)
		declareRegistry(t, host, captainHostsToml(host), nil)
		pullByName(t, e, plain, plainRef, nil)
	})

	caPEM, cert := privateCA(t)
	secure := startRegistryWith(t, registryOptions{tls: cert})
	secureRef := byName(pushProbe(t, push, secure, false))
	t.Run("HTTPS with a private CA undeclared", func(t *testing.T) {
		undeclared(t, e, secureRef, "x509: certificate signed by unknown authority")
	})
	t.Run("HTTPS with a private CA", func(t *testing.T) {
		host := byName(secure)
		dir := filepath.Join(containerdapi.DefaultHostDir, host)
		declareRegistry(t, host, fmt.Sprintf(`server = "https://%[1]s"

[host."https://%[1]s"]
  capabilities = ["pull", "resolve"]
  ca = "%[2]s/ca.crt"
`, host, dir), map[string][]byte{"ca.crt": caPEM})
		pullByName(t, e, secure, secureRef, nil)
	})

	t.Run("credentials", func(t *testing.T) {
		addr := startRegistryWith(t, registryOptions{auth: true})
		ref := byName(pushProbe(t, push, addr, true))
		host := byName(addr)
		declareRegistry(t, host, captainHostsToml(host), nil)
		authB64 := base64.StdEncoding.EncodeToString([]byte(registryUser + ":" + registryPassword))
		creds := map[string]string{"WAITDAEMON_REGISTRY_USERNAME": registryUser, "WAITDAEMON_REGISTRY_PASSWORD": registryPassword}

		t.Run("reach their registry", func(t *testing.T) {
			r, waiterOut, report := pullByName(t, e, addr, ref, merged(creds, map[string]string{"WAITDAEMON_VERBOSE": "true"}))
			if want := e.row().tracedAuth; !strings.Contains(r.Logs, want) {
				t.Errorf("the action's trace does not show the credentials redacted, %q:\n%s", want, shorten(r.Logs, 4000))
			}
			noSecret(t, map[string]string{"action's output": r.Logs, "waiter's output": waiterOut, "user container's probe report": report}, registryPassword, authB64)
		})

		t.Run("and no other", func(t *testing.T) {
			trap := startTrapRegistry(t)
			trapHost := strings.Replace(trap.addr, "127.0.0.1:", trapName+":", 1)
			declareRegistry(t, trapHost, captainHostsToml(trapHost), nil)
			fallback := trapHost + "/e2e/fallback:1"
			e.removeImage(t, ref)
			t.Cleanup(func() { e.removeImage(t, ref) })
			r := e.run(t, tinkAgent, action{name: "e2e named credentials fallback", command: []string{"reboot"}, env: merged(creds, map[string]string{
				"IMAGE": ref, "WAIT_SECONDS": "1",
				"WAITDAEMON_FALLBACK_IMAGE": fallback, "WAITDAEMON_FALLBACK_COMMAND": `["reboot","-f"]`,
			})})
			t.Logf("the action's output:\n%s", r.Logs)
			if r.ExitCode != 1 || !strings.Contains(r.Logs, "pulling image "+fallback) {
				t.Errorf("exit %d; want 1, and the fallback's pull named", r.ExitCode)
			}
			seen := trap.requests()
			if len(seen) == 0 {
				t.Fatalf("containerd never asked %s for the fallback: the test proves nothing", trapHost)
			}
			basic := "Basic " + authB64
			for _, s := range seen {
				if strings.Contains(s, basic) || strings.Contains(s, registryPassword) {
					t.Errorf("the fallback's registry was sent IMAGE's credentials: %s", s)
				}
			}
			t.Logf("the fallback's registry was asked: %s", strings.Join(seen, "; "))
			noSecret(t, map[string]string{"action's output": r.Logs}, registryPassword, authB64)
			waitGone(t, e, r.ID, 5*time.Second)
		})
	})
}

// undeclared runs an action whose IMAGE, ref, is on a registry by name
// that no hosts.toml declares: the pull fails with the daemon's reason
// (containing why), naming the registry and the hosts.toml to write.
func undeclared(t *testing.T, e rig, ref, why string) {
	t.Helper()
	host, _, _ := strings.Cut(ref, "/")
	if _, err := os.Stat(filepath.Join(containerdapi.DefaultHostDir, host)); err == nil {
		t.Fatalf("%s declares %s: the test proves nothing", containerdapi.DefaultHostDir, host)
	}
	e.removeImage(t, ref)
	r := e.run(t, tinkAgent, action{name: "e2e " + t.Name(), command: []string{"reboot"}, env: map[string]string{"IMAGE": ref, "WAIT_SECONDS": "0"}})
	t.Logf("the action's output:\n%s", r.Logs)
	for _, want := range []string{
		"pulling image " + ref,
		"registry " + host,
		filepath.Join(containerdapi.DefaultHostDir, host, "hosts.toml"),
		why,
	} {
		if r.ExitCode != 1 || !strings.Contains(r.Logs, want) {
			t.Errorf("exit %d, want 1 and %q in the output", r.ExitCode, want)
		}
	}
	if e.hasImage(t, ref) {
		t.Errorf("%s is on the engine, from a registry it should not have reached", ref)
	}
	waitGone(t, e, r.ID, 5*time.Second)
}

// TestContainerdHostDirMissing: a Transfer request that names a certs.d
// directory the daemon's host does not have pulls as one naming none, so
// waitdaemon can always name CaptainOS's.
func TestContainerdHostDirMissing(t *testing.T) {
	c, _, _ := setupContainerd(t)
	addr := startRegistry(t, false)
	ref := pushProbe(t, setup(t), addr, false)
	missing := filepath.Join(t.TempDir(), "no-such-certs.d")
	r := containerdRig{c: c}
	r.removeImage(t, ref)
	t.Cleanup(func() { r.removeImage(t, ref) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	if err := c.Pull(ctx, containerdapi.PullRequest{Ref: ref, HostDir: missing}); err != nil {
		t.Fatalf("pulling %s with host_dir %s, which is not there: %v", ref, missing, err)
	}
	t.Logf("pulled %s with host_dir %s (not there) in %v", ref, missing, time.Since(began).Round(time.Millisecond))
	if !r.hasImage(t, ref) {
		t.Errorf("%s is not in containerd after the pull", ref)
	}
}

// TestNamedRegistryDocker pulls IMAGE, on Docker 29, 28.2 and 26.1, from a
// plain-HTTP registry by name that their daemon.json lists in
// insecure-registries, as HookOS declares them (scripts/docker.sh writes
// it).
func TestNamedRegistryDocker(t *testing.T) {
	for _, row := range engines {
		if builtDockers[row.name] == nil {
			continue
		}
		t.Run(row.name, func(t *testing.T) {
			e := openRig(t, row)
			nameRegistries(t)
			addr := startRegistryWith(t, registryOptions{port: namedRegistryPort})
			ref := byName(pushProbe(t, pusher(t, e), addr, false))
			pullByName(t, e, addr, ref, nil)
		})
	}
}
