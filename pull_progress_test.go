package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/internal/rr"
)

// TestPullProgress checks that a pull's progress is logged at most once a
// second, as bytes done out of the total over all layers.
func TestPullProgress(t *testing.T) {
	sock := rr.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_ping" {
			w.Header().Set("Api-Version", "1.41")
			return
		}
		f := w.(http.Flusher)
		line := func(id string, cur, total int) {
			fmt.Fprintf(w, `{"status":"Downloading","id":%q,"progressDetail":{"current":%d,"total":%d}}`+"\n", id, cur, total)
			f.Flush()
		}
		for i := 1; i <= 50; i++ { // many lines within the first second
			line("a", i*10, 500)
		}
		time.Sleep(1100 * time.Millisecond)
		line("b", 100, 1000)
		fmt.Fprintln(w, `{"status":"Status: Downloaded newer image for x:1"}`)
	}))
	ref, _ := dockerapi.ParseReference("x:1")
	var out bytes.Buffer
	c := &dockerapi.Client{Socket: sock}
	if err := pull(context.Background(), c, settings{image: ref}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"done_bytes":600,`) || !strings.Contains(lines[0], `"total_bytes":1500`) {
		t.Errorf("progress lines:\n%s\nwant exactly one, after a second, with 600 of 1500 bytes", out.String())
	}
}
