package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// The credentials of the registry with auth. The password is distinctive
// so that finding it anywhere in an output is a leak, not a coincidence.
const (
	registryUser     = "e2e-user"
	registryPassword = "Pa55-e2e-s3cret-Wd"
)

// probeRepo is where the probe image lives in a test registry.
const probeRepo = "e2e/probe"

// debianTools installs, once, the Debian packages that hold commands a
// test runs.
type debianTools struct {
	sync.Once
	err error
}

// require fails the test when a command of tools (command: package) is
// missing and cannot be installed with apt-get.
func (d *debianTools) require(t *testing.T, tools map[string]string) {
	t.Helper()
	d.Do(func() {
		var missing []string
		for bin, pkg := range tools {
			if _, err := exec.LookPath(bin); err != nil {
				missing = append(missing, pkg)
			}
		}
		if len(missing) == 0 {
			return
		}
		install := func() ([]byte, error) {
			return aptGet(append([]string{"install", "-y", "--no-install-recommends"}, missing...)...).CombinedOutput()
		}
		out, err := install()
		if err != nil { // the package lists may be missing on a fresh machine
			upd, uerr := aptGet("update").CombinedOutput()
			out = append(out, upd...)
			if uerr == nil {
				var again []byte
				again, err = install()
				out = append(out, again...)
			}
		}
		if err != nil {
			d.err = fmt.Errorf("installing %s with apt-get: %v\n%s", strings.Join(missing, " "), err, out)
			return
		}
		for bin := range tools {
			if _, err := exec.LookPath(bin); err != nil {
				d.err = fmt.Errorf("%s is still missing after installing %s: %v", bin, strings.Join(missing, " "), err)
				return
			}
		}
	})
	if d.err != nil {
		var pkgs []string
		for _, pkg := range tools {
			pkgs = append(pkgs, pkg)
		}
		slices.Sort(pkgs)
		pkgs = slices.Compact(pkgs)
		t.Fatalf("this test needs Debian's %s (run as root: apt-get install -y %s): %v", strings.Join(pkgs, " and "), strings.Join(pkgs, " "), d.err)
	}
}

// registryTools installs what startRegistry runs: Debian's
// docker-registry (Distribution 2.8) and apache2-utils' htpasswd.
var registryTools debianTools

// requireRegistryTools fails the test when docker-registry or htpasswd is
// missing and cannot be installed.
func requireRegistryTools(t *testing.T) {
	t.Helper()
	registryTools.require(t, map[string]string{"docker-registry": "docker-registry", "htpasswd": "apache2-utils"})
}

// syncBuffer is a bytes.Buffer safe for a subprocess's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// registryLogs holds each running test registry's output, by address.
var registryLogs sync.Map // addr: *syncBuffer

