// Command table turns gremlins' JSON reports (unleash --output), one per
// package, into one table: killed, lived, not covered, timed out, the
// efficacy raw and with the equivalent mutants of docs/mutants.md counted
// as killed, and the coverage.
//
//	table -equivalents docs/mutants.md phase=bin/mutate/phase.json ...
//
// An argument is label=report, or a report alone, labelled by its name.
// The lived mutants are listed under the table, each with its mutator,
// so that the next test has a line to aim at. Efficacy is killed /
// (killed + lived); coverage, as gremlins counts it, is (killed + lived)
// / (killed + lived + not covered): a timed-out mutant is in neither.
// "lived" in the table leaves out the listed equivalents.
//
// Some mutants are not covered whatever the tests do: gremlins takes
// coverage from a coverage profile, which never counts the expressions of
// a switch's case nor package-level var and const declarations, so it
// never runs a mutant there. The table counts these blind spots apart,
// and "seen" is the coverage without them: the share of the mutants
// gremlins can see as reached that the tests reach. A package is run
// from the module's root, its label its directory.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// report is the part of gremlins' output file this reads.
type report struct {
	Files []struct {
		Filename  string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

// equivalent is one line of docs/mutants.md: a mutant that makes no
// difference, at file:line (and :column when given) for one mutator.
type equivalent struct {
	file   string
	line   int
	column int // 0: any column of the line
	typ    string
	used   bool
}

// counts is one row of the table.
type counts struct {
	label                                      string
	killed, lived, notCovered, timedOut, equiv int
	blind                                      int // of notCovered: where gremlins cannot see coverage
	livedAt, notCoveredAt                      []string
}

func main() {
	eqPath := flag.String("equivalents", "", "the list of equivalent mutants (docs/mutants.md)")
	flag.Parse()
	if err := run(os.Stdout, *eqPath, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "table:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, eqPath string, args []string) error {
	var eqs []*equivalent
	if eqPath != "" {
		var err error
		if eqs, err = readEquivalents(eqPath); err != nil {
			return err
		}
	}
	var rows []counts
	for _, a := range args {
		label, path, ok := strings.Cut(a, "=")
		if !ok {
			path = a
			label = strings.TrimSuffix(filepath.Base(a), ".json")
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var r report
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		rows = append(rows, count(label, r, eqs, newBlindSpots()))
	}
	write(w, rows)
	for _, e := range eqs {
		if !e.used && slices.ContainsFunc(rows, func(c counts) bool { return path.Dir(e.file) == c.label }) {
			fmt.Fprintf(w, "\nnote: %s:%d %s of %s lived in no report: kill it with a test, or drop its line\n", e.file, e.line, e.typ, eqPath)
		}
	}
	return nil
}

func count(label string, r report, eqs []*equivalent, blind *blindSpots) counts {
	c := counts{label: label}
	for _, f := range r.Files {
		file := path.Join(label, f.Filename) // gremlins names it from the package's directory
		for _, m := range f.Mutations {
			switch m.Status {
			case "KILLED":
				c.killed++
			case "LIVED":
				c.lived++
				if e := find(eqs, file, m.Line, m.Column, m.Type); e != nil {
					e.used = true
					c.equiv++
				} else {
					c.livedAt = append(c.livedAt, fmt.Sprintf("%s:%d:%d %s", file, m.Line, m.Column, m.Type))
				}
			case "NOT COVERED":
				c.notCovered++
				if blind.at(file, m.Line, m.Column) {
					c.blind++
				} else {
					c.notCoveredAt = append(c.notCoveredAt, fmt.Sprintf("%s:%d:%d %s", file, m.Line, m.Column, m.Type))
				}
			case "TIMED OUT":
				c.timedOut++
			}
		}
	}
	sort.Strings(c.livedAt)
	sort.Strings(c.notCoveredAt)
	return c
}

// blindSpots finds, in a package's files, the places a coverage profile
// never counts, so that gremlins reports a mutant there as not covered
// whatever the tests do: the expressions of a switch's case (a profile's
// blocks end at the switch and start after the case's colon) and the
// package's own var and const declarations (run before any test).
type blindSpots struct {
	fset  *token.FileSet
	files map[string][][2]token.Position // spans, by file name
}

func newBlindSpots() *blindSpots {
	return &blindSpots{fset: token.NewFileSet(), files: map[string][][2]token.Position{}}
}

func (b *blindSpots) at(file string, line, column int) bool {
	spans, ok := b.files[file]
	if !ok {
		spans = b.parse(file)
		b.files[file] = spans
	}
	for _, s := range spans {
		from, to := s[0], s[1]
		if (line > from.Line || line == from.Line && column >= from.Column) && (line < to.Line || line == to.Line && column < to.Column) {
			return true
		}
	}
	return false
}

func (b *blindSpots) parse(file string) [][2]token.Position {
	f, err := parser.ParseFile(b.fset, file, nil, 0)
	if err != nil {
		return nil
	}
	var spans [][2]token.Position
	span := func(from, to token.Pos) {
		spans = append(spans, [2]token.Position{b.fset.Position(from), b.fset.Position(to)})
	}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && (g.Tok == token.VAR || g.Tok == token.CONST) {
			span(g.Pos(), g.End())
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if c, ok := n.(*ast.CaseClause); ok && len(c.List) > 0 {
			span(c.List[0].Pos(), c.Colon)
		}
		return true
	})
	return spans
}

func find(eqs []*equivalent, file string, line, column int, typ string) *equivalent {
	for _, e := range eqs {
		if e.file == file && e.line == line && e.typ == typ && (e.column == 0 || e.column == column) {
			return e
		}
	}
	return nil
}

// A row of docs/mutants.md's table starts with the mutant's place in
// backquotes, then its mutator: | `phase/two.go:42` | CONDITIONALS_BOUNDARY | why |
var eqRow = regexp.MustCompile("^\\|\\s*`([^`:]+):(\\d+)(?::(\\d+))?`\\s*\\|\\s*([A-Z_]+)\\s*\\|")

func readEquivalents(path string) ([]*equivalent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var eqs []*equivalent
	s := bufio.NewScanner(f)
	for s.Scan() {
		m := eqRow.FindStringSubmatch(s.Text())
		if m == nil {
			continue
		}
		line, _ := strconv.Atoi(m[2])
		col, _ := strconv.Atoi(m[3])
		eqs = append(eqs, &equivalent{file: m[1], line: line, column: col, typ: m[4]})
	}
	return eqs, s.Err()
}

func pct(n, d int) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(d))
}

func write(w io.Writer, rows []counts) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "package\tkilled\tlived\tequivalent\tnot covered\t(blind)\ttimed out\tefficacy\twith equivalents\tcoverage\tseen\t")
	all := counts{label: "all"}
	for _, c := range rows {
		all.killed += c.killed
		all.lived += c.lived
		all.equiv += c.equiv
		all.notCovered += c.notCovered
		all.blind += c.blind
		all.timedOut += c.timedOut
	}
	for _, c := range append(rows, all) {
		covered := c.killed + c.lived
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", c.label, c.killed, c.lived-c.equiv, c.equiv, c.notCovered, c.blind, c.timedOut,
			pct(c.killed, covered), pct(c.killed+c.equiv, covered), pct(covered, covered+c.notCovered), pct(covered, covered+c.notCovered-c.blind))
	}
	tw.Flush()
	for _, c := range rows {
		list(w, "lived in "+c.label, c.livedAt)
		list(w, "not covered in "+c.label+", blind spots aside", c.notCoveredAt)
	}
}

func list(w io.Writer, title string, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, l := range lines {
		fmt.Fprintf(w, "  %s\n", l)
	}
}
