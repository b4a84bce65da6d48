package field

import (
	"strings"
	"testing"
)

// consoleLines reads a console the field recorded, its lines' texts
// alone (consoleTimed).
func consoleLines(t *testing.T, path string) []string {
	t.Helper()
	var lines []string
	for _, l := range consoleTimed(t, path) {
		lines = append(lines, l.Text)
	}
	return lines
}

// TestTookDown: which run took the machine down, from the waiter's lines
// on a recorded console, and on lines that tell each case.
func TestTookDown(t *testing.T) {
	// busybox's reboot on systemd: it exited 0, the machine stayed up,
	// WAITDAEMON_DOWN_WITHIN made it a failure, and the fallback's
	// reboot -f reset the machine.
	rec := consoleLines(t, "testdata/busybox-reboot-systemd.console")
	if got := TookDown(rec, 0, true); got != ByFallback {
		t.Errorf("busybox reboot on systemd, recorded: taken down by %s; want %s", got, ByFallback)
	}
	// HookOS's reboot: init's shutdown signalled every process as the
	// user container started, before the console's copy of the waiter's
	// output had shown a line; the shutdown ran to its end.
	rec = consoleLines(t, "testdata/hookos-reboot.console")
	if got := TookDown(rec, 0, true); got != ByCommand {
		t.Errorf("HookOS's reboot, recorded: taken down by %s; want %s", got, ByCommand)
	}
	// reboot -f, the only run the waiter could start: the reset came
	// before any line of the waiter's reached the console.
	rec = consoleLines(t, "testdata/captainos-reboot-f.console")
	if got := TookDown(rec, 0, false); got != ByCommand {
		t.Errorf("reboot -f with no retry or fallback, recorded: taken down by %s; want %s", got, ByCommand)
	}
	w := func(s string) string { return WaiterPrefix + s }
	started := w(`{"time":"t","msg":"started user container","user_container":"r-waitdaemon-user"}`)
	waiting := w(`{"time":"t","msg":"waiting for the machine to go down","container":"u","down_within":30}`)
	failed := func(n string) string {
		return w(`{"time":"t","msg":"user container exited","attempt":` + n + `,"container":"u","exit_code":1,"ended":true}`)
	}
	stayed := w(`{"time":"t","msg":"user container exited","attempt":1,"container":"u","exit_code":0,"ended":true,"note":"did not go down within 30 s"}`)
	ok := w(`{"time":"t","msg":"user container exited","attempt":1,"container":"u","exit_code":0,"ended":true}`)
	for _, c := range []struct {
		name     string
		lines    []string
		retries  int
		fallback bool
		want     string
	}{
		{"the first run, under way", []string{"x", started}, 0, true, ByCommand},
		{"the first run, waited on", []string{started, waiting}, 0, true, ByCommand},
		{"the first run, ended 0", []string{started, ok}, 0, true, ByCommand},
		{"nothing started", []string{"FIELD-RUNNER-EXIT 1"}, 0, true, ByNothing},
		{"a failure, retries left", []string{started, failed("1")}, 1, true, ByRetry},
		{"the retries spent", []string{started, failed("1"), failed("2")}, 1, true, ByFallback},
		{"stayed up, no retries", []string{started, waiting, stayed}, 0, true, ByFallback},
		{"failed, no fallback", []string{started, failed("1")}, 0, false, ByNothing},
		{"a kernel message after it", []string{started, stayed + "[  152.367714] EXT4-fs (sda1): couldn't mount as ext3"}, 0, true, ByFallback},
		{"HookOS's init shut down", []string{"FIELD-RUNNER-EXIT 0", ShutdownLine + " signalled"}, 0, true, ByCommand},
		{"init shut down after a failure", []string{started, failed("1"), ShutdownLine + " signalled"}, 0, true, ByFallback},
		{"not the waiter's", []string{`{"msg":"user container exited","attempt":1,"exit_code":1}`}, 0, true, ByNothing},
	} {
		if got := TookDown(c.lines, c.retries, c.fallback); got != c.want {
			t.Errorf("%s: taken down by %s; want %s", c.name, got, c.want)
		}
	}
}

