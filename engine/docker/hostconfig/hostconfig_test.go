package hostconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/waitdaemon/waitdaemon/dockerapi"
	"github.com/waitdaemon/waitdaemon/inherit"
	"github.com/waitdaemon/waitdaemon/testkit/golden"
)

// caseDir holds the recorded inputs; see its README.md.
const caseDir = "../../../testdata/inherit"

// requiredCases must each have a recorded input: a lost file fails the
// test rather than shrinking it.
var requiredCases = []string{
	"aliases",
	"caps-and-devices",
	"compose-labels",
	"container-network",
	"custom-hostname",
	"dns-and-hosts",
	"empty-command",
	"image-env-and-labels",
	"links",
	"links-bridge",
	"mounts-and-tmpfs",
	"podman-mounts",
	"podman-tink-worker-reboot",
	"port-bindings",
	"privileged",
	"resources-and-limits",
	"tink-agent-entrypoint",
	"tink-agent-host-network",
	"tink-worker-kexec",
	"tink-worker-reboot",
	"uts-host",
}

// recorded is one file of caseDir.
type recorded struct {
	Note       string
	Engine     string
	UserImage  string
	APIVersion string
	Container  json.RawMessage
	Image      dockerapi.Config
}

func readCase(tb testing.TB, name string) recorded {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(caseDir, name+".json"))
	if err != nil {
		tb.Fatal(err)
	}
	var r recorded
	if err := json.Unmarshal(data, &r); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return r
}

func (r recorded) input(tb testing.TB) Input {
	tb.Helper()
	var c dockerapi.Container
	if err := json.Unmarshal(r.Container, &c); err != nil {
		tb.Fatal(err)
	}
	return Input{Container: c, Image: r.Image, UserImage: r.UserImage, APIVersion: r.APIVersion}
}

// caseNames is every recorded case, failing on a required one missing.
func caseNames(t *testing.T) []string {
	t.Helper()
	return golden.Cases(t, caseDir, requiredCases...)
}

// TestPlan compares each recorded case's plan with its golden file, and
// checks what matters about it in checks.
func TestPlan(t *testing.T) {
	names := caseNames(t)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			out := Plan(readCase(t, name).input(t))
			got := golden.JSON(t, out)
			golden.Check(t, name, got)
			check, ok := checks[name]
			if !ok {
				t.Fatalf("no checks for case %s: add them to checks", name)
			}
			check(t, out, got)
		})
	}
	golden.NoneStale(t, names, caseDir)
}

