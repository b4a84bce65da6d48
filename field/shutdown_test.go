package field

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestShutdownRunsToItsEnd: HookOS's shutdown script, run in a pid
// namespace of its own as busybox init runs it (PID 1 its parent), lives
// through its own kill(-1): its SIGTERM reaches every other process, and
// the script goes on to the grace, the SIGKILL, the sync and its last
// line, as LinuxKit's rc.init does from its own process. (The unmounts
// are left out here: on the host they would remount its file systems.)
func TestShutdownRunsToItsEnd(t *testing.T) {
	script, err := os.ReadFile("../scripts/field-image.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)cat >"\$root/etc/rc.shutdown" <<'EOF'\n(.*?)\nEOF\n`).FindSubmatch(script)
	if m == nil {
		t.Fatal("no rc.shutdown in scripts/field-image.sh")
	}
	for _, tool := range []string{"unshare", "busybox"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("this test needs %s: apt-get install -y util-linux busybox-static", tool)
		}
	}
	dir := t.TempDir()
	console := filepath.Join(dir, "console")
	var kept []string
	for _, l := range strings.Split(string(m[1]), "\n") {
		if strings.Contains(l, "umount") {
			continue
		}
		kept = append(kept, strings.ReplaceAll(l, "/dev/console", console))
	}
	rc := filepath.Join(dir, "rc.shutdown")
	if err := os.WriteFile(rc, []byte(strings.Join(kept, "\n")+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bb, _ := exec.LookPath("busybox")
	if err := os.Symlink(bb, filepath.Join(dir, "busybox")); err != nil {
		t.Fatal(err)
	}
	// PID 1: a shell that starts a process the shutdown must end, runs
	// the script, and says whether that process was still there.
	init := `` + bb + ` sleep 300 & sleeper=$!
` + bb + ` sh ` + rc + `; echo "script exit $?"
wait $sleeper; echo "sleeper ended $?"`
	cmd := exec.Command("unshare", "--fork", "--pid", "--mount-proc", bb, "sh", "-c", init)
	cmd.Env = []string{"PATH=" + filepath.Dir(bb) + ":/usr/bin:/bin"}
	// The script names /bin/busybox.
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Fatalf("this test needs /bin/busybox, which the script names: apt-get install -y busybox-static")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("unshare: %v\n%s", err, out)
	}
	said, _ := os.ReadFile(console)
	if !strings.Contains(string(said), "FIELD-SHUTDOWN") {
		t.Errorf("the shutdown script did not reach its last line (it said %q); PID 1 saw:\n%s", said, out)
	}
	if !strings.Contains(string(out), "sleeper ended 143") {
		t.Errorf("the other process was not ended by SIGTERM; PID 1 saw:\n%s", out)
	}
}
