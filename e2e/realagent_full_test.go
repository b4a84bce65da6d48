//go:build full

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
)

// realRelease is a Tinkerbell release whose tink-agent and server side
// scripts/tinkerbell.sh builds, and the release the runner copies for it.
type realRelease struct {
	version string
	runner  tinkagent.Release
	dir     string // $ENGINES_CACHE/tinkerbell-VERSION: tink-agent, tink-server
}

var realReleases = []realRelease{
	{version: "v0.23.0", runner: tinkagent.V023},
	{version: "v0.24.0", runner: tinkagent.V024},
	{version: "v0.25.0", runner: tinkagent.V025},
}

var realOnce struct {
	sync.Once
	dirs []string
	err  error
	out  []byte
}

// realAgents are the releases, built (make tink-agents) once a test
// process.
func realAgents(t *testing.T) []realRelease {
	t.Helper()
	realOnce.Do(func() {
		cmd := exec.Command("../scripts/tinkerbell.sh")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		realOnce.out, realOnce.err = cmd.Output()
		realOnce.dirs = strings.Fields(string(realOnce.out))
		realOnce.out = append(realOnce.out, stderr.Bytes()...)
	})
	if realOnce.err != nil || len(realOnce.dirs) != len(realReleases) {
		t.Fatalf("building Tinkerbell's releases (make tink-agents, scripts/tinkerbell.sh; it needs the Go module proxy): %v\n%s", realOnce.err, realOnce.out)
	}
	rels := slices.Clone(realReleases)
	for i := range rels {
		rels[i].dir = realOnce.dirs[i]
		for _, bin := range []string{"tink-agent", "tink-server"} {
			if _, err := os.Stat(filepath.Join(rels[i].dir, bin)); err != nil {
				t.Fatalf("%s's %s: %v (make tink-agents builds it)", rels[i].version, bin, err)
			}
		}
	}
	return rels
}

// docTemplate is one template of the README or docs/templates.md, as
// written.
type docTemplate struct {
	where string // file, heading and action
	text  string
}

var (
	yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")
	heading   = regexp.MustCompile(`(?m)^#+ (.+)$`)
	nameLine  = regexp.MustCompile(`(?m)^- name: (\S+)$`)
)

// docTemplates are the templates of the README and docs/templates.md:
// every YAML block that is a list of actions.
func docTemplates(t *testing.T) []docTemplate {
	t.Helper()
	var out []docTemplate
	for _, file := range []string{"README.md", "docs/templates.md"} {
		data, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range yamlBlock.FindAllStringSubmatchIndex(string(data), -1) {
			text := string(data[m[2]:m[3]])
			name := nameLine.FindStringSubmatch(text)
			if name == nil {
				continue
			}
			// The last heading before it, outside the code blocks.
			h := "?"
			before := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(string(data[:m[0]]), "")
			for _, hm := range heading.FindAllStringSubmatch(before, -1) {
				h = hm[1]
			}
			out = append(out, docTemplate{where: fmt.Sprintf("%s %q %s", file, h, name[1]), text: text})
		}
	}
	if len(out) < 10 {
		t.Fatalf("found %d templates in the README and docs/templates.md, want 10 or more", len(out))
	}
	return out
}

// realTemplate is a template made runnable here, the same way for the
// real agent and the runner: the action's image is the probe (it records
// what it got and exits 0, or PROBE_EXIT), the sockets' host paths are
// in dir, and env is added to the environment.
func realTemplate(t *testing.T, tmpl docTemplate, image, dir string, env map[string]string) string {
	t.Helper()
	text := tmpl.text
	actionImage := regexp.MustCompile(`(?m)^  image: \S+$`)
	if !actionImage.MatchString(text) {
		t.Fatalf("%s names no action image:\n%s", tmpl.where, text)
	}
	text = actionImage.ReplaceAllLiteralString(text, "  image: "+image)
	for _, sock := range []string{"/var/run/docker.sock", "/run/containerd/containerd.sock"} {
		text = strings.ReplaceAll(text, "- "+sock+":", "- "+filepath.Join(dir, filepath.Base(sock))+":")
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var add strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&add, "    %s: %q\n", k, env[k])
	}
	if !strings.Contains(text, "\n  environment:\n") {
		t.Fatalf("%s has no environment:\n%s", tmpl.where, text)
	}
	return strings.Replace(text, "\n  environment:\n", "\n  environment:\n"+add.String(), 1)
}

