// Package hostconfig is Docker's planner (Docker and Podman): it plans the
// user's container from the action's, as an inspected container's Config
// and HostConfig. It copies everything the operator set on the action
// container onto a create request for another image, subtracts what the
// action's own image brought, and drops what must not travel. It does no
// I/O. Package engine/containerd/ocispec plans the same from an OCI
// spec, for containerd.
package hostconfig

import (
	"maps"
	"path"
	"reflect"
	"slices"
	"strings"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/inherit"
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
	// Withhold are directories in the action container whose binds and
	// mounts (at the path or below it) do not travel: the registry config
	// that waitdaemon reads its credentials from. One that a bind or
	// volume of a parent reaches is hidden under an empty tmpfs.
	Withhold []string
	// Again: Container is a user container this package planned, planned
	// again for another run of it. Its environment is then the user's
	// already, whole: it travels as it is, the user's own IMAGE and
	// WAIT_SECONDS too (its action had their aliases set), and the user
	// image's entries too, where they are, which the engine would
	// otherwise add again after the others. Only what Podman adds by
	// itself is left out, as it adds it again.
	Again bool
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
	podman := fromPodman(c)

	cfg := dockerapi.Config{
		Image:       in.UserImage,
		Domainname:  c.Config.Domainname,
		Tty:         c.Config.Tty,
		OpenStdin:   c.Config.OpenStdin,
		Env:         userEnv(c.Config.Env, img.Env, podman, c.Config.Hostname),
		Labels:      userLabels(c.Config.Labels, img.Labels),
		StopTimeout: c.Config.StopTimeout,
	}
	if in.Again {
		cfg.Env = againEnv(c.Config.Env, podman, c.Config.Hostname)
	}
	cfg.Cmd, cfg.Entrypoint = command(c.Config, img)
	cfg.User = differs(c.Config.User, img.User, nil)
	cfg.WorkingDir = differs(c.Config.WorkingDir, img.WorkingDir, workingDir)
	cfg.StopSignal = differs(c.Config.StopSignal, img.StopSignal, stopSignal)
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
	host.Binds, host.Mounts = withhold(host.Binds, host.Mounts, in.Withhold)
	host.Tmpfs = mask(host.Binds, host.Mounts, host.Tmpfs, in.Withhold)
	host.PortBindings = nullIsEmpty(host.PortBindings)
	host.PidMode = notPrivate(host.PidMode)
	host.UTSMode = notPrivate(host.UTSMode)
	if podman && host.MemorySwappiness != nil && *host.MemorySwappiness == 0 {
		// Podman 4.3 reports 0 where nothing was set (Docker reports null
		// or -1). Sent back, 0 is a setting the action never had, and one
		// that a cgroup v2 host cannot apply.
		host.MemorySwappiness = nil
	}

	out := Output{Create: dockerapi.CreateRequest{Config: cfg, HostConfig: host}}
	out.Create.NetworkingConfig, out.Connect = networks(c, shortID, in.APIVersion)
	return out
}

// withhold returns binds and mounts without those whose target is one of
// paths or below one.
func withhold(binds []string, mounts []dockerapi.Mount, paths []string) ([]string, []dockerapi.Mount) {
	if len(paths) == 0 {
		return binds, mounts
	}
	held := func(target string) bool {
		return slices.ContainsFunc(paths, func(p string) bool {
			p = strings.TrimRight(p, "/")
			return p != "" && (target == p || strings.HasPrefix(target, p+"/"))
		})
	}
	var outB []string
	for _, b := range binds {
		// src:target[:options]
		if f := strings.Split(b, ":"); len(f) < 2 || !held(strings.TrimRight(f[1], "/")) {
			outB = append(outB, b)
		}
	}
	var outM []dockerapi.Mount
	for _, m := range mounts {
		if !held(strings.TrimRight(m.Target, "/")) {
			outM = append(outM, m)
		}
	}
	return outB, outM
}

// maskOptions make the tmpfs that hides a withheld path: empty and
// read-only (the engine adds noexec, nosuid and nodev).
const maskOptions = "ro"