// registryLog returns what the registry at addr has logged so far,
// access log included.
func registryLog(t *testing.T, addr string) string {
	t.Helper()
	b, ok := registryLogs.Load(addr)
	if !ok {
		t.Fatalf("no registry was started at %s", addr)
	}
	return b.(*syncBuffer).String()
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRegistry runs a Distribution registry on 127.0.0.1, with its
// storage in a temporary directory, until the test ends. With auth, it
// takes registryUser and registryPassword (htpasswd, basic auth). The
// engine treats 127.0.0.0/8 registries as insecure, so plain HTTP works.
func startRegistry(t *testing.T, auth bool) (addr string) {
	t.Helper()
	return startRegistryWith(t, registryOptions{auth: auth})
}

// registryOptions is how startRegistryWith runs a registry.
type registryOptions struct {
	auth bool
	// port is the port on 127.0.0.1; zero means a free one.
	port int
	// tls, when set, serves HTTPS with this certificate and key (PEM).
	tls *serverCert
}

// serverCert is a registry's TLS certificate and key, PEM-encoded.
type serverCert struct{ cert, key []byte }

// startRegistryWith is startRegistry with options: a port of the test's
// choosing, HTTPS.
func startRegistryWith(t *testing.T, o registryOptions) (addr string) {
	t.Helper()
	requireRegistryTools(t)
	dir := t.TempDir()
	port := o.port
	if port == 0 {
		port = freePort(t)
	}
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	config := fmt.Sprintf(`version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: %s
http:
  addr: %s
`, filepath.Join(dir, "storage"), addr)
	client := &http.Client{Timeout: time.Second}
	scheme := "http"
	if o.tls != nil {
		certFile, keyFile := filepath.Join(dir, "registry.crt"), filepath.Join(dir, "registry.key")
		if err := os.WriteFile(certFile, o.tls.cert, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, o.tls.key, 0o600); err != nil {
			t.Fatal(err)
		}
		config += fmt.Sprintf("  tls:\n    certificate: %s\n    key: %s\n", certFile, keyFile)
		// Only whether it answers: the certificate is the engine's to judge.
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
		scheme = "https"
	}
	if o.auth {
		line, err := exec.Command("htpasswd", "-Bbn", registryUser, registryPassword).Output()
		if err != nil {
			t.Fatalf("htpasswd: %v", err)
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, bytes.TrimSpace(line), 0o600); err != nil {
			t.Fatal(err)
		}
		config += fmt.Sprintf("auth:\n  htpasswd:\n    realm: waitdaemon-e2e\n    path: %s\n", htpasswd)
	}
	configFile := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cmd := exec.Command("docker-registry", "serve", configFile)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting docker-registry: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		registryLogs.Delete(addr)
	})
	registryLogs.Store(addr, logs)

	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("docker-registry exited before answering on %s: %v\n%s", addr, err, logs)
		default:
		}
		resp, err := client.Get(scheme + "://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker-registry did not answer GET %s://%s/v2/ within 10s (last: %v)\n%s", scheme, addr, describe(resp, err), logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func describe(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

// raw sends one request to the engine and fails the test on an error
// other than ErrNotFound, which it returns when allowNotFound.
func raw(t *testing.T, c *dockerapi.Client, method, path string, allowNotFound bool) {
	t.Helper()
	resp, err := c.Raw(testCtx(t), method, path, nil)
	if allowNotFound && errors.Is(err, dockerapi.ErrNotFound) {
		return
	}
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// tagProbe tags the probe image as ref (repo:tag) on the engine.
func tagProbe(t *testing.T, c *dockerapi.Client, repo, tag string) {
	t.Helper()
	raw(t, c, "POST", "/images/"+probeImage+"/tag?"+url.Values{"repo": {repo}, "tag": {tag}}.Encode(), false)
}

// removeImage removes the name ref from the engine (the image itself
// stays while another name, the probe image's, holds it).
func removeImage(t *testing.T, c *dockerapi.Client, ref string) {
	t.Helper()
	raw(t, c, "DELETE", "/images/"+ref, true)
}

func imagePresent(t *testing.T, c *dockerapi.Client, ref string) bool {
	t.Helper()
	_, err := c.ImageInspect(testCtx(t), ref)
	if err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// pushProbe pushes the probe image to the registry at addr as
// <addr>/e2e/probe:1 and removes that name from the engine again, so
// that an action must pull it. It returns the name. The docker CLI logs
// in with a configuration directory of its own, never the user's.
func pushProbe(t *testing.T, c *dockerapi.Client, addr string, auth bool) string {
	t.Helper()
	ref := addr + "/" + probeRepo + ":1"
	tagProbe(t, c, addr+"/"+probeRepo, "1")
	t.Cleanup(func() { removeImage(t, c, ref) })
	cliConfig := t.TempDir()
	docker := func(stdin string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "docker", append([]string{"--config", cliConfig, "-H", "unix://" + c.SocketPath()}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("docker %s: %v\n%s\nregistry log:\n%s", strings.Join(args, " "), err, out, registryLog(t, addr))
		}
	}
	if auth {
		docker(registryPassword, "login", "--username", registryUser, "--password-stdin", addr)
	}
	docker("", "push", ref)
	removeImage(t, c, ref)
	if imagePresent(t, c, ref) {
		t.Fatalf("%s is still on the engine after its removal", ref)
	}
	return ref
}

// followWaiterRaw streams the whole output of the waiter of action id
// (JSON lines and any trace) until it exits. The waiter must still be
// there.
func followWaiterRaw(t *testing.T, c *dockerapi.Client, actionID string) string {
	t.Helper()
	if w, ok := waiterWatches.LoadAndDelete(actionID); ok {
		return w.(*waiterWatch).output(t)
	}
	if isPodman(c) {
		return followPodmanWaiter(t, c, actionID)
	}
	ctx := testCtx(t)
	list, err := c.ContainerList(ctx, "org.waitdaemon.action-id="+actionID, "org.waitdaemon.role=waiter")
	if err != nil || len(list) != 1 {
		t.Fatalf("looking for the waiter of %s: %v, %d found", actionID[:12], err, len(list))
	}
	var out bytes.Buffer
	err = c.ContainerLogs(ctx, list[0].ID, dockerapi.LogsOptions{Follow: true}, &out, &out)
	if err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
		t.Fatalf("following the waiter: %v", err)
	}
	return out.String()
}

// pullDecision is the first pull decision of the action's hand-off line.
func pullDecision(t *testing.T, logs string) (decision string, handed event) {
	t.Helper()
	handed, ok := find(events(logs), "handed off")
	if !ok {
		t.Fatalf("phase 1 logged no hand-off line:\n%s", logs)
	}
	pulls, _ := handed["pull"].([]any)
	if len(pulls) == 0 {
		t.Fatalf("the hand-off line has no pull decision: %v", handed)
	}
	p, _ := pulls[0].(map[string]any)
	d, _ := p["decision"].(string)
	return d, handed
}

// ranOK checks that the action handed off, that the user container ran
// (its probe report is in out) and exited 0, and that nothing is left.
// It returns the waiter's whole output and the probe's report, raw.
func ranOK(t *testing.T, e rig, r ran, out string) (waiterOut, report string) {
	t.Helper()
	if r.ExitCode != 0 {
		t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
	}
	waiterOut = e.waiter(t, r.ID)
	exited, ok := find(events(waiterOut), "user container exited")
	if !ok || exited.num("exit_code") != 0 {
		t.Errorf("the waiter did not log the user container's exit with code 0:\n%s", waiterOut)
	}
	waitDone(t, e, r.ID, 5*time.Second)
	if _, ok := readProbe(t, out, "probe"); !ok {
		t.Fatalf("the user container did not run: no probe report\nwaiter:\n%s", waiterOut)
	}
	data, err := os.ReadFile(filepath.Join(out, "probe.json"))
	if err != nil {
		t.Fatal(err)
	}
	return waiterOut, string(data)
}

// noSecret fails the test when any of the outputs holds a secret. It
// shows each leak with the trace's request line it belongs to.
func noSecret(t *testing.T, outputs map[string]string, secrets ...string) {
	t.Helper()
	for what, out := range outputs {
		for _, s := range secrets {
			if !strings.Contains(out, s) {
				continue
			}
			var leaks []string
			request := "(no request traced before it)"
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "> ") && strings.Contains(l, " HTTP/1.1") {
					request = l
				}
				if i := strings.Index(l, s); i >= 0 {
					leaks = append(leaks, fmt.Sprintf("  after %s: …%s…", request, l[max(0, i-60):min(len(l), i+len(s)+10)]))
				}
			}
			t.Errorf("the %s holds the secret %q:\n%s", what, s, strings.Join(leaks, "\n"))
		}
	}
}

// manifestFetches counts the manifest requests for the probe in a
// registry's access log.
func manifestFetches(log string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if (strings.Contains(l, `"GET /v2/`+probeRepo+`/manifests/`) || strings.Contains(l, `"HEAD /v2/`+probeRepo+`/manifests/`)) && strings.Contains(l, `HTTP/1.1" 200`) {
			n++
		}
	}
	return n
}

