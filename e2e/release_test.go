//go:build full

package e2e

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/tools/ocilayout"
)

// skopeoTools installs Debian's skopeo, which make push runs.
var skopeoTools debianTools

// release is what make push published: the reference to pin, and what
// each platform's image must be, read from the layout.
type release struct {
	ref    string // <registry>/waitdaemon@sha256:<index>
	images []releaseImage
}

type releaseImage struct {
	platform ocilayout.Platform
	config   string // the config's digest: the image ID an engine shows
	diffID   string
	size     int64 // the binary's
	image    ocilayout.ExecutionConfig
}

// releaseEngines pull the pushed index by digest the way a fleet does,
// one engine each. Every check pulls each platform's image, compares it
// with the layout, and runs one action from the host's.
var releaseEngines = []struct {
	name  string
	check func(t *testing.T, c *dockerapi.Client, rel release)
}{
	{"docker", checkReleaseOnDocker},
	{"containerd", func(t *testing.T, _ *dockerapi.Client, rel release) { checkReleaseOnContainerd(t, rel) }},
}

// TestRelease publishes what a release publishes, with the project's
// own targets: make push (make oci, then skopeo copy --all) to a local
// registry; then it pulls the index by digest for every platform on
// each engine of releaseEngines.
func TestRelease(t *testing.T) {
	c := setup(t)
	skopeoTools.require(t, map[string]string{"skopeo": "skopeo"})
	addr := startRegistry(t, false)
	layout := filepath.Join(t.TempDir(), "oci")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", "..", "push",
		"IMAGE="+addr+"/waitdaemon:e2e", "OCI_DIR="+layout, "PUSH_FLAGS=--dest-tls-verify=false")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make push: %v\n%s\nregistry log:\n%s", err, out, registryLog(t, addr))
	}
	t.Logf("make push:\n%s", out)
	rel := readRelease(t, layout, addr+"/waitdaemon")
	m := regexp.MustCompile(`(?m)^pushed: (\S+)$`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("make push printed no line \"pushed: <repository>@<digest>\":\n%s", out)
	}
	if m[1] != rel.ref {
		t.Fatalf("make push printed %s, want %s, the layout's index", m[1], rel.ref)
	}
	// The registry serves the index byte for byte: its digest is the layout's.
	served, err := exec.Command("skopeo", "inspect", "--raw", "--tls-verify=false", "docker://"+rel.ref).Output()
	if err != nil {
		t.Fatalf("skopeo inspect --raw docker://%s: %v", rel.ref, err)
	}
	if _, want, _ := strings.Cut(rel.ref, "@"); ocilayout.Digest(served) != want {
		t.Fatalf("the registry serves an index of digest %s for %s:\n%s", ocilayout.Digest(served), rel.ref, served)
	}

	for _, e := range releaseEngines {
		t.Run(e.name, func(t *testing.T) { e.check(t, c, rel) })
	}
}

// readRelease reads, from the layout, what the index pushed to repo
// holds.
func readRelease(t *testing.T, dir, repo string) release {
	t.Helper()
	blob := func(file string, v any) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err == nil {
			err = json.Unmarshal(data, v)
		}
		if err != nil {
			t.Fatalf("the layout's %s: %v", file, err)
		}
	}
	digestFile := func(d string) string { return "blobs/sha256/" + strings.TrimPrefix(d, "sha256:") }
	var top, index ocilayout.Index
	blob("index.json", &top)
	if len(top.Manifests) != 1 {
		t.Fatalf("the layout's index.json lists %d entries, want the image index alone", len(top.Manifests))
	}
	blob(digestFile(top.Manifests[0].Digest), &index)
	rel := release{ref: repo + "@" + top.Manifests[0].Digest}
	for _, md := range index.Manifests {
		var m ocilayout.Manifest
		var cfg ocilayout.Config
		blob(digestFile(md.Digest), &m)
		blob(digestFile(m.Config.Digest), &cfg)
		if md.Platform == nil || len(cfg.RootFS.DiffIDs) != 1 {
			t.Fatalf("manifest %s: platform %v, %d layers", md.Digest, md.Platform, len(cfg.RootFS.DiffIDs))
		}
		img := releaseImage{platform: *md.Platform, config: m.Config.Digest, diffID: cfg.RootFS.DiffIDs[0], image: cfg.Config}
		img.size = layerFileSize(t, filepath.Join(dir, digestFile(m.Layers[0].Digest)))
		rel.images = append(rel.images, img)
	}
	if got := platforms(rel); !slices.Equal(got, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("the index holds %q, want linux/amd64 and linux/arm64", got)
	}
	return rel
}

