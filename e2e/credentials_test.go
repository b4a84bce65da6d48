package e2e

import (
	"encoding/base64"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// trapRegistry is a registry that asks every client for a login, 401 with
// a Basic challenge, and records the Authorization header of each request
// it is sent: it stands for a registry the operator's credentials are not
// for.
type trapRegistry struct {
	addr string
	mu   sync.Mutex
	seen []string // "METHOD path Authorization"
}

func startTrapRegistry(t *testing.T) *trapRegistry {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &trapRegistry{addr: ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.mu.Lock()
		tr.seen = append(tr.seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		tr.mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="trap"`)
		w.Header().Set("Docker-Distribution-Api-Version", "registry/2.0")
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return tr
}

func (tr *trapRegistry) requests() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.seen...)
}

// TestCredentialsStayWithTheirRegistry: the WAITDAEMON_REGISTRY_ pair is
// IMAGE's. A fallback image on another registry is pulled without it: that
// registry, though it asks for a login, is never sent IMAGE's username
// and password.
func TestCredentialsStayWithTheirRegistry(t *testing.T) {
	onDockers(t, func(t *testing.T, c *dockerapi.Client) {
		addr := startRegistry(t, true)
		ref := pushProbe(t, c, addr, true)
		trap := startTrapRegistry(t)
		fallback := trap.addr + "/e2e/fallback:1"
		removeImage(t, c, ref)

		r := runAction(t, c, tinkWorker, action{name: "e2e credentials fallback", command: []string{"reboot"}, env: map[string]string{
			"IMAGE": ref, "WAIT_SECONDS": "1",
			"WAITDAEMON_REGISTRY_USERNAME": registryUser, "WAITDAEMON_REGISTRY_PASSWORD": registryPassword,
			"WAITDAEMON_FALLBACK_IMAGE": fallback, "WAITDAEMON_FALLBACK_COMMAND": `["reboot","-f"]`,
		}})
		t.Logf("the action's output:\n%s", r.Logs)
		// The fallback cannot be pulled: the action fails, naming that pull.
		if r.ExitCode != 1 || !strings.Contains(r.Logs, "pulling image "+fallback) {
			t.Errorf("exit %d; want 1, and the fallback's pull named", r.ExitCode)
		}
		seen := trap.requests()
		if len(seen) == 0 {
			t.Fatalf("the engine never asked %s for the fallback: the test proves nothing", trap.addr)
		}
		basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(registryUser+":"+registryPassword))
		for _, s := range seen {
			if strings.Contains(s, basic) || strings.Contains(s, registryPassword) {
				t.Errorf("the fallback's registry was sent IMAGE's credentials: %s", s)
			}
		}
		t.Logf("the fallback's registry was asked: %s", strings.Join(seen, "; "))
		noSecret(t, map[string]string{"action's output": r.Logs}, registryPassword)
		waitGone(t, rigOf(c), r.ID, 5*time.Second)
	})
}
