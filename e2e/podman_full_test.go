//go:build full

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// TestPodmanEngine checks what the Podman tests rely on, and the
// differences from Docker that are Podman's own, not waitdaemon's.
func TestPodmanEngine(t *testing.T) {
	onRow(t, "podman")
	c := setupPodman(t)
	ctx := testCtx(t)
	t.Run("negotiation", func(t *testing.T) {
		p, err := c.Ping(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.APIVersion(ctx)
		if err != nil || v != podmanAPIVersion || p.APIVersion != podmanAPIVersion {
			t.Fatalf("Podman answers Api-Version %q, negotiated %q (%v); want %s", p.APIVersion, v, err, podmanAPIVersion)
		}
	})
	t.Run("short image names resolve to localhost/", func(t *testing.T) {
		// docker save | podman load names the images localhost/IMG; the
		// compat API resolves the short names the tests use to them.
		for _, ref := range []string{actionImage, probeImage} {
			img, err := c.ImageInspect(ctx, ref)
			if err != nil {
				t.Fatalf("image %s under Podman: %v", ref, err)
			}
			if !slices.Contains(img.RepoTags, "localhost/"+ref) {
				t.Errorf("image %s: RepoTags %q, want localhost/%s", ref, img.RepoTags, ref)
			}
		}
	})
	t.Run("cgroup namespace mode is ignored", func(t *testing.T) {
		// Podman 4.3's compat create drops HostConfig.CgroupnsMode: the
		// container stays in the host's cgroup namespace, and its inspect
		// reports "" (so there is nothing for the user container to
		// inherit either).
		created, err := c.ContainerCreate(ctx, "waitdaemon_"+sanitize(scoped("e2e podman cgroupns")), dockerapi.CreateRequest{
			Config:     dockerapi.Config{Image: probeImage, Env: []string{"PROBE_SLEEP=5", "PROBE_DIR=/none"}},
			HostConfig: dockerapi.HostConfig{CgroupnsMode: "private"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeAction(c, created.ID) })
		if err := c.ContainerStart(ctx, created.ID); err != nil {
			t.Fatal(err)
		}
		got, err := c.ContainerInspect(ctx, created.ID)
		if err != nil {
			t.Fatal(err)
		}
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/cgroup", got.State.Pid))
		if err != nil {
			t.Fatalf("the container's cgroup namespace: %v (state %+v)", err, got.State)
		}
		if got.HostConfig.CgroupnsMode != "" || ns != hostNamespace(t, "cgroup") {
			t.Errorf("CgroupnsMode private under Podman: inspect says %q, namespace %s (host's %s); "+
				"Podman 4.3 used to ignore it (\"\", the host's): update docs/engines.md's Podman table",
				got.HostConfig.CgroupnsMode, ns, hostNamespace(t, "cgroup"))
		}
	})
}

// TestPodmanPlan runs a dry run under Podman, traced: waitdaemon speaks
// API 1.41 to Podman, reads the socket's host path from Podman's Binds
// format, and plans the user container without Podman's own additions.
func TestPodmanPlan(t *testing.T) {
	onRow(t, "podman")
	c := setupPodman(t)
	out := t.TempDir()
	r := runAction(t, c, tinkAgent, action{
		name:    "e2e podman plan",
		command: []string{"reboot"},
		env:     map[string]string{"IMAGE": probeImage, "FOO": "bar", "WAITDAEMON_DRY_RUN": "true", "WAITDAEMON_VERBOSE": "true"},
		volumes: []string{out + ":/out:ro"},
		pid:     "host",
	})
	if r.ExitCode != 0 {
		t.Fatalf("the dry run exited %d:\n%s", r.ExitCode, r.Logs)
	}
	for _, want := range []string{"> GET /_ping ", "< Api-Version: " + podmanAPIVersion, "> GET /v" + podmanAPIVersion + "/containers/"} {
		if !strings.Contains(r.Logs, want) {
			t.Errorf("the trace lacks %q:\n%s", want, r.Logs)
		}
	}
	if strings.Contains(r.Logs, "/v1.50/") || strings.Contains(r.Logs, "/v1.24/") {
		t.Errorf("the action spoke another API version than %s:\n%s", podmanAPIVersion, r.Logs)
	}
	i := strings.LastIndex(r.Logs, "{\n  \"action\"")
	if i < 0 {
		t.Fatalf("no plan in the output:\n%s", r.Logs)
	}
	var plan struct {
		Action  struct{ ID, Name string }
		FoundBy string `json:"found_by"`
		User    struct {
			Name   string
			Create dockerapi.CreateRequest
		} `json:"user_container"`
		Waiter struct {
			Name   string
			Create dockerapi.CreateRequest
		}
	}
	if err := json.NewDecoder(strings.NewReader(r.Logs[i:])).Decode(&plan); err != nil {
		t.Fatalf("the plan: %v\n%s", err, r.Logs[i:])
	}
	if plan.Action.ID != r.ID {
		t.Errorf("the plan is for %s, want the action %s", plan.Action.ID, r.ID)
	}
	user := plan.User.Create
	// Podman reports Binds with options appended; create takes them back.
	for _, b := range []string{out + ":/out:ro,rprivate,rbind", podmanSocket() + ":/var/run/docker.sock:rw,rprivate,rbind"} {
		if !slices.Contains(user.HostConfig.Binds, b) {
			t.Errorf("user Binds %q lack %s (Podman's format)", user.HostConfig.Binds, b)
		}
	}
	if user.HostConfig.PidMode != "host" || user.Image != probeImage || !slices.Equal(user.Cmd, []string{"reboot"}) {
		t.Errorf("user plan: PidMode %q, Image %q, Cmd %q", user.HostConfig.PidMode, user.Image, user.Cmd)
	}
	if !slices.Contains(user.Env, "FOO=bar") {
		t.Errorf("user plan Env %q lacks FOO=bar", user.Env)
	}
	for _, kv := range user.Env {
		name, _, _ := strings.Cut(kv, "=")
		// Podman adds all three to every container by itself, with the
		// new container's own values; copied, they would carry the
		// action's (HOSTNAME its short ID).
		if kv == "container=podman" || kv == "TERM=xterm" || name == "HOSTNAME" || strings.HasPrefix(name, "WAITDAEMON_") || name == "IMAGE" {
			t.Errorf("user plan Env has %s, which the operator did not set: %q", kv, user.Env)
		}
	}
	// The waiter binds the socket by its host path, taken from Podman's
	// "src:dst:options" form.
	if want := []string{filepath.Dir(podmanSocket()) + ":/run/waitdaemon-engine:ro"}; !slices.Equal(plan.Waiter.Create.HostConfig.Binds, want) {
		t.Errorf("waiter Binds = %q, want %q", plan.Waiter.Create.HostConfig.Binds, want)
	}
	if plan.Waiter.Create.HostConfig.AutoRemove || plan.Waiter.Create.HostConfig.NetworkMode != "host" {
		t.Errorf("waiter: AutoRemove %v, NetworkMode %q", plan.Waiter.Create.HostConfig.AutoRemove, plan.Waiter.Create.HostConfig.NetworkMode)
	}
	waitGone(t, rigOf(c), r.ID, time.Second)
}
