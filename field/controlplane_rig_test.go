package field

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ControlPlane is a release's whole control plane, the embedded
// `tinkerbell` server (etcd, kube-apiserver, the controllers and
// tink-server in one process, scripts/tinkerbell.sh builds it), run in a
// network namespace of its own with loopback alone: it binds
// kube-apiserver's and the controller manager's ports on every address
// it has. The field's machines reach its tink-server through a guestfwd
// that enters that namespace (Forward.Netns); the rig reaches the
// Kubernetes API the same way.
type ControlPlane struct {
	Netns string // /proc/PID/ns/net
	dir   string
	cmd   *exec.Cmd
	kube  *http.Client
	log   *os.File

	mu     sync.Mutex
	states []WorkflowState // each change of the Workflow's state, as polled
}

// WorkflowState is the Workflow's state, and its action's, when the rig
// first saw them.
type WorkflowState struct {
	At             time.Time
	State, Actions string
}

// TinkServerPort is the control plane's tink-server port, in its
// namespace.
const TinkServerPort = 42113

// StartControlPlane starts the control plane binary, its certificates
// and etcd's data in dir, and waits until its API serves the Workflow
// kind and tink-server listens.
func StartControlPlane(ctx context.Context, binary, dir string) (*ControlPlane, error) {
	certs := filepath.Join(dir, "certs")
	if err := writeCerts(certs); err != nil {
		return nil, fmt.Errorf("the control plane's certificates: %w", err)
	}
	log, err := os.Create(filepath.Join(dir, "tinkerbell.log"))
	if err != nil {
		return nil, err
	}
	flags := []string{
		"--bind-address", "127.0.0.1", "--public-ipv4", "127.0.0.1", "--tink-server-bind-addr", "127.0.0.1",
		"--kube-apiserver-bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--etcd-dir", filepath.Join(dir, "etcd"),
		"--enable-smee=false", "--enable-tootles=false", "--enable-rufio-controller=false", "--enable-secondstar=false", "--enable-ui=false",
	}
	cmd := exec.Command("unshare", "-n", "--", "sh", "-c", `ip link set lo up && exec "$@"`, "sh", binary)
	cmd.Args = append(cmd.Args, flags...)
	cmd.Env = append(os.Environ(),
		"TINKERBELL_ETCD_SERVERS=http://localhost:2379",
		"TINKERBELL_SERVICE_ACCOUNT_KEY_FILE="+filepath.Join(certs, "service-account-key.pem"),
		"TINKERBELL_SERVICE_ACCOUNT_SIGNING_KEY_FILE="+filepath.Join(certs, "service-account-key.pem"),
		"TINKERBELL_SERVICE_ACCOUNT_ISSUER=api",
		"TINKERBELL_KUBE_APISERVER_TLS_CERT_FILE="+filepath.Join(certs, "server.crt"),
		"TINKERBELL_KUBE_APISERVER_TLS_PRIVATE_KEY_FILE="+filepath.Join(certs, "server.key"),
		"TINKERBELL_CLIENT_CA_FILE="+filepath.Join(certs, "ca.crt"),
		"TINKERBELL_LOGGING_FORMAT=json",
		"TINKERBELL_BACKEND_KUBE_CONFIG="+filepath.Join(certs, "kubeconfig"),
	)
	cmd.Stdout, cmd.Stderr = log, log
	// A process group of its own, which Stop and KillAll end. No
	// Pdeathsig: it would fire when the thread that started it ends,
	// and Go ends threads.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	cp := &ControlPlane{Netns: fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid), dir: dir, cmd: cmd, log: log}
	liveControlPlanes.Store(cp, nil)
	if cp.kube, err = cp.kubeClient(certs); err != nil {
		cp.Stop()
		return nil, err
	}
	if err := cp.waitReady(ctx); err != nil {
		cp.Stop()
		return nil, fmt.Errorf("%w (its log: %s)", err, log.Name())
	}
	return cp, nil
}

