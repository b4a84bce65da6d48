package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/phase"
)

// TestHelpMatchesSettings: --help's list of variables and
// docs/settings.md's table are one: the same variables in the same
// order, each row's meaning opening with --help's words (its first
// sentence, or all of it), and its default --help's "(default …)", or
// "required" for "(required)". The README's table names every variable,
// with the same defaults. A meaning or default changed on one side alone
// fails here.
func TestHelpMatchesSettings(t *testing.T) {
	out, _, code := runCLI(t, "--help")
	if code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	data, err := os.ReadFile("docs/settings.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := settingsRows(string(data))
	if len(rows) != len(phase.Variables) {
		t.Errorf("docs/settings.md's table has %d variables, --help %d", len(rows), len(phase.Variables))
	}
	for i, v := range phase.Variables {
		if !strings.Contains(out, v.Help) {
			t.Errorf("--help lacks %s's help %q", v.Name, v.Help)
		}
		meaning, def := splitHelp(v.Help)
		if i >= len(rows) {
			t.Errorf("docs/settings.md's table lacks %s", v.Name)
			continue
		}
		r := rows[i]
		if r.names[0] != v.Name || len(r.names) != 1 {
			t.Errorf("docs/settings.md's row %d is %q; --help's variable %d is %s", i+1, r.names, i+1, v.Name)
			continue
		}
		if !helpOpens(r.meaning, meaning) {
			t.Errorf("docs/settings.md's %s means %q; want it to open with --help's %q, then end or go on with \". \"", v.Name, r.meaning, meaning)
		}
		if r.def != def {
			t.Errorf("docs/settings.md's %s defaults to %q; --help says %q", v.Name, r.def, def)
		}
	}

	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	inReadme := map[string]string{}
	for _, r := range settingsRows(string(readme)) {
		for _, n := range r.names {
			inReadme[n] = r.def
		}
	}
	for _, v := range phase.Variables {
		def, ok := inReadme[v.Name]
		_, want := splitHelp(v.Help)
		switch {
		case !ok:
			t.Errorf("the README's Settings lack %s", v.Name)
		case def != want:
			t.Errorf("the README's Settings default %s to %q; --help says %q", v.Name, def, want)
		}
	}
}

// TestHelpMatchesSettingsRefuses: the rules of TestHelpMatchesSettings
// refuse a meaning that drifted, and read a help's default.
func TestHelpMatchesSettingsRefuses(t *testing.T) {
	for _, tc := range []struct {
		doc, help string
		ok        bool
	}{
		{"whole seconds to wait", "whole seconds to wait", true},
		{"whole seconds to wait. More here", "whole seconds to wait", true},
		{"whole seconds to wait after the action exits", "whole seconds to wait", false},
		{"whole seconds to wait after the action exits", "whole seconds to wait after the removal", false},
	} {
		if got := helpOpens(tc.doc, tc.help); got != tc.ok {
			t.Errorf("helpOpens(%q, %q) = %v; want %v", tc.doc, tc.help, got, tc.ok)
		}
	}
	for help, want := range map[string][2]string{
		"lines, 0 to 1000 (default 20)":        {"lines, 0 to 1000", "20"},
		"the image (required)":                 {"the image", "required"},
		"user for the registry named in IMAGE": {"user for the registry named in IMAGE", ""},
	} {
		if m, d := splitHelp(help); m != want[0] || d != want[1] {
			t.Errorf("splitHelp(%q) = %q, %q; want %q, %q", help, m, d, want[0], want[1])
		}
	}
	rows := settingsRows("| variable | meaning | default |\n|---|---|---|\n| `A`, `B` | x [y](z) `w` | `v` |\n\n| other | table |\n|---|---|\n| `C` | d |\n")
	if len(rows) != 1 || strings.Join(rows[0].names, ",") != "A,B" || rows[0].meaning != "x y w" || rows[0].def != "v" {
		t.Errorf("settingsRows: %+v; want one row, A and B, meaning \"x y w\", default \"v\"", rows)
	}
}

// splitHelp is a variable's help without its default, and the default:
// "(default X)" gives X, "(required)" required.
func splitHelp(help string) (meaning, def string) {
	if m, ok := strings.CutSuffix(help, " (required)"); ok {
		return m, "required"
	}
	if m := regexp.MustCompile(`^(.*) \(default ([^()]*)\)$`).FindStringSubmatch(help); m != nil {
		return m[1], m[2]
	}
	return help, ""
}

// helpOpens reports whether a row's meaning is help's, or opens with it
// as its first sentence.
func helpOpens(meaning, help string) bool {
	return meaning == help || strings.HasPrefix(meaning, help+". ")
}

type settingsRow struct {
	names        []string
	meaning, def string
}

// settingsRows are the rows of a page's first table headed
// | variable | meaning | default |, as plain text: code spans and
// links reduced to their words.
func settingsRows(page string) []settingsRow {
	plain := strings.NewReplacer("`", "")
	link := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	var rows []settingsRow
	in := false
	for _, line := range strings.Split(page, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "| variable | meaning | default |":
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && strings.HasPrefix(line, "| "):
			cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "| "), "|"), " | ")
			if len(cells) != 3 {
				rows = append(rows, settingsRow{names: []string{line}})
				continue
			}
			var names []string
			for _, n := range strings.Split(cells[0], ",") {
				names = append(names, strings.TrimSpace(plain.Replace(n)))
			}
			meaning := strings.TrimSpace(link.ReplaceAllString(plain.Replace(cells[1]), "$1"))
			rows = append(rows, settingsRow{names, meaning, strings.TrimSpace(plain.Replace(cells[2]))})
		case in:
			return rows
		}
	}
	return rows
}
