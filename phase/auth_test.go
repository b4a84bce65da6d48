package phase

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestRegistryAuth covers where phase 1 finds registry credentials: the
// WAITDAEMON_REGISTRY_ pair, else the auths of a Docker config.json.
func TestRegistryAuth(t *testing.T) {
	const (
		private  = "registry.example:5000/team/app:1"
		password = "pa55-w0rd-unit"
		hubKey   = "https://index.docker.io/v1/"
	)
	cases := []struct {
		name       string
		user, pass string
		config     *string // config.json's content; nil: no file
		ref        string
		want       *engine.Auth
		wantErr    string // in the error; "" means no error
		wantCode   int    // exitCode of the error
	}{
		{
			name: "environment pair", user: "bob", pass: password, ref: private,
			want: &engine.Auth{Username: "bob", Password: password, Registry: "registry.example:5000"},
		},
		{
			name: "environment pair for Docker Hub", user: "bob", pass: password, ref: "alpine:3.20",
			want: &engine.Auth{Username: "bob", Password: password, Registry: "docker.io"},
		},
		{
			name: "environment pair wins over config.json", user: "bob", pass: password, ref: private,
			config: ptr(fmt.Sprintf(`{"auths":{"registry.example:5000":{"auth":%q}}}`, b64("alice:other"))),
			want:   &engine.Auth{Username: "bob", Password: password, Registry: "registry.example:5000"},
		},
		{
			name:   "config.json auth for the registry",
			config: ptr(fmt.Sprintf(`{"auths":{"other.example":{"auth":%q},"registry.example:5000":{"auth":%q}}}`, b64("eve:nope"), b64("alice:"+password))),
			ref:    private,
			want:   &engine.Auth{Username: "alice", Password: password, Registry: "registry.example:5000"},
		},
		{
			name:   "config.json key with a scheme and a path",
			config: ptr(fmt.Sprintf(`{"auths":{"https://registry.example:5000/v2/":{"auth":%q}}}`, b64("alice:"+password))),
			ref:    private,
			want:   &engine.Auth{Username: "alice", Password: password, Registry: "registry.example:5000"},
		},
		{
			name:   "a password with a colon",
			config: ptr(fmt.Sprintf(`{"auths":{"registry.example:5000":{"auth":%q}}}`, b64("alice:"+password+":x"))),
			ref:    private,
			want:   &engine.Auth{Username: "alice", Password: password + ":x", Registry: "registry.example:5000"},
		},
		{
			name:   "config.json identity token",
			config: ptr(`{"auths":{"registry.example:5000":{"identitytoken":"tok-123"}}}`),
			ref:    private,
			want:   &engine.Auth{IdentityToken: "tok-123", Registry: "registry.example:5000"},
		},
		{
			name:   "Docker Hub key for a bare image name",
			config: ptr(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, hubKey, b64("hubuser:"+password))),
			ref:    "alpine",
			want:   &engine.Auth{Username: "hubuser", Password: password, Registry: "docker.io"},
		},
		{
			name:   "Docker Hub key for docker.io/library/alpine",
			config: ptr(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, hubKey, b64("hubuser:"+password))),
			ref:    "docker.io/library/alpine:3.20",
			want:   &engine.Auth{Username: "hubuser", Password: password, Registry: "docker.io"},
		},
		{
			name:   "Docker Hub key for an image on registry-1.docker.io",
			config: ptr(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, hubKey, b64("hubuser:"+password))),
			ref:    "registry-1.docker.io/library/alpine:3.20",
			want:   &engine.Auth{Username: "hubuser", Password: password, Registry: "docker.io"},
		},
		{
			name:   "registry-1.docker.io key for an image on registry.hub.docker.com",
			config: ptr(fmt.Sprintf(`{"auths":{"registry-1.docker.io":{"auth":%q}}}`, b64("hubuser:"+password))),
			ref:    "registry.hub.docker.com/library/alpine:3.20",
			want:   &engine.Auth{Username: "hubuser", Password: password, Registry: "docker.io"},
		},
		{
			name:   "Docker Hub key does not match a private registry",
			config: ptr(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, hubKey, b64("hubuser:"+password))),
			ref:    private,
		},
		{
			name:   "no entry for the registry",
			config: ptr(fmt.Sprintf(`{"auths":{"other.example:5000":{"auth":%q}}}`, b64("alice:"+password))),
			ref:    private,
		},
		{
			name:   "the same host on another port does not match",
			config: ptr(fmt.Sprintf(`{"auths":{"registry.example":{"auth":%q}}}`, b64("alice:"+password))),
			ref:    private,
		},
		{
			// A credential helper's layout: the entry is there, the secret
			// is in the helper. Nothing here authenticates, so the pull is
			// anonymous, and nothing may claim otherwise.
			name:   "an empty entry (credsStore layout) is anonymous",
			config: ptr(`{"auths":{"registry.example:5000":{}},"credsStore":"pass"}`),
			ref:    private,
		},
		{
			name:   "config.json without auths",
			config: ptr(`{"credsStore":"desktop"}`),
			ref:    private,
		},
		{
			name:    "malformed config.json",
			config:  ptr(`{"auths":{"registry.example:5000":`),
			ref:     private,
			wantErr: "config.json: expected a Docker config.json with \"auths\"", wantCode: engine.ExitInput,
		},
		{
			name:    "auth that is not base64",
			config:  ptr(`{"auths":{"registry.example:5000":{"auth":"!!not base64!!"}}}`),
			ref:     private,
			wantErr: `config.json: the auth of "registry.example:5000": expected base64 of user:password`, wantCode: engine.ExitInput,
		},
		{
			name:    "auth without a colon",
			config:  ptr(fmt.Sprintf(`{"auths":{"registry.example:5000":{"auth":%q}}}`, b64("alice"))),
			ref:     private,
			wantErr: `config.json: the auth of "registry.example:5000": expected base64 of user:password`, wantCode: engine.ExitInput,
		},
		{
			name: "no config.json",
			ref:  private,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "config.json")
			if tc.config != nil {
				if err := os.WriteFile(file, []byte(*tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			ref, err := imageref.Parse(tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			s := Settings{Image: ref, RegistryConfig: dir, registry: credentials{tc.user, tc.pass}}
			got, err := s.Auth(ref)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || exitCode(err) != tc.wantCode {
					t.Fatalf("Auth = %v, %v (exit code %d), want an error with %q and exit code %d", got, err, exitCode(err), tc.wantErr, tc.wantCode)
				}
				if tc.config != nil && !strings.Contains(err.Error(), file) {
					t.Errorf("error %q does not name the file %s", err, file)
				}
				if strings.Contains(err.Error(), password) {
					t.Errorf("error %q holds the password", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Auth: %v", err)
			}
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("Auth = %s, want nil (anonymous)", got)
			case tc.want != nil && got == nil:
				t.Fatalf("Auth = nil, want %s", tc.want)
			case tc.want != nil && *got != *tc.want:
				t.Fatalf("Auth = %+v, want %+v", fields(*got), fields(*tc.want))
			}
			if got != nil {
				noPassword(t, *got, password)
			}
		})
	}
}

