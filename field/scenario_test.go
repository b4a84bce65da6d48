package field

import (
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
	if _, err := Rename("- image: busybox:1\n"); err == nil {
		t.Error("Rename of an image the field has not: no error")
	}
}
