package field

import (
	"fmt"
	"slices"
	"strings"

	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
)

// oldest is the oldest release each template says it works on, by OS
// (hookos stands for hookos26 too) and the scenario's name: the field
// runs it under that release and under HEAD. CaptainOS came with v0.23;
// namespaces.network with v0.25; a plain-HTTP action image on CaptainOS
// needs HEAD's certs.d pull.
var oldest = map[string]tinkagent.Release{
	"hookos/README.md HookOS (Docker) reboot":                      tinkagent.TinkWorker,
	"hookos/README.md HookOS (Docker) kexec":                       tinkagent.TinkWorker,
	"captainos/README.md CaptainOS (containerd, no Docker) reboot": tinkagent.V023,
	"captainos/README.md CaptainOS (containerd, no Docker) kexec":  tinkagent.V023,
	"captainos/README.md A private registry reboot":                tinkagent.Head,
	"hookos/README.md A private registry reboot":                   tinkagent.TinkWorker,
	"hookos/docs/templates.md HookOS (Docker) kexec":               tinkagent.TinkWorker,
	"hookos/docs/templates.md HookOS (Docker) poweroff":            tinkagent.TinkWorker,
	"hookos/docs/templates.md HookOS (Docker) reboot":              tinkagent.V025,
	"captainos/docs/templates.md CaptainOS (containerd) kexec":     tinkagent.V025,
	"captainos/docs/templates.md CaptainOS (containerd) poweroff":  tinkagent.V023,
}

// realVersions are the releases whose real tink-agent the field runs
// (make tink-agents builds them; field/realagent runs each over gRPC,
// fed by that release's own server side): every release the runner
// copies but tink-worker, which has no release to build here, and HEAD,
// main after v0.25.0, which the module proxy does not serve (it differs
// from v0.25.0 in its containerd runtime's certs.d pull alone, which the
// runner keeps).
var realVersions = map[tinkagent.Release]string{
	tinkagent.V023: "v0.23.0",
	tinkagent.V024: "v0.24.0",
	tinkagent.V025: "v0.25.0",
}

// releaseLabel is what ran a row's action: the real agent, by its exact
// version, or the runner copying a release.
func releaseLabel(r tinkagent.Release) string {
	if v, ok := realVersions[r]; ok {
		return "tink-agent " + v
	}
	return "runner " + string(r)
}

// everyRealRelease adds, for each release of realVersions that no
// template's run is under on an OS, a run of that OS's gate template (the
// README's reboot) under it alone, if the template claims it: every real
// agent takes each machine it supports down at least once.
func everyRealRelease(scs []Scenario) []Scenario {
	covered := map[string]bool{}
	for _, sc := range scs {
		covered[strings.TrimSuffix(sc.OS, "26")+"/"+string(sc.Release)] = true
	}
	var add []Scenario
	for _, os := range []string{"captainos", "hookos"} {
		for _, r := range []tinkagent.Release{tinkagent.V023, tinkagent.V024, tinkagent.V025} {
			if covered[os+"/"+string(r)] {
				continue
			}
			for _, sc := range scs {
				base, _, _ := strings.Cut(sc.Name, " under ")
				if sc.OS != os || base != gateTemplates[os] || !slices.Contains(sc.Releases, r) {
					continue
				}
				s := sc
				s.Name, s.Release, s.Releases, s.Gate = base+" under "+string(r), r, []tinkagent.Release{r}, false
				add = append(add, s)
				covered[os+"/"+string(r)] = true
				break
			}
		}
	}
	return append(scs, add...)
}

// runtimeOf is the runtime tink-agent uses on os.
func runtimeOf(os string) string {
	if os == "captainos" {
		return "containerd"
	}
	return "docker"
}

// byRelease is sc under the releases it claims: from its oldest (the
// table above) to HEAD, those that make the same container
// (tinkagent.SameSpec) in one group, of which one run serves all. It
// runs the oldest group and the one with HEAD, each under its oldest
// release; one run if they are one group.
func byRelease(sc Scenario) ([]Scenario, error) {
	os := strings.TrimSuffix(sc.OS, "26")
	old, ok := oldest[os+"/"+sc.Name]
	if !ok {
		return nil, fmt.Errorf("%s on %s: no oldest release in the field's table (field/releases_rig_test.go)", sc.Name, sc.OS)
	}
	i := slices.Index(tinkagent.Releases, old)
	var groups [][]tinkagent.Release
	var first []tinkagent.Action
	for _, r := range tinkagent.Releases[i:] {
		if r == tinkagent.TinkWorker && os == "captainos" {
			return nil, fmt.Errorf("%s on %s: tink-worker has no containerd runtime", sc.Name, sc.OS)
		}
		a, err := tinkagent.ParseTemplate([]byte(sc.Action), r, "01FIELD")
		if err != nil {
			return nil, fmt.Errorf("%s under %s: %w", sc.Name, r, err)
		}
		if n := len(groups); n > 0 && tinkagent.SameSpec(runtimeOf(os), first[n-1], a) {
			groups[n-1] = append(groups[n-1], r)
			continue
		}
		groups, first = append(groups, []tinkagent.Release{r}), append(first, a)
	}
	runs := [][]tinkagent.Release{groups[0]}
	if len(groups) > 1 {
		runs = append(runs, groups[len(groups)-1])
	}
	var out []Scenario
	for _, g := range runs {
		s := sc
		s.Releases, s.Release = g, g[0]
		names := make([]string, len(g))
		for i, r := range g {
			names[i] = string(r)
		}
		s.Name += " under " + strings.Join(names, "+")
		out = append(out, s)
	}
	return out, nil
}

// controlPlaneRelease is the release whose whole control plane the field
// runs (scripts/tinkerbell.sh builds it with EMBEDDED=1).
const controlPlaneRelease = tinkagent.V025

// controlPlaneRows are the README's reboot on each OS (its gate
// template) under controlPlaneRelease, fed by that release's whole
// control plane: a Template and a Workflow made through its Kubernetes
// API, the Workflow's SUCCESS read from its status.
func controlPlaneRows(scs []Scenario) []Scenario {
	var add []Scenario
	for _, os := range []string{"captainos", "hookos"} {
		for _, sc := range scs {
			base, _, _ := strings.Cut(sc.Name, " under ")
			if sc.OS != os || base != gateTemplates[os] || !slices.Contains(sc.Releases, controlPlaneRelease) {
				continue
			}
			s := sc
			s.Name = base + " under " + realVersions[controlPlaneRelease] + "'s whole control plane"
			s.Release, s.Releases, s.Gate, s.ControlPlane = controlPlaneRelease, []tinkagent.Release{controlPlaneRelease}, false, true
			add = append(add, s)
			break
		}
	}
	return add
}
