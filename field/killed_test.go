package field

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"time"
)

// consoleTimed reads a console the field recorded with its times, on the
// day it was recorded.
func consoleTimed(t *testing.T, path string) []Line {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []Line
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		clock, text, ok := strings.Cut(sc.Text(), " ")
		at, err := time.Parse("15:04:05.000", clock)
		if !ok || err != nil {
			continue // the action, before the console
		}
		lines = append(lines, Line{At: recordedOn.Add(at.Sub(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC))), Text: text})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

var recordedOn = time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)

// hostTime is a time of the recorded day, on the host's clock.
func hostTime(t *testing.T, clock string) time.Time {
	t.Helper()
	at, err := time.Parse("15:04:05.000", clock)
	if err != nil {
		t.Fatal(err)
	}
	return recordedOn.Add(at.Sub(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)))
}

// TestKilledWaiting: the timeout row's judgement of where the kill
// landed, on recorded consoles (the traces' bodies cut to the lines that
// name a container) and on lines that tell each case. The kill times are
// the runner's, on the host's clock (FIELD-CLOCK's offset).
func TestKilledWaiting(t *testing.T) {
	for _, tc := range []struct {
		name, console, killed, want string
	}{
		// CaptainOS, timeout 27 s: the SIGKILL came while phase 1's
		// create of the user container's task was under way.
		{"CaptainOS, killed in the user container's create", "captainos-killed-in-create.console", "09:41:13.341", "killed before phase 1 created the user container"},
		// HookOS, in the agent's pull: phase 1 never ran.
		{"HookOS, killed in the agent's pull", "hookos-killed-in-pull.console", "09:12:31.400", "killed before phase 1 created the user container"},
		// HookOS, timeout 35 s: phase 1 had stopped waiting for the
		// waiter's word and was undoing when the SIGTERM came.
		{"HookOS, killed after phase 1 stopped waiting", "hookos-killed-after-wait.console", "09:44:23.128", "it had stopped waiting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := KilledWaiting(consoleTimed(t, "testdata/"+tc.console), hostTime(t, tc.killed))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("KilledWaiting: %v; want an error saying %q", err, tc.want)
			}
		})
	}

	// CaptainOS, timeout 24 s: the SIGKILL came while phase 1 waited;
	// the waiter's trace and the task logs' copies of it left out.
	rec := consoleTimed(t, "testdata/captainos-killed-waiting.console")
	killed, err := KilledAt(rec)
	if err != nil {
		t.Fatal(err)
	}
	k, err := KilledWaiting(rec, killed)
	if err != nil {
		t.Errorf("CaptainOS, killed waiting: %v", err)
	}
	if got, want := k.Note(), "killed 6.5 s after phase 1 created the user container, 13.5 s before its wait for the waiter's word ran out"; got != want {
		t.Errorf("CaptainOS, killed waiting: %q; want %q", got, want)
	}

	// HookOS, timeout 20 s: the SIGTERM came while phase 1 waited.
	rec = consoleTimed(t, "testdata/hookos-killed-waiting.console")
	if killed, err = KilledAt(rec); err != nil {
		t.Fatal(err)
	}
	if k, err = KilledWaiting(rec, killed); err != nil {
		t.Errorf("HookOS, killed waiting: %v", err)
	}
	if got, want := k.Note(), "killed 8.4 s after phase 1 created the user container, 15.7 s before its wait for the waiter's word ran out"; got != want {
		t.Errorf("HookOS, killed waiting: %q; want %q", got, want)
	}

	t0 := hostTime(t, "10:00:00.000")
	at := func(texts ...string) []Line {
		var out []Line
		for i, s := range texts {
			out = append(out, Line{At: t0.Add(time.Duration(i) * time.Second), Text: s})
		}
		return out
	}
	user := `"tinkerbell_reboot_01-waitdaemon-user-0a1b2c3d"`
	waiter := `"tinkerbell_reboot_01-waitdaemon-waiter-0a1b2c3d"`
	containerd := []string{
		"> containerd.services.tasks.v1.Tasks/Create", `>   "container_id": ` + waiter + `,`,
		"> containerd.services.tasks.v1.Tasks/Create", `>   "container_id": ` + user + `,`,
		"< containerd.services.tasks.v1.Tasks/Create", `<   "container_id": ` + waiter + `,`, "< containerd.services.tasks.v1.Tasks/Create: OK",
		"> containerd.services.tasks.v1.Tasks/Start", `>   "container_id": ` + waiter,
		"< containerd.services.tasks.v1.Tasks/Create", `<   "container_id": ` + user + `,`, "< containerd.services.tasks.v1.Tasks/Create: OK",
		"< containerd.services.tasks.v1.Tasks/Start", "< containerd.services.tasks.v1.Tasks/Start: OK",
		"> containerd.services.containers.v1.Containers/Get", `>   "id": ` + waiter,
	}
	id := func(c byte) string { return strings.Repeat(string(c), 64) }
	syslog := func(s string) string { return "FIELD-SYSLOG <27>Nov 28 10:00:00 c26f8fd8b717[207]: " + s }
	docker := []string{
		syslog("> POST /v1.50/containers/create?name=tinkerbell_reboot_01-waitdaemon-waiter HTTP/1.1"),
		syslog("> POST /v1.50/containers/create?name=tinkerbell_reboot_01-waitdaemon-user HTTP/1.1"),
		syslog("< HTTP/1.1 201 Created"), syslog(`{"Id":"` + id('a') + `","Warnings":[]}`),
		syslog("> POST /v1.50/containers/" + id('a') + "/start HTTP/1.1"),
		syslog("< HTTP/1.1 201 Created"), syslog(`{"Id":"` + id('b') + `","Warnings":[]}`),
		syslog("< HTTP/1.1 204 No Content"),
		syslog("> GET /v1.50/containers/" + id('a') + "/logs?follow=1&stderr=1&stdout=1 HTTP/1.1"),
	}
	for _, tc := range []struct {
		name    string
		lines   []string
		killed  time.Duration // after t0
		want    string        // "" for none
		created time.Duration // after t0, when none is wanted
	}{
		{"containerd, killed waiting", containerd, 20 * time.Second, "", 9 * time.Second},
		{"containerd, killed before the user's task", containerd[:8], 9 * time.Second, "killed before phase 1 created the user container", 0},
		{"containerd, killed before the waiter started", containerd[:13], 14 * time.Second, "before it waited for the waiter's word", 0},
		{"containerd, killed once the wait ran out", containerd, 40 * time.Second, "it had stopped waiting", 0},
		{"Docker, killed waiting", docker, 15 * time.Second, "", 6 * time.Second},
		{"Docker, killed before the user's 201", docker[:6], 6 * time.Second, "killed before phase 1 created the user container", 0},
		{"Docker, killed before the wait", docker[:8], 9 * time.Second, "before it waited for the waiter's word", 0},
		{"Docker, the waiter's copy of the lines alone", []string{WaiterPrefix + docker[0], WaiterPrefix + docker[8]}, 9 * time.Second, "killed before phase 1 created the user container", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := KilledWaiting(at(tc.lines...), t0.Add(tc.killed))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("KilledWaiting: %v; want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("KilledWaiting: %v; want an error saying %q", err, tc.want)
			case tc.want == "" && !k.Created.Equal(t0.Add(tc.created)):
				t.Errorf("created at %v; want %v", k.Created.Sub(t0), tc.created)
			}
		})
	}
}

