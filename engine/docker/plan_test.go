package docker

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// TestPlanCommand: the create request's Cmd and Entrypoint for each kind
// of Want. The action's command travels by inherit's rules; a Command
// replaces it under the image's entrypoint; ImageDefault sends neither,
// so the image's own ENTRYPOINT and CMD apply, whatever the action set.
func TestPlanCommand(t *testing.T) {
	waitdaemonImage := dockerapi.Config{Entrypoint: []string{"/waitdaemon", "action", "--"}}
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		fmt.Fprint(w, "OK")
	})
	e := &Engine{C: &dockerapi.Client{Socket: rr.Serve(t, mux)}}
	ref, _ := imageref.Parse("fb:2")
	cases := []struct {
		name                    string
		cmd, entrypoint         []string // the action's
		want                    engine.Want
		wantCmd, wantEntrypoint []string
	}{
		{"the action's command", []string{"reboot"}, waitdaemonImage.Entrypoint, engine.Want{}, []string{"reboot"}, nil},
		{"the action's entrypoint and command", []string{"echo hi"}, []string{"/bin/sh", "-c"}, engine.Want{}, []string{"echo hi"}, []string{"/bin/sh", "-c"}},
		{"a command, the image's entrypoint", []string{"reboot"}, []string{"/bin/sh", "-c"}, engine.Want{Command: []string{"reboot", "-f"}}, []string{"reboot", "-f"}, nil},
		{"the image's default", []string{"reboot"}, waitdaemonImage.Entrypoint, engine.Want{ImageDefault: true}, nil, nil},
		{"the image's default, over the action's entrypoint", []string{"echo hi"}, []string{"/bin/sh", "-c"}, engine.Want{ImageDefault: true}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctr := dockerapi.Container{ID: "0123456789abcdef", Name: "/act", Config: dockerapi.Config{Cmd: tc.cmd, Entrypoint: tc.entrypoint}}
			img := waitdaemonImage
			s := engine.Self{ID: ctr.ID, Name: "act", Detail: &self{ctr: ctr, image: &img}}
			tc.want.Name, tc.want.Image = "act-waitdaemon-fallback", ref
			spec, err := e.Plan(t.Context(), s, tc.want)
			if err != nil {
				t.Fatal(err)
			}
			c := spec.Create.(*planned).CreateRequest
			// As the engine gets them: null, not [], leaves the image's.
			show := func(image string, cmd, entrypoint []string) string {
				return fmt.Sprintf("Image %s\nCmd %q null %v\nEntrypoint %q null %v\n", image, cmd, cmd == nil, entrypoint, entrypoint == nil)
			}
			want, got := show("fb:2", tc.wantCmd, tc.wantEntrypoint), show(c.Image, c.Cmd, c.Entrypoint)
			if diff := linediff.Text(want, got); diff != "" {
				t.Errorf("create request (-want +got):\n%s", diff)
			}
		})
	}
}