// checks states, case by case, what the plan must get right, so that the
// goldens are not the only word.
var checks = map[string]func(t *testing.T, out Output, js []byte){
	"tink-worker-reboot": func(t *testing.T, out Output, js []byte) {
		c, h := out.Create.Config, out.Create.HostConfig
		is(t, "Image", c.Image, "alpine:3.20")
		is(t, "Cmd", c.Cmd, []string{"reboot"})
		is(t, "Entrypoint", c.Entrypoint, []string(nil))
		is(t, "Env", c.Env, []string(nil)) // IMAGE, WAIT_SECONDS and our image's PATH are gone
		is(t, "Hostname", c.Hostname, "")
		is(t, "Tty", c.Tty, true)
		is(t, "AttachStdout", c.AttachStdout, false)
		is(t, "Labels", c.Labels, map[string]string(nil))
		is(t, "Privileged", h.Privileged, true)
		is(t, "PidMode", h.PidMode, "host")
		is(t, "Binds", h.Binds, []string{"/worker/wf-1:/workflow", "/var/run/docker.sock:/var/run/docker.sock"})
		is(t, "RestartPolicy", h.RestartPolicy, (*dockerapi.RestartPolicy)(nil))
		noNetworking(t, out)
		nullPaths(t, js)
	},
	"tink-worker-kexec": func(t *testing.T, out Output, js []byte) {
		c, h := out.Create.Config, out.Create.HostConfig
		is(t, "Image", c.Image, "alpine:3.20")
		is(t, "Cmd", c.Cmd, []string(nil))
		is(t, "Entrypoint", c.Entrypoint, []string(nil))
		is(t, "Env", c.Env, []string{"BLOCK_DEVICE=/dev/sda1", "FS_TYPE=ext4"})
		is(t, "Hostname", c.Hostname, "")
		is(t, "Privileged", h.Privileged, true)
		is(t, "PidMode", h.PidMode, "host")
		is(t, "Binds", h.Binds, []string{"/worker/wf-1:/workflow", "/var/run/docker.sock:/var/run/docker.sock"})
		noNetworking(t, out)
	},
	"empty-command": func(t *testing.T, out Output, js []byte) {
		c := out.Create.Config
		is(t, "Cmd", c.Cmd, []string(nil))
		is(t, "Entrypoint", c.Entrypoint, []string(nil))
		is(t, "Env", c.Env, []string(nil))
		is(t, "Hostname", c.Hostname, "")
		noNetworking(t, out)
	},
	"aliases": func(t *testing.T, out Output, js []byte) {
		c := out.Create.Config
		is(t, "Cmd", c.Cmd, []string{"reboot"})
		// The aliases are set, so the plain names are the user's.
		is(t, "Env", c.Env, []string{"IMAGE=user-value", "WAIT_SECONDS=user-value"})
	},
	"tink-agent-host-network": func(t *testing.T, out Output, js []byte) {
		c, h := out.Create.Config, out.Create.HostConfig
		is(t, "NetworkMode", h.NetworkMode, "host")
		is(t, "Hostname", c.Hostname, "") // "vm", the host's name
		is(t, "Cmd", c.Cmd, []string{"reboot"})
		is(t, "Env", c.Env, []string(nil))
		is(t, "Tty", c.Tty, false)
		is(t, "Privileged", h.Privileged, true)
		is(t, "PidMode", h.PidMode, "host")
		noNetworking(t, out)
	},
	"tink-agent-entrypoint": func(t *testing.T, out Output, js []byte) {
		c := out.Create.Config
		is(t, "Entrypoint", c.Entrypoint, []string{"/bin/sh", "-c"})
		is(t, "Cmd", c.Cmd, []string{"echo hi; reboot"})
		is(t, "Env", c.Env, []string(nil))
	},
	"custom-hostname": func(t *testing.T, out Output, js []byte) {
		is(t, "Hostname", out.Create.Hostname, "foo")
	},
	"container-network": func(t *testing.T, out Output, js []byte) {
		is(t, "Hostname", out.Create.Hostname, "")
		if !strings.HasPrefix(out.Create.HostConfig.NetworkMode, "container:0100d4001ce8") {
			t.Errorf("NetworkMode = %q, want the helper's container:<id>", out.Create.HostConfig.NetworkMode)
		}
		noNetworking(t, out)
	},
	"uts-host": func(t *testing.T, out Output, js []byte) {
		is(t, "Hostname", out.Create.Hostname, "")
		is(t, "UTSMode", out.Create.HostConfig.UTSMode, "host")
	},
	"privileged": func(t *testing.T, out Output, js []byte) {
		h := out.Create.HostConfig
		is(t, "Privileged", h.Privileged, true)
		is(t, "SecurityOpt", h.SecurityOpt, []string{"label=disable"})
		nullPaths(t, js)
	},
	"mounts-and-tmpfs": func(t *testing.T, out Output, js []byte) {
		h := out.Create.HostConfig
		is(t, "Mounts", h.Mounts, []dockerapi.Mount{
			{Type: "bind", Source: "/tmp", Target: "/hosttmp", ReadOnly: true},
			{Type: "volume", Source: "wd-inherit-vol", Target: "/data"},
		})
		is(t, "Tmpfs", h.Tmpfs, map[string]string{"/run": "rw,size=64m"})
		is(t, "Binds", h.Binds, []string{"/var/run/docker.sock:/var/run/docker.sock"})
		is(t, "Volumes", out.Create.Volumes, map[string]struct{}(nil))
	},
	"caps-and-devices": func(t *testing.T, out Output, js []byte) {
		h := out.Create.HostConfig
		is(t, "CapAdd", h.CapAdd, []string{"CAP_SYS_ADMIN"})
		is(t, "CapDrop", h.CapDrop, []string{"CAP_NET_RAW"})
		is(t, "Devices", h.Devices, []dockerapi.DeviceMapping{{PathOnHost: "/dev/null", PathInContainer: "/dev/mynull", CgroupPermissions: "rwm"}})
		is(t, "DeviceCgroupRules", h.DeviceCgroupRules, []string{"c 1:3 rmw"})
		is(t, "SecurityOpt", h.SecurityOpt, []string{"apparmor=unconfined", "seccomp=unconfined"})
		is(t, "GroupAdd", h.GroupAdd, []string{"10"})
	},
	"resources-and-limits": func(t *testing.T, out Output, js []byte) {
		h := out.Create.HostConfig
		is(t, "Memory", h.Memory, int64(256<<20))
		is(t, "MemorySwap", h.MemorySwap, int64(512<<20))
		is(t, "NanoCpus", h.NanoCpus, int64(500_000_000))
		is(t, "PidsLimit", deref(h.PidsLimit), int64(100))
		is(t, "Ulimits", h.Ulimits, []dockerapi.Ulimit{{Name: "nofile", Soft: 1024, Hard: 2048}})
		is(t, "Sysctls", h.Sysctls, map[string]string{"net.ipv4.ip_forward": "1"})
		is(t, "ShmSize", h.ShmSize, int64(128<<20))
		is(t, "OomScoreAdj", h.OomScoreAdj, 100)
		is(t, "Init", deref(h.Init), true)
		is(t, "ReadonlyRootfs", h.ReadonlyRootfs, true)
		is(t, "IpcMode", h.IpcMode, "private")
		is(t, "CgroupnsMode", h.CgroupnsMode, "private")
		is(t, "LogConfig", h.LogConfig, &dockerapi.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m"}})
	},
	"dns-and-hosts": func(t *testing.T, out Output, js []byte) {
		h := out.Create.HostConfig
		is(t, "Dns", h.Dns, []string{"1.1.1.1"})
		is(t, "DnsSearch", h.DnsSearch, []string{"example.test"})
		is(t, "DnsOptions", h.DnsOptions, []string{"ndots:2"})
		is(t, "ExtraHosts", h.ExtraHosts, []string{"provisioner:192.168.1.1"})
	},
	"image-env-and-labels": func(t *testing.T, out Output, js []byte) {
		c := out.Create.Config
		// PATH differs from the image's, so the operator set it.
		is(t, "Env", c.Env, []string{"PATH=/custom/bin", "FOO=bar"})
		is(t, "Labels", c.Labels, map[string]string{"app": "reboot"})
		is(t, "WorkingDir", c.WorkingDir, "/work")
		is(t, "User", c.User, "1000:1000")
		is(t, "StopSignal", c.StopSignal, "SIGINT")
	},
	"compose-labels": func(t *testing.T, out Output, js []byte) {
		is(t, "Labels", out.Create.Labels, map[string]string{"app": "reboot"})
	},
	"links-bridge": func(t *testing.T, out Output, js []byte) {
		is(t, "Links", out.Create.HostConfig.Links, []string{"wd-inherit-db:db"})
		noNetworking(t, out)
	},
	"links": func(t *testing.T, out Output, js []byte) {
		is(t, "NetworkMode", out.Create.HostConfig.NetworkMode, "wd-inherit-net")
		is(t, "HostConfig.Links", out.Create.HostConfig.Links, []string(nil))
		is(t, "NetworkingConfig", out.Create.NetworkingConfig, &dockerapi.NetworkingConfig{
			EndpointsConfig: map[string]dockerapi.EndpointSettings{
				"wd-inherit-net": {Links: []string{"wd-inherit-db:db"}, Aliases: []string{"act"}},
			},
		})
		is(t, "Connect", out.Connect, map[string]dockerapi.EndpointSettings(nil))
	},
	"port-bindings": func(t *testing.T, out Output, js []byte) {
		c, h := out.Create.Config, out.Create.HostConfig
		is(t, "PortBindings", h.PortBindings, json.RawMessage(`{"80/tcp":[{"HostIp":"","HostPort":"8080"}]}`))
		is(t, "ExposedPorts", c.ExposedPorts, map[string]struct{}{"80/tcp": {}, "9000/tcp": {}})
		is(t, "Volumes", c.Volumes, map[string]struct{}{"/data": {}})
	},
	"podman-tink-worker-reboot": func(t *testing.T, out Output, js []byte) {
		c, h := out.Create.Config, out.Create.HostConfig
		is(t, "Image", c.Image, "alpine:3.20")
		is(t, "Cmd", c.Cmd, []string{"reboot"})
		is(t, "Entrypoint", c.Entrypoint, []string(nil))
		is(t, "Env", c.Env, []string(nil)) // no container=podman, no TERM=xterm
		is(t, "Hostname", c.Hostname, "")
		is(t, "WorkingDir", c.WorkingDir, "") // Podman's "/"
		is(t, "StopSignal", c.StopSignal, "") // Podman's "15"
		is(t, "Privileged", h.Privileged, true)
		is(t, "PidMode", h.PidMode, "host")
		is(t, "UTSMode", h.UTSMode, "") // Podman's "private"
		is(t, "MemorySwappiness", h.MemorySwappiness, (*int64)(nil))
		is(t, "Binds", h.Binds, []string{"/var/run/docker.sock:/var/run/docker.sock:rw,rprivate,rbind", "/worker/wf-1:/workflow:rw,rprivate,rbind"})
		podmanNetwork(t, out)
	},
	"podman-mounts": func(t *testing.T, out Output, js []byte) {
		c, h := out.Create.Config, out.Create.HostConfig
		is(t, "Cmd", c.Cmd, []string{"reboot"})
		is(t, "Env", c.Env, []string(nil))
		is(t, "WorkingDir", c.WorkingDir, "")
		is(t, "StopSignal", c.StopSignal, "")
		is(t, "Binds", h.Binds, []string{
			"/tmp:/hosttmp:ro,rprivate,rbind",
			"/var/run/docker.sock:/var/run/docker.sock:rw,rprivate,rbind",
			"wd-inherit-vol:/data:rw,rprivate,nosuid,nodev,rbind",
		})
		is(t, "Tmpfs", h.Tmpfs, map[string]string{"/run": "rw,size=64m,rprivate,nosuid,nodev,tmpcopyup"})
		is(t, "PidMode", h.PidMode, "") // Podman's "private"
		is(t, "UTSMode", h.UTSMode, "")
		is(t, "IpcMode", h.IpcMode, "shareable") // a Docker value too
		podmanNetwork(t, out)
	},
}

func is[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	// As JSON, which is what the engine gets: null and [] differ, and
	// pointers compare by what they point to.
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		t.Errorf("%s = %s, want %s", what, g, w)
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// noNetworking checks a plan that leaves the networks to the engine.
func noNetworking(t *testing.T, out Output) {
	t.Helper()
	is(t, "NetworkingConfig", out.Create.NetworkingConfig, (*dockerapi.NetworkingConfig)(nil))
	is(t, "Connect", out.Connect, map[string]dockerapi.EndpointSettings(nil))
}

// podmanNetwork checks Podman's default network, named "podman" under
// the mode "bridge", without the short ID Podman aliases at create.
func podmanNetwork(t *testing.T, out Output) {
	t.Helper()
	is(t, "NetworkMode", out.Create.HostConfig.NetworkMode, "bridge")
	is(t, "NetworkingConfig", out.Create.NetworkingConfig, &dockerapi.NetworkingConfig{
		EndpointsConfig: map[string]dockerapi.EndpointSettings{"podman": {}},
	})
	is(t, "Connect", out.Connect, map[string]dockerapi.EndpointSettings(nil))
}

// nullPaths checks that MaskedPaths and ReadonlyPaths are sent as null,
// which asks for the engine's defaults, not as [], which asks for none.
func nullPaths(t *testing.T, js []byte) {
	t.Helper()
	var body struct {
		Create struct{ HostConfig map[string]json.RawMessage }
	}
	if err := json.Unmarshal(js, &body); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"MaskedPaths", "ReadonlyPaths"} {
		if v, ok := body.Create.HostConfig[k]; !ok || string(v) != "null" {
			t.Errorf("HostConfig.%s = %s, want null", k, v)
		}
	}
}

// TestPlanNetworks covers what the recordings do not: several networks,
// either side of API 1.44.
func TestPlanNetworks(t *testing.T) {
	const id = "0123456789abcdef"
	empty := dockerapi.EndpointSettings{}
	aliased := dockerapi.EndpointSettings{Aliases: []string{"web"}}
	withNetworks := func(mode string, nets map[string]dockerapi.EndpointSettings) dockerapi.Container {
		c := dockerapi.Container{ID: id, NetworkSettings: dockerapi.NetworkSettings{Networks: nets}}
		c.HostConfig.NetworkMode = mode
		return c
	}
	cases := []struct {
		name    string
		c       dockerapi.Container
		version string
		create  map[string]dockerapi.EndpointSettings
		connect map[string]dockerapi.EndpointSettings
	}{{
		name:    "default bridge alone",
		c:       withNetworks("default", map[string]dockerapi.EndpointSettings{"bridge": {Aliases: []string{id[:12]}}}),
		version: "1.44",
	}, {
		// Docker 20.10 answers "DriverOpts": null; others {}: the same.
		name:    "default bridge alone, with empty driver options",
		c:       withNetworks("default", map[string]dockerapi.EndpointSettings{"bridge": {Aliases: []string{id[:12]}, DriverOpts: map[string]string{}}}),
		version: "1.44",
	}, {
		name:    "old API: second network connected after",
		c:       withNetworks("default", map[string]dockerapi.EndpointSettings{"bridge": empty, "net": aliased}),
		version: "1.43",
		connect: map[string]dockerapi.EndpointSettings{"net": aliased},
	}, {
		name:    "new API: the empty default network stays next to another",
		c:       withNetworks("default", map[string]dockerapi.EndpointSettings{"bridge": empty, "net": aliased}),
		version: "1.44",
		create:  map[string]dockerapi.EndpointSettings{"bridge": empty, "net": aliased},
	}, {
		name:    "old API: the mode's network goes in the create",
		c:       withNetworks("net", map[string]dockerapi.EndpointSettings{"a": aliased, "net": aliased}),
		version: "1.41",
		create:  map[string]dockerapi.EndpointSettings{"net": aliased},
		connect: map[string]dockerapi.EndpointSettings{"a": aliased},
	}, {
		name:    "Podman: bridge mode on a user network",
		c:       withNetworks("bridge", map[string]dockerapi.EndpointSettings{"mynet": {Aliases: []string{id[:12]}}}),
		version: "1.41",
		create:  map[string]dockerapi.EndpointSettings{"mynet": empty},
	}, {
		name:    "Podman: bridge mode on two networks, old API",
		c:       withNetworks("bridge", map[string]dockerapi.EndpointSettings{"b": empty, "a": aliased}),
		version: "1.41",
		create:  map[string]dockerapi.EndpointSettings{"a": aliased},
		connect: map[string]dockerapi.EndpointSettings{"b": empty},
	}, {
		name: "links by the target's and the alias's last names, and driver options",
		c: withNetworks("net", map[string]dockerapi.EndpointSettings{"net": {
			Links: []string{"/db:/web/db", "/cache:/c", "plain"}, DriverOpts: map[string]string{"com.example.mtu": "1400"},
		}}),
		version: "1.44",
		create: map[string]dockerapi.EndpointSettings{"net": {
			Links: []string{"db:db", "cache:c", "plain"}, DriverOpts: map[string]string{"com.example.mtu": "1400"},
		}},
	}, {
		name:    "none",
		c:       withNetworks("none", map[string]dockerapi.EndpointSettings{"none": empty}),
		version: "1.44",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := Plan(Input{Container: tc.c, UserImage: "alpine", APIVersion: tc.version})
			var create map[string]dockerapi.EndpointSettings
			if nc := out.Create.NetworkingConfig; nc != nil {
				create = nc.EndpointsConfig
			}
			is(t, "create", create, tc.create)
			is(t, "Connect", out.Connect, tc.connect)
		})
	}
}

