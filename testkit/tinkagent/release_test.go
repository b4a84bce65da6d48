package tinkagent

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// releaseTemplate is a whole template as an operator writes one: the
// task's volumes and environment, an action with namespaces and no
// top-level pid (README's CaptainOS reboot before top-level pid), a
// top-level network no release reads, on-failure that none runs, and two
// variables whose order differs sorted by name (A, A1) or whole (A1=, A=).
const releaseTemplate = `version: "0.1"
name: reboot
global_timeout: 600
tasks:
  - name: os
    worker: "{{.device_1}}"
    volumes:
      - /dev:/dev
    environment:
      A: task
      B: task
    actions:
      - name: reboot
        image: waitdaemon:latest
        timeout: 90
        command: ["kill", "-39", "1"]
        network: host
        on-failure: ["true"]
        namespaces:
          pid: host
          network: host
        environment:
          A1: action
          B: action
          IMAGE: alpine:3.20
        volumes:
          - /run/containerd/containerd.sock:/run/containerd/containerd.sock
`

// TestReleases: the one template above, as each release reads it, and
// the Docker create and the containerd spec its worker makes.
func TestReleases(t *testing.T) {
	const id = "01JACTION"
	env := []string{"A1=action", "A=task", "B=action", "IMAGE=alpine:3.20"}
	vols := []string{"/dev:/dev", "/run/containerd/containerd.sock:/run/containerd/containerd.sock"}
	for _, tt := range []struct {
		release       Release
		pid, network  string
		name          string
		binds         []string
		tty           bool
		hostDir       string
		hostPIDInSpec bool
	}{
		// tink-worker: no namespaces; its own name, terminal and bind.
		{TinkWorker, "", "", "action_reboot", append([]string{"/worker/" + id + ":/workflow"}, vols...), true, "", false},
		// v0.23, v0.24: namespaces dropped, so no host pid.
		{V023, "", "", "tinkerbell_reboot_" + id, vols, false, "", false},
		{V024, "", "", "tinkerbell_reboot_" + id, vols, false, "", false},
		// v0.25: namespaces read; the pull reads no certs.d.
		{V025, "host", "host", "tinkerbell_reboot_" + id, vols, false, "", true},
		// HEAD: the pull reads certs.d.
		{Head, "host", "host", "tinkerbell_reboot_" + id, vols, false, containerdapi.DefaultHostDir, true},
	} {
		t.Run(string(tt.release), func(t *testing.T) {
			a, err := ParseTemplate([]byte(releaseTemplate), tt.release, id)
			if err != nil {
				t.Fatal(err)
			}
			if a.PID != tt.pid || a.Network != tt.network || !slices.Equal(a.Env, env) || !slices.Equal(a.Volumes, vols) || a.Timeout != 90*time.Second {
				t.Errorf("the action: pid %q, network %q, env %q, volumes %q, timeout %v; want %q, %q, %q, %q, 90s", a.PID, a.Network, a.Env, a.Volumes, a.Timeout, tt.pid, tt.network, env, vols)
			}
			name, req := (&Docker{}).createRequest(a)
			if name != tt.name || string(req.HostConfig.PidMode) != tt.pid || string(req.HostConfig.NetworkMode) != tt.network ||
				!slices.Equal(req.HostConfig.Binds, tt.binds) || req.Config.Tty != tt.tty || !req.HostConfig.Privileged ||
				!slices.Equal(req.Config.Env, env) || !slices.Equal(req.Config.Cmd, []string{"kill", "-39", "1"}) {
				body, _ := json.Marshal(req)
				t.Errorf("the Docker create: %s %s; want %s, pid %q, network %q, binds %q, tty %v", name, body, tt.name, tt.pid, tt.network, tt.binds, tt.tty)
			}
			if tt.release == TinkWorker {
				if _, err := (&Containerd{}).Create(t.Context(), a); err == nil || !strings.Contains(err.Error(), "Docker only") {
					t.Errorf("tink-worker on containerd: %v; want it refused, Docker only", err)
				}
				return
			}
			if got := pullRequest(a.Release, "registry.waitdaemon.test:5017/waitdaemon:latest", "overlayfs"); got.HostDir != tt.hostDir {
				t.Errorf("the pull's HostDir %q, want %q", got.HostDir, tt.hostDir)
			}
			volumes, _ := parseVolumes(a.Volumes)
			var s struct {
				Linux struct{ Namespaces []map[string]string }
			}
			if err := json.Unmarshal(containerSpec("tinkerbell", strings.Repeat("ab", 32), "h", "/etc-files", a, imageConfig{}, volumes), &s); err != nil {
				t.Fatal(err)
			}
			pidNS := slices.ContainsFunc(s.Linux.Namespaces, func(n map[string]string) bool { return n["type"] == "pid" })
			if pidNS == tt.hostPIDInSpec {
				t.Errorf("the spec's namespaces %v: host pid %v, want %v", s.Linux.Namespaces, !pidNS, tt.hostPIDInSpec)
			}
		})
	}
}

