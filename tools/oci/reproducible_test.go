package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/tools/ocilayout"
)

// git runs git in dir and returns its output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = errors.New(string(ee.Stderr))
		}
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// snapshot copies the checkout as it is now, uncommitted changes
// included, into a clone of its commit, so that two builds see the same
// sources and the same git state however the checkout changes meanwhile.
func snapshot(t *testing.T) string {
	t.Helper()
	root := strings.TrimSpace(git(t, ".", "rev-parse", "--show-toplevel"))
	dir := filepath.Join(t.TempDir(), "src")
	git(t, root, "clone", "-q", "--shared", root, dir)
	changed := strings.Split(git(t, root, "diff", "--name-only", "--no-renames", "-z", "HEAD"), "\x00")
	changed = append(changed, strings.Split(git(t, root, "ls-files", "-z", "-o", "--exclude-standard"), "\x00")...)
	for _, rel := range changed {
		if rel == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, rel))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			os.Remove(filepath.Join(dir, rel))
			continue
		case err != nil:
			t.Fatal(err)
		}
		st, _ := os.Stat(filepath.Join(root, rel))
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), data, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// makeOCI runs `make oci` in src with env added, writing the layout to
// out, and returns how long it took.
func makeOCI(t *testing.T, src, out string, env ...string) time.Duration {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "-C", src, "oci", "OCI_DIR="+out)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "SOURCE_DATE_EPOCH=") || strings.HasPrefix(kv, "TZ=") || strings.HasPrefix(kv, "MAKEFLAGS=")
	})
	cmd.Env = append(cmd.Env, env...)
	start := time.Now()
	out2, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("make oci %s: %v\n%s", strings.Join(env, " "), err, out2)
	}
	t.Logf("make oci %s took %s:\n%s", strings.Join(env, " "), took.Round(10*time.Millisecond), lastLines(string(out2), 4))
	return took
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// layout reads every file of a layout, and its index's digest.
func layout(t *testing.T, dir string) (files map[string][]byte, index string) {
	t.Helper()
	files = map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[rel], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var top ocilayout.Index
	if err := json.Unmarshal(files["index.json"], &top); err != nil || len(top.Manifests) != 1 {
		t.Fatalf("%s/index.json: %v, %d entries, want 1:\n%s", dir, err, len(top.Manifests), files["index.json"])
	}
	return files, top.Manifests[0].Digest
}

// configCreated returns the created time of every image's config.
func configCreated(t *testing.T, files map[string][]byte, index string) []string {
	t.Helper()
	blob := func(digest string, v any) {
		if err := json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")], v); err != nil {
			t.Fatalf("blob %s: %v", digest, err)
		}
	}
	var idx ocilayout.Index
	blob(index, &idx)
	var created []string
	for _, d := range idx.Manifests {
		var m ocilayout.Manifest
		blob(d.Digest, &m)
		var c ocilayout.Config
		blob(m.Config.Digest, &c)
		created = append(created, d.Platform.String()+" "+c.Created)
	}
	return created
}

// TestReproducible runs `make oci` twice on the same sources, in
// different time zones and a second apart, and wants the same bytes:
// the index digest and every blob. A writer that read the clock, or
// formatted a time in the local zone, would fail it. A third run with
// another SOURCE_DATE_EPOCH must give another index, so the commit time
// is what the timestamps follow.
func TestReproducible(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("this test runs make oci and needs make: apt-get install -y make")
	}
	src := snapshot(t)
	a, b, c := filepath.Join(t.TempDir(), "oci"), filepath.Join(t.TempDir(), "oci"), filepath.Join(t.TempDir(), "oci")

	makeOCI(t, src, a, "TZ=UTC")
	time.Sleep(1100 * time.Millisecond) // the timestamps have whole seconds
	took := makeOCI(t, src, b, "TZ=Pacific/Kiritimati")
	t.Logf("make oci, builds included, took %s on %d CPUs", took.Round(10*time.Millisecond), runtime.NumCPU())

	filesA, indexA := layout(t, a)
	filesB, indexB := layout(t, b)
	t.Logf("index digest: %s, then %s", indexA, indexB)
	if indexA != indexB {
		t.Errorf("two make oci runs of the same sources gave two index digests: %s and %s", indexA, indexB)
	}
	for name, data := range filesA {
		if other, ok := filesB[name]; !ok {
			t.Errorf("%s is in the first layout only", name)
		} else if !bytes.Equal(data, other) {
			t.Errorf("%s differs between the runs:\n%.600s\n%.600s", name, data, other)
		}
	}
	for name := range filesB {
		if _, ok := filesA[name]; !ok {
			t.Errorf("%s is in the second layout only", name)
		}
	}

	// Every timestamp is the commit's.
	secs, err := strconv.ParseInt(strings.TrimSpace(git(t, src, "log", "-1", "--format=%ct")), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	commit := ocilayout.Timestamp(time.Unix(secs, 0))
	got := configCreated(t, filesA, indexA)
	want := []string{"linux/amd64 " + commit, "linux/arm64 " + commit}
	if !slices.Equal(got, want) {
		t.Errorf("the configs' created times %q, want the commit's %q", got, want)
	}

	makeOCI(t, src, c, "TZ=UTC", "SOURCE_DATE_EPOCH="+strconv.FormatInt(secs-86400, 10))
	filesC, indexC := layout(t, c)
	if indexC == indexA {
		t.Errorf("SOURCE_DATE_EPOCH a day earlier gave the same index %s", indexA)
	}
	commit = ocilayout.Timestamp(time.Unix(secs-86400, 0))
	if got, want := configCreated(t, filesC, indexC), []string{"linux/amd64 " + commit, "linux/arm64 " + commit}; !slices.Equal(got, want) {
		t.Errorf("with SOURCE_DATE_EPOCH, the configs' created times %q, want %q", got, want)
	}
}