// TestPlanCommand covers the Cmd and Entrypoint rules against an image
// with both.
func TestPlanCommand(t *testing.T) {
	img := dockerapi.Config{Entrypoint: []string{"/ep"}, Cmd: []string{"default"}}
	cases := []struct {
		name                    string
		cmd, entrypoint         []string
		wantCmd, wantEntrypoint []string
	}{
		{"image defaults", []string{"default"}, []string{"/ep"}, nil, nil},
		{"own command", []string{"reboot"}, []string{"/ep"}, []string{"reboot"}, nil},
		{"own entrypoint, the image's command", []string{"default"}, []string{"/bin/sh"}, []string{"default"}, []string{"/bin/sh"}},
		{"own entrypoint, no command", nil, []string{"/bin/sh"}, nil, []string{"/bin/sh"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dockerapi.Container{ID: "x", Config: dockerapi.Config{Cmd: tc.cmd, Entrypoint: tc.entrypoint}}
			out := Plan(Input{Container: c, Image: img, UserImage: "alpine"})
			is(t, "Cmd", out.Create.Cmd, tc.wantCmd)
			is(t, "Entrypoint", out.Create.Entrypoint, tc.wantEntrypoint)
		})
	}
}

// TestPlanHealthcheck: the action's health check goes to the user
// container when it is its own, not its image's, which the user image
// does not have.
func TestPlanHealthcheck(t *testing.T) {
	own := &dockerapi.HealthConfig{Test: []string{"CMD", "true"}}
	imgs := &dockerapi.HealthConfig{Test: []string{"CMD-SHELL", "curl -f localhost"}}
	cases := []struct {
		name   string
		c, img *dockerapi.HealthConfig
		want   *dockerapi.HealthConfig
	}{
		{"its own", own, nil, own},
		{"its own, over the image's", own, imgs, own},
		{"the image's", imgs, imgs, nil},
		{"none", nil, imgs, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := Plan(Input{Container: dockerapi.Container{ID: "x", Config: dockerapi.Config{Healthcheck: tc.c}}, Image: dockerapi.Config{Healthcheck: tc.img}})
			is(t, "Healthcheck", out.Create.Healthcheck, tc.want)
		})
	}
}

