// Package conformance holds the engine contract's promises (package
// engine) as tests that any engine.Engine must pass: Run runs them all
// against one engine, given a Row, what only that engine's tests know.
// The fake engine passes them with no engine present (this package's own
// test); the real engines pass them on the end-to-end rows (e2e's
// TestConformance). A new engine is one package, one Row, and Run.
//
// A lost answer (the engine acted, and its answer never came) is made by
// the Row where it can (the fake's Lost); elsewhere the suite calls the
// method a second time, which is what a retry after a lost answer does.
package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
)

// Row is what the suite needs of an engine that only the engine's tests
// know.
type Row interface {
	// Engine is the engine under test.
	Engine() engine.Engine
	// Action makes a container that plays the action, running, as the
	// engine's worker or agent makes one, with its socket bound in and
	// ActionEnv in its environment, and returns it as the engine inspects
	// it. It goes when the test ends.
	Action(t *testing.T) engine.Self
	// Env is the environment container id was made with, as the engine
	// records it: not what the runtime adds to its process at a start.
	Env(t *testing.T, id string) []string
	// Images are the images the suite plans containers of.
	Images(t *testing.T) Images
	// Program is the command, for Images.Run, of a container that exits
	// code, with last among the last two lines of its output; with code
	// Forever, one that runs until it is removed.
	Program(code int) (command []string, last string)
	// Mkdir is the command, for Images.Run, of a container that makes
	// directory dir with mkdir(2) and exits code; with dir there
	// already, it exits MkdirExists.
	Mkdir(dir string, code int) []string
	// Lose makes the next call of method on the container named name do
	// its work and lose its answer (an error), and reports whether it
	// can; the suite calls the method a second time either way.
	Lose(method, name string) bool
}

// ActionEnv is in the action's environment: waitdaemon's control
// variables by their aliases, so that the plain IMAGE and WAIT_SECONDS
// are the user's, and reach the user container (UserEnv), and a variable
// of the user's.
var ActionEnv = []string{
	"WAITDAEMON_IMAGE=waitdaemon-conformance-absent:1", "WAITDAEMON_WAIT_SECONDS=5",
	"IMAGE=the-users-own", "WAIT_SECONDS=the-users-own-too", "CONFORMANCE_USER_VAR=1",
}

// UserEnv is what of ActionEnv a container planned from the action has.
var UserEnv = []string{"IMAGE=the-users-own", "WAIT_SECONDS=the-users-own-too", "CONFORMANCE_USER_VAR=1"}

// Forever is Program's code of a container that runs until removed.
const Forever = -1

// MkdirExists is the exit code of Mkdir's command when its directory is
// there already.
const MkdirExists = 7

// Images are images on the row's engine, or not.
type Images struct {
	Run     imageref.Ref // present; its entrypoint takes Program's commands
	NoStart imageref.Ref // present; its own command is not there
	Absent  imageref.Ref // not present
}

// MissingDir is a host directory that is not there: a waiter that binds
// it cannot be created.
const MissingDir = "/nonexistent/waitdaemon-conformance"

// Label marks every container the suite makes, with a value of each
// test's own.
const Label = "org.waitdaemon.conformance"

// Run runs every promise against the row's engine, each a subtest.
func Run(t *testing.T, row Row) {
	for _, c := range []struct {
		name string
		f    func(*suite)
	}{
		{"CreateStartFollowRemove", (*suite).createStartFollowRemove},
		{"ReRun", (*suite).reRun},
		{"Again", (*suite).again},
		{"Keep", (*suite).keep},
		{"ListByLabels", (*suite).listByLabels},
		{"RunsUntilRemoved", (*suite).runsUntilRemoved},
		{"Stop", (*suite).stop},
		{"ActionExited", (*suite).actionExited},
		{"ActionExitedGone", (*suite).actionExitedGone},
		{"ActionGone", (*suite).actionGone},
		{"CreateAgain", (*suite).createAgain},
		{"StartAgain", (*suite).startAgain},
		{"KeepAgain", (*suite).keepAgain},
		{"RemoveAgain", (*suite).removeAgain},
		{"HasImage", (*suite).hasImage},
		{"Inspect", (*suite).inspect},
		{"SelfNotFound", (*suite).selfNotFound},
		{"StartFails", (*suite).startFails},
		{"MissingSource", (*suite).missingSource},
	} {
		t.Run(c.name, func(t *testing.T) { c.f(newSuite(t, row)) })
	}
}