// servedAction is an action as the release's gRPC handler served it
// (proto.ActionResponse, protojson's names).
type servedAction struct {
	ActionID    string   `json:"action_id"`
	Name        string   `json:"name"`
	Image       string   `json:"image"`
	Timeout     string   `json:"timeout"`
	Command     []string `json:"command"`
	Volumes     []string `json:"volumes"`
	Environment []string `json:"environment"`
	Pid         string   `json:"pid"`
	Namespaces  *struct {
		Network string `json:"network"`
		Pid     string `json:"pid"`
	} `json:"namespaces"`
}

// made is what a worker made of one action, and what it had removed when
// it reported.
type made struct {
	// Docker: the create request's body as sent, and the container as
	// the engine inspected it before the worker got its ID.
	createBody, inspect json.RawMessage
	removeQuery         string // the query of the worker's DELETE
	// containerd: the container as created.
	container *containerdapi.Container
	// left is what of the container was still there at the report: on
	// Docker "container"; on containerd "container", "task", "snapshot".
	left []string
	// exited, removed and reported: when the action exited (Docker: the
	// wait's answer; containerd: the task's exit), when the worker's
	// removal ended, when its report arrived (the runner: RemovedAt).
	exited, removed, reported time.Time
	state                     string // the report: SUCCESS, FAILED
}

// TestRealAgent holds the runner (testkit/tinkagent) to Tinkerbell's
// released tink-agent, v0.23.0, v0.24.0 and v0.25.0, each fed over gRPC
// by its own release's server side (the controller's render and the
// tink-server's handler, tools/tinkerbell): every template of the README
// and docs/templates.md, with the probe as the action's image, and one
// that fails, runs as one workflow through the real agent, and each
// action again through the runner at that release, on Docker 20.10 and on
// the test containerd. The release must serve each action as the runner
// reads it, and both must make the same container (command and
// entrypoint, environment and its order, mounts, namespaces, privileges,
// devices, capabilities, user, labels) and have removed the same of it
// when they report; each difference is named.
func TestRealAgent(t *testing.T) {
	rels := realAgents(t)
	templates := docTemplates(t)
	t.Run("docker", func(t *testing.T) {
		onRow(t, "docker")
		c := setup(t)
		for _, rel := range rels {
			t.Run(rel.version, func(t *testing.T) { compareOnDocker(t, c, rel, templates) })
		}
	})
	t.Run("containerd", func(t *testing.T) {
		c, _, _ := setupContainerd(t)
		for _, rel := range rels {
			t.Run(rel.version, func(t *testing.T) { compareOnContainerd(t, c, rel, templates) })
		}
	})
}

// realWorkflow is the action list both run: every template, then the
// first again failing (PROBE_EXIT 3), named "failing". The controller
// refuses a task with two actions of one name: each template's is
// suffixed with its place.
func realWorkflow(t *testing.T, templates []docTemplate, image, dir string, env map[string]string) []string {
	var list []string
	for i, tmpl := range templates {
		text := realTemplate(t, tmpl, image, dir, env)
		list = append(list, nameLine.ReplaceAllString(text, fmt.Sprintf("- name: ${1}-%d", i)))
	}
	failEnv := map[string]string{"PROBE_EXIT": "3"}
	for k, v := range env {
		failEnv[k] = v
	}
	failing := realTemplate(t, templates[0], image, dir, failEnv)
	failing = nameLine.ReplaceAllLiteralString(failing, "- name: failing")
	return append(list, failing)
}

// agentRun is one run of a release's tink-agent on a workflow.
type agentRun struct {
	served  []servedAction
	reports map[string]report // by action ID
	log     *bytes.Buffer     // the server's lines and the agent's log
}

type report struct {
	state   string
	arrived time.Time
}