// TestPlanWithhold: binds and mounts at a withheld path, or below it,
// stay with the action; the rest travel, in order.
func TestPlanWithhold(t *testing.T) {
	c := dockerapi.Container{ID: "x", HostConfig: dockerapi.HostConfig{
		Binds: []string{"/worker/wf:/workflow", "/srv/auth:/root/.docker:ro", "/srv/auth/config.json:/root/.docker/config.json", "/srv/other:/root/.dockerfiles", "/var/run/docker.sock:/var/run/docker.sock"},
		Mounts: []dockerapi.Mount{
			{Type: "bind", Source: "/srv/auth", Target: "/root/.docker/"},
			{Type: "tmpfs", Target: "/scratch"},
		},
	}}
	out := Plan(Input{Container: c, Withhold: []string{"/root/.docker/"}})
	is(t, "Binds", out.Create.HostConfig.Binds, []string{"/worker/wf:/workflow", "/srv/other:/root/.dockerfiles", "/var/run/docker.sock:/var/run/docker.sock"})
	is(t, "Mounts", out.Create.HostConfig.Mounts, []dockerapi.Mount{{Type: "tmpfs", Target: "/scratch"}})
	none := Plan(Input{Container: c})
	is(t, "Binds withholding nothing", none.Create.HostConfig.Binds, c.HostConfig.Binds)
}