// suite is one test of the suite: its row, engine, and label value.
type suite struct {
	t     *testing.T
	row   Row
	eng   engine.Engine
	value string // of Label, this test's own
	ctx   context.Context
}

func newSuite(t *testing.T, row Row) *suite {
	var b [6]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	s := &suite{t: t, row: row, eng: row.Engine(), value: hex.EncodeToString(b[:]), ctx: ctx}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, _ := s.eng.List(ctx, Label, s.value)
		for _, c := range list {
			if err := s.eng.Remove(ctx, c.ID); err != nil {
				t.Errorf("cleaning up %s: %v", c.Name, err)
			}
		}
	})
	return s
}

// name is a container name of this test's own.
func (s *suite) name(role string) string { return "conformance-" + s.value + "-" + role }

// plan plans a container named for role, of image, running command.
func (s *suite) plan(self engine.Self, role string, image imageref.Ref, command []string) engine.Spec {
	s.t.Helper()
	want := engine.Want{Name: s.name(role), Image: image, Labels: map[string]string{Label: s.value, Label + ".role": role}, Command: command}
	if command == nil {
		want.ImageDefault = true
	}
	spec, err := s.eng.Plan(s.ctx, self, want)
	if err != nil {
		s.t.Fatalf("Plan %s: %v", want.Name, err)
	}
	if spec.Name != want.Name {
		s.t.Errorf("Plan named the container %q; want %q", spec.Name, want.Name)
	}
	return spec
}

// create plans and creates a container of Images.Run for role, that
// exits code (or runs until removed), and returns its ID.
func (s *suite) create(self engine.Self, role string, code int) string {
	s.t.Helper()
	command, _ := s.row.Program(code)
	spec := s.plan(self, role, s.row.Images(s.t).Run, command)
	id, err := s.eng.Create(s.ctx, spec)
	if err != nil {
		s.t.Fatalf("Create %s: %v", spec.Name, err)
	}
	if id == "" {
		s.t.Fatalf("Create %s returned no ID", spec.Name)
	}
	return id
}

// run starts container id and follows the run to its end.
func (s *suite) run(id, since string) engine.Run {
	s.t.Helper()
	sent := time.Now()
	if err := s.eng.Start(s.ctx, id); err != nil {
		s.t.Fatalf("Start: %v", err)
	}
	r, err := s.eng.Follow(s.ctx, id, sent, 2, since)
	if err != nil {
		s.t.Fatalf("Follow: %v", err)
	}
	return r
}

// list lists this test's containers.
func (s *suite) list() []engine.Container {
	s.t.Helper()
	list, err := s.eng.List(s.ctx, Label, s.value)
	if err != nil {
		s.t.Fatalf("List: %v", err)
	}
	return list
}

// only is the one container this test has, which must be id.
func (s *suite) only(id string) engine.Container {
	s.t.Helper()
	list := s.list()
	if len(list) != 1 || list[0].ID != id {
		s.t.Fatalf("List: %s; want the one container %s", describe(list), short(id))
	}
	return list[0]
}

func describe(list []engine.Container) string {
	var out []string
	for _, c := range list {
		out = append(out, c.Name+" ("+short(c.ID)+", "+c.State+")")
	}
	if out == nil {
		return "nothing"
	}
	return strings.Join(out, ", ")
}

func short(id string) string { return id[:min(len(id), 16)] }