func platforms(rel release) []string {
	var ps []string
	for _, img := range rel.images {
		ps = append(ps, img.platform.String())
	}
	return ps
}

// layerFileSize is the size of the one file in a gzipped layer: the
// size an engine reports for the image.
func layerFileSize(t *testing.T, name string) int64 {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("layer %s: %v", name, err)
	}
	hdr, err := tar.NewReader(zr).Next()
	if err != nil {
		t.Fatalf("layer %s: %v", name, err)
	}
	return hdr.Size
}

// engineImage is the part of GET /images/{name}/json this test reads.
type engineImage struct {
	ID           string `json:"Id"`
	Architecture string
	Os           string
	Size         int64
	RepoDigests  []string
	Config       struct{ Entrypoint, Env, Cmd []string }
	RootFS       struct{ Layers []string }
}

// checkReleaseOnDocker pulls rel.ref by digest for every platform, the
// host's last, checks each image against the layout, and runs one action
// from the host's image, by digest, as tink-worker does. An image of a
// foreign architecture can be pulled and inspected here, not run.
func checkReleaseOnDocker(t *testing.T, c *dockerapi.Client, rel release) {
	images := slices.Clone(rel.images)
	slices.SortStableFunc(images, func(a, b releaseImage) int {
		return boolInt(a.platform.Architecture == runtime.GOARCH) - boolInt(b.platform.Architecture == runtime.GOARCH)
	})
	for _, img := range images {
		raw(t, c, "DELETE", "/images/"+img.config+"?force=1", true)
		t.Cleanup(func() { raw(t, c, "DELETE", "/images/"+img.config+"?force=1", true) })
	}
	for _, img := range images {
		t.Run(img.platform.String(), func(t *testing.T) {
			pullPlatform(t, c, rel.ref, img.platform)
			got := inspectImage(t, c, rel.ref)
			if got.ID != img.config || got.Architecture != img.platform.Architecture || got.Os != img.platform.OS {
				t.Fatalf("pulled %s for %s: image %s, %s/%s; want %s, %s", rel.ref, img.platform, got.ID, got.Os, got.Architecture, img.config, img.platform)
			}
			if !slices.Equal(got.Config.Entrypoint, []string{"/waitdaemon", "action", "--"}) || !slices.Equal(got.Config.Env, []string{ocilayout.DefaultPath}) ||
				got.Config.Cmd != nil || !slices.Equal(got.RootFS.Layers, []string{img.diffID}) || got.Size != img.size {
				t.Errorf("pulled for %s: entrypoint %q, env %q, cmd %q, layers %q, size %d; want Dockerfile.scratch's entrypoint and PATH, no command, the layer %s, the binary's %d bytes",
					img.platform, got.Config.Entrypoint, got.Config.Env, got.Config.Cmd, got.RootFS.Layers, got.Size, img.diffID, img.size)
			}
			if !slices.Contains(got.RepoDigests, rel.ref) {
				t.Errorf("the pulled image's RepoDigests %q lack %s", got.RepoDigests, rel.ref)
			}
			if img.platform.Architecture != runtime.GOARCH {
				raw(t, c, "DELETE", "/images/"+img.config+"?force=1", false)
				return
			}
			out := t.TempDir()
			r := runAction(t, c, tinkWorker, action{image: rel.ref, name: "e2e release", command: []string{"reboot"},
				env: map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "1"}, volumes: []string{out + ":/out"}})
			if _, ok := find(events(r.Logs), "handed off"); !ok {
				t.Errorf("the action from %s logged no hand-off:\n%s", rel.ref, r.Logs)
			}
			ranOK(t, rigOf(c), r, out)
		})
	}
}