// runRealAgent serves actions from rel's server side to rel's tink-agent,
// on runtime with args, until the workflow ends. atReport runs when a
// report of an action's end arrives, while the agent waits for its answer
// (tink-server -hold).
func runRealAgent(t *testing.T, rel realRelease, actions []string, args []string, atReport func(servedAction, report)) agentRun {
	t.Helper()
	file := filepath.Join(t.TempDir(), "actions.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(actions, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := agentRun{reports: map[string]report{}, log: &bytes.Buffer{}}
	var logMu sync.Mutex
	logf := func(format string, a ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(run.log, format+"\n", a...)
	}

	server := exec.CommandContext(ctx, filepath.Join(rel.dir, "tink-server"), "-template", file, "-listen", "127.0.0.1:0", "-id", "waitdaemon", "-hold", "1s", "-exit")
	stdout, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	server.Stderr = writerFunc(func(p []byte) { logf("tink-server: %s", bytes.TrimSpace(p)) })
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	var addr string
	for addr == "" && lines.Scan() {
		logf("tink-server: %s", lines.Text())
		var l struct{ Msg, Listen string }
		if json.Unmarshal(lines.Bytes(), &l) == nil && l.Msg == "serving" {
			addr = l.Listen
		}
	}
	if addr == "" {
		_ = server.Wait()
		t.Fatalf("%s's tink-server did not serve:\n%s", rel.version, run.log)
	}

	agent := exec.CommandContext(ctx, filepath.Join(rel.dir, "tink-agent"),
		append([]string{"--id", "waitdaemon", "--grpc-server", addr, "--attribute-detection=false"}, args...)...)
	agent.Stdout = writerFunc(func(p []byte) { logf("tink-agent: %s", bytes.TrimSpace(p)) })
	agent.Stderr = agent.Stdout
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = agent.Process.Kill()
		_ = agent.Wait()
	}()
	byID := map[string]servedAction{}
	for lines.Scan() {
		logf("tink-server: %s", lines.Text())
		var l struct {
			Msg      string          `json:"msg"`
			State    string          `json:"state"`
			ActionID string          `json:"action_id"`
			Arrived  time.Time       `json:"arrived"`
			Action   json.RawMessage `json:"action"`
		}
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			continue
		}
		switch l.Msg {
		case "action served":
			var a servedAction
			if err := json.Unmarshal(l.Action, &a); err != nil {
				t.Fatalf("the served action %s: %v", l.Action, err)
			}
			run.served = append(run.served, a)
			byID[a.ActionID] = a
		case "report":
			if l.State == "RUNNING" {
				continue
			}
			r := report{state: l.State, arrived: l.Arrived}
			run.reports[l.ActionID] = r
			if atReport != nil {
				atReport(byID[l.ActionID], r)
			}
		}
	}
	if err := server.Wait(); err != nil {
		t.Fatalf("%s's tink-server: %v (the workflow did not end within 5 minutes?)\n%s", rel.version, err, run.log)
	}
	return run
}

type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// runnerAction is what the runner reads of actions[i] at rel, given the
// action ID the release served it with; it must be what the release
// served.
func runnerAction(t *testing.T, rel realRelease, text string, served servedAction) tinkagent.Action {
	t.Helper()
	a, err := tinkagent.ParseTemplate([]byte(text), rel.runner, served.ActionID)
	if err != nil {
		t.Fatalf("the runner cannot read:\n%s\n%v", text, err)
	}
	// What the runner reads against what the release served.
	var want tinkagent.Action
	want.Release, want.ID, want.Name, want.Image = rel.runner, served.ActionID, served.Name, served.Image
	want.Args, want.Env, want.Volumes, want.PID = served.Command, served.Environment, served.Volumes, served.Pid
	if served.Namespaces != nil {
		want.Network = served.Namespaces.Network
	}
	var secs int64
	_, _ = fmt.Sscan(served.Timeout, &secs)
	want.Timeout = time.Duration(secs) * time.Second
	g, _ := json.Marshal(a)
	w, _ := json.Marshal(want)
	if diff := jsonDiff(w, g, "release", "runner"); diff != "" {
		t.Errorf("action %s: the runner reads it otherwise than %s serves it:\n%s", served.Name, rel.version, diff)
	}
	return a
}