// checkRun checks a run of a container of Program(code).
func (s *suite) checkRun(r engine.Run, code int) {
	s.t.Helper()
	_, last := s.row.Program(code)
	if r.ExitCode != code {
		s.t.Errorf("Follow: exit code %d; want %d", r.ExitCode, code)
	}
	if r.StartedAt == "" || r.FinishedAt == "" {
		s.t.Errorf("Follow: StartedAt %q, FinishedAt %q; want both", r.StartedAt, r.FinishedAt)
	}
	if len(r.Output) > 2 || !slices.Contains(r.Output, last) {
		s.t.Errorf("Follow: output %q; want at most the 2 lines asked for, %q among them", r.Output, last)
	}
}

// createStartFollowRemove: a planned container is created not started,
// labelled as asked; it starts, Follow returns its run; Remove removes it,
// and it cannot be started after.
func (s *suite) createStartFollowRemove() {
	id := s.create(s.row.Action(s.t), "user", 3)
	c := s.only(id)
	if c.Name != s.name("user") || c.Labels[Label] != s.value || c.Labels[Label+".role"] != "user" || c.Ran || c.Running {
		s.t.Errorf("List after Create: %+v; want it named %s, labelled as planned, never ran, not running", c, s.name("user"))
	}
	s.checkRun(s.run(id, ""), 3)
	if c := s.only(id); !c.Ran || c.Running {
		s.t.Errorf("List after its run: %+v; want it ran, not running", c)
	}
	if err := s.eng.Remove(s.ctx, id); err != nil {
		s.t.Fatalf("Remove: %v", err)
	}
	if list := s.list(); len(list) != 0 {
		s.t.Errorf("List after Remove: %s; want nothing", describe(list))
	}
	if err := s.eng.Start(s.ctx, id); err == nil {
		s.t.Errorf("Start of a removed container: no error")
	}
}

// reRun: a container that ran starts again, and Follow returns the new
// run, its output since the last one's end.
func (s *suite) reRun() {
	id := s.create(s.row.Action(s.t), "user", 0)
	first := s.run(id, "")
	s.checkRun(first, 0)
	second := s.run(id, first.FinishedAt)
	s.checkRun(second, 0)
	if second.StartedAt < first.StartedAt {
		s.t.Errorf("the re-run started at %s, before the first run (%s)", second.StartedAt, first.StartedAt)
	}
	s.only(id)
}

// again: Again makes, from a container that ran and changed its file
// system, a fresh container, not started, with its labels and its
// environment, byte for byte (the user's plain IMAGE and WAIT_SECONDS
// too), that runs its command from its image: it does not see what the
// first's run left. A call made again, as after a lost answer, adopts the
// container made.
func (s *suite) again() {
	self := s.row.Action(s.t)
	spec := s.plan(self, "user", s.row.Images(s.t).Run, s.row.Mkdir("/made-by-a-run", 3))
	first, err := s.eng.Create(s.ctx, spec)
	if err != nil {
		s.t.Fatalf("Create: %v", err)
	}
	if r := s.run(first, ""); r.ExitCode != 3 {
		s.t.Fatalf("the first run exited %d, want 3", r.ExitCode)
	}
	name := s.name("user-2")
	lost := s.row.Lose("Again", name)
	made, err := s.eng.Again(s.ctx, spec.Name, name)
	if lost != (err != nil) {
		s.t.Fatalf("Again: %q, %v; want an error if and only if its answer was lost (%v)", made, err, lost)
	}
	id, err := s.eng.Again(s.ctx, spec.Name, name)
	if err != nil {
		s.t.Fatalf("Again again: %v; want it to adopt its container", err)
	}
	if !lost && id != made {
		s.t.Errorf("Again again returned %s; want the first call's, %s", short(id), short(made))
	}
	list := s.list()
	if len(list) != 2 {
		s.t.Fatalf("List: %s; want the first container and the one Again made", describe(list))
	}
	for _, c := range list {
		if c.ID == id && (c.Name != name || c.Ran || c.Running || c.Labels[Label] != s.value || c.Labels[Label+".role"] != "user") {
			s.t.Errorf("List: %+v; want it named %s, labelled as the first, never ran", c, name)
		}
	}
	firstEnv := s.row.Env(s.t, first)
	for _, kv := range UserEnv {
		if !slices.Contains(firstEnv, kv) {
			s.t.Errorf("the first container's environment lacks %s, which the action passes on: %q", kv, firstEnv)
		}
	}
	if diff := linediff.Lines(firstEnv, s.row.Env(s.t, id)); diff != "" {
		s.t.Errorf("the environment of the container Again made is not the first's (-first +again):\n%s", diff)
	}
	if r := s.run(id, ""); r.ExitCode != 3 {
		s.t.Errorf("the run of the container Again made exited %d, want 3 as the first (%d: it found what the first's run made)\n%q", r.ExitCode, MkdirExists, r.Output)
	}
}

