// Command bench measures waitdaemon on each engine it is given, with
// actions run as that engine's worker runs them (package tinkagent: on
// Docker and Podman, tink-agent's Docker runtime; on containerd, its
// containerd runtime), and prints one markdown table: phase 1 against
// the engine's floor measured in the same run, the wait against what
// the waiter counts from (the later of the action's exit and the
// worker's removal of it), phase 2's round trips, the waiter's memory
// and the binaries' sizes, each beside its target (docs/footprint.md).
// A measure that cannot be taken fails it; a target missed does not.
// `make bench` runs it on every engine, `make bench-short` (part of
// `make test`) once per measure on make test's two.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// The live targets, as docs/footprint.md states them
// (TestFootprintTargets holds the two together).
const (
	targetPhase1  = "≤ 1.15×"
	targetWait    = "≤ 150 ms; goal ≤ 1 ms"
	targetBound   = "≤ 150 ms"
	targetTrips2  = "≤ 12"
	targetMemory  = "its own ≤ 3 MB"
	boundAfter    = 60 * time.Second // the product's: the removal counted at most this long after the exit
	waitSeconds   = 1                // the wait runs' WAIT_SECONDS
	maxMemoryAnon = 3e6
	maxTrips2     = 12
	maxRatio      = 1.15
	maxWaitError  = 150 * time.Millisecond
)

// binaryBudget is each binary's size target in bytes (docs/footprint.md
// says what the bytes over the last one buy).
var binaryBudget = []struct {
	arch   string
	budget float64
}{{"amd64", 8.4e6}, {"arm64", 7.7e6}}

// removalDelays are the worker's delays from the action's exit to its
// removal, in turn: the report windows measured in the field
// (docs/how-it-works.md#the-report-window: 1.2–3.3 s under emulation).
var removalDelays = []time.Duration{1200 * time.Millisecond, 2000 * time.Millisecond, 2800 * time.Millisecond}

// opts are what every engine's measures share.
type opts struct {
	runs, timelineRuns int
	image, probe       string
	svg                string // where the first Docker engine draws one wait run ("": nowhere)
	bound              bool   // the run with no removal, which waits out the 60 s bound
}

// figures are one engine's measures.
type figures struct {
	engine string
	// phase1 and floor: phase 1's time and the engine's floor, measured
	// alike in the same runs; bridge, a bare create+start on the default
	// bridge (Docker and Podman).
	phase1, floor, bridge []time.Duration
	// wait: start sent − (the later of the exit and the removal) −
	// WAIT_SECONDS; learnt: counted_from − the removal, how late the
	// waiter learnt of the removal.
	wait, learnt []time.Duration
	// bound: with no removal, start sent − (exit + 60 s) − WAIT_SECONDS.
	bound          *time.Duration
	trips1, trips2 int
	mem            memory
}

