package field

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// How a machine went down, or did not.
const (
	Reset    = "reset"
	Shutdown = "shutdown"
	Kexec    = "kexec"
	StayedUp = "stayed up"
)

// Scenario is one action run on one machine, and how it should end.
type Scenario struct {
	Name   string // where it comes from: "README.md HookOS (Docker) reboot"
	OS     string // "captainos" or "hookos"
	Action string // the action, as a template writes it, images renamed
	Want   string // Reset, Shutdown, Kexec or StayedUp
	Wait   int    // its WAIT_SECONDS
	// Disk: the machine gets a target disk, /dev/sda1.
	Disk bool
	// MountTarget: the target disk is mounted at /mnt/target before the
	// action, where WAITDAEMON_RESULT_FILE names it.
	MountTarget bool
	// Result is a file the next boot reads from the target disk.
	Result string
	// Skip says why the scenario is not in the default list.
	Skip string
}

// The images the field pushes to its registry, by the last component
// of the repository a template names.
var images = map[string]string{
	"waitdaemon": RegistryName + "/waitdaemon:latest",
	"alpine":     RegistryName + "/alpine:3.20",
	"kexec":      RegistryName + "/kexec:latest",
}

var imageLine = regexp.MustCompile(`(?m)^(\s*(?:- )?(?:image|IMAGE|WAITDAEMON_FALLBACK_IMAGE):\s*)(\S+)(.*)$`)

// Rename changes only the images a template names, to the field
// registry's.
func Rename(action string) (string, error) {
	var err error
	out := imageLine.ReplaceAllStringFunc(action, func(line string) string {
		m := imageLine.FindStringSubmatch(line)
		ref := m[2]
		repo := ref
		if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
			repo = repo[:i]
		}
		name, ok := images[repo[strings.LastIndex(repo, "/")+1:]]
		if !ok {
			err = fmt.Errorf("no field image for %s", ref)
			return line
		}
		return m[1] + name + m[3]
	})
	return out, err
}

// Templates reads every yaml block of README.md and docs/templates.md
// as scenarios, one per OS the template is for: the socket it mounts says
// which (a "# HookOS: PATH" comment on the line gives HookOS's).
func Templates(repo string) ([]Scenario, error) {
	var all []Scenario
	for _, doc := range []string{"README.md", "docs/templates.md"} {
		blocks, err := yamlBlocks(filepath.Join(repo, doc))
		if err != nil {
			return nil, err
		}
		for _, b := range blocks {
			scs, err := fromTemplate(doc, b.heading, b.text)
			if err != nil {
				return nil, fmt.Errorf("%s, under %q: %w", doc, b.heading, err)
			}
			all = append(all, scs...)
		}
	}
	return all, nil
}

type block struct{ heading, text string }

// yamlBlocks is each ```yaml block of a markdown file, and the heading
// it is under.
func yamlBlocks(path string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var blocks []block
	var heading string
	var cur *strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, block{heading, cur.String()})
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		case strings.TrimSpace(line) == "```yaml":
			cur = &strings.Builder{}
		case strings.HasPrefix(line, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
	}
	return blocks, sc.Err()
}

var hookosComment = regexp.MustCompile(`(?m)^(\s*- )(\S+):(\S+)(\s*)# HookOS: (\S+)\s*$`)

