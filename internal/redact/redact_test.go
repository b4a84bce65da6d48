package redact

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"Env":["WAITDAEMON_REGISTRY_PASSWORD=Pa55\"w0rd","FOO=bar"]}`, `{"Env":["WAITDAEMON_REGISTRY_PASSWORD=<redacted>","FOO=bar"]}`},
		{`["GITHUB_TOKEN=ghp_x","api_key=k","MY_SECRET_VALUE=s","DB_PASSWD=p","PATH=/bin"]`, `["GITHUB_TOKEN=<redacted>","api_key=<redacted>","MY_SECRET_VALUE=<redacted>","DB_PASSWD=<redacted>","PATH=/bin"]`},
		{`{"message":"password is wrong"}`, `{"message":"password is wrong"}`},
		{`["PASSWORD=x"]`, `["PASSWORD=<redacted>"]`},
		// Docker takes names with dots and dashes, as Java's and others'
		// settings are spelt.
		{`["spring.datasource.password=p","DB-PASSWORD=q","app.secret.key=r","my-app.api-key=s","log.level=debug"]`,
			`["spring.datasource.password=<redacted>","DB-PASSWORD=<redacted>","app.secret.key=<redacted>","my-app.api-key=<redacted>","log.level=debug"]`},
	}
	for _, tc := range cases {
		if got := string(Secrets([]byte(tc.in))); got != tc.want {
			t.Errorf("Secrets(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestSecretName: the names whose values are hidden, by the one rule.
func TestSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"WAITDAEMON_REGISTRY_PASSWROD": false, "WAITDAEMON_REGISTRY_PASSWORD": true, "spring.datasource.password": true,
		"DB-PASSWORD": true, "GITHUB_TOKEN": true, "api_key": true, "apikey": true, "WAITDAEMON_RETRY": false, "PATH": false,
		"WAITDAEMON_REGISTRY_SECRETS": true, "X=PASSWORD": false,
	} {
		if got := SecretName(name); got != want {
			t.Errorf("SecretName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestOpenProbe: the probe that finds an entry still open is one that
// secretEnv takes for a secret, whole, from a lone quote on; were it not,
// the stream trace would give out the beginnings of secrets.
func TestOpenProbe(t *testing.T) {
	for _, open := range []string{`"`, `"MY_`, `"spring.datasource.`, `"DB-`, `"GITHUB_TOKEN`, `"API_KEY=`, `"DB_PASSWD=ab\`, `"X_SECRET=a\"b`} {
		in := open + openProbe
		if loc := secretEnv.FindStringIndex(in); loc == nil || loc[0] != 0 || loc[1] != len(in) {
			t.Errorf("secretEnv matches %q at %v, want all of it", in, loc)
		}
	}
	for _, closed := range []string{`"PATH=/bin`, `"PASSWORD=x" `, `"a,`} {
		in := closed + openProbe
		if loc := secretEnv.FindStringIndex(in); loc != nil && loc[0] == 0 && loc[1] == len(in) {
			t.Errorf("secretEnv matches all of %q, want it not to: %q opens no secret", in, closed)
		}
	}
}

// TestRedactorPieces: a Stream gives out each line as soon as the piece
// that ends it comes, redacted, and holds back only what may still become
// a secret entry: one open across a line's end, even after a closed one;
// a closed entry longer than it holds back is given out, not withheld.
func TestRedactorPieces(t *testing.T) {
	long := `"BIG_TOKEN=` + strings.Repeat("s3cr3t", maxHeld/6+1) + `"`
	full, half := strings.Repeat("b", maxHeld), strings.Repeat("h", maxHeld*3/5)
	type step struct {
		piece, out  string
		wantTooLong bool
	}
	cases := []struct {
		name  string
		steps []step
		end   string
	}{
		{"a line ended by the next piece's first byte", []step{{"abc", "", false}, {"\ndef", "abc\n", false}}, "def"},
		{"a piece that begins with a line's end, then an open entry", []step{{"\n\"API_TOKEN=ab", "\n", false}, {"cd\"\n", "\"API_TOKEN=<redacted>\"\n", false}}, ""},
		{"an entry open across a line's end, after a closed one", []step{
			{"\"A_TOKEN=x\" \"B_PASSWORD=ab\n", "", false},
			{"cd\" end\n", "\"A_TOKEN=<redacted>\" \"B_PASSWORD=<redacted>\" end\n", false},
		}, ""},
		{"a closed entry longer than what is held back", []step{{long, `"BIG_TOKEN=<redacted>"`, false}, {"rest\n", "rest\n", false}}, ""},
		{"a line end inside a closed entry is no place to cut", []step{
			{"\"A_TOKEN=x\ny\" \"B_PASSWORD=ab", "", false},
			{"cd\"\n", "\"A_TOKEN=<redacted>\" \"B_PASSWORD=<redacted>\"\n", false},
		}, ""},
		{"a line end right after a closed entry is", []step{{"\"A_TOKEN=x\"\n\"B_PASSWORD=ab", "\"A_TOKEN=<redacted>\"\n", false}}, "\"B_PASSWORD=ab"},
		{"a line end before the first closed entry is", []step{
			{"x\n\"A_TOKEN=y\" \"B_PASSWORD=ab", "x\n", false},
			{"cd\"\n", "\"A_TOKEN=<redacted>\" \"B_PASSWORD=<redacted>\"\n", false},
		}, ""},
		{"a line held back whole, up to what it holds back", []step{{"x\n" + full, "x\n", false}, {"\n", full + "\n", false}}, ""},
		{"a long line's complete lines given out alone", []step{{half + "\n" + half, half + "\n", false}}, half},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r Stream
			for i, s := range tc.steps {
				out, tooLong := r.Next([]byte(s.piece))
				if string(out) != s.out || tooLong != s.wantTooLong {
					t.Errorf("piece %d: next() = %.80q, too long %v; want %q, %v", i, out, tooLong, s.out, s.wantTooLong)
				}
			}
			if got := string(r.End()); got != tc.end {
				t.Errorf("end() = %q, want %q", got, tc.end)
			}
		})
	}
}

// TestRedactorCutOff: a body cut off shows what is held back, redacted,
// and <redacted> only for an entry still open.
func TestRedactorCutOff(t *testing.T) {
	cases := []struct{ held, want string }{
		{`{"status":"Pulling"}`, `{"status":"Pulling"}`},
		{`["PATH=/bin","API_TOKEN=ab`, `["PATH=/bin",<redacted>`},
		{`["API_TOKEN=ab"]`, `["API_TOKEN=<redacted>"]`},
	}
	for _, tc := range cases {
		var r Stream
		if out, _ := r.Next([]byte(tc.held)); len(out) != 0 {
			t.Fatalf("next(%q) gave out %q before the line's end", tc.held, out)
		}
		if got := string(r.CutOff()); got != tc.want {
			t.Errorf("cutOff() of %q = %q, want %q", tc.held, got, tc.want)
		}
	}
}
