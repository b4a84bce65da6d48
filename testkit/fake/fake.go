// Package fake is an engine (package engine) held in memory, for unit
// tests of the phases: it keeps containers in a map, records every call
// in order, fails the calls a test asks it to, and runs each container to
// the exit codes the test scripts, or its command says (Exit, Sleep,
// Mkdir), in a file system of its own that its runs keep. It
// needs no engine, and has no clock of its own but the action's exit
// time. It keeps the contract's promises as the real engines do
// (testkit/conformance holds it to them).
package fake

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/inherit"
)

// Engine is the fake. Set its fields before use; read Calls after.
type Engine struct {
	// Action is the action container Self finds; its Name and ID are
	// what the phases label everything with.
	Action engine.Self
	// Images are the images present, by reference.
	Images map[string]bool
	// Exits scripts the runs of a container, by name: the exit code of
	// each start in turn; the last repeats. A container with none exits 0.
	// The containers Again makes from it count as it: their runs go on
	// its list, and take its name in what Follow says.
	Exits map[string][]int
	// Says is what a container's output holds, by name, for Output.
	Says map[string][]string
	// Users are the USER of images, by reference: a container of one
	// runs as it (none: root), as when the action's user is its image's,
	// and holds the action's capabilities only if it is root.
	Users map[string]string
	// Broken are images whose command is not there, by reference: a
	// container of one is created, and its start fails as Docker's does.
	Broken map[string]bool
	// Missing are host paths that are not there: creating a waiter that
	// binds one fails with an engine.MissingSourceError.
	Missing map[string]bool
	// Fail makes calls fail: the key is a call as Calls records it, such
	// as "Create user" or "Start x-waitdaemon-user"; the value is the
	// error. Lost makes the call do its work and then fail, as when its
	// answer never came: once, and the same call made again is answered.
	Fail map[string]error
	Lost map[string]error
	// Once scripts a call's answers in turn (nil: it works); once they
	// are spent, the call works.
	Once map[string][]error
	// ExitedAt is when the action container stopped (zero: now), and
	// ActionCode its exit code; ActionRemoved makes it gone before its
	// exit could be read, its code unknown.
	ExitedAt      time.Time
	ActionCode    int
	ActionRemoved bool
	// RemovedAfter is how long after its exit the worker removes the
	// action container (ActionGone); ActionKept: never.
	RemovedAfter time.Duration
	ActionKept   bool
	// PullTakes is how long a pull takes, unless its ctx ends first.
	PullTakes time.Duration
	// Block makes ActionExited (key "ActionExited"), Follow (key
	// "Follow <name>"), Start (key "Start <name>"), Stop (key
	// "Stop <name>") or Remove (key "Remove <name>") wait until ctx
	// ends, as a call to an engine that is gone and not back does.
	Block map[string]bool
	// After makes a call wait, before it does anything, until another
	// call has been made (key and value as Calls records them): it shows
	// that two calls overlap. One still waiting after a second fails.
	After map[string]string

	// Own is the container the waiter runs in, by name, whose hand-off
	// Handed reads; empty: the container Hand was last given.
	Own string

	mu         sync.Mutex
	calls      []string
	handed     map[string][]byte // what Hand left, by container ID
	lastHanded string
	containers map[string]*container // by ID
	removed    map[string]time.Time  // when Remove removed one, by ID and name
	pulls      []Pull
	sinces     map[string][]string
	next       int
	runs       map[string]int // by line: the starts of its containers
}

// Pull is one pull that was asked for.
type Pull struct {
	Image string
	Auth  *engine.Auth
	// Cut: its ctx ended before it was done.
	Cut bool
}

type container struct {
	id, name string
	labels   map[string]string
	create   any
	image    string
	command  []string // Want.Command
	starts   int
	tried    bool // a start was asked for, whether or not it started
	running  bool
	// line is the name of the container Again first made another of (its
	// own if none): the one Exits scripts.
	line string
	// run is its line's run its last start began (from 1), and code and
	// said that run's exit code and last line of output ("" for none).
	run   int
	code  int
	said  string
	files map[string]bool // the directories its runs made
	env   []string        // its environment, as Plan gave it
}