// TestPlanDefaults covers values that mean the engine's default, on
// images with and without their own.
func TestPlanDefaults(t *testing.T) {
	cases := []struct {
		name                string
		c, img              dockerapi.Config
		wantDir, wantSignal string
	}{
		{"Podman's defaults", dockerapi.Config{WorkingDir: "/", StopSignal: "15"}, dockerapi.Config{}, "", ""},
		{"Docker's SIGTERM", dockerapi.Config{StopSignal: "SIGTERM"}, dockerapi.Config{}, "", ""},
		{"set against the image's", dockerapi.Config{WorkingDir: "/", StopSignal: "SIGTERM"}, dockerapi.Config{WorkingDir: "/app", StopSignal: "SIGINT"}, "/", "SIGTERM"},
		{"the image's own dir; its signal spelled otherwise, kept", dockerapi.Config{WorkingDir: "/app", StopSignal: "SIGINT"}, dockerapi.Config{WorkingDir: "/app", StopSignal: "2"}, "", "SIGINT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := Plan(Input{Container: dockerapi.Container{Config: tc.c}, Image: tc.img})
			is(t, "WorkingDir", out.Create.WorkingDir, tc.wantDir)
			is(t, "StopSignal", out.Create.StopSignal, tc.wantSignal)
		})
	}
}

