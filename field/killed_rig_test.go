package field

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// ConfirmWait is how long phase 1 waits for the waiter's word on the
// result file (phase.confirmResultFile) before it gives up and undoes.
const ConfirmWait = 20 * time.Second

// KillTiming is where, in phase 1's hand-off, an action killed at its
// timeout was killed, from phase 1's own trace on the console
// (WAITDAEMON_VERBOSE), on the host's clock.
type KillTiming struct {
	// Created: the user container's create was answered (on containerd,
	// its task's create; on Docker, the 201 of its create).
	Created time.Time
	// Waiting: phase 1 began to wait for the waiter's word on the result
	// file, which it does once it has made the user container and
	// started the waiter.
	Waiting time.Time
	// Killed: when the runner's timeout passed.
	Killed time.Time
}

// Note is the row's note: how long after the user container's create the
// kill landed, and how long before phase 1 would have stopped waiting.
func (k KillTiming) Note() string {
	return fmt.Sprintf("killed %.1f s after phase 1 created the user container, %.1f s before its wait for the waiter's word ran out",
		k.Killed.Sub(k.Created).Seconds(), k.Waiting.Add(ConfirmWait).Sub(k.Killed).Seconds())
}

var (
	syslogTag      = regexp.MustCompile(`^FIELD-SYSLOG <\d+>\w{3} [ \d]\d \d\d:\d\d:\d\d (\S+)\[\d+\]: (.*)$`)
	dockerCreate   = regexp.MustCompile(`^> POST /v[\d.]+/containers/create\?name=(\S+) HTTP/1\.1$`)
	dockerStart    = regexp.MustCompile(`^> POST /v[\d.]+/containers/([0-9a-f]{64})/start HTTP/1\.1$`)
	dockerLogs     = regexp.MustCompile(`^> GET /v[\d.]+/containers/([0-9a-f]{64})/logs\?follow=1`)
	dockerCreated  = regexp.MustCompile(`^\{"Id":"([0-9a-f]{64})","Warnings":`)
	traceHeader    = regexp.MustCompile(`^([<>]) (containerd\.services\.[\w.]+/\w+)(: .*)?$`)
	traceContainer = regexp.MustCompile(`"(?:id|container_id)": "([^"]+)"`)
)

// phase1Streams is phase 1's output as the console shows it, each copy
// apart: on CaptainOS the runner's own copy, lines as phase 1 wrote them;
// on HookOS each syslog sender's (the action's container and the
// runner's), its lines after the syslog header. The waiter's lines
// (FIELD-WAITER, FIELD-TASKLOG) are not phase 1's.
func phase1Streams(lines []Line) map[string][]Line {
	streams := map[string][]Line{}
	for _, l := range lines {
		if m := syslogTag.FindStringSubmatch(l.Text); m != nil {
			streams[m[1]] = append(streams[m[1]], Line{At: l.At, Text: m[2]})
			continue
		}
		if strings.HasPrefix(l.Text, "< ") || strings.HasPrefix(l.Text, "> ") {
			streams["console"] = append(streams["console"], l)
		}
	}
	return streams
}

// KilledWaiting checks that an action killed at its timeout (killed, on
// the host's clock) was killed while phase 1 waited for the waiter's word
// on its result file: after it had created the user container and
// started the waiter, and before that wait would have run out. Phase 1's
// own trace tells: on containerd the agent's SIGKILL leaves nothing of
// phase 1 written after it; on Docker its SIGTERM cancels every call of
// the hand-off under way, so no create is answered after it.
func KilledWaiting(lines []Line, killed time.Time) (KillTiming, error) {
	// Of the copies, the one that shows the wait, and of those the one
	// that shows the create first: a line reaches the console some time
	// after phase 1 wrote it, each copy by its own way.
	var best KillTiming
	for _, stream := range phase1Streams(lines) {
		k := waitingIn(stream)
		if better(k, best) {
			best = k
		}
	}
	best.Killed = killed
	switch {
	case best.Created.IsZero():
		return best, fmt.Errorf("killed before phase 1 created the user container: its trace shows no answer to that create (the timeout's kill came too early in the hand-off: the row's timeout is too short for this machine now)")
	case best.Waiting.IsZero():
		return best, fmt.Errorf("killed %.1f s after phase 1 created the user container, but before it waited for the waiter's word: the waiter was not started yet", killed.Sub(best.Created).Seconds())
	case killed.Before(best.Created):
		return best, fmt.Errorf("killed at %s, before phase 1's answer to the user container's create reached the console (%s)", killed.Format(time.TimeOnly), best.Created.Format(time.TimeOnly))
	case !killed.Before(best.Waiting.Add(ConfirmWait)):
		return best, fmt.Errorf("killed %.1f s after phase 1 began to wait for the waiter's word: it had stopped waiting (%v) and was undoing", killed.Sub(best.Waiting).Seconds(), ConfirmWait)
	}
	return best, nil
}