func compareOnDocker(t *testing.T, c *dockerapi.Client, rel realRelease, templates []docTemplate) {
	dir := t.TempDir()
	proxy := newRecordingProxy(t, c.SocketPath(), !engineOf(c).privileged)
	actions := realWorkflow(t, templates, probeImage, dir, nil)
	var mu sync.Mutex
	agentMade := map[string]*made{}
	run := runRealAgent(t, rel, actions, []string{"--runtime", "docker", "--docker-socket", proxy.sock}, func(a servedAction, r report) {
		m := proxy.made(a.Name, a.ActionID)
		if m == nil {
			return
		}
		if _, err := c.ContainerInspect(context.Background(), m.id); err == nil {
			m.left = append(m.left, "container")
		}
		m.reported, m.state = r.arrived, r.state
		mu.Lock()
		agentMade[a.ActionID] = &m.made
		mu.Unlock()
	})
	if len(run.served) != len(actions) {
		t.Fatalf("%s served %d actions, want %d, one a template and the failing one:\n%s", rel.version, len(run.served), len(actions), run.log)
	}
	d := &tinkagent.Docker{C: &dockerapi.Client{Socket: proxy.sock}}
	for i, served := range run.served {
		where := "the failing action"
		if i < len(templates) {
			where = templates[i].where
		}
		t.Run(fmt.Sprintf("%02d %s", i, served.Name), func(t *testing.T) {
			t.Logf("%s", where)
			a := runnerAction(t, rel, actions[i], served)
			got := agentMade[served.ActionID]
			if got == nil {
				t.Fatalf("%s's agent made no container of it, or never reported it:\n%s", rel.version, run.log)
			}
			res, err := d.Run(testCtx(t), a)
			if err != nil && res.ExitCode == 0 {
				t.Fatalf("the runner: %v", err)
			}
			m := proxy.made(served.Name, served.ActionID)
			if m == nil {
				t.Fatal("the runner made no container of it")
			}
			if _, err := c.ContainerInspect(context.Background(), m.id); err == nil {
				m.left = append(m.left, "container")
			}
			m.reported = res.RemovedAt
			m.state = "SUCCESS"
			if !res.Succeeded() {
				m.state = "FAILED"
			}
			compareMade(t, rel, *got, m.made)
		})
	}
}

func compareOnContainerd(t *testing.T, c *containerdapi.Client, rel realRelease, templates []docTemplate) {
	dir := t.TempDir()
	// The probe holds for a second, so that its container is read before
	// the agent deletes it.
	actions := realWorkflow(t, templates, probeImage, dir, map[string]string{"PROBE_SLEEP": "1"})
	watch := watchContainers(t, c)
	args := []string{"--runtime", "containerd", "--containerd-socket", containerdSocket, "--containerd-namespace", containerdNS}
	if rel.runner != tinkagent.V023 {
		// Where v0.24.0 and later keep nerdctl's logs.
		args = append(args, "--containerd-data-root", filepath.Join(dir, "nerdctl"))
	}
	var mu sync.Mutex
	agentMade := map[string]*made{}
	run := runRealAgent(t, rel, actions, args, func(a servedAction, r report) {
		ctr := watch.byAction(a.ActionID)
		if ctr == nil {
			return
		}
		m := &made{container: ctr, reported: r.arrived, state: r.state, exited: watch.exited(ctr.ID), removed: watch.deleted(ctr.ID)}
		m.left = leftOnContainerd(c, *ctr)
		mu.Lock()
		agentMade[a.ActionID] = m
		mu.Unlock()
	})
	watch.stop()
	if len(run.served) != len(actions) {
		t.Fatalf("%s served %d actions, want %d, one a template and the failing one:\n%s", rel.version, len(run.served), len(actions), run.log)
	}
	r := &tinkagent.Containerd{C: c}
	for i, served := range run.served {
		where := "the failing action"
		if i < len(templates) {
			where = templates[i].where
		}
		t.Run(fmt.Sprintf("%02d %s", i, served.Name), func(t *testing.T) {
			t.Logf("%s", where)
			a := runnerAction(t, rel, actions[i], served)
			got := agentMade[served.ActionID]
			if got == nil {
				t.Fatalf("%s's agent made no container of it, or never reported it:\n%s", rel.version, run.log)
			}
			t.Cleanup(func() { removeAgentLeft(c, *got.container) })
			ctx := testCtx(t)
			ctr, err := r.Create(ctx, a)
			if err != nil {
				t.Fatalf("the runner: %v", err)
			}
			rec, err := c.ContainerGet(ctx, ctr.ID)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { removeAgentLeft(c, rec) })
			res, err := ctr.Run(ctx)
			if err != nil {
				t.Fatalf("the runner: %v", err)
			}
			if err := ctr.Finish(ctx, res); err != nil {
				t.Fatalf("the runner's clean-up: %v", err)
			}
			m := made{container: &rec, exited: res.ExitedAt, reported: time.Now(), state: "SUCCESS"}
			if !res.Succeeded() {
				m.state = "FAILED"
			}
			m.left = leftOnContainerd(c, rec)
			compareMade(t, rel, *got, m)
		})
	}
}