// refused is how engines say a registry refused a login or wants one:
// Docker 20.10 "unauthorized: authentication required" and "no basic auth
// credentials", Docker 29 "…: 401 Unauthorized".
var refused = regexp.MustCompile(`(?i)unauthorized|authentication required|no basic auth credentials|\b401\b`)

// TestRegistryAuth pulls IMAGE from a registry that requires a login,
// with the credentials from the action's environment or a Docker
// config.json, and checks that the password never shows.
func TestRegistryAuth(t *testing.T) {
	onPullers(t, func(t *testing.T, e rig) {
		addr := startRegistry(t, true)
		ref := pushProbe(t, pusher(t, e), addr, true)
		authB64 := base64.StdEncoding.EncodeToString([]byte(registryUser + ":" + registryPassword))
		secrets := []string{registryPassword, authB64}

		for _, verbose := range []bool{false, true} {
			t.Run(fmt.Sprintf("right credentials from the environment, verbose %v", verbose), func(t *testing.T) {
				e.removeImage(t, ref)
				out := t.TempDir()
				env := map[string]string{
					"IMAGE": ref, "WAIT_SECONDS": "1",
					"WAITDAEMON_REGISTRY_USERNAME": registryUser, "WAITDAEMON_REGISTRY_PASSWORD": registryPassword,
				}
				if verbose {
					env["WAITDAEMON_VERBOSE"] = "true"
				}
				r := e.run(t, tinkWorker, action{name: fmt.Sprintf("e2e registry env %v", verbose), command: []string{"reboot"}, env: env, volumes: []string{out + ":/out"}})
				if d, handed := pullDecision(t, r.Logs); d != "pull" {
					t.Errorf("pull decision %q, want pull: %v", d, handed)
				}
				waiterOut, report := ranOK(t, e, r, out)
				if !e.hasImage(t, ref) {
					t.Errorf("%s is not on the engine after the action pulled it", ref)
				}
				if verbose {
					if want := e.row().tracedAuth; !strings.Contains(r.Logs, want) {
						t.Errorf("the action's trace does not show the credentials redacted, %q:\n%s", want, shorten(r.Logs, 4000))
					}
					if !strings.Contains(waiterOut, "\n> ") {
						t.Errorf("the waiter traced nothing with WAITDAEMON_VERBOSE=true:\n%s", shorten(waiterOut, 2000))
					}
				}
				noSecret(t, map[string]string{"action's output": r.Logs, "waiter's output": waiterOut, "user container's probe report": report}, secrets...)
			})
		}

		t.Run("wrong credentials", func(t *testing.T) {
			e.removeImage(t, ref)
			r := e.run(t, tinkWorker, action{name: "e2e registry wrong", env: map[string]string{
				"IMAGE": ref, "WAIT_SECONDS": "0",
				"WAITDAEMON_REGISTRY_USERNAME": registryUser, "WAITDAEMON_REGISTRY_PASSWORD": "not-" + registryPassword,
			}})
			t.Logf("the action's output:\n%s", r.Logs)
			if r.ExitCode != 1 || !strings.Contains(r.Logs, "pulling image "+ref) || !refused.MatchString(r.Logs) {
				t.Errorf("exit %d, output:\n%s\nwant exit 1, \"pulling image %s\" and the engine's reason, a refused login", r.ExitCode, r.Logs, ref)
			}
			noSecret(t, map[string]string{"action's output": r.Logs}, "not-"+registryPassword)
			waitGone(t, e, r.ID, 2*time.Second)
		})

		t.Run("no credentials", func(t *testing.T) {
			e.removeImage(t, ref)
			// No variables, and no config.json in the action: anonymous.
			r := e.run(t, tinkWorker, action{name: "e2e registry none", env: map[string]string{"IMAGE": ref, "WAIT_SECONDS": "0"}})
			t.Logf("the action's output:\n%s", r.Logs)
			if r.ExitCode != 1 || !strings.Contains(r.Logs, "pulling image "+ref) || !refused.MatchString(r.Logs) {
				t.Errorf("exit %d, output:\n%s\nwant exit 1, \"pulling image %s\" and the engine's reason, a refused login", r.ExitCode, r.Logs, ref)
			}
			waitGone(t, e, r.ID, 2*time.Second)
		})

		configJSON := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, addr, authB64)
		for _, tc := range []struct {
			name, mount  string
			dockerConfig string
		}{
			{"config.json in /root/.docker", "/root/.docker", ""},
			{"config.json in DOCKER_CONFIG", "/creds", "/creds"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e.removeImage(t, ref)
				creds := t.TempDir()
				if err := os.WriteFile(filepath.Join(creds, "config.json"), []byte(configJSON), 0o600); err != nil {
					t.Fatal(err)
				}
				out := t.TempDir()
				env := map[string]string{"IMAGE": ref, "WAIT_SECONDS": "1"}
				if tc.dockerConfig != "" {
					env["DOCKER_CONFIG"] = tc.dockerConfig
				}
				r := e.run(t, tinkWorker, action{name: "e2e registry " + tc.name, command: []string{"reboot"}, env: env,
					volumes: []string{out + ":/out", creds + ":" + tc.mount + ":ro"}})
				if d, handed := pullDecision(t, r.Logs); d != "pull" {
					t.Errorf("pull decision %q, want pull: %v", d, handed)
				}
				waiterOut, report := ranOK(t, e, r, out)
				noSecret(t, map[string]string{"action's output": r.Logs, "waiter's output": waiterOut, "user container's probe report": report}, secrets...)
				// The config.json stays with the action; the other volumes travel.
				if strings.Contains(report, `"`+tc.mount+`"`) || !strings.Contains(report, `"/out"`) {
					t.Errorf("the user container's mounts: want /out, and not %s:\n%s", tc.mount, report)
				}
			})
		}
	})
}

