// Command bench measures waitdaemon on the local engine and prints a
// markdown table: phase 1's time against a bare container start measured
// in the same run, the image and binary sizes, and the waiter's peak
// memory while it waits. With -engine containerd it measures the same on
// containerd, with actions made as tink-agent makes them (containerd.go).
// Run it with `make bench`.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// binaryBudget is each binary's size target (docs/footprint.md says
// what the bytes over the last one buy).
var binaryBudget = map[string]string{"amd64": "8.4 MB", "arm64": "7.7 MB"}

func main() {
	runs := flag.Int("runs", 15, "runs of each measurement")
	image := flag.String("image", "waitdaemon:dev", "the action image")
	probe := flag.String("probe", "waitdaemon-probe:dev", "the user image")
	svgOut := flag.String("svg", "docs/timeline.svg", "where to draw one run's timeline (empty: nowhere)")
	socket := flag.String("socket", "", "the engine's socket (default: DOCKER_HOST, else /var/run/docker.sock; on containerd, CONTAINERD_ADDRESS, else /run/containerd/containerd.sock)")
	eng := flag.String("engine", "docker", "docker (Docker or Podman), or containerd, with actions made as tink-agent makes them")
	namespace := flag.String("namespace", "tinkerbell", "containerd's namespace, where the images are")
	flag.Parse()
	var err error
	switch *eng {
	case "docker":
		err = run(*runs, *image, *probe, *svgOut, *socket)
	case "containerd":
		err = runContainerd(*runs, *image, *probe, *socket, *namespace)
	default:
		err = fmt.Errorf("-engine %q: want docker or containerd", *eng)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(runs int, image, probe, svgPath, socket string) error {
	svgOut := &svgPath
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c := &dockerapi.Client{Socket: socket}
	v, err := c.EngineVersion(ctx)
	if err != nil {
		return fmt.Errorf("no engine: %w (make engine starts one)", err)
	}
	podman, err := isPodman(ctx, c)
	if err != nil {
		return err
	}
	fmt.Printf("\nEngine: %s %s (API %s) on %s\n\n", v.Os, v.Version, v.APIVersion, c.SocketPath())
	var bridge, host, phase1, floor []time.Duration
	for i := range runs {
		d, err := bareStart(ctx, c, probe, "default")
		if err != nil {
			return err
		}
		bridge = append(bridge, d)
		if d, err = bareStart(ctx, c, probe, "host"); err != nil {
			return err
		}
		host = append(host, d)
		// The engine's floor, measured as phase 1 is: a bare container's
		// own StartedAt→FinishedAt (Docker 29 takes StartedAt about
		// 220 ms before the process runs), plus one host-network
		// create+start, the least a hand-off can cost.
		bare, err := bareRun(ctx, c, probe)
		if err != nil {
			return err
		}
		floor = append(floor, bare+d)
		if d, err = action(ctx, c, image, probe, fmt.Sprintf("bench_%d", i)); err != nil {
			return err
		}
		phase1 = append(phase1, d)
	}
	hwm, err := waiterMemory(ctx, c, image, probe)
	if err != nil {
		return err
	}
	var late, engineStart []time.Duration
	var last timeline
	for i := range runs {
		tl, err := waitRun(ctx, c, image, probe, fmt.Sprintf("bench_wait_%d", i), 1, false, podman)
		if err != nil {
			return err
		}
		late = append(late, tl.startSent.Sub(tl.actionExited)-time.Second)
		engineStart = append(engineStart, tl.userStarted.Sub(tl.startSent))
		last = tl
	}
	traced, err := waitRun(ctx, c, image, probe, "bench_trace", 1, true, podman)
	if err != nil {
		return err
	}
	if *svgOut != "" {
		if err := os.WriteFile(*svgOut, []byte(last.svg()), 0o644); err != nil {
			return err
		}
	}
	img, err := c.ImageInspect(ctx, image)
	if err != nil {
		return err
	}

	fmt.Printf("| measure (%d runs) | median | range | target |\n|---|---|---|---|\n", runs)
	row := func(name string, ds []time.Duration, target string) {
		lo, med, hi := stats(ds)
		fmt.Printf("| %s | %d ms | %d–%d ms | %s |\n", name, med.Milliseconds(), lo.Milliseconds(), hi.Milliseconds(), target)
	}
	row("bare create+start, default bridge", bridge, "")
	row("bare create+start, host network", host, "")
	row("phase 1 (action StartedAt→FinishedAt)", phase1, "")
	_, b, _ := stats(bridge)
	_, p, _ := stats(phase1)
	_, h, _ := stats(host)
	fmt.Printf("| phase 1 / bare bridge | %.2f× | | ≤ 0.55× |\n", float64(p)/float64(b))
	fmt.Printf("| phase 1 / bare host network | %.2f× | | |\n", float64(p)/float64(h))
	row("the engine's floor: a bare container's StartedAt→FinishedAt + a host-network create+start", floor, "")
	_, f, _ := stats(floor)
	fmt.Printf("| phase 1 / the engine's floor | %.2f× | | |\n", float64(p)/float64(f))
	fmt.Printf("| image %s | %.2f MB | | ≤ 6.5 MB |\n", image, float64(img.Size)/1e6)
	for _, arch := range []string{"amd64", "arm64"} {
		if st, err := os.Stat("bin/waitdaemon-linux-" + arch); err == nil {
			fmt.Printf("| binary linux/%s (stripped) | %.2f MB | | ≤ %s |\n", arch, float64(st.Size())/1e6, binaryBudget[arch])
		}
	}
	fmt.Printf("| waiter peak memory (VmHWM) while waiting | %.2f MB | | ≤ 5 MB |\n", float64(hwm.hwm)/1e6)
	fmt.Printf("| of which, while waiting: its own (RssAnon) / the mapped binary (RssFile) | %.2f MB / %.2f MB | | |\n", float64(hwm.anon)/1e6, float64(hwm.file)/1e6)
	worst := func(ds []time.Duration) time.Duration {
		return slices.MaxFunc(ds, func(a, b time.Duration) int { return cmp.Compare(a.Abs(), b.Abs()) })
	}
	_, lm, _ := stats(late)
	fmt.Printf("| wait error: start sent − action exit − WAIT_SECONDS | %.1f ms | worst %.1f ms | ±150 ms |\n", ms(lm), ms(worst(late)))
	_, em, _ := stats(engineStart)
	fmt.Printf("| engine's own start of the user container (StartedAt − start sent) | %.1f ms | worst %.1f ms | |\n", ms(em), ms(worst(engineStart)))
	fmt.Printf("| HTTP round trips, phase 1 (from the trace) | %d | | |\n", traced.trips1)
	fmt.Printf("| HTTP round trips, phase 2 (from the trace) | %d | | |\n", traced.trips2)
	name := "Phase 1 on " + v.Version
	if podman {
		name = "Phase 1 on Podman " + v.Version
	}
	if err := dockerTimeline(ctx, c, image, probe, name, 5); err != nil {
		return err
	}
	if *svgOut != "" {
		fmt.Printf("\nTimeline of one run (WAIT_SECONDS=1): %s\n", *svgOut)
	}
	return nil
}

// bareStart times a create and start of the user image, as the client
// sees it, then removes the container.
func bareStart(ctx context.Context, c *dockerapi.Client, probe, network string) (time.Duration, error) {
	began := time.Now()
	created, err := c.ContainerCreate(ctx, "", dockerapi.CreateRequest{
		Config:     dockerapi.Config{Image: probe, Env: []string{"PROBE_SLEEP=30"}},
		HostConfig: dockerapi.HostConfig{NetworkMode: network},
	})
	if err != nil {
		return 0, err
	}
	defer c.ContainerRemove(context.WithoutCancel(ctx), created.ID, dockerapi.RemoveOptions{Force: true, Volumes: true})
	if err := c.ContainerStart(ctx, created.ID); err != nil {
		return 0, err
	}
	return time.Since(began), nil
}

// bareRun runs the user image to its exit, at once (it records nothing:
// it has no /out), and returns the engine's StartedAt→FinishedAt.
func bareRun(ctx context.Context, c *dockerapi.Client, probe string) (time.Duration, error) {
	created, err := c.ContainerCreate(ctx, "", dockerapi.CreateRequest{Config: dockerapi.Config{Image: probe}})
	if err != nil {
		return 0, err
	}
	defer c.ContainerRemove(context.WithoutCancel(ctx), created.ID, dockerapi.RemoveOptions{Force: true, Volumes: true})
	if err := c.ContainerStart(ctx, created.ID); err != nil {
		return 0, err
	}
	if _, err := c.ContainerWait(ctx, created.ID, dockerapi.WaitNotRunning); err != nil {
		return 0, err
	}
	ctr, err := c.ContainerInspect(ctx, created.ID)
	if err != nil {
		return 0, err
	}
	started, err1 := time.Parse(time.RFC3339Nano, ctr.State.StartedAt)
	finished, err2 := time.Parse(time.RFC3339Nano, ctr.State.FinishedAt)
	return finished.Sub(started), errors.Join(err1, err2)
}

// action runs one action shaped like tink-worker's and returns its
// StartedAt→FinishedAt, once everything it made is gone.
func action(ctx context.Context, c *dockerapi.Client, image, probe, name string) (time.Duration, error) {
	id, err := startAction(ctx, c, image, probe, name, "0")
	if err != nil {
		return 0, err
	}
	if _, err := c.ContainerWait(ctx, id, dockerapi.WaitNotRunning); err != nil {
		return 0, err
	}
	ctr, err := c.ContainerInspect(ctx, id)
	if err != nil {
		return 0, err
	}
	if ctr.State.ExitCode != 0 {
		return 0, fmt.Errorf("action %s exited %d", name, ctr.State.ExitCode)
	}
	_ = c.ContainerRemove(ctx, id, dockerapi.RemoveOptions{Force: true, Volumes: true})
	started, err1 := time.Parse(time.RFC3339Nano, ctr.State.StartedAt)
	finished, err2 := time.Parse(time.RFC3339Nano, ctr.State.FinishedAt)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return finished.Sub(started), waitGone(ctx, c, id)
}

func startAction(ctx context.Context, c *dockerapi.Client, image, probe, name, wait string, env ...string) (string, error) {
	return startActionOn(ctx, c, c.SocketPath(), image, probe, name, wait, env...)
}

// startActionOn starts an action whose engine socket is socket, a proxy's
// or the engine's own.
func startActionOn(ctx context.Context, c *dockerapi.Client, socket, image, probe, name, wait string, env ...string) (string, error) {
	created, err := c.ContainerCreate(ctx, "action_"+name, dockerapi.CreateRequest{
		Config: dockerapi.Config{
			Image: image, Cmd: []string{"reboot"}, Tty: true, AttachStdout: true, AttachStderr: true,
			Env: append([]string{"IMAGE=" + probe, "WAIT_SECONDS=" + wait}, env...),
		},
		HostConfig: dockerapi.HostConfig{Binds: []string{socket + ":/var/run/docker.sock"}, PidMode: "host"},
	})
	if err != nil {
		return "", err
	}
	return created.ID, c.ContainerStart(ctx, created.ID)
}

// waitGone waits until the action's waiter and user container are gone.
func waitGone(ctx context.Context, c *dockerapi.Client, actionID string) error {
	for range 200 {
		list, err := c.ContainerList(ctx, "org.waitdaemon.action-id="+actionID)
		if err != nil || len(list) == 0 {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("action %s left containers behind", actionID[:12])
}

// waiterMemory runs an action with a long wait and reads the waiter's
// peak resident memory from /proc while it waits.
// memory is the waiter's peak resident set, and what its resident set is
// made of while it waits: its own (anonymous) pages, and the pages of
// the binary it maps, which the page cache shares.
type memory struct{ hwm, anon, file int64 }

func waiterMemory(ctx context.Context, c *dockerapi.Client, image, probe string) (memory, error) {
	id, err := startAction(ctx, c, image, probe, "bench_memory", "3")
	if err != nil {
		return memory{}, err
	}
	defer waitGone(context.WithoutCancel(ctx), c, id)
	defer c.ContainerRemove(context.WithoutCancel(ctx), id, dockerapi.RemoveOptions{Force: true})
	if _, err := c.ContainerWait(ctx, id, dockerapi.WaitNotRunning); err != nil {
		return memory{}, err
	}
	time.Sleep(time.Second)
	list, err := c.ContainerList(ctx, "org.waitdaemon.action-id="+id, "org.waitdaemon.role=waiter")
	if err != nil || len(list) != 1 {
		return memory{}, fmt.Errorf("finding the waiter: %v (%d found)", err, len(list))
	}
	w, err := c.ContainerInspect(ctx, list[0].ID)
	if err != nil {
		return memory{}, err
	}
	return readMemory(w.State.Pid)
}

// readMemory reads the memory of process pid from /proc.
func readMemory(pid int) (memory, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, fmt.Errorf("reading the waiter's memory (run as root on the engine's host): %w", err)
	}
	mem := map[string]int64{}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(v, " kB") {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			mem[k] = kb * 1024
		}
	}
	if mem["VmHWM"] == 0 {
		return memory{}, errors.New("no VmHWM in the waiter's status")
	}
	return memory{hwm: mem["VmHWM"], anon: mem["RssAnon"], file: mem["RssFile"]}, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func stats(ds []time.Duration) (lo, med, hi time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[0], s[len(s)/2], s[len(s)-1]
}