// keep: Keep keeps a container that ran under the name it returns, out
// of the way: a new container can take its old name.
func (s *suite) keep() {
	self := s.row.Action(s.t)
	id := s.create(self, "user", 1)
	s.run(id, "")
	kept, err := s.eng.Keep(s.ctx, s.only(id), s.name("kept"))
	if err != nil || kept == "" {
		s.t.Fatalf("Keep: %q, %v; want the name it is kept under", kept, err)
	}
	again := s.create(self, "user", 0)
	if again == id {
		s.t.Fatalf("Create under the kept container's old name returned the kept one, %s", short(id))
	}
	for _, c := range s.list() {
		if c.ID == id && c.Name != kept {
			s.t.Errorf("List: the kept container is named %q; want %q", c.Name, kept)
		}
		if c.ID == again && c.Name != s.name("user") {
			s.t.Errorf("List: the new container is named %q; want %q", c.Name, s.name("user"))
		}
	}
	if list := s.list(); len(list) != 2 {
		s.t.Errorf("List: %s; want the kept container and the new one", describe(list))
	}
}

// listByLabels: List returns the containers labelled label=value, and
// only those; none is no error.
func (s *suite) listByLabels() {
	self := s.row.Action(s.t)
	a := s.create(self, "a", 0)
	b := s.create(self, "b", 0)
	for _, c := range []struct{ role, id string }{{"a", a}, {"b", b}} {
		list, err := s.eng.List(s.ctx, Label+".role", c.role)
		var mine []engine.Container
		for _, l := range list {
			if l.Labels[Label] == s.value {
				mine = append(mine, l)
			}
		}
		if err != nil || len(mine) != 1 || mine[0].ID != c.id {
			s.t.Errorf("List role=%s: %s, %v; want %s alone", c.role, describe(mine), err, short(c.id))
		}
	}
	if got := s.list(); len(got) != 2 {
		s.t.Errorf("List: %s; want both", describe(got))
	}
	if list, err := s.eng.List(s.ctx, Label, "none-"+s.value); err != nil || len(list) != 0 {
		s.t.Errorf("List of a value no container has: %s, %v; want nothing, no error", describe(list), err)
	}
}

