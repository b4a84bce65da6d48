package field

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
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
	// A release's real agent, as field/realagent sees it: host-local's
	// address files under /var/lib/cni/networks, made at the setup and
	// deleted at the teardown; and the agent's own word on a failure.
	realSetUp   = regexp.MustCompile(`realagent: CNI: (\S+) allocated (\S+) to (\S+) \((\S*)\)`)
	realRemoved = regexp.MustCompile(`realagent: CNI: (\S+) released (\S+) of (\S+)`)
	realFailed  = regexp.MustCompile(`failed to (setup|remove) CNI network`)
)

// CheckCaptainOS checks a CaptainOS-like machine's console: the machine
// as shipped, and the action's CNI network, which the runner or the real
// agent set up unless the action is on the host's network, and took down
// before its report (the line at report). It returns how long the
// teardown took (the runner's; 0 for the real agent, which does not say). Every
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
	address, real := "", false
	for i, l := range lines {
		if cniFailed.MatchString(l.Text) {
			return 0, fmt.Errorf("the runner's CNI: %s", l.Text)
		}
		if realFailed.MatchString(l.Text) {
			return 0, fmt.Errorf("the real agent's CNI: %s", l.Text)
		}
		if m := cniSetUp.FindStringSubmatch(l.Text); setUp == nil && m != nil {
			setUp, address = &lines[i], m[4]
		}
		if m := realSetUp.FindStringSubmatch(l.Text); setUp == nil && m != nil {
			setUp, address, real = &lines[i], m[2], true
		}
		if removed == nil && (cniRemoved.MatchString(l.Text) || realRemoved.MatchString(l.Text)) {
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
	case !strings.HasPrefix(address, "172.17."):
		return 0, fmt.Errorf("the action's address is not on CaptainOS's bridge, 172.17.0.0/23: %s", setUp.Text)
	case removed == nil:
		return 0, fmt.Errorf("the runner set up CNI, and did not take it down: %s", setUp.Text)
	case removed.At.After(report):
		return 0, fmt.Errorf("the CNI network was taken down after the report: %s", removed.Text)
	}
	if real {
		// The real agent says nothing of its teardown's time; that it
		// ended before the report is what the field holds.
		return 0, nil
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
