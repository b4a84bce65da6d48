package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// The images of TestImageUser: the probe with USER a uid alone, and with
// USER a name, which its /etc/passwd and /etc/group resolve, and with no
// USER (root) and an /etc/group that lists root in other groups.
var (
	probeUIDImage   = "waitdaemon-probe-uid:" + e2eTag
	probeNamedImage = "waitdaemon-probe-named:" + e2eTag
	probeRootImage  = "waitdaemon-probe-root:" + e2eTag
)

// userImages is buildUserImages' one build a test process: the rows of a
// test that build them at once would each tag them anew under the
// others' feet.
var userImages struct {
	sync.Mutex
	built bool
}

// buildUserImages builds the images of TestImageUser from the probe
// image, on Docker 20.10, once.
func buildUserImages(t *testing.T) {
	t.Helper()
	setup(t)
	userImages.Lock()
	defer userImages.Unlock()
	if userImages.built {
		return
	}
	for _, img := range []struct {
		name  string
		files map[string]string
	}{
		{probeUIDImage, map[string]string{"Dockerfile": "FROM " + probeImage + "\nUSER 65532\n"}},
		{probeNamedImage, map[string]string{
			"Dockerfile": "FROM " + probeImage + "\nCOPY passwd group /etc/\nUSER probe\n",
			"passwd":     "root:x:0:0:root:/:/probe\nprobe:x:1234:1234::/:/probe\n",
			"group":      "root:x:0:root\nwheel:x:10:root,probe\nprobe:x:1234:\nextra:x:2000:nonroot,probe\n",
		}},
		{probeRootImage, map[string]string{
			"Dockerfile": "FROM " + probeImage + "\nCOPY passwd group /etc/\n",
			"passwd":     "root:x:0:0:root:/:/probe\nprobe:x:1234:1234::/:/probe\n",
			"group":      "root:x:0:root\nbin:x:1:root,bin\nwheel:x:10:root,probe\nprobe:x:1234:\n",
		}},
	} {
		dir := t.TempDir()
		for name, content := range img.files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if out, err := exec.Command("docker", "build", "-q", "-t", img.name, dir).CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", img.name, err, out)
		}
	}
	userImages.built = true
}

// TestImageUser: a user image's USER, a uid alone or a user by name, runs
// the user container as the same user, in the same group and additional
// groups, on Docker (whose daemon resolves it) and on containerd (where
// waitdaemon reads the image's /etc/passwd and /etc/group from its layers
// for the plan): a uid the image has no /etc/passwd for is in group 0, a
// name gets its group from /etc/passwd and its additional groups from
// /etc/group; no USER is root, with the groups /etc/group lists root in.
func TestImageUser(t *testing.T) {
	buildUserImages(t)
	cases := []struct {
		image            string
		wantUID, wantGID int
		wantGroups       []int
	}{
		{probeUIDImage, 65532, 0, []int{0}},
		{probeNamedImage, 1234, 1234, []int{10, 1234, 2000}},
		{probeRootImage, 0, 0, []int{0, 1, 10}},
	}
	for _, e := range engines {
		if e.name != "docker" && !e.containerd {
			continue
		}
		t.Run(e.name, func(t *testing.T) {
			if e.containerd {
				setupContainerd(t)
				importImages(t, probeUIDImage, probeNamedImage, probeRootImage)
			}
			r := openRig(t, e)
			for _, tc := range cases {
				t.Run(tc.image, func(t *testing.T) {
					out := t.TempDir()
					if err := os.Chmod(out, 0o777); err != nil { // the probe writes as its user
						t.Fatal(err)
					}
					a := r.run(t, tinkWorker, action{
						name: "e2e image user", env: map[string]string{"IMAGE": tc.image, "WAIT_SECONDS": "0"},
						volumes: []string{out + ":/out"},
					})
					if a.ExitCode != 0 {
						t.Fatalf("the action exited %d:\n%s", a.ExitCode, a.Logs)
					}
					waiter := r.waiter(t, a.ID)
					p, ok := readProbe(t, out, "probe")
					if !ok {
						t.Fatalf("the user container did not run: no probe report; the waiter:\n%s", waiter)
					}
					groups := slices.Clone(p.Groups)
					slices.Sort(groups)
					groups = slices.Compact(groups)
					want := tc.wantGroups
					if p.UID != tc.wantUID || p.GID != tc.wantGID || !slices.Equal(groups, want) {
						t.Errorf("the user container ran as uid %d, gid %d, groups %v; want %d, %d, %v", p.UID, p.GID, p.Groups, tc.wantUID, tc.wantGID, want)
					}
				})
			}
		})
	}
}
