package containerd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/containerd/ocispec"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/testkit/grpcrr"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
)

// These tests need no daemon, recorded or not.

func TestIDFor(t *testing.T) {
	long := "tinkerbell_" + strings.Repeat("a", 60) + "_01JRECORDREBOOT00000000000-waitdaemon-user"
	cases := []struct{ name, want string }{
		{"tinkerbell_reboot_01JABC-waitdaemon-user", "tinkerbell_reboot_01JABC-waitdaemon-user-0123abcd"},
		{"action_my action!/x", "action_my-action-x-0123abcd"},
		{"__--..", "waitdaemon-0123abcd"},
		{"a..b", "a.b-0123abcd"},
		{long, long[len(long)-(maxID-9):] + "-0123abcd"},
		// Each end of the letters and digits, and the bytes beside them.
		{"azAZ09", "azAZ09-0123abcd"},
		{"a`b{c@d[e/f:g", "a-b-c-d-e-f-g-0123abcd"},
		{"éz", "z-0123abcd"},
	}
	valid := func(id string) bool {
		if len(id) > maxID || id == "" {
			return false
		}
		prev := '.'
		for _, r := range id {
			sep := r == '.' || r == '_' || r == '-'
			alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
			if !sep && !alnum || sep && (prev == '.' || prev == '_' || prev == '-') {
				return false
			}
			prev = r
		}
		return prev != '.' && prev != '_' && prev != '-'
	}
	for _, tc := range cases {
		got := IDFor(tc.name, "0123abcd")
		if got != tc.want || !valid(got) {
			t.Errorf("IDFor(%q) = %q (valid: %v), want %q", tc.name, got, valid(got), tc.want)
		}
	}
}

// TestAuthFor: a credential goes to its own registry's host alone;
// Docker Hub's under the hosts the daemon asks for it.
func TestAuthFor(t *testing.T) {
	cases := []struct {
		registry, host string
		want           bool
	}{
		{"registry.example:5000", "registry.example:5000", true},
		{"registry.example:5000", "registry.example", false},
		{"registry.example:5000", "other.example:5000", false},
		{"docker.io", "registry-1.docker.io", true},
		{"docker.io", "docker.io", true},
		{"docker.io", "ghcr.io", false},
		{"ghcr.io", "registry-1.docker.io", false},
	}
	for _, tc := range cases {
		user, secret, ok := authFor(&engine.Auth{Username: "u", Password: "p", Registry: tc.registry})(tc.host, tc.host+"/x:1")
		if ok != tc.want || ok && (user != "u" || secret != "p") {
			t.Errorf("credential for %s asked by %s: %q %q %v, want %v", tc.registry, tc.host, user, secret, ok, tc.want)
		}
	}
	if user, secret, ok := authFor(&engine.Auth{IdentityToken: "tok", Registry: "r.example"})("r.example", ""); !ok || user != "" || secret != "tok" {
		t.Errorf("an identity token: %q %q %v, want it as the secret, no user", user, secret, ok)
	}
}

func TestDetectNamespace(t *testing.T) {
	id := strings.Repeat("ab", 32)
	cases := []struct{ env, cgroup, want string }{
		{"mine", "0::/tinkerbell/" + id, "mine"},
		{"", "12:pids:/other/" + id + "\n0::/other/" + id, "other"},
		{"", "0::/user.slice", "tinkerbell"},
	}
	for _, tc := range cases {
		if got := detectNamespace(tc.env, tc.cgroup); got != tc.want {
			t.Errorf("detectNamespace(%q, %q) = %q, want %q", tc.env, tc.cgroup, got, tc.want)
		}
	}
}