// TestNothingStarted: the waiter's lines and what is left once it ended
// tell whether anything was started.
func TestNothingStarted(t *testing.T) {
	// CaptainOS: the waiter could not learn the action's exit (its task
	// gone), started nothing and removed the user container.
	if left, err := NothingStarted(consoleTimed(t, "testdata/captainos-killed-waiting.console")); err != nil || len(left) != 2 {
		t.Errorf("CaptainOS, killed waiting: left %q, %v; want the action's container and the waiter's", left, err)
	}
	// HookOS: phase 1's undo removed the waiter, and was cut short before
	// it removed the user container, created and never started.
	if left, err := NothingStarted(consoleTimed(t, "testdata/hookos-killed-waiting.console")); err != nil || len(left) != 2 {
		t.Errorf("HookOS, killed waiting: left %q, %v; want the user container, created, and the runner's", left, err)
	}
	lines := func(texts ...string) []Line {
		var out []Line
		for _, s := range texts {
			out = append(out, Line{Text: s})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		lines []Line
		want  string
	}{
		{"containerd, the waiter alone left", lines(WaiterPrefix+`{"msg":"result","exit_code":-1}`, "FIELD-LEFT tinkerbell_reboot_01-waitdaemon-waiter-0a1b2c3d "), ""},
		{"Docker, the user container created, never started", lines("FIELD-LEFT tinkerbell_reboot_01-waitdaemon-user:created tink-worker:exited "), ""},
		{"containerd, the user container left", lines("FIELD-LEFT tinkerbell_reboot_01-waitdaemon-user-0a1b2c3d tinkerbell_reboot_01-waitdaemon-waiter-0a1b2c3d"), "left tinkerbell_reboot_01-waitdaemon-user-0a1b2c3d behind"},
		{"Docker, the user container ran", lines("FIELD-LEFT tinkerbell_reboot_01-waitdaemon-user:exited"), "it was started"},
		{"the waiter started it", lines(WaiterPrefix+`{"msg":"started user container","user_container":"u"}`, "FIELD-LEFT "), "the waiter ran something"},
		{"no word of what was left", lines(WaiterPrefix + `{"msg":"result","exit_code":-1}`), "no FIELD-LEFT line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NothingStarted(tc.lines)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("NothingStarted: %v; want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("NothingStarted: %v; want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestNotStarted: the result file of an action killed at its timeout says
// nothing was started, and why.
func TestNotStarted(t *testing.T) {
	good := `{"action":"a","state":"done","exit_code":-1,"attempts":[],"not_started":"could not tell when the action container exited: …","boot_id":"b"}`
	if err := NotStarted([]byte(good)); err != nil {
		t.Errorf("NotStarted(%s): %v", good, err)
	}
	for _, bad := range []string{
		strings.Replace(good, `"attempts":[]`, `"attempts":[{"attempt":1,"exit_code":-1}]`, 1),
		strings.Replace(good, `"state":"done"`, `"state":"running"`, 1),
		strings.Replace(good, `"not_started":"could not tell when the action container exited: …"`, `"not_started":""`, 1),
		strings.Replace(good, `"exit_code":-1`, `"exit_code":0`, 1),
	} {
		if err := NotStarted([]byte(bad)); err == nil {
			t.Errorf("NotStarted(%s): nil; want an error", bad)
		}
	}
}