// better tells whether a copy's timing k tells more than best, or as
// much and sooner.
func better(k, best KillTiming) bool {
	switch {
	case k.Created.IsZero():
		return false
	case best.Created.IsZero():
		return true
	case k.Waiting.IsZero() != best.Waiting.IsZero():
		return best.Waiting.IsZero()
	}
	return k.Created.Before(best.Created) || k.Created.Equal(best.Created) && k.Waiting.Before(best.Waiting)
}

// waitingIn reads one copy of phase 1's trace: when the user
// container's create was answered, and when phase 1 began to wait for the
// waiter's word.
func waitingIn(stream []Line) KillTiming {
	var k KillTiming
	// Docker: the creates' 201s in order, the waiter's ID from its start.
	var created []Line
	var createdIDs []string
	var waiterID string
	userAsked := false
	// containerd: the message block under way, and the waiter's start.
	var block []Line
	var waiterStarted time.Time
	endBlock := func() {
		if len(block) == 0 {
			return
		}
		h := traceHeader.FindStringSubmatch(block[0].Text)
		if h[1] == "<" && h[2] == "containerd.services.tasks.v1.Tasks/Create" && k.Created.IsZero() {
			for _, l := range block {
				if m := traceContainer.FindStringSubmatch(l.Text); m != nil && strings.Contains(m[1], "-waitdaemon-user") {
					k.Created = block[0].At
				}
			}
		}
		block = nil
	}
	for _, l := range stream {
		if h := traceHeader.FindStringSubmatch(l.Text); h != nil {
			endBlock()
			switch {
			case h[3] == "":
				block = []Line{l}
			case h[1] == "<" && h[2] == "containerd.services.tasks.v1.Tasks/Start" && h[3] == ": OK":
				// Phase 1 starts the waiter alone.
				waiterStarted = l.At
			}
			if !k.Created.IsZero() && !waiterStarted.IsZero() && k.Waiting.IsZero() && h[1] == ">" {
				// The first call once both are done: the wait's.
				k.Waiting = l.At
			}
			continue
		}
		if len(block) > 0 && (strings.HasPrefix(l.Text, "< ") || strings.HasPrefix(l.Text, "> ")) {
			block = append(block, l)
			continue
		}
		endBlock()
		if m := dockerCreate.FindStringSubmatch(l.Text); m != nil && strings.HasSuffix(m[1], "-waitdaemon-user") {
			userAsked = true
		}
		if m := dockerCreated.FindStringSubmatch(l.Text); m != nil {
			created, createdIDs = append(created, l), append(createdIDs, m[1])
		}
		if m := dockerStart.FindStringSubmatch(l.Text); m != nil && waiterID == "" {
			waiterID = m[1]
		}
		if m := dockerLogs.FindStringSubmatch(l.Text); m != nil && m[1] == waiterID && userAsked && k.Waiting.IsZero() {
			k.Waiting = l.At
		}
	}
	endBlock()
	if userAsked {
		// The user container's 201: the one whose ID is not the waiter's.
		for i, id := range createdIDs {
			if id != waiterID && waiterID != "" {
				k.Created = created[i].At
				break
			}
		}
	}
	return k
}

// LeftLine is the line the guest prints once the waiter of a row killed
// at its timeout has ended: the containers left, each NAME or NAME:STATE.
const LeftLine = "FIELD-LEFT"

