package phase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/inherit"
	"github.com/waitdaemon/waitdaemon/internal/redact"
)

// minSafeWait is the shortest wait that leaves the worker time to report
// the action's success: it does so 60 to 160 ms after the action's exit,
// after removing the action's container, and a server stalled for a
// second would let the user container's reboot come first.
const minSafeWait = 2

// Handoff is phase 1's plan and what it made of it: it is the dry run's
// output, the hand-off line, and the list of what to remove after a
// failure.
type Handoff struct {
	Action   containerRef `json:"action"`
	FoundBy  string       `json:"found_by"`
	Pull     []pullPlan   `json:"pull"`
	Wait     int          `json:"wait_seconds"`
	User     engine.Spec  `json:"user_container"`
	Fallback *engine.Spec `json:"fallback_container,omitempty"`
	Waiter   engine.Spec  `json:"waiter"`
	TookMS   int64        `json:"took_ms,omitempty"`

	// inAction: this process runs in the action, and sees its files.
	inAction bool
}

type containerRef struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// One is phase 1, run as the action container: validate the inputs,
// reach the engine, find ourselves, clear an earlier run's leftovers,
// then hand off (handOff) and log it. After a failure it removes what it
// made.
func One(ctx context.Context, eng engine.Engine, in Inputs, o Options) (err error) {
	began := time.Now()
	s, err := in.Validate()
	if err != nil {
		return err
	}
	if err := s.findResultDevice(); err != nil {
		return err
	}
	self, err := reachSelf(ctx, eng, s)
	if err != nil {
		return err
	}
	h := newHandoff(eng, self, s, o.Verbose)
	h.inAction = true
	if s.DryRun {
		if err := h.plan(ctx, eng, s, self); err != nil {
			return err
		}
		return h.print(o.Stdout)
	}
	if s.Wait < minSafeWait {
		logEvent(o.Stdout, "warning: a wait below 2 seconds can let the user container (a reboot) come before the workflow's success is recorded",
			map[string]any{"variable": inherit.WaitSeconds.Name(in.Env), "wait_seconds": s.Wait})
	}
	if err := clearLeftovers(ctx, eng, self, o.Stdout); err != nil {
		return err
	}
	if err := h.handOff(ctx, eng, s, self, o); err != nil {
		h.undo(eng, o.Stderr)
		return err
	}
	h.TookMS = time.Since(began).Milliseconds()
	logEvent(o.Stdout, "handed off", h)
	return nil
}

// handOff creates and starts the waiter while it creates the user
// container (and the fallback), pulling their images if needed; then
// confirms the result file, and meanwhile hands the waiter what the two
// will run (handRuns), for the result it writes before each run. The
// waiter needs only the names of what it will start, so the two go at
// once: they are the slowest steps (on containerd each create is a
// runtime's create). The waiter's failure
// cuts the pull short (a missing result directory does not wait out a big
// image), and is the hand-off's error; a create is never cut short, as
// the engine may make it after phase 1 has undone what it knew of.
func (h *Handoff) handOff(ctx context.Context, eng engine.Engine, s Settings, self engine.Self, o Options) error {
	pulls, cut := context.WithCancelCause(ctx)
	defer cut(nil)
	waiter := make(chan error, 1)
	go func() {
		err := h.createWaiter(ctx, eng, s.ResultFile)
		if err != nil {
			cut(err)
		}
		waiter <- err
	}()
	err := h.createUser(ctx, pulls, eng, s, self, o.Stdout)
	if err = errors.Join(<-waiter, err); err != nil {
		if first := context.Cause(pulls); ctx.Err() == nil && first != nil {
			return first
		}
		return err
	}
	if s.ResultFile != "" {
		// The waiter's answer waits for its start; the hand-over goes
		// meanwhile.
		handed := make(chan error, 1)
		go func() { handed <- h.handRuns(ctx, eng) }()
		err := h.confirmResultFile(ctx, eng, s)
		if herr := <-handed; herr != nil {
			logEvent(o.Stdout, "could not hand the waiter what its containers will run; it asks the engine during the wait", map[string]string{"error": herr.Error()})
		}
		if err != nil {
			return err
		}
	}
	// Made: the hand-off line shows names and IDs, not create requests.
	h.User.Create, h.Waiter.Create = nil, nil
	if h.Fallback != nil {
		h.Fallback.Create = nil
	}
	return nil
}

