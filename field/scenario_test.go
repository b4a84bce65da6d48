package field

import (
	"github.com/waitdaemon/waitdaemon/testkit/tinkagent"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestTemplates: every yaml block of the README and docs/templates.md is
// a scenario, on each OS it is for, and only its image names change.
func TestTemplates(t *testing.T) {
	scs, err := Templates("..")
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for _, doc := range []string{"../README.md", "../docs/templates.md"} {
		b, err := yamlBlocks(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks += len(b)
	}
	if len(scs) < blocks {
		t.Fatalf("%d scenarios of %d yaml blocks", len(scs), blocks)
	}
	for _, sc := range scs {
		for _, l := range strings.Split(sc.Action, "\n") {
			if imageLine.MatchString(l) && !strings.Contains(l, RegistryName+"/") {
				t.Errorf("%s on %s: an image not renamed: %q", sc.Name, sc.OS, l)
			}
		}
		sock := map[string]string{"captainos": "/run/containerd/containerd.sock", "hookos": "/var/run/docker.sock"}[sc.OS]
		if !strings.Contains(sc.Action, sock+":"+sock) {
			t.Errorf("%s on %s: does not mount %s", sc.Name, sc.OS, sock)
		}
	}
}

// TestRename changes the image lines alone.
func TestRename(t *testing.T) {
	in := "- name: kexec\n  image: waitdaemon:latest\n  environment:\n    IMAGE: quay.io/tinkerbell/actions/kexec:latest\n    WAITDAEMON_FALLBACK_IMAGE: alpine:3.20\n    BLOCK_DEVICE: /dev/sda1\n"
	want := "- name: kexec\n  image: " + RegistryName + "/waitdaemon:latest\n  environment:\n    IMAGE: " + RegistryName + "/kexec:latest\n    WAITDAEMON_FALLBACK_IMAGE: " + RegistryName + "/alpine:3.20\n    BLOCK_DEVICE: /dev/sda1\n"
	got, err := Rename(in)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Rename:\n%s\nwant:\n%s", got, want)
	}
	// A release's image, by tag and pinned by digest, is waitdaemon.
	for _, ref := range []string{"ghcr.io/waitdaemon/waitdaemon:v0.1.0", "ghcr.io/waitdaemon/waitdaemon:v0.1.0@sha256:" + strings.Repeat("6d", 32), "ghcr.io/waitdaemon/waitdaemon@sha256:" + strings.Repeat("6d", 32), "registry.example:5000/waitdaemon"} {
		got, err := Rename("- name: reboot\n  image: " + ref + "\n")
		if want := "- name: reboot\n  image: " + RegistryName + "/waitdaemon:latest\n"; err != nil || got != want {
			t.Errorf("Rename of %s: %q, %v; want %q", ref, got, err, want)
		}
	}
	if _, err := Rename("- image: busybox:1\n"); err == nil {
		t.Error("Rename of an image the field has not: no error")
	}
}

// TestResultOnDevice: a template whose result file is on
// WAITDAEMON_RESULT_DEVICE needs the target disk, not mounted on the
// host, and the next boot reads the file at its path on that disk.
func TestResultOnDevice(t *testing.T) {
	sc, err := NewScenario("kexec", "hookos", `- name: kexec
  image: waitdaemon:latest
  environment:
    BLOCK_DEVICE: /dev/sda1
    FS_TYPE: ext4
    IMAGE: quay.io/tinkerbell/actions/kexec:latest
    WAITDAEMON_RESULT_DEVICE: /dev/sda1
    WAITDAEMON_RESULT_FILE: /var/log/waitdaemon-kexec.json
  volumes:
    - /var/run/docker.sock:/var/run/docker.sock
`)
	if err != nil {
		t.Fatal(err)
	}
	if !sc.Disk || sc.MountTarget || sc.Result != "/var/log/waitdaemon-kexec.json" || sc.Want != Kexec {
		t.Errorf("got Disk %v, MountTarget %v, Result %q, Want %s; want a disk, not mounted, /var/log/waitdaemon-kexec.json, kexec", sc.Disk, sc.MountTarget, sc.Result, sc.Want)
	}
}

// TestDefaultList: every template, and the field's kexec that fails,
// is in the default list; the README's HookOS templates run on Docker
// 28.2 and 26.1 alike (under one release or another).
func TestDefaultList(t *testing.T) {
	scs, err := Scenarios("..")
	if err != nil {
		t.Fatal(err)
	}
	on := map[string][]string{}
	for _, sc := range scs {
		if sc.Skip != "" {
			t.Errorf("%s on %s left out: %s", sc.Name, sc.OS, sc.Skip)
		}
		name, _, _ := strings.Cut(sc.Name, " under ")
		on[name] = append(on[name], sc.OS)
	}
	readme := 0
	for name, oses := range on {
		if !strings.HasPrefix(name, "README.md ") || !slices.Contains(oses, "hookos") {
			continue
		}
		readme++
		if !slices.Contains(oses, "hookos26") {
			t.Errorf("%s runs on %v; want Docker 26.1's HookOS (hookos26) too", name, oses)
		}
	}
	if readme == 0 {
		t.Error("no README template runs on HookOS")
	}
	for name, oses := range on {
		if slices.Contains(oses, "hookos26") && !strings.HasPrefix(name, "README.md ") {
			t.Errorf("%s runs on hookos26; want only the README's templates there", name)
		}
	}
}

// TestGateRows: make test boots the README's reboot on CaptainOS and on
// HookOS, the latter on Docker 26.1 as Debian ships it (no build), and
// nothing else.
func TestGateRows(t *testing.T) {
	scs, err := Scenarios("..")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sc := range scs {
		if sc.Gate {
			got = append(got, sc.OS+"/"+sc.Name)
		}
	}
	want := []string{"hookos26/README.md HookOS (Docker) reboot", "captainos/README.md CaptainOS (containerd, no Docker) reboot"}
	if len(got) != len(want) {
		t.Fatalf("the gate's rows: %q; want one for each of %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]+" under ") {
			t.Errorf("the gate's row %d: %q; want %q under its oldest release", i, got[i], want[i])
		}
	}
}

// TestCrc32c: the target disk's ext4 has metadata checksums, for which
// the kernel asks the crypto API for crc32c, a module no depends line
// names: each machine must load it, or mounting /dev/sda1 fails with
// ENOENT.
func TestCrc32c(t *testing.T) {
	script, err := os.ReadFile("../scripts/field-image.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^modules_common="([^"]*)"`).FindSubmatch(script)
	if m == nil {
		t.Fatal("no modules_common in scripts/field-image.sh")
	}
	if !slices.Contains(strings.Fields(string(m[1])), "crc32c_generic") {
		t.Errorf("modules_common %q: want crc32c_generic, for ext4's metadata_csum on both machines", m[1])
	}
}

// TestByRelease: every template runs under the oldest release the
// field's table gives it, which its first line claims, and under HEAD,
// on each OS it is for, and the table names no template that is gone.
func TestByRelease(t *testing.T) {
	templates, err := Templates("..")
	if err != nil {
		t.Fatal(err)
	}
	scs, err := Scenarios("..")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, tpl := range templates {
		key := tpl.OS + "/" + tpl.Name
		used[key] = true
		// The table agrees with the template's own first line.
		if claimed, err := OldestRelease(tpl.Action, tpl.OS); err != nil || !strings.EqualFold(claimed, string(oldest[key])) {
			t.Errorf("%s on %s: the field's table says %s, the template %q (%v)", tpl.Name, tpl.OS, oldest[key], claimed, err)
		}
		var under []tinkagent.Release
		for _, sc := range scs {
			if strings.TrimSuffix(sc.OS, "26") == tpl.OS && strings.HasPrefix(sc.Name, tpl.Name+" under ") {
				under = append(under, sc.Releases...)
				if !slices.Contains(sc.Releases, sc.Release) {
					t.Errorf("%s on %s runs under %s, not one of %v", sc.Name, sc.OS, sc.Release, sc.Releases)
				}
			}
		}
		if !slices.Contains(under, oldest[key]) || !slices.Contains(under, tinkagent.Head) {
			t.Errorf("%s on %s runs under %v; want %s and head", tpl.Name, tpl.OS, under, oldest[key])
		}
	}
	for key := range oldest {
		if !used[key] {
			t.Errorf("the field's table names %s, no template", key)
		}
	}
}

// TestByReleaseGroups: a template whose container is the same under two
// releases is run once for both; one that differs, once each.
func TestByReleaseGroups(t *testing.T) {
	for _, tt := range []struct {
		pid  string
		want []string
	}{
		{"  namespaces:\n    pid: host\n", []string{"x under v0.23+v0.24", "x under v0.25+head"}},
		{"  pid: host\n", []string{"x under v0.23+v0.24+v0.25+head"}},
	} {
		sc, err := NewScenario("x", "captainos", "- name: reboot\n  image: waitdaemon:latest\n  timeout: 90\n  command: [\"kill\", \"-39\", \"1\"]\n"+tt.pid+
			"  environment:\n    IMAGE: alpine:3.20\n  volumes:\n    - /run/containerd/containerd.sock:/run/containerd/containerd.sock\n")
		if err != nil {
			t.Fatal(err)
		}
		sc.Name = "README.md CaptainOS (containerd, no Docker) reboot"
		runs, err := byRelease(sc)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range runs {
			got = append(got, strings.Replace(r.Name, sc.Name, "x", 1))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%q: runs %q, want %q", tt.pid, got, tt.want)
		}
	}
}

func TestMachinesAtOnce(t *testing.T) {
	for in, want := range map[string]int{"": 2, "1": 1, "3": 3} {
		if got, err := machinesAtOnce(in); err != nil || got != want {
			t.Errorf("FIELD_PARALLEL=%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1", "two", "1.5"} {
		_, err := machinesAtOnce(in)
		if err == nil || !strings.Contains(err.Error(), "FIELD_PARALLEL=\""+in+"\"") || !strings.Contains(err.Error(), "want how many machines") {
			t.Errorf("FIELD_PARALLEL=%q: %v; want an error naming it and what is wanted", in, err)
		}
	}
}
