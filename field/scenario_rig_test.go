package field

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
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
	// Slow: the machine has /dev/dm-0, the target disk's
	// partition behind device-mapper's delay target, each read and write
	// waiting Slow ms.
	Slow int
	// Preload: the images the engine has before the runner starts.
	Preload []string
	// KillAfterCreate: the agent kills the action at its timeout, and the
	// kill must land after phase 1 created the user container.
	KillAfterCreate bool
	// Skip says why the scenario is not in the default list.
	Skip string
	// Gate: the scenario is one of make test's (go test -short), which
	// runs the README's reboot template on each OS, on machines that need
	// no Docker built from source; every scenario runs in make test-all.
	Gate bool
	// Release is the one whose worker runs the action in the machine:
	// its real tink-agent where make tink-agents builds it
	// (realVersions), else the runner copying it; Releases those it
	// stands for, which make the same container (tinkagent.SameSpec).
	Release  tinkagent.Release
	Releases []tinkagent.Release
	// ControlPlane: the action comes from the release's whole control
	// plane (ControlPlane), a Template and a Workflow made through its
	// Kubernetes API, to the release's real tink-agent; the row reads
	// SUCCESS from the Workflow's status. make test-all's alone.
	ControlPlane bool

	// By is the run that should take the machine down (ByCommand,
	// ByRetry, ByFallback; ByNothing for none); Retries, Fallback and
	// DownWithin are the action's WAITDAEMON_RETRIES, whether it has a
	// fallback, and its WAITDAEMON_DOWN_WITHIN. InitShutdown: HookOS's
	// init shuts the machine down, LinuxKit's grace first (judging).
	By           string
	Retries      int
	Fallback     bool
	DownWithin   int
	InitShutdown bool
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
// registry's: by the last component of the repository, whatever the
// registry, tag or digest (ghcr.io/waitdaemon/waitdaemon:v0.1.0@sha256:…
// is waitdaemon).
func Rename(action string) (string, error) {
	var err error
	out := imageLine.ReplaceAllStringFunc(action, func(line string) string {
		m := imageLine.FindStringSubmatch(line)
		ref := m[2]
		repo, _, _ := strings.Cut(ref, "@") // a digest, as a pinned reference has
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
	sc := Scenario{Name: name + " " + a.Name, OS: os, Action: renamed, Want: Reset, Wait: 10, Release: tinkagent.Head, Releases: []tinkagent.Release{tinkagent.Head}}
	if w, err := strconv.Atoi(a.Environment["WAIT_SECONDS"]); err == nil {
		sc.Wait = w
	}
	judging(&sc, a.Environment, a.Command)
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

// gateTemplates are the templates whose runs make test boots, by OS: the
// README's reboot, on CaptainOS under its oldest release, and on HookOS
// under its oldest release on Docker 26.1 (hookos26), as Debian ships it.
var gateTemplates = map[string]string{
	"captainos": "README.md CaptainOS (containerd, no Docker) reboot",
	"hookos":    "README.md HookOS (Docker) reboot",
}

// Scenarios is every template of the docs, on each OS it is for, under
// its oldest release and HEAD (byRelease), and the field's own, under
// HEAD: an action killed at its timeout, a kexec that fails, and
// busybox's reboot on systemd. HookOS runs each on Docker 28.2 (hookos);
// the README's HookOS templates, those operators copy, run on Docker 26.1
// too (hookos26), HookOS v0.9-v0.10's engine: under their oldest
// release there, and HEAD on 28.2.
func Scenarios(repo string) ([]Scenario, error) {
	templates, err := Templates(repo)
	if err != nil {
		return nil, err
	}
	var scs []Scenario
	for _, t := range templates {
		runs, err := byRelease(t)
		if err != nil {
			return nil, err
		}
		if t.OS != "hookos" || !strings.HasPrefix(t.Name, "README.md ") {
			// CaptainOS's README reboot: the gate's run is its oldest
			// release's.
			runs[0].Gate = t.Name == gateTemplates[t.OS]
			scs = append(scs, runs...)
			continue
		}
		// The README's HookOS templates: the oldest release on Docker
		// 26.1 (HookOS v0.9-v0.10, tink-worker's time), HEAD on 28.2; both
		// on each when one run serves both.
		old, head := runs[0], runs[len(runs)-1]
		old.OS = "hookos26"
		old.Gate = t.Name == gateTemplates[t.OS]
		if len(runs) == 1 {
			scs = append(scs, head)
		}
		scs = append(scs, old)
		if len(runs) > 1 {
			scs = append(scs, head)
		}
	}
	scs = everyRealRelease(scs)
	scs = append(scs, controlPlaneRows(scs)...)
	for _, os := range []string{"captainos", "hookos"} {
		// pid at the top level, which every release reads.
		sock, pid := "/run/containerd/containerd.sock", "  pid: host\n"
		if os == "hookos" {
			sock = "/var/run/docker.sock"
		}
		timeout, err := killedAtTimeout(os, sock, pid)
		if err != nil {
			return nil, err
		}
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
		fails.Want, fails.By = Reset, ByFallback
		scs = append(scs, fails)
		ignored, err := kexecRebootFails(os, sock, pid)
		if err != nil {
			return nil, err
		}
		scs = append(scs, ignored)
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
	stays.By = ByFallback
	return append(scs, stays), nil
}

// kexecRebootFails is Tinkerbell's kexec whose reboot(2) fails: it exits
// 0 and the machine stays up; WAITDAEMON_DOWN_WITHIN catches it, and the
// fallback's reboot -f takes the machine down. The result file on the
// target disk says the fallback was under way.
func kexecRebootFails(os, sock, pid string) (Scenario, error) {
	sc, err := NewScenario("kexec whose reboot fails", os, `- name: kexec
  image: waitdaemon:latest
  timeout: 90
`+pid+`  environment:
    BLOCK_DEVICE: /dev/sda1
    FS_TYPE: ext4
    FIELD_KEXEC_UNLOAD: 1
    IMAGE: quay.io/tinkerbell/actions/kexec:latest
    WAIT_SECONDS: 5
    WAITDAEMON_DOWN_WITHIN: 20
    WAITDAEMON_FALLBACK_IMAGE: alpine:3.20
    WAITDAEMON_FALLBACK_COMMAND: '["reboot", "-f"]'
    WAITDAEMON_RESULT_DEVICE: /dev/sda1
    WAITDAEMON_RESULT_FILE: /var/lib/waitdaemon/kexec.json
  volumes:
    - `+sock+`:`+sock+`
`)
	sc.Name = "kexec whose reboot(2) fails, exits 0: caught by WAITDAEMON_DOWN_WITHIN, falls back to reboot -f"
	sc.Want, sc.By = Reset, ByFallback
	return sc, err
}

// The timeout rows' timings, measured under TCG with one vCPU: from the
// runner's start, phase 1 had created the user container and begun to
// wait for the waiter's word after 8.5-18.5 s on CaptainOS (without CNI);
// on HookOS after 11.6-15.8 s on a loaded host, and after 5 s beside the
// Go tests alone (the user container made 0.9 s before). It waits up to
// 20 s, and a result device 1 s late on each read and write held the
// waiter's word back 25.6 s. The timeout lands the kill some seconds into
// that wait, several before its end, in the middle of what both loads
// leave: 18.5-28.5 s on CaptainOS, 15.8-25 s on HookOS. With two machines
// booting at once, CaptainOS's phase 1 began to wait after 19.2 s, and
// once had not created the user container's task after 24 s: 28 s there.
var killTimeout = map[string]int{"captainos": 28, "hookos": 20}

const slowDelayMS = 1000

// killedAtTimeout is an action killed at its timeout once phase 1 has
// created the user container: the images are there beforehand, and its
// result device is slow, so that phase 1 waits for the waiter's word on
// it (up to 20 s) when the kill lands. Nothing may start, the machine
// stays up.
func killedAtTimeout(os, sock, pid string) (Scenario, error) {
	network := ""
	if os == "captainos" {
		// No CNI network, whose setup took the runner 6-12 s.
		network = "  namespaces:\n    network: host\n"
	}
	sc, err := NewScenario("timeout", os, `- name: reboot
  image: waitdaemon:latest
  timeout: `+strconv.Itoa(killTimeout[os])+`
  command: ["reboot", "-f"]
`+pid+network+`  environment:
    IMAGE: alpine:3.20
    WAIT_SECONDS: 10
    WAITDAEMON_VERBOSE: true
    WAITDAEMON_RESULT_DEVICE: /dev/dm-0
    WAITDAEMON_RESULT_FILE: /var/lib/waitdaemon/timeout.json
  volumes:
    - `+sock+`:`+sock+`
`)
	sc.Name = "killed at its timeout"
	sc.Want, sc.By = StayedUp, ByNothing
	sc.Slow, sc.Preload, sc.KillAfterCreate = slowDelayMS, []string{images["waitdaemon"], images["alpine"]}, true
	if os == "hookos" {
		// The agent's SIGTERM comes first: phase 1's undo removes the
		// waiter before it could write anything.
		sc.Result = ""
	}
	return sc, err
}