func main() {
	runs := flag.Int("runs", 15, "runs of each measurement")
	short := flag.Bool("short", false, "one run of each measurement, no run that waits out the 60 s bound, no SVG: make test's run")
	image := flag.String("image", "waitdaemon:dev", "the action image")
	probe := flag.String("probe", "waitdaemon-probe:dev", "the user image")
	svgOut := flag.String("svg", "docs/timeline.svg", "where to draw one run's timeline (empty: nowhere)")
	dockers := flag.String("docker", "", "Docker or Podman sockets, comma-separated, measured in turn")
	ctrd := flag.String("containerd", "", "containerd's socket, measured after the Docker ones, with actions made as tink-agent makes them")
	namespace := flag.String("namespace", "tinkerbell", "containerd's namespace, where the images are")
	bins := flag.String("bin", "bin", "where the binaries are, waitdaemon-linux-<arch>")
	flag.Parse()
	o := opts{runs: *runs, timelineRuns: 5, image: *image, probe: *probe, svg: *svgOut, bound: true}
	if *short {
		o = opts{runs: 1, timelineRuns: 1, image: *image, probe: *probe}
	}
	if *dockers == "" && *ctrd == "" {
		fail(fmt.Errorf("no engine: give -docker, -containerd or both"))
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	var all []figures
	if *dockers != "" {
		for _, sock := range strings.Split(*dockers, ",") {
			f, err := runDocker(ctx, o, sock)
			if err != nil {
				fail(fmt.Errorf("on %s: %w", sock, err))
			}
			all = append(all, f)
			o.svg = ""
		}
	}
	if *ctrd != "" {
		f, err := runContainerd(ctx, o, *ctrd, *namespace)
		if err != nil {
			fail(fmt.Errorf("on containerd %s: %w", *ctrd, err))
		}
		all = append(all, f)
	}
	sizes, err := binarySizes(*bins, !*short)
	if err != nil {
		fail(err)
	}
	fmt.Printf("\n## The figures\n\n`go run ./tools/bench %s`, %s, in %s: ", strings.Join(os.Args[1:], " "), began.UTC().Format("2006-01-02"),
		time.Since(began).Round(time.Second))
	if o.runs > 1 {
		fmt.Printf("medians of %d runs, with their range, and the worst beside each wait.\n\n", o.runs)
	} else {
		fmt.Printf("one run of each measure.\n\n")
	}
	printTable(os.Stdout, all, sizes, o)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

// binarySize is one binary's size.
type binarySize struct {
	arch   string
	size   int64
	budget float64
}

// binarySizes are the binaries' sizes in dir; all says each must be
// there (make bench builds both; make test only its own arch's).
func binarySizes(dir string, all bool) ([]binarySize, error) {
	var sizes []binarySize
	for _, b := range binaryBudget {
		st, err := os.Stat(fmt.Sprintf("%s/waitdaemon-linux-%s", dir, b.arch))
		if err != nil {
			if all || !os.IsNotExist(err) {
				return nil, fmt.Errorf("the binary's size: %w (make build builds it)", err)
			}
			continue
		}
		sizes = append(sizes, binarySize{b.arch, st.Size(), b.budget})
	}
	return sizes, nil
}

// printTable prints one row a measure, one column an engine, and the
// target; a figure past its target is in bold with "over".
func printTable(w io.Writer, all []figures, sizes []binarySize, o opts) {
	fmt.Fprintf(w, "| measure |")
	for _, f := range all {
		fmt.Fprintf(w, " %s |", f.engine)
	}
	fmt.Fprintf(w, " target |\n|---|")
	for range all {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintf(w, "---|\n")
	row := func(name, target string, cell func(f figures) string) {
		fmt.Fprintf(w, "| %s |", name)
		for _, f := range all {
			fmt.Fprintf(w, " %s |", cell(f))
		}
		fmt.Fprintf(w, " %s |\n", target)
	}
	over := func(s string, bad bool) string {
		if bad {
			return "**" + s + "** over"
		}
		return s
	}
	row("phase 1 (the action's start → its exit, the engine's times)", "", func(f figures) string { return msCell(f.phase1) })
	row("the engine's floor (a bare container's start → exit + one host-network create and start; containerd: a bare create and start of the action's image)", "", func(f figures) string { return msCell(f.floor) })
	row("phase 1 / the floor", targetPhase1, func(f figures) string {
		r := ratio(f.phase1, f.floor)
		return over(fmt.Sprintf("%.2f×", r), r > maxRatio)
	})
	row("phase 1 / a bare create and start on the default bridge", "", func(f figures) string {
		if len(f.bridge) == 0 {
			return ""
		}
		return fmt.Sprintf("%.2f× (%s)", ratio(f.phase1, f.bridge), msCell(f.bridge))
	})
	row(fmt.Sprintf("the wait: start sent − (the later of the exit and the worker's removal, at the engine's time of it from its events) − WAIT_SECONDS, the removal %s after the exit in turn", delays(o.runs)), targetWait, func(f figures) string {
		_, m, _ := stats(f.wait)
		return over(errCell(f.wait), m.Abs() > maxWaitError)
	})
	row("the waiter learnt of the removal (counted_from − the removal)", "", func(f figures) string { return errCell(f.learnt) })
	if o.bound {
		row("with no removal: start sent − (the exit + 60 s) − WAIT_SECONDS, one run", targetBound, func(f figures) string {
			if f.bound == nil {
				return ""
			}
			return over(fmt.Sprintf("%+.1f ms", ms(*f.bound)), f.bound.Abs() > maxWaitError)
		})
	}
	row("HTTP or gRPC round trips, phase 1 / phase 2 (one traced run)", "phase 2 "+targetTrips2, func(f figures) string {
		return fmt.Sprintf("%d / %s", f.trips1, over(fmt.Sprint(f.trips2), f.trips2 > maxTrips2))
	})
	row("the waiter's memory while it waits: its own (RssAnon) / the mapped binary (RssFile) / its peak (VmHWM)", targetMemory, func(f figures) string {
		return over(fmt.Sprintf("%.2f", float64(f.mem.anon)/1e6), float64(f.mem.anon) > maxMemoryAnon) +
			fmt.Sprintf(" / %.2f / %.2f MB", float64(f.mem.file)/1e6, float64(f.mem.hwm)/1e6)
	})
	if len(sizes) > 0 {
		fmt.Fprintf(w, "\n| binary (stripped; the image the same) | size | target |\n|---|---|---|\n")
		for _, s := range sizes {
			fmt.Fprintf(w, "| linux/%s | %s (%s bytes) | ≤ %.1f MB |\n", s.arch,
				over(fmt.Sprintf("%.2f MB", float64(s.size)/1e6), float64(s.size) > s.budget), thousands(s.size), s.budget/1e6)
		}
	}
}

// delays names the removal delays the runs used.
func delays(runs int) string {
	var s []string
	for i := range min(runs, len(removalDelays)) {
		s = append(s, fmt.Sprintf("%.1f", removalDelays[i].Seconds()))
	}
	return strings.Join(s, ", ") + " s"
}

// msCell is a median in ms, with the range when there are more runs.
func msCell(ds []time.Duration) string {
	lo, med, hi := stats(ds)
	if len(ds) == 1 {
		return fmt.Sprintf("%d ms", med.Milliseconds())
	}
	return fmt.Sprintf("%d ms (%d–%d)", med.Milliseconds(), lo.Milliseconds(), hi.Milliseconds())
}

// errCell is a signed median in ms, with the worst (the farthest from
// 0) when there are more runs.
func errCell(ds []time.Duration) string {
	_, med, _ := stats(ds)
	if len(ds) == 1 {
		return fmt.Sprintf("%+.1f ms", ms(med))
	}
	worst := slices.MaxFunc(ds, func(a, b time.Duration) int { return cmp.Compare(a.Abs(), b.Abs()) })
	return fmt.Sprintf("%+.1f ms, worst %+.1f", ms(med), ms(worst))
}

func ratio(a, b []time.Duration) float64 {
	_, ma, _ := stats(a)
	_, mb, _ := stats(b)
	return float64(ma) / float64(mb)
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func stats(ds []time.Duration) (lo, med, hi time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[0], s[len(s)/2], s[len(s)-1]
}

// memory is the waiter's peak resident set, and what its resident set is
// made of while it waits: its own (anonymous) pages, and the pages of
// the binary it maps, which the page cache shares.
type memory struct{ hwm, anon, file int64 }

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
	if mem["VmHWM"] == 0 || mem["RssAnon"] == 0 {
		return memory{}, fmt.Errorf("no VmHWM or RssAnon in the waiter's status")
	}
	return memory{hwm: mem["VmHWM"], anon: mem["RssAnon"], file: mem["RssFile"]}, nil
}
