package field

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/internal/tinkagent"
)

// What CaptainOS ships (tinkerbell/captain's mkosi.extra and
// mkosi.finalize), as the machine's FIELD-CAPTAINOS line says it has it:
// CNI's plugins in /opt/cni/bin and its bridge conflist, /etc/resolv.conf
// a link to systemd-resolved's upstream servers, resolved running without
// its stub listener, and containerd without its CRI plugin.
var captainOS = map[string]string{
	"cni-conf":      "10-bridge.conflist",
	"resolv-conf":   "/run/systemd/resolve/resolv.conf",
	"resolved":      "active",
	"stub-listener": "no",
	"cri":           "absent",
}

// cniPlugins are those CaptainOS's conflist runs, and the loopback.
var cniPlugins = []string{"bridge", "host-local", "loopback", "portmap", "firewall", "tuning"}

var (
	cniSetUp   = regexp.MustCompile(`tinkagent: CNI: (\S+) set up on (\S+) in (\S+): eth0 (\S+)`)
	cniRemoved = regexp.MustCompile(`tinkagent: CNI: (\S+) removed from (\S+) in (\S+)`)
	cniFailed  = regexp.MustCompile(`tinkagent: CNI: (setting up|removing) .*`)
)

// CheckCaptainOS checks a CaptainOS-like machine's console: the machine
// as shipped, and the action's CNI network, which the runner set up unless
// the action is on the host's network, and took down before its report
// (the line at report). It returns how long the teardown took. Every
// action the field runs has its task made, the one killed at its timeout
// too (after phase 1 created the user container).
func CheckCaptainOS(lines []Line, hostNetwork bool, report time.Time) (time.Duration, error) {
	var facts map[string]string
	for _, l := range lines {
		// After systemd's reset of the terminal, which the line follows.
		if _, rest, ok := strings.Cut(l.Text, "FIELD-CAPTAINOS "); ok {
			facts = map[string]string{}
			for _, f := range strings.Fields(rest) {
				k, v, _ := strings.Cut(f, "=")
				facts[k] = v
			}
		}
	}
	if facts == nil {
		return 0, fmt.Errorf("no FIELD-CAPTAINOS line: the machine did not say what it has of CaptainOS")
	}
	var wrong []string
	for _, k := range []string{"cni-conf", "resolv-conf", "resolved", "stub-listener", "cri"} {
		if facts[k] != captainOS[k] {
			wrong = append(wrong, fmt.Sprintf("%s=%s, want %s", k, facts[k], captainOS[k]))
		}
	}
	have := strings.Split(facts["cni-plugins"], ",")
	for _, p := range cniPlugins {
		if !slices.Contains(have, p) {
			wrong = append(wrong, fmt.Sprintf("no CNI plugin %s in /opt/cni/bin (%s)", p, facts["cni-plugins"]))
		}
	}
	if len(wrong) > 0 {
		return 0, fmt.Errorf("the machine is not as CaptainOS ships: %s", strings.Join(wrong, "; "))
	}

	var setUp, removed *Line
	for i, l := range lines {
		if cniFailed.MatchString(l.Text) {
			return 0, fmt.Errorf("the runner's CNI: %s", l.Text)
		}
		if setUp == nil && cniSetUp.MatchString(l.Text) {
			setUp = &lines[i]
		}
		if removed == nil && cniRemoved.MatchString(l.Text) {
			removed = &lines[i]
		}
	}
	if hostNetwork {
		if setUp != nil {
			return 0, fmt.Errorf("the action is on the host's network, yet the runner set up CNI: %s", setUp.Text)
		}
		return 0, nil
	}
	switch {
	case setUp == nil:
		return 0, fmt.Errorf("the action is not on the host's network, and the runner set up no CNI network")
	case !strings.HasPrefix(cniSetUp.FindStringSubmatch(setUp.Text)[4], "172.17."):
		return 0, fmt.Errorf("the action's address is not on CaptainOS's bridge, 172.17.0.0/23: %s", setUp.Text)
	case removed == nil:
		return 0, fmt.Errorf("the runner set up CNI, and did not take it down: %s", setUp.Text)
	case removed.At.After(report):
		return 0, fmt.Errorf("the CNI network was taken down after the report: %s", removed.Text)
	}
	took, err := time.ParseDuration(cniRemoved.FindStringSubmatch(removed.Text)[3])
	if err != nil {
		return 0, fmt.Errorf("the teardown's time: %s: %v", removed.Text, err)
	}
	return took, nil
}

// onHostNetwork reports whether the runner, copying release, puts the
// action on the host's network.
func onHostNetwork(action string, release tinkagent.Release) (bool, error) {
	a, err := tinkagent.ParseTemplate([]byte(action), release, "01FIELD")
	if err != nil {
		return false, err
	}
	return a.Network == "host", nil
}