// TestByResult: the next boot's reading of the result file, on the
// states docs/how-it-works.md shows.
func TestByResult(t *testing.T) {
	before := `{"action":"a","state":"running","exit_code":-1,"attempts":[{"attempt":1,"exit_code":-1,"ended":false}],"boot_id":"0b7e"}`
	retry := `{"action":"a","state":"running","exit_code":-1,"attempts":[{"attempt":1,"exit_code":1,"ended":true},{"attempt":2,"exit_code":-1,"ended":false}],"boot_id":"0b7e"}`
	fallback := `{"action":"a","state":"running","exit_code":-1,"attempts":[{"attempt":1,"exit_code":1,"ended":true},{"attempt":2,"exit_code":1,"ended":true}],"fallback":{"exit_code":-1,"ended":false},"boot_id":"0b7e"}`
	stayedUp := `{"action":"a","state":"running","exit_code":-1,"attempts":[{"attempt":1,"exit_code":0,"ended":true,"note":"did not go down within 20 s"}],"fallback":{"exit_code":-1,"ended":false},"boot_id":"0b7e"}`
	succeeded := `{"action":"a","state":"running","exit_code":-1,"attempts":[{"attempt":1,"exit_code":0,"ended":true}],"fallback":{"exit_code":-1,"ended":false},"boot_id":"0b7e"}`
	done := `{"action":"a","state":"done","exit_code":0,"attempts":[{"attempt":1,"exit_code":0,"ended":true}],"boot_id":"0b7e"}`
	for _, c := range []struct {
		data, want string // want "" for an error
	}{
		{before, ByCommand},
		{retry, ByRetry},
		{fallback, ByFallback},
		{stayedUp, ByFallback},
		{succeeded, ""},
		{done, ""},
		{"", ""},
	} {
		got, err := ByResult([]byte(c.data))
		if c.want == "" && err == nil {
			t.Errorf("ByResult(%s) = %s; want an error", c.data, got)
		}
		if c.want != "" && (err != nil || got != c.want) {
			t.Errorf("ByResult(%s) = %s, %v; want %s", c.data, got, err, c.want)
		}
	}
}

// TestScenarioBy: every template's row wants its own command to take the
// machine down; the field's rows that test the fallback want it, and
// busybox's reboot on systemd is one of them.
func TestScenarioBy(t *testing.T) {
	scs, err := Scenarios("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scs {
		want := ByCommand
		switch {
		case strings.HasPrefix(sc.Name, "killed at its timeout"):
			want = ByNothing
		case strings.Contains(sc.Name, "falls back"):
			want = ByFallback
		}
		if sc.By != want {
			t.Errorf("%s on %s: by %q; want %q", sc.Name, sc.OS, sc.By, want)
		}
	}
	busybox := 0
	for _, sc := range scs {
		if strings.HasPrefix(sc.Name, "busybox reboot to systemd") {
			busybox++
			if sc.By != ByFallback || !sc.Fallback || sc.DownWithin != 30 {
				t.Errorf("%s: by %q, fallback %v, down within %d; want the fallback, after 30 s", sc.Name, sc.By, sc.Fallback, sc.DownWithin)
			}
		}
	}
	if busybox != 1 {
		t.Errorf("%d busybox reboot rows on systemd; want 1", busybox)
	}
}

// TestSecondKernel: the second kernel's marker is found at a line's
// start, and after what the first kernel's console was printing when the
// kexec came (recorded on hookos26, 2026-12-07: the kexec program's
// "rebooting into it" ended in a carriage return, its newline lost); the first
// kernel's own mention of the command line is not it.
func TestSecondKernel(t *testing.T) {
	found := false
	for _, l := range consoleTimed(t, "testdata/hookos-kexec-glued.console") {
		if SecondKernel(l.Text) {
			found = true
			if !strings.Contains(l.Text, "rebooting into it\r"+KexecMarker) {
				t.Errorf("found in %q, want the line the marker was glued to", l.Text)
			}
		}
	}
	if !found {
		t.Error("recorded kexec, the marker glued to the line before: no second kernel found")
	}
	for text, want := range map[string]bool{
		KexecMarker + " console=ttyS0 quiet panic=0 field.kexec=second-kernel":                                    true,
		`kexec: loading /boot/vmlinuz, /boot/initrd.img, "console=ttyS0 quiet panic=0 field.kexec=second-kernel"`: false,
		KexecMarker + " console=ttyS0 quiet panic=0":                                                              false,
	} {
		if got := SecondKernel(text); got != want {
			t.Errorf("SecondKernel(%q) = %v, want %v", text, got, want)
		}
	}
}
