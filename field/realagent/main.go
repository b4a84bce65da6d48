// Command realagent runs one action of a template through a Tinkerbell
// release's real tink-agent, over gRPC, in the field's machines: it starts
// that release's server side (tink-server, tools/tinkerbell as
// scripts/tinkerbell.sh builds it) on loopback with the action as the
// workflow's one action, and the release's tink-agent pointed at it, and
// watches the engine for the action's exit. When the agent reports the
// action's end it prints the line tools/tinkagent prints, so that the
// field judges both alike:
//
//	{"msg":"action exited","action":NAME,"exit_code":N,"at":RFC3339Nano,"removed_at":RFC3339Nano,"release":VERSION,"real":true}
//
// ("action timed out" when the agent reported a timeout): at is the exit
// of the action's container as the engine announced it, removed_at the
// agent's ExecutionStop (its clean-up ends, then it stops the clock and
// reports). It exits 0 once the workflow succeeded, 1 if not.
//
//	realagent -runtime containerd|docker -socket PATH [-namespace tinkerbell] -action FILE [-agent PATH] [-server PATH] [-release NAME] [-cni]
//
// The agent and the server default to tink-agent and tink-server beside
// realagent. -release names the release in the line; -cni is accepted
// for tools/tinkagent's command line, as the real agent always loads
// CNI. On containerd it watches /var/lib/cni/networks for the address
// the action's container gets, and prints when it is allocated and when
// released ("realagent: CNI: ..."), which the field checks as it checks
// the runner's own CNI lines.
//
// With -grpc-server ADDR it starts no server: the agent, named -id, is
// pointed at ADDR, a whole control plane's tink-server (the field's
// control-plane row), which alone sees the reports. The line is then
// printed once the engine removed the action's container
// (tinkerbell_NAME_ID), removed_at the engine's time of the removal.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/dockerapi"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// line is tools/tinkagent's line, "msg" first.
type line struct {
	Msg       string    `json:"msg"`
	Action    string    `json:"action"`
	ExitCode  int       `json:"exit_code"`
	At        time.Time `json:"at"`
	RemovedAt time.Time `json:"removed_at"`
	Release   string    `json:"release"`
	Real      bool      `json:"real"`
}

