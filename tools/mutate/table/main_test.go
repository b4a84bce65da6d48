package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// module writes files (path from the root: text) to a new module root.
func module(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// mutant is one mutation of a gremlins report.
type mutant struct {
	file, typ, status string
	line, column      int
}

// table runs the table over a report of pkg holding ms, as gremlins
// writes it, with docs as docs/mutants.md, and gives its output and
// error.
func table(t *testing.T, root, docs, pkg string, ms ...mutant) (string, error) {
	t.Helper()
	eqPath := filepath.Join(root, "mutants.md")
	if err := os.WriteFile(eqPath, []byte(docs), 0o644); err != nil {
		t.Fatal(err)
	}
	type mutation struct {
		Type   string `json:"type"`
		Status string `json:"status"`
		Line   int    `json:"line"`
		Column int    `json:"column"`
	}
	type file struct {
		Filename  string     `json:"file_name"`
		Mutations []mutation `json:"mutations"`
	}
	var r struct {
		Files []file `json:"files"`
	}
	for _, m := range ms {
		r.Files = append(r.Files, file{m.file, []mutation{{m.typ, m.status, m.line, m.column}}})
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	rep := filepath.Join(root, "report.json")
	if err := os.WriteFile(rep, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = run(&out, root, eqPath, []string{pkg + "=" + rep})
	return out.String(), err
}

// row gives the counts of label's row of the table out: killed, lived,
// equivalent.
func row(t *testing.T, out, label string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[0] == label {
			return strings.Join(f[1:4], " ")
		}
	}
	t.Fatalf("no row %s in\n%s", label, out)
	return ""
}

const docs = "| file | function | expression | mutator | why |\n|---|---|---|---|---|\n" +
	"| `p/a.go` | `f` | `n < 0` | CONDITIONALS_BOUNDARY | `n <= 0`: n is never 0. |\n"

const before = `package p

func f(n int) bool {
	if n < 0 {
		return false
	}
	return n > 10
}
`

// An edit elsewhere in the file moves the equivalent's line; its row,
// which names no line, still names it, and the table counts it as an
// equivalent at its new place, not as a mutant that lived.
func TestMovedLineStillMatches(t *testing.T) {
	root := module(t, map[string]string{"p/a.go": before})
	out, err := table(t, root, docs, "p", mutant{"a.go", "CONDITIONALS_BOUNDARY", "LIVED", 4, 7})
	if err != nil {
		t.Fatal(err)
	}
	if got := row(t, out, "p"); got != "0 0 1" {
		t.Fatalf("before the edit: killed, lived, equivalent %s, want 0 0 1:\n%s", got, out)
	}

	moved := strings.Replace(before, "func f(", "// g is new.\nfunc g(m int) int {\n\tif m > 0 {\n\t\treturn m - 1\n\t}\n\treturn 0\n}\n\nfunc f(", 1)
	root = module(t, map[string]string{"p/a.go": moved})
	out, err = table(t, root, docs, "p",
		mutant{"a.go", "CONDITIONALS_BOUNDARY", "LIVED", 12, 7}, // n < 0, moved
		mutant{"a.go", "CONDITIONALS_BOUNDARY", "LIVED", 5, 7},  // m > 0, where n < 0 was
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := row(t, out, "p"); got != "0 1 1" {
		t.Fatalf("after the edit: killed, lived, equivalent %s, want 0 1 1:\n%s", got, out)
	}
	if !strings.Contains(out, "p/a.go:5:7 CONDITIONALS_BOUNDARY in g: `m > 0`") {
		t.Fatalf("the mutant that lived is not listed with its function and expression:\n%s", out)
	}
}

// An edit to the equivalent's own expression makes it another mutant,
// perhaps one that a test kills or that makes a difference: the row names
// nothing, which is an error, and the mutant is no equivalent.
func TestEditedExpressionNoLongerMatches(t *testing.T) {
	root := module(t, map[string]string{"p/a.go": strings.Replace(before, "n < 0", "n < 1", 1)})
	out, err := table(t, root, docs, "p", mutant{"a.go", "CONDITIONALS_BOUNDARY", "LIVED", 4, 7})
	if err == nil || !strings.Contains(err.Error(), "mutants.md:3: `p/a.go` `f` `n < 0` CONDITIONALS_BOUNDARY names no mutant of the code") {
		t.Fatalf("error %v, want one for row 3 naming no mutant", err)
	}
	if !strings.Contains(err.Error(), "`n < 1` (line 4)") {
		t.Errorf("the error does not say what the function holds: %v", err)
	}
	if got := row(t, out, "p"); got != "0 1 0" {
		t.Fatalf("killed, lived, equivalent %s, want 0 1 0:\n%s", got, out)
	}
}

// A row's function or mutator is part of its name too.
func TestOtherFunctionOrMutatorNoLongerMatches(t *testing.T) {
	root := module(t, map[string]string{"p/a.go": strings.Replace(before, "func f(", "func h(", 1)})
	if _, err := table(t, root, docs, "p"); err == nil || !strings.Contains(err.Error(), "p/a.go has no CONDITIONALS_BOUNDARY mutant in f") {
		t.Fatalf("function renamed: error %v", err)
	}
	root = module(t, map[string]string{"p/a.go": before})
	if _, err := table(t, root, strings.Replace(docs, "CONDITIONALS_BOUNDARY", "ARITHMETIC_BASE", 1), "p"); err == nil || !strings.Contains(err.Error(), "no ARITHMETIC_BASE mutant in f") {
		t.Fatalf("another mutator: error %v", err)
	}
}

const twice = `package p

func f(n int, ok, done bool) bool {
	if n < 0 {
		return false
	}
	n--
	if n < 0 {
		return false
	}
	return n < 0 && ok || n < 0 || done
}
`

// A row whose expression the function holds more than once is an error
// that names each place; a wider expression, or "2 of 3", names one.
func TestAmbiguousRowReported(t *testing.T) {
	root := module(t, map[string]string{"p/a.go": twice})
	_, err := table(t, root, docs, "p")
	if err == nil || !strings.Contains(err.Error(), "names 4 mutants, at p/a.go:4:7, 8:7, 11:11, 11:26") {
		t.Fatalf("error %v, want one naming the four places", err)
	}
	for expr, at := range map[string]string{
		"`n < 0`, 2 of 4": "8:7",
		"`n < 0` 1 of 4":  "4:7",
		"`n<0 && ok`":     "11:11",
		"`n < 0`, 4 of 4": "11:26",
	} {
		d := strings.Replace(docs, "`n < 0`", expr, 1)
		out, err := table(t, root, d, "p", mutant{"a.go", "CONDITIONALS_BOUNDARY", "LIVED", 0, 0}.at(at))
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		if got := row(t, out, "p"); got != "0 0 1" {
			t.Errorf("%s: killed, lived, equivalent %s, want 0 0 1 (at %s):\n%s", expr, got, at, out)
		}
	}
	for expr, want := range map[string]string{
		"`n < 0`, 2 of 3":            "the function has 4 such mutants, not 3",
		"`n < 0`, 5 of 4":            "the expression is `words`, or `words`, 2 of 3",
		"`n < 0 && ok \\|\\| n < 0`": "names 2 mutants, at p/a.go:11:11, 11:26",
	} {
		_, err := table(t, root, strings.Replace(docs, "`n < 0`", expr, 1), "p")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", expr, err, want)
		}
	}
}

func (m mutant) at(lc string) mutant {
	fmt.Sscanf(lc, "%d:%d", &m.line, &m.column)
	return m
}

// Two rows that name the same mutant, a row of the form that named a
// line, and an unknown mutator are errors.
func TestBadRows(t *testing.T) {
	root := module(t, map[string]string{"p/a.go": before})
	for name, d := range map[string]string{
		"twice":      docs + "| `p/a.go` | `f` | `n<0` | CONDITIONALS_BOUNDARY | again |\n",
		"by line":    "| `p/a.go:4` | CONDITIONALS_BOUNDARY | why |\n",
		"by column":  "| `p/a.go:4:7` | CONDITIONALS_BOUNDARY | why |\n",
		"mutator":    "| `p/a.go` | `f` | `n < 0` | CONDITIONALS_BOUNDRY | why |\n",
		"no quotes":  "| `p/a.go` | `f` | n < 0 | CONDITIONALS_BOUNDARY | why |\n",
		"no file":    "| `p/b.go` | `f` | `n < 0` | CONDITIONALS_BOUNDARY | why |\n",
		"no such fn": "| `p/a.go` | `g` | `n < 0` | CONDITIONALS_BOUNDARY | why |\n",
	} {
		if _, err := table(t, root, d, "p"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := table(t, root, docs+"| `p/a.go` | `f` | `n<0` | CONDITIONALS_BOUNDARY | again |\n", "p"); err == nil || !strings.Contains(err.Error(), "mutants.md:4: `p/a.go` `f` `n < 0` CONDITIONALS_BOUNDARY names the mutant at p/a.go:4:7, as row 3 does") {
		t.Errorf("a row twice: error %v", err)
	}
}

// A report that names a mutant the code does not have was made from
// other code: its places cannot be matched to the rows.
func TestReportOlderThanCode(t *testing.T) {
	root := module(t, map[string]string{"p/a.go": before})
	_, err := table(t, root, docs, "p", mutant{"a.go", "CONDITIONALS_BOUNDARY", "LIVED", 5, 3})
	if err == nil || !strings.Contains(err.Error(), "p/a.go:5:3 CONDITIONALS_BOUNDARY: no such mutant in the code as it is") {
		t.Fatalf("error %v", err)
	}
}

// A function is named f, a method T.m whatever its receiver, and a
// mutant in a function literal by the declaration that holds it.
func TestFunctionNames(t *testing.T) {
	root := module(t, map[string]string{"p/a.go": `package p

type T struct{ n int }
type L[E any] []E

var limit = 1 + 2

func (t *T) m() bool { return t.n > 0 }
func (t T) v() bool  { return t.n > 1 }
func (l L[E]) g() bool { return len(l) > 2 }
func f() func(int) bool {
	return func(n int) bool { return n > 3 }
}
`})
	src := newSources(root)
	got := map[string]string{}
	for _, s := range src.get("p/a.go").sites {
		got[s.expr] = s.fn
	}
	want := map[string]string{"1 + 2": "limit", "t.n > 0": "T.m", "t.n > 1": "T.v", "len(l) > 2": "L.g", "n > 3": "f"}
	for expr, fn := range want {
		if got[expr] != fn {
			t.Errorf("`%s` is in %q, want %q", expr, got[expr], fn)
		}
	}
}

// A row's expression is the code's however it is spaced or broken.
func TestCanon(t *testing.T) {
	for in, want := range map[string]string{
		"n<0":                  "n < 0",
		"a*b+c":                "a*b + c",
		"a * b + c":            "a*b + c",
		"len(base)-len(extra)": "len(base) - len(extra)",
		"f(a,\n\tb)":           "f(a, b)",
		"i ++":                 "i++",
		"x+=1":                 "x += 1",
	} {
		if got := canon(in); got != want {
			t.Errorf("canon(%q) = %q, want %q", in, got, want)
		}
	}
	root := module(t, map[string]string{"p/a.go": "package p\n\nfunc f(a, b, c int) bool {\n\treturn a*b+\n\t\tc > 0\n}\n"})
	var exprs []string
	for _, s := range newSources(root).get("p/a.go").sites {
		exprs = append(exprs, s.expr)
	}
	if got := strings.Join(exprs, "; "); got != "a*b+c > 0; a*b + c; a * b" {
		t.Errorf("the code's expressions are %s", got)
	}
}

// A mutant in a switch's case is not covered whatever the tests do.
func TestBlindSpots(t *testing.T) {
	root := module(t, map[string]string{"p/a.go": "package p\n\nfunc f(n int) int {\n\tswitch {\n\tcase n > 0:\n\t\treturn n - 1\n\t}\n\treturn 0\n}\n"})
	out, err := table(t, root, "", "p",
		mutant{"a.go", "CONDITIONALS_BOUNDARY", "NOT COVERED", 5, 9},
		mutant{"a.go", "ARITHMETIC_BASE", "NOT COVERED", 6, 12},
	)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "not covered in p, blind spots aside:\n  p/a.go:6:12 ARITHMETIC_BASE\n") || strings.Contains(out, "p/a.go:5:9") {
		t.Fatalf("the case's mutant is not a blind spot, or the return's is:\n%s", out)
	}
}

// Every row of docs/mutants.md names one mutant of the code as it is.
func TestDocsMutants(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	eqPath := filepath.Join(root, "docs", "mutants.md")
	var out bytes.Buffer
	if err := run(&out, root, eqPath, nil); err != nil {
		t.Fatal(err)
	}
	eqs, _, err := readEquivalents(eqPath)
	if err != nil || len(eqs) == 0 {
		t.Fatalf("docs/mutants.md: %d rows, %v", len(eqs), err)
	}
}