// liveControlPlanes holds the control planes running, for KillAll.
var liveControlPlanes sync.Map

// Stop ends the control plane.
func (cp *ControlPlane) Stop() {
	liveControlPlanes.Delete(cp)
	_ = syscall.Kill(-cp.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cp.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-cp.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	cp.log.Close()
}

// dialIn dials addr from inside the control plane's network namespace:
// a socket keeps the namespace it was made in. The goroutine's thread
// enters it for the dial and goes back; a thread that cannot go back is
// never unlocked, so it ends with the goroutine and no other goroutine
// runs there.
func (cp *ControlPlane) dialIn(ctx context.Context, network, addr string) (net.Conn, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("entering a network namespace: setns is wired for amd64 alone, not %s", runtime.GOARCH)
	}
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer home.Close()
		ns, err := os.Open(cp.Netns)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer ns.Close()
		if err := setns(ns); err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("entering the control plane's network namespace: %w", err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if setns(home) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// setns moves the calling thread into the network namespace ns.
func setns(ns *os.File) error {
	if _, _, errno := syscall.RawSyscall(sysSetns, ns.Fd(), syscall.CLONE_NEWNET, 0); errno != 0 {
		return errno
	}
	return nil
}

// kubeClient is an HTTPS client of the control plane's kube-apiserver,
// with the admin's certificate.
func (cp *ControlPlane) kubeClient(certs string) (*http.Client, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(certs, "server.crt"), filepath.Join(certs, "server.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(certs, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext:     cp.dialIn,
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: "localhost"},
	}}, nil
}

const apiBase = "https://127.0.0.1:6443/apis/tinkerbell.org/v1alpha1/namespaces/default/"

// waitReady waits, within 3 minutes, for the API to serve Workflows and
// tink-server to listen.
func (cp *ControlPlane) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var last error
	for {
		last = cp.get(ctx, "workflows", nil)
		if last == nil {
			c, err := cp.dialIn(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", TinkServerPort))
			if err == nil {
				c.Close()
				return nil
			}
			last = fmt.Errorf("tink-server: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the control plane was not ready within 3 minutes: %w", last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// get reads the resource path (under the default namespace) into v.
func (cp *ControlPlane) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiBase+path, nil)
	if err != nil {
		return err
	}
	return cp.do(req, v)
}

func (cp *ControlPlane) do(req *http.Request, v any) error {
	resp, err := cp.kube.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, bytes.TrimSpace(body))
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(body, v)
}

// create posts obj to the kind's resources.
func (cp *ControlPlane) create(ctx context.Context, resource string, obj any) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, apiBase+resource, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return cp.do(req, nil)
}

// TemplateText is the Template a machine's action runs in: the action,
// as the template in the docs writes it, the one action of the one task,
// for the agent the Workflow names as device_1.
func TemplateText(action string) string {
	var b strings.Builder
	b.WriteString("version: \"0.1\"\nname: waitdaemon\nglobal_timeout: 1800\ntasks:\n  - name: \"waitdaemon\"\n    worker: \"{{.device_1}}\"\n    actions:\n")
	for _, l := range strings.Split(strings.TrimRight(action, "\n"), "\n") {
		b.WriteString("      " + l + "\n")
	}
	return b.String()
}

