package docker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/selfid"
	"github.com/waitdaemon/waitdaemon/testkit/rr"
)

// Two running containers: other, whose /etc/hosts the action shares
// (NetworkMode container:other), listed first, and the action itself.
var (
	otherID  = strings.Repeat("a", 64)
	actionID = strings.Repeat("b", 64)
)

// sharedNetwork is what the action sees of itself under NetworkMode
// container:other with a private cgroup namespace: other's files in the
// mount table's root fields, its own ID only further on.
func sharedNetwork(override string) selfid.Sources {
	return selfid.Sources{Override: override, Mountinfo: strings.Join([]string{
		"600 590 8:1 /var/lib/docker/containers/" + otherID + "/resolv.conf /etc/resolv.conf rw - ext4 /dev/sda1 rw",
		"601 590 8:1 /var/lib/docker/containers/" + otherID + "/hostname /etc/hostname rw - ext4 /dev/sda1 rw",
		"602 590 8:1 /var/lib/docker/containers/" + otherID + "/hosts /etc/hosts rw - ext4 /dev/sda1 rw",
		"603 590 0:50 / /run/x/containers/" + actionID + "/userdata rw - tmpfs tmpfs rw",
	}, "\n"), Hostname: otherID[:12]}
}

// withRoot is sources with the root overlay mounted as the action's, as
// Docker mounts it: its upperdir is the action's own.
func withRoot(sources func(string) selfid.Sources) func(string) selfid.Sources {
	return func(override string) selfid.Sources {
		src := sources(override)
		src.Mountinfo = "590 1 0:60 / / ro,relatime - overlay overlay ro,lowerdir=/var/lib/docker/overlay2/l/A,upperdir=" + upperOf(actionID) + ",workdir=/var/lib/docker/overlay2/x/work\n" + src.Mountinfo
		return src
	}
}

// upperOf is the upper directory Docker gives container id.
func upperOf(id string) string { return "/var/lib/docker/overlay2/" + id[:8] + "/diff" }

// TestSameUpper: the root overlay's upper directory, absolute or relative
// to the engine's own directory, against inspect's.
func TestSameUpper(t *testing.T) {
	cases := []struct {
		inspected, mounted string
		want               bool
	}{
		{"/var/lib/docker/overlay2/abc/diff", "/var/lib/docker/overlay2/abc/diff", true},
		{"/var/lib/docker/overlay2/abc/diff", "/var/lib/docker/overlay2/abd/diff", false},
		{"/var/lib/docker/overlay2/abc/diff", "abc/diff", true},
		{"/var/lib/docker/overlay2/xabc/diff", "abc/diff", false},
		{"/var/lib/docker/overlay2/abc/diff", "abd/diff", false},
		{"/var/lib/docker/overlay2/abc/diff/", "/var/lib/docker/overlay2/abc/diff", true},
	}
	for _, tc := range cases {
		if got := sameUpper(tc.inspected, tc.mounted); got != tc.want {
			t.Errorf("sameUpper(%q, %q) = %v, want %v", tc.inspected, tc.mounted, got, tc.want)
		}
	}
}

