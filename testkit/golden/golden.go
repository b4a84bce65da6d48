// Package golden is the planners' golden-file harness: the recorded cases
// a test reads, what it made of each compared with testdata/golden/<case>.json
// (rewritten under go test -update), and goldens whose case is gone.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/testkit/linediff"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// Cases are the names of the recorded cases in dir (its *.json files);
// each of required must be among them.
func Cases(t *testing.T, dir string, required ...string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	for _, name := range required {
		if !slices.Contains(names, name) {
			t.Errorf("recorded case %s.json is missing from %s", name, dir)
		}
	}
	return names
}

// JSON is v as a golden file holds it: indented JSON, ending in a newline.
func JSON(t *testing.T, v any) []byte {
	t.Helper()
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(js, '\n')
}

// Check compares got, what the test made of case name, with its golden
// file; under -update it writes the file first.
func Check(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("plan differs from %s (-want +got):\n%s", file, linediff.Text(string(want), string(got)))
	}
}

// NoneStale fails for each golden file whose case is not among names, the
// cases read from dir.
func NoneStale(t *testing.T, names []string, dir string) {
	t.Helper()
	goldens, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	for _, g := range goldens {
		if name := strings.TrimSuffix(filepath.Base(g), ".json"); !slices.Contains(names, name) {
			t.Errorf("%s has no recorded case in %s: remove it", g, dir)
		}
	}
}