// compareMade names each difference between what the real agent made and
// what the runner made of one action.
func compareMade(t *testing.T, rel realRelease, agent, runner made) {
	t.Helper()
	if agent.state != runner.state {
		t.Errorf("%s reported %s, the runner's action ended %s", rel.version, agent.state, runner.state)
	}
	if !slices.Equal(agent.left, runner.left) {
		t.Errorf("left at the report: %s's agent %q, the runner %q", rel.version, agent.left, runner.left)
	}
	if agent.createBody != nil {
		if diff := jsonDiff(stripZero(agent.createBody), stripZero(runner.createBody), rel.version, "runner"); diff != "" {
			t.Errorf("the create request (zero values left out) differs:\n%s", diff)
		}
		if diff := jsonDiff(agent.inspect, runner.inspect, rel.version, "runner"); diff != "" {
			t.Errorf("the container as the engine inspects it differs:\n%s", diff)
		}
		if agent.removeQuery != runner.removeQuery {
			t.Errorf("the removal: %s's agent ?%s, the runner ?%s", rel.version, agent.removeQuery, runner.removeQuery)
		}
	}
	if agent.container != nil {
		// The runner keeps no nerdctl state, as docs/development.md says
		// ("What it does not do as the agent does"): v0.24.0 and later
		// label their containers with their json-file log and its
		// directory, which only `nerdctl logs` and `nerdctl rm` read.
		ctr := *agent.container
		ctr.Labels = maps.Clone(ctr.Labels)
		for _, l := range []string{"nerdctl/log-uri", "nerdctl/state-dir"} {
			if _, ok := ctr.Labels[l]; ok {
				t.Logf("left out, as documented: %s's label %s", rel.version, l)
				delete(ctr.Labels, l)
			}
		}
		a, r := normalContainer(ctr), normalContainer(*runner.container)
		if diff := jsonDiff(a, r, rel.version, "runner"); diff != "" {
			t.Errorf("the container (its record and OCI spec) differs:\n%s", diff)
		}
	}
	if !agent.exited.IsZero() {
		t.Logf("%s's agent: exit → removed %v, → report %v", rel.version, sub(agent.removed, agent.exited), agent.reported.Sub(agent.exited))
	}
	if !runner.exited.IsZero() {
		t.Logf("the runner: exit → clean-up ended %v", runner.reported.Sub(runner.exited))
	}
}

func sub(a, b time.Time) any {
	if a.IsZero() {
		return "?"
	}
	return a.Sub(b)
}

// recordingProxy stands between a worker and Docker's socket: it passes
// every exchange on, and records each container's create request as sent
// and the container as the engine inspects it before the worker has its
// ID, each DELETE, and when each wait answered. unprivileged turns a
// create's Privileged into CAP_SYS_BOOT before the engine sees it (as
// tinkagent.Docker.Unprivileged does), for an engine that cannot start a
// privileged container; what is recorded is the request as sent.
type recordingProxy struct {
	sock string
	up   *http.Client

	mu    sync.Mutex
	ctrs  []*recorded
	waits map[string]time.Time // container ID: when its wait answered
}

type recorded struct {
	made
	id, name string
}

var (
	createPath = regexp.MustCompile(`^(/v[0-9.]+)?/containers/create$`)
	ctrPath    = regexp.MustCompile(`^(/v[0-9.]+)?/containers/([^/]+)(/wait)?$`)
)