// TestPlanPodmanEnv keeps container=podman, TERM=xterm and Podman's
// HOSTNAME apart from the same names set otherwise.
func TestPlanPodmanEnv(t *testing.T) {
	cases := []struct {
		env, want []string
	}{
		{[]string{"container=podman", "TERM=xterm", "A=1"}, []string{"A=1"}},
		{[]string{"TERM=xterm", "container=docker"}, []string{"TERM=xterm", "container=docker"}},
		{[]string{"container=podman", "TERM=linux"}, []string{"TERM=linux"}},
		{[]string{"container=podman", "HOSTNAME=0123456789ab", "A=1"}, []string{"A=1"}},
		{[]string{"container=podman", "HOSTNAME=other"}, []string{"HOSTNAME=other"}},
		{[]string{"HOSTNAME=0123456789ab"}, []string{"HOSTNAME=0123456789ab"}},
	}
	for _, tc := range cases {
		c := dockerapi.Container{Config: dockerapi.Config{Env: tc.env, Hostname: "0123456789ab"}}
		is(t, fmt.Sprintf("Env from %q", tc.env), Plan(Input{Container: c}).Create.Env, tc.want)
	}
}

// TestPlanLeavesEngineMade: the engine-made hostname, the MAC address,
// Compose's labels, a restart policy and auto-remove are not copied
// (docs/how-it-works.md: the user container).
func TestPlanLeavesEngineMade(t *testing.T) {
	c := dockerapi.Container{
		ID: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		Config: dockerapi.Config{Hostname: "0123456789ab", MacAddress: "02:42:ac:11:00:02",
			Labels: map[string]string{"com.docker.compose.project": "tink", "site": "lab"}},
		HostConfig: dockerapi.HostConfig{AutoRemove: true, RestartPolicy: &dockerapi.RestartPolicy{Name: "always"}},
	}
	out := Plan(Input{Container: c}).Create
	is(t, "Hostname", out.Config.Hostname, "")
	is(t, "MacAddress", out.Config.MacAddress, "")
	is(t, "Labels", out.Config.Labels, map[string]string{"site": "lab"})
	is(t, "AutoRemove", out.HostConfig.AutoRemove, false)
	is(t, "RestartPolicy", out.HostConfig.RestartPolicy, (*dockerapi.RestartPolicy)(nil))
}

