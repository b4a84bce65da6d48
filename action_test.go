package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/engine/fake"
	"github.com/waitdaemon/waitdaemon/internal/linediff"
	"github.com/waitdaemon/waitdaemon/phase"
)

// TestWaiterCommandLine: the waiter's command line that phase 1 plans
// (printed by the dry run) parses, through the binary's own command line,
// into the waiter command with every setting phase 1 meant it to carry.
func TestWaiterCommandLine(t *testing.T) {
	const actionID = "a0c7000000000000000000000000000000000000000000000000000000000001"
	cases := []struct {
		name string
		env  []string
		want phase.WaiterArgs
	}{
		{
			name: "every setting",
			env: []string{"IMAGE=reboot:1", "WAIT_SECONDS=7", "WAITDAEMON_RETRIES=2", "WAITDAEMON_LOG_TAIL=5",
				`WAITDAEMON_FALLBACK_COMMAND=["reboot","-f"]`, "WAITDAEMON_RESULT_FILE=/var/lib/w/result.json"},
			want: phase.WaiterArgs{
				UserContainer: "act-waitdaemon-user", ActionContainer: actionID, ActionName: "act", WaitSeconds: 7, Retries: 2, LogTail: 5,
				FallbackContainer: "act-waitdaemon-fallback", ResultFile: phase.ResultDir + "/result.json", UserImage: "reboot:1", FallbackImage: "reboot:1",
			},
		},
		{
			name: "the defaults",
			env:  []string{"IMAGE=reboot:1"},
			want: phase.WaiterArgs{UserContainer: "act-waitdaemon-user", ActionContainer: actionID, ActionName: "act", WaitSeconds: 10, LogTail: 20, UserImage: "reboot:1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng := &fake.Engine{Action: engine.Self{ID: actionID, Name: "act", FoundBy: "cgroup"}, Images: map[string]bool{"reboot:1": true}}
			var out bytes.Buffer
			env := append(tc.env, "WAITDAEMON_DRY_RUN=true", "DOCKER_CONFIG="+t.TempDir())
			if err := phase.One(t.Context(), eng, phase.ReadInputs(env), phase.Options{Stdout: &out, Stderr: io.Discard}); err != nil {
				t.Fatal(err)
			}
			var plan struct{ Waiter struct{ Create fake.Planned } }
			if err := json.Unmarshal(out.Bytes(), &plan); err != nil || plan.Waiter.Create.Waiter == nil {
				t.Fatalf("plan = %s (%v)", out.String(), err)
			}
			args := plan.Waiter.Create.Waiter.Args
			var c cli
			parser, err := kong.New(&c, kong.Exit(func(code int) { t.Fatalf("the command line exited %d on %q", code, args) }))
			if err != nil {
				t.Fatal(err)
			}
			kctx, err := parser.Parse(args)
			if err != nil {
				t.Fatalf("parsing the waiter's command line %q: %v", args, err)
			}
			if kctx.Command() != "waiter" {
				t.Errorf("%q runs the command %q, want waiter", args, kctx.Command())
			}
			if diff := linediff.Text(fmt.Sprintf("%+v\n", tc.want), fmt.Sprintf("%+v\n", c.Waiter.WaiterArgs)); diff != "" {
				t.Errorf("the waiter's command line %q parses into (-want +got):\n%s", args, diff)
			}
		})
	}
}
