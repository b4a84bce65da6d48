package dockerapi_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
)

// TestImagePullQuery checks that a pull always names a tag or a digest:
// a bare name would pull every tag.
const testDigest = "sha256:7cc4b5aefd1d0cadf8d97d4350462ba51c694ebca145b08d7d41b41acc8db5aa"

func TestImagePullQuery(t *testing.T) {
	cases := []struct {
		ref       string
		fromImage string
		tag       string
	}{
		{"alpine", "alpine", "latest"},
		{"alpine:3.20", "alpine", "3.20"},
		{"library/alpine", "library/alpine", "latest"},
		{"127.0.0.1:5000/rr/good:1", "127.0.0.1:5000/rr/good", "1"},
		{"registry.example:5000/tools/reboot", "registry.example:5000/tools/reboot", "latest"},
		{"alpine@" + testDigest, "alpine", testDigest},
		{"alpine:3.20@" + testDigest, "alpine", testDigest},
	}
	for _, tc := range cases {
		t.Run(tc.ref, func(t *testing.T) {
			var queries seen
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || r.URL.Path != "/v1.41/images/create" {
					t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
				}
				queries.add(r.URL.RawQuery)
				if _, ok := r.Header["X-Registry-Auth"]; ok {
					t.Errorf("X-Registry-Auth sent without credentials")
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"status":"Status: Image is up to date"}`+"\n")
			})
			ref, err := imageref.Parse(tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.ImagePull(shortCtx(t), ref, nil, nil); err != nil {
				t.Fatalf("ImagePull() error = %v", err)
			}
			got := queries.get()
			want := url.Values{"fromImage": {tc.fromImage}, "tag": {tc.tag}}.Encode()
			if len(got) != 1 || got[0] != want {
				t.Errorf("queries (-want +got):\n-%q\n+%q", []string{want}, got)
			}
		})
	}
}

// TestImagePullErrors covers the two ways a pull fails: a status before
// the stream starts, and an error line after a 200.
func TestImagePullErrors(t *testing.T) {
	cases := []struct {
		name       string
		status     int
		body       string
		wantStatus int // 0: not a *dockerapi.Error
		wantText   string
		wantSeen   []string
	}{
		{
			name:   "mid-stream",
			status: 200,
			body: `{"status":"Pulling from rr/broken","id":"1"}` + "\n" +
				`{"status":"Pulling fs layer","progressDetail":{},"id":"abc"}` + "\n" +
				`{"errorDetail":{"message":"unknown blob"},"error":"unknown blob"}` + "\n",
			wantText: "pulling image 127.0.0.1:5000/rr/broken:1: unknown blob",
			wantSeen: []string{"Pulling from rr/broken", "Pulling fs layer"},
		},
		{
			name:       "up front",
			status:     404,
			body:       `{"message":"manifest for 127.0.0.1:5000/rr/broken:1 not found: manifest unknown: manifest unknown"}`,
			wantStatus: 404,
			wantText:   "pulling image 127.0.0.1:5000/rr/broken:1: POST /v1.41/images/create: 404: manifest for 127.0.0.1:5000/rr/broken:1 not found: manifest unknown: manifest unknown",
		},
		{
			name:       "up front, 500",
			status:     500,
			body:       `{"message":"Get \"https://127.0.0.1:5000/v2/\": dial tcp 127.0.0.1:5000: connect: connection refused"}`,
			wantStatus: 500,
			wantText:   `pulling image 127.0.0.1:5000/rr/broken:1: POST /v1.41/images/create: 500: Get "https://127.0.0.1:5000/v2/": dial tcp 127.0.0.1:5000: connect: connection refused`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got hits
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				got.add(r)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})
			ref, _ := imageref.Parse("127.0.0.1:5000/rr/broken:1")
			var statuses []string
			err := c.ImagePull(shortCtx(t), ref, nil, func(m dockerapi.PullMessage) { statuses = append(statuses, m.Status) })
			if err == nil || err.Error() != tc.wantText {
				t.Errorf("ImagePull() error (-want +got):\n-%s\n+%v", tc.wantText, err)
			}
			var apiErr *dockerapi.Error
			if errors.As(err, &apiErr) != (tc.wantStatus != 0) || tc.wantStatus != 0 && apiErr.Status != tc.wantStatus {
				t.Errorf("errors.As(err, *Error) = %+v, want status %d (0: none)", apiErr, tc.wantStatus)
			}
			if d := linediff.Lines(tc.wantSeen, statuses); d != "" {
				t.Errorf("progress (-want +got):\n%s", d)
			}
			if n := got.total(); n != 1 {
				t.Errorf("the engine got %d pulls, want 1", n)
			}
		})
	}
}

// TestImagePullBrokenStream: a pull whose stream breaks off is asked for
// again, a bounded number of times.
func TestImagePullBrokenStream(t *testing.T) {
	for _, tc := range []struct {
		name      string
		breaks    int // pulls that break before one completes
		wantPulls int
		wantErr   string
	}{
		{"breaks once", 1, 2, ""},
		{"always breaks", 100, 5, "pulling image 127.0.0.1:5000/rr/app:1: reading progress: the stream broke off: unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got hits
			c := pinnedEngine(t, func(w http.ResponseWriter, r *http.Request) {
				n := got.add(r)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(200)
				_, _ = io.WriteString(w, `{"status":"Pulling from rr/app","id":"1"}`+"\n"+`{"status":"Downlo`)
				if n <= tc.breaks {
					w.(http.Flusher).Flush()
					panic(http.ErrAbortHandler)
				}
				_, _ = io.WriteString(w, `ading"}`+"\n")
			})
			ref, _ := imageref.Parse("127.0.0.1:5000/rr/app:1")
			err := c.ImagePull(shortCtx(t), ref, nil, nil)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Errorf("ImagePull() error = %v, want %q", err, tc.wantErr)
			}
			if n := got.total(); n != tc.wantPulls {
				t.Errorf("the engine got %d pulls, want %d", n, tc.wantPulls)
			}
		})
	}
}