func fromTemplate(doc, heading, text string) ([]Scenario, error) {
	variants := map[string]string{}
	switch {
	case hookosComment.MatchString(text):
		variants["captainos"] = hookosComment.ReplaceAllString(text, "$1$2:$3")
		variants["hookos"] = hookosComment.ReplaceAllString(text, "$1$5:$5")
	case strings.Contains(text, "/var/run/docker.sock"):
		variants["hookos"] = text
	case strings.Contains(text, "containerd.sock"):
		variants["captainos"] = text
	default:
		return nil, fmt.Errorf("mounts no engine socket")
	}
	var out []Scenario
	for _, os := range []string{"captainos", "hookos"} {
		text, ok := variants[os]
		if !ok {
			continue
		}
		sc, err := NewScenario(doc+" "+heading, os, text)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// NewScenario makes a scenario of an action as a template writes it: its
// images renamed, and what it should do read from it. An IMAGE of kexec
// kexecs; a command with poweroff, or SIGRTMIN+4 (38) to PID 1, shuts
// the machine down; anything else resets it.
func NewScenario(name, os, text string) (Scenario, error) {
	renamed, err := Rename(text)
	if err != nil {
		return Scenario{}, err
	}
	var list []struct {
		Name        string
		Command     []string
		Environment map[string]string
	}
	if err := yaml.Unmarshal([]byte(text), &list); err != nil || len(list) != 1 {
		return Scenario{}, fmt.Errorf("want one action in YAML: %v", err)
	}
	a := list[0]
	sc := Scenario{Name: name + " " + a.Name, OS: os, Action: renamed, Want: Reset, Wait: 10}
	if w, err := strconv.Atoi(a.Environment["WAIT_SECONDS"]); err == nil {
		sc.Wait = w
	}
	cmd := strings.Join(a.Command, " ")
	switch {
	case strings.HasSuffix(strings.Split(a.Environment["IMAGE"], ":")[0], "/kexec"):
		sc.Want, sc.Disk = Kexec, true
	case strings.Contains(cmd, "poweroff"), cmd == "kill -38 1":
		sc.Want = Shutdown
	}
	switch f := a.Environment["WAITDAEMON_RESULT_FILE"]; {
	case f != "" && a.Environment["WAITDAEMON_RESULT_DEVICE"] != "":
		// The waiter mounts the device itself: the host does not.
		sc.Disk, sc.Result = true, f
	case f != "":
		sc.Disk, sc.MountTarget, sc.Result = true, true, strings.TrimPrefix(f, "/mnt/target")
	}
	return sc, nil
}

// Scenarios is every template of the docs, on each OS it is for, and the
// field's own: an action killed at its timeout, a kexec that fails, and
// busybox's reboot on systemd. HookOS runs each on Docker 28.2 (hookos);
// the README's HookOS templates, those operators copy, run on Docker 26.1
// too (hookos26), HookOS v0.9-v0.10's engine.
func Scenarios(repo string) ([]Scenario, error) {
	scs, err := Templates(repo)
	if err != nil {
		return nil, err
	}
	for _, sc := range scs {
		if sc.OS == "hookos" && strings.HasPrefix(sc.Name, "README.md ") {
			sc.OS = "hookos26"
			scs = append(scs, sc)
		}
	}
	for _, os := range []string{"captainos", "hookos"} {
		// pid at the top level, which every release reads.
		sock, pid := "/run/containerd/containerd.sock", "  pid: host\n"
		if os == "hookos" {
			sock = "/var/run/docker.sock"
		}
		timeout, err := NewScenario("timeout", os, `- name: reboot
  image: waitdaemon:latest
  timeout: 5
  command: ["reboot", "-f"]
`+pid+`  environment:
    IMAGE: alpine:3.20
    WAIT_SECONDS: 10
    WAITDAEMON_VERBOSE: true
  volumes:
    - `+sock+`:`+sock+`
`)
		if err != nil {
			return nil, err
		}
		timeout.Name = "killed at its timeout"
		timeout.Want = StayedUp
		scs = append(scs, timeout)
		fails, err := NewScenario("kexec that fails", os, `- name: kexec
  image: waitdaemon:latest
  timeout: 90
`+pid+`  environment:
    BLOCK_DEVICE: /dev/sda1
    FS_TYPE: ext4
    KERNEL_PATH: /boot/no-such-kernel
    IMAGE: quay.io/tinkerbell/actions/kexec:latest
    WAIT_SECONDS: 5
    WAITDAEMON_RETRIES: 1
    WAITDAEMON_FALLBACK_IMAGE: alpine:3.20
    WAITDAEMON_FALLBACK_COMMAND: '["reboot", "-f"]'
    WAITDAEMON_RESULT_DEVICE: /dev/sda1
    WAITDAEMON_RESULT_FILE: /var/lib/waitdaemon/kexec.json
  volumes:
    - `+sock+`:`+sock+`
`)
		if err != nil {
			return nil, err
		}
		fails.Name = "kexec that fails, retried, falls back to a reboot"
		fails.Want = Reset
		scs = append(scs, fails)
	}
	// busybox's reboot, a SIGTERM to systemd, which re-executes itself:
	// WAITDAEMON_DOWN_WITHIN catches it, and the fallback takes the
	// machine down.
	stays, err := NewScenario("busybox reboot", "captainos", `- name: reboot
  image: waitdaemon:latest
  timeout: 90
  pid: host
  command: ["reboot"]
  environment:
    IMAGE: alpine:3.20
    WAIT_SECONDS: 10
    WAITDAEMON_DOWN_WITHIN: 30
    WAITDAEMON_FALLBACK_COMMAND: '["reboot", "-f"]'
  volumes:
    - /run/containerd/containerd.sock:/run/containerd/containerd.sock
`)
	if err != nil {
		return nil, err
	}
	stays.Name = "busybox reboot to systemd, caught by WAITDAEMON_DOWN_WITHIN, falls back to reboot -f"
	return append(scs, stays), nil
}

// CheckResult reads the result file the next boot finds after a
// scenario that wanted want: the run that took the machine down is
// marked running and not ended, the kexec's attempt or, after a reset,
// the fallback.
func CheckResult(want string, data []byte) error {
	type run struct {
		ExitCode int  `json:"exit_code"`
		Ended    bool `json:"ended"`
	}
	var r struct {
		State    string `json:"state"`
		Attempts []run  `json:"attempts"`
		Fallback *run   `json:"fallback"`
		BootID   string `json:"boot_id"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("the result file: %w", err)
	}
	if r.State != "running" || r.BootID == "" || len(r.Attempts) == 0 {
		return fmt.Errorf("the result file: state %q, boot_id %q, %d attempts; want running, a boot ID and an attempt", r.State, r.BootID, len(r.Attempts))
	}
	down := r.Attempts[len(r.Attempts)-1]
	if want == Reset {
		if r.Fallback == nil {
			return fmt.Errorf("the result file has no fallback; want the fallback's reboot under way")
		}
		for _, a := range r.Attempts {
			if !a.Ended || a.ExitCode == 0 {
				return fmt.Errorf("the result file: an attempt %+v before the fallback; want each ended and failed", a)
			}
		}
		down = *r.Fallback
	} else if r.Fallback != nil {
		return fmt.Errorf("the result file has a fallback; want the %s's attempt the last run", want)
	}
	if down.Ended || down.ExitCode != -1 {
		return fmt.Errorf("the result file: the last run %+v; want it not ended, exit code -1", down)
	}
	return nil
}
