// Package fake is an engine (package engine) held in memory, for unit
// tests of the phases: it keeps containers in a map, records every call
// in order, fails the calls a test asks it to, and runs each container to
// the exit codes the test scripts. It needs no engine, and has no clock of
// its own but the action's exit time.
package fake

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
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
	Exits map[string][]int
	// Says is what a container's output holds, by name, for Output.
	Says map[string][]string
	// Fail makes calls fail: the key is a call as Calls records it, such
	// as "Create user" or "Start x-waitdaemon-user"; the value is the
	// error. Lost makes the call do its work and then fail, as when its
	// answer never came.
	Fail map[string]error
	Lost map[string]error
	// ExitedAt is when the action container stopped (zero: now), and
	// ActionCode its exit code; ActionRemoved makes it gone before its
	// exit could be read, its code unknown.
	ExitedAt      time.Time
	ActionCode    int
	ActionRemoved bool
	// Block makes ActionExited (key "ActionExited") or Follow (key
	// "Follow <name>") wait until ctx ends.
	Block map[string]bool
	// After makes a call wait, before it does anything, until another
	// call has been made (key and value as Calls records them): it shows
	// that two calls overlap. One still waiting after a second fails.
	After map[string]string

	mu         sync.Mutex
	calls      []string
	containers map[string]*container // by ID
	pulls      []Pull
	next       int
}

// Pull is one pull that was asked for.
type Pull struct {
	Image string
	Auth  *engine.Auth
}

type container struct {
	id, name string
	labels   map[string]string
	create   any
	starts   int
	tried    bool // a start was asked for, whether or not it started
	running  bool
}

// Planned is the create request the fake plans: what the phases asked.
type Planned struct {
	Want   *engine.Want   `json:",omitempty"`
	Waiter *engine.Waiter `json:",omitempty"`
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
	c := &container{id: id, name: name, labels: labels}
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
	return e.Lost[key], true
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

func (e *Engine) Self(context.Context, string) (engine.Self, error) {
	if err, _ := e.call("Self", ""); err != nil {
		return engine.Self{}, err
	}
	return e.Action, nil
}

func (e *Engine) Inspect(_ context.Context, name string) (engine.Self, error) {
	if err, _ := e.call("Inspect", name); err != nil {
		return engine.Self{}, err
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
	if err, _ := e.call("Keep", c.Name); err != nil {
		return "", err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if got := e.find(c.ID); got != nil {
		got.name = name
	}
	return name, nil
}

func (e *Engine) Remove(ctx context.Context, id string) error {
	err, do := e.call("Remove", e.nameOf(id))
	if err == nil && ctx.Err() != nil { // as a request on an ended context
		return ctx.Err()
	}
	if do {
		e.mu.Lock()
		if c := e.find(id); c != nil {
			delete(e.containers, c.id)
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

func (e *Engine) Pull(_ context.Context, ref imageref.Ref, auth *engine.Auth, progress func(done, total int64)) error {
	err, do := e.call("Pull", ref.String())
	if do {
		e.mu.Lock()
		e.pulls = append(e.pulls, Pull{ref.String(), auth})
		e.mu.Unlock()
		progress(1, 2)
		progress(2, 2)
	}
	return err
}

func (e *Engine) Plan(_ context.Context, _ engine.Self, want engine.Want) (engine.Spec, error) {
	if err, _ := e.call("Plan", want.Name); err != nil {
		return engine.Spec{}, err
	}
	return engine.Spec{Name: want.Name, Create: &Planned{Want: &want}}, nil
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
	if p.Want != nil {
		labels = p.Want.Labels
	} else if p.Waiter != nil {
		labels = p.Waiter.Labels
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.find(spec.Name) != nil {
		return "", fmt.Errorf("creating %s: the name is taken", spec.Name)
	}
	id := e.newID()
	e.containers[id] = &container{id: id, name: spec.Name, labels: labels, create: spec.Create}
	if err != nil {
		return "", err
	}
	return id, nil
}

func (e *Engine) Start(_ context.Context, id string) error {
	err, do := e.call("Start", e.nameOf(id))
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.find(id)
	if c == nil {
		return fmt.Errorf("starting %s: no such container", id)
	}
	c.tried = true
	if do {
		c.starts++
		c.running = true
	}
	return err
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

func (e *Engine) Follow(ctx context.Context, id string, sent time.Time, tail int, since string) (engine.Run, error) {
	name := e.nameOf(id)
	if err, _ := e.call("Follow", name); err != nil {
		return engine.Run{}, err
	}
	if e.Block["Follow "+name] {
		<-ctx.Done()
		return engine.Run{}, ctx.Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.find(id)
	if c == nil {
		return engine.Run{}, fmt.Errorf("following %s: no such container", id)
	}
	c.running = false
	codes := e.Exits[name]
	code := 0
	if len(codes) > 0 {
		code = codes[min(c.starts, len(codes))-1]
	}
	run := engine.Run{
		ExitCode: code, Image: "image-of-" + name, Command: []string{"run", name},
		StartedAt: sent.UTC().Format(time.RFC3339Nano), FinishedAt: sent.Add(time.Millisecond).UTC().Format(time.RFC3339Nano),
	}
	for i := range min(tail, 2) {
		run.Output = append(run.Output, fmt.Sprintf("%s run %d line %d", name, c.starts, i+1))
	}
	return run, nil
}
