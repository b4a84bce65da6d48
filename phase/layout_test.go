package phase

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestFunctionsShort: every function of the phases fits on a screen
// (40 lines), so that each reads as the steps it takes.
func TestFunctionsShort(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			seen++
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if lines > 40 {
				t.Errorf("%s: %s is %d lines; split it (at most 40)", fset.Position(fn.Pos()), fn.Name.Name, lines)
			}
		}
	}
	if seen < 20 {
		t.Errorf("read %d functions; want the package's", seen)
	}
}
