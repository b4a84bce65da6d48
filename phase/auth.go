package phase

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/waitdaemon/waitdaemon/engine"
	"github.com/waitdaemon/waitdaemon/imageref"
)

// credentials are the WAITDAEMON_REGISTRY_USERNAME and _PASSWORD pair.
type credentials struct{ username, password string }

// Auth returns the credentials for ref's registry (Docker Hub by any of
// its names), and for no other:
//   - the WAITDAEMON_REGISTRY_ pair, when ref is on IMAGE's registry (the
//     pair is documented as IMAGE's);
//   - else the auths entry for ref's registry in config.json, under
//     RegistryConfig;
//   - else nil: anonymous.
func (s Settings) Auth(ref imageref.Ref) (*engine.Auth, error) {
	registry := registryHost(ref.Registry())
	if s.registry.username != "" && registry == registryHost(s.Image.Registry()) {
		return &engine.Auth{Username: s.registry.username, Password: s.registry.password, Registry: registry}, nil
	}
	dir := s.RegistryConfig
	if dir == "" {
		dir = DefaultDockerConfig
	}
	file := path.Join(dir, "config.json")
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading registry credentials: %w", err)
	}
	return configAuth(file, data, registry)
}

// configAuth is the credential for registry in config.json file, which
// holds data: nil when it has none.
func configAuth(file string, data []byte, registry string) (*engine.Auth, error) {
	var cfg struct {
		Auths map[string]struct {
			Auth          string `json:"auth"`
			IdentityToken string `json:"identitytoken"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, engine.InputError(fmt.Sprintf("%s: expected a Docker config.json with \"auths\": %v", file, err))
	}
	for _, key := range slices.Sorted(maps.Keys(cfg.Auths)) { // the same choice every time
		entry := cfg.Auths[key]
		if registryHost(key) != registry || entry.Auth == "" && entry.IdentityToken == "" {
			continue // another registry, or one a credential helper holds
		}
		a := &engine.Auth{Registry: registry, IdentityToken: entry.IdentityToken}
		if entry.Auth != "" {
			decoded, err := base64.StdEncoding.DecodeString(entry.Auth)
			u, p, ok := strings.Cut(string(decoded), ":")
			if err != nil || !ok {
				return nil, engine.InputError(fmt.Sprintf("%s: the auth of %q: expected base64 of user:password", file, key))
			}
			a.Username, a.Password = u, p
		}
		return a, nil
	}
	return nil, nil
}

// registryHost turns a config.json key ("https://index.docker.io/v1/",
// "registry.example:5000", "https://r.example/v2/"), or a reference's
// registry, into one host: each of Docker Hub's names into docker.io, so
// that a key and an image that both name Hub match however each names it.
func registryHost(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	key, _, _ = strings.Cut(key, "/")
	switch key {
	case "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com":
		return imageref.DockerHub
	}
	return key
}