// exit is the action container's exit, as the engine announced it.
type exit struct {
	at   time.Time
	code int
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("realagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	self, _ := os.Executable()
	runtime := fs.String("runtime", "", "containerd or docker")
	socket := fs.String("socket", "", "the engine's unix socket")
	namespace := fs.String("namespace", containerdapi.DefaultNamespace, "containerd's namespace")
	file := fs.String("action", "", "a file holding one action of a template, in YAML")
	agentPath := fs.String("agent", filepath.Join(filepath.Dir(self), "tink-agent"), "the release's tink-agent")
	serverPath := fs.String("server", filepath.Join(filepath.Dir(self), "tink-server"), "the release's server side")
	release := fs.String("release", "", "the release, for the line")
	_ = fs.Bool("cni", false, "accepted: the real agent always loads CNI")
	remote := fs.String("grpc-server", "", "a control plane's tink-server, host:port: no server is started")
	agentID := fs.String("id", "waitdaemon", "the agent's ID")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if (*runtime != "docker" && *runtime != "containerd") || *socket == "" || *file == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "realagent: want -runtime containerd|docker, -socket and -action, no other arguments")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "realagent: "+format+"\n", a...) }

	// The engine's exits, by the container's name, from before the agent
	// starts.
	exits := &exitLog{byName: map[string]exit{}}
	var err error
	if *runtime == "docker" {
		err = watchDocker(ctx, &dockerapi.Client{Socket: *socket}, exits)
	} else {
		c := &containerdapi.Client{Socket: *socket, Namespace: *namespace}
		err = watchContainerd(ctx, c, exits)
		go watchCNI(ctx, c, logf)
	}
	if err != nil {
		logf("watching the engine: %v", err)
		return 1
	}
	if *remote != "" {
		return runRemote(ctx, *remote, *agentID, *agentPath, *runtime, *socket, *namespace, *release, exits, stdout, stderr, logf)
	}

	server := exec.CommandContext(ctx, *serverPath, "-template", *file, "-listen", "127.0.0.1:0", "-exit")
	server.Stderr = stderr
	out, err := server.StdoutPipe()
	if err != nil {
		logf("%v", err)
		return 1
	}
	if err := server.Start(); err != nil {
		logf("starting the server: %v", err)
		return 1
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	var agent *exec.Cmd
	defer func() {
		if agent != nil && agent.Process != nil {
			_ = agent.Process.Signal(syscall.SIGTERM)
			_ = agent.Wait()
		}
	}()
	served := map[string]string{} // action ID: name
	ended := ""
	for sc.Scan() {
		fmt.Fprintf(stderr, "tink-server: %s\n", sc.Text())
		var l struct {
			Msg      string `json:"msg"`
			Listen   string `json:"listen"`
			State    string `json:"state"`
			ActionID string `json:"action_id"`
			Stop     string `json:"execution_stop"`
			// The action served (an object), or the one reported (its
			// name).
			Action json.RawMessage `json:"action"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch l.Msg {
		case "serving":
			agent = agentCommand(ctx, *agentPath, *agentID, l.Listen, *runtime, *socket, *namespace, stderr)
			if err := agent.Start(); err != nil {
				logf("starting the agent: %v", err)
				return 1
			}
		case "action served":
			var a struct {
				ActionID string `json:"action_id"`
				Name     string `json:"name"`
			}
			if err := json.Unmarshal(l.Action, &a); err != nil {
				logf("the served action %s: %v", l.Action, err)
				continue
			}
			served[a.ActionID] = a.Name
		case "report":
			if l.State == "RUNNING" {
				continue
			}
			name := served[l.ActionID]
			e, ok := exits.find("_" + l.ActionID)
			if !ok {
				logf("no exit of the action's container %s was seen", l.ActionID)
			}
			ln := line{Msg: "action exited", Action: name, ExitCode: e.code, At: e.at, Release: *release, Real: true}
			if l.State == "TIMEOUT" {
				ln.Msg = "action timed out"
			}
			ln.RemovedAt, _ = time.Parse(time.RFC3339Nano, l.Stop)
			b, _ := json.Marshal(ln)
			fmt.Fprintf(stdout, "%s\n", b)
		case "workflow ended":
			ended = l.State
		}
	}
	if err := server.Wait(); err != nil {
		logf("the server: %v", err)
	}
	if ended == "POST" || ended == "SUCCESS" {
		return 0
	}
	return 1
}

// agentCommand is the release's tink-agent, named id, pointed at the
// tink-server at addr; its log and the action's output go to out, as its
// service's.
func agentCommand(ctx context.Context, path, id, addr, runtime, socket, namespace string, out io.Writer) *exec.Cmd {
	agent := exec.CommandContext(ctx, path, "--id", id, "--grpc-server", addr, "--attribute-detection=false", "--runtime", runtime)
	if runtime == "docker" {
		agent.Args = append(agent.Args, "--docker-socket", socket)
	} else {
		agent.Args = append(agent.Args, "--containerd-socket", socket, "--containerd-namespace", namespace)
	}
	agent.Stdout, agent.Stderr = out, out
	return agent
}

// runRemote runs the agent against a control plane's tink-server at
// addr, and prints the line of each action once the engine has removed
// its container; it runs until the machine goes down or a signal.
func runRemote(ctx context.Context, addr, id, agentPath, runtime, socket, namespace, release string, exits *exitLog, stdout, stderr io.Writer, logf func(string, ...any)) int {
	agent := agentCommand(ctx, agentPath, id, addr, runtime, socket, namespace, stderr)
	if err := agent.Start(); err != nil {
		logf("starting the agent: %v", err)
		return 1
	}
	logf("tink-agent %s started, pointed at the control plane's tink-server %s", id, addr)
	done := make(chan error, 1)
	go func() { done <- agent.Wait() }()
	printed := map[string]bool{}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			logf("the agent ended: %v", err)
			return 1
		case <-ctx.Done():
			_ = agent.Process.Signal(syscall.SIGTERM)
			<-done
			return 1
		case <-tick.C:
		}
		for name, e := range exits.removed() {
			action, ok := actionName(name)
			if !ok || printed[name] {
				continue
			}
			printed[name] = true
			b, _ := json.Marshal(line{Msg: "action exited", Action: action, ExitCode: e.code, At: e.at, RemovedAt: e.removedAt, Release: release, Real: true})
			fmt.Fprintf(stdout, "%s\n", b)
		}
	}
}

// actionName is the action's name in the name tink-agent gives its
// container, tinkerbell_NAME_ID; the containers waitdaemon makes from it
// are none.
func actionName(container string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(container, "/"), "tinkerbell_")
	i := strings.LastIndex(rest, "_")
	if !ok || i <= 0 || strings.Contains(rest, "-waitdaemon") {
		return "", false
	}
	return rest[:i], true
}

// exitLog holds each container's exit, by its name, and its removal.
type exitLog struct {
	mu     sync.Mutex
	byName map[string]exit
	gone   map[string]time.Time
}

// remove logs the removal of the container name at.
func (l *exitLog) remove(name string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone == nil {
		l.gone = map[string]time.Time{}
	}
	l.gone[name] = at
}

// removedExit is an exit whose container was then removed.
type removedExit struct {
	exit
	removedAt time.Time
}

// removed are the exits of containers since removed, by name.
func (l *exitLog) removed() map[string]removedExit {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]removedExit{}
	for name, at := range l.gone {
		if e, ok := l.byName[name]; ok {
			out[name] = removedExit{e, at}
		}
	}
	return out
}

func (l *exitLog) add(name string, e exit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byName[name] = e
}

// find is the exit of the container whose name ends with suffix; an
// exit announced a moment after the report is waited for.
func (l *exitLog) find(suffix string) (exit, bool) {
	for range 20 {
		l.mu.Lock()
		for name, e := range l.byName {
			if strings.HasSuffix(name, suffix) {
				l.mu.Unlock()
				return e, true
			}
		}
		l.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	return exit{}, false
}

// watchDocker logs each container's die event: its name, exit code and
// time.
func watchDocker(ctx context.Context, c *dockerapi.Client, exits *exitLog) error {
	ev, err := c.Events(ctx, dockerapi.EventsOptions{Filters: map[string][]string{"type": {"container"}, "event": {"die", "destroy"}}})
	if err != nil {
		return err
	}
	go func() {
		defer ev.Close()
		for {
			m, err := ev.Next()
			if err != nil {
				return
			}
			if m.Action == "destroy" {
				exits.remove(m.Actor.Attributes["name"], time.Unix(0, m.TimeNano))
				continue
			}
			var code int
			_, _ = fmt.Sscan(m.Actor.Attributes["exitCode"], &code)
			exits.add(m.Actor.Attributes["name"], exit{at: time.Unix(0, m.TimeNano), code: code})
		}
	}()
	return nil
}

// watchContainerd logs each task's exit, by its container's nerdctl name
// (read when the task starts).
func watchContainerd(ctx context.Context, c *containerdapi.Client, exits *exitLog) error {
	sub, err := c.Subscribe(ctx, `topic=="/tasks/start"`, `topic=="`+containerdapi.TopicTaskExit+`"`, `topic=="`+containerdapi.TopicContainerDelete+`"`)
	if err != nil {
		return err
	}
	go func() {
		defer sub.Close()
		names := map[string]string{}
		for {
			e, err := sub.Next()
			if err != nil {
				return
			}
			if e.Namespace != c.Namespace {
				continue
			}
			if s, err := e.TaskStart(); err == nil {
				if ctr, err := c.ContainerGet(ctx, s.ContainerID); err == nil {
					names[s.ContainerID] = ctr.Labels["nerdctl/name"]
				}
				continue
			}
			if x, err := e.TaskExit(); err == nil && x.ID == x.ContainerID {
				exits.add(names[x.ContainerID], exit{at: x.ExitedAt, code: int(x.ExitStatus)})
				continue
			}
			if d, err := e.ContainerDelete(); err == nil {
				exits.remove(names[d.ID], e.Timestamp)
			}
		}
	}()
	return nil
}

// cniDir is where host-local, the IPAM plugin of CaptainOS's bridge,
// keeps each address it allocated, a file named for it holding the
// container's ID.
const cniDir = "/var/lib/cni/networks"

// watchCNI prints when an action container of the namespace gets an
// address of a CNI network, and when the address is released.
func watchCNI(ctx context.Context, c *containerdapi.Client, logf func(string, ...any)) {
	held := map[string]string{} // address file: container ID
	for ctx.Err() == nil {
		now := map[string]string{}
		files, _ := filepath.Glob(filepath.Join(cniDir, "*", "*"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil || strings.HasPrefix(filepath.Base(f), "last_reserved_ip") || filepath.Base(f) == "lock" {
				continue
			}
			id, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
			if id = strings.TrimSpace(id); id == "" {
				continue // made, its ID not yet written: the next look has it
			}
			now[f] = id
		}
		for f, id := range now {
			if _, ok := held[f]; !ok {
				name := id
				if ctr, err := c.ContainerGet(ctx, id); err == nil {
					name = ctr.Labels["nerdctl/name"]
				}
				logf("CNI: %s allocated %s to %s (%s)", filepath.Base(filepath.Dir(f)), filepath.Base(f), id, name)
			}
		}
		for f, id := range held {
			if _, ok := now[f]; !ok {
				logf("CNI: %s released %s of %s", filepath.Base(filepath.Dir(f)), filepath.Base(f), id)
			}
		}
		held = now
		time.Sleep(20 * time.Millisecond)
	}
}
