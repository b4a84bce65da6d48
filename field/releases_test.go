package field

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
	"go.yaml.in/yaml/v3"
)

// Releases are the Tinkerbell workers a template can run under, oldest
// first: tink-worker (tinkerbell/tink, HookOS only), then tink-agent at
// each release of tinkerbell/tinkerbell whose reading of an action
// differs, and HEAD, which v0.25.0 is not (it pulls through certs.d).
var Releases = []string{"tink-worker", "v0.23", "v0.24", "v0.25", "HEAD"}

// claimLine is the first line of every template: the oldest release it
// works on, "# Tinkerbell: tink-worker, tink-agent v0.23 and later",
// "# Tinkerbell: tink-agent v0.25 and later" or "# Tinkerbell: tink-agent
// HEAD only"; a template for both OSes whose claims differ gives
// HookOS's after the other's, "...; HookOS: tink-worker, ...".
var (
	claimLine = regexp.MustCompile(`^# Tinkerbell: (.*)$`)
	claim     = regexp.MustCompile(`^(tink-worker, )?tink-agent (v0\.2[3-9] and later|HEAD only)`)
)

// OldestRelease is the oldest of Releases that a template claims on os,
// by its first line; it works on that one and every later one.
func OldestRelease(text, os string) (string, error) {
	first, _, _ := strings.Cut(text, "\n")
	m := claimLine.FindStringSubmatch(first)
	if m == nil {
		return "", fmt.Errorf("its first line is %q, want the oldest release it works on, like %q", first, "# Tinkerbell: tink-worker, tink-agent v0.23 and later")
	}
	said := m[1]
	if other, hookos, ok := strings.Cut(said, "; HookOS: "); ok {
		said = other
		if os == "hookos" {
			said = hookos
		}
	}
	c := claim.FindStringSubmatch(said)
	switch {
	case c == nil:
		return "", fmt.Errorf("%q: want the oldest release it works on, like %q", first, "# Tinkerbell: tink-worker, tink-agent v0.23 and later")
	case c[1] != "":
		return "tink-worker", nil
	}
	oldest := strings.TrimSuffix(strings.TrimSuffix(c[2], " and later"), " only")
	if !slices.Contains(Releases, oldest) {
		return "", fmt.Errorf("%q: no such release; want one of %v", first, Releases)
	}
	return oldest, nil
}

// releaseAction is what a release reads of a template's action, as far
// as its namespaces go: its controller reads the YAML with a plain
// yaml.Unmarshal, so a key it does not know is dropped without a word.
type releaseAction struct {
	Name string `yaml:"name"`
	// pid: every release (tink-worker's PidMode, every tink-agent).
	PID        string `yaml:"pid"`
	Namespaces *struct {
		PID     string `yaml:"pid"`
		Network string `yaml:"network"`
	} `yaml:"namespaces"`
	// A top-level network is read by no release: it is not here.
}

// pidOn is the pid namespace release gives the action: namespaces (from
// v0.25.0), whose pid overrides the top-level pid; before v0.25.0 no
// release knows namespaces, and drops it.
func pidOn(release string, a releaseAction) string {
	if a.Namespaces != nil && a.Namespaces.PID != "" && slices.Index(Releases, release) >= slices.Index(Releases, "v0.25") {
		return a.Namespaces.PID
	}
	return a.PID
}

// registryPort is an image named with a registry's host and port: a
// private registry.
var registryPort = regexp.MustCompile(`(?m)^\s*(?:- )?(?:image|IMAGE|WAITDAEMON_FALLBACK_IMAGE):\s*[a-z0-9.-]+:\d+/`)