// runsUntilRemoved: a container that runs is listed running; a ctx that
// ends first ends ActionExited and Follow early; Remove removes it
// running.
func (s *suite) runsUntilRemoved() {
	id := s.create(s.row.Action(s.t), "user", Forever)
	if err := s.eng.Start(s.ctx, id); err != nil {
		s.t.Fatalf("Start: %v", err)
	}
	if c := s.only(id); !c.Ran || !c.Running {
		s.t.Errorf("List of a container that runs: %+v; want it ran and runs", c)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	type exited struct {
		exit engine.Exit
		err  error
	}
	done := make(chan exited, 1)
	go func() {
		e, err := s.eng.ActionExited(ctx, id)
		done <- exited{e, err}
	}()
	cancel()
	if got := <-done; got.err != nil || got.exit.Known || got.exit.Removed {
		s.t.Errorf("ActionExited with a ctx that ended: %+v, %v; want an early return, no exit known, no error", got.exit, got.err)
	}
	if _, err := s.eng.Follow(ctx, id, time.Now(), 2, ""); err == nil {
		s.t.Errorf("Follow with a ctx that ended: no error")
	}
	if c := s.only(id); !c.Running {
		s.t.Errorf("List after the early returns: %+v; want it still running", c)
	}
	if err := s.eng.Remove(s.ctx, id); err != nil {
		s.t.Fatalf("Remove of a running container: %v", err)
	}
	if list := s.list(); len(list) != 0 {
		s.t.Errorf("List after Remove: %s; want nothing", describe(list))
	}
}

// actionExited: ActionExited waits for a container to stop, and says
// when, with its exit code; asked again, the same.
func (s *suite) actionExited() {
	id := s.create(s.row.Action(s.t), "action", 4)
	sent := time.Now()
	if err := s.eng.Start(s.ctx, id); err != nil {
		s.t.Fatalf("Start: %v", err)
	}
	for range 2 {
		exit, err := s.eng.ActionExited(s.ctx, id)
		if err != nil || !exit.Known || exit.Code != 4 || exit.Removed || exit.At.Before(sent.Add(-time.Second)) {
			s.t.Errorf("ActionExited: %+v, %v; want exit code 4, known, at its exit (started %v)", exit, err, sent)
		}
	}
}

// actionExitedGone: a container that is gone has exited, removed.
func (s *suite) actionExitedGone() {
	id := s.create(s.row.Action(s.t), "action", 0)
	if err := s.eng.Remove(s.ctx, id); err != nil {
		s.t.Fatalf("Remove: %v", err)
	}
	exit, err := s.eng.ActionExited(s.ctx, id)
	if err != nil || !exit.Removed || exit.At.IsZero() {
		s.t.Errorf("ActionExited of a container that is gone: %+v, %v; want it removed, now", exit, err)
	}
}

// actionGone: ActionGone waits for the container's removal, and says
// when it saw it; one not removed by then is not gone.
func (s *suite) actionGone() {
	id := s.create(s.row.Action(s.t), "action", 0)
	if at, gone := s.eng.ActionGone(s.ctx, id, time.Now().Add(500*time.Millisecond)); gone {
		s.t.Errorf("ActionGone of a container still there: gone at %v; want not gone by the bound", at)
	}
	type removal struct{ asked, done time.Time }
	removed := make(chan removal, 1)
	go func() {
		time.Sleep(time.Second)
		asked := time.Now()
		err := s.eng.Remove(s.ctx, id)
		if err != nil {
			s.t.Errorf("Remove: %v", err)
		}
		removed <- removal{asked, time.Now()}
	}()
	at, gone := s.eng.ActionGone(s.ctx, id, time.Now().Add(time.Minute))
	r := <-removed
	if !gone || at.Before(r.asked) || at.After(r.done) {
		s.t.Errorf("ActionGone: %v, gone %v; want gone, at the removal's own time, from %v to %v", at, gone, r.asked, r.done)
	}
}

// createAgain: a Create whose answer was lost, called again for the same
// spec, adopts the container it made.
func (s *suite) createAgain() {
	command, _ := s.row.Program(0)
	spec := s.plan(s.row.Action(s.t), "user", s.row.Images(s.t).Run, command)
	lost := s.row.Lose("Create", spec.Name)
	first, err := s.eng.Create(s.ctx, spec)
	if lost != (err != nil) {
		s.t.Fatalf("Create: %q, %v; want an error if and only if its answer was lost (%v)", first, err, lost)
	}
	id, err := s.eng.Create(s.ctx, spec)
	if err != nil {
		s.t.Fatalf("Create again: %v; want it to adopt its container", err)
	}
	if !lost && id != first {
		s.t.Errorf("Create again returned %s; want the first's, %s", short(id), short(first))
	}
	s.only(id)
	s.checkRun(s.run(id, ""), 0)
}

// stop: Stop of a container made and never started leaves it so; of one
// that runs, it returns once the run has ended, which Follow then reads,
// not exit 0; Stop again, of one stopped already, is no error.
func (s *suite) stop() {
	id := s.create(s.row.Action(s.t), "user", Forever)
	if err := s.eng.Stop(s.ctx, id); err != nil {
		s.t.Fatalf("Stop of a container never started: %v; want no error", err)
	}
	if c := s.only(id); c.Ran || c.Running {
		s.t.Fatalf("List after the Stop of a container never started: %+v; want it never started", c)
	}
	sent := time.Now()
	if err := s.eng.Start(s.ctx, id); err != nil {
		s.t.Fatalf("Start: %v", err)
	}
	if err := s.eng.Stop(s.ctx, id); err != nil {
		s.t.Fatalf("Stop of a container that runs: %v", err)
	}
	if c := s.only(id); c.Running {
		s.t.Errorf("List once Stop returned: %+v; want it stopped", c)
	}
	ctx, cancel := context.WithTimeout(s.ctx, 20*time.Second)
	defer cancel()
	r, err := s.eng.Follow(ctx, id, sent, 2, "")
	if err != nil || r.ExitCode == 0 {
		s.t.Errorf("Follow of the stopped run: %+v, %v; want its end, not exit 0", r, err)
	}
	if err := s.eng.Stop(s.ctx, id); err != nil {
		s.t.Errorf("Stop again, of a container stopped already: %v; want no error", err)
	}
}

// startAgain: a Start whose answer was lost, called again, counts the
// container as started: it runs, once.
func (s *suite) startAgain() {
	id := s.create(s.row.Action(s.t), "user", Forever)
	lost := s.row.Lose("Start", s.name("user"))
	if err := s.eng.Start(s.ctx, id); lost != (err != nil) {
		s.t.Fatalf("Start: %v; want an error if and only if its answer was lost (%v)", err, lost)
	}
	if err := s.eng.Start(s.ctx, id); err != nil {
		s.t.Fatalf("Start again, of a container that runs: %v; want it counted as started", err)
	}
	if c := s.only(id); !c.Ran || !c.Running {
		s.t.Errorf("List: %+v; want it ran and runs", c)
	}
}

// keepAgain: a Keep whose answer was lost, called again, keeps it under
// the same name.
func (s *suite) keepAgain() {
	id := s.create(s.row.Action(s.t), "user", 1)
	s.run(id, "")
	c := s.only(id)
	lost := s.row.Lose("Keep", c.Name)
	if _, err := s.eng.Keep(s.ctx, c, s.name("kept")); lost != (err != nil) {
		s.t.Fatalf("Keep: %v; want an error if and only if its answer was lost (%v)", err, lost)
	}
	kept, err := s.eng.Keep(s.ctx, c, s.name("kept"))
	if err != nil || kept != s.name("kept") {
		s.t.Fatalf("Keep again: %q, %v; want it kept as %s", kept, err, s.name("kept"))
	}
	if got := s.only(id); got.Name != kept {
		s.t.Errorf("List: the kept container is named %q; want %q", got.Name, kept)
	}
}

// removeAgain: a Remove whose answer was lost, called again, is no
// error; nor is the Remove of a container that never was.
func (s *suite) removeAgain() {
	id := s.create(s.row.Action(s.t), "user", 0)
	lost := s.row.Lose("Remove", s.name("user"))
	if err := s.eng.Remove(s.ctx, id); lost != (err != nil) {
		s.t.Fatalf("Remove: %v; want an error if and only if its answer was lost (%v)", err, lost)
	}
	if err := s.eng.Remove(s.ctx, id); err != nil {
		s.t.Errorf("Remove again: %v; want no error", err)
	}
	if err := s.eng.Remove(s.ctx, s.name("never")); err != nil {
		s.t.Errorf("Remove of a container that never was: %v; want no error", err)
	}
	if list := s.list(); len(list) != 0 {
		s.t.Errorf("List after Remove: %s; want nothing", describe(list))
	}
}

// hasImage: HasImage says which images are present.
func (s *suite) hasImage() {
	img := s.row.Images(s.t)
	for _, c := range []struct {
		ref  imageref.Ref
		want bool
	}{{img.Run, true}, {img.NoStart, true}, {img.Absent, false}} {
		if got, err := s.eng.HasImage(s.ctx, c.ref); got != c.want || err != nil {
			s.t.Errorf("HasImage %s: %v, %v; want %v", c.ref, got, err, c.want)
		}
	}
}

// inspect: Inspect reads the action container as the action; one that is
// not there is an error.
func (s *suite) inspect() {
	self := s.row.Action(s.t)
	got, err := s.eng.Inspect(s.ctx, self.ID)
	if err != nil || got.ID != self.ID || got.Name != self.Name {
		s.t.Errorf("Inspect of the action: %s %s, %v; want %s %s", short(got.ID), got.Name, err, short(self.ID), self.Name)
	}
	if _, err := s.eng.Inspect(s.ctx, s.name("never")); err == nil {
		s.t.Errorf("Inspect of a container that is not there: no error")
	}
}

// selfNotFound: a Self that cannot find the action's container is bad
// input, which names WAITDAEMON_CONTAINER.
func (s *suite) selfNotFound() {
	_, err := s.eng.Self(s.ctx, s.name("never"))
	var bad engine.InputError
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), "WAITDAEMON_CONTAINER") {
		s.t.Errorf("Self with an override that names no container: %v; want an engine.InputError naming WAITDAEMON_CONTAINER", err)
	}
}