// TestPullPolicy checks WAITDAEMON_PULL_POLICY against a registry without
// auth.
func TestPullPolicy(t *testing.T) {
	onPullers(t, func(t *testing.T, e rig) {
		addr := startRegistry(t, false)
		ref := pushProbe(t, pusher(t, e), addr, false)

		t.Run("if-not-present pulls an absent image", func(t *testing.T) {
			e.removeImage(t, ref)
			out := t.TempDir()
			r := e.run(t, tinkWorker, action{name: "e2e pull default", env: map[string]string{"IMAGE": ref, "WAIT_SECONDS": "1"}, volumes: []string{out + ":/out"}})
			if d, handed := pullDecision(t, r.Logs); d != "pull" {
				t.Errorf("pull decision %q, want pull: %v", d, handed)
			}
			ranOK(t, e, r, out)
			if !e.hasImage(t, ref) {
				t.Errorf("%s is not on the engine after the action pulled it", ref)
			}
		})

		t.Run("always pulls a present image", func(t *testing.T) {
			e.putProbe(t, ref)
			before := manifestFetches(registryLog(t, addr))
			out := t.TempDir()
			r := e.run(t, tinkWorker, action{name: "e2e pull always", env: map[string]string{"IMAGE": ref, "WAIT_SECONDS": "1", "WAITDAEMON_PULL_POLICY": "always"}, volumes: []string{out + ":/out"}})
			d, handed := pullDecision(t, r.Logs)
			if d != "pull" {
				t.Errorf("pull decision %q, want pull: %v", d, handed)
			}
			ranOK(t, e, r, out)
			if after := manifestFetches(registryLog(t, addr)); after <= before {
				t.Errorf("the registry served no manifest during the action (%d before, %d after): nothing was pulled\n%s", before, after, registryLog(t, addr))
			}
		})

		t.Run("never with the image present", func(t *testing.T) {
			e.putProbe(t, ref)
			before := manifestFetches(registryLog(t, addr))
			out := t.TempDir()
			r := e.run(t, tinkWorker, action{name: "e2e pull never present", env: map[string]string{"IMAGE": ref, "WAIT_SECONDS": "1", "WAITDAEMON_PULL_POLICY": "never"}, volumes: []string{out + ":/out"}})
			if d, handed := pullDecision(t, r.Logs); d != "present" {
				t.Errorf("pull decision %q, want present: %v", d, handed)
			}
			ranOK(t, e, r, out)
			if after := manifestFetches(registryLog(t, addr)); after != before {
				t.Errorf("the registry served %d manifests during the action, under WAITDAEMON_PULL_POLICY=never", after-before)
			}
		})

		t.Run("never with the image absent", func(t *testing.T) {
			e.removeImage(t, ref)
			before := manifestFetches(registryLog(t, addr))
			r := e.run(t, tinkWorker, action{name: "e2e pull never absent", env: map[string]string{"IMAGE": ref, "WAIT_SECONDS": "0", "WAITDAEMON_PULL_POLICY": "never"}})
			want := "image " + ref + " is not present, and WAITDAEMON_PULL_POLICY=never forbids pulling it"
			if r.ExitCode != 1 || !strings.Contains(r.Logs, want) {
				t.Errorf("exit %d, output:\n%s\nwant exit 1 and %q", r.ExitCode, r.Logs, want)
			}
			if after := manifestFetches(registryLog(t, addr)); after != before {
				t.Errorf("the registry served %d manifests during the action, under WAITDAEMON_PULL_POLICY=never", after-before)
			}
			if e.hasImage(t, ref) {
				t.Errorf("%s was pulled under WAITDAEMON_PULL_POLICY=never", ref)
			}
			waitGone(t, e, r.ID, 2*time.Second)
		})

		t.Run("bogus policy", func(t *testing.T) {
			r := e.run(t, tinkWorker, action{name: "e2e pull bogus", env: map[string]string{"IMAGE": ref, "WAIT_SECONDS": "0", "WAITDAEMON_PULL_POLICY": "bogus"}})
			want := `WAITDAEMON_PULL_POLICY="bogus": expected if-not-present, always or never`
			if r.ExitCode != 2 || !strings.Contains(r.Logs, want) {
				t.Errorf("exit %d, output:\n%s\nwant exit 2 and %q", r.ExitCode, r.Logs, want)
			}
			waitGone(t, e, r.ID, time.Second)
		})
	})
}

// pusher is the Docker engine that pushes the probe to the tests'
// registry for e: e itself, when it is a Docker engine.
func pusher(t *testing.T, e rig) *dockerapi.Client {
	if d, ok := e.(dockerRig); ok {
		return d.c
	}
	return setup(t)
}

// shorten cuts s to n bytes for a failure message.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
