package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInput: bad input exits 2, naming the input and what it wants,
// before reaching any engine.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("name: a\nimage: i\ntimeout: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("name: a\nimage: i\ncmd: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "none.sock")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no socket", []string{"-runtime", "docker", "-action", good}, "-socket: want the engine's unix socket"},
		{"no action", []string{"-runtime", "docker", "-socket", sock}, "-action: want a file holding one action"},
		{"a runtime unknown", []string{"-runtime", "podman", "-socket", sock, "-action", good}, `-runtime "podman": want containerd or docker`},
		{"no runtime", []string{"-socket", sock, "-action", good}, `-runtime "": want containerd or docker`},
		{"a missing file", []string{"-runtime", "docker", "-socket", sock, "-action", filepath.Join(dir, "none.yaml")}, "none.yaml: no such file"},
		{"a field unknown", []string{"-runtime", "docker", "-socket", sock, "-action", bad}, "bad.yaml: want an action of"},
		{"an argument", []string{"-runtime", "docker", "-socket", sock, "-action", good, "more"}, `unexpected arguments ["more"]`},
		{"a flag unknown", []string{"-runtime", "docker", "-socket", sock, "-action", good, "-x"}, "flag provided but not defined: -x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit %d, want 2; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout has %q, want nothing", stdout.String())
			}
		})
	}
}