// TestSameSpec: which releases make the same container of one template,
// so that one run stands for them: with namespaces (above), v0.23 and
// v0.24 alike, v0.25 and HEAD alike, the two pairs apart; with a
// top-level pid and no namespaces, every tink-agent alike, tink-worker
// apart on Docker (its name, terminal and bind).
func TestSameSpec(t *testing.T) {
	topLevel := `- name: reboot
  image: waitdaemon:latest
  timeout: 90
  pid: host
  command: ["kill", "-39", "1"]
  environment:
    IMAGE: alpine:3.20
  volumes:
    - /run/containerd/containerd.sock:/run/containerd/containerd.sock
`
	for _, tt := range []struct {
		name, template, runtime string
		same                    [][]Release // each group alike, and unlike the others
	}{
		{"namespaces on containerd", releaseTemplate, "containerd", [][]Release{{V023, V024}, {V025, Head}}},
		{"namespaces on Docker", releaseTemplate, "docker", [][]Release{{TinkWorker}, {V023, V024}, {V025, Head}}},
		{"top-level pid on containerd", topLevel, "containerd", [][]Release{{V023, V024, V025, Head}}},
		{"top-level pid on Docker", topLevel, "docker", [][]Release{{TinkWorker}, {V023, V024, V025, Head}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			read := map[Release]Action{}
			for _, r := range Releases {
				a, err := ParseTemplate([]byte(tt.template), r, "01J")
				if err != nil {
					t.Fatal(err)
				}
				read[r] = a
			}
			for i, g := range tt.same {
				for j, h := range tt.same {
					for _, r := range g {
						for _, s := range h {
							if got := SameSpec(tt.runtime, read[r], read[s]); got != (i == j) {
								t.Errorf("SameSpec(%s, %s, %s) = %v, want %v", tt.runtime, r, s, got, i == j)
							}
						}
					}
				}
			}
		})
	}
}

// TestDockerRemove: every worker force-removes the action's container
// before it reports; tink-worker its volumes too.
func TestDockerRemove(t *testing.T) {
	for _, r := range Releases {
		c := &DockerContainer{release: r}
		want := dockerapi.RemoveOptions{Force: true, Volumes: r == TinkWorker}
		if got := c.removeOptions(); got != want {
			t.Errorf("%s: %+v, want %+v", r, got, want)
		}
	}
}

func TestParseRelease(t *testing.T) {
	for _, r := range Releases {
		if got, err := ParseRelease(string(r)); err != nil || got != r {
			t.Errorf("ParseRelease(%q) = %q, %v", r, got, err)
		}
	}
	if got, err := ParseRelease(""); err != nil || got != Head {
		t.Errorf(`ParseRelease("") = %q, %v; want head`, got, err)
	}
	if _, err := ParseRelease("v0.22"); err == nil || !strings.Contains(err.Error(), "want one of tink-worker, v0.23, v0.24, v0.25, head") {
		t.Errorf(`ParseRelease("v0.22"): %v`, err)
	}
}

// TestZeroTimeoutByRelease: tink-worker gives a zero timeout an hour;
// tink-agent a deadline already passed.
func TestZeroTimeoutByRelease(t *testing.T) {
	for _, r := range Releases {
		a, err := ParseTemplate([]byte("name: a\nimage: i\n"), r, "A1")
		if err != nil {
			t.Fatal(err)
		}
		want := time.Duration(0)
		if r == TinkWorker {
			want = time.Hour
		}
		if a.Timeout != want {
			t.Errorf("%s: timeout %v, want %v", r, a.Timeout, want)
		}
	}
}

// TestReleaseCleanUp: the containerd runtime's snapshot of a container,
// its namespace label, and whether it keeps a failed action's, by release (TestRealAgent holds
// both to the released agents).
func TestReleaseCleanUp(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		r           Release
		key         string
		keepsFailed bool
	}{
		{V023, "tinkerbell_a_1", false},
		{V024, "tinkerbell_a_1-abababab", true},
		{V025, "tinkerbell_a_1-abababab", true},
		{Head, "tinkerbell_a_1-abababab", true},
	} {
		if got := tc.r.snapshotKey("tinkerbell_a_1", id); got != tc.key {
			t.Errorf("%s: snapshot %q, want %q", tc.r, got, tc.key)
		}
		_, namespace := tc.r.labels("ns", "n", "h")["nerdctl/namespace"]
		if want := tc.r != V023; namespace != want {
			t.Errorf("%s: labels %v, want nerdctl/namespace: %v", tc.r, tc.r.labels("ns", "n", "h"), want)
		}
		if got := tc.r.keepsFailed(); got != tc.keepsFailed {
			t.Errorf("%s: keeps a failed action's container: %v, want %v", tc.r, got, tc.keepsFailed)
		}
	}
}
