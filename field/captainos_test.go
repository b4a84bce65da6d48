package field

import (
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
)

// TestCheckCaptainOS: the suite tells a machine as CaptainOS ships from
// one that is not (the field's machine before it had CNI, resolved and
// no CRI plugin among them), and an action's CNI network taken down
// before the report from one that is not.
func TestCheckCaptainOS(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)
	shipped := "FIELD-CAPTAINOS cni-plugins=bandwidth,bridge,dhcp,firewall,host-device,host-local,ipvlan,loopback,macvlan,portmap,ptp,sbr,static,tuning,vlan,vrf cni-conf=10-bridge.conflist resolv-conf=/run/systemd/resolve/resolv.conf resolved=active stub-listener=no cri=absent"
	setUp := "tinkagent: CNI: bridge set up on 0123456789ab in 412ms: eth0 172.17.0.2/23"
	removed := "tinkagent: CNI: bridge removed from 0123456789ab in 230ms"
	report := t0.Add(10 * time.Second)
	lines := func(texts ...string) []Line {
		var out []Line
		for i, s := range texts {
			out = append(out, Line{At: t0.Add(time.Duration(i) * time.Second), Text: s})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		lines   []Line
		hostNet bool
		want    string // "" for none
	}{
		{"as shipped, CNI set up and taken down before the report", lines(shipped, setUp, removed), false, ""},
		{"as shipped, on the host's network", lines(shipped), true, ""},
		{"as shipped, after the terminal's reset", lines("\x1b[!p\x1b]104\x07\x1b[?7h"+shipped, setUp, removed), false, ""},
		{"the field's machine before: no such line", lines("FIELD-BOOTED pid1=systemd hostname=localhost etc-hostname=none cgroup=cgroup2fs", "FIELD-ENGINE-UP containerd 2.2.1+unknown", setUp, removed), false, "no FIELD-CAPTAINOS line"},
		{"the CRI plugin loaded", lines(strings.Replace(shipped, "cri=absent", "cri=ok", 1), setUp, removed), false, "cri=ok, want absent"},
		{"resolv.conf a file", lines(strings.Replace(shipped, "resolv-conf=/run/systemd/resolve/resolv.conf", "resolv-conf=not-a-link", 1), setUp, removed), false, "resolv-conf=not-a-link"},
		{"the stub listening", lines(strings.Replace(shipped, "stub-listener=no", "stub-listener=yes", 1), setUp, removed), false, "stub-listener=yes, want no"},
		{"no firewall plugin", lines(strings.Replace(shipped, "firewall,", "", 1), setUp, removed), false, "no CNI plugin firewall"},
		{"no conflist", lines(strings.Replace(shipped, "cni-conf=10-bridge.conflist", "cni-conf=", 1), setUp, removed), false, "cni-conf=, want 10-bridge.conflist"},
		{"no CNI for a private network", lines(shipped), false, "set up no CNI network"},
		{"CNI on the host's network", lines(shipped, setUp, removed), true, "on the host's network, yet the runner set up CNI"},
		{"never taken down", lines(shipped, setUp), false, "did not take it down"},
		{"taken down after the report", append(lines(shipped, setUp), Line{At: report.Add(time.Second), Text: removed}), false, "after the report"},
		{"a setup that failed", lines(shipped, "tinkagent: CNI: setting up bridge on 0123456789ab: plugin bridge ADD: failed", setUp, removed), false, "the runner's CNI: tinkagent: CNI: setting up"},
		{"an address off the bridge", lines(shipped, strings.Replace(setUp, "172.17.0.2/23", "10.88.0.2/16", 1), removed), false, "not on CaptainOS's bridge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			took, err := CheckCaptainOS(tc.lines, tc.hostNet, report)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckCaptainOS: %v; want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckCaptainOS: %v; want an error saying %q", err, tc.want)
			case tc.want == "" && !tc.hostNet && took != 230*time.Millisecond:
				t.Fatalf("the teardown took %v; want the runner's 230ms", took)
			}
		})
	}
}

// TestOnHostNetwork: only a release that reads namespaces puts an action
// with namespaces.network: host on the host's network.
func TestOnHostNetwork(t *testing.T) {
	action := "- name: a\n  image: i\n  namespaces:\n    pid: host\n    network: host\n"
	for _, tc := range []struct {
		release string
		want    bool
	}{{"v0.23", false}, {"v0.24", false}, {"v0.25", true}, {"head", true}} {
		got, err := onHostNetwork(action, releaseOf(t, tc.release))
		if err != nil || got != tc.want {
			t.Errorf("under %s: %v, %v; want %v", tc.release, got, err, tc.want)
		}
	}
}

func releaseOf(t *testing.T, name string) tinkagent.Release {
	t.Helper()
	r, err := tinkagent.ParseRelease(name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCheckCaptainOSRealAgent: with a release's real agent, the action's
// CNI network is read from the address host-local allocated to it and
// released (field/realagent's lines), and the agent's own failure lines
// fail the row.
func TestCheckCaptainOSRealAgent(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 7, 0, 0, 0, time.UTC)
	shipped := "FIELD-CAPTAINOS cni-plugins=bridge,firewall,host-local,loopback,portmap,tuning cni-conf=10-bridge.conflist resolv-conf=/run/systemd/resolve/resolv.conf resolved=active stub-listener=no cri=absent"
	setUp := "realagent: CNI: bridge allocated 172.17.0.2 to 0123456789abcdef (tinkerbell_reboot_01KFIELD)"
	removed := "realagent: CNI: bridge released 172.17.0.2 of 0123456789abcdef"
	failed := `{"level":"error","msg":"failed to setup CNI network, container will have no network"}`
	report := t0.Add(10 * time.Second)
	lines := func(texts ...string) []Line {
		var out []Line
		for i, s := range texts {
			out = append(out, Line{At: t0.Add(time.Duration(i) * time.Second), Text: s})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		lines   []Line
		hostNet bool
		want    string
	}{
		{"allocated and released before the report", lines(shipped, setUp, removed), false, ""},
		{"on the host's network", lines(shipped), true, ""},
		{"never released", lines(shipped, setUp), false, "did not take it down"},
		{"released after the report", append(lines(shipped, setUp), Line{At: report.Add(time.Second), Text: removed}), false, "after the report"},
		{"an address off the bridge", lines(shipped, strings.Replace(setUp, "172.17.0.2", "10.88.0.2", 1), removed), false, "not on CaptainOS's bridge"},
		{"the agent's setup failed", lines(shipped, failed, setUp, removed), false, "the real agent's CNI"},
		{"an address on the host's network", lines(shipped, setUp, removed), true, "on the host's network, yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			took, err := CheckCaptainOS(tc.lines, tc.hostNet, report)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckCaptainOS: %v; want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckCaptainOS: %v; want an error saying %q", err, tc.want)
			case tc.want == "" && took != 0:
				t.Fatalf("the teardown took %v; want 0, the real agent's being unsaid", took)
			}
		})
	}
}