// Planned is the create request the fake plans: what the phases asked.
type Planned struct {
	Want   *engine.Want   `json:",omitempty"`
	Waiter *engine.Waiter `json:",omitempty"`
	// Env is the environment of a container planned from the action:
	// the action's, less waitdaemon's control variables.
	Env []string `json:",omitempty"`
}

// Exit is the command of a container that says "exiting CODE" last and
// exits code, unless Exits scripts its name.
func Exit(code int) []string { return []string{"fake-exit", strconv.Itoa(code)} }

// Sleep is the command of a container that runs until it is removed:
// Follow and ActionExited wait for it until their ctx ends.
func Sleep() []string { return []string{"fake-sleep"} }

// Mkdir is the command of a container that makes directory dir in its
// file system and exits code, or, if dir is there already, says so and
// exits 7, as a command that makes its mount point with mkdir(2).
func Mkdir(dir string, code int) []string {
	return []string{"fake-mkdir", dir, strconv.Itoa(code)}
}

// mkdirExitExists is the exit code of a Mkdir whose directory is there.
const mkdirExitExists = 7

// sleeps reports whether c runs until removed.
func (c *container) sleeps() bool { return len(c.command) == 1 && c.command[0] == "fake-sleep" }

// exitCode is the exit code of c's run n (from 1), by its command, and
// whether its command sets it.
func (c *container) exitCode() (int, bool) {
	if len(c.command) == 2 && c.command[0] == "fake-exit" {
		code, err := strconv.Atoi(c.command[1])
		return code, err == nil
	}
	if len(c.command) == 3 && c.command[0] == "fake-mkdir" {
		code, err := strconv.Atoi(c.command[2])
		return code, err == nil
	}
	return 0, false
}

// begin starts a run of c: its line's next, its exit code by the script,
// else by its command, which a Mkdir carries out in c's file system; mu
// is held.
func (e *Engine) begin(c *container) {
	if e.runs == nil {
		e.runs = map[string]int{}
	}
	c.starts++
	e.runs[c.line]++
	c.run = e.runs[c.line]
	code, says := c.exitCode()
	c.said = ""
	if says {
		c.said = fmt.Sprintf("exiting %d", code)
	}
	if c.command != nil && c.command[0] == "fake-mkdir" {
		if dir := c.command[1]; c.files[dir] {
			code, c.said = mkdirExitExists, fmt.Sprintf("mkdir %s: file exists", dir)
		} else {
			if c.files == nil {
				c.files = map[string]bool{}
			}
			c.files[dir] = true
		}
	}
	if codes := e.Exits[c.line]; len(codes) > 0 {
		code, c.said = codes[min(c.run, len(codes))-1], ""
	}
	c.code = code
}

// Calls returns the calls so far, in order, each as "Method subject".
func (e *Engine) Calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

// Pulls returns the pulls so far.
func (e *Engine) Pulls() []Pull {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.pulls)
}

// Sinces returns the since of each Follow of container name that went
// through, in order.
func (e *Engine) Sinces(name string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.sinces[name])
}

// Names returns the names of the containers there now, sorted.
func (e *Engine) Names() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, c := range e.containers {
		out = append(out, c.name)
	}
	slices.Sort(out)
	return out
}

// Add puts a container there, as an earlier run left it.
func (e *Engine) Add(name string, labels map[string]string, ran bool) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := e.newID()
	c := &container{id: id, name: name, labels: labels, line: name}
	if ran {
		c.starts = 1
	}
	e.containers[id] = c
	return id
}

// AddRunning puts a container there that runs: another action's waiter
// still waiting.
func (e *Engine) AddRunning(name string, labels map[string]string) string {
	id := e.Add(name, labels, true)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.containers[id].running = true
	return id
}

