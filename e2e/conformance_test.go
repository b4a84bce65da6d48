package e2e

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/testkit/conformance"
)

// TestConformance holds each real engine to the engine contract
// (package testkit/conformance): Docker 20.10, 29, 28.2 and 26.1, and
// containerd. Podman is left out: its 4.3 forgets a failed start
// (forgetsFailedStart), which the contract's List reports as a run.
func TestConformance(t *testing.T) {
	onEach(t, func(e testEngine) bool { return e.name != "podman" }, openRig, func(t *testing.T, r rig) {
		conformance.Run(t, conformanceRow{r})
	})
}

// conformanceRow is a row of the engine table as the suite takes it: the
// action is the probe, sleeping, made as the row's worker or agent makes
// an action; a lost answer is a second call.
type conformanceRow struct{ r rig }

func (c conformanceRow) Engine() engine.Engine { return c.r.engine() }

// sleeping is the probe's command while it plays the action, or runs
// until removed: longer than any test.
var sleeping = []string{"--sleep=3600"}

// Action runs the probe as tink-agent runs an action: on Docker, with the
// engine's socket bound in; on containerd, as its containerd runtime
// does (tinkagent).
func (c conformanceRow) Action(t *testing.T) engine.Self {
	t.Helper()
	ctx := testCtx(t)
	var id string
	switch r := c.r.(type) {
	case dockerRig:
		name := "tinkerbell_conformance_" + randomHex(8) + "_e2e"
		body := dockerapi.CreateRequest{
			Config:     dockerapi.Config{Image: probeImage, Cmd: sleeping, Env: conformance.ActionEnv},
			HostConfig: dockerapi.HostConfig{Binds: []string{r.c.SocketPath() + ":/var/run/docker.sock"}},
		}
		created, err := r.c.ContainerCreate(ctx, name, body)
		if err != nil {
			t.Fatalf("worker: %v", err)
		}
		t.Cleanup(func() { removeAction(r.c, created.ID) })
		if err := r.c.ContainerStart(ctx, created.ID); err != nil {
			t.Fatalf("worker: %v", err)
		}
		id = created.ID
	case containerdRig:
		a := cdAgentAction("tinkerbell_conformance_"+randomHex(8)+"_e2e", sleeping, conformance.ActionEnv, [][2]string{{containerdSocket, "/run/containerd/containerd.sock"}}, "", "")
		a.Image = "docker.io/library/" + probeImage
		ctr := r.create(t, ctx, a)
		if err := ctr.Start(ctx); err != nil {
			t.Fatalf("agent: %v", err)
		}
		id = ctr.ID
	default:
		t.Fatalf("no action for rig %T", c.r)
	}
	self, err := c.r.engine().Inspect(ctx, id)
	if err != nil {
		t.Fatalf("inspecting the action: %v", err)
	}
	return self
}

// Env is the environment container id was made with: on Docker its
// inspect's, on containerd its spec's.
func (c conformanceRow) Env(t *testing.T, id string) []string {
	t.Helper()
	ctx := testCtx(t)
	switch r := c.r.(type) {
	case dockerRig:
		ctr, err := r.c.ContainerInspect(ctx, id)
		if err != nil {
			t.Fatalf("inspecting %s: %v", id, err)
		}
		return ctr.Config.Env
	case containerdRig:
		ctr, err := r.c.ContainerGet(ctx, id)
		if err != nil {
			t.Fatalf("getting %s: %v", id, err)
		}
		var spec struct{ Process struct{ Env []string } }
		if err := json.Unmarshal(ctr.Spec.Value, &spec); err != nil {
			t.Fatalf("the spec of %s: %v", id, err)
		}
		return spec.Process.Env
	}
	t.Fatalf("no environment for rig %T", c.r)
	return nil
}

// Images are the probe, the probe with an entrypoint that is not there,
// and a name no engine has.
func (c conformanceRow) Images(t *testing.T) conformance.Images {
	t.Helper()
	needNoStart(t, c.r)
	ref := func(s string) imageref.Ref {
		r, err := imageref.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	return conformance.Images{Run: ref(probeImage), NoStart: ref(noStartImage), Absent: ref("waitdaemon-absent:" + e2eTag)}
}

// Program: the probe prints its report, a JSON object whose last line is
// "}", on stdout, then, exiting non-zero, one line on stderr.
func (c conformanceRow) Program(code int) ([]string, string) {
	if code == conformance.Forever {
		return sleeping, ""
	}
	return []string{"--exit=" + strconv.Itoa(code)}, "}"
}

// Mkdir: the probe makes the directory first, and exits 7 if it cannot.
func (c conformanceRow) Mkdir(dir string, code int) []string {
	return []string{"--mkdir=" + dir, "--exit=" + strconv.Itoa(code)}
}

func (c conformanceRow) Lose(string, string) bool { return false }
