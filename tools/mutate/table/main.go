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
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
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
	livedAt                                    []string
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
		rows = append(rows, count(label, r, eqs))
	}
	write(w, rows)
	for _, e := range eqs {
		if !e.used {
			fmt.Fprintf(w, "\nnote: %s:%d %s of %s lived in no report: kill it with a test, or drop its line\n", e.file, e.line, e.typ, eqPath)
		}
	}
	return nil
}

func count(label string, r report, eqs []*equivalent) counts {
	c := counts{label: label}
	for _, f := range r.Files {
		for _, m := range f.Mutations {
			switch m.Status {
			case "KILLED":
				c.killed++
			case "LIVED":
				c.lived++
				if e := find(eqs, f.Filename, m.Line, m.Column, m.Type); e != nil {
					e.used = true
					c.equiv++
				} else {
					c.livedAt = append(c.livedAt, fmt.Sprintf("%s:%d:%d %s", f.Filename, m.Line, m.Column, m.Type))
				}
			case "NOT COVERED":
				c.notCovered++
			case "TIMED OUT":
				c.timedOut++
			}
		}
	}
	sort.Strings(c.livedAt)
	return c
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
	fmt.Fprintln(tw, "package\tkilled\tlived\tequivalent\tnot covered\ttimed out\tefficacy\twith equivalents\tcoverage\t")
	all := counts{label: "all"}
	for _, c := range rows {
		all.killed += c.killed
		all.lived += c.lived
		all.equiv += c.equiv
		all.notCovered += c.notCovered
		all.timedOut += c.timedOut
	}
	for _, c := range append(rows, all) {
		covered := c.killed + c.lived
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", c.label, c.killed, c.lived-c.equiv, c.equiv, c.notCovered, c.timedOut,
			pct(c.killed, covered), pct(c.killed+c.equiv, covered), pct(covered, covered+c.notCovered))
	}
	tw.Flush()
	for _, c := range rows {
		if len(c.livedAt) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nlived in %s:\n", c.label)
		for _, l := range c.livedAt {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}
