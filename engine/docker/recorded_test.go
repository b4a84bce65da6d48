package docker

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// recorded is the answer a real engine gave, in fixture file
// testdata/fixtures/<engine>/<name>.json, to the first request with
// method whose path ends with suffix and whose query is query: for a fake
// engine to give it again.
func recorded(t *testing.T, engine, name, method, suffix, query string) rr.Message {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../testdata/fixtures", engine, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var f rr.Fixture
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	for _, ex := range f.Exchanges {
		if ex.Request.Method == method && strings.HasSuffix(ex.Request.Path, suffix) && ex.Request.Query == query {
			return ex.Response
		}
	}
	t.Fatalf("%s/%s.json: no answer to %s …%s?%s", engine, name, method, suffix, query)
	return rr.Message{}
}

// answer writes a recorded answer.
func answer(w http.ResponseWriter, m rr.Message) {
	for k, v := range m.Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(m.Status)
	switch {
	case len(m.JSON) > 0:
		_, _ = w.Write(append(m.JSON, '\n'))
	case len(m.Lines) > 0:
		_, _ = w.Write([]byte(strings.Join(m.Lines, "")))
	case m.Base64 != "":
		b, _ := base64.StdEncoding.DecodeString(m.Base64)
		_, _ = w.Write(b)
	}
}
