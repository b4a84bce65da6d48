// Command tinkagent runs one action of a Tinkerbell template as tink-agent
// does, on containerd or Docker (package testkit/tinkagent): a test rig
// for machines that have no Tinkerbell server, such as the VM suite's.
//
//	tinkagent -runtime containerd|docker -socket PATH [-namespace tinkerbell] [-release head] [-cni] -action FILE
//
// FILE is one action as a template writes it, or a whole template of one
// task of one action, read as -release reads it: tink-worker, v0.23,
// v0.24, v0.25 or head (the default). The action's output goes to
// stderr; one JSON line on stdout, once the worker's clean-up is done,
// when it would report, says how it ended:
//
//	{"msg":"action exited","action":NAME,"exit_code":N,"at":RFC3339Nano,"removed_at":RFC3339Nano}
//
// ("action timed out" when its timeout passed, with "killed_at", when it
// did; exit_code -1 when the action never ran; removed_at when the
// clean-up before the report ended). It
// exits 0 if the action succeeded, 1 if not, 2 on bad input.
// -unprivileged, for Docker engines that cannot start a privileged
// container, leaves out Privileged, which the agent always sets, and
// gives the action CAP_SYS_BOOT alone.
// -cni gives each containerd action that is not on the host's network the
// CNI network of /etc/cni/net.d's first conflist, with /opt/cni/bin's
// plugins, as tink-agent does on CaptainOS; its setup and teardown are
// logged to stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// runner is either runtime.
type runner interface {
	Run(ctx context.Context, a tinkagent.Action) (tinkagent.Result, error)
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tinkagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runtime := fs.String("runtime", "", "containerd or docker")
	socket := fs.String("socket", "", "the engine's unix socket")
	namespace := fs.String("namespace", containerdapi.DefaultNamespace, "containerd's namespace")
	file := fs.String("action", "", "a file holding one action of a template, in YAML")
	release := fs.String("release", "head", "the Tinkerbell whose server and worker to copy: tink-worker, v0.23, v0.24, v0.25 or head")
	unprivileged := fs.Bool("unprivileged", false, "docker: leave out Privileged (CAP_SYS_BOOT alone instead), for an engine that cannot start a privileged container")
	cni := fs.Bool("cni", false, "containerd: give each action not on the host's network the CNI network of "+tinkagent.CNIConfDir+"'s first conflist (else tink-agent's bridge), its plugins from "+tinkagent.CNIBinDir+", as tink-agent does; off unless asked, so that a host's own networks are left alone")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "tinkagent: "+format+"\n", a...)
		fs.Usage()
		return 2
	}
	if fs.NArg() > 0 {
		return bad("unexpected arguments %q", fs.Args())
	}
	if *socket == "" {
		return bad("-socket: want the engine's unix socket")
	}
	rel, err := tinkagent.ParseRelease(*release)
	if err != nil {
		return bad("-release: %v", err)
	}
	if *file == "" {
		return bad("-action: want a file holding one action")
	}
	data, err := os.ReadFile(*file)
	if err != nil {
		return bad("-action: %v", err)
	}
	a, err := tinkagent.ParseTemplate(data, rel, strings.ToUpper(tinkagent.NewID()[:26]))
	if err != nil {
		return bad("-action %s: %v", *file, err)
	}
	var r runner
	switch *runtime {
	case "containerd":
		c := &tinkagent.Containerd{C: &containerdapi.Client{Socket: *socket, Namespace: *namespace}, Output: stderr}
		if *cni {
			if c.CNI, err = tinkagent.LoadCNI(tinkagent.CNIConfDir, tinkagent.CNIBinDir); err != nil {
				return bad("-cni: %v", err)
			}
			c.CNI.Log = stderr
		}
		r = c
	case "docker":
		if *cni {
			return bad("-cni: want -runtime containerd (Docker's actions have Docker's networks)")
		}
		r = &tinkagent.Docker{C: &dockerapi.Client{Socket: *socket}, Output: stderr, Unprivileged: *unprivileged}
	default:
		return bad("-runtime %q: want containerd or docker", *runtime)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := r.Run(ctx, a)
	if err != nil {
		fmt.Fprintf(stderr, "tinkagent: %v\n", err)
	}
	msg := "action exited"
	if res.TimedOut {
		msg = "action timed out"
	}
	at := res.ExitedAt
	if at.IsZero() {
		at = time.Now()
	}
	removed := res.RemovedAt
	if removed.IsZero() {
		removed = time.Now()
	}
	killed := ""
	if res.TimedOut {
		killed = res.KilledAt.UTC().Format(time.RFC3339Nano)
	}
	line, _ := json.Marshal(struct {
		Msg       string `json:"msg"`
		Action    string `json:"action"`
		ExitCode  int    `json:"exit_code"`
		At        string `json:"at"`
		RemovedAt string `json:"removed_at"`
		KilledAt  string `json:"killed_at,omitempty"`
	}{msg, a.Name, res.ExitCode, at.UTC().Format(time.RFC3339Nano), removed.UTC().Format(time.RFC3339Nano), killed})
	fmt.Fprintf(stdout, "%s\n", line)
	if err != nil || !res.Succeeded() {
		return 1
	}
	return 0
}
