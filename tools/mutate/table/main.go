// Command table turns gremlins' JSON reports (unleash --output), one per
// package, into one table: killed, lived, not covered, timed out, the
// efficacy raw and with the equivalent mutants of docs/mutants.md counted
// as killed, and the coverage.
//
//	table -equivalents docs/mutants.md phase=bin/mutate/phase.json ...
//
// An argument is label=report, or a report alone, labelled by its name.
// The lived mutants are listed under the table, each with its mutator,
// its function and its expression, so that the next test has a line to
// aim at, or the next row of docs/mutants.md its words. Efficacy is
// killed / (killed + lived); coverage, as gremlins counts it, is (killed
// + lived) / (killed + lived + not covered): a timed-out mutant is in
// neither. "lived" in the table leaves out the listed equivalents.
//
// An equivalent is named by its file, the function that holds it, the
// expression gremlins mutates (an operator's: `n < 0`, `i++`) and the
// mutator, never by its line, so that an edit elsewhere in the file does
// not lose it. Each row must name one mutant of the code as it is: a row
// that names none (its expression edited, its function renamed) or more
// than one is an error, and so is a report that names a mutant the code
// no longer has. Given no report, the table only checks the rows.
//
// Some mutants are not covered whatever the tests do: gremlins takes
// coverage from a coverage profile, which never counts the expressions of
// a switch's case nor package-level var and const declarations, so it
// never runs a mutant there. The table counts these blind spots apart,
// and "seen" is the coverage without them: the share of the mutants
// gremlins can see as reached that the tests reach. A package is run
// from the module's root (or -root), its label its directory.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
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

// equivalent is one row of docs/mutants.md: a mutant that makes no
// difference, named by its file, its function, its expression and its
// mutator. line and column are where that names today, once resolved.
type equivalent struct {
	row          int // the row's line in docs/mutants.md
	file         string
	fn           string
	expr         string // as canon gives it
	nth, of      int    // the nth of the of mutants expr names; 0, 0: the one
	typ          string
	line, column int
	used         bool
}

func (e *equivalent) String() string {
	if e.of > 0 {
		return fmt.Sprintf("`%s` `%s` `%s` %d of %d %s", e.file, e.fn, e.expr, e.nth, e.of, e.typ)
	}
	return fmt.Sprintf("`%s` `%s` `%s` %s", e.file, e.fn, e.expr, e.typ)
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
	root := flag.String("root", ".", "the module's root: the rows' files and the labels are paths from it")
	flag.Parse()
	if err := run(os.Stdout, *root, *eqPath, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "table:", err)
		os.Exit(1)
	}
}