// handRuns hands the waiter what the user container and the fallback, as
// the engine made them, will run (engine.Describer, engine.Hander): the
// waiter names it in the result it writes before each run, however short
// the wait. What it cannot say is left out, and the waiter asks the
// engine for it during the wait, if there is time.
func (h *Handoff) handRuns(ctx context.Context, eng engine.Engine) error {
	d, canDescribe := eng.(engine.Describer)
	hd, canHand := eng.(engine.Hander)
	if !canDescribe || !canHand {
		return nil
	}
	runs := handedRuns{}
	var errs []error
	for _, spec := range []*engine.Spec{&h.User, h.Fallback} {
		if spec == nil {
			continue
		}
		image, command, err := d.Describe(ctx, spec.ID)
		if err != nil {
			errs = append(errs, fmt.Errorf("learning what %s will run: %w", spec.Name, err))
			continue
		}
		runs[spec.Name] = plannedRun{Image: image, Command: command}
	}
	if len(runs) > 0 {
		data, err := json.Marshal(runs)
		if err == nil {
			err = hd.Hand(ctx, h.Waiter.ID, data)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Plan is the dry run for any container taken as the action, with the
// settings read from its own environment: plan --container.
func Plan(ctx context.Context, eng engine.Engine, container string, o Options) error {
	self, err := eng.Inspect(ctx, container)
	if err != nil {
		return err
	}
	s, err := ReadInputs(self.Env).Validate()
	if err == nil {
		err = s.findResultDevice()
	}
	if err == nil {
		err = canGoDown(s, self)
	}
	if err != nil {
		return fmt.Errorf("container %s as an action: %w", container, err)
	}
	h := newHandoff(eng, self, s, o.Verbose)
	if err := h.plan(ctx, eng, s, self); err != nil {
		return err
	}
	return h.print(o.Stdout)
}

// reachSelf reaches the engine and finds the action's own container,
// one from which the run can do what the settings ask of it.
func reachSelf(ctx context.Context, eng engine.Engine, s Settings) (engine.Self, error) {
	if err := eng.Reach(ctx); err != nil {
		return engine.Self{}, err
	}
	self, err := eng.Self(ctx, s.Container)
	if err != nil {
		return engine.Self{}, err
	}
	return self, canGoDown(s, self)
}

// canGoDown refuses a run that must take the machine down
// (WAITDAEMON_DOWN_WITHIN) from an action whose user container and
// fallback, planned from it, could not: outside the host's pid
// namespace, or without CAP_SYS_BOOT. Such a run would exit 0, the
// workflow read success, and the machine stay up: no retry or fallback
// helps, as they have the same settings. It is checked before anything
// is made; what the two containers run as is checked once they are made
// (madeCanGoDown).
func canGoDown(s Settings, self engine.Self) error {
	if s.DownWithin == 0 {
		return nil
	}
	v := strconv.Itoa(s.DownWithin)
	switch {
	case !self.HostPID:
		return bad("WAITDAEMON_DOWN_WITHIN", v, "an action that shares the host's pid namespace, to take the machine down: set `pid: host` on the action (every Tinkerbell release reads it; namespaces.pid only v0.25 and later). "+
			"The user container and the fallback have the action's; in a pid namespace of their own, kill 1 signals their own init, reboot -f ends only that namespace and a kexec fails with EINVAL")
	case !self.CanBoot && !inherit.Root(self.User):
		return bad("WAITDAEMON_DOWN_WITHIN", v, fmt.Sprintf("an action that runs as root, to take the machine down: it runs as user %q, which the user container and the fallback then run as, "+
			"and a process other than root has no effective capabilities after its exec, so reboot(2) fails with EPERM (reboot -f, poweroff -f, a kexec). Run the action as root", self.User))
	case !self.CanBoot:
		return bad("WAITDAEMON_DOWN_WITHIN", v, "an action that holds CAP_SYS_BOOT, to take the machine down: make it privileged, as Tinkerbell's workers do, or add SYS_BOOT to its capabilities, in the host's user namespace. "+
			"The user container and the fallback have the action's capabilities; without CAP_SYS_BOOT, reboot(2) fails (reboot -f, poweroff -f, a kexec)")
	}
	return nil
}

// madeCanGoDown refuses a run that must take the machine down where the
// user container or the fallback, as the engine made them, cannot: each
// runs as its image's USER where the action set no user of its own, and
// a process other than root has no effective capabilities after its
// exec. What a container runs as is known once it is made: Docker gives
// it its image's USER at the create, containerd's plan reads the image,
// pulled or not.
func (h *Handoff) madeCanGoDown(ctx context.Context, eng engine.Engine, s Settings) error {
	if s.DownWithin == 0 {
		return nil
	}
	v := strconv.Itoa(s.DownWithin)
	made := []struct {
		role, image string
		spec        *engine.Spec
	}{{RoleUser, s.Image.String(), &h.User}}
	if h.Fallback != nil {
		made = append(made, struct {
			role, image string
			spec        *engine.Spec
		}{RoleFallback, s.FallbackImage.String(), h.Fallback})
	}
	for _, m := range made {
		c, err := eng.Inspect(ctx, m.spec.ID)
		if err != nil {
			return fmt.Errorf("reading the %s container as made, for WAITDAEMON_DOWN_WITHIN: %w", m.role, err)
		}
		what := fmt.Sprintf("%s (%s)", m.spec.Name, m.image)
		switch {
		case !c.HostPID:
			return bad("WAITDAEMON_DOWN_WITHIN", v, fmt.Sprintf("a %s container that shares the host's pid namespace, to take the machine down: %s has a pid namespace of its own. Set `pid: host` on the action", m.role, what))
		case !c.CanBoot && !inherit.Root(c.User):
			return bad("WAITDAEMON_DOWN_WITHIN", v, fmt.Sprintf("a %s container that runs as root, to take the machine down: %s runs as user %q, its image's USER where the action sets no user; "+
				"a process other than root has no effective capabilities after its exec, so reboot(2) fails with EPERM (reboot -f, poweroff -f, a kexec). Use an image that runs as root (USER root or 0, or none)", m.role, what, c.User))
		case !c.CanBoot:
			return bad("WAITDAEMON_DOWN_WITHIN", v, fmt.Sprintf("a %s container that holds CAP_SYS_BOOT, to take the machine down: %s does not. Make the action privileged, or add SYS_BOOT to its capabilities", m.role, what))
		}
	}
	return nil
}

// newHandoff names what phase 1 will make, and plans the waiter.
func newHandoff(eng engine.Engine, self engine.Self, s Settings, verbose bool) *Handoff {
	h := &Handoff{
		Action:  containerRef{self.ID, self.Name},
		FoundBy: self.FoundBy,
		Wait:    s.Wait,
		User:    engine.Spec{Name: containerName(self.Name, RoleUser)},
		Waiter:  engine.Spec{Name: containerName(self.Name, RoleWaiter)},
	}
	if s.FallbackImage != nil {
		h.Fallback = &engine.Spec{Name: containerName(self.Name, RoleFallback)}
	}
	args := WaiterArgs{
		UserContainer:   h.User.Name,
		ActionContainer: self.ID,
		ActionName:      self.Name,
		WaitSeconds:     s.Wait,
		Retries:         s.Retries,
		DownWithin:      s.DownWithin,
		LogTail:         s.LogTail,
		UserImage:       s.Image.String(),
	}
	if h.Fallback != nil {
		args.FallbackContainer = h.Fallback.Name
		args.FallbackImage = s.FallbackImage.String()
	}
	want := engine.Waiter{Name: h.Waiter.Name, Labels: labels(RoleWaiter, self.Name, self.ID)}
	resultTarget(s, &want, &args)
	if verbose {
		want.Env = append(want.Env, "WAITDAEMON_VERBOSE=true")
	}
	want.Args = args.Args()
	h.Waiter = eng.PlanWaiter(self, want)
	return h
}

// resultTarget gives the waiter what it needs to write the result file,
// if s has one: the device it is on, or its directory bound in.
func resultTarget(s Settings, want *engine.Waiter, args *WaiterArgs) {
	switch {
	case s.ResultDevice != "":
		want.Device = &s.device
		args.ResultFile, args.ResultDevice = s.ResultFile, s.ResultDevice
	case s.ResultFile != "":
		want.Bind = engine.Bind{Host: path.Dir(s.ResultFile), Container: ResultDir}
		args.ResultFile = path.Join(ResultDir, path.Base(s.ResultFile))
	}
}

// plan decides the pulls and plans the user and fallback containers from
// the action. It creates nothing.
func (h *Handoff) plan(ctx context.Context, eng engine.Engine, s Settings, self engine.Self) error {
	h.Pull = nil
	for _, img := range s.Images() {
		p, err := decidePull(ctx, eng, s, img)
		if err != nil {
			return err
		}
		h.Pull = append(h.Pull, p)
	}
	withhold := h.withheld(s.RegistryConfig)
	user, err := eng.Plan(ctx, self, engine.Want{
		Name: h.User.Name, Image: s.Image, Labels: labels(RoleUser, self.Name, self.ID),
		Withhold: withhold,
	})
	if err != nil {
		return err
	}
	h.User = user
	if h.Fallback != nil {
		// The fallback has the user container's settings, its own image
		// and command, and that image's entrypoint; its image set without
		// a command runs its own ENTRYPOINT and CMD, not the action's.
		fb, err := eng.Plan(ctx, self, engine.Want{
			Name: h.Fallback.Name, Image: *s.FallbackImage, Labels: labels(RoleFallback, self.Name, self.ID),
			Command: s.FallbackCommand, ImageDefault: s.FallbackCommand == nil, Withhold: withhold,
		})
		if err != nil {
			return err
		}
		h.Fallback = &fb
	}
	return nil
}

// withheld is what the user container does not get of the action's
// files: the registry config stays with the action, its credentials were
// for this pull, not for the user container. One the action does not
// have holds none, and is left alone: hidden under a tmpfs, it would be
// made on the host through the bind of a parent directory, or fail the
// start under a read-only one. Another container's files cannot be seen
// (plan --container): its config is withheld.
func (h *Handoff) withheld(registryConfig string) []string {
	if _, err := os.Stat(registryConfig); h.inAction && errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return []string{registryConfig}
}

// print is the dry run's output: the plan as indented JSON, with the
// values of secret-looking variables redacted as in the trace.
func (h *Handoff) print(w io.Writer) error {
	data, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", redact.Secrets(data))
	return err
}

// clearLeftovers makes room for this run of the action: an earlier run's
// waiter is removed (there are never two), its user or fallback container
// (a re-run's user container too) that was never started is removed, and
// one that ran, or whose start failed, is kept, out of the way. One kept
// by a run before that already has a name of its own, and stays as it is.
func clearLeftovers(ctx context.Context, eng engine.Engine, self engine.Self, out io.Writer) error {
	earlier, err := eng.List(ctx, LabelAction, self.Name)
	if err != nil {
		return err
	}
	for _, e := range earlier {
		role := e.Labels[LabelRole]
		own := e.Name == containerName(self.Name, role) || role == RoleUser && isAttemptName(containerName(self.Name, role), e.Name)
		if role != RoleWaiter && !own {
			continue
		}
		if role == RoleWaiter || !e.Ran {
			if err := eng.Remove(ctx, e.ID); err != nil {
				return fmt.Errorf("removing an earlier run's %s: %w", e.Name, err)
			}
			logEvent(out, "removed an earlier run's container", map[string]string{"name": e.Name, "role": role, "state": e.State})
			continue
		}
		kept, err := eng.Keep(ctx, e, e.Name+"-"+shortID(e.Labels[LabelActionID]))
		if err != nil {
			return fmt.Errorf("keeping an earlier run's %s: %w", e.Name, err)
		}
		logEvent(out, "kept an earlier run's container under a new name", map[string]string{"name": kept, "role": role, "state": e.State})
	}
	return nil
}

func shortID(id string) string { return id[:min(12, len(id))] }

// createUser pulls what the plan says to, within pulls, then creates the
// user container (and the fallback), not started: the operator's
// settings fail now, while the worker still listens.
func (h *Handoff) createUser(ctx, pulls context.Context, eng engine.Engine, s Settings, self engine.Self, out io.Writer) error {
	if err := h.plan(ctx, eng, s, self); err != nil {
		return err
	}
	for _, p := range h.Pull {
		if p.Decision == decisionPull {
			if err := pull(pulls, eng, s, p.ref, out); err != nil {
				return err
			}
		}
	}
	if err := context.Cause(pulls); err != nil {
		return err // the waiter failed, or ctx ended: nothing more to make
	}
	for _, spec := range []*engine.Spec{&h.User, h.Fallback} {
		if spec == nil {
			continue
		}
		id, err := eng.Create(ctx, *spec)
		if err != nil {
			return err
		}
		spec.ID = id
	}
	return h.madeCanGoDown(ctx, eng, s)
}

// createWaiter creates the waiter and starts it.
func (h *Handoff) createWaiter(ctx context.Context, eng engine.Engine, resultFile string) (err error) {
	if h.Waiter.ID, err = eng.Create(ctx, h.Waiter); err != nil {
		return missingResultDir(err, resultFile)
	}
	return eng.Start(ctx, h.Waiter.ID)
}

// confirmResultFile waits for the waiter to say whether it can write the
// result file, on the host or on the result device, which only it can
// see or mount.
func (h *Handoff) confirmResultFile(ctx context.Context, eng engine.Engine, s Settings) error {
	file, where := s.ResultFile, "on the host"
	if s.ResultDevice != "" {
		where = "on WAITDAEMON_RESULT_DEVICE=" + s.ResultDevice
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var answer struct{ Msg, Error string }
	lines := &lineWriter{line: func(l []byte) {
		var e struct{ Msg, Error string }
		if json.Unmarshal(l, &e) == nil && (e.Msg == msgResultWritable || e.Msg == msgResultUnwritable) {
			answer = e
			cancel()
		}
	}}
	err := eng.Output(ctx, h.Waiter.ID, lines)
	switch {
	case answer.Msg == msgResultWritable:
		return nil
	case answer.Msg == msgResultUnwritable:
		return bad("WAITDAEMON_RESULT_FILE", file, "a file the waiter can write "+where+" ("+answer.Error+")")
	case err == nil:
		err = errors.New("it ended without a word")
	}
	return fmt.Errorf("the waiter did not say whether it can write WAITDAEMON_RESULT_FILE=%q: %w", file, err)
}

// missingResultDir is the bad input of a result file whose directory the
// host lacks, which the engine found at the waiter's create; other errors
// pass as they are. Nothing makes the directory: one made on the host's
// in-memory root would lose the result at the reboot.
func missingResultDir(err error, file string) error {
	var missing *engine.MissingSourceError
	if file == "" || !errors.As(err, &missing) || missing.Source != path.Dir(file) {
		return err
	}
	return bad("WAITDAEMON_RESULT_FILE", file, "a file in a directory the host has; the host has no "+missing.Source+" (mount the disk first, or create the directory)")
}

// lineWriter calls line with each whole line written to it.
type lineWriter struct {
	buf  []byte
	line func([]byte)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := slices.Index(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.line(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

// undo removes, after a failed hand-off and whatever ctx has become, what
// phase 1 knows it made, and whatever else carries this action's ID: a
// create whose answer never came may still have happened.
func (h *Handoff) undo(eng engine.Engine, errOut io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ids := []string{h.Waiter.ID, h.User.ID}
	if h.Fallback != nil {
		ids = append(ids, h.Fallback.ID)
	}
	if list, err := eng.List(ctx, LabelActionID, h.Action.ID); err == nil {
		for _, l := range list {
			ids = append(ids, l.ID)
		}
	}
	for _, err := range removeAll(ctx, eng, ids) {
		fmt.Fprintf(errOut, "waitdaemon: cleaning up: %v\n", err)
	}
}

// removeAll removes the containers named, each once, and returns what
// failed. Empty names are skipped; a container already gone is no error.
func removeAll(ctx context.Context, eng engine.Engine, ids []string) []error {
	var errs []error
	seen := map[string]bool{"": true}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if err := eng.Remove(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