// call records a call and returns the error the test asked for, and
// whether the work is still to be done.
func (e *Engine) call(method, subject string) (err error, lost bool) {
	key := strings.TrimSpace(method + " " + subject)
	if err := e.waitFor(e.After[key]); err != nil {
		return fmt.Errorf("%s: %w", key, err), false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.containers == nil {
		e.containers = map[string]*container{}
	}
	e.calls = append(e.calls, key)
	if err := e.Fail[key]; err != nil {
		return err, false
	}
	if once := e.Once[key]; len(once) > 0 {
		e.Once[key] = once[1:]
		if once[0] != nil {
			return once[0], false
		}
	}
	gone := e.Lost[key]
	delete(e.Lost, key)
	return gone, true
}

// waitFor waits until call has been made, for a second at most.
func (e *Engine) waitFor(call string) error {
	for range 1000 {
		if call == "" || slices.Contains(e.Calls(), call) {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("waited a second for %q, which never came", call)
}

func (e *Engine) newID() string {
	if e.containers == nil {
		e.containers = map[string]*container{}
	}
	e.next++
	return fmt.Sprintf("%064x", e.next)
}

// find is the container with this ID or name; mu is held.
func (e *Engine) find(ref string) *container {
	if c, ok := e.containers[ref]; ok {
		return c
	}
	for _, c := range e.containers {
		if c.name == ref {
			return c
		}
	}
	return nil
}

func (e *Engine) String() string { return "the fake engine" }

func (e *Engine) Reach(context.Context) error {
	err, _ := e.call("Reach", "")
	return err
}

func (e *Engine) Self(_ context.Context, override string) (engine.Self, error) {
	if err, _ := e.call("Self", ""); err != nil {
		return engine.Self{}, err
	}
	if override != "" && override != e.Action.ID && override != e.Action.Name {
		return engine.Self{}, engine.InputError(fmt.Sprintf("cannot find this action's own container (tried: override %s): set WAITDAEMON_CONTAINER to its name or ID", override))
	}
	return e.Action, nil
}

// Inspect reads the action, or a container of the fake's, as the action.
func (e *Engine) Inspect(_ context.Context, name string) (engine.Self, error) {
	if err, _ := e.call("Inspect", name); err != nil {
		return engine.Self{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.find(name); c != nil {
		user := e.Users[c.image]
		return engine.Self{ID: c.id, Name: c.name, FoundBy: "plan --container", Env: e.Action.Env, User: user,
			HostPID: e.Action.HostPID, CanBoot: e.Action.CanBoot && inherit.Root(user)}, nil
	}
	if name != "" && name != e.Action.ID && name != e.Action.Name && e.Action.ID != "" {
		return engine.Self{}, fmt.Errorf("inspecting container %s: no such container", name)
	}
	return e.Action, nil
}

func (e *Engine) List(_ context.Context, label, value string) ([]engine.Container, error) {
	if err, _ := e.call("List", label+"="+value); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []engine.Container
	for _, id := range slices.Sorted(maps.Keys(e.containers)) {
		c := e.containers[id]
		if c.labels[label] == value {
			state := "created"
			switch {
			case c.running:
				state = "running"
			case c.starts > 0:
				state = "exited"
			}
			out = append(out, engine.Container{ID: c.id, Name: c.name, Labels: c.labels, Ran: c.starts > 0 || c.tried, Running: c.running, State: state})
		}
	}
	return out, nil
}

func (e *Engine) Keep(_ context.Context, c engine.Container, name string) (string, error) {
	err, do := e.call("Keep", c.Name)
	if !do {
		return "", err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if got := e.find(c.ID); got != nil {
		got.name = name
	}
	if err != nil {
		return "", err
	}
	return name, nil
}

func (e *Engine) Remove(ctx context.Context, id string) error {
	err, do := e.call("Remove", e.nameOf(id))
	if e.Block["Remove "+e.nameOf(id)] {
		<-ctx.Done()
		return ctx.Err()
	}
	if err == nil && ctx.Err() != nil { // as a request on an ended context
		return ctx.Err()
	}
	if do {
		e.mu.Lock()
		if c := e.find(id); c != nil {
			delete(e.containers, c.id)
			if e.removed == nil {
				e.removed = map[string]time.Time{}
			}
			now := time.Now()
			e.removed[c.id], e.removed[c.name] = now, now
		}
		e.mu.Unlock()
	}
	return err
}

// nameOf names a container for the call log: its name, if it has one.
func (e *Engine) nameOf(ref string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.containers != nil {
		if c := e.find(ref); c != nil {
			return c.name
		}
	}
	return ref
}

func (e *Engine) HasImage(_ context.Context, ref imageref.Ref) (bool, error) {
	if err, _ := e.call("HasImage", ref.String()); err != nil {
		return false, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.Images[ref.String()], nil
}

func (e *Engine) Pull(ctx context.Context, ref imageref.Ref, auth *engine.Auth, progress func(done, total int64)) error {
	err, do := e.call("Pull", ref.String())
	if do {
		progress(1, 2)
		cut := !engine.Sleep(ctx, e.PullTakes)
		e.mu.Lock()
		e.pulls = append(e.pulls, Pull{ref.String(), auth, cut})
		e.mu.Unlock()
		if cut {
			return fmt.Errorf("pulling %s: %w", ref, ctx.Err())
		}
		progress(2, 2)
	}
	return err
}

func (e *Engine) Plan(_ context.Context, self engine.Self, want engine.Want) (engine.Spec, error) {
	if err, _ := e.call("Plan", want.Name); err != nil {
		return engine.Spec{}, err
	}
	var env []string
	control := inherit.Control(self.Env)
	for _, kv := range self.Env {
		if name, _, _ := strings.Cut(kv, "="); !control[name] {
			env = append(env, kv)
		}
	}
	return engine.Spec{Name: want.Name, Create: &Planned{Want: &want, Env: env}}, nil
}

func (e *Engine) PlanWaiter(_ engine.Self, want engine.Waiter) engine.Spec {
	e.call("PlanWaiter", want.Name)
	return engine.Spec{Name: want.Name, Create: &Planned{Waiter: &want}}
}

func (e *Engine) Create(_ context.Context, spec engine.Spec) (string, error) {
	err, do := e.call("Create", spec.Name)
	if !do {
		return "", err
	}
	p := spec.Create.(*Planned)
	labels := map[string]string{}
	c := &container{name: spec.Name, create: spec.Create, line: spec.Name}
	if p.Want != nil {
		labels = p.Want.Labels
		c.image, c.command, c.env = p.Want.Image.String(), p.Want.Command, p.Env
	} else if p.Waiter != nil {
		labels = p.Waiter.Labels
		c.env = p.Waiter.Env
		if b := p.Waiter.Bind; e.Missing[b.Host] {
			return "", &engine.MissingSourceError{Source: b.Host, Target: b.Container,
				Err: fmt.Errorf("creating %s: bind source path does not exist: %s", spec.Name, b.Host)}
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if there := e.find(spec.Name); there != nil {
		// Called again, as after a lost answer: its own container.
		if there.create != spec.Create {
			return "", fmt.Errorf("creating %s: the name is taken", spec.Name)
		}
		if err != nil {
			return "", err
		}
		return there.id, nil
	}
	id := e.newID()
	c.id, c.labels = id, labels
	e.containers[id] = c
	if err != nil {
		return "", err
	}
	return id, nil
}

// Again makes a fresh container from first's create, image and command,
// with first's labels and an empty file system, of first's line.
func (e *Engine) Again(_ context.Context, first, name string) (string, error) {
	err, do := e.call("Again", name)
	if !do {
		return "", err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.find(first)
	if f == nil {
		return "", fmt.Errorf("making %s from %s: no such container", name, first)
	}
	if there := e.find(name); there != nil {
		// Called again, as after a lost answer: its own container.
		if there.line != f.line || there.create != f.create || !maps.Equal(there.labels, f.labels) {
			return "", fmt.Errorf("creating %s: the name is taken", name)
		}
		if err != nil {
			return "", err
		}
		return there.id, nil
	}
	c := &container{
		id: e.newID(), name: name, labels: maps.Clone(f.labels), create: f.create,
		image: f.image, command: f.command, line: f.line, env: slices.Clone(f.env),
	}
	e.containers[c.id] = c
	if err != nil {
		return "", err
	}
	return c.id, nil
}

// Env is the environment container ref (a name or an ID) was made with;
// nil for one that is not there.
func (e *Engine) Env(ref string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.find(ref); c != nil {
		return slices.Clone(c.env)
	}
	return nil
}

func (e *Engine) Start(ctx context.Context, id string) error {
	err, do := e.call("Start", e.nameOf(id))
	if e.Block["Start "+e.nameOf(id)] {
		<-ctx.Done()
		return fmt.Errorf("starting %s: %w", id, ctx.Err())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.find(id)
	if c == nil {
		return fmt.Errorf("starting %s: no such container", id)
	}
	c.tried = true
	if e.Broken[c.image] {
		return fmt.Errorf("starting %s: exec: \"/no-such-binary\": stat /no-such-binary: no such file or directory", c.name)
	}
	if do {
		e.begin(c)
		c.running = true
		if _, ok := c.exitCode(); ok {
			c.running = false // it ran, and has exited
		}
	}
	return err
}

// Stop ends a container's run: one that runs until removed (Sleep) no
// longer does; one that has exited, or never ran, is as it was.
func (e *Engine) Stop(ctx context.Context, id string) error {
	err, do := e.call("Stop", e.nameOf(id))
	if e.Block["Stop "+e.nameOf(id)] {
		<-ctx.Done()
		return fmt.Errorf("stopping %s: %w", id, ctx.Err())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.find(id)
	if c == nil {
		return fmt.Errorf("stopping %s: no such container", id)
	}
	if do && c.running {
		// Killed, as a stop with no grace kills it: its run ends, and
		// Follow reads 137 (128 + SIGKILL).
		if c.sleeps() {
			c.command = nil
		}
		c.running, c.code, c.said = false, 137, ""
	}
	return err
}

// Describe names what Follow will: "image-of-<name>", run <name>.
func (e *Engine) Describe(_ context.Context, id string) (string, []string, error) {
	name := e.nameOf(id)
	if err, _ := e.call("Describe", name); err != nil {
		return "", nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.find(id) == nil {
		return "", nil, fmt.Errorf("inspecting %s: no such container", id)
	}
	return "image-of-" + name, []string{"run", name}, nil
}

// Hand leaves data with container id, for Handed.
func (e *Engine) Hand(_ context.Context, id string, data []byte) error {
	err, do := e.call("Hand", e.nameOf(id))
	if !do {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.find(id)
	if c == nil {
		return fmt.Errorf("handing %s: no such container", id)
	}
	if e.handed == nil {
		e.handed = map[string][]byte{}
	}
	e.handed[c.id], e.lastHanded = slices.Clone(data), c.id
	return err
}

// Handed returns what Hand left with Own, or with the container it was
// last given; nil when nothing, or when that container is gone.
func (e *Engine) Handed(context.Context) ([]byte, error) {
	if err, _ := e.call("Handed", ""); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	id := e.lastHanded
	if e.Own != "" {
		id = ""
		if c := e.find(e.Own); c != nil {
			id = c.id
		}
	}
	if e.find(id) == nil {
		return nil, nil
	}
	return slices.Clone(e.handed[id]), nil
}

func (e *Engine) Output(ctx context.Context, id string, w io.Writer) error {
	name := e.nameOf(id)
	if err, _ := e.call("Output", name); err != nil {
		return err
	}
	e.mu.Lock()
	says := slices.Clone(e.Says[name])
	e.mu.Unlock()
	for _, line := range says {
		if ctx.Err() != nil {
			return nil
		}
		if _, err := io.WriteString(w, line+"\n"); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) ActionExited(ctx context.Context, id string) (engine.Exit, error) {
	if err, _ := e.call("ActionExited", ""); err != nil {
		return engine.Exit{}, err
	}
	if id != e.Action.ID && id != e.Action.Name {
		return e.exited(ctx, id)
	}
	if e.Block["ActionExited"] {
		<-ctx.Done()
		return engine.Exit{At: time.Now()}, nil
	}
	at := e.ExitedAt
	if at.IsZero() {
		at = time.Now()
	}
	if e.ActionRemoved {
		return engine.Exit{At: at, Removed: true}, nil
	}
	return engine.Exit{At: at, Code: e.ActionCode, Known: true}, nil
}

// ActionGone is not among Calls: it only looks.
func (e *Engine) ActionGone(ctx context.Context, id string, by time.Time) (time.Time, bool) {
	if id != e.Action.ID && id != e.Action.Name {
		// A container the fake made: gone once removed, when it was,
		// as an engine's events say.
		at, gone := engine.WaitGone(ctx, by, nil, func(context.Context) bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			return e.find(id) == nil
		})
		e.mu.Lock()
		defer e.mu.Unlock()
		if t, ok := e.removed[id]; ok && gone {
			at = t
		}
		return at, gone
	}
	if e.ActionKept {
		engine.Sleep(ctx, time.Until(by))
		return time.Now(), false
	}
	at := e.ExitedAt
	if at.IsZero() {
		at = time.Now()
	}
	at = at.Add(e.RemovedAfter)
	if at.After(by) {
		engine.Sleep(ctx, time.Until(by))
		return time.Now(), false
	}
	if !engine.Sleep(ctx, time.Until(at)) {
		return time.Now(), false
	}
	return at, true
}

// exited is ActionExited of a container the fake made: gone, it counts as
// removed; one that runs until removed, or was never started, is waited
// for until ctx ends; one that ran has exited as its command says.
func (e *Engine) exited(ctx context.Context, id string) (engine.Exit, error) {
	e.mu.Lock()
	c := e.find(id)
	var code int
	var waits bool
	if c != nil {
		code, _ = c.exitCode()
		waits = c.sleeps() || c.starts == 0
		if c.starts > 0 {
			code = c.code
		}
	}
	e.mu.Unlock()
	switch {
	case c == nil:
		return engine.Exit{At: time.Now(), Removed: true}, nil
	case waits:
		<-ctx.Done()
		return engine.Exit{At: time.Now()}, nil
	}
	return engine.Exit{At: time.Now(), Code: code, Known: true}, nil
}

func (e *Engine) Follow(ctx context.Context, id string, sent time.Time, tail int, since string) (engine.Run, error) {
	name := e.nameOf(id)
	if err, _ := e.call("Follow", name); err != nil {
		return engine.Run{}, err
	}
	e.mu.Lock()
	c := e.find(id)
	sleeps := c != nil && c.sleeps()
	e.mu.Unlock()
	if e.Block["Follow "+name] || sleeps {
		<-ctx.Done()
		return engine.Run{}, ctx.Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if c = e.find(id); c == nil {
		return engine.Run{}, fmt.Errorf("following %s: no such container", id)
	}
	c.running = false
	if e.sinces == nil {
		e.sinces = map[string][]string{}
	}
	e.sinces[name] = append(e.sinces[name], since)
	run := engine.Run{
		ExitCode: c.code, Image: "image-of-" + c.line, Command: []string{"run", c.line},
		StartedAt: sent.UTC().Format(time.RFC3339Nano), FinishedAt: sent.Add(time.Millisecond).UTC().Format(time.RFC3339Nano),
	}
	lines := []string{fmt.Sprintf("%s run %d line 1", c.line, c.run), fmt.Sprintf("%s run %d line 2", c.line, c.run)}
	if c.said != "" {
		lines[1] = c.said
	}
	run.Output = append(run.Output, lines[2-min(tail, 2):]...)
	return run, nil
}
