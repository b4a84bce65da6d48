package phase

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/testkit/fake"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
)

const actionID = "a0c7000000000000000000000000000000000000000000000000000000000001"

// newFake is an engine whose action is "act", with IMAGE present.
func newFake() *fake.Engine {
	return &fake.Engine{
		Action: engine.Self{ID: actionID, Name: "act", FoundBy: "cgroup"},
		Images: map[string]bool{"reboot:1": true},
	}
}

// phaseOne runs phase 1 with env, and returns its output and error.
func phaseOne(t *testing.T, eng engine.Engine, env ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	env = append(env, "DOCKER_CONFIG="+t.TempDir())
	err = One(t.Context(), eng, ReadInputs(env), Options{Stdout: &o, Stderr: &e})
	return o.String(), e.String(), err
}

// TestOneOverlap: the waiter is created and started while the user
// container is created, neither waiting for the other.
func TestOneOverlap(t *testing.T) {
	for _, after := range []map[string]string{
		{"Create act-waitdaemon-waiter": "Create act-waitdaemon-user"},
		{"Start act-waitdaemon-waiter": "Create act-waitdaemon-user"},
		{"Create act-waitdaemon-user": "Start act-waitdaemon-waiter"},
	} {
		eng := newFake()
		eng.After = after
		if _, _, err := phaseOne(t, eng, "IMAGE=reboot:1"); err != nil {
			t.Errorf("with %v: %v", after, err)
		}
	}
}

// index is where call is in calls; -1 if absent.
func index(calls []string, call string) int { return slices.Index(calls, call) }

// TestOneOrder: phase 1 validates before it reaches the engine, finds
// itself, clears leftovers, creates and starts the waiter, makes the user
// container meanwhile, and logs the hand-off.
func TestOneOrder(t *testing.T) {
	eng := newFake()
	out, _, err := phaseOne(t, eng, "IMAGE=reboot:1", "WAIT_SECONDS=5")
	if err != nil {
		t.Fatal(err)
	}
	calls := eng.Calls()
	for _, pair := range [][2]string{
		{"Reach", "Self"},
		{"Self", "List org.waitdaemon.action=act"},
		{"List org.waitdaemon.action=act", "Create act-waitdaemon-waiter"},
		{"Create act-waitdaemon-waiter", "Start act-waitdaemon-waiter"},
		{"List org.waitdaemon.action=act", "HasImage reboot:1"},
		{"HasImage reboot:1", "Create act-waitdaemon-user"},
	} {
		a, b := index(calls, pair[0]), index(calls, pair[1])
		if a < 0 || b < 0 || a > b {
			t.Errorf("want %q before %q; calls:\n%s", pair[0], pair[1], strings.Join(calls, "\n"))
		}
	}
	if slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "Pull") || strings.HasPrefix(c, "Remove") }) {
		t.Errorf("a present image was pulled, or something removed:\n%s", strings.Join(calls, "\n"))
	}
	var handed struct {
		Msg    string
		Wait   int         `json:"wait_seconds"`
		User   engine.Spec `json:"user_container"`
		Waiter engine.Spec
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &handed); err != nil || handed.Msg != "handed off" || handed.Wait != 5 ||
		handed.User.ID == "" || handed.User.Create != nil || handed.Waiter.ID == "" {
		t.Errorf("hand-off line = %q (%v), want one line with both IDs and no create bodies", out, err)
	}
	if got := eng.Names(); !slices.Equal(got, []string{"act-waitdaemon-user", "act-waitdaemon-waiter"}) {
		t.Errorf("containers = %q", got)
	}
}

