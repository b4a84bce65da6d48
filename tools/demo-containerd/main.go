// Command demo-containerd runs the double fork once on the test
// containerd, with the action made, started and removed as tink-agent
// does on CaptainOS (package tinkagent), and prints the JSON lines of
// both phases and what was left behind. `make demo ENGINE=containerd`
// runs it (scripts/demo.sh), once the images are imported.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/engine/containerd"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/phase"
	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
)

func main() {
	image := flag.String("image", "waitdaemon:dev", "the action image")
	probe := flag.String("probe", "waitdaemon-probe:dev", "the user image")
	socket := flag.String("socket", "/run/containerd-test/containerd.sock", "containerd's socket (make containerd starts the test one)")
	namespace := flag.String("namespace", "tinkerbell", "containerd's namespace, where the images are")
	wait := flag.String("wait", cmp.Or(os.Getenv("WAIT_SECONDS"), "3"), "WAIT_SECONDS")
	flag.Parse()
	if err := run(*image, *probe, *socket, *namespace, *wait); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(image, probe, socket, namespace, wait string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := &containerdapi.Client{Socket: socket, Namespace: namespace}
	if _, err := c.Version(ctx); err != nil {
		return fmt.Errorf("no containerd on %s: %w (make containerd starts one)", socket, err)
	}
	eng := containerd.New(c)
	refs := map[string]string{}
	for _, s := range []string{image, probe} {
		r, err := imageref.Parse(s)
		if err != nil {
			return err
		}
		refs[s] = r.Qualified()
	}
	tmp, err := os.MkdirTemp("", "waitdaemon-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "workflow")
	if err := os.Mkdir(out, 0o755); err != nil {
		return err
	}
	a := tinkagent.Action{
		ID: "01JDEMO" + strings.ToUpper(tinkagent.NewID()[:10]), Name: "demo-reboot", Image: refs[image], Args: []string{"reboot", "--force"},
		Env: []string{
			"IMAGE=" + refs[probe], "WAIT_SECONDS=" + wait, "BLOCK_DEVICE=/dev/sda", "PROBE_DIR=/workflow",
			"WAITDAEMON_RESULT_FILE=" + filepath.Join(out, "result.json"),
		},
		Volumes: []string{socket + ":" + containerdapi.DefaultSocket, out + ":/workflow"},
		PID:     "host",
	}

	fmt.Printf("== the agent creates and starts the action %s\n   (image %s, command: reboot --force, on %s, namespace %s)\n", a.ContainerName(), a.Image, socket, namespace)
	ctr, err := (&tinkagent.Containerd{C: c}).Create(ctx, a)
	if err != nil {
		return err
	}
	id := ctr.ID
	sent := time.Now()
	exit, err := ctr.Run(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("== phase 1 (the action's output, read from its FIFOs):\n%s", exit.Output)
	fmt.Printf("== the action exited %d %d ms after the agent began its wait and start (exited_at); the agent deletes its task and container\n\n",
		exit.ExitCode, exit.ExitedAt.Sub(sent).Milliseconds())
	if err := ctr.Finish(ctx, exit); err != nil {
		return err
	}
	if exit.ExitCode != 0 {
		_ = eng.Remove(ctx, id)
		return fmt.Errorf("the action failed")
	}

	waiter := ""
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		list, err := eng.List(ctx, phase.LabelActionID, id)
		if err != nil {
			return err
		}
		for _, l := range list {
			if l.Labels[phase.LabelRole] == phase.RoleWaiter {
				waiter = l.ID
			}
		}
		if len(list) == 1 && waiter != "" && !list[0].Running {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the waiter did not finish in a minute")
		}
	}
	waiterLog := filepath.Join(containerd.DefaultLogDir, waiter, "log")
	phase2, _ := os.ReadFile(waiterLog)
	fmt.Printf("== phase 2: the waiter %s waited %ss, ran the user container and removed it\n   (its output, %s):\n%s\n", waiter, wait, waiterLog, phase2)

	if data, err := os.ReadFile(filepath.Join(out, "result.json")); err == nil {
		fmt.Printf("== the result file:\n%s\n", data)
	}
	var r struct {
		Args       []string          `json:"args"`
		Env        []string          `json:"env"`
		Namespaces map[string]string `json:"namespaces"`
		Mounts     []string          `json:"mounts"`
	}
	if data, err := os.ReadFile(filepath.Join(out, "probe.json")); err == nil && json.Unmarshal(data, &r) == nil {
		fmt.Println("== what the user container received (the probe's record)")
		fmt.Println("  command:", r.Args)
		fmt.Println("  env:    ", slices.DeleteFunc(r.Env, func(e string) bool { return strings.HasPrefix(e, "HOSTNAME=") }))
		fmt.Println("  pid ns: ", r.Namespaces["pid"])
		fmt.Println("  mounts: ", slices.DeleteFunc(r.Mounts, func(m string) bool { return m != "/workflow" && m != containerdapi.DefaultSocket }))
		fmt.Println()
	}

	fmt.Println("== left behind on containerd:")
	list, err := eng.List(ctx, phase.LabelActionID, id)
	if err != nil {
		return err
	}
	for _, l := range list {
		fmt.Printf("  container %s (%s, task %s)\n", l.ID, l.Labels[phase.LabelRole], l.State)
	}
	dirs, _ := filepath.Glob(filepath.Join(containerd.DefaultLogDir, a.Name+"-*"))
	for _, d := range dirs {
		fmt.Printf("  output directory %s\n", d)
	}
	if _, err := c.ContainerGet(ctx, id); err == nil {
		fmt.Printf("  the action %s\n", id)
	}
	fmt.Println("== the next phase 1 on this namespace removes the stopped waiter; the demo removes it now, with its output")
	return eng.Remove(ctx, waiter)
}