// mask returns tmpfs with an empty, read-only tmpfs at each withheld
// path that one of binds or mounts (those that travel) reaches through a
// parent directory: a bind of /root carries /root/.docker along. The
// engine mounts it after the parent, deeper paths last. A path no bind
// reaches is the action image's, not the user's, and needs none; nor
// does one below another withheld path that is hidden. tmpfs itself is
// not changed.
func mask(binds []string, mounts []dockerapi.Mount, tmpfs map[string]string, paths []string) map[string]string {
	var targets []string
	for _, b := range binds {
		// src:target[:options]; a named volume too.
		if f := strings.Split(b, ":"); len(f) >= 2 {
			targets = append(targets, f[1])
		}
	}
	for _, m := range mounts {
		if m.Type != "tmpfs" { // a new tmpfs holds nothing of the host's
			targets = append(targets, m.Target)
		}
	}
	var hide []string
	for _, p := range paths {
		if p = path.Clean(p); p == "/" || p == "." {
			continue
		}
		reached := slices.ContainsFunc(targets, func(t string) bool { return below(p, path.Clean(t)) })
		hidden := func(q string) bool { q = path.Clean(q); return q != "/" && below(p, q) }
		if reached && !slices.ContainsFunc(paths, hidden) {
			hide = append(hide, p)
		}
	}
	if len(hide) == 0 {
		return tmpfs
	}
	out := maps.Clone(tmpfs)
	if out == nil {
		out = map[string]string{}
	}
	for _, p := range hide {
		if _, ok := out[p]; !ok { // the action's own tmpfs there hides it already
			out[p] = maskOptions
		}
	}
	return out
}

// below reports whether p is strictly below dir.
func below(p, dir string) bool {
	return p != dir && (dir == "/" || strings.HasPrefix(p, dir+"/"))
}

// command returns the Cmd and Entrypoint to set. The action's command is
// the user image's command: where the action kept its image's Entrypoint,
// the user image's own applies, and an empty command runs the user
// image's default. An Entrypoint the action set travels with its Cmd,
// whatever that is: the engine takes no image Cmd once an Entrypoint is
// given.
func command(c dockerapi.Config, img dockerapi.Config) (cmd, entrypoint []string) {
	if !slices.Equal(c.Entrypoint, img.Entrypoint) {
		return c.Cmd, c.Entrypoint
	}
	if !slices.Equal(c.Cmd, img.Cmd) {
		return c.Cmd, nil
	}
	return nil, nil
}

// podmanEnv is the variable Podman puts in the environment of every
// container it makes.
const podmanEnv = "container=podman"

// fromPodman tells a container that Podman made. Its Docker-compatible
// inspect (seen on 4.3) reports some values that nobody set.
func fromPodman(c dockerapi.Container) bool {
	return slices.Contains(c.Config.Env, podmanEnv)
}

// userEnv is the container's environment minus the entries its image
// brought unchanged, minus those Podman added by itself, minus
// waitdaemon's own variables.
func userEnv(env, imageEnv []string, podman bool, hostname string) []string {
	control := inherit.Control(env)
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !control[name] && !slices.Contains(imageEnv, kv) && !(podman && podmanAdded(kv, hostname)) {
			out = append(out, kv)
		}
	}
	return out
}

// againEnv is a planned container's environment, for the same again:
// whole, but for what Podman added by itself.
func againEnv(env []string, podman bool, hostname string) []string {
	var out []string
	for _, kv := range env {
		if !(podman && podmanAdded(kv, hostname)) {
			out = append(out, kv)
		}
	}
	return out
}

