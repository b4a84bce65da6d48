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