// TestSelfConfirms: Self takes the candidate in which the engine finds
// the token it left in its own root file system, not the first that
// exists and runs; with no token (a read-only root), or an engine that
// cannot look for it, the candidate whose upper directory is the root
// overlay's, else only a candidate that is the one to exist and run, and
// never one whose upper directory is another's; the override as given.
func TestSelfConfirms(t *testing.T) {
	// The engine's answers to HEAD …/archive, as Docker 20.10 gave them:
	// found, and not there.
	found := recorded(t, "docker-20.10", "Archive", http.MethodHead, "/archive", "path=%2Fsaid")
	missing := recorded(t, "docker-20.10", "Archive", http.MethodHead, "/archive", "path=%2Fmissing")
	cases := []struct {
		name      string
		override  string
		readOnly  bool
		upper     bool     // the root overlay's upperdir is known, and each inspect's
		archive   int      // the status HEAD …/archive answers; 0: as recorded; -1: no answer
		running   []string // IDs that run; the others are not there
		want      string   // the ID taken; "" for the InputError
		wantBy    string
		wantStats bool   // whether the token was looked for
		wantErr   string // in the InputError, besides WAITDAEMON_CONTAINER
		wantFail  bool   // wantErr is in another error: the engine did not answer
	}{
		{name: "the second candidate has the token", running: []string{otherID, actionID}, want: actionID, wantBy: "mountinfo", wantStats: true},
		{name: "no candidate has it", running: []string{otherID}, wantStats: true, wantErr: "(another container)"},
		{name: "read-only root, two candidates run", readOnly: true, running: []string{otherID, actionID}, wantErr: "2 run, and none could be confirmed as this one"},
		{name: "read-only root, one runs", readOnly: true, running: []string{actionID}, want: actionID, wantBy: "mountinfo"},
		{name: "the override, as given", override: otherID, running: []string{otherID, actionID}, want: otherID, wantBy: "override"},
		// Under NetworkMode container:X, X is a candidate; with the action's
		// root read-only it can be the only one that runs.
		{name: "read-only root, only the network's container runs", readOnly: true, upper: true, running: []string{otherID}, wantErr: "(another container: its upper directory is not this root's)"},
		{name: "read-only root, two run, one with this root", readOnly: true, upper: true, running: []string{otherID, actionID}, want: actionID, wantBy: "mountinfo"},
		{name: "the engine cannot look, one runs", archive: http.StatusInternalServerError, running: []string{actionID}, want: actionID, wantBy: "mountinfo", wantStats: true},
		{name: "the engine cannot look, two run", archive: http.StatusInternalServerError, running: []string{otherID, actionID}, wantStats: true, wantErr: "2 run, and none could be confirmed as this one: "},
		{name: "the engine cannot look, two run, one with this root", archive: http.StatusInternalServerError, upper: true, running: []string{otherID, actionID}, want: actionID, wantBy: "mountinfo", wantStats: true},
		{name: "the engine cannot look, only the network's container runs", archive: http.StatusInternalServerError, upper: true, running: []string{otherID}, wantStats: true, wantErr: "(another container: its upper directory is not this root's)"},
		{name: "no answer to the look", archive: -1, running: []string{otherID, actionID}, wantStats: true, wantErr: "finding this action's container", wantFail: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.readOnly {
				root = filepath.Join(root, "read-only") // not there: nothing can be written
			}
			var mu sync.Mutex
			var stats []string
			mux := http.NewServeMux()
			mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "1.41") })
			mux.HandleFunc("/v1.41/containers/{id}/json", func(w http.ResponseWriter, r *http.Request) {
				id := r.PathValue("id")
				if !slices.Contains(tc.running, id) {
					w.WriteHeader(http.StatusNotFound)
					fmt.Fprintf(w, `{"message":"No such container: %s"}`, id)
					return
				}
				upper := ""
				if tc.upper {
					upper = upperOf(id)
				}
				fmt.Fprintf(w, `{"Id":%q,"Name":"/n-%s","State":{"Running":true,"Status":"running"},"GraphDriver":{"Name":"overlay2","Data":{"UpperDir":%q}}}`, id, id[:1], upper)
			})
			mux.HandleFunc("HEAD /v1.41/containers/{id}/archive", func(w http.ResponseWriter, r *http.Request) {
				id := r.PathValue("id")
				q, _ := url.ParseQuery(r.URL.RawQuery)
				token := q.Get("path")
				mu.Lock()
				stats = append(stats, id)
				mu.Unlock()
				switch tc.archive {
				case -1:
					panic(http.ErrAbortHandler)
				case 0:
				default:
					refuse(w, tc.archive, "cannot look")
					return
				}
				_, err := os.Stat(filepath.Join(root, token))
				if id == actionID && strings.HasPrefix(token, "/.waitdaemon-self-") && err == nil {
					answer(w, found)
					return
				}
				answer(w, missing)
			})
			sources := sharedNetwork
			if tc.upper {
				sources = withRoot(sharedNetwork)
			}
			e := &Engine{C: &dockerapi.Client{Socket: rr.Serve(t, mux), WaitForEngine: -1}, root: root, sources: sources}
			s, err := e.Self(context.Background(), tc.override)
			var input engine.InputError
			switch {
			case tc.wantFail && (err == nil || errors.As(err, &input) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Self() = %s, %v; want an error with %q, not bad input", s.ID, err, tc.wantErr)
			case tc.wantFail:
			case tc.want == "" && (!errors.As(err, &input) || !strings.Contains(err.Error(), "WAITDAEMON_CONTAINER") || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Self() = %s (%s), %v; want the InputError that says to set WAITDAEMON_CONTAINER, and %q", s.ID, s.FoundBy, err, tc.wantErr)
			case tc.want != "" && (err != nil || s.ID != tc.want || s.FoundBy != tc.wantBy):
				t.Errorf("Self() = %s (%s), %v; want %s (%s)", s.ID, s.FoundBy, err, tc.want, tc.wantBy)
			}
			mu.Lock() // a look whose answer was lost may still be served
			looked := slices.Clone(stats)
			mu.Unlock()
			if (len(looked) > 0) != tc.wantStats {
				t.Errorf("token looked for in %q; want looked for: %v", looked, tc.wantStats)
			}
			if left, _ := filepath.Glob(filepath.Join(root, ".waitdaemon-self-*")); len(left) != 0 {
				t.Errorf("token left behind: %q", left)
			}
		})
	}
}

// TestToSelfUser: a container's process holds CAP_SYS_BOOT where its
// settings give it and it runs as root (none, root or 0, in any group):
// Docker gives a process other than root no ambient capabilities, so
// after its exec it has none.
func TestToSelfUser(t *testing.T) {
	for _, tc := range []struct {
		user string
		want bool
	}{{"", true}, {"root", true}, {"0:0", true}, {"root:wheel", true}, {"1000", false}, {"nobody:nogroup", false}, {"0123", false}} {
		ctr := dockerapi.Container{ID: "c1", Name: "/c", Config: dockerapi.Config{User: tc.user}, HostConfig: dockerapi.HostConfig{Privileged: true, PidMode: "host"}}
		if s := toSelf(ctr, "test"); s.CanBoot != tc.want || s.User != tc.user || !s.HostPID {
			t.Errorf("user %q: CanBoot %v, User %q, HostPID %v; want %v, %q, true", tc.user, s.CanBoot, s.User, s.HostPID, tc.want, tc.user)
		}
	}
}
