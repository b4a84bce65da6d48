package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// hubEntry is what artifacthub_test.go reads of artifacthub-pkg.yml.
type hubEntry struct {
	Version          string `yaml:"version"`
	Name             string `yaml:"name"`
	DisplayName      string `yaml:"displayName"`
	CreatedAt        string `yaml:"createdAt"`
	Description      string `yaml:"description"`
	HomeURL          string `yaml:"homeURL"`
	ContainersImages []struct {
		Image     string   `yaml:"image"`
		Platforms []string `yaml:"platforms"`
	} `yaml:"containersImages"`
	Links  []struct{ Name, URL string } `yaml:"links"`
	Readme string                       `yaml:"readme"`
}

// TestHubEntry: the hub's entry names the image the release workflow
// pushes for its version (the Makefile's SOURCE_URL, the workflow's image
// pattern, the Makefile's ARCHES), a version tagged at this commit or
// newer than every tag, and templates that run that image on HookOS and
// on CaptainOS.
func TestHubEntry(t *testing.T) {
	data, err := os.ReadFile("artifacthub-pkg.yml")
	if err != nil {
		t.Fatal(err)
	}
	var e hubEntry
	if err := yaml.Unmarshal(data, &e); err != nil {
		t.Fatalf("artifacthub-pkg.yml: %v", err)
	}
	next, err := semver(e.Version)
	if err != nil {
		t.Fatalf("artifacthub-pkg.yml: version: %v", err)
	}
	if _, err := time.Parse(time.RFC3339, e.CreatedAt); err != nil {
		t.Errorf("artifacthub-pkg.yml: createdAt: %v", err)
	}
	if e.Name != "waitdaemon" || e.DisplayName == "" || e.Description == "" {
		t.Errorf("artifacthub-pkg.yml: name %q, displayName %q, description %q: want waitdaemon and two non-empty", e.Name, e.DisplayName, e.Description)
	}

	source, arches := makeVariable(t, "SOURCE_URL"), strings.Fields(makeVariable(t, "ARCHES"))
	want := releaseImage(t, source, "v"+e.Version)
	if len(e.ContainersImages) != 1 || e.ContainersImages[0].Image != want {
		t.Errorf("artifacthub-pkg.yml: containersImages %+v; want the one image the release pushes, %s", e.ContainersImages, want)
	} else {
		var platforms []string
		for _, a := range arches {
			platforms = append(platforms, "linux/"+a)
		}
		if got := e.ContainersImages[0].Platforms; !slices.Equal(got, platforms) {
			t.Errorf("artifacthub-pkg.yml: platforms %q; want %q (the Makefile's ARCHES)", got, platforms)
		}
	}
	if e.HomeURL != source || !slices.ContainsFunc(e.Links, func(l struct{ Name, URL string }) bool { return l.URL == source }) {
		t.Errorf("artifacthub-pkg.yml: homeURL %q and links %+v; want both to hold %s", e.HomeURL, e.Links, source)
	}

	for _, tag := range gitTags(t) {
		v, err := semver(strings.TrimPrefix(tag.name, "v"))
		switch {
		case err != nil:
		case tag.atHead && v != next:
			t.Errorf("artifacthub-pkg.yml: version %s; this commit is tagged %s", e.Version, tag.name)
		case !tag.atHead && !next.after(v):
			t.Errorf("artifacthub-pkg.yml: version %s; want one newer than the tag %s, or this commit tagged with it", e.Version, tag.name)
		}
	}

	sockets := map[string]bool{}
	for _, action := range readmeActions(t, e.Readme) {
		if action.Image != want {
			t.Errorf("artifacthub-pkg.yml: readme's action %s runs %s; want %s", action.Name, action.Image, want)
		}
		if action.Environment["IMAGE"] == "" {
			t.Errorf("artifacthub-pkg.yml: readme's action %s has no IMAGE", action.Name)
		}
		for _, v := range action.Volumes {
			sockets[v] = true
		}
	}
	for _, socket := range []string{"/var/run/docker.sock:/var/run/docker.sock", "/run/containerd/containerd.sock:/run/containerd/containerd.sock"} {
		if !sockets[socket] {
			t.Errorf("artifacthub-pkg.yml: no template in the readme mounts %s", socket)
		}
	}
}

// release is a release's MAJOR.MINOR.PATCH.
type release [3]int

func (v release) after(w release) bool { return slices.Compare(v[:], w[:]) > 0 }

func semver(s string) (release, error) {
	var v release
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return v, fmt.Errorf("%q: want MAJOR.MINOR.PATCH", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || strconv.Itoa(n) != p {
			return v, fmt.Errorf("%q: want MAJOR.MINOR.PATCH", s)
		}
		v[i] = n
	}
	return v, nil
}

// makeVariable is a variable's value in the Makefile, as make sees it.
func makeVariable(t *testing.T, name string) string {
	t.Helper()
	cmd := exec.Command("make", "-s", "--no-print-directory", "-f", "Makefile", "-f", "/dev/stdin", "print-variable")
	cmd.Stdin = strings.NewReader("print-variable:\n\t@echo $(" + name + ")\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make: reading %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

// releaseImage is the image the release workflow pushes for tag, from
// the repository that source is.
func releaseImage(t *testing.T, source, tag string) string {
	t.Helper()
	data, err := os.ReadFile(".github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		On struct {
			Push struct{ Tags []string } `yaml:"push"`
		} `yaml:"on"`
	}
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatalf("release.yml: %v", err)
	}
	if !slices.Contains(wf.On.Push.Tags, "v*") {
		t.Errorf("release.yml: runs on tags %q; want v*", wf.On.Push.Tags)
	}
	m := regexp.MustCompile(`(?m)^\s*image="([^"]+)"$`).FindSubmatch(data)
	if m == nil {
		t.Fatal(`release.yml: no image="…" line`)
	}
	repo, ok := strings.CutPrefix(source, "https://github.com/")
	if !ok {
		t.Fatalf("SOURCE_URL %q: want a GitHub repository", source)
	}
	return strings.NewReplacer("${GITHUB_REPOSITORY,,}", strings.ToLower(repo), "${GITHUB_REF_NAME}", tag).Replace(string(m[1]))
}

type gitTag struct {
	name   string
	atHead bool
}

// gitTags are the repository's version tags, and whether each is at HEAD.
func gitTags(t *testing.T) []gitTag {
	t.Helper()
	all, err := exec.Command("git", "tag", "--list", "v*").Output()
	if err != nil {
		t.Fatalf("git tag: %v (run the tests in a clone)", err)
	}
	head, err := exec.Command("git", "tag", "--list", "v*", "--points-at", "HEAD").Output()
	if err != nil {
		t.Fatalf("git tag: %v", err)
	}
	var tags []gitTag
	for _, name := range strings.Fields(string(all)) {
		tags = append(tags, gitTag{name, slices.Contains(strings.Fields(string(head)), name)})
	}
	return tags
}

// templateAction is what the test reads of a template's action.
type templateAction struct {
	Name        string            `yaml:"name"`
	Image       string            `yaml:"image"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
}

// readmeActions are the actions of the readme's yaml blocks.
func readmeActions(t *testing.T, readme string) []templateAction {
	t.Helper()
	var actions []templateAction
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(readme, -1)
	for _, b := range blocks {
		var list []templateAction
		if err := yaml.Unmarshal([]byte(b[1]), &list); err != nil {
			t.Errorf("artifacthub-pkg.yml: a template in the readme: %v", err)
		}
		actions = append(actions, list...)
	}
	if len(actions) == 0 {
		t.Error("artifacthub-pkg.yml: the readme has no template")
	}
	return actions
}