// startFails: a container whose command is not there fails its Create,
// leaving nothing, or its Start, with an error engine.StartExitCode reads
// as 127; one whose start failed ran, as List says.
func (s *suite) startFails() {
	spec := s.plan(s.row.Action(s.t), "user", s.row.Images(s.t).NoStart, nil)
	id, err := s.eng.Create(s.ctx, spec)
	if err != nil {
		if list := s.list(); len(list) != 0 {
			s.t.Errorf("List after a Create that failed (%v): %s; want nothing", err, describe(list))
		}
		return
	}
	err = s.eng.Start(s.ctx, id)
	if err == nil {
		s.t.Fatalf("Start of a container whose command is not there: no error")
	}
	if code := engine.StartExitCode(err); code != 127 {
		s.t.Errorf("StartExitCode(%v) = %d; want 127", err, code)
	}
	if c := s.only(id); !c.Ran || c.Running {
		s.t.Errorf("List after a Start that failed: %+v; want it ran, not running", c)
	}
}

// missingSource: a waiter that binds a host directory that is not there
// fails its Create with an engine.MissingSourceError naming it, and
// leaves nothing.
func (s *suite) missingSource() {
	self := s.row.Action(s.t)
	bind := engine.Bind{Host: MissingDir, Container: "/run/waitdaemon-result"}
	spec := s.eng.PlanWaiter(self, engine.Waiter{Name: s.name("waiter"), Labels: map[string]string{Label: s.value}, Args: []string{"waiter"}, Bind: bind})
	_, err := s.eng.Create(s.ctx, spec)
	var missing *engine.MissingSourceError
	if !errors.As(err, &missing) || missing.Source != bind.Host || missing.Target != bind.Container {
		s.t.Errorf("Create of a waiter binding %s: %v; want an engine.MissingSourceError naming it", bind.Host, err)
	}
	if list := s.list(); len(list) != 0 {
		s.t.Errorf("List after the failed Create: %s; want nothing", describe(list))
	}
}
