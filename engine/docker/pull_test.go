package docker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// TestPull checks that a pull's progress is the bytes done out of the
// total over all layers (a message without a total leaves a layer's as it
// was), and that the credential goes to the engine in
// its header (Docker Hub's under its historical address), or none at all.
func TestPull(t *testing.T) {
	cases := []struct {
		name       string
		ref        string
		auth       *engine.Auth
		wantServer string // "": no header
	}{
		{"anonymous", "x:1", nil, ""},
		{"private registry", "registry.example:5000/x:1", &engine.Auth{Username: "bob", Password: "pw", Registry: "registry.example:5000"}, "registry.example:5000"},
		{"Docker Hub", "x:1", &engine.Auth{Username: "bob", Password: "pw", Registry: "docker.io"}, "https://index.docker.io/v1/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var header string
			sock := rr.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/_ping" {
					w.Header().Set("Api-Version", "1.41")
					return
				}
				mu.Lock()
				header = r.Header.Get("X-Registry-Auth")
				mu.Unlock()
				line := func(id string, cur, total int) {
					fmt.Fprintf(w, `{"status":"Downloading","id":%q,"progressDetail":{"current":%d,"total":%d}}`+"\n", id, cur, total)
				}
				for i := 1; i <= 50; i++ {
					line("a", i*10, 500)
				}
				line("b", 100, 1000)
				// A layer's last word has no total: its progress stands.
				fmt.Fprintln(w, `{"status":"Pull complete","id":"a","progressDetail":{}}`)
				fmt.Fprintln(w, `{"status":"Status: Downloaded newer image for x:1"}`)
			}))
			ref, _ := imageref.Parse(tc.ref)
			e := &Engine{C: &dockerapi.Client{Socket: sock}}
			var seen [][2]int64
			err := e.Pull(context.Background(), ref, tc.auth, func(done, total int64) { seen = append(seen, [2]int64{done, total}) })
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) != 53 || seen[49] != [2]int64{500, 500} || seen[50] != [2]int64{600, 1500} || seen[51] != [2]int64{600, 1500} || seen[52] != [2]int64{600, 1500} {
				t.Errorf("progress = %v…%v (%d calls), want 53 calls, ending 500/500, 600/1500, 600/1500, 600/1500", seen[:min(3, len(seen))], seen[max(0, len(seen)-4):], len(seen))
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.wantServer == "" {
				if header != "" {
					t.Errorf("X-Registry-Auth = %q, want none", header)
				}
				return
			}
			data, err := base64.URLEncoding.DecodeString(header)
			var got struct{ Username, Password, ServerAddress string }
			if err != nil || json.Unmarshal(data, &got) != nil || got.Username != tc.auth.Username || got.Password != tc.auth.Password || got.ServerAddress != tc.wantServer {
				t.Errorf("X-Registry-Auth = %q (%s), want %s's credential for %s", header, data, tc.auth.Username, tc.wantServer)
			}
		})
	}
}