// TestOneCreatesUnstarted: phase 1 creates the user container and, with
// WAITDAEMON_FALLBACK_COMMAND, the fallback, and starts neither; each
// container it makes is named after the action and labelled with its
// role, the action and the action's ID (docs/how-it-works.md).
func TestOneCreatesUnstarted(t *testing.T) {
	eng := newFake()
	if _, _, err := phaseOne(t, eng, "IMAGE=reboot:1", `WAITDAEMON_FALLBACK_COMMAND=["reboot","-f"]`); err != nil {
		t.Fatal(err)
	}
	made, err := eng.List(t.Context(), LabelActionID, actionID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range made {
		got = append(got, fmt.Sprintf("%s role=%s action=%s ran=%v", c.Name, c.Labels[LabelRole], c.Labels[LabelAction], c.Ran))
	}
	slices.Sort(got)
	want := []string{
		"act-waitdaemon-fallback role=fallback action=act ran=false",
		"act-waitdaemon-user role=user action=act ran=false",
		"act-waitdaemon-waiter role=waiter action=act ran=true",
	}
	if diff := linediff.Lines(want, got); diff != "" {
		t.Errorf("what phase 1 made (-want +got):\n%s\ncalls:\n%s", diff, strings.Join(eng.Calls(), "\n"))
	}
}

// TestOneWaiterArgs: what phase 1 tells the waiter parses back, through
// the waiter command's own parser, into what phase 1 meant; the waiter is
// labelled and bound as asked.
func TestOneWaiterArgs(t *testing.T) {
	cases := []struct {
		name     string
		env      []string
		want     WaiterArgs
		wantBind engine.Bind
	}{
		{
			name: "every setting",
			env: []string{"IMAGE=reboot:1", "WAIT_SECONDS=7", "WAITDAEMON_RETRIES=2", "WAITDAEMON_LOG_TAIL=5",
				`WAITDAEMON_FALLBACK_COMMAND=["reboot","-f"]`, "WAITDAEMON_RESULT_FILE=/var/lib/w/result.json"},
			want: WaiterArgs{
				UserContainer: "act-waitdaemon-user", ActionContainer: actionID, ActionName: "act", WaitSeconds: 7, Retries: 2, LogTail: 5,
				FallbackContainer: "act-waitdaemon-fallback", ResultFile: ResultDir + "/result.json", UserImage: "reboot:1", FallbackImage: "reboot:1",
			},
			wantBind: engine.Bind{Host: "/var/lib/w", Container: ResultDir},
		},
		{
			name: "no fallback, no result file",
			env:  []string{"IMAGE=reboot:1", "WAIT_SECONDS=3"},
			want: WaiterArgs{UserContainer: "act-waitdaemon-user", ActionContainer: actionID, ActionName: "act", WaitSeconds: 3, LogTail: 20, UserImage: "reboot:1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng := newFake()
			if tc.want.ResultFile != "" {
				eng.Says = map[string][]string{"act-waitdaemon-waiter": {`{"msg":"` + msgResultWritable + `"}`}}
			}
			if _, _, err := phaseOne(t, eng, tc.env...); err != nil {
				t.Fatal(err)
			}
			h := newHandoff(eng, eng.Action, mustValidate(t, tc.env...), true)
			w := h.Waiter.Create.(*fake.Planned).Waiter
			if diff := linediff.Text(fmt.Sprintf("%+v\n", tc.want), fmt.Sprintf("%+v\n", parseWaiter(t, w.Args))); diff != "" {
				t.Errorf("the waiter's command line %q parses into (-want +got):\n%s", w.Args, diff)
			}
			if w.Bind != tc.wantBind || !slices.Equal(w.Env, []string{"WAITDAEMON_VERBOSE=true"}) ||
				w.Labels[LabelRole] != RoleWaiter || w.Labels[LabelActionID] != actionID {
				t.Errorf("waiter = %+v", w)
			}
		})
	}
}

// parseWaiter parses a waiter's command line as the waiter command does
// (main's waiterCmd embeds WaiterArgs; main's TestWaiterCommandLine
// parses phase 1's through the binary's own command line).
func parseWaiter(t *testing.T, args []string) WaiterArgs {
	t.Helper()
	var cli struct {
		Waiter struct {
			WaiterArgs `embed:""`
		} `cmd:""`
	}
	p, err := kong.New(&cli, kong.Exit(func(code int) { t.Fatalf("the waiter's parser exited %d on %q", code, args) }))
	if err != nil {
		t.Fatal(err)
	}
	if len(args) == 0 || args[0] != "waiter" {
		t.Fatalf("command line %q does not start with the waiter command", args)
	}
	if _, err := p.Parse(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	return cli.Waiter.WaiterArgs
}

// TestWaiterArgsRoundTrip: Args writes a command line that the waiter's
// parser reads back into the same WaiterArgs, with or without the
// optional fallback and result file, and with values that look like
// flags or hold spaces.
func TestWaiterArgsRoundTrip(t *testing.T) {
	cases := []WaiterArgs{
		{UserContainer: "u", ActionContainer: "a", WaitSeconds: 0, LogTail: 0},
		{UserContainer: "u", ActionContainer: "a", ActionName: "act", WaitSeconds: 10, Retries: 3, LogTail: 20, FallbackContainer: "fb"},
		{UserContainer: "u", ActionContainer: "a", WaitSeconds: 1, LogTail: 1, ResultFile: "/run/waitdaemon-result/r.json"},
		{UserContainer: "-u x", ActionContainer: "--a", ActionName: "a b", WaitSeconds: 86400, Retries: 1, LogTail: 500,
			FallbackContainer: "--fb", ResultFile: "/with space/r.json"},
		{UserContainer: "u", ActionContainer: "a", WaitSeconds: 1, LogTail: 1, FallbackContainer: "fb", UserImage: "registry.example:5000/reboot:1", FallbackImage: "--fb:2"},
	}
	for _, want := range cases {
		t.Run(fmt.Sprint(want), func(t *testing.T) {
			if diff := linediff.Text(fmt.Sprintf("%+v\n", want), fmt.Sprintf("%+v\n", parseWaiter(t, want.Args()))); diff != "" {
				t.Errorf("%q parses into (-want +got):\n%s", want.Args(), diff)
			}
		})
	}
}

func mustValidate(t *testing.T, env ...string) Settings {
	t.Helper()
	s, err := ReadInputs(append(env, "DOCKER_CONFIG="+t.TempDir())).Validate()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOneUndo: whatever step fails after the first create, phase 1
// removes everything it made, and whatever carries the action's ID (a
// create whose answer was lost), and fails.
func TestOneUndo(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name   string
		fail   map[string]error
		lost   map[string]error
		images map[string]bool
		env    []string
	}{
		{name: "the waiter's create fails", fail: map[string]error{"Create act-waitdaemon-waiter": boom}},
		{name: "the waiter's create answer is lost", lost: map[string]error{"Create act-waitdaemon-waiter": boom}},
		{name: "the waiter's start fails", fail: map[string]error{"Start act-waitdaemon-waiter": boom}},
		{name: "the user's create fails", fail: map[string]error{"Create act-waitdaemon-user": boom}},
		{name: "the user's create answer is lost", lost: map[string]error{"Create act-waitdaemon-user": boom}},
		{name: "the pull fails", fail: map[string]error{"Pull reboot:1": boom}, images: map[string]bool{}},
		{name: "the plan fails", fail: map[string]error{"Plan act-waitdaemon-user": boom}},
		{name: "the fallback's create fails", fail: map[string]error{"Create act-waitdaemon-fallback": boom}, env: []string{`WAITDAEMON_FALLBACK_COMMAND=["x"]`}},
		{name: "the waiter cannot write the result file", env: []string{"WAITDAEMON_RESULT_FILE=/r/result.json"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng := newFake()
			eng.Fail, eng.Lost = tc.fail, tc.lost
			if tc.images != nil {
				eng.Images = tc.images
			}
			eng.Says = map[string][]string{"act-waitdaemon-waiter": {`{"msg":"` + msgResultUnwritable + `","error":"read-only file system"}`}}
			other := eng.Add("other-action-user", map[string]string{LabelActionID: "someone-else"}, false)
			_, _, err := phaseOne(t, eng, append([]string{"IMAGE=reboot:1"}, tc.env...)...)
			if err == nil {
				t.Fatal("phase 1 succeeded")
			}
			if got := eng.Names(); !slices.Equal(got, []string{"other-action-user"}) {
				t.Errorf("left behind: %q; want only another action's container (%s)\ncalls:\n%s", got, other, strings.Join(eng.Calls(), "\n"))
			}
		})
	}
}

// TestOneResultFileAnswer: phase 1 reads the waiter's output until its
// answer about the result file, whatever lines come first, and hands off
// only on a yes. A no is bad input, exit 2; a waiter that says nothing
// (it ended, or 20 s passed) is the engine's or the waiter's failure,
// exit 1, as settings.md's exit codes say.
func TestOneResultFileAnswer(t *testing.T) {
	writable := `{"msg":"` + msgResultWritable + `","result_file":"/run/waitdaemon-result/r.json"}`
	cases := []struct {
		name     string
		says     []string
		wantErr  string // "" for a hand-off
		wantCode int    // the exit code main gives the error
	}{
		{name: "yes", says: []string{writable}},
		{name: "yes after other lines", says: []string{`{"msg":"could not tell phase 1","error":"x"}`, "", "not json", writable}},
		{name: "no, after a blank line", says: []string{"", `{"msg":"` + msgResultUnwritable + `","error":"read-only file system"}`, writable},
			wantErr: "a file the waiter can write on the host (read-only file system)", wantCode: engine.ExitInput},
		{name: "silence", says: []string{`{"msg":"something else"}`}, wantErr: "the waiter did not say whether it can write WAITDAEMON_RESULT_FILE=\"/r/r.json\": it ended without a word", wantCode: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng := newFake()
			eng.Says = map[string][]string{"act-waitdaemon-waiter": tc.says}
			_, _, err := phaseOne(t, eng, "IMAGE=reboot:1", "WAITDAEMON_RESULT_FILE=/r/r.json")
			if got := fmt.Sprint(err); (tc.wantErr == "") != (err == nil) || !strings.Contains(got, tc.wantErr) {
				t.Errorf("phase 1: %v, want %q", err, tc.wantErr)
			}
			if err == nil {
				return
			}
			code := 1 // main's exit code for an error that names none
			var coded interface{ ExitCode() int }
			if errors.As(err, &coded) {
				code = coded.ExitCode()
			}
			if code != tc.wantCode {
				t.Errorf("phase 1's error %q exits %d; want %d", err, code, tc.wantCode)
			}
		})
	}
}

// TestOneLeftovers: an earlier run's waiter and never-started user
// container are removed; one that ran is kept under a name of its own;
// another action's are left alone.
func TestOneLeftovers(t *testing.T) {
	eng := newFake()
	earlier := "e0000000000000000000000000000000000000000000000000000000000000ff"
	eng.Add("act-waitdaemon-waiter", labels(RoleWaiter, "act", earlier), true)
	eng.Add("act-waitdaemon-user", labels(RoleUser, "act", earlier), true)
	eng.Add("act-waitdaemon-fallback", labels(RoleFallback, "act", earlier), false)
	eng.Add("other-waitdaemon-user", labels(RoleUser, "other", earlier), true)
	// Its re-runs' user containers: one that ran, one never started; a
	// fallback has none, and one so named is not the run's.
	eng.Add("act-waitdaemon-user-2", labels(RoleUser, "act", earlier), true)
	eng.Add("act-waitdaemon-user-3", labels(RoleUser, "act", earlier), false)
	eng.Add("act-waitdaemon-fallback-2", labels(RoleFallback, "act", earlier), false)
	out, _, err := phaseOne(t, eng, "IMAGE=reboot:1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"act-waitdaemon-fallback-2", "act-waitdaemon-user", "act-waitdaemon-user-2-e00000000000", "act-waitdaemon-user-e00000000000", "act-waitdaemon-waiter", "other-waitdaemon-user"}
	if got := eng.Names(); !slices.Equal(got, want) {
		t.Errorf("containers (-want +got):\n-%q\n+%q", want, got)
	}
	for _, msg := range []string{"removed an earlier run's container", "kept an earlier run's container under a new name"} {
		if !strings.Contains(out, msg) {
			t.Errorf("output lacks %q:\n%s", msg, out)
		}
	}
}

// TestOneLeftoversKeptOnce: a container an earlier run already kept
// under a name of its own stays as it is; only the one that still carries
// the plain name is kept anew, so three failing runs leave three names,
// none renamed twice.
func TestOneLeftoversKeptOnce(t *testing.T) {
	eng := newFake()
	eng.Exits = map[string][]int{"act-waitdaemon-user": {1}}
	for run := 1; run <= 3; run++ {
		id := fmt.Sprintf("%02d%062x", run, 0)
		eng.Action.ID = id
		if _, _, err := phaseOne(t, eng, "IMAGE=reboot:1"); err != nil {
			t.Fatal(err)
		}
		// The run's waiter runs the user container, which fails.
		var out bytes.Buffer
		args := WaiterArgs{UserContainer: "act-waitdaemon-user", ActionContainer: id, ActionName: "act", LogTail: 1}
		if err := Two(context.Background(), eng, args, Options{Stdout: &out}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"act-waitdaemon-user", "act-waitdaemon-user-010000000000", "act-waitdaemon-user-020000000000", "act-waitdaemon-waiter"}
	if got := eng.Names(); !slices.Equal(got, want) {
		t.Errorf("containers (-want +got):\n-%q\n+%q", want, got)
	}
	keeps := 0
	for _, c := range eng.Calls() {
		if strings.HasPrefix(c, "Keep") {
			keeps++
		}
	}
	if keeps != 2 {
		t.Errorf("%d Keeps, want 2 (one a re-run); calls:\n%s", keeps, strings.Join(eng.Calls(), "\n"))
	}
}

// TestOneDryRun prints the plan and creates nothing.
func TestOneDryRun(t *testing.T) {
	eng := newFake()
	out, _, err := phaseOne(t, eng, "IMAGE=reboot:1", "WAITDAEMON_DRY_RUN=true", "WAITDAEMON_REGISTRY_USERNAME=bob", "WAITDAEMON_REGISTRY_PASSWORD=s3cret-pw")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range eng.Calls() {
		if strings.HasPrefix(c, "Create") || strings.HasPrefix(c, "Start") || strings.HasPrefix(c, "Remove") || strings.HasPrefix(c, "Pull") {
			t.Errorf("the dry run called %s", c)
		}
	}
	// The whole plan: what was found and how, the pull decision, every
	// create body and the wait (README, Settings: WAITDAEMON_DRY_RUN).
	var plan Handoff
	if err := json.Unmarshal([]byte(out), &plan); err != nil || plan.User.Create == nil || plan.Waiter.Create == nil || len(plan.Pull) != 1 ||
		plan.Pull[0].Decision != decisionPresent || plan.Action.ID != actionID || plan.FoundBy != "cgroup" || plan.Wait != 10 {
		t.Errorf("plan = %s (%v)", out, err)
	}
	if strings.Contains(out, "s3cret-pw") || !strings.Contains(out, `"auth": "bob@docker.io"`) {
		t.Errorf("the plan shows the password, or not whose credential it uses:\n%s", out)
	}
}

// TestOneBadInput never reaches the engine.
func TestOneBadInput(t *testing.T) {
	for _, env := range [][]string{{"WAIT_SECONDS=1"}, {"IMAGE=reboot:1", "WAIT_SECONDS=soon"}, {"IMAGE=reboot:1", "WAITDAEMON_DRY_RUN=maybe"}, {"IMAGE=reboot:1", "WAITDAEMON_RETRY=1"}} {
		eng := newFake()
		_, _, err := phaseOne(t, eng, env...)
		if exitCode(err) != engine.ExitInput || len(eng.Calls()) != 0 {
			t.Errorf("%q: error %v (exit %d), calls %q; want bad input and no call", env, err, exitCode(err), eng.Calls())
		}
	}
}

// TestOneCredentialsForTheirOwnRegistry: the WAITDAEMON_REGISTRY_ pair
// goes only to IMAGE's registry. A fallback image on another registry is
// pulled with that registry's config.json entry, or anonymously; never
// with IMAGE's credentials.
func TestOneCredentialsForTheirOwnRegistry(t *testing.T) {
	cases := []struct {
		name     string
		config   string // config.json; "" for none
		fallback string
		want     map[string]string // image: the Auth's String()
	}{
		{
			name: "fallback on another registry, no config.json", fallback: "b.example:5000/fb:1",
			want: map[string]string{"a.example:5000/reboot:1": "alice@a.example:5000", "b.example:5000/fb:1": "anonymous"},
		},
		{
			name: "fallback on another registry with its own entry", fallback: "b.example:5000/fb:1",
			config: `{"auths":{"b.example:5000":{"auth":"Ym9iOmJvYnMtcHc="}}}`, // bob:bobs-pw
			want:   map[string]string{"a.example:5000/reboot:1": "alice@a.example:5000", "b.example:5000/fb:1": "bob@b.example:5000"},
		},
		{
			name: "fallback on the same registry", fallback: "a.example:5000/fb:1",
			want: map[string]string{"a.example:5000/reboot:1": "alice@a.example:5000", "a.example:5000/fb:1": "alice@a.example:5000"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.config != "" {
				if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			eng := newFake()
			eng.Images = map[string]bool{}
			var o, e bytes.Buffer
			env := []string{"IMAGE=a.example:5000/reboot:1", "WAITDAEMON_FALLBACK_IMAGE=" + tc.fallback, `WAITDAEMON_FALLBACK_COMMAND=["reboot"]`,
				"WAITDAEMON_REGISTRY_USERNAME=alice", "WAITDAEMON_REGISTRY_PASSWORD=alices-pw", "DOCKER_CONFIG=" + dir}
			if err := One(t.Context(), eng, ReadInputs(env), Options{Stdout: &o, Stderr: &e}); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, p := range eng.Pulls() {
				got[p.Image] = p.Auth.String()
				if p.Auth != nil && p.Auth.Registry != strings.Split(p.Image, "/")[0] {
					t.Errorf("the pull of %s carries a credential for %s", p.Image, p.Auth.Registry)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("pulls = %v, want %v", got, tc.want)
			}
			for img, who := range tc.want {
				if got[img] != who {
					t.Errorf("pull of %s with %s, want %s", img, got[img], who)
				}
			}
		})
	}
}

// TestPlan reads the settings from the container's own environment.
func TestPlan(t *testing.T) {
	eng := newFake()
	eng.Action.Env = []string{"IMAGE=reboot:1", "WAIT_SECONDS=9"}
	var out bytes.Buffer
	if err := Plan(context.Background(), eng, "act", Options{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	var plan Handoff
	if err := json.Unmarshal(out.Bytes(), &plan); err != nil || plan.Wait != 9 || plan.User.Create == nil {
		t.Errorf("plan = %s (%v)", out.String(), err)
	}
	eng.Action.Env = []string{"WAIT_SECONDS=9"}
	err := Plan(context.Background(), eng, "act", Options{Stdout: &out})
	if exitCode(err) != engine.ExitInput || !strings.Contains(err.Error(), "container act as an action: IMAGE is not set") {
		t.Errorf("plan of a container without IMAGE: %v", err)
	}
}

// TestOneResultDirMissing: a result file in a directory the host lacks,
// which the engine finds at the waiter's create, is bad input naming the
// variable and the directory, and leaves nothing.
func TestOneResultDirMissing(t *testing.T) {
	eng := newFake()
	eng.Fail = map[string]error{"Create act-waitdaemon-waiter": &engine.MissingSourceError{
		Source: "/mnt/target/var/wd", Target: ResultDir, Err: errors.New("bind source path does not exist: /mnt/target/var/wd"),
	}}
	// The image is pulled meanwhile, slowly (a big one on a slow link):
	// the waiter's failure cuts the pull short rather than wait it out.
	eng.Images = nil
	eng.PullTakes = 3 * time.Second
	_, _, err := phaseOne(t, eng, "IMAGE=reboot:1", "WAITDAEMON_RESULT_FILE=/mnt/target/var/wd/result.json")
	if exitCode(err) != engine.ExitInput || !strings.Contains(err.Error(), `WAITDAEMON_RESULT_FILE="/mnt/target/var/wd/result.json"`) ||
		!strings.Contains(err.Error(), "the host has no /mnt/target/var/wd") || strings.Contains(err.Error(), "context canceled") {
		t.Errorf("phase 1: %v (exit %d); want bad input naming the variable and the directory, alone", err, exitCode(err))
	}
	if pulls := eng.Pulls(); len(pulls) != 1 || !pulls[0].Cut {
		t.Errorf("pulls %+v; want the one pull cut short by the waiter's failure", pulls)
	}
	if got := eng.Names(); len(got) != 0 {
		t.Errorf("left %q; want nothing", got)
	}
	// Another bind's missing source is the engine's error, as it is.
	eng = newFake()
	other := &engine.MissingSourceError{Source: "/srv", Target: "/srv", Err: errors.New("no such file or directory")}
	eng.Fail = map[string]error{"Create act-waitdaemon-waiter": other}
	if _, _, err := phaseOne(t, eng, "IMAGE=reboot:1", "WAITDAEMON_RESULT_FILE=/mnt/target/var/wd/result.json"); !errors.Is(err, other) || exitCode(err) == engine.ExitInput {
		t.Errorf("phase 1: %v; want the engine's error", err)
	}
}

// TestOnePlanWants: what phase 1 asks the engine to plan. The user
// container runs the action's command; the fallback runs its
// WAITDAEMON_FALLBACK_COMMAND, or, with WAITDAEMON_FALLBACK_IMAGE set
// alone, that image's own ENTRYPOINT and CMD. Neither takes the registry
// config along.
func TestOnePlanWants(t *testing.T) {
	type want struct {
		Image        string
		Command      []string
		ImageDefault bool
	}
	cases := []struct {
		name     string
		env      []string
		user     want
		fallback *want
	}{
		{"no fallback", nil, want{Image: "reboot:1"}, nil},
		{"a fallback command, IMAGE's entrypoint", []string{`WAITDAEMON_FALLBACK_COMMAND=["reboot","-f"]`},
			want{Image: "reboot:1"}, &want{Image: "reboot:1", Command: []string{"reboot", "-f"}}},
		{"a fallback image and command", []string{"WAITDAEMON_FALLBACK_IMAGE=fb:2", `WAITDAEMON_FALLBACK_COMMAND=["reboot","-f"]`},
			want{Image: "reboot:1"}, &want{Image: "fb:2", Command: []string{"reboot", "-f"}}},
		{"a fallback image alone: its own default command", []string{"WAITDAEMON_FALLBACK_IMAGE=fb:2"},
			want{Image: "reboot:1"}, &want{Image: "fb:2", ImageDefault: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng := newFake()
			s := mustValidate(t, append([]string{"IMAGE=reboot:1"}, tc.env...)...)
			h := newHandoff(eng, eng.Action, s, false)
			if err := h.plan(t.Context(), eng, s, eng.Action); err != nil {
				t.Fatal(err)
			}
			asked := func(spec engine.Spec) *want {
				w := spec.Create.(*fake.Planned).Want
				if !slices.Equal(w.Withhold, []string{s.RegistryConfig}) {
					t.Errorf("%s withholds %q, want the registry config %q", spec.Name, w.Withhold, s.RegistryConfig)
				}
				return &want{Image: w.Image.String(), Command: w.Command, ImageDefault: w.ImageDefault}
			}
			got := asked(h.User)
			if diff := linediff.Text(fmt.Sprintf("%+v\n", tc.user), fmt.Sprintf("%+v\n", *got)); diff != "" {
				t.Errorf("user container's Want (-want +got):\n%s", diff)
			}
			var gotFB *want
			if h.Fallback != nil {
				gotFB = asked(*h.Fallback)
			}
			if diff := linediff.Text(fmt.Sprintf("%+v\n", tc.fallback), fmt.Sprintf("%+v\n", gotFB)); diff != "" {
				t.Errorf("fallback's Want (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOneWithholdsARegistryConfigThatIsThere: phase 1 sees the action's
// own files. A registry config directory that is not there holds no
// credentials, and is not withheld: hidden, it would be made on the host
// through the bind of a parent, or fail the start of a read-only one.
// Planned for another container (plan --container), it is always
// withheld, as that container's files cannot be seen.
func TestOneWithholdsARegistryConfigThatIsThere(t *testing.T) {
	there, missing := t.TempDir(), filepath.Join(t.TempDir(), "missing")
	cases := []struct {
		name   string
		config string
		other  bool // plan --container
		want   []string
	}{
		{"there", there, false, []string{there}},
		{"not there", missing, false, nil},
		{"another container's, there or not", missing, true, []string{missing}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng := newFake()
			env := []string{"IMAGE=reboot:1", `WAITDAEMON_FALLBACK_COMMAND=["reboot","-f"]`, "WAITDAEMON_DRY_RUN=true", "DOCKER_CONFIG=" + tc.config}
			var out bytes.Buffer
			var err error
			if tc.other {
				eng.Action.Env = env
				err = Plan(t.Context(), eng, "act", Options{Stdout: &out})
			} else {
				err = One(t.Context(), eng, ReadInputs(env), Options{Stdout: &out, Stderr: io.Discard})
			}
			if err != nil {
				t.Fatal(err)
			}
			var plan struct {
				User     struct{ Create fake.Planned } `json:"user_container"`
				Fallback struct{ Create fake.Planned } `json:"fallback_container"`
			}
			if err := json.Unmarshal(out.Bytes(), &plan); err != nil || plan.User.Create.Want == nil || plan.Fallback.Create.Want == nil {
				t.Fatalf("plan = %s (%v)", out.String(), err)
			}
			for role, w := range map[string]*engine.Want{"user container": plan.User.Create.Want, "fallback": plan.Fallback.Create.Want} {
				if diff := linediff.Lines(tc.want, w.Withhold); diff != "" {
					t.Errorf("the %s withholds (-want +got):\n%s", role, diff)
				}
			}
		})
	}
}

// TestOneShortWaitWarns: a wait below 2 s is allowed, with a warning that
// says why it is short: the worker reports the action's success some
// 60–160 ms after its exit, and a stalled server can let the user
// container's reboot come first.
func TestOneShortWaitWarns(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		warn string // the variable named; "" no warning
	}{
		{[]string{"WAIT_SECONDS=0"}, "WAIT_SECONDS"},
		{[]string{"WAIT_SECONDS=1"}, "WAIT_SECONDS"},
		{[]string{"WAITDAEMON_WAIT_SECONDS=1", "WAIT_SECONDS=9"}, "WAITDAEMON_WAIT_SECONDS"},
		{[]string{"WAIT_SECONDS=2"}, ""},
		{nil, ""},
	} {
		eng := newFake()
		out, _, err := phaseOne(t, eng, append([]string{"IMAGE=reboot:1"}, tc.env...)...)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var first struct{ Msg, Variable string }
		_ = json.Unmarshal([]byte(lines[0]), &first)
		switch {
		case tc.warn == "" && len(lines) != 1:
			t.Errorf("%q: output\n%s\nwant the hand-off line alone", tc.env, out)
		case tc.warn != "" && (len(lines) != 2 || !strings.Contains(first.Msg, "below 2 seconds") || first.Variable != tc.warn):
			t.Errorf("%q: output\n%s\nwant a warning naming %s, then the hand-off line", tc.env, out, tc.warn)
		}
	}
}

// cutCreates records the creates whose ctx had ended once the pull had
// failed: a create cut short may still be made by the engine after phase
// 1 has looked for what to undo.
type cutCreates struct {
	*fake.Engine
	mu  sync.Mutex
	cut []string
}

func (e *cutCreates) Create(ctx context.Context, spec engine.Spec) (string, error) {
	for !slices.Contains(e.Calls(), "Pull reboot:1") {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // the pull has failed by now
	if ctx.Err() != nil {
		e.mu.Lock()
		e.cut = append(e.cut, spec.Name)
		e.mu.Unlock()
	}
	return e.Engine.Create(ctx, spec)
}

// TestOneFailureCutsOnlyThePull: a failure on one side of the hand-off
// cuts only the other's pull short, never a create, which the engine may
// finish after phase 1 has undone what it knew of; and nothing is left.
func TestOneFailureCutsOnlyThePull(t *testing.T) {
	eng := &cutCreates{Engine: newFake()}
	eng.Images = nil
	eng.Fail = map[string]error{"Pull reboot:1": errors.New("pull access denied for reboot")}
	_, _, err := phaseOne(t, eng, "IMAGE=reboot:1")
	if err == nil || !strings.Contains(err.Error(), "pull access denied") || strings.Contains(err.Error(), "context canceled") {
		t.Errorf("phase 1: %v; want the pull's error, alone", err)
	}
	if len(eng.cut) != 0 {
		t.Errorf("creates cut short: %q; want none", eng.cut)
	}
	if got := eng.Names(); len(got) != 0 {
		t.Errorf("left %q; want nothing", got)
	}
}
