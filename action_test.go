package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/phase"
	"github.com/waitdaemon/waitdaemon/testkit/fake"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
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
			env: []string{"IMAGE=reboot:1", "WAIT_SECONDS=7", "WAITDAEMON_RETRIES=2", "WAITDAEMON_LOG_TAIL=5", "WAITDAEMON_DOWN_WITHIN=9",
				`WAITDAEMON_FALLBACK_COMMAND=["reboot","-f"]`, "WAITDAEMON_RESULT_FILE=/var/lib/w/result.json"},
			want: phase.WaiterArgs{
				UserContainer: "act-waitdaemon-user", ActionContainer: actionID, ActionName: "act", WaitSeconds: 7, Retries: 2, DownWithin: 9, LogTail: 5,
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
			eng := &fake.Engine{Action: engine.Self{ID: actionID, Name: "act", FoundBy: "cgroup", HostPID: true, CanBoot: true}, Images: map[string]bool{"reboot:1": true}}
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

// ender is an engine on which the waiter removes its own container.
type ender struct {
	*fake.Engine
	said  *bytes.Buffer // what had been said when End was called
	ended []string
	err   error
	gone  bool // End waits until its ctx ends, as on an engine that is gone
}

func (e *ender) End(ctx context.Context, name string) error {
	e.ended = append(e.ended, name+" after "+strconv.Quote(e.said.String()))
	if e.gone {
		<-ctx.Done()
		return ctx.Err()
	}
	return e.err
}

// TestWaiterEndAfterSignal: after a signal (the shutdown's, which may
// have stopped the engine already), the removal of the waiter's own
// container gets the finish's grace, not the client's minute of waiting
// for an engine that is gone; without a signal it is not cut.
func TestWaiterEndAfterSignal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	eng := &ender{Engine: &fake.Engine{}, said: &out, gone: true}
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- end(ctx, eng, phase.WaiterArgs{ActionName: "act"}, nil, &out) }()
	select {
	case err := <-done:
		if took := time.Since(began); took < phase.FinishGrace-100*time.Millisecond || exitCode(err) != 1 || !strings.Contains(out.String(), "removing the waiter's own container") {
			t.Errorf("end() = %v after %v, said %q; want the removal cut after %v, and said", err, took, out.String(), phase.FinishGrace)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("end() still removing the waiter's own container 10 s after the signal, from an engine that is gone")
	}
	// No signal: the removal is not cut.
	slow := &ender{Engine: &fake.Engine{}, said: &out}
	if err := end(context.Background(), slow, phase.WaiterArgs{ActionName: "act"}, nil, &out); err != nil || len(slow.ended) != 1 {
		t.Errorf("end() = %v, ended %q; want the removal done", err, slow.ended)
	}
}

// TestWaiterEnd: on an engine on which the waiter removes its own
// container, it does so last, by its name, once it has said why it
// failed (the removal ends the process, before main could say it); what
// keeps it from it is said too, and fails the waiter.
func TestWaiterEnd(t *testing.T) {
	args := phase.WaiterArgs{ActionName: "act"}
	cases := []struct {
		name      string
		err, end  error
		wantSaid  string
		wantEnded string
		wantExit  int
	}{
		{name: "success", wantEnded: `act-waitdaemon-waiter after ""`},
		{name: "failure", err: errors.New("boom"), wantSaid: "waitdaemon: boom\n", wantEnded: `act-waitdaemon-waiter after "waitdaemon: boom\n"`, wantExit: 1},
		{name: "bad input", err: engine.InputError("X: bad"), wantSaid: "waitdaemon: X: bad\n", wantEnded: `act-waitdaemon-waiter after "waitdaemon: X: bad\n"`, wantExit: 2},
		{name: "the removal fails", end: errors.New("refused"), wantSaid: "waitdaemon: removing the waiter's own container: refused\n", wantEnded: `act-waitdaemon-waiter after ""`, wantExit: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			eng := &ender{Engine: &fake.Engine{}, said: &out, err: tc.end}
			err := end(t.Context(), eng, args, tc.err, &out)
			if out.String() != tc.wantSaid || len(eng.ended) != 1 || eng.ended[0] != tc.wantEnded || exitCode(err) != tc.wantExit {
				t.Errorf("said %q, ended %q, exit %d (%v); want said %q, ended [%s], exit %d", out.String(), eng.ended, exitCode(err), err, tc.wantSaid, tc.wantEnded, tc.wantExit)
			}
			if err != nil && err.Error() != "" {
				t.Errorf("error %q: main would say it again", err)
			}
		})
	}
	// An engine that removes the waiter itself: err as it is.
	boom := errors.New("boom")
	if err := end(t.Context(), &fake.Engine{}, args, boom, io.Discard); err != boom {
		t.Errorf("end() on an engine with no Ender = %v, want the error as it was", err)
	}
}