// checkReleases holds one template (a yaml block of doc) to its claim:
// on each release from the oldest it claims to HEAD, and on each OS it
// is for, one that takes the machine down has the host's pid namespace
// as that release reads it; tink-worker runs no CaptainOS, and tink-agent
// runs CaptainOS since v0.23.0; namespaces.network is read from v0.25.0
// alone; and a private registry on CaptainOS is pulled through certs.d,
// its plain-HTTP hosts.toml, at HEAD alone (v0.25.0 pulls with a
// default resolver).
func checkReleases(doc string, b block) []string {
	where := fmt.Sprintf("%s, %q", doc, b.heading)
	var list []releaseAction
	if err := yaml.Unmarshal([]byte(b.text), &list); err != nil || len(list) != 1 {
		return []string{fmt.Sprintf("%s: want one action: %v", where, err)}
	}
	a := list[0]
	where += " " + a.Name
	scs, err := fromTemplate(doc, b.heading, b.text)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", where, err)}
	}
	var errs []string
	for _, sc := range scs {
		oldest, err := OldestRelease(b.text, sc.OS)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s on %s: %v", where, sc.OS, err))
			continue
		}
		if sc.OS == "captainos" && oldest == "tink-worker" {
			errs = append(errs, fmt.Sprintf("%s: claims tink-worker, which runs no CaptainOS", where))
		}
		if sc.OS == "captainos" && registryPort.MatchString(b.text) && oldest != "HEAD" {
			errs = append(errs, fmt.Sprintf("%s: pulls from a private registry on CaptainOS and claims %s; only HEAD's tink-agent pulls through certs.d", where, oldest))
		}
		if a.Namespaces != nil && a.Namespaces.Network != "" && slices.Index(Releases, oldest) < slices.Index(Releases, "v0.25") {
			errs = append(errs, fmt.Sprintf("%s on %s: namespaces.network, read from v0.25 only, and claims %s", where, sc.OS, oldest))
		}
		if sc.Want == StayedUp {
			continue
		}
		for _, r := range Releases[slices.Index(Releases, oldest):] {
			if pid := pidOn(r, a); pid != "host" {
				errs = append(errs, fmt.Sprintf("%s on %s: takes the machine down, and under %s its pid namespace is %q, not the host's (a top-level `pid: host` is read by every release; namespaces.pid only from v0.25)", where, sc.OS, r, pid))
			}
		}
	}
	return errs
}

// TestTemplateReleases: every template of the README and
// docs/templates.md claims the oldest release it works on, and that
// takes the machine down on every release it claims, by each release's
// rules.
func TestTemplateReleases(t *testing.T) {
	n := 0
	for _, doc := range []string{"README.md", "docs/templates.md"} {
		blocks, err := yamlBlocks(filepath.Join("..", doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			n++
			for _, e := range checkReleases(doc, b) {
				t.Error(e)
			}
		}
	}
	if n < 10 {
		t.Errorf("%d templates; want the README's and docs/templates.md's, 10 or more", n)
	}
}

// TestReleaseRules: the rules the templates are held to, on actions
// whose fate on each release is known.
func TestReleaseRules(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string // the pid namespace on each of Releases
	}{
		{"pid", "- pid: host\n", []string{"host", "host", "host", "host", "host"}},
		{"namespaces.pid", "- namespaces:\n    pid: host\n", []string{"", "", "", "host", "host"}},
		{"namespaces.pid over pid", "- pid: host\n  namespaces:\n    pid: private\n", []string{"host", "host", "host", "private", "private"}},
		{"network alone", "- network: host\n", []string{"", "", "", "", ""}},
	}
	for _, tc := range cases {
		var list []releaseAction
		if err := yaml.Unmarshal([]byte(tc.text), &list); err != nil {
			t.Fatal(err)
		}
		for i, r := range Releases {
			if got := pidOn(r, list[0]); got != tc.want[i] {
				t.Errorf("%s under %s: pid %q, want %q", tc.name, r, got, tc.want[i])
			}
		}
	}
	for _, tc := range []struct{ first, os, want string }{
		{"# Tinkerbell: tink-worker, tink-agent v0.23 and later", "hookos", "tink-worker"},
		{"# Tinkerbell: tink-agent v0.23 and later", "captainos", "v0.23"},
		{"# Tinkerbell: tink-agent v0.25 and later (namespaces.network)", "hookos", "v0.25"},
		{"# Tinkerbell: tink-agent HEAD only on CaptainOS; HookOS: tink-worker, tink-agent v0.23 and later", "captainos", "HEAD"},
		{"# Tinkerbell: tink-agent HEAD only on CaptainOS; HookOS: tink-worker, tink-agent v0.23 and later", "hookos", "tink-worker"},
		{"# Tinkerbell: tink-agent v0.29 and later", "hookos", ""},
		{"# Tinkerbell: every release", "hookos", ""},
		{"- name: reboot", "hookos", ""},
	} {
		got, err := OldestRelease(tc.first+"\n- name: x\n", tc.os)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("OldestRelease(%q, %s) = %q, %v; want %q", tc.first, tc.os, got, err, tc.want)
		}
	}
	// A template that loses the host's pid namespace under a release it
	// claims fails, as does one on CaptainOS that claims tink-worker.
	for _, tc := range []struct{ text, want string }{
		{"# Tinkerbell: tink-agent v0.23 and later\n- name: reboot\n  image: waitdaemon:latest\n  command: [\"reboot\"]\n  namespaces:\n    pid: host\n  volumes:\n    - /run/containerd/containerd.sock:/run/containerd/containerd.sock\n",
			`under v0.23 its pid namespace is "", not the host's`},
		{"# Tinkerbell: tink-worker, tink-agent v0.23 and later\n- name: reboot\n  image: waitdaemon:latest\n  pid: host\n  volumes:\n    - /run/containerd/containerd.sock:/run/containerd/containerd.sock\n",
			"claims tink-worker, which runs no CaptainOS"},
		{"# Tinkerbell: tink-agent v0.23 and later\n- name: reboot\n  image: waitdaemon:latest\n  pid: host\n  namespaces:\n    network: host\n  volumes:\n    - /var/run/docker.sock:/var/run/docker.sock\n",
			"namespaces.network, read from v0.25 only"},
		{"# Tinkerbell: tink-agent v0.25 and later\n- name: reboot\n  image: registry.example:5000/waitdaemon:v1\n  pid: host\n  volumes:\n    - /run/containerd/containerd.sock:/run/containerd/containerd.sock\n",
			"only HEAD's tink-agent pulls through certs.d"},
	} {
		errs := checkReleases("t.md", block{"t", tc.text})
		if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, tc.want) }) {
			t.Errorf("%s: %q; want %q", tc.text, errs, tc.want)
		}
	}
}