func newRecordingProxy(t *testing.T, upstream string, unprivileged bool) *recordingProxy {
	t.Helper()
	dir, err := os.MkdirTemp("", "recproxy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", upstream)
	}
	p := &recordingProxy{sock: filepath.Join(dir, "docker.sock"), up: &http.Client{Transport: &http.Transport{DialContext: dial}}, waits: map[string]time.Time{}}
	rp := &httputil.ReverseProxy{
		Transport:     &http.Transport{DialContext: dial},
		FlushInterval: -1,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker"
			if r.In.Method != "POST" || !createPath.MatchString(r.In.URL.Path) {
				return
			}
			body, _ := io.ReadAll(r.In.Body)
			pc := &recorded{name: r.In.URL.Query().Get("name")}
			pc.createBody = body
			if unprivileged {
				var m map[string]any
				if json.Unmarshal(body, &m) == nil {
					if hc, ok := m["HostConfig"].(map[string]any); ok && hc["Privileged"] == true {
						hc["Privileged"] = false
						hc["CapAdd"] = []string{"SYS_BOOT"}
						body, _ = json.Marshal(m)
					}
				}
			}
			r.Out.Body = io.NopCloser(bytes.NewReader(body))
			r.Out.ContentLength = int64(len(body))
			r.Out.Header.Set("Content-Length", fmt.Sprint(len(body)))
			p.mu.Lock()
			p.ctrs = append(p.ctrs, pc)
			p.mu.Unlock()
		},
		ModifyResponse: func(resp *http.Response) error {
			r := resp.Request
			if m := ctrPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == "DELETE" && resp.StatusCode/100 == 2 {
				p.mu.Lock()
				for _, pc := range p.ctrs {
					if pc.id == m[2] || pc.name == m[2] {
						pc.removed, pc.removeQuery = time.Now(), r.URL.RawQuery
					}
				}
				p.mu.Unlock()
			}
			if m := ctrPath.FindStringSubmatch(r.URL.Path); m != nil && m[3] == "/wait" && resp.StatusCode == 200 {
				// The wait's headers come at once, its one line at the
				// exit: the time of its first byte.
				id := m[2]
				resp.Body = &firstRead{ReadCloser: resp.Body, at: func() {
					p.mu.Lock()
					p.waits[id] = time.Now()
					p.mu.Unlock()
				}}
				return nil
			}
			if r.Method != "POST" || !createPath.MatchString(r.URL.Path) || resp.StatusCode != 201 {
				return nil
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			var created struct {
				ID string `json:"Id"`
			}
			if err := json.Unmarshal(body, &created); err != nil {
				return err
			}
			ins, err := p.up.Get("http://docker/containers/" + created.ID + "/json")
			if err != nil {
				return err
			}
			defer ins.Body.Close()
			inspect, err := io.ReadAll(ins.Body)
			if err != nil {
				return err
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, pc := range p.ctrs {
				if pc.name == r.URL.Query().Get("name") && pc.id == "" {
					pc.id, pc.inspect = created.ID, normalInspect(inspect, created.ID)
				}
			}
			return nil
		},
	}
	ln, err := net.Listen("unix", p.sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

// firstRead calls at when its first bytes are read.
type firstRead struct {
	io.ReadCloser
	once sync.Once
	at   func()
}

func (r *firstRead) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		r.once.Do(r.at)
	}
	return n, err
}

// made is the last container made for action name with action ID id (its
// name ends with it), with its exit's time.
func (p *recordingProxy) made(name, id string) *recorded {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.ctrs) - 1; i >= 0; i-- {
		pc := p.ctrs[i]
		if strings.HasSuffix(pc.name, "_"+id) {
			cp := *pc
			cp.exited = p.waits[pc.id]
			return &cp
		}
	}
	return nil
}

// normalInspect is a container's inspect without what differs from one
// container to the next (its ID, times, state, paths of its own, network
// settings).
func normalInspect(data []byte, id string) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return data
	}
	for _, k := range []string{"Id", "Created", "State", "ResolvConfPath", "HostnamePath", "HostsPath", "LogPath", "GraphDriver", "NetworkSettings", "SizeRw", "SizeRootFs"} {
		delete(m, k)
	}
	out, _ := json.Marshal(m)
	out = bytes.ReplaceAll(out, []byte(id), []byte("<id>"))
	return bytes.ReplaceAll(out, []byte(id[:12]), []byte("<id12>"))
}

// stripZero leaves out of a JSON value every null, false, 0, "", and
// every object or array left empty: Docker reads an absent field as its
// zero.
func stripZero(data []byte) json.RawMessage {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return data
	}
	var strip func(any) (any, bool)
	strip = func(v any) (any, bool) {
		switch x := v.(type) {
		case nil:
			return nil, false
		case bool:
			return x, x
		case float64:
			return x, x != 0
		case string:
			return x, x != ""
		case []any:
			var out []any
			keep := false
			for _, e := range x {
				s, ok := strip(e)
				keep = keep || ok
				out = append(out, s)
			}
			return out, keep
		case map[string]any:
			out := map[string]any{}
			for k, e := range x {
				if s, ok := strip(e); ok {
					out[k] = s
				}
			}
			return out, len(out) > 0
		}
		return v, true
	}
	s, _ := strip(v)
	out, _ := json.Marshal(s)
	return out
}

// containerWatch records each container made in the namespace, as soon
// as it is there, and each task's exit.
type containerWatch struct {
	c      *containerdapi.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	ctrs    map[string]containerdapi.Container
	exits   map[string]time.Time
	deletes map[string]time.Time
}