// podmanAdded tells an entry that Podman 4.3 adds to every container, and
// will add to the user container again: its own mark; TERM=xterm, from its
// default environment whether or not there is a Tty (the recorded
// tink-worker create, with a Tty, sent no TERM), which, copied, would
// override a TERM the user image sets, as an operator's setting would; and
// the container's hostname (its short ID unless one was set), which it
// gives the user container as that container's own.
func podmanAdded(kv, hostname string) bool {
	return kv == podmanEnv || kv == "TERM=xterm" || kv == "HOSTNAME="+hostname
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

// differs is v where it differs from the image's value, else "". A
// non-nil canon maps the values that mean the same to one.
func differs(v, imageV string, canon func(string) string) string {
	if canon == nil {
		canon = func(s string) string { return s }
	}
	if canon(v) == canon(imageV) {
		return ""
	}
	return v
}

// workingDir is the directory that dir means: none is the root. Podman
// 4.3 reports "/" for a container whose image names none; copied, it
// would override the user image's own.
func workingDir(dir string) string {
	if dir == "" {
		return "/"
	}
	return dir
}

// stopSignal is sig with the engine's default, SIGTERM, as "". Podman
// 4.3 reports "15" for a container whose image names none.
func stopSignal(sig string) string {
	switch strings.TrimPrefix(strings.ToUpper(sig), "SIG") {
	case "", "TERM", "15":
		return ""
	}
	return sig
}

// notPrivate drops the pid or UTS namespace mode "private", which Podman
// 4.3 reports for the namespaces it made by default. Docker has no such
// mode for these two (create answers 400 "invalid PID mode"), and "" means
// the same private namespace on both engines. (For IPC and cgroup
// namespaces "private" is a Docker value, and stays.)
func notPrivate(mode string) string {
	if mode == "private" {
		return ""
	}
	return mode
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
// 1.44 only one network goes in the create, the primary one; the others
// come back to be connected after it.
func networks(c dockerapi.Container, shortID, apiVersion string) (*dockerapi.NetworkingConfig, map[string]dockerapi.EndpointSettings) {
	mode := c.HostConfig.NetworkMode
	if mode == "host" || mode == "none" || strings.HasPrefix(mode, "container:") {
		return nil, nil
	}
	endpoints := map[string]dockerapi.EndpointSettings{}
	for name, ep := range c.NetworkSettings.Networks {
		cfg := dockerapi.EndpointSettings{
			IPAMConfig: nullIsEmpty(ep.IPAMConfig),
			Links:      rewriteLinks(ep.Links),
		}
		if len(ep.DriverOpts) > 0 {
			cfg.DriverOpts = ep.DriverOpts
		}
		for _, a := range ep.Aliases {
			// Docker adds the short ID at start (below API 1.45), Podman
			// 4.3 already at create.
			if a != shortID {
				cfg.Aliases = append(cfg.Aliases, a)
			}
		}
		endpoints[name] = cfg
	}
	if len(endpoints) == 0 {
		return nil, nil
	}
	// The network the mode names: Docker's default one is "bridge".
	modeNet := mode
	if modeNet == "" || modeNet == "default" {
		modeNet = "bridge"
	}
	// The mode may name none of the networks: Podman 4.3 reports the mode
	// "bridge" whatever networks it attached (its default one is called
	// "podman"). The first by name is then the primary.
	primary := modeNet
	if _, ok := endpoints[primary]; !ok {
		primary = slices.Min(slices.Collect(maps.Keys(endpoints)))
	}
	create, connect := endpoints, map[string]dockerapi.EndpointSettings(nil)
	if dockerapi.VersionLess(apiVersion, "1.44") {
		create = map[string]dockerapi.EndpointSettings{primary: endpoints[primary]}
		delete(endpoints, primary)
		if len(endpoints) > 0 {
			connect = endpoints
		}
	}
	// Alone, an empty endpoint on the mode's own network says nothing:
	// the engine attaches that network by itself. Next to others it must
	// stay, as an engine given endpoints attaches those only.
	if ep, ok := create[modeNet]; ok && len(create) == 1 && reflect.DeepEqual(ep, dockerapi.EndpointSettings{}) {
		return nil, connect
	}
	return &dockerapi.NetworkingConfig{EndpointsConfig: create}, connect
}

// nullIsEmpty turns a raw JSON null into nothing, which omitempty leaves
// out.
func nullIsEmpty(m []byte) []byte {
	if string(m) == "null" {
		return nil
	}
	return m
}