// run writes the table of the reports args, and returns the rows of
// eqPath that name no mutant or several, and the mutants of a report the
// code does not have, as one error, once the table is written.
func run(w io.Writer, root, eqPath string, args []string) error {
	src := newSources(root)
	var eqs []*equivalent
	var bad []error
	if eqPath != "" {
		var rowErrs []error
		var err error
		if eqs, rowErrs, err = readEquivalents(eqPath); err != nil {
			return err
		}
		bad = append(bad, rowErrs...)
		for _, err := range resolve(eqs, src) {
			bad = append(bad, fmt.Errorf("%s:%w", eqPath, err))
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
		c, errs := count(label, r, eqs, src)
		rows = append(rows, c)
		for _, err := range errs {
			bad = append(bad, fmt.Errorf("%s: %w", path, err))
		}
	}
	if len(args) > 0 {
		write(w, rows)
	} else if eqPath != "" && len(bad) == 0 {
		fmt.Fprintf(w, "%d equivalents in %s, each at one mutant of the code\n", len(eqs), eqPath)
	}
	for _, e := range eqs {
		if e.line > 0 && !e.used && slices.ContainsFunc(rows, func(c counts) bool { return path.Dir(e.file) == c.label }) {
			fmt.Fprintf(w, "\nnote: %s:%d (%s:%d) lived in no report: kill it with a test, or drop its row\n", eqPath, e.row, e.file, e.line)
		}
	}
	return errors.Join(bad...)
}

// count tallies one package's report. A lived mutant that is a listed
// equivalent counts apart; one the code as it is does not have (the
// report older than an edit) is an error, since an equivalent is matched
// by where it is in the code as it is.
func count(label string, r report, eqs []*equivalent, src *sources) (counts, []error) {
	c := counts{label: label}
	var errs []error
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
					continue
				}
				at := fmt.Sprintf("%s:%d:%d %s", file, m.Line, m.Column, m.Type)
				if s := src.siteAt(file, m.Line, m.Column, m.Type); s != nil {
					at += fmt.Sprintf(" in %s: `%s`", s.fn, s.expr)
				} else {
					errs = append(errs, fmt.Errorf("%s: no such mutant in the code as it is: the report is older than the code; run gremlins again", at))
				}
				c.livedAt = append(c.livedAt, at)
			case "NOT COVERED":
				c.notCovered++
				if src.blind(file, m.Line, m.Column) {
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
	return c, errs
}

func find(eqs []*equivalent, file string, line, column int, typ string) *equivalent {
	for _, e := range eqs {
		if e.file == file && e.line == line && e.column == column && e.typ == typ {
			return e
		}
	}
	return nil
}

// mutators is, for each token, the mutators gremlins (v0.6.0,
// internal/engine/mappings.go) applies to it, default or not.
var mutators = map[token.Token][]string{
	token.ADD:            {"ARITHMETIC_BASE"},
	token.ADD_ASSIGN:     {"INVERT_ASSIGNMENTS", "REMOVE_SELF_ASSIGNMENTS"},
	token.AND:            {"INVERT_BITWISE"},
	token.AND_ASSIGN:     {"REMOVE_SELF_ASSIGNMENTS", "INVERT_BWASSIGN"},
	token.AND_NOT:        {"INVERT_BITWISE"},
	token.AND_NOT_ASSIGN: {"REMOVE_SELF_ASSIGNMENTS", "INVERT_BWASSIGN"},
	token.BREAK:          {"INVERT_LOOPCTRL"},
	token.CONTINUE:       {"INVERT_LOOPCTRL"},
	token.DEC:            {"INCREMENT_DECREMENT"},
	token.EQL:            {"CONDITIONALS_NEGATION"},
	token.GEQ:            {"CONDITIONALS_BOUNDARY", "CONDITIONALS_NEGATION"},
	token.GTR:            {"CONDITIONALS_BOUNDARY", "CONDITIONALS_NEGATION"},
	token.INC:            {"INCREMENT_DECREMENT"},
	token.LAND:           {"INVERT_LOGICAL"},
	token.LEQ:            {"CONDITIONALS_BOUNDARY", "CONDITIONALS_NEGATION"},
	token.LOR:            {"INVERT_LOGICAL"},
	token.LSS:            {"CONDITIONALS_BOUNDARY", "CONDITIONALS_NEGATION"},
	token.MUL:            {"ARITHMETIC_BASE"},
	token.MUL_ASSIGN:     {"INVERT_ASSIGNMENTS", "REMOVE_SELF_ASSIGNMENTS"},
	token.NEQ:            {"CONDITIONALS_NEGATION"},
	token.OR:             {"INVERT_BITWISE"},
	token.OR_ASSIGN:      {"REMOVE_SELF_ASSIGNMENTS", "INVERT_BWASSIGN"},
	token.QUO:            {"ARITHMETIC_BASE"},
	token.QUO_ASSIGN:     {"INVERT_ASSIGNMENTS", "REMOVE_SELF_ASSIGNMENTS"},
	token.REM:            {"ARITHMETIC_BASE"},
	token.REM_ASSIGN:     {"INVERT_ASSIGNMENTS", "REMOVE_SELF_ASSIGNMENTS"},
	token.SHL:            {"INVERT_BITWISE"},
	token.SHL_ASSIGN:     {"REMOVE_SELF_ASSIGNMENTS", "INVERT_BWASSIGN"},
	token.SHR:            {"INVERT_BITWISE"},
	token.SHR_ASSIGN:     {"REMOVE_SELF_ASSIGNMENTS", "INVERT_BWASSIGN"},
	token.SUB:            {"INVERT_NEGATIVES", "ARITHMETIC_BASE"},
	token.SUB_ASSIGN:     {"INVERT_ASSIGNMENTS", "REMOVE_SELF_ASSIGNMENTS"},
	token.XOR:            {"INVERT_BITWISE"},
	token.XOR_ASSIGN:     {"REMOVE_SELF_ASSIGNMENTS", "INVERT_BWASSIGN"},
}

// site is one token gremlins mutates, as engine.NewTokenNode finds it:
// the operator of an assignment, a binary or unary expression, an
// increment or decrement, or a break or continue.
type site struct {
	line, column int
	mutators     []string
	fn           string   // the declaration that holds it: f, T.m, or a var's name
	expr         string   // the node whose token it is, as canon gives it
	wider        []string // the expressions around expr, innermost first, and the simple statement that holds them
}

// sources parses the module's files, once each, for their mutants and
// their blind spots.
type sources struct {
	root  string
	fset  *token.FileSet
	files map[string]*parsed
}

type parsed struct {
	f     *ast.File
	err   error
	sites []site
	spans [][2]token.Position // blind spots
}

func newSources(root string) *sources {
	return &sources{root: root, fset: token.NewFileSet(), files: map[string]*parsed{}}
}

func (s *sources) get(file string) *parsed {
	if p, ok := s.files[file]; ok {
		return p
	}
	p := &parsed{}
	s.files[file] = p
	p.f, p.err = parser.ParseFile(s.fset, filepath.Join(s.root, filepath.FromSlash(file)), nil, 0)
	if p.err != nil {
		return p
	}
	p.sites = sitesOf(s.fset, p.f)
	p.spans = blindSpots(s.fset, p.f)
	return p
}

func (s *sources) siteAt(file string, line, column int, typ string) *site {
	for i, st := range s.get(file).sites {
		if st.line == line && st.column == column && slices.Contains(st.mutators, typ) {
			return &s.get(file).sites[i]
		}
	}
	return nil
}

// blind tells whether a mutant is where gremlins cannot see coverage.
func (s *sources) blind(file string, line, column int) bool {
	for _, sp := range s.get(file).spans {
		from, to := sp[0], sp[1]
		if (line > from.Line || line == from.Line && column >= from.Column) && (line < to.Line || line == to.Line && column < to.Column) {
			return true
		}
	}
	return false
}

// blindSpots finds, in a file, the places a coverage profile never
// counts, so that gremlins reports a mutant there as not covered whatever
// the tests do: the expressions of a switch's case (a profile's blocks
// end at the switch and start after the case's colon) and the package's
// own var and const declarations (run before any test).
func blindSpots(fset *token.FileSet, f *ast.File) [][2]token.Position {
	var spans [][2]token.Position
	span := func(from, to token.Pos) {
		spans = append(spans, [2]token.Position{fset.Position(from), fset.Position(to)})
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

// sitesOf lists every token of f that gremlins mutates, by any mutator.
func sitesOf(fset *token.FileSet, f *ast.File) []site {
	var sites []site
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		var tok token.Token
		var pos token.Pos
		switch n := n.(type) {
		case *ast.AssignStmt:
			tok, pos = n.Tok, n.TokPos
		case *ast.BinaryExpr:
			tok, pos = n.Op, n.OpPos
		case *ast.BranchStmt:
			tok, pos = n.Tok, n.TokPos
		case *ast.IncDecStmt:
			tok, pos = n.Tok, n.TokPos
		case *ast.UnaryExpr:
			tok, pos = n.Op, n.OpPos
		}
		ms, ok := mutators[tok]
		if !ok {
			return true
		}
		p := fset.Position(pos)
		st := site{line: p.Line, column: p.Column, mutators: ms, expr: source(n)}
		if len(stack) > 1 {
			st.fn = declName(stack[1])
		}
	wider:
		for i := len(stack) - 2; i > 0; i-- {
			switch stack[i].(type) {
			case ast.Expr:
				st.wider = append(st.wider, source(stack[i]))
			case *ast.AssignStmt, *ast.ExprStmt, *ast.ReturnStmt, *ast.IncDecStmt, *ast.SendStmt, *ast.GoStmt, *ast.DeferStmt, *ast.ValueSpec:
				st.wider = append(st.wider, source(stack[i]))
				break wider
			default:
				break wider
			}
		}
		sites = append(sites, st)
		return true
	})
	return sites
}

// declName names a declaration of a file: a function f, a method T.m
// (whatever its receiver's star or type parameters), or the first name a
// var, const or type declaration declares.
func declName(d ast.Node) string {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil || len(d.Recv.List) == 0 {
			return d.Name.Name
		}
		t := d.Recv.List[0].Type
		for {
			switch x := t.(type) {
			case *ast.StarExpr:
				t = x.X
				continue
			case *ast.ParenExpr:
				t = x.X
				continue
			case *ast.IndexExpr:
				t = x.X
				continue
			case *ast.IndexListExpr:
				t = x.X
				continue
			}
			break
		}
		if id, ok := t.(*ast.Ident); ok {
			return id.Name + "." + d.Name.Name
		}
		return d.Name.Name
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.ValueSpec:
				return s.Names[0].Name
			case *ast.TypeSpec:
				return s.Name.Name
			}
		}
	}
	return ""
}