// TestRegistryAuthFiles covers config.json paths that are not a file.
func TestRegistryAuthFiles(t *testing.T) {
	ref, err := imageref.Parse("registry.example:5000/team/app:1")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("missing DOCKER_CONFIG directory", func(t *testing.T) {
		got, err := Settings{Image: ref, RegistryConfig: filepath.Join(t.TempDir(), "nonexistent")}.Auth(ref)
		if got != nil || err != nil {
			t.Fatalf("Auth = %v, %v; want nil, nil", got, err)
		}
	})
	t.Run("config.json that cannot be read", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "config.json"), 0o700); err != nil {
			t.Fatal(err)
		}
		got, err := Settings{Image: ref, RegistryConfig: dir}.Auth(ref)
		if got != nil || err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "config.json")) {
			t.Fatalf("Auth = %v, %v; want an error naming the file", got, err)
		}
	})
}

// TestAuthNeverPrintsThePassword formats credentials every way a log
// line, a plan or an error might.
func TestAuthNeverPrintsThePassword(t *testing.T) {
	for _, a := range []engine.Auth{
		{Username: "bob", Password: "pa55-w0rd-unit", Registry: "registry.example:5000"},
		{Username: "bob", Password: "pa55-w0rd-unit", IdentityToken: "pa55-w0rd-unit", Registry: "docker.io"},
		{IdentityToken: "pa55-w0rd-unit", Registry: "registry.example:5000"},
	} {
		noPassword(t, a, "pa55-w0rd-unit")
	}
	ref, _ := imageref.Parse("registry.example:5000/team/app:1")
	s := Settings{Image: ref, PullPolicy: PullAlways, RegistryConfig: t.TempDir(), registry: credentials{"bob", "pa55-w0rd-unit"}}
	p, err := decidePull(t.Context(), nil, s, ref) // "always" decides without the engine
	if err != nil {
		t.Fatal(err)
	}
	if p.Decision != decisionPull || p.Auth != "bob@registry.example:5000" {
		t.Errorf("pull plan = %+v, want decision pull and auth %q", p, "bob@registry.example:5000")
	}
	var b strings.Builder
	logEvent(&b, "handed off", Handoff{Pull: []pullPlan{p}})
	if strings.Contains(b.String(), "pa55-w0rd-unit") {
		t.Errorf("the hand-off line holds the password: %s", b.String())
	}
}

// noPassword checks every way a might be printed.
func noPassword(t *testing.T, a engine.Auth, password string) {
	t.Helper()
	for _, s := range []string{a.String(), a.GoString(), fmt.Sprintf("%v %+v %#v %s", &a, &a, &a, &a), fmt.Errorf("pulling: %v", &a).Error()} {
		if strings.Contains(s, password) {
			t.Errorf("%s holds the password", s)
		}
	}
}

// fields shows an Auth's fields in a failure message (String hides them
// on purpose).
func fields(a engine.Auth) string {
	return fmt.Sprintf("{Username:%q Password:%q IdentityToken:%q Registry:%q}", a.Username, a.Password, a.IdentityToken, a.Registry)
}

// exitCode is the exit code err carries, as main reads it; 1 without one.
func exitCode(err error) int {
	var e interface{ ExitCode() int }
	if errors.As(err, &e) {
		return e.ExitCode()
	}
	return 1
}

func ptr[T any](v T) *T { return &v }
