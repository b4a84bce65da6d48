package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// onOutcomeEngines runs f on Docker 20.10 and containerd, the engines of
// HookOS and CaptainOS.
func onOutcomeEngines(t *testing.T, f func(t *testing.T, r rig)) {
	for _, e := range engines {
		if e.name == "docker" || e.containerd {
			t.Run(e.name, func(t *testing.T) { f(t, openRig(t, e)) })
		}
	}
}

// outcome is the result file, as the README documents it.
type outcome struct {
	Action    string       `json:"action"`
	State     string       `json:"state"`
	ExitCode  int          `json:"exit_code"`
	Note      string       `json:"note"`
	Attempts  []outcomeRun `json:"attempts"`
	Fallback  *outcomeRun  `json:"fallback"`
	BootID    string       `json:"boot_id"`
	WrittenAt string       `json:"written_at"`
}

type outcomeRun struct {
	Attempt  int      `json:"attempt"`
	Command  []string `json:"command"`
	ExitCode int      `json:"exit_code"`
	Ended    bool     `json:"ended"`
	Note     string   `json:"note"`
	Kept     bool     `json:"kept"`
}

// readOutcome reads a result file.
func readOutcome(t *testing.T, file string) (outcome, string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("result file: %v", err)
	}
	var o outcome
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatalf("result file: %v\n%s", err, data)
	}
	return o, string(data)
}

// TestDownWithin: with WAITDAEMON_DOWN_WITHIN=2, an IMAGE whose command
// exits 0 and leaves the machine up is a failed attempt; the fallback
// runs, and the result records both, each with the note.
func TestDownWithin(t *testing.T) {
	onOutcomeEngines(t, func(t *testing.T, e rig) {
		out := t.TempDir()
		r := e.run(t, tinkAgent, action{
			name:    "e2e down within",
			command: []string{"--exit=0", "reboot"},
			env: map[string]string{
				"IMAGE": probeImage, "WAIT_SECONDS": "0", "WAITDAEMON_DOWN_WITHIN": "2",
				"WAITDAEMON_FALLBACK_COMMAND": `["--exit=0","fallback"]`,
				"WAITDAEMON_RESULT_FILE":      filepath.Join(out, "result.json"),
			},
			volumes: []string{out + ":/out"},
		})
		if r.ExitCode != 0 {
			t.Fatalf("the action exited %d:\n%s", r.ExitCode, r.Logs)
		}
		evs := events(e.waiter(t, r.ID))
		if _, ok := find(evs, "result"); !ok {
			t.Fatalf("no result line: %v", evs)
		}
		if _, ok := find(evs, "waiting for the machine to go down"); !ok {
			t.Errorf("no line says the waiter waits for the machine to go down: %v", evs)
		}
		res, data := readOutcome(t, filepath.Join(out, "result.json"))
		note := "did not go down within 2 s"
		if res.State != "done" || res.ExitCode != 0 || res.Note != note || res.BootID == "" || res.Action != r.Name || len(res.Attempts) != 1 || res.Fallback == nil {
			t.Fatalf("result file = %s\nwant one attempt and the fallback, done, exit 0 with the note %q", data, note)
		}
		a, fb := res.Attempts[0], *res.Fallback
		if a.ExitCode != 0 || a.Note != note || !a.Ended || !a.Kept {
			t.Errorf("attempt = %+v; want exit 0, %q, ended, kept", a, note)
		}
		if strings.Join(fb.Command, " ") != "/probe --exit=0 fallback" || fb.ExitCode != 0 || fb.Note != note || !fb.Ended {
			t.Errorf("fallback = %+v; want /probe --exit=0 fallback, exit 0, %q, ended", fb, note)
		}
		if kept := roleOf(t, e, r.ID, "user"); kept == "" || e.exitCode(t, kept) != 0 {
			t.Errorf("the user container that left the machine up was not kept (%q)", kept)
		}
	})
}