// TestAuthConfigString checks that printing credentials never shows the
// secret.
func TestAuthConfigString(t *testing.T) {
	password := dockerapi.AuthConfig{Username: "u", Password: "s3cret-pw", ServerAddress: "registry.example:5000"}
	token := dockerapi.AuthConfig{IdentityToken: "s3cret-pw", ServerAddress: "registry.example:5000"}
	cases := []struct {
		name string
		text string
		want string // "" when only the secret's absence is checked
	}{
		{"Sprint password", fmt.Sprint(password), "credentials for registry.example:5000 (user u)"},
		{"Sprint token", fmt.Sprint(token), "identity token for registry.example:5000"},
		{"Sprint pointer", fmt.Sprint(&password), "credentials for registry.example:5000 (user u)"},
		{"%v", fmt.Sprintf("%v", password), "credentials for registry.example:5000 (user u)"},
		{"%+v", fmt.Sprintf("%+v", password), "credentials for registry.example:5000 (user u)"},
		{"%s", fmt.Sprintf("%s", token), "identity token for registry.example:5000"},
		{"%q", fmt.Sprintf("%q", password), `"credentials for registry.example:5000 (user u)"`},
		{"nested %+v", fmt.Sprintf("%+v", struct{ Auth dockerapi.AuthConfig }{password}), "{Auth:credentials for registry.example:5000 (user u)}"},
		{"error", fmt.Errorf("pulling with %v: %w", password, errors.New("denied")).Error(), "pulling with credentials for registry.example:5000 (user u): denied"},
		// %#v is what a debugging log line prints; the type promises it
		// never prints its credentials.
		{"%#v password", fmt.Sprintf("%#v", password), ""},
		{"%#v token", fmt.Sprintf("%#v", token), ""},
	}
	secrets := []string{"s3cret-pw", base64.StdEncoding.EncodeToString([]byte("s3cret-pw")), base64.URLEncoding.EncodeToString([]byte("s3cret-pw"))}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want != "" && tc.text != tc.want {
				t.Errorf("printed (-want +got):\n-%s\n+%s", tc.want, tc.text)
			}
			for _, s := range secrets {
				if strings.Contains(tc.text, s) {
					t.Errorf("printed %q, which contains the secret %q", tc.text, s)
				}
			}
		})
	}
}