// TestPlanEnvControl: no WAITDAEMON_ variable reaches the user container,
// nor IMAGE and WAIT_SECONDS unless their alias is set; DOCKER_HOST,
// DOCKER_CONFIG, CONTAINERD_ADDRESS and CONTAINERD_NAMESPACE do
// (settings.md, how-it-works.md).
func TestPlanEnvControl(t *testing.T) {
	cases := []struct {
		env, want []string
	}{
		{[]string{"IMAGE=a", "WAIT_SECONDS=3", "WAITDAEMON_RETRIES=1", "WAITDAEMON_VERBOSE=1", "DOCKER_HOST=unix:///x.sock", "DOCKER_CONFIG=/cfg", "A=1"},
			[]string{"DOCKER_HOST=unix:///x.sock", "DOCKER_CONFIG=/cfg", "A=1"}},
		{[]string{"WAITDAEMON_IMAGE=a", "IMAGE=mine", "WAITDAEMON_WAIT_SECONDS=3", "WAIT_SECONDS=also"}, []string{"IMAGE=mine", "WAIT_SECONDS=also"}},
		{[]string{"WAITDAEMON_IMAGE=a", "IMAGE=mine", "WAIT_SECONDS=3"}, []string{"IMAGE=mine"}},
		// containerd's variables too, as the action had them.
		{[]string{"IMAGE=a", "CONTAINERD_ADDRESS=/x.sock", "WAITDAEMON_ENGINE=docker", "CONTAINERD_NAMESPACE=ns"}, []string{"CONTAINERD_ADDRESS=/x.sock", "CONTAINERD_NAMESPACE=ns"}},
		// An alias set empty is none: the plain names stay waitdaemon's.
		{[]string{"WAITDAEMON_IMAGE=", "IMAGE=a", "WAITDAEMON_WAIT_SECONDS= ", "WAIT_SECONDS=3", "A=1"}, []string{"A=1"}},
	}
	for _, tc := range cases {
		c := dockerapi.Container{Config: dockerapi.Config{Env: tc.env}}
		is(t, fmt.Sprintf("Env from %q", tc.env), Plan(Input{Container: c}).Create.Env, tc.want)
	}
}

// TestPlanAgainEnv: a user container planned again (a re-run) keeps its
// environment whole and in its order: the user's own IMAGE and
// WAIT_SECONDS, an entry its image gave, and one the operator set the
// same as its image's; only what Podman added goes, as Podman adds it
// again.
func TestPlanAgainEnv(t *testing.T) {
	img := dockerapi.Config{Env: []string{"PATH=/usr/bin", "LANG=C"}}
	cases := []struct {
		env, want []string
	}{
		{[]string{"IMAGE=mine", "WAIT_SECONDS=also", "LANG=C", "A=1", "PATH=/usr/bin"},
			[]string{"IMAGE=mine", "WAIT_SECONDS=also", "LANG=C", "A=1", "PATH=/usr/bin"}},
		{[]string{"container=podman", "IMAGE=mine", "HOSTNAME=0123456789ab", "TERM=xterm", "PATH=/usr/bin"},
			[]string{"IMAGE=mine", "PATH=/usr/bin"}},
	}
	for _, tc := range cases {
		c := dockerapi.Container{Config: dockerapi.Config{Env: tc.env, Hostname: "0123456789ab"}}
		is(t, fmt.Sprintf("Env again from %q", tc.env), Plan(Input{Container: c, Image: img, Again: true}).Create.Env, tc.want)
	}
}

// fuzzImage is the recorded config of an image shaped like waitdaemon's.
var fuzzImage = dockerapi.Config{
	Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	Entrypoint: []string{"/waitdaemon", "action", "--"},
	Labels:     map[string]string{"org.opencontainers.image.title": "waitdaemon"},
}

// FuzzPlan plans from any inspect answer with extra env lines, and checks
// that no control variable leaks and that the plan can be sent.
func FuzzPlan(f *testing.F) {
	for _, name := range []string{"tink-worker-reboot", "aliases", "links", "podman-tink-worker-reboot"} {
		f.Add([]byte(readCase(f, name).Container), "")
	}
	f.Add([]byte(`{"Id":"x","Config":{"Env":["IMAGE=a"]}}`), "WAITDAEMON_IMAGE=b\nWAIT_SECONDS=1")
	f.Fuzz(func(t *testing.T, data []byte, env string) {
		var c dockerapi.Container
		if err := json.Unmarshal(data, &c); err != nil {
			return
		}
		if env != "" {
			c.Config.Env = append(c.Config.Env, strings.Split(env, "\n")...)
		}
		set := func(name string) bool {
			return slices.ContainsFunc(c.Config.Env, func(kv string) bool {
				k, v, _ := strings.Cut(kv, "=")
				return k == name && strings.TrimSpace(v) != ""
			})
		}
		for _, version := range []string{"1.41", "1.44"} {
			out := Plan(Input{Container: c, Image: fuzzImage, UserImage: "alpine:3.20", APIVersion: version})
			for _, kv := range out.Create.Env {
				name, _, _ := strings.Cut(kv, "=")
				switch {
				case strings.HasPrefix(name, inherit.Prefix):
					t.Errorf("control variable %q passed on", kv)
				case name == inherit.Image.Plain && !set(inherit.Image.Alias):
					t.Errorf("%q passed on without %s set", kv, inherit.Image.Alias)
				case name == inherit.WaitSeconds.Plain && !set(inherit.WaitSeconds.Alias):
					t.Errorf("%q passed on without %s set", kv, inherit.WaitSeconds.Alias)
				}
			}
			if _, err := json.Marshal(out.Create); err != nil {
				t.Errorf("the create body does not encode: %v", err)
			}
		}
	})
}

