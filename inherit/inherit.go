// Package inherit plans the user's container from the action's: it copies
// everything the operator set on the action container onto a create
// request for another image, subtracts what the action's own image
// brought, and drops what must not travel. It does no I/O.
package inherit

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/waitdaemon/waitdaemon/dockerapi"
)

// Input is what a plan is made from.
type Input struct {
	// Container is the action container, as inspected.
	Container dockerapi.Container
	// Image is the config of the action container's image (looked up by
	// Container.Image), whose defaults are subtracted.
	Image dockerapi.Config
	// UserImage is the image the new container runs.
	UserImage string
	// APIVersion is the negotiated API version: below 1.44, create takes
	// one network only.
	APIVersion string
}

// Output is the plan: a create request, and the networks to connect after
// the create (only below API 1.44, which creates with one network).
type Output struct {
	Create  dockerapi.CreateRequest
	Connect map[string]dockerapi.EndpointSettings
}

// Plan turns the action container into a create request for UserImage.
func Plan(in Input) Output {
	c := in.Container
	img := in.Image
	shortID := c.ID[:min(12, len(c.ID))]

	cfg := dockerapi.Config{
		Image:       in.UserImage,
		Domainname:  c.Config.Domainname,
		Tty:         c.Config.Tty,
		OpenStdin:   c.Config.OpenStdin,
		Env:         userEnv(c.Config.Env, img.Env),
		Labels:      userLabels(c.Config.Labels, img.Labels),
		StopTimeout: c.Config.StopTimeout,
	}
	cfg.Cmd, cfg.Entrypoint = command(c.Config, img)
	cfg.User = differs(c.Config.User, img.User)
	cfg.WorkingDir = differs(c.Config.WorkingDir, img.WorkingDir)
	cfg.StopSignal = differs(c.Config.StopSignal, img.StopSignal)
	if c.Config.Healthcheck != nil && !reflect.DeepEqual(c.Config.Healthcheck, img.Healthcheck) {
		cfg.Healthcheck = c.Config.Healthcheck
	}
	cfg.Volumes = subtractSet(c.Config.Volumes, img.Volumes)
	cfg.ExposedPorts = subtractSet(c.Config.ExposedPorts, img.ExposedPorts)

	host := c.HostConfig
	if keepHostname(c.Config.Hostname, shortID, host) {
		cfg.Hostname = c.Config.Hostname
	}
	host.ContainerIDFile = ""
	host.AutoRemove = false  // the waiter removes a container that succeeded
	host.RestartPolicy = nil // a restarted reboot would loop
	host.Links = rewriteLinks(host.Links)

	out := Output{Create: dockerapi.CreateRequest{Config: cfg, HostConfig: host}}
	out.Create.NetworkingConfig, out.Connect = networks(c, shortID, in.APIVersion)
	return out
}

// command returns the Cmd and Entrypoint to set: each only where the
// action differs from its image, so the user image's own apply otherwise.
// The action's command is the user image's command: an empty one runs the
// user image's default.
func command(c dockerapi.Config, img dockerapi.Config) (cmd, entrypoint []string) {
	if !slices.Equal(c.Entrypoint, img.Entrypoint) {
		entrypoint = c.Entrypoint
	}
	if !slices.Equal(c.Cmd, img.Cmd) {
		cmd = c.Cmd
	}
	return cmd, entrypoint
}

// userEnv is the container's environment minus the entries its image
// brought unchanged, minus waitdaemon's own variables.
func userEnv(env, imageEnv []string) []string {
	control := Control(env)
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if control[name] || slices.Contains(imageEnv, kv) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// userLabels is the container's labels minus the image's unchanged ones
// and minus Compose's bookkeeping.
func userLabels(labels, imageLabels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if iv, ok := imageLabels[k]; ok && iv == v {
			continue
		}
		if strings.HasPrefix(k, "com.docker.compose.") {
			continue
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func differs(v, imageV string) string {
	if v == imageV {
		return ""
	}
	return v
}

func subtractSet(set, image map[string]struct{}) map[string]struct{} {
	out := maps.Clone(set)
	for k := range image {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// keepHostname keeps a hostname the operator chose: not the engine's
// default (the short ID), and not where the network or UTS namespace is
// shared, which makes the engine refuse a hostname.
func keepHostname(hostname, shortID string, host dockerapi.HostConfig) bool {
	return hostname != "" && hostname != shortID &&
		!strings.HasPrefix(host.NetworkMode, "container:") &&
		host.NetworkMode != "host" && host.UTSMode != "host"
}

// rewriteLinks turns inspect's "/db:/action/alias" into create's
// "db:alias".
func rewriteLinks(links []string) []string {
	var out []string
	for _, l := range links {
		target, alias, ok := strings.Cut(l, ":")
		if !ok {
			out = append(out, l)
			continue
		}
		target = strings.TrimPrefix(target, "/")
		if i := strings.LastIndexByte(alias, '/'); i >= 0 {
			alias = alias[i+1:]
		}
		out = append(out, target+":"+alias)
	}
	return out
}

// networks carries the container's networks as endpoint configuration,
// without runtime data or the old short ID among the aliases. Below API
// 1.44 only the primary network goes in the create; the others come back
// to be connected after it.
func networks(c dockerapi.Container, shortID, apiVersion string) (*dockerapi.NetworkingConfig, map[string]dockerapi.EndpointSettings) {
	mode := c.HostConfig.NetworkMode
	if mode == "host" || mode == "none" || strings.HasPrefix(mode, "container:") {
		return nil, nil
	}
	primary := mode
	if primary == "" || primary == "default" {
		primary = "bridge"
	}
	endpoints := map[string]dockerapi.EndpointSettings{}
	for name, ep := range c.NetworkSettings.Networks {
		cfg := dockerapi.EndpointSettings{
			IPAMConfig: nullIsEmpty(ep.IPAMConfig),
			Links:      rewriteLinks(ep.Links),
			DriverOpts: ep.DriverOpts,
		}
		for _, a := range ep.Aliases {
			if a != shortID {
				cfg.Aliases = append(cfg.Aliases, a)
			}
		}
		if name == primary && reflect.DeepEqual(cfg, dockerapi.EndpointSettings{}) {
			continue // the engine gives the primary network by itself
		}
		endpoints[name] = cfg
	}
	if len(endpoints) == 0 {
		return nil, nil
	}
	if !dockerapi.VersionLess(apiVersion, "1.44") {
		return &dockerapi.NetworkingConfig{EndpointsConfig: endpoints}, nil
	}
	var create *dockerapi.NetworkingConfig
	if ep, ok := endpoints[primary]; ok {
		create = &dockerapi.NetworkingConfig{EndpointsConfig: map[string]dockerapi.EndpointSettings{primary: ep}}
		delete(endpoints, primary)
	}
	if len(endpoints) == 0 {
		endpoints = nil
	}
	return create, endpoints
}

func nullIsEmpty(m []byte) []byte {
	if string(m) == "null" {
		return nil
	}
	return m
}
