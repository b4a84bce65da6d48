package dockerapi

import "testing"

func TestRedact(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"Env":["WAITDAEMON_REGISTRY_PASSWORD=Pa55\"w0rd","FOO=bar"]}`, `{"Env":["WAITDAEMON_REGISTRY_PASSWORD=<redacted>","FOO=bar"]}`},
		{`["GITHUB_TOKEN=ghp_x","api_key=k","MY_SECRET_VALUE=s","DB_PASSWD=p","PATH=/bin"]`, `["GITHUB_TOKEN=<redacted>","api_key=<redacted>","MY_SECRET_VALUE=<redacted>","DB_PASSWD=<redacted>","PATH=/bin"]`},
		{`{"message":"password is wrong"}`, `{"message":"password is wrong"}`},
		{`["PASSWORD=x"]`, `["PASSWORD=<redacted>"]`},
	}
	for _, tc := range cases {
		if got := string(Redact([]byte(tc.in))); got != tc.want {
			t.Errorf("Redact(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestOpenProbe: the probe that finds an entry still open is one that
// secretEnv takes for a secret, whole, from a lone quote on; were it not,
// the stream trace would give out the beginnings of secrets.
func TestOpenProbe(t *testing.T) {
	for _, open := range []string{`"`, `"MY_`, `"GITHUB_TOKEN`, `"API_KEY=`, `"DB_PASSWD=ab\`, `"X_SECRET=a\"b`} {
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