func watchContainers(t *testing.T, c *containerdapi.Client) *containerWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &containerWatch{c: c, cancel: cancel, done: make(chan struct{}), ctrs: map[string]containerdapi.Container{}, exits: map[string]time.Time{}, deletes: map[string]time.Time{}}
	sub, err := c.Subscribe(ctx, `topic=="`+containerdapi.TopicTaskExit+`"`, `topic=="/containers/delete"`)
	if err != nil {
		cancel()
		t.Fatalf("subscribing to the tasks' exits: %v", err)
	}
	go func() {
		defer sub.Close()
		for {
			e, err := sub.Next()
			if err != nil {
				return
			}
			if e.Namespace != c.Namespace {
				continue
			}
			w.mu.Lock()
			if exit, err := e.TaskExit(); err == nil {
				w.exits[exit.ContainerID] = exit.ExitedAt
			} else if del, err := e.ContainerDelete(); err == nil {
				w.deletes[del.ID] = e.Timestamp
			}
			w.mu.Unlock()
		}
	}()
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			list, _ := c.ContainerList(ctx)
			w.mu.Lock()
			for _, ctr := range list {
				if _, ok := w.ctrs[ctr.ID]; !ok {
					w.ctrs[ctr.ID] = ctr
				}
			}
			w.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *containerWatch) stop() {
	w.cancel()
	<-w.done
}

func (w *containerWatch) byAction(actionID string) *containerdapi.Container {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ctr := range w.ctrs {
		if strings.HasSuffix(ctr.Labels["nerdctl/name"], "_"+actionID) {
			return &ctr
		}
	}
	return nil
}

// exited and deleted are when container id's task exited, and when the
// container was deleted (zero: not seen).
func (w *containerWatch) exited(id string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.exits[id]
}

func (w *containerWatch) deleted(id string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deletes[id]
}

// leftOnContainerd is what of ctr is still there.
func leftOnContainerd(c *containerdapi.Client, ctr containerdapi.Container) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var left []string
	if _, err := c.ContainerGet(ctx, ctr.ID); !errors.Is(err, containerdapi.ErrNotFound) {
		left = append(left, "container")
	}
	if _, err := c.TaskGet(ctx, ctr.ID); !errors.Is(err, containerdapi.ErrNotFound) {
		left = append(left, "task")
	}
	if _, err := c.SnapshotStat(ctx, ctr.Snapshotter, ctr.SnapshotKey); !errors.Is(err, containerdapi.ErrNotFound) {
		left = append(left, "snapshot")
	}
	return left
}

// removeAgentLeft removes what a failed action left.
func removeAgentLeft(c *containerdapi.Client, ctr containerdapi.Container) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = c.TaskDelete(ctx, ctr.ID)
	_ = c.ContainerDelete(ctx, ctr.ID)
	_ = c.SnapshotRemove(ctx, ctr.Snapshotter, ctr.SnapshotKey)
}

// normalContainer is a containerd container's record and spec without
// its ID, its times and the path of its generated /etc files.
func normalContainer(ctr containerdapi.Container) json.RawMessage {
	var spec any
	_ = json.Unmarshal(ctr.Spec.Value, &spec)
	m := map[string]any{
		"labels": ctr.Labels, "image": ctr.Image, "runtime": ctr.Runtime, "snapshotter": ctr.Snapshotter,
		"snapshot_key": ctr.SnapshotKey, "spec_type": ctr.Spec.TypeURL, "spec": spec,
	}
	out, _ := json.Marshal(m)
	// The /etc files' directory: the source of the /etc/hosts mount.
	var s struct {
		Mounts []struct{ Destination, Source string }
	}
	_ = json.Unmarshal(ctr.Spec.Value, &s)
	for _, mnt := range s.Mounts {
		if mnt.Destination == "/etc/hosts" {
			out = bytes.ReplaceAll(out, []byte(filepath.Dir(mnt.Source)), []byte("<etc>"))
		}
	}
	out = bytes.ReplaceAll(out, []byte(ctr.ID), []byte("<id>"))
	out = bytes.ReplaceAll(out, []byte(ctr.ID[:12]), []byte("<id12>"))
	return bytes.ReplaceAll(out, []byte(ctr.ID[:8]), []byte("<id8>"))
}

