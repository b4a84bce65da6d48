package e2e

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// TestAPIRecipes runs the README's debugging recipe of each OS in an
// action, with the engine's socket mounted as the templates mount it:
// on Docker (HookOS) `api GET /containers/json?all=1`, on containerd
// (CaptainOS) `api containers.list` with CONTAINERD_NAMESPACE; the JSON
// answer names the container the test made (never started), and on
// containerd the action's own too. (Docker can list a container that
// has just started as not running yet: all=1 lists the action either
// way, but its own list is no proof of it.) Then the same command asks for the
// test's container alone (`api GET /containers/ID/json`, `api
// containers.get ID`), with --verbose: the answer names it, and the
// trace shows the exchange.
func TestAPIRecipes(t *testing.T) {
	onEngines(t, func(t *testing.T, r rig) {
		ctx := testCtx(t)
		made := "e2e-api-" + e2eTag + "-" + strings.ToLower(randomHex(8))
		madeID := made // Docker's is the engine's
		var recipe, get []string
		var env map[string]string
		var idKey string // the key of a container's ID in the list's answer
		var wantGet, wantTrace []string
		switch r := r.(type) {
		case containerdRig:
			ctr := containerdapi.Container{ID: made, Image: "docker.io/library/" + r.actionImg, Runtime: containerdapi.Runtime{Name: containerdapi.RuncV2}, Spec: containerdapi.SpecAny([]byte(`{"ociVersion":"1.2.0"}`))}
			if _, err := r.c.ContainerCreate(ctx, ctr); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if err := r.c.ContainerDelete(ctx, made); err != nil {
					t.Errorf("removing %s: %v", made, err)
				}
			})
			recipe, get, idKey = []string{"containers.list"}, []string{"containers.get", made}, "id"
			env = map[string]string{"CONTAINERD_NAMESPACE": containerdNS}
			wantGet = []string{`(?m)^    "id": "` + made + `",$`}
			wantTrace = []string{
				`(?m)^> containerd\.services\.containers\.v1\.Containers/Get$`,
				`(?m)^> containerd-namespace: ` + regexp.QuoteMeta(containerdNS) + `$`,
				`(?m)^>   "id": "` + made + `"$`,
				`(?m)^<     "id": "` + made + `",$`,
				`(?m)^< containerd\.services\.containers\.v1\.Containers/Get: OK$`,
			}
		case dockerRig:
			created, err := r.c.ContainerCreate(ctx, made, dockerapi.CreateRequest{Config: dockerapi.Config{Image: actionImage}})
			if err != nil {
				t.Fatal(err)
			}
			madeID = created.ID
			t.Cleanup(func() { removeAction(r.c, made) })
			recipe, get, idKey = []string{"GET", "/containers/json?all=1"}, []string{"GET", "/containers/" + made + "/json"}, "Id"
			wantGet = []string{`(?m)^  "Name": "/` + made + `",$`}
			wantTrace = []string{
				`(?m)^> GET /v1\.\d+/containers/` + made + `/json HTTP/1\.1$`,
				`(?m)^< HTTP/1\.1 200 OK$`,
			}
		default:
			t.Fatalf("no recipe for the %s row", r.row().name)
		}

		a := r.run(t, tinkAgent, action{name: "e2e api recipe", entrypoint: append([]string{"/waitdaemon", "api"}, recipe...), env: env})
		ids := answerIDs(t, a.Logs, idKey)
		want := []string{madeID}
		if idKey == "id" {
			want = append(want, a.ID)
		}
		for _, id := range want {
			if a.ExitCode != 0 || !slices.Contains(ids, id) {
				t.Errorf("api %s: exit %d, IDs %q; want exit 0 and %s among them:\n%s", strings.Join(recipe, " "), a.ExitCode, ids, id, a.Logs)
			}
		}

		a = r.run(t, tinkAgent, action{name: "e2e api get", entrypoint: append([]string{"/waitdaemon", "api"}, append(get, "--verbose")...), env: env})
		if a.ExitCode != 0 {
			t.Errorf("api %s --verbose: exit %d:\n%s", strings.Join(get, " "), a.ExitCode, a.Logs)
		}
		for _, want := range append(wantGet, wantTrace...) {
			if !regexp.MustCompile(want).MatchString(a.Logs) {
				t.Errorf("api %s --verbose: output lacks %s:\n%s", strings.Join(get, " "), want, a.Logs)
			}
		}
	})
}

// answerIDs are the IDs of the containers that api's list answer names,
// under key: Docker's a list, containerd's an object holding one.
func answerIDs(t *testing.T, out, key string) []string {
	t.Helper()
	start := strings.IndexAny(out, "[{")
	if start < 0 {
		t.Errorf("no JSON in the answer:\n%s", out)
		return nil
	}
	var list []map[string]any
	var wrapped struct{ Containers []map[string]any }
	d := json.NewDecoder(strings.NewReader(out[start:]))
	var err error
	if out[start] == '[' {
		err = d.Decode(&list)
	} else {
		err = d.Decode(&wrapped)
		list = wrapped.Containers
	}
	if err != nil {
		t.Errorf("the answer is not the list: %v:\n%s", err, out)
	}
	var ids []string
	for _, c := range list {
		id, _ := c[key].(string)
		ids = append(ids, id)
	}
	return ids
}