// TestPlanMaskWithheld: a withheld path that a bind or volume of the
// action reaches through a parent directory is hidden under an empty,
// read-only tmpfs in the user container. A bind at the path is dropped
// as before; a path no bind reaches is the action image's, and needs
// nothing. The action's own tmpfs mounts stay, and its map is left as it
// was.
func TestPlanMaskWithheld(t *testing.T) {
	const docker = "/root/.docker"
	cases := []struct {
		name      string
		withhold  []string
		binds     []string
		mounts    []dockerapi.Mount
		tmpfs     map[string]string
		wantBinds []string
		wantTmpfs map[string]string
	}{
		{"/root:/root, the default DOCKER_CONFIG", []string{docker}, []string{"/root:/root"}, nil, nil,
			[]string{"/root:/root"}, map[string]string{docker: "ro"}},
		{"DOCKER_CONFIG=/etc/wd/docker under a bind of /etc", []string{"/etc/wd/docker"}, []string{"/etc:/etc:ro"}, nil, nil,
			[]string{"/etc:/etc:ro"}, map[string]string{"/etc/wd/docker": "ro"}},
		{"Podman's options, trailing slashes", []string{docker + "/"}, []string{"/root/:/root/:rw,rprivate,rbind"}, nil, nil,
			[]string{"/root/:/root/:rw,rprivate,rbind"}, map[string]string{docker: "ro"}},
		{"a named volume at the parent", []string{docker}, []string{"home:/root"}, nil, nil,
			[]string{"home:/root"}, map[string]string{docker: "ro"}},
		{"a bind at the path, dropped, and one at its parent", []string{docker}, []string{"/srv/auth:/root/.docker:ro", "/root:/root"}, nil, nil,
			[]string{"/root:/root"}, map[string]string{docker: "ro"}},
		{"a bind at the path alone: dropped, nothing to hide", []string{docker}, []string{"/srv/auth:/root/.docker:ro", "/worker:/workflow"}, nil, nil,
			[]string{"/worker:/workflow"}, nil},
		{"no bind reaches it", []string{docker}, []string{"/root/.dockerx:/root/.dockerx", "/srv/root:/ro"}, nil, nil,
			[]string{"/root/.dockerx:/root/.dockerx", "/srv/root:/ro"}, nil},
		{"nothing withheld", nil, []string{"/root:/root"}, nil, nil,
			[]string{"/root:/root"}, nil},
		{"a bind mount at the parent", []string{docker}, nil, []dockerapi.Mount{{Type: "bind", Source: "/root", Target: "/root/"}}, nil,
			nil, map[string]string{docker: "ro"}},
		{"a volume mount two levels up", []string{"/var/lib/wd/docker"}, nil, []dockerapi.Mount{{Type: "volume", Source: "lib", Target: "/var/lib"}}, nil,
			nil, map[string]string{"/var/lib/wd/docker": "ro"}},
		{"a tmpfs mount at the parent holds nothing of the host's", []string{docker}, nil, []dockerapi.Mount{{Type: "tmpfs", Target: "/root"}}, nil,
			nil, nil},
		{"next to the action's own tmpfs", []string{docker}, []string{"/root:/root"}, nil, map[string]string{"/run": "rw,size=64m"},
			[]string{"/root:/root"}, map[string]string{"/run": "rw,size=64m", docker: "ro"}},
		{"one withheld path below another: the upper one is hidden", []string{docker, docker + "/config.json"}, []string{"/root:/root"}, nil, nil,
			[]string{"/root:/root"}, map[string]string{docker: "ro"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dockerapi.Container{ID: "x", HostConfig: dockerapi.HostConfig{Binds: tc.binds, Mounts: tc.mounts, Tmpfs: tc.tmpfs}}
			before := fmt.Sprint(tc.tmpfs)
			out := Plan(Input{Container: c, Withhold: tc.withhold})
			is(t, "Binds", out.Create.HostConfig.Binds, tc.wantBinds)
			is(t, "Tmpfs", out.Create.HostConfig.Tmpfs, tc.wantTmpfs)
			is(t, "the action's Tmpfs after the plan", fmt.Sprint(tc.tmpfs), before)
		})
	}
}
