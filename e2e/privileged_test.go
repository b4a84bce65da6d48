package e2e

import (
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine/docker/hostconfig"
)

// TestPrivilegedPlan checks that a privileged action gives a privileged
// user container. Privileged containers cannot start on the project's
// machines, so the action container is only created, and the planned user
// container is created and inspected.
func TestPrivilegedPlan(t *testing.T) {
	onDockers(t, func(t *testing.T, c *dockerapi.Client) {
		ctx := testCtx(t)
		act, err := c.ContainerCreate(ctx, actionContainer(tinkWorker, "e2e privileged"), dockerapi.CreateRequest{
			Config: dockerapi.Config{Image: actionImage, Cmd: []string{"reboot"}, Env: []string{"IMAGE=" + probeImage}, Tty: true},
			HostConfig: dockerapi.HostConfig{
				Privileged: true, PidMode: "host",
				Binds: []string{"/var/run/docker.sock:/var/run/docker.sock"},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeAction(c, act.ID) })
		self, err := c.ContainerInspect(ctx, act.ID)
		if err != nil {
			t.Fatal(err)
		}
		img, err := c.ImageInspect(ctx, self.Image)
		if err != nil {
			t.Fatal(err)
		}
		version, _ := c.APIVersion(ctx)
		plan := hostconfig.Plan(hostconfig.Input{Container: self, Image: *img.Config, UserImage: probeImage, APIVersion: version})
		plan.Create.Labels = map[string]string{"org.waitdaemon.action-id": act.ID}
		user, err := c.ContainerCreate(ctx, actionContainer(tinkWorker, "e2e privileged")+"-user", plan.Create)
		if err != nil {
			t.Fatalf("creating the planned user container: %v", err)
		}
		got, err := c.ContainerInspect(ctx, user.ID)
		if err != nil {
			t.Fatal(err)
		}
		h := got.HostConfig
		if !h.Privileged || h.PidMode != "host" || h.MaskedPaths != nil || h.ReadonlyPaths != nil {
			t.Errorf("user container: Privileged %v, PidMode %q, MaskedPaths %q, ReadonlyPaths %q; want privileged, host pid, no masked or read-only paths",
				h.Privileged, h.PidMode, h.MaskedPaths, h.ReadonlyPaths)
		}
		if got.Config.Image != probeImage || len(got.Config.Cmd) != 1 || got.Config.Cmd[0] != "reboot" {
			t.Errorf("user container: image %q, cmd %q", got.Config.Image, got.Config.Cmd)
		}
	})
}