// NothingStarted checks, on the console of an action killed at its
// timeout, that nothing the waiter could start was started: no line of
// the waiter's says a run began, and of what is left (the FIELD-LEFT
// line, once the waiter ended), no user or fallback container on
// containerd, where the waiter removes them; on Docker, where phase 1's
// undo removes them unless the kill cuts it short, none that ever ran.
// It returns what was left.
func NothingStarted(lines []Line) ([]string, error) {
	var left []string
	seen := false
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l.Text, WaiterPrefix); ok {
			var w waiterLine
			if decodeFirst(rest, &w) == nil {
				switch w.Msg {
				case "started user container", "waiting for the machine to go down", "stopping; the user container runs on", "user container exited", "fallback exited":
					return nil, fmt.Errorf("the waiter ran something: %s", rest)
				}
			}
		}
		if rest, ok := strings.CutPrefix(l.Text, LeftLine); ok {
			seen, left = true, strings.Fields(rest)
		}
	}
	if !seen {
		return nil, fmt.Errorf("no %s line: the machine did not say what was left once the waiter ended", LeftLine)
	}
	for _, c := range left {
		name, state, docker := strings.Cut(c, ":")
		if !strings.Contains(name, "-waitdaemon-user") && !strings.Contains(name, "-waitdaemon-fallback") {
			continue
		}
		if !docker {
			return left, fmt.Errorf("the waiter left %s behind, which will never start", name)
		}
		if state != "created" {
			return left, fmt.Errorf("%s is %s: it was started", name, state)
		}
	}
	return left, nil
}

// prepared checks that the machine had what a row killed at its timeout
// needs before the runner started: the images, and the slow device.
func prepared(vm *VM) error {
	slow := false
	for _, l := range vm.Lines() {
		switch {
		case strings.HasPrefix(l.Text, "FIELD-PRELOAD-FAILED"), strings.HasPrefix(l.Text, "FIELD-SLOW-DEVICE-FAILED"):
			return fmt.Errorf("the machine was not ready: %s", l.Text)
		case strings.HasPrefix(l.Text, "FIELD-SLOW-DEVICE "):
			slow = true
		}
	}
	if !slow {
		return fmt.Errorf("the machine made no slow device (no FIELD-SLOW-DEVICE line)")
	}
	return nil
}

// NotStarted checks the result file of an action killed at its timeout:
// done, exit code -1, no run, and why nothing was started.
func NotStarted(data []byte) error {
	var r struct {
		State      string            `json:"state"`
		ExitCode   int               `json:"exit_code"`
		Attempts   []json.RawMessage `json:"attempts"`
		Fallback   json.RawMessage   `json:"fallback"`
		NotStarted string            `json:"not_started"`
	}
	if err := decodeFirst(string(data), &r); err != nil {
		return fmt.Errorf("the result file: %w", err)
	}
	if r.State != "done" || r.ExitCode != -1 || len(r.Attempts) != 0 || r.Fallback != nil || r.NotStarted == "" {
		return fmt.Errorf("the result file: state %q, exit code %d, %d runs, fallback %s, not_started %q; want done, -1, none, none, and why nothing was started", r.State, r.ExitCode, len(r.Attempts), r.Fallback, r.NotStarted)
	}
	return nil
}

// KilledAt is when the runner's timeout passed, on the host's clock: its
// report's killed_at, with FIELD-CLOCK's offset.
func KilledAt(lines []Line) (time.Time, error) {
	offset, ok := clockOffset(lines)
	if !ok {
		return time.Time{}, fmt.Errorf("no FIELD-CLOCK line: the guest's clock cannot be read on the host's")
	}
	for _, l := range lines {
		var r struct {
			Msg      string    `json:"msg"`
			ExitCode int       `json:"exit_code"`
			KilledAt time.Time `json:"killed_at"`
		}
		if json.Unmarshal([]byte(actionLine.FindString(l.Text)), &r) != nil {
			continue
		}
		if r.Msg != "action timed out" || r.KilledAt.IsZero() {
			return time.Time{}, fmt.Errorf("want the action killed at its timeout; the runner said %s, exit code %d", r.Msg, r.ExitCode)
		}
		return r.KilledAt.Add(offset), nil
	}
	return time.Time{}, fmt.Errorf("no report of the runner's on the console")
}