// checkReleaseOnContainerd pulls rel.ref by digest for every platform
// through containerd's Transfer service, as waitdaemon does on CaptainOS,
// checks each image against the layout, and runs one action from the
// host's, as tink-agent's containerd runtime does.
func checkReleaseOnContainerd(t *testing.T, rel release) {
	c, eng, _ := setupContainerd(t)
	e := containerdRig{c: c, eng: eng}
	rm := func() {
		_ = exec.Command(ctrBinary, "-a", containerdSocket, "-n", containerdNS, "images", "rm", rel.ref).Run()
	}
	rm()
	t.Cleanup(rm)
	_, index, _ := strings.Cut(rel.ref, "@")
	for _, img := range rel.images {
		t.Run(img.platform.String(), func(t *testing.T) {
			ctx := testCtx(t)
			p := containerdapi.Platform{OS: img.platform.OS, Architecture: img.platform.Architecture, Variant: img.platform.Variant}
			if err := c.Pull(ctx, containerdapi.PullRequest{Ref: rel.ref, Platform: p}); err != nil {
				t.Fatalf("pulling %s for %s: %v", rel.ref, img.platform, err)
			}
			got, err := c.ImageResolve(ctx, rel.ref, p)
			if err != nil {
				t.Fatalf("the pulled %s for %s: %v", rel.ref, img.platform, err)
			}
			if got.Image.Target.Digest != index || got.Manifest.Config.Digest != img.config ||
				got.Config.Architecture != img.platform.Architecture || got.Config.OS != img.platform.OS {
				t.Fatalf("pulled %s for %s: index %s, config %s, %s/%s; want %s, %s, %s",
					rel.ref, img.platform, got.Image.Target.Digest, got.Manifest.Config.Digest, got.Config.OS, got.Config.Architecture, index, img.config, img.platform)
			}
			if !slices.Equal(got.Config.Config.Entrypoint, []string{"/waitdaemon", "action", "--"}) || !slices.Equal(got.Config.Config.Env, []string{ocilayout.DefaultPath}) ||
				got.Config.Config.Cmd != nil || !slices.Equal(got.Config.RootFS.DiffIDs, []string{img.diffID}) {
				t.Errorf("pulled for %s: entrypoint %q, env %q, cmd %q, layers %q; want Dockerfile.scratch's entrypoint and PATH, no command, the layer %s",
					img.platform, got.Config.Config.Entrypoint, got.Config.Config.Env, got.Config.Config.Cmd, got.Config.RootFS.DiffIDs, img.diffID)
			}
			if img.platform.Architecture != runtime.GOARCH {
				return
			}
			out := t.TempDir()
			r := e.run(t, tinkAgent, action{image: rel.ref, name: "e2e release", command: []string{"reboot"},
				env: map[string]string{"IMAGE": probeImage, "WAIT_SECONDS": "1"}, volumes: []string{out + ":/out"}})
			if _, ok := find(events(r.Logs), "handed off"); r.ExitCode != 0 || !ok {
				t.Fatalf("the action from %s exited %d, logged no hand-off:\n%s", rel.ref, r.ExitCode, r.Logs)
			}
			if res, _ := find(events(e.waiter(t, r.ID)), "result"); res.num("exit_code") != 0 {
				t.Errorf("the waiter's result = %v, want exit 0", res)
			}
			if _, ok := readProbe(t, out, "probe"); !ok {
				t.Error("the user container did not run")
			}
			waitDone(t, e, r.ID, 5*time.Second)
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pullPlatform pulls ref for platform, as `docker pull --platform` does
// (API 1.41 takes the platform without the daemon's experimental mode).
func pullPlatform(t *testing.T, c *dockerapi.Client, ref string, p ocilayout.Platform) {
	t.Helper()
	repo, digest, _ := strings.Cut(ref, "@")
	q := url.Values{"fromImage": {repo}, "tag": {digest}, "platform": {p.String()}}
	resp, err := c.Raw(testCtx(t), "POST", "/images/create?"+q.Encode(), nil)
	if err != nil {
		t.Fatalf("pulling %s for %s: %v", ref, p, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var last string
	for sc.Scan() {
		var m struct{ Status, Error string }
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			if m.Error != "" {
				t.Fatalf("pulling %s for %s: %s", ref, p, m.Error)
			}
			last = m.Status
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("pulling %s for %s: %v", ref, p, err)
	}
	t.Logf("pulled %s for %s: %s", ref, p, last)
}

func inspectImage(t *testing.T, c *dockerapi.Client, ref string) engineImage {
	t.Helper()
	resp, err := c.Raw(testCtx(t), "GET", "/images/"+ref+"/json", nil)
	if err != nil {
		t.Fatalf("inspecting %s: %v", ref, err)
	}
	defer resp.Body.Close()
	var img engineImage
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&img); err != nil {
		t.Fatalf("inspecting %s: %v", ref, err)
	}
	return img
}