// jsonDiff names each path at which two JSON values differ, a line each,
// with each side's value; "" if they are equal.
func jsonDiff(a, b []byte, aName, bName string) string {
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		return fmt.Sprintf("%s: not JSON: %v", aName, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		return fmt.Sprintf("%s: not JSON: %v", bName, err)
	}
	var lines []string
	var walk func(path string, x, y any)
	walk = func(path string, x, y any) {
		mx, okx := x.(map[string]any)
		my, oky := y.(map[string]any)
		if okx && oky {
			keys := map[string]bool{}
			for k := range mx {
				keys[k] = true
			}
			for k := range my {
				keys[k] = true
			}
			sorted := make([]string, 0, len(keys))
			for k := range keys {
				sorted = append(sorted, k)
			}
			sort.Strings(sorted)
			for _, k := range sorted {
				walk(path+"."+k, mx[k], my[k])
			}
			return
		}
		jx, _ := json.Marshal(x)
		jy, _ := json.Marshal(y)
		if !bytes.Equal(jx, jy) {
			lines = append(lines, fmt.Sprintf("  %s: %s %s, %s %s", strings.TrimPrefix(path, "."), aName, jx, bName, jy))
		}
	}
	walk("", va, vb)
	return strings.Join(lines, "\n")
}

// TestRealReleasesPid: which pid namespace each release's real server
// side serves an action, for the ways a template can ask for the host's,
// and that the runner reads the same. The old CaptainOS template, with
// namespaces.pid alone, is served with no pid by v0.23.0 and v0.24.0:
// its `kill -39 1` then signals its own container's init, and the machine
// stays up; v0.25.0 serves it the host's.
func TestRealReleasesPid(t *testing.T) {
	onRow(t, "docker") // the releases are built for the docker row, as TestRealAgent's
	rels := realAgents(t)
	const old = "- name: reboot\n  image: waitdaemon:latest\n  timeout: 90\n  command: [\"kill\", \"-39\", \"1\"]\n" +
		"  namespaces:\n    pid: host\n  volumes:\n    - /run/containerd/containerd.sock:/run/containerd/containerd.sock\n"
	cases := []struct {
		name, text string
		want       map[string]string // the pid served, by release
	}{
		{"the old CaptainOS template, namespaces.pid alone", old, map[string]string{"v0.23.0": "", "v0.24.0": "", "v0.25.0": "host"}},
		{"a top-level pid", "- name: a\n  image: i\n  pid: host\n", map[string]string{"v0.23.0": "host", "v0.24.0": "host", "v0.25.0": "host"}},
		{"namespaces.pid over a top-level pid", "- name: a\n  image: i\n  pid: host\n  namespaces:\n    pid: private\n",
			map[string]string{"v0.23.0": "host", "v0.24.0": "host", "v0.25.0": "private"}},
		{"neither", "- name: a\n  image: i\n", map[string]string{"v0.23.0": "", "v0.24.0": "", "v0.25.0": ""}},
	}
	for _, rel := range rels {
		for _, tc := range cases {
			served := servedFirst(t, rel, tc.text)
			if served.Pid != tc.want[rel.version] {
				t.Errorf("%s under %s: served pid %q, want %q", tc.name, rel.version, served.Pid, tc.want[rel.version])
			}
			a, err := tinkagent.ParseTemplate([]byte(tc.text), rel.runner, served.ActionID)
			if err != nil {
				t.Fatalf("the runner cannot read %s: %v", tc.name, err)
			}
			if a.PID != served.Pid {
				t.Errorf("%s under %s: the runner reads pid %q, the release serves %q", tc.name, rel.version, a.PID, served.Pid)
			}
		}
	}
}

// servedFirst is the first action of actions as rel's server side serves
// it (tink-server -print).
func servedFirst(t *testing.T, rel realRelease, actions string) servedAction {
	t.Helper()
	file := filepath.Join(t.TempDir(), "actions.yaml")
	if err := os.WriteFile(file, []byte(actions), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(rel.dir, "tink-server"), "-template", file, "-print").Output()
	if err != nil {
		t.Fatalf("%s's tink-server -print: %v\n%s", rel.version, err, out)
	}
	for _, line := range bytes.Split(out, []byte("\n")) {
		var l struct {
			Msg    string       `json:"msg"`
			Action servedAction `json:"action"`
		}
		if json.Unmarshal(line, &l) == nil && l.Msg == "action served" {
			return l.Action
		}
	}
	t.Fatalf("%s's tink-server -print served no action:\n%s", rel.version, out)
	return servedAction{}
}
