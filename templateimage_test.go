package main

import (
	"os"
	"regexp"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestTemplateImages: every template of the README and docs/templates.md
// runs the one image the release workflow publishes for the next release
// (the version artifacthub-pkg.yml names; see TestHubEntry), by its tag
// or pinned by a digest: an operator who copies a template pulls an
// image that exists.
func TestTemplateImages(t *testing.T) {
	data, err := os.ReadFile("artifacthub-pkg.yml")
	if err != nil {
		t.Fatal(err)
	}
	var e hubEntry
	if err := yaml.Unmarshal(data, &e); err != nil {
		t.Fatalf("artifacthub-pkg.yml: %v", err)
	}
	want := releaseImage(t, makeVariable(t, "SOURCE_URL"), "v"+e.Version)
	n := 0
	for _, doc := range []string{"README.md", "docs/templates.md"} {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, image := range templateImages(string(data)) {
			n++
			if !releaseRef(image, want) {
				t.Errorf("%s: a template runs %s; want the image the release publishes, %s (or it pinned, %s@sha256:…)", doc, image, want, want)
			}
		}
	}
	if n < 10 {
		t.Errorf("%d templates' images in README.md and docs/templates.md; want 10 or more", n)
	}
}

// TestTemplateImagesRefuse: the check of TestTemplateImages refuses
// another image, tag or registry, and finds every template's image.
func TestTemplateImagesRefuse(t *testing.T) {
	const want = "ghcr.io/waitdaemon/waitdaemon:v0.1.0"
	for ref, ok := range map[string]bool{
		want:                                   true,
		want + "@sha256:" + sixtyFour:          true,
		want + "@sha256:abc":                   false,
		"waitdaemon:latest":                    false,
		"ghcr.io/waitdaemon/waitdaemon:v0.0.9": false,
		"registry.example:5000/waitdaemon:v1":  false,
		"ghcr.io/waitdaemon/waitdaemon":        false,
	} {
		if got := releaseRef(ref, want); got != ok {
			t.Errorf("releaseRef(%q) = %v; want %v", ref, got, ok)
		}
	}
	doc := "text\n\n```yaml\n# Tinkerbell: x\n- name: a\n  image: one:1\n  environment:\n    IMAGE: alpine:3.20\n```\n\n```sh\nimage: not-a-template\n```\n\n```yaml\n- name: b\n  image: two:2\n```\n"
	if got := templateImages(doc); len(got) != 2 || got[0] != "one:1" || got[1] != "two:2" {
		t.Errorf("templateImages: %q; want [one:1 two:2]", got)
	}
}

const sixtyFour = "6df75e7e372fe5fb40cd3e08e9ac8729bc6f19d0db5f3e21991ddf20d7b52ae2"

// releaseRef reports whether ref is the release's image want, by its tag
// or pinned by a digest.
func releaseRef(ref, want string) bool {
	return ref == want || regexp.MustCompile(`^`+regexp.QuoteMeta(want)+`@sha256:[0-9a-f]{64}$`).MatchString(ref)
}

// templateImages are the action images of a markdown page's templates:
// each ```yaml block's actions' image.
func templateImages(doc string) []string {
	var images []string
	for _, b := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		var list []struct{ Image string }
		if err := yaml.Unmarshal([]byte(b[1]), &list); err != nil || len(list) == 0 {
			images = append(images, "(a template that does not parse: "+b[1]+")")
			continue
		}
		for _, a := range list {
			images = append(images, a.Image)
		}
	}
	return images
}