// Provision creates, as an operator would with kubectl, the Hardware of
// the agent agentID, the Template holding action, and the Workflow that
// joins them, and follows the Workflow's state from then on.
func (cp *ControlPlane) Provision(ctx context.Context, agentID, action string) error {
	meta := map[string]string{"name": "field", "namespace": "default"}
	objs := []struct {
		resource string
		obj      map[string]any
	}{
		{"hardware", map[string]any{"apiVersion": "tinkerbell.org/v1alpha1", "kind": "Hardware", "metadata": meta,
			"spec": map[string]any{"interfaces": []any{map[string]any{"dhcp": map[string]any{"mac": "52:54:00:12:34:56"}}}}}},
		{"templates", map[string]any{"apiVersion": "tinkerbell.org/v1alpha1", "kind": "Template", "metadata": meta,
			"spec": map[string]any{"data": TemplateText(action)}}},
		{"workflows", map[string]any{"apiVersion": "tinkerbell.org/v1alpha1", "kind": "Workflow", "metadata": meta,
			"spec": map[string]any{"templateRef": "field", "hardwareRef": "field", "hardwareMap": map[string]string{"device_1": agentID}}}},
	}
	for _, o := range objs {
		if err := cp.create(ctx, o.resource, o.obj); err != nil {
			return fmt.Errorf("creating the %s: %w", o.obj["kind"], err)
		}
	}
	go cp.follow(ctx)
	return nil
}

// workflow is what the rig reads of a Workflow.
type workflow struct {
	Status struct {
		State string `json:"state"`
		Tasks []struct {
			Actions []struct {
				Name  string `json:"name"`
				State string `json:"state"`
			} `json:"actions"`
		} `json:"tasks"`
	} `json:"status"`
}

// follow polls the Workflow every 100 ms until ctx ends, keeping each
// change of its state and its actions'.
func (cp *ControlPlane) follow(ctx context.Context) {
	last := ""
	for ctx.Err() == nil {
		var wf workflow
		if err := cp.get(ctx, "workflows/field", &wf); err == nil {
			var actions []string
			for _, t := range wf.Status.Tasks {
				for _, a := range t.Actions {
					actions = append(actions, a.Name+"="+a.State)
				}
			}
			now := wf.Status.State + " " + strings.Join(actions, ",")
			if now != last {
				cp.mu.Lock()
				cp.states = append(cp.states, WorkflowState{At: time.Now(), State: wf.Status.State, Actions: strings.Join(actions, ",")})
				cp.mu.Unlock()
				last = now
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// States are the Workflow's states so far, in order.
func (cp *ControlPlane) States() []WorkflowState {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]WorkflowState(nil), cp.states...)
}

// Succeeded is when the rig first saw the Workflow's state SUCCESS.
func (cp *ControlPlane) Succeeded() (time.Time, error) {
	states := cp.States()
	for _, s := range states {
		if s.State == "SUCCESS" {
			return s.At, nil
		}
	}
	var seen []string
	for _, s := range states {
		seen = append(seen, s.State+" ("+s.Actions+")")
	}
	return time.Time{}, fmt.Errorf("the Workflow's status never said SUCCESS: it said %s", strings.Join(seen, ", then "))
}

// writeCerts writes into dir what the embedded kube-apiserver needs, as
// Tinkerbell's script/certs.sh makes them: a CA, a certificate for
// localhost that serves and is the admin's, a service-account key, and a
// kubeconfig.
func writeCerts(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"}, NotBefore: now, NotAfter: now.Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost", Organization: []string{"Tinkerbell"}},
		NotBefore: now, NotAfter: now.Add(48 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "localhost", "tinkerbell"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	keyPEM := func(k *ecdsa.PrivateKey) ([]byte, error) {
		b, err := x509.MarshalECPrivateKey(k)
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: b}), err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	serverKey, err1 := keyPEM(key)
	saPEM, err2 := keyPEM(saKey)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local-apiserver
  cluster:
    certificate-authority-data: %s
    server: https://localhost:6443
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: default
  context: {cluster: local-apiserver, user: admin}
current-context: default
`, b64(caPEM), b64(certPEM), b64(serverKey))
	for name, data := range map[string][]byte{
		"ca.crt": caPEM, "server.crt": certPEM, "server.key": serverKey,
		"service-account-key.pem": saPEM, "kubeconfig": []byte(kubeconfig),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }

// sysSetns is setns(2) on linux/amd64, the field's machines' and host's.
const sysSetns = 308