// source gives a node's source as gofmt prints it, on one line, whatever
// its place in the file: a line broken or spaced otherwise is the same
// expression.
func source(n ast.Node) string {
	var b bytes.Buffer
	if err := printer.Fprint(&b, token.NewFileSet(), n); err != nil {
		return ""
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// canon gives a row's expression as source gives the code's: parsed as an
// expression, or else as a statement, and printed; words that parse as
// neither are kept with their spaces made single.
func canon(s string) string {
	s = strings.TrimSpace(s)
	if x, err := parser.ParseExpr(s); err == nil {
		return source(x)
	}
	if f, err := parser.ParseFile(token.NewFileSet(), "", "package p; func _() {\n"+s+"\n}", 0); err == nil {
		if b := f.Decls[0].(*ast.FuncDecl).Body; len(b.List) == 1 {
			return source(b.List[0])
		}
	}
	return strings.Join(strings.Fields(s), " ")
}

// resolve finds each row's mutant in the code as it is: the one site of
// the row's file and function, open to the row's mutator, whose
// expression is the row's, or lies in one that is (so that a row can
// widen an expression the function holds twice); or, where the row says
// "2 of 2" (the function holds the same words twice), the second of
// exactly two, in the order of the source. A row that names none, more
// than one, or one another row names too, is an error.
func resolve(eqs []*equivalent, src *sources) []error {
	var errs []error
	at := map[[3]string]*equivalent{}
	for _, e := range eqs {
		p := src.get(e.file)
		if p.err != nil {
			errs = append(errs, fmt.Errorf("%d: %s: %w", e.row, e, p.err))
			continue
		}
		var found, inFn []site
		for _, s := range p.sites {
			if s.fn != e.fn || !slices.Contains(s.mutators, e.typ) {
				continue
			}
			inFn = append(inFn, s)
			if s.expr == e.expr || slices.Contains(s.wider, e.expr) {
				found = append(found, s)
			}
		}
		sort.Slice(found, func(i, j int) bool {
			return found[i].line < found[j].line || found[i].line == found[j].line && found[i].column < found[j].column
		})
		if e.of > 0 {
			if len(found) != e.of {
				errs = append(errs, fmt.Errorf("%d: %s: the function has %d such mutants, not %d: read the row again", e.row, e, len(found), e.of))
				continue
			}
			found = found[e.nth-1 : e.nth]
		}
		switch len(found) {
		case 0:
			var why string
			if len(inFn) == 0 {
				why = fmt.Sprintf("%s has no %s mutant in %s", e.file, e.typ, e.fn)
			} else {
				var have []string
				for _, s := range inFn {
					have = append(have, fmt.Sprintf("`%s` (line %d)", s.expr, s.line))
				}
				why = fmt.Sprintf("%s's %s mutants in %s are %s", e.file, e.typ, e.fn, strings.Join(have, ", "))
			}
			errs = append(errs, fmt.Errorf("%d: %s names no mutant of the code: %s", e.row, e, why))
		case 1:
			e.line, e.column = found[0].line, found[0].column
			k := [3]string{e.file, fmt.Sprint(e.line, ":", e.column), e.typ}
			if o := at[k]; o != nil {
				errs = append(errs, fmt.Errorf("%d: %s names the mutant at %s:%d:%d, as row %d does", e.row, e, e.file, e.line, e.column, o.row))
				e.line, e.column = 0, 0
				continue
			}
			at[k] = e
		default:
			var lines []string
			for _, s := range found {
				lines = append(lines, fmt.Sprintf("%d:%d", s.line, s.column))
			}
			errs = append(errs, fmt.Errorf("%d: %s names %d mutants, at %s:%s: give an expression around it that the function holds once, or say which: `expression`, 1 of %[3]d", e.row, e, len(found), e.file, strings.Join(lines, ", ")))
		}
	}
	return errs
}

// readEquivalents reads the rows of the tables of docs/mutants.md whose
// first cell is a Go file, in backquotes:
//
//	| `phase/two.go` | `waiter.follow` | `time.Since(lostAt) >= engineLost` | CONDITIONALS_BOUNDARY | why |
//
// the file, from the module's root; the function (T.m for a method); the
// expression gremlins mutates, as the code has it (a `|` in it written
// `\|`), followed by "2 of 2" where the function holds it twice, word
// for word; the mutator; why it makes no difference. A row that starts so
// but is not of that form is an error (in errs), not a row left out.
func readEquivalents(name string) ([]*equivalent, []error, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var eqs []*equivalent
	var errs []error
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		cells := splitRow(s.Text())
		if len(cells) == 0 || !strings.HasPrefix(cells[0], "`") || !strings.Contains(unquote(cells[0]), ".go") {
			continue
		}
		if len(cells) < 5 || !strings.HasSuffix(unquote(cells[0]), ".go") {
			errs = append(errs, fmt.Errorf("%s:%d: a row is | `file` | `function` | `expression` | MUTATOR | why |, not %q", name, n, s.Text()))
			continue
		}
		e := &equivalent{row: n, file: unquote(cells[0]), fn: unquote(cells[1]), typ: strings.TrimSpace(cells[3])}
		expr, ok := exprCell(cells[2], &e.nth, &e.of)
		if !ok {
			errs = append(errs, fmt.Errorf("%s:%d: the expression is `words`, or `words`, 2 of 3; not %q", name, n, cells[2]))
			continue
		}
		e.expr = canon(expr)
		if !known(e.typ) {
			errs = append(errs, fmt.Errorf("%s:%d: %q is no mutator of gremlins'", name, n, e.typ))
			continue
		}
		if e.fn == "" || e.expr == "" {
			errs = append(errs, fmt.Errorf("%s:%d: the row names no function or no expression", name, n))
			continue
		}
		eqs = append(eqs, e)
	}
	if err := s.Err(); err != nil {
		return nil, nil, err
	}
	return eqs, errs, nil
}

// exprCell reads an expression's cell: `words`, or `words`, n of m
// where the function holds those words m times, 1 <= n <= m, m > 1.
func exprCell(cell string, nth, of *int) (string, bool) {
	cell = strings.TrimSpace(cell)
	if m := ordinal.FindStringSubmatch(cell); m != nil {
		cell = strings.TrimSpace(m[1])
		*nth, _ = strconv.Atoi(m[2])
		*of, _ = strconv.Atoi(m[3])
		if *of < 2 || *nth < 1 || *nth > *of {
			return "", false
		}
	}
	if !strings.HasPrefix(cell, "`") || !strings.HasSuffix(cell, "`") {
		return "", false
	}
	return unquote(cell), true
}

var ordinal = regexp.MustCompile("^(.*`)\\s*,?\\s*(\\d+) of (\\d+)$")

func known(typ string) bool {
	for _, ms := range mutators {
		if slices.Contains(ms, typ) {
			return true
		}
	}
	return false
}

// splitRow gives the cells of a Markdown table's row, a `\|` in one kept
// as `|`, or none if the line is no row.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") {
		return nil
	}
	var cells []string
	var cell strings.Builder
	for i := 1; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cell.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(line[i])
		}
	}
	if rest := strings.TrimSpace(cell.String()); rest != "" {
		cells = append(cells, rest)
	}
	return cells
}

// unquote takes a cell's backquotes off: one each side, or as many as
// the cell opens with (an expression that holds a backquote has two).
func unquote(cell string) string {
	cell = strings.TrimSpace(cell)
	q := len(cell) - len(strings.TrimLeft(cell, "`"))
	if q > 0 && len(cell) >= 2*q && strings.HasSuffix(cell, strings.Repeat("`", q)) {
		cell = cell[q : len(cell)-q]
	}
	return strings.TrimSpace(cell)
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
