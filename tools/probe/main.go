// Command probe is the end-to-end tests' user image: it records exactly
// what it received (arguments, environment, namespaces, mounts, user and
// groups) as JSON in <PROBE_DIR or /out>/<PROBE_NAME or "probe">.json (its effective
// capabilities and device count too), prints it, and exits with
// PROBE_EXIT (default 0), after sleeping PROBE_SLEEP seconds (default 0).
// Its own arguments, for the tests of retries and fallbacks: --exit=N
// exits N whatever PROBE_EXIT says; --fail-times=N exits 3 on its first N
// runs, counted in <dir>/<name>.count (--fail-times=0 only counts them);
// --name=NAME is PROBE_NAME, for a container that shares another's
// environment (a fallback); --sleep=N sleeps N seconds whatever
// PROBE_SLEEP says; --mkdir=DIR makes directory DIR with mkdir(2) before
// anything else, as an action makes its mount point, and if it cannot
// (it is there already) says so and exits 7.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

type report struct {
	Args      []string          `json:"args"`
	Env       []string          `json:"env"`
	Hostname  string            `json:"hostname"`
	Namespace map[string]string `json:"namespaces"`
	Mounts    []string          `json:"mounts"`
	UID       int               `json:"uid"`
	GID       int               `json:"gid"`
	Groups    []int             `json:"groups"`  // the additional groups
	CapEff    string            `json:"cap_eff"` // /proc/self/status's CapEff
	Devices   int               `json:"devices"` // device files directly under /dev
	Cwd       string            `json:"cwd"`
	Started   time.Time         `json:"started"`
}

func main() {
	for _, arg := range os.Args[1:] {
		if dir, ok := strings.CutPrefix(arg, "--mkdir="); ok {
			if err := os.Mkdir(dir, 0o755); err != nil {
				fmt.Fprintln(os.Stderr, "probe:", err)
				os.Exit(7)
			}
		}
	}
	r := report{Args: os.Args, Env: os.Environ(), UID: os.Getuid(), Started: time.Now().UTC(), Namespace: map[string]string{}}
	r.Hostname, _ = os.Hostname()
	r.GID = os.Getgid()
	r.Groups, _ = os.Getgroups()
	r.Cwd, _ = os.Getwd()
	for _, ns := range []string{"pid", "net", "ipc", "uts"} {
		r.Namespace[ns], _ = os.Readlink("/proc/self/ns/" + ns)
	}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 4 {
				r.Mounts = append(r.Mounts, f[4])
			}
		}
	}
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
				r.CapEff = strings.TrimSpace(v)
			}
		}
	}
	if entries, err := os.ReadDir("/dev"); err == nil {
		for _, e := range entries {
			if e.Type()&(os.ModeDevice|os.ModeCharDevice) != 0 {
				r.Devices++
			}
		}
	}
	data, _ := json.MarshalIndent(r, "", "  ")
	fmt.Println(string(data))
	name := os.Getenv("PROBE_NAME")
	if name == "" {
		name = "probe"
	}
	for _, arg := range os.Args[1:] {
		if v, ok := strings.CutPrefix(arg, "--name="); ok {
			name = v
		}
	}
	dir := os.Getenv("PROBE_DIR")
	if dir == "" {
		dir = "/out"
	}
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		if err := os.WriteFile(filepath.Join(dir, name+".json"), data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "probe:", err)
			os.Exit(99)
		}
	}
	secs, _ := strconv.Atoi(os.Getenv("PROBE_SLEEP"))
	for _, arg := range os.Args[1:] {
		if v, ok := strings.CutPrefix(arg, "--sleep="); ok {
			secs, _ = strconv.Atoi(v)
		}
	}
	if secs > 0 {
		time.Sleep(time.Duration(secs) * time.Second)
	}
	code, _ := strconv.Atoi(os.Getenv("PROBE_EXIT"))
	for _, arg := range os.Args[1:] {
		if v, ok := strings.CutPrefix(arg, "--exit="); ok {
			code, _ = strconv.Atoi(v)
		}
		if v, ok := strings.CutPrefix(arg, "--fail-times="); ok {
			n, _ := strconv.Atoi(v)
			count := filepath.Join(dir, name+".count")
			runs, _ := os.ReadFile(count)
			done := len(runs) + 1
			_ = os.WriteFile(count, append(runs, '.'), 0o644)
			if done <= n {
				code = 3
			}
		}
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "probe: exiting %d as asked\n", code)
	}
	os.Exit(code)
}
