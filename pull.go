package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// pullPlan is what phase 1 decided about IMAGE.
type pullPlan struct {
	Image    string `json:"image"`
	Policy   string `json:"policy"`
	Decision string `json:"decision"` // "present" or "pull"
	Auth     string `json:"auth,omitempty"`
}

// decidePull looks IMAGE up and decides, by policy, whether to pull it.
// Under "never", an image that is not there fails the action.
func decidePull(ctx context.Context, c *dockerapi.Client, s settings) (pullPlan, error) {
	p := pullPlan{Image: s.image.String(), Policy: s.pullPolicy, Decision: "pull"}
	if s.auth != nil {
		p.Auth = s.auth.String()
	}
	if s.pullPolicy == pullAlways {
		return p, nil
	}
	_, err := c.ImageInspect(ctx, p.Image)
	switch {
	case err == nil:
		p.Decision = "present"
	case !errors.Is(err, dockerapi.ErrNotFound):
		return p, err
	case s.pullPolicy == pullNever:
		return p, fmt.Errorf("image %s is not present, and WAITDAEMON_PULL_POLICY=never forbids pulling it", p.Image)
	}
	return p, nil
}

// pull pulls IMAGE, logging its progress at most once a second as bytes
// done out of the total.
func pull(ctx context.Context, c *dockerapi.Client, s settings, w io.Writer) error {
	layers := map[string][2]int64{} // id: done, total
	last := time.Now()
	return c.ImagePull(ctx, s.image, s.auth, func(m dockerapi.PullMessage) {
		if m.ID != "" && m.ProgressDetail.Total > 0 {
			layers[m.ID] = [2]int64{m.ProgressDetail.Current, m.ProgressDetail.Total}
		}
		if time.Since(last) < time.Second {
			return
		}
		last = time.Now()
		var done, total int64
		for _, l := range layers {
			done, total = done+l[0], total+l[1]
		}
		logEvent(w, "pulling", map[string]any{"image": s.image.String(), "done_bytes": done, "total_bytes": total})
	})
}

// registryAuth returns the credentials for ref's registry: the
// WAITDAEMON_REGISTRY_USERNAME and _PASSWORD pair, else the auths entry
// for that registry in config.json under dockerConfig (default
// /root/.docker), else nil.
func registryAuth(user, pass, dockerConfig string, ref dockerapi.Reference) (*dockerapi.AuthConfig, error) {
	server := ref.Registry()
	if server == dockerapi.DockerHub {
		server = "https://index.docker.io/v1/"
	}
	if user != "" || pass != "" {
		if user == "" || pass == "" {
			return nil, inputError{"WAITDAEMON_REGISTRY_USERNAME and WAITDAEMON_REGISTRY_PASSWORD: expected both or neither"}
		}
		return &dockerapi.AuthConfig{Username: user, Password: pass, ServerAddress: server}, nil
	}
	if dockerConfig == "" {
		dockerConfig = defaultDockerConfig
	}
	file := path.Join(dockerConfig, "config.json")
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading registry credentials: %w", err)
	}
	var cfg struct {
		Auths map[string]struct {
			Auth          string `json:"auth"`
			IdentityToken string `json:"identitytoken"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, inputError{fmt.Sprintf("%s: expected a Docker config.json with \"auths\": %v", file, err)}
	}
	keys := slices.Sorted(maps.Keys(cfg.Auths)) // the same choice every time
	for _, key := range keys {
		entry := cfg.Auths[key]
		if registryHost(key) != ref.Registry() || entry.Auth == "" && entry.IdentityToken == "" {
			continue // another registry, or one a credential helper holds
		}
		a := &dockerapi.AuthConfig{ServerAddress: server, IdentityToken: entry.IdentityToken}
		if entry.Auth != "" {
			decoded, err := base64.StdEncoding.DecodeString(entry.Auth)
			u, p, ok := strings.Cut(string(decoded), ":")
			if err != nil || !ok {
				return nil, inputError{fmt.Sprintf("%s: the auth of %q: expected base64 of user:password", file, key)}
			}
			a.Username, a.Password = u, p
		}
		return a, nil
	}
	return nil, nil
}

// registryHost turns a config.json key ("https://index.docker.io/v1/",
// "registry.example:5000", "https://r.example/v2/") into the host that
// Reference.Registry names.
func registryHost(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	key, _, _ = strings.Cut(key, "/")
	switch key {
	case "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com":
		return dockerapi.DockerHub
	}
	return key
}