// recordedAction is an action container of testdata/ocispec, as
// tink-agent made it, taken for the action.
func recordedAction(t *testing.T, file string) engine.Self {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../testdata/ocispec", file))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Container struct {
			ID     string
			Image  string
			Labels map[string]string
			Spec   struct {
				Value json.RawMessage `json:"value"`
			}
		} `json:"container"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	s, err := toSelf(containerdapi.Container{
		ID: rec.Container.ID, Image: rec.Container.Image, Labels: rec.Container.Labels,
		Spec: containerdapi.SpecAny(rec.Container.Spec.Value),
	}, "cgroup")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPlanWaiter: the waiter runs waitdaemon's image, unprivileged, in
// its own pid namespace on the host's network, with the socket's
// directory (found from the action's volume), the tasks' output and the
// result file's directory, and what it needs to reach containerd.
func TestPlanWaiter(t *testing.T) {
	self := recordedAction(t, "reboot.json")
	if self.Name != "tinkerbell_reboot_01JRECORDREBOOT00000000000" || !slices.Contains(self.Env, "WAIT_SECONDS=10") {
		t.Fatalf("the recorded action read as %+v", self)
	}
	e := New(&containerdapi.Client{Socket: "/run/containerd/containerd.sock", Namespace: "tinkerbell"})
	e.newSuffix = func() string { return "0000000a" }
	spec := e.PlanWaiter(self, engine.Waiter{
		Name: self.Name + "-waitdaemon-waiter", Labels: map[string]string{"org.waitdaemon.role": "waiter"},
		Args: []string{"waiter", "--user-container=u"}, Env: []string{"WAITDAEMON_VERBOSE=true"},
		Bind: engine.Bind{Host: "/var/lib/result", Container: "/run/waitdaemon-result"},
	})
	p := spec.Create.(*planned)
	id := self.Name + "-waitdaemon-waiter-0000000a"
	if spec.Name != self.Name+"-waitdaemon-waiter" || p.ID != id || p.Image != "docker.io/library/waitdaemon:dev" ||
		p.Labels[LabelName] != spec.Name || p.Labels["org.waitdaemon.role"] != "waiter" || p.Output != "file://"+DefaultLogDir+"/"+id+"/log" {
		t.Errorf("PlanWaiter() = %s %+v", spec.Name, p)
	}
	s := p.Spec
	if !slices.Equal(s.Process.Args, []string{"/waitdaemon", "waiter", "--user-container=u"}) {
		t.Errorf("waiter args %q", s.Process.Args)
	}
	for _, want := range []string{"CONTAINERD_ADDRESS=/run/waitdaemon-engine/containerd.sock", "CONTAINERD_NAMESPACE=tinkerbell", "WAITDAEMON_ENGINE=containerd", "WAITDAEMON_VERBOSE=true"} {
		if !slices.Contains(s.Process.Env, want) {
			t.Errorf("waiter env %q lacks %s", s.Process.Env, want)
		}
	}
	var caps struct{ Bounding []string }
	_ = json.Unmarshal(s.Process.Rest["capabilities"], &caps)
	if !slices.Equal(caps.Bounding, defaultCaps) || string(s.Process.Rest["noNewPrivileges"]) != "true" {
		t.Errorf("waiter capabilities %s, want containerd's defaults, and no new privileges", s.Process.Rest["capabilities"])
	}
	var types []string
	for _, ns := range s.Linux.Namespaces {
		types = append(types, ns.Type)
	}
	if !slices.Contains(types, "pid") || !ocispec.HostNetwork(*s) || s.Linux.CgroupsPath != "/tinkerbell/"+id {
		t.Errorf("waiter namespaces %q cgroup %s, want its own pid, the host's network", types, s.Linux.CgroupsPath)
	}
	binds := map[string]ocispec.Mount{}
	for _, m := range s.Mounts {
		if m.Type == "bind" {
			binds[m.Destination] = m
		}
	}
	ro := func(m ocispec.Mount) bool { return slices.Contains(m.Options, "ro") }
	if m := binds["/run/waitdaemon-engine"]; m.Source != "/run/containerd" || !ro(m) {
		t.Errorf("the socket's directory: %+v, want /run/containerd read-only", m)
	}
	if m := binds[DefaultLogDir]; m.Source != DefaultLogDir || ro(m) {
		t.Errorf("the tasks' output: %+v, want it writable at its own path, for Remove", m)
	}
	if m := binds["/run/waitdaemon-result"]; m.Source != "/var/lib/result" || ro(m) {
		t.Errorf("the result file's directory: %+v, want it writable", m)
	}
	if len(binds) != 3 {
		t.Errorf("waiter binds %v, want those three alone", binds)
	}
	if _, err := json.Marshal(spec); err != nil {
		t.Errorf("the waiter's plan does not print: %v", err)
	}
}

func TestSocketSource(t *testing.T) {
	m := func(dst, src string) ocispec.Mount {
		return ocispec.Mount{Destination: dst, Source: src, Type: "bind", Options: []string{"rbind"}}
	}
	cases := []struct {
		mounts []ocispec.Mount
		want   string
	}{
		{[]ocispec.Mount{m("/run/containerd/containerd.sock", "/run/k3s/containerd/containerd.sock")}, "/run/k3s/containerd/containerd.sock"},
		{[]ocispec.Mount{m("/run/containerd", "/run/other")}, "/run/other/containerd.sock"},
		{[]ocispec.Mount{{Destination: "/run", Type: "tmpfs", Source: "tmpfs"}}, containerdapi.DefaultSocket},
	}
	for _, tc := range cases {
		if got := socketSource(tc.mounts, "/run/containerd/containerd.sock"); got != tc.want {
			t.Errorf("socketSource(%+v) = %s, want %s", tc.mounts, got, tc.want)
		}
	}
}

// TestEnginePull replays containerdapi's recording of a pull from a
// registry that wants a login (PullAuth.json): the engine's credential
// for that registry goes to it when the daemon asks.
func TestEnginePull(t *testing.T) {
	e, _ := testEngine(t, "PullAuth")
	e.noHostDir = true
	ref, err := imageref.Parse("127.0.0.1:5011/rr/good:1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := e.Pull(ctx, ref, &engine.Auth{Username: "rr", Password: "rr-Secret-0b6f", Registry: "127.0.0.1:5011"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.C.ImageGet(ctx, ref.Qualified()); err != nil {
		t.Error(err)
	}
}

// TestEnginePullOld replays a hand-made fixture
// (testdata/fixtures/containerd-handmade): containerd 1.6 has no
// Transfer service, and the pull's error names the daemon's version.
func TestEnginePullOld(t *testing.T) {
	s := grpcrr.Open(t, fixtures, "containerd-handmade", "EnginePullOld", containerdapi.Codec)
	c := &containerdapi.Client{Socket: s.Socket, Transport: s.Transport, Namespace: namespace}
	containerdapi.SetStreamIDs(c, "waitdaemon-rr-enginepullold")
	e := New(c)
	e.noHostDir = true
	ref, _ := imageref.Parse("127.0.0.1:5010/rr/good:1")
	err := e.Pull(testCtx(t), ref, nil, nil)
	if !errors.Is(err, containerdapi.ErrUnimplemented) || !strings.Contains(err.Error(), "containerd 1.6.20") || !strings.Contains(err.Error(), "2.0") {
		t.Errorf("Pull() on containerd 1.6: %v, want Unimplemented, naming the version and 2.0", err)
	}
}

// TestEnginePullHostDir replays a hand-made fixture
// (testdata/fixtures/containerd-handmade): the pull names CaptainOS's
// certs.d directory, though this process has none (the daemon reads it on
// its host), and a registry that answers HTTPS with plain HTTP fails
// naming the hosts.toml that would declare it.
func TestEnginePullHostDir(t *testing.T) {
	if _, err := os.Stat(containerdapi.DefaultHostDir); err == nil {
		t.Logf("%s exists here; the pull must name it all the same", containerdapi.DefaultHostDir)
	}
	s := grpcrr.Open(t, fixtures, "containerd-handmade", "EnginePullHostDir", containerdapi.Codec)
	c := &containerdapi.Client{Socket: s.Socket, Transport: s.Transport, Namespace: namespace}
	containerdapi.SetStreamIDs(c, "waitdaemon-rr-enginepullhostdir")
	e := New(c)
	ref, _ := imageref.Parse("registry.waitdaemon.test:5017/e2e/probe:1")
	err := e.Pull(testCtx(t), ref, nil, nil)
	for _, want := range []string{
		"pulling image registry.waitdaemon.test:5017/e2e/probe:1: ",
		"registry registry.waitdaemon.test:5017",
		"/etc/containerd/certs.d/registry.waitdaemon.test:5017/hosts.toml",
		"insecure_registries=",
		"http: server gave HTTP response to HTTPS client",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Pull() from an undeclared plain-HTTP registry: %v, want %q in it", err, want)
		}
	}
	var ae *containerdapi.Error
	if !errors.As(err, &ae) || ae.Code != containerdapi.Unknown {
		t.Errorf("Pull() = %v, want the daemon's Unknown kept", err)
	}
}

// TestUntrustedRegistry: the failures a hosts.toml cures, as containerd
// words them, and others that it does not.
func TestUntrustedRegistry(t *testing.T) {
	cases := []struct {
		msg  string
		want bool
	}{
		{`failed to resolve image: failed to do request: Head "https://r.test:5017/v2/x/manifests/1": http: server gave HTTP response to HTTPS client`, true},
		{`failed to resolve image: failed to do request: Head "https://r.test:5017/v2/x/manifests/1": tls: failed to verify certificate: x509: certificate signed by unknown authority`, true},
		{`failed to do request: Head "https://r.test/v2/x/manifests/1": x509: certificate is valid for other.test, not r.test`, true},
		{`failed to resolve image: r.test:5017/x:1: not found`, false},
		{`failed to authorize: failed to fetch anonymous token: unexpected status: 401 Unauthorized`, false},
		{`failed to do request: Head "https://r.test/v2/": dial tcp 127.0.0.1:5017: connect: connection refused`, false},
	}
	for _, tc := range cases {
		if got := untrustedRegistry(errors.New(tc.msg)); got != tc.want {
			t.Errorf("untrustedRegistry(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}

// TestReach: a socket that is not there says how to mount it.
func TestReach(t *testing.T) {
	e := New(&containerdapi.Client{Socket: filepath.Join(t.TempDir(), "containerd.sock"), WaitForEngine: -1})
	err := e.Reach(testCtx(t))
	if err == nil || !strings.Contains(err.Error(), "- /run/containerd/containerd.sock:/run/containerd/containerd.sock") {
		t.Errorf("Reach() without a socket: %v, want how to mount it", err)
	}
	// The cause is the system's word alone, not the chain of dials.
	if want := "cannot reach containerd on " + e.C.SocketPath() + " (no such file or directory)"; err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("Reach() without a socket: %v, want it to start %q", err, want)
	}
}

// TestEnginePullProgress replays containerdapi's recording of a pull
// with progress (Pull.json): the blobs' bytes are added up, and the
// image is then present.
func TestEnginePullProgress(t *testing.T) {
	e, _ := testEngine(t, "Pull")
	e.noHostDir = true
	ref, _ := imageref.Parse("127.0.0.1:5010/rr/good:1")
	ctx := testCtx(t)
	var last [2]int64
	calls := 0
	err := e.Pull(ctx, ref, nil, func(done, total int64) { last = [2]int64{done, total}; calls++ })
	if err != nil {
		t.Fatal(err)
	}
	if calls == 0 || last[0] != last[1] || last[1] < 1000 {
		t.Errorf("progress ended at %d of %d after %d calls, want all of the image's bytes", last[0], last[1], calls)
	}
	if ok, err := e.HasImage(ctx, ref); !ok || err != nil {
		t.Errorf("HasImage() after the pull = %v, %v", ok, err)
	}
}

func TestMissingBind(t *testing.T) {
	spec := &ocispec.Spec{Mounts: []ocispec.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/run/waitdaemon-result", Type: "bind", Source: "/var/lib/result"},
	}}
	runc := errors.New(`failed to create shim task: OCI runtime create failed: error mounting "/var/lib/result" to rootfs at "/run/waitdaemon-result": stat /var/lib/result: no such file or directory`)
	runc14 := errors.New(`failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: failed to fulfil mount request: open /var/lib/result: no such file or directory`)
	var missing14 *engine.MissingSourceError
	if err := missingBind(runc14, spec); !errors.As(err, &missing14) || missing14.Source != "/var/lib/result" {
		t.Errorf("missingBind() of runc 1.4's words = %v, want the missing source named", err)
	}
	var missing *engine.MissingSourceError
	if err := missingBind(runc, spec); !errors.As(err, &missing) || missing.Source != "/var/lib/result" || missing.Target != "/run/waitdaemon-result" ||
		!strings.HasSuffix(err.Error(), " (the host has no /var/lib/result, bound at /run/waitdaemon-result)") || !errors.Is(err, runc) {
		t.Errorf("missingBind() = %v, want the missing source named", err)
	}
	other := errors.New("unable to apply caps: operation not permitted")
	if err := missingBind(other, spec); err != other {
		t.Errorf("missingBind() of another failure = %v, want it as it is", err)
	}
}

// TestNetworkNote: a user container off the host's network is planned
// with a note for the hand-off line, saying it has loopback only.
func TestNetworkNote(t *testing.T) {
	host := ocispec.Spec{Linux: &ocispec.Linux{Namespaces: []ocispec.Namespace{{Type: "pid"}, {Type: "mount"}}}}
	private := ocispec.Spec{Linux: &ocispec.Linux{Namespaces: []ocispec.Namespace{{Type: "pid"}, {Type: ocispec.NetworkNamespace}}}}
	if got := networkNote(host); got != "" {
		t.Errorf("networkNote(host network) = %q, want none", got)
	}
	if got := networkNote(private); !strings.Contains(got, "loopback only") || !strings.Contains(got, "network: host") {
		t.Errorf("networkNote(a network of its own) = %q, want it to say loopback only, and how to get a network", got)
	}
}

// TestEngineStartLost replays a hand-made fixture
// (testdata/fixtures/containerd-handmade/EngineStartLost.json): a re-run's
// Start whose Tasks/Create and Tasks/Start answers are lost after the
// daemon acted. Start asks Tasks/Get each time (twice, a pause apart,
// after the create) and succeeds, with the
// task created once and started once; the run had already ended, which
// counts as started.
func TestEngineStartLost(t *testing.T) {
	s := grpcrr.Open(t, fixtures, "containerd-handmade", "EngineStartLost", containerdapi.Codec)
	lose := &loseAnswers{base: s.Transport, socket: s.Socket, lose: map[string]int{"Tasks/Create": 1, "Tasks/Start": 1}}
	tr := &trace{}
	c := &containerdapi.Client{Socket: s.Socket, Transport: lose, Namespace: namespace, Trace: tr, WaitForEngine: -1}
	e := New(c)
	e.LogDir = logDir
	e.now = func() time.Time { return time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC) }
	id := "tinkerbell_run_01JRR00000000000000000RUN-waitdaemon-user-00000001"
	if err := e.Start(testCtx(t), id); err != nil {
		t.Fatalf("Start() with its task's create and start answers lost: %v, want it started", err)
	}
	want := []string{"Containers/Get", "Tasks/Get", "Tasks/Delete", "Snapshots/Mounts", "Tasks/Create", "Tasks/Get", "Tasks/Get", "Tasks/Start", "Tasks/Get", "Containers/Update"}
	if diff := linediff.Lines(want, tr.calls()); diff != "" {
		t.Errorf("Start() calls (-want +got):\n%s", diff)
	}
	if left := lose.left(); left != 0 {
		t.Errorf("%d answers were not lost: the test lost nothing", left)
	}
}

// loseAnswers is a transport that forwards a call to the daemon, reads
// its whole answer, then fails as a connection that broke before the
// answer came: the daemon acted, the client never learns it. It does so
// for the first lose[method] calls of each method ("Tasks/Start").
type loseAnswers struct {
	base   http.RoundTripper // nil: HTTP/2 without TLS to socket
	socket string
	mu     sync.Mutex
	lose   map[string]int
}

func (l *loseAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	l.mu.Lock()
	if l.base == nil {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		l.base = &http.Transport{Protocols: &p, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", l.socket)
		}}
	}
	base := l.base
	path := req.URL.Path
	method := path[strings.LastIndex(path[:strings.LastIndex(path, "/")], ".")+1:]
	lost := l.lose[method] > 0
	if lost {
		l.lose[method]--
	}
	l.mu.Unlock()
	resp, err := base.RoundTrip(req)
	if err != nil || !lost {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, fmt.Errorf("read unix ->%s: %w", l.socket, syscall.ECONNRESET)
}

// left is how many answers were to be lost and were not.
func (l *loseAnswers) left() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, v := range l.lose {
		n += v
	}
	return n
}

// TestEnginePlanFallback replays a hand-made fixture
// (testdata/fixtures/containerd-handmade): the fallback's image is not
// present at the plan, so its spec is made at create, from the image's
// config. Its args are its Command after the image's ENTRYPOINT, or, for
// ImageDefault, the image's own ENTRYPOINT and CMD, whatever the action
// ran; with neither, the action's command.
func TestEnginePlanFallback(t *testing.T) {
	var fb containerdapi.ImageConfig
	fb.Config.Entrypoint, fb.Config.Cmd = []string{"/bin/fallback"}, []string{"--now"}
	ref, _ := imageref.Parse("waitdaemon-fallback:2")
	cases := []struct {
		name string
		want engine.Want
		args []string
	}{
		{"the action's command", engine.Want{}, []string{"/bin/fallback", "reboot"}},
		{"a command", engine.Want{Command: []string{"reboot", "-f"}}, []string{"/bin/fallback", "reboot", "-f"}},
		{"the image's default", engine.Want{ImageDefault: true}, []string{"/bin/fallback", "--now"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := grpcrr.Open(t, fixtures, "containerd-handmade", "EnginePlanFallback", containerdapi.Codec)
			e := New(&containerdapi.Client{Socket: s.Socket, Transport: s.Transport, Namespace: namespace})
			e.newSuffix = func() string { return "0000000f" }
			act := recordedAction(t, "reboot.json")
			act.Detail.(*self).image = &ocispec.ImageConfig{Entrypoint: []string{"/waitdaemon", "action", "--"}}
			tc.want.Name, tc.want.Image = act.Name+"-waitdaemon-fallback", ref
			spec, err := e.Plan(testCtx(t), act, tc.want)
			if err != nil {
				t.Fatal(err)
			}
			p := spec.Create.(*planned)
			if p.Pending == "" || p.Spec != nil {
				t.Fatalf("Plan() of a missing image = %+v, want it pending", p)
			}
			if err := e.finish(testCtx(t), p, containerdapi.ResolvedImage{Config: fb}); err != nil {
				t.Fatal(err)
			}
			if diff := linediff.Lines(tc.args, p.Spec.Process.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

// TestString: the engine names its socket and namespace, the default one
// when none is set.
func TestString(t *testing.T) {
	cases := []struct {
		socket, namespace, want string
	}{
		{"/run/k3s/containerd/containerd.sock", "k8s.io", "containerd on /run/k3s/containerd/containerd.sock (namespace k8s.io)"},
		{"/run/c.sock", "", "containerd on /run/c.sock (namespace " + containerdapi.DefaultNamespace + ")"},
	}
	for _, tc := range cases {
		if got := New(&containerdapi.Client{Socket: tc.socket, Namespace: tc.namespace}).String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

// TestImagesReadOnce: an image read is not read again (a daemon that
// is not there would fail it), and a pull forgets it: it may bring the
// image anew.
func TestImagesReadOnce(t *testing.T) {
	e := New(&containerdapi.Client{Socket: filepath.Join(t.TempDir(), "none.sock"), WaitForEngine: -1})
	name := "docker.io/library/user:1"
	read := containerdapi.ResolvedImage{ChainID: "sha256:c"}
	e.noteImage(name, image{ResolvedImage: read, unpacked: true})
	ctx := testCtx(t)
	ref, err := imageref.Parse("user:1")
	if err != nil {
		t.Fatal(err)
	}
	for what, get := range map[string]func() (containerdapi.ResolvedImage, error){
		"resolve": func() (containerdapi.ResolvedImage, error) { return e.resolve(ctx, name) },
		"unpacked": func() (containerdapi.ResolvedImage, error) {
			return e.unpacked(ctx, name, containerdapi.DefaultSnapshotter)
		},
	} {
		if got, err := get(); err != nil || got.ChainID != read.ChainID {
			t.Errorf("%s = %+v, %v; want the image read before", what, got, err)
		}
	}
	if ok, err := e.HasImage(ctx, ref); !ok || err != nil {
		t.Errorf("HasImage = %v, %v; want the image read before", ok, err)
	}
	// Only resolved: whether it is unpacked is still to be read.
	e.noteImage(name, image{ResolvedImage: read})
	if _, err := e.unpacked(ctx, name, containerdapi.DefaultSnapshotter); err == nil {
		t.Error("unpacked took an image only resolved as unpacked")
	}
	_ = e.Pull(ctx, ref, nil, nil)
	if _, err := e.resolve(ctx, name); err == nil {
		t.Error("after a pull, the image read before was taken again")
	}
}

// TestTaskDeleteShimGone: a task delete that fails as the task's shim
// goes away ("ttrpc: closed") is settled by asking for the task: gone, it
// was deleted; still there, it is deleted again; a delete that keeps
// failing fails after three.
func TestTaskDeleteShimGone(t *testing.T) {
	closed := reply{code: containerdapi.Unknown, status: "failed to delete task: ttrpc: closed"}
	stopped := reply{msg: `{"process":{"container_id":"w-1","status":3}}`}
	gone := reply{code: containerdapi.NotFound, status: "no task"}
	cases := []struct {
		name        string
		del, get    []reply
		wantErr     bool
		wantDeletes int
	}{
		{"deleted as the answer broke", []reply{closed}, []reply{stopped, gone}, false, 1},
		{"deleted at the second", []reply{closed, {msg: `{}`}}, []reply{stopped, stopped}, false, 2},
		{"never", []reply{closed}, []reply{stopped}, true, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, d := newFake(t, map[string][]reply{"Tasks/Get": tc.get, "Tasks/Delete": tc.del})
			err := e.deleteTask(testCtx(t), "w-1")
			if (err != nil) != tc.wantErr || tc.wantErr && !strings.Contains(err.Error(), "ttrpc: closed") {
				t.Errorf("deleteTask() = %v, want an error: %v", err, tc.wantErr)
			}
			if n := d.count("Tasks/Delete"); n != tc.wantDeletes {
				t.Errorf("%d deletes, want %d", n, tc.wantDeletes)
			}
		})
	}
}

// TestImageReadOnceAtOnce: callers that read one image at the same time
// (the waiter's create and the user container's plan) read it once
// between them.
func TestImageReadOnceAtOnce(t *testing.T) {
	e, d := newFake(t, withImageX(map[string][]reply{}))
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if i%2 == 0 {
				_, err = e.resolve(ctx, "docker.io/library/x:1")
			} else {
				_, err = e.unpacked(ctx, "docker.io/library/x:1", containerdapi.DefaultSnapshotter)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if g, r, s := d.count("Images/Get"), d.count("Content/Read"), d.count("Snapshots/Stat"); g != 1 || r != 2 || s != 1 {
		t.Errorf("read the image %d times, its blobs %d and its snapshot %d; want 1, 2 and 1", g, r, s)
	}
}

// TestAddBlobs: a pull's progress is the bytes done out of the total over
// all blobs, each as last reported; an event with no size changes nothing
// and is not passed on.
func TestAddBlobs(t *testing.T) {
	var got []string
	add := addBlobs(func(done, total int64) { got = append(got, fmt.Sprintf("%d/%d", done, total)) })
	for _, p := range []containerdapi.Progress{
		{Event: "resolving", Name: "docker.io/library/x:1"},
		{Event: "downloading", Name: "sha256:a", Progress: 10, Total: 100},
		{Event: "waiting", Name: "sha256:b"},
		{Event: "downloading", Name: "sha256:b", Progress: 0, Total: 50},
		{Event: "complete", Name: "sha256:a", Progress: 100, Total: 100},
	} {
		add(p)
	}
	if diff := linediff.Lines([]string{"10/100", "10/150", "100/150"}, got); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}

// TestListStates: a container ran when its task is past created (or it
// is labelled started), and runs while its task runs or is paused; a
// task in no known state did not run.
func TestListStates(t *testing.T) {
	e, _ := newFake(t, map[string][]reply{
		"Containers/List": {{msg: `{"containers":[{"id":"stopped"},{"id":"unknown"},{"id":"created"},{"id":"paused"},{"id":"none"},{"id":"failed","labels":{"` + LabelStarted + `":"failed 2026-01-01T00:00:00Z"}}]}`}},
		"Tasks/List":      {{msg: `{"tasks":[{"id":"stopped","status":3},{"id":"unknown","status":0},{"id":"created","status":1},{"id":"paused","status":4},{"id":"failed","status":1}]}`}},
	})
	list, err := e.List(testCtx(t), "k", "v")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range list {
		got = append(got, fmt.Sprintf("%s ran=%v running=%v state=%s", c.ID, c.Ran, c.Running, c.State))
	}
	want := []string{
		"stopped ran=true running=false state=stopped",
		"unknown ran=false running=true state=" + containerdapi.TaskUnknown.String(),
		"created ran=false running=false state=created",
		"paused ran=true running=true state=paused",
		"none ran=false running=false state=no task",
		"failed ran=true running=false state=created",
	}
	if diff := linediff.Lines(want, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

// TestResolveForgetsFailures: an image read once is not read again; one
// that could not be read is read again the next time.
func TestResolveForgetsFailures(t *testing.T) {
	e, d := newFake(t, map[string][]reply{
		"Images/Get": {{code: containerdapi.NotFound, status: "image not found"}},
	})
	for i := range 2 {
		if _, err := e.resolve(testCtx(t), "docker.io/library/x:1"); err == nil || !strings.Contains(err.Error(), "image not found") {
			t.Errorf("resolve() #%d = %v, want not found", i+1, err)
		}
	}
	if n := d.count("Images/Get"); n != 2 {
		t.Errorf("image read %d times, want each time", n)
	}
}

// TestHostEtc: a user container on the host's network binds the host's
// /etc files that the host has, as seen in its root: none
// it lacks (CaptainOS has no /etc/hostname), a symlink followed within
// that root.
func TestHostEtc(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"etc", "run/systemd/resolve"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string) {
		if err := os.WriteFile(filepath.Join(root, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/hosts")
	write("run/systemd/resolve/stub-resolv.conf")
	e := New(&containerdapi.Client{Namespace: "tinkerbell"})
	e.HostRoot = root
	hostNet := recordedAction(t, "network-host.json").Detail.(*self).spec
	private := recordedAction(t, "reboot.json").Detail.(*self).spec

	// resolv.conf as systemd-resolved links it, absolute: it must be
	// read in the host's root, not this process's.
	if err := os.Symlink("/run/systemd/resolve/stub-resolv.conf", filepath.Join(root, "etc/resolv.conf")); err != nil {
		t.Fatal(err)
	}
	if got, want := e.hostEtc(hostNet), []string{"/etc/resolv.conf", "/etc/hosts"}; !slices.Equal(got, want) {
		t.Errorf("hostEtc() = %q, want %q", got, want)
	}
	// A link to nothing is no file.
	if err := os.Remove(filepath.Join(root, "etc/resolv.conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../run/none", filepath.Join(root, "etc/resolv.conf")); err != nil {
		t.Fatal(err)
	}
	write("etc/hostname")
	if got, want := e.hostEtc(hostNet), []string{"/etc/hosts", "/etc/hostname"}; !slices.Equal(got, want) {
		t.Errorf("hostEtc() = %q, want %q", got, want)
	}
	if got := e.hostEtc(private); got != nil {
		t.Errorf("hostEtc() of an action on a network of its own = %q, want none", got)
	}
}

// TestHostRoot: the host's root is that of the nearest ancestor in
// another mount namespace; this test's ancestors share its own, so it
// sees none.
func TestHostRoot(t *testing.T) {
	if got := hostRoot(); got != "" {
		t.Errorf("hostRoot() = %q, want none: every ancestor shares this process's mount namespace", got)
	}
}

// TestRuntimeOptions: the containers planned from the action run with
// its runtime's options, and with none when it has none (an empty type
// and value), not with an empty Any.
func TestRuntimeOptions(t *testing.T) {
	for _, o := range []containerdapi.Any{
		{TypeURL: "containerd.runc.v1.Options", Value: []byte{0x0a, 0x01, 'x'}},
		{TypeURL: "containerd.runc.v1.Options"},
		{Value: []byte{0x0a, 0x01, 'x'}},
	} {
		got := runtimeOptions(containerdapi.Container{Runtime: containerdapi.Runtime{Options: o}})
		if got == nil || got.TypeURL != o.TypeURL || !slices.Equal(got.Value, o.Value) {
			t.Errorf("runtimeOptions(%+v) = %+v, want the action's", o, got)
		}
	}
	if got := runtimeOptions(containerdapi.Container{Runtime: containerdapi.Runtime{Name: containerdapi.RuncV2}}); got != nil {
		t.Errorf("runtimeOptions() of an action without options = %+v, want none", got)
	}
}

// TestRole: a container planned with a command, or the image's own
// default command, is the fallback; one with neither is the user
// container.
func TestRole(t *testing.T) {
	cases := []struct {
		want engine.Want
		role string
	}{
		{engine.Want{}, "user"},
		{engine.Want{Command: []string{"reboot"}}, "fallback"},
		{engine.Want{Command: []string{}}, "fallback"},
		{engine.Want{ImageDefault: true}, "fallback"},
	}
	for _, tc := range cases {
		if got := role(tc.want); got != tc.role {
			t.Errorf("role(%+v) = %q, want %q", tc.want, got, tc.role)
		}
	}
}

// fakeProc makes a /proc of this process, in mount namespace mnt:[1],
// and its ancestors from pid 100 up, one for each of ns, the mount
// namespace of each; the last one's parent is pid 0. Each one's command
// holds spaces and parentheses, as a stat's may.
func fakeProc(t *testing.T, ns ...string) string {
	t.Helper()
	proc := t.TempDir()
	link := func(pid, target string) {
		if err := os.MkdirAll(filepath.Join(proc, pid, "ns"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(proc, pid, "ns/mnt")); err != nil {
			t.Fatal(err)
		}
	}
	link("self", "mnt:[1]")
	for i, n := range ns {
		pid, ppid := 100+i, 100+i+1
		if i == len(ns)-1 {
			ppid = 0
		}
		link(strconv.Itoa(pid), n)
		stat := fmt.Sprintf("%d (sh -c (x) y) S %d %d %d 0 -1\n", pid, ppid, pid, pid)
		if err := os.WriteFile(filepath.Join(proc, strconv.Itoa(pid), "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return proc
}

// TestHostRootIn: the walk up the ancestors, from the parent, to the
// first in another mount namespace than this process's, 16 at most, and
// none past pid 1's parent, pid 0, or an ancestor it cannot read.
func TestHostRootIn(t *testing.T) {
	same := func(n int) []string { return slices.Repeat([]string{"mnt:[1]"}, n) }
	t.Run("the parent's", func(t *testing.T) {
		proc := fakeProc(t, "mnt:[2]")
		if got, want := hostRootIn(proc, 100), proc+"/100/root"; got != want {
			t.Errorf("hostRootIn() = %q, want %q", got, want)
		}
	})
	t.Run("the nearest ancestor's", func(t *testing.T) {
		proc := fakeProc(t, "mnt:[1]", "mnt:[2]", "mnt:[3]")
		if got, want := hostRootIn(proc, 100), proc+"/101/root"; got != want {
			t.Errorf("hostRootIn() = %q, want %q", got, want)
		}
	})
	t.Run("the 16th ancestor's", func(t *testing.T) {
		proc := fakeProc(t, append(same(15), "mnt:[2]")...)
		if got, want := hostRootIn(proc, 100), proc+"/115/root"; got != want {
			t.Errorf("hostRootIn() = %q, want %q", got, want)
		}
	})
	t.Run("none past the 16th", func(t *testing.T) {
		proc := fakeProc(t, append(same(16), "mnt:[2]")...)
		if got := hostRootIn(proc, 100); got != "" {
			t.Errorf("hostRootIn() = %q, want none", got)
		}
	})
	t.Run("none past pid 0", func(t *testing.T) {
		proc := fakeProc(t, same(2)...)
		if err := os.MkdirAll(filepath.Join(proc, "0/ns"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("mnt:[2]", filepath.Join(proc, "0/ns/mnt")); err != nil {
			t.Fatal(err)
		}
		if got := hostRootIn(proc, 100); got != "" {
			t.Errorf("hostRootIn() = %q, want none", got)
		}
	})
	t.Run("none past an ancestor gone", func(t *testing.T) {
		proc := fakeProc(t, "mnt:[1]", "mnt:[2]")
		if err := os.Remove(filepath.Join(proc, "100/stat")); err != nil {
			t.Fatal(err)
		}
		if got := hostRootIn(proc, 100); got != "" {
			t.Errorf("hostRootIn() = %q, want none", got)
		}
	})
	t.Run("past a stat of state and parent alone", func(t *testing.T) {
		proc := fakeProc(t, "mnt:[1]", "mnt:[2]")
		if err := os.WriteFile(filepath.Join(proc, "100/stat"), []byte("100 (sh) S 101"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, want := hostRootIn(proc, 100), proc+"/101/root"; got != want {
			t.Errorf("hostRootIn() = %q, want %q", got, want)
		}
	})
	t.Run("none past a stat cut short", func(t *testing.T) {
		proc := fakeProc(t, "mnt:[1]", "mnt:[2]")
		if err := os.WriteFile(filepath.Join(proc, "100/stat"), []byte("100 (sh) S"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := hostRootIn(proc, 100); got != "" {
			t.Errorf("hostRootIn() = %q, want none", got)
		}
	})
	t.Run("none without its own namespace", func(t *testing.T) {
		proc := fakeProc(t, "mnt:[2]")
		if err := os.Remove(filepath.Join(proc, "self/ns/mnt")); err != nil {
			t.Fatal(err)
		}
		if got := hostRootIn(proc, 100); got != "" {
			t.Errorf("hostRootIn() = %q, want none", got)
		}
	})
}

// TestPlanWaiterSnapshotter: the waiter's snapshot is made in the
// action's snapshotter, where the action's image (the waiter's) is
// unpacked: a namespace whose default snapshotter is not overlayfs has
// the image nowhere else.
func TestPlanWaiterSnapshotter(t *testing.T) {
	action := recordedAction(t, "reboot.json")
	action.Detail.(*self).ctr.Snapshotter = "native"
	e := New(&containerdapi.Client{Socket: "/run/containerd/containerd.sock", Namespace: "tinkerbell"})
	spec := e.PlanWaiter(action, engine.Waiter{Name: action.Name + "-waitdaemon-waiter", Args: []string{"waiter"}})
	if p := spec.Create.(*planned); p.Snapshotter != "native" {
		t.Errorf("the waiter's snapshotter = %q, want the action's, native", p.Snapshotter)
	}
}