// TestEveryRealRelease: each release whose real tink-agent the field
// runs takes each machine it supports down in at least one row, and the
// rows that stand for it name it exactly.
func TestEveryRealRelease(t *testing.T) {
	scs, err := Scenarios("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, os := range []string{"captainos", "hookos"} {
		for r, v := range realVersions {
			n := 0
			for _, sc := range scs {
				if strings.TrimSuffix(sc.OS, "26") == os && sc.Release == r && sc.Want != StayedUp {
					n++
					if got := releaseLabel(sc.Release); got != "tink-agent "+v {
						t.Errorf("%s/%s: labelled %q, want tink-agent %s", sc.OS, sc.Name, got, v)
					}
				}
			}
			if n == 0 {
				t.Errorf("no row takes %s down with tink-agent %s", os, v)
			}
		}
	}
	for _, sc := range scs {
		if _, real := realVersions[sc.Release]; !real && sc.Release != tinkagent.TinkWorker && sc.Release != tinkagent.Head {
			t.Errorf("%s/%s: under %s, which neither the runner alone nor a real agent stands for", sc.OS, sc.Name, sc.Release)
		}
	}
}

// TestControlPlaneRows: each OS's README reboot runs once under
// v0.25.0's whole control plane, in make test-all alone, and no other
// row does.
func TestControlPlaneRows(t *testing.T) {
	scs, err := Scenarios("..")
	if err != nil {
		t.Fatal(err)
	}
	on := map[string]int{}
	for _, sc := range scs {
		if !sc.ControlPlane {
			continue
		}
		on[sc.OS]++
		base, _, _ := strings.Cut(sc.Name, " under ")
		if base != gateTemplates[sc.OS] || sc.Release != tinkagent.V025 || sc.Gate || !strings.HasSuffix(sc.Name, "whole control plane") {
			t.Errorf("%s/%s: want the README's reboot under v0.25.0's whole control plane, not in the gate (release %s, gate %v)", sc.OS, sc.Name, sc.Release, sc.Gate)
		}
	}
	if on["captainos"] != 1 || on["hookos"] != 1 || len(on) != 2 {
		t.Errorf("control-plane rows by OS: %v; want one on captainos and one on hookos", on)
	}
}

// TestTemplateText: the Template holds the action as written, the one
// action of the one task, for the agent the Workflow names device_1.
func TestTemplateText(t *testing.T) {
	action := "- name: reboot\n  image: waitdaemon:latest\n  command: [\"reboot\"]\n"
	var tmpl struct {
		Tasks []struct {
			Worker  string
			Actions []map[string]any
		}
	}
	text := TemplateText(action)
	if err := yaml.Unmarshal([]byte(text), &tmpl); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if len(tmpl.Tasks) != 1 || tmpl.Tasks[0].Worker != "{{.device_1}}" || len(tmpl.Tasks[0].Actions) != 1 ||
		tmpl.Tasks[0].Actions[0]["name"] != "reboot" || !strings.Contains(text, "      command: [\"reboot\"]\n") {
		t.Errorf("template:\n%s", text)
	}
}
