package ocispec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/waitdaemon/waitdaemon/inherit"
	"github.com/waitdaemon/waitdaemon/testkit/golden"
	"github.com/waitdaemon/waitdaemon/testkit/linediff"
)

// caseDir holds the recorded inputs; see its README.md.
const caseDir = "../../../testdata/ocispec"

// newID is the user container's ID in every plan here.
const newID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// requiredCases must each have a recorded input: a lost file fails the
// test rather than shrinking it.
var requiredCases = []string{
	"cni-volumes",
	"entrypoint",
	"kexec",
	"network-host",
	"reboot",
	"registry-config",
}

// recorded is one file of caseDir.
type recorded struct {
	Note         string
	Containerd   string
	Namespace    string
	UserImageRef string
	Withhold     []string
	Container    struct {
		ID   string
		Spec struct {
			TypeURL string          `json:"type_url"`
			Value   json.RawMessage `json:"value"`
		}
	}
	Image     Image
	UserImage Image
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

func (r recorded) spec(tb testing.TB) Spec {
	tb.Helper()
	var s Spec
	if err := json.Unmarshal(r.Container.Spec.Value, &s); err != nil {
		tb.Fatal(err)
	}
	return s
}

func (r recorded) input(tb testing.TB) Input {
	tb.Helper()
	return Input{
		Spec:         r.spec(tb),
		Image:        r.Image.Config,
		UserImage:    r.UserImage.Config,
		UserImageRef: r.UserImageRef,
		Namespace:    r.Namespace,
		ID:           newID,
		Withhold:     r.Withhold,
		HostEtc:      HostFiles,
	}
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
			r := readCase(t, name)
			if r.Container.Spec.TypeURL != TypeURL {
				t.Errorf("recorded spec type URL = %q, want %q", r.Container.Spec.TypeURL, TypeURL)
			}
			in := r.input(t)
			out, err := Plan(in)
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			got := golden.JSON(t, out)
			golden.Check(t, name, got)
			carried(t, in.Spec, out)
			check, ok := checks[name]
			if !ok {
				t.Fatalf("no checks for case %s: add them to checks", name)
			}
			check(t, out)
		})
	}
	golden.NoneStale(t, names, caseDir)
}

// carried checks what every plan keeps from the action's spec as it was:
// the members it does not rebuild, and the rebuilt ones' other members.
func carried(t *testing.T, action, out Spec) {
	t.Helper()
	is(t, "ociVersion", out.OCIVersion, action.OCIVersion)
	is(t, "spec's other members", out.Rest, action.Rest)
	is(t, "process's other members (capabilities, rlimits...)", out.Process.Rest, action.Process.Rest)
	is(t, "linux's other members (devices, resources...)", out.Linux.Rest, action.Linux.Rest)
	is(t, "root.readonly", out.Root.Readonly, action.Root.Readonly)
	is(t, "root.path", out.Root.Path, "rootfs")
	is(t, "linux.cgroupsPath", out.Linux.CgroupsPath, "/tinkerbell/"+newID)
	for _, m := range out.Mounts {
		if strings.HasPrefix(m.Source, "/tmp/tink-dns-") {
			t.Errorf("tink-agent's temporary %s travels: %+v", m.Destination, m)
		}
	}
	for _, ns := range out.Linux.Namespaces {
		if ns.Path != "" {
			t.Errorf("namespace %s joins %s", ns.Type, ns.Path)
		}
	}
}

// checks states, case by case, what the plan must get right, so that the
// goldens are not the only word.
var checks = map[string]func(t *testing.T, out Spec){
	"reboot": func(t *testing.T, out Spec) {
		is(t, "args", out.Process.Args, []string{"reboot"})
		is(t, "env", out.Process.Env, []string{"PATH=/bin"}) // IMAGE, WAIT_SECONDS and our image's PATH are gone
		is(t, "cwd", out.Process.Cwd, "/")
		is(t, "user", out.Process.User, User{AdditionalGids: []uint32{0}})
		is(t, "namespaces", types(out), []string{"ipc", "uts", "mount", "network"})
		is(t, "hostname", out.Hostname, newID[:12])
		is(t, "mount destinations", destinations(out), []string{
			"/proc", "/dev", "/dev/pts", "/dev/shm", "/dev/mqueue", "/sys", "/run",
			"/run/containerd/containerd.sock",
		})
	},
	"kexec": func(t *testing.T, out Spec) {
		is(t, "args", out.Process.Args, []string{"/bin/sh", "-c", "echo kexec"})
		// The user image's entries first, the action's replacing by name.
		is(t, "env", out.Process.Env, []string{"PATH=/usr/bin:/bin", "BLOCK_DEVICE=/dev/sda1", "KEXEC_OPTS=-l", "FS_TYPE=ext4"})
		is(t, "cwd", out.Process.Cwd, "/work")
		is(t, "namespaces", types(out), []string{"ipc", "uts", "mount", "network"})
		is(t, "hostname", out.Hostname, newID[:12])
	},
	"network-host": func(t *testing.T, out Spec) {
		is(t, "args", out.Process.Args, []string{"reboot"})
		is(t, "env", out.Process.Env, []string{"PATH=/bin"})
		is(t, "namespaces", types(out), []string{"ipc", "uts", "mount"})
		is(t, "hostname", out.Hostname, "captainos") // the action's: the host's name, as the agent read it
		hostFiles(t, out)
	},
	"cni-volumes": func(t *testing.T, out Spec) {
		is(t, "args", out.Process.Args, []string{"/bin/id", "-u"})
		is(t, "user", out.Process.User, User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000}})
		is(t, "namespaces", types(out), []string{"pid", "ipc", "uts", "mount", "network"})
		is(t, "hostname", out.Hostname, newID[:12])
		is(t, "volumes", out.Mounts[len(out.Mounts)-2:], []Mount{
			{Destination: "/data", Type: "bind", Source: "/var/lib/tink/data", Options: []string{"rbind", "rslave", "ro"}},
			{Destination: "/var/log", Type: "bind", Source: "/var/log", Options: []string{"rbind", "rw"}},
		})
	},
	"registry-config": func(t *testing.T, out Spec) {
		is(t, "args", out.Process.Args, []string{"reboot"})
		// The aliases are set, so the plain names are the user's; PATH
		// differs from the image's, so the operator set it.
		is(t, "env", out.Process.Env, []string{"PATH=/custom/bin", "IMAGE=user-value", "WAIT_SECONDS=user-value", "DOCKER_CONFIG=/root/.docker"})
		for _, m := range out.Mounts {
			if m.Destination == "/root/.docker" {
				t.Errorf("the registry config travels: %+v", m)
			}
		}
		is(t, "namespaces", types(out), []string{"ipc", "uts", "mount"})
		hostFiles(t, out)
	},
	"entrypoint": func(t *testing.T, out Spec) {
		is(t, "args", out.Process.Args, []string{"/bin/sh", "-c", "echo hi; reboot"})
		is(t, "env", out.Process.Env, []string{"PATH=/bin"})
	},
}

// hostFiles checks that the last mounts are the host's /etc files,
// read-only, as on the host's network.
func hostFiles(t *testing.T, out Spec) {
	t.Helper()
	var want []Mount
	for _, f := range []string{"/etc/resolv.conf", "/etc/hosts", "/etc/hostname"} {
		want = append(want, Mount{Destination: f, Type: "bind", Source: f, Options: []string{"bind", "rprivate", "ro"}})
	}
	if len(out.Mounts) < 3 {
		t.Fatalf("mounts = %d, want at least 3", len(out.Mounts))
	}
	is(t, "host files", out.Mounts[len(out.Mounts)-3:], want)
}

func types(s Spec) []string {
	var out []string
	for _, ns := range s.Linux.Namespaces {
		out = append(out, ns.Type)
	}
	return out
}

func destinations(s Spec) []string {
	var out []string
	for _, m := range s.Mounts {
		out = append(out, m.Destination)
	}
	return out
}

// is compares as indented JSON, which is what containerd gets, and shows
// a line diff.
func is[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	g, w := golden.JSON(t, got), golden.JSON(t, want)
	if !bytes.Equal(g, w) {
		t.Errorf("%s differs (-want +got):\n%s", what, linediff.Text(string(w), string(g)))
	}
}

// base is the recorded reboot case's input, to vary.
func base(t *testing.T) Input {
	t.Helper()
	return readCase(t, "reboot").input(t)
}

// waitdaemonImage is the config of waitdaemon's image.
var waitdaemonImage = ImageConfig{
	Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	Entrypoint: []string{"/waitdaemon", "action", "--"},
}

func TestPlanCommand(t *testing.T) {
	wd := []string{"/waitdaemon", "action", "--"}
	cases := []struct {
		name      string
		args      []string
		img, user ImageConfig
		want      []string
		wantErr   error
	}{
		{"command with the user image's CMD", slices.Concat(wd, []string{"reboot"}), waitdaemonImage, ImageConfig{Cmd: []string{"/bin/sh"}}, []string{"reboot"}, nil},
		{"command after the user image's ENTRYPOINT", slices.Concat(wd, []string{"-f"}), waitdaemonImage, ImageConfig{Entrypoint: []string{"/sbin/reboot"}, Cmd: []string{"-n"}}, []string{"/sbin/reboot", "-f"}, nil},
		{"no command: the user image's ENTRYPOINT and CMD", wd, waitdaemonImage, ImageConfig{Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"echo kexec"}}, []string{"/bin/sh", "-c", "echo kexec"}, nil},
		{"no command, CMD only", wd, waitdaemonImage, ImageConfig{Cmd: []string{"/bin/sh"}}, []string{"/bin/sh"}, nil},
		{"no command, ENTRYPOINT only", wd, waitdaemonImage, ImageConfig{Entrypoint: []string{"/kexec"}}, []string{"/kexec"}, nil},
		{"no command and none in the image", wd, waitdaemonImage, ImageConfig{}, nil, ErrNoCommand},
		{"arguments that look like waitdaemon's are the user's", slices.Concat(wd, []string{"--", "-v"}), waitdaemonImage, ImageConfig{}, []string{"--", "-v"}, nil},
		{"the action image's own CMD is no command", slices.Concat(wd, []string{"--help"}), ImageConfig{Entrypoint: wd, Cmd: []string{"--help"}}, ImageConfig{Cmd: []string{"/bin/sh"}}, []string{"/bin/sh"}, nil},
		{"a replaced ENTRYPOINT travels whole", []string{"/bin/sh", "-c", "echo hi"}, waitdaemonImage, ImageConfig{Entrypoint: []string{"/x"}}, []string{"/bin/sh", "-c", "echo hi"}, nil},
		{"a shorter one too", []string{"/waitdaemon"}, waitdaemonImage, ImageConfig{Cmd: []string{"/bin/sh"}}, []string{"/waitdaemon"}, nil},
		{"an action image without ENTRYPOINT", []string{"reboot"}, ImageConfig{Cmd: []string{"/bin/true"}}, ImageConfig{Entrypoint: []string{"/bin/busybox"}}, []string{"/bin/busybox", "reboot"}, nil},
		{"an action image without ENTRYPOINT, its CMD", []string{"/bin/true"}, ImageConfig{Cmd: []string{"/bin/true"}}, ImageConfig{Cmd: []string{"/bin/sh"}}, []string{"/bin/sh"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := base(t)
			in.Spec.Process.Args = tc.args
			in.Image, in.UserImage = tc.img, tc.user
			out, err := Plan(in)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Plan error = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			is(t, "args", out.Process.Args, tc.want)
		})
	}
}

// TestPlanCgroupsPath: the user container's cgroup is /<namespace>/<id>,
// as containerd's WithNamespacedCgroup makes it; under systemd's cgroup
// driver (an action whose path is slice:prefix:name, its runtime's
// SystemdCgroup, which travels), the action's slice and prefix with the
// container's ID, the only form runc then takes.
func TestPlanCgroupsPath(t *testing.T) {
	for _, tc := range []struct{ action, want string }{
		{"/tinkerbell/act", "/ns/user-1"},
		{"", "/ns/user-1"},
		{"system.slice:tinkerbell:act", "system.slice:tinkerbell:user-1"},
		{"tinkerbell.slice:nerdctl:act", "tinkerbell.slice:nerdctl:user-1"},
		{":tinkerbell:act", ":tinkerbell:user-1"},
	} {
		t.Run(tc.action, func(t *testing.T) {
			in := base(t)
			in.Namespace, in.ID = "ns", "user-1"
			in.Spec.Linux.CgroupsPath = tc.action
			out, err := Plan(in)
			if err != nil {
				t.Fatal(err)
			}
			is(t, "cgroupsPath", out.Linux.CgroupsPath, tc.want)
			is(t, "CgroupsPath", CgroupsPath(tc.action, "ns", "user-1"), tc.want)
		})
	}
}

// TestPlanFallbackCommand: a command given (the fallback's
// WAITDAEMON_FALLBACK_COMMAND) replaces the action's and runs after the
// image's ENTRYPOINT, so that an image with neither ENTRYPOINT nor CMD,
// run by an action with no command, still has one; and an error names
// the container's role.
func TestPlanFallbackCommand(t *testing.T) {
	wd := []string{"/waitdaemon", "action", "--"}
	cases := []struct {
		name    string
		args    []string
		command []string
		user    ImageConfig
		role    string
		want    []string
		wantErr string
	}{
		{name: "image with nothing, action with no command", args: wd, command: []string{"/bin/busybox", "reboot", "-f"}, user: ImageConfig{}, role: "fallback",
			want: []string{"/bin/busybox", "reboot", "-f"}},
		{name: "after the image's ENTRYPOINT", args: slices.Concat(wd, []string{"kexec"}), command: []string{"-f"}, user: ImageConfig{Entrypoint: []string{"/sbin/reboot"}, Cmd: []string{"-n"}}, role: "fallback",
			want: []string{"/sbin/reboot", "-f"}},
		{name: "an empty one is the image's ENTRYPOINT alone", args: wd, command: []string{}, user: ImageConfig{Entrypoint: []string{"/sbin/reboot"}, Cmd: []string{"-n"}}, role: "fallback",
			want: []string{"/sbin/reboot"}},
		{name: "none, the role named", args: wd, user: ImageConfig{}, role: "fallback", wantErr: "fallback image docker.io/library/fb:1: no command"},
		{name: "none, the user's", args: wd, user: ImageConfig{}, wantErr: "user image docker.io/library/fb:1: no command"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := base(t)
			in.Spec.Process.Args = tc.args
			in.Image, in.UserImage = waitdaemonImage, tc.user
			in.UserImageRef, in.Role, in.Command = "docker.io/library/fb:1", tc.role, tc.command
			out, err := Plan(in)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("Plan error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			is(t, "args", out.Process.Args, tc.want)
		})
	}
}

// TestPlanImageDefault: asked for the user image's own default command
// (the fallback's, set without a command), the args are its ENTRYPOINT
// and CMD, as containerd's WithImageConfig makes them, whatever the
// action ran; the cwd and env follow the usual rules.
func TestPlanImageDefault(t *testing.T) {
	wd := []string{"/waitdaemon", "action", "--"}
	fb := ImageConfig{Entrypoint: []string{"/bin/fallback"}, Cmd: []string{"--now"}, WorkingDir: "/fb", Env: []string{"PATH=/fb/bin"}}
	cases := []struct {
		name    string
		args    []string
		user    ImageConfig
		want    []string
		wantErr error
	}{
		{"over the action's command", slices.Concat(wd, []string{"reboot"}), fb, []string{"/bin/fallback", "--now"}, nil},
		{"over an ENTRYPOINT the action replaced", []string{"/bin/sh", "-c", "echo hi"}, fb, []string{"/bin/fallback", "--now"}, nil},
		{"with no command in the action", wd, fb, []string{"/bin/fallback", "--now"}, nil},
		{"CMD only", slices.Concat(wd, []string{"reboot"}), ImageConfig{Cmd: []string{"/bin/sh"}}, []string{"/bin/sh"}, nil},
		{"ENTRYPOINT only", slices.Concat(wd, []string{"reboot"}), ImageConfig{Entrypoint: []string{"/kexec"}}, []string{"/kexec"}, nil},
		{"none in the image", slices.Concat(wd, []string{"reboot"}), ImageConfig{}, nil, ErrNoDefault},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := base(t)
			in.Spec.Process.Args = tc.args
			in.Image, in.UserImage = waitdaemonImage, tc.user
			in.ImageDefault = true
			out, err := Plan(in)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Plan error = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			is(t, "args", out.Process.Args, tc.want)
			is(t, "cwd", out.Process.Cwd, dir(tc.user.WorkingDir))
			is(t, "env", out.Process.Env, orDefault(tc.user.Env))
		})
	}
}

func TestPlanEnv(t *testing.T) {
	const path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	cases := []struct {
		name                 string
		env, img, user, want []string
	}{
		{"control variables and the image's PATH go", []string{path, "IMAGE=alpine", "WAIT_SECONDS=5", "WAITDAEMON_VERBOSE=1"}, []string{path}, []string{"PATH=/bin"}, []string{"PATH=/bin"}},
		{"the user's own variables stay, after the image's", []string{path, "A=1", "B=2"}, []string{path}, []string{"PATH=/bin", "HOME=/root"}, []string{"PATH=/bin", "HOME=/root", "A=1", "B=2"}},
		{"the action's replace the user image's in place", []string{path, "HOME=/data", "A=1"}, []string{path}, []string{"HOME=/root", "PATH=/bin"}, []string{"HOME=/data", "PATH=/bin", "A=1"}},
		{"a PATH the operator set stays", []string{"PATH=/custom", "A=1"}, []string{path}, []string{"PATH=/bin"}, []string{"PATH=/custom", "A=1"}},
		{"with the aliases set, the plain names are the user's", []string{path, "WAITDAEMON_IMAGE=a", "IMAGE=mine", "WAITDAEMON_WAIT_SECONDS=1", "WAIT_SECONDS=also"}, []string{path}, nil, []string{path, "IMAGE=mine", "WAIT_SECONDS=also"}},
		{"an alias set empty is none: the plain names stay waitdaemon's", []string{path, "WAITDAEMON_IMAGE=", "IMAGE=a", "WAITDAEMON_WAIT_SECONDS= ", "WAIT_SECONDS=3", "A=1"}, []string{path}, nil, []string{path, "A=1"}},
		{"a user image without Env gets containerd's PATH", []string{path, "A=1"}, []string{path}, nil, []string{path, "A=1"}},
		{"an action image without Env gave containerd's PATH", []string{path, "A=1"}, nil, []string{"PATH=/bin"}, []string{"PATH=/bin", "A=1"}},
		{"the image's other entries go when unchanged", []string{path, "LANG=C", "TZ=UTC"}, []string{path, "LANG=C", "TZ=Europe/Paris"}, []string{"PATH=/bin"}, []string{"PATH=/bin", "TZ=UTC"}},
		{"a later entry of the same name wins", []string{path, "A=1", "A=2"}, []string{path}, []string{"PATH=/bin"}, []string{"PATH=/bin", "A=2"}},
		{"a name without a value unsets the image's", []string{path, "HOME"}, []string{path}, []string{"PATH=/bin", "HOME=/root"}, []string{"PATH=/bin"}},
		{"nothing left", []string{path, "HOME"}, []string{path}, []string{"HOME=/root"}, nil},
		// README, Settings: DOCKER_HOST reaches the user container; no
		// WAITDAEMON_ variable does.
		{"DOCKER_HOST and DOCKER_CONFIG stay", []string{path, "DOCKER_HOST=unix:///x.sock", "WAITDAEMON_RETRIES=1", "DOCKER_CONFIG=/cfg"}, []string{path}, []string{"PATH=/bin"}, []string{"PATH=/bin", "DOCKER_HOST=unix:///x.sock", "DOCKER_CONFIG=/cfg"}},
		// how-it-works.md, the user container: the engine's variables,
		// which waitdaemon reads too, reach it as the action had them.
		{"CONTAINERD_ADDRESS and CONTAINERD_NAMESPACE stay", []string{path, "CONTAINERD_ADDRESS=/run/k3s/containerd/containerd.sock", "WAITDAEMON_ENGINE=containerd", "CONTAINERD_NAMESPACE=k8s.io"}, []string{path}, []string{"PATH=/bin"}, []string{"PATH=/bin", "CONTAINERD_ADDRESS=/run/k3s/containerd/containerd.sock", "CONTAINERD_NAMESPACE=k8s.io"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := base(t)
			in.Spec.Process.Env = tc.env
			in.Image.Env, in.UserImage.Env = tc.img, tc.user
			out, err := Plan(in)
			if err != nil {
				t.Fatal(err)
			}
			is(t, "env", out.Process.Env, tc.want)
		})
	}
}

func TestPlanCwdAndUser(t *testing.T) {
	root := User{AdditionalGids: []uint32{0}}
	cases := []struct {
		name              string
		cwd               string
		user              User
		imgDir, imgUser   string
		userDir, userUser string
		wantCwd           string
		wantUser          User
		wantErr           error
	}{
		{"the user image's", "/", root, "", "", "/work", "1000:1000", "/work", User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000}}, nil},
		{"none in the user image", "/", root, "", "", "", "", "/", root, nil},
		{"the operator's", "/data", User{UID: 5, GID: 6, AdditionalGids: []uint32{6, 7}}, "", "", "/work", "1000:1000", "/data", User{UID: 5, GID: 6, AdditionalGids: []uint32{6, 7}}, nil},
		{"the action image's defaults", "/app", User{UID: 10, GID: 10, AdditionalGids: []uint32{10}}, "/app", "10:10", "", "", "/", root, nil},
		{"beyond runc's limit", "/", root, "", "", "", "2147483648:0", "", User{}, ErrUser},
		{"an action image user by name: the action's stays", "/", User{UID: 3}, "", "daemon", "", "1000:1000", "/", User{UID: 3}, nil},
		{"an action image's root by name: the user image's", "/", root, "", "root", "", "1000:1000", "/", User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000}}, nil},
		{"an action image's uid 0 alone: the user image's", "/", root, "", "0", "", "1000:1000", "/", User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := base(t)
			in.Spec.Process.Cwd, in.Spec.Process.User = tc.cwd, tc.user
			in.Image.WorkingDir, in.Image.User = tc.imgDir, tc.imgUser
			in.UserImage.WorkingDir, in.UserImage.User = tc.userDir, tc.userUser
			out, err := Plan(in)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Plan error = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), in.UserImageRef) || !strings.Contains(err.Error(), tc.userUser) {
					t.Errorf("error %q names neither the image %s nor its USER %q", err, in.UserImageRef, tc.userUser)
				}
				return
			}
			is(t, "cwd", out.Process.Cwd, tc.wantCwd)
			is(t, "user", out.Process.User, tc.wantUser)
		})
	}
}

// TestPlanUserKeepsUmask keeps what the user has besides its ids.
func TestPlanUserKeepsUmask(t *testing.T) {
	in := base(t)
	in.Spec.Process.User.Rest = Rest{"umask": json.RawMessage(`18`)}
	in.UserImage.User = "1:2"
	out, err := Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	is(t, "user", out.Process.User, User{UID: 1, GID: 2, AdditionalGids: []uint32{2}, Rest: Rest{"umask": json.RawMessage(`18`)}})
}

func TestPlanNamespaces(t *testing.T) {
	ns := func(types ...string) []Namespace {
		var out []Namespace
		for _, t := range types {
			typ, path, _ := strings.Cut(t, "=")
			out = append(out, Namespace{Type: typ, Path: path})
		}
		return out
	}
	cases := []struct {
		name         string
		in           []Namespace
		want         []Namespace
		wantHostname string
		wantHostNet  bool
	}{
		{"private network: a new one", ns("pid", "ipc", "uts", "mount", "network"), ns("pid", "ipc", "uts", "mount", "network"), newID[:12], false},
		{"the action's netns path is not joined", ns("ipc", "uts", "mount", "network=/var/run/netns/cni-1234"), ns("ipc", "uts", "mount", "network"), newID[:12], false},
		{"host network: the action's hostname", ns("ipc", "uts", "mount"), ns("ipc", "uts", "mount"), "action-hostname", true},
		{"host UTS: no hostname", ns("ipc", "mount", "network"), ns("ipc", "mount", "network"), "", false},
		{"other paths are the operator's and stay", ns("ipc=/proc/1/ns/ipc", "uts", "mount", "network"), ns("ipc=/proc/1/ns/ipc", "uts", "mount", "network"), newID[:12], false},
		{"no namespaces at all", nil, nil, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := base(t)
			in.Spec.Linux.Namespaces = tc.in
			in.Spec.Hostname = "action-hostname"
			out, err := Plan(in)
			if err != nil {
				t.Fatal(err)
			}
			is(t, "namespaces", out.Linux.Namespaces, tc.want)
			is(t, "hostname", out.Hostname, tc.wantHostname)
			is(t, "HostNetwork", HostNetwork(out), tc.wantHostNet)
			var etc []Mount
			for _, m := range out.Mounts {
				if slices.Contains(HostFiles, m.Destination) {
					etc = append(etc, m)
				}
			}
			if tc.wantHostNet {
				is(t, "/etc files", len(etc), 3)
				for _, m := range etc {
					is(t, "source of "+m.Destination, m.Source, m.Destination)
					is(t, "options of "+m.Destination, m.Options, []string{"bind", "rprivate", "ro"})
				}
			} else {
				is(t, "/etc files", etc, []Mount(nil))
			}
		})
	}
}

// TestPlanHostEtc: on the host's network, the user container binds
// those of the host's /etc files the host has, and no other (CaptainOS
// has no /etc/hostname); its hostname is the action's, the host's name
// as the agent read it.
func TestPlanHostEtc(t *testing.T) {
	for _, tc := range []struct {
		name string
		has  []string
	}{
		{"no /etc/hostname", []string{"/etc/resolv.conf", "/etc/hosts"}},
		{"none of them", nil},
		{"all three", HostFiles},
		{"/etc/hostname alone", []string{"/etc/hostname"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := readCase(t, "network-host").input(t)
			in.HostEtc = tc.has
			out, err := Plan(in)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range out.Mounts {
				if slices.Contains(HostFiles, m.Destination) {
					got = append(got, m.Destination)
					is(t, "bind of "+m.Destination, m, Mount{Destination: m.Destination, Type: "bind", Source: m.Destination, Options: []string{"bind", "rprivate", "ro"}})
				}
			}
			is(t, "/etc binds", got, tc.has)
			is(t, "hostname", out.Hostname, in.Spec.Hostname)
		})
	}
}

func TestPlanWithhold(t *testing.T) {
	bind := func(src, dst string) Mount {
		return Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", "ro"}}
	}
	action := []Mount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		bind("/etc/waitdaemon/registry", "/root/.docker"),
		bind("/etc/waitdaemon/registry/config.json", "/root/.docker/config.json"),
		bind("/srv/certs", "/root/.dockerx"),
		bind("/srv/secret/key", "/key"),
		bind("/run/containerd/containerd.sock", "/run/containerd/containerd.sock"),
		bind("/my/hosts", "/etc/hosts/"),
		bind("/tmp/tink-dns-1/resolv.conf", "/etc/resolv.conf"),
	}
	cases := []struct {
		name             string
		withhold, source []string
		want             []string // destinations
	}{
		{"nothing withheld: only tink-agent's /etc files go", nil, nil, []string{"/proc", "/root/.docker", "/root/.docker/config.json", "/root/.dockerx", "/key", "/run/containerd/containerd.sock"}},
		{"a path and below", []string{"/root/.docker"}, nil, []string{"/proc", "/root/.dockerx", "/key", "/run/containerd/containerd.sock"}},
		{"a trailing slash", []string{"/root/.docker/"}, nil, []string{"/proc", "/root/.dockerx", "/key", "/run/containerd/containerd.sock"}},
		{"below: hidden where the bind of its parent reaches it", []string{"/root/.docker/config.json"}, nil, []string{"/proc", "/root/.docker", "/root/.dockerx", "/key", "/run/containerd/containerd.sock", "/root/.docker/config.json"}},
		{"the root and empty hold nothing", []string{"/", ""}, []string{"/", ""}, []string{"/proc", "/root/.docker", "/root/.docker/config.json", "/root/.dockerx", "/key", "/run/containerd/containerd.sock"}},
		{"host sources", nil, []string{"/srv/secret", "/etc/waitdaemon/registry/config.json"}, []string{"/proc", "/root/.docker", "/root/.dockerx", "/run/containerd/containerd.sock"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := base(t)
			in.Spec.Mounts = action
			in.Withhold, in.WithholdSources = tc.withhold, tc.source
			out, err := Plan(in)
			if err != nil {
				t.Fatal(err)
			}
			is(t, "mounts", destinations(out), tc.want)
		})
	}
}

// TestPlanMaskWithheld: a withheld path that a bind of the action
// reaches through a parent directory is hidden under an empty, read-only
// tmpfs, mounted after that bind. A bind at the path goes as before; a
// path no bind reaches is the action image's, and needs nothing.
func TestPlanMaskWithheld(t *testing.T) {
	bind := func(src, dst string, opts ...string) Mount {
		return Mount{Destination: dst, Type: "bind", Source: src, Options: append([]string{"rbind"}, opts...)}
	}
	mask := func(dst string) Mount {
		return Mount{Destination: dst, Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}}
	}
	proc := Mount{Destination: "/proc", Type: "proc", Source: "proc"}
	const docker = "/root/.docker"
	cases := []struct {
		name     string
		withhold []string
		action   []Mount
		want     []Mount
	}{
		{"/root:/root, the default DOCKER_CONFIG", []string{docker}, []Mount{proc, bind("/root", "/root")},
			[]Mount{proc, bind("/root", "/root"), mask(docker)}},
		{"DOCKER_CONFIG=/etc/wd/docker under a bind of /etc", []string{"/etc/wd/docker"}, []Mount{bind("/etc", "/etc", "ro"), proc},
			[]Mount{bind("/etc", "/etc", "ro"), proc, mask("/etc/wd/docker")}},
		{"trailing slashes", []string{docker + "/"}, []Mount{bind("/root/", "/root/")},
			[]Mount{bind("/root/", "/root/"), mask(docker)}},
		{"a bind by its options alone", []string{docker}, []Mount{{Destination: "/root", Type: "none", Source: "/root", Options: []string{"rbind", "rw"}}},
			[]Mount{{Destination: "/root", Type: "none", Source: "/root", Options: []string{"rbind", "rw"}}, mask(docker)}},
		{"a bind at the path, dropped, and one at its parent", []string{docker}, []Mount{bind("/srv/auth", docker), bind("/root", "/root")},
			[]Mount{bind("/root", "/root"), mask(docker)}},
		{"a bind at the path alone: dropped, nothing to hide", []string{docker}, []Mount{proc, bind("/srv/auth", docker)},
			[]Mount{proc}},
		{"no bind reaches it", []string{docker}, []Mount{bind("/srv/x", "/root/.dockerx"), bind("/srv/root", "/ro")},
			[]Mount{bind("/srv/x", "/root/.dockerx"), bind("/srv/root", "/ro")}},
		{"nothing withheld", nil, []Mount{bind("/root", "/root")},
			[]Mount{bind("/root", "/root")}},
		{"a tmpfs at the parent holds nothing of the host's", []string{docker}, []Mount{{Destination: "/root", Type: "tmpfs", Source: "tmpfs"}},
			[]Mount{{Destination: "/root", Type: "tmpfs", Source: "tmpfs"}}},
		{"the same path withheld twice, spelled two ways: one mask", []string{docker, docker + "/"}, []Mount{bind("/root", "/root")},
			[]Mount{bind("/root", "/root"), mask(docker)}},
		{"one withheld path below another: the upper one is hidden", []string{docker, docker + "/config.json"}, []Mount{bind("/root", "/root")},
			[]Mount{bind("/root", "/root"), mask(docker)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := base(t)
			in.Spec.Mounts = tc.action
			in.Withhold = tc.withhold
			in.Spec.Linux.Namespaces = []Namespace{{Type: "mount"}, {Type: NetworkNamespace}} // no host files after
			out, err := Plan(in)
			if err != nil {
				t.Fatal(err)
			}
			is(t, "mounts", out.Mounts, tc.want)
		})
	}
}

func TestPlanErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Input)
		want string
	}{
		{"no process", func(in *Input) { in.Spec.Process = nil }, "planning from the action's spec: it has no process"},
		{"no args", func(in *Input) { in.Spec.Process.Args = nil }, "planning from the action's spec: its process has no args"},
		{"no linux", func(in *Input) { in.Spec.Linux = nil }, "planning from the action's spec: it has no linux section"},
		{"no ID", func(in *Input) { in.ID = "" }, "planning the user container: no container ID"},
		{"no namespace", func(in *Input) { in.Namespace = "" }, "planning the user container: no containerd namespace"},
		{"no command", func(in *Input) {
			in.Spec.Process.Args = in.Image.Entrypoint
			in.UserImage = ImageConfig{}
		}, "user image docker.io/library/waitdaemon-ocispec-shell:1: no command: the action's command is empty and the image has no ENTRYPOINT or CMD"},
		{"user by name", func(in *Input) { in.UserImage.User, in.UserDB = "nobody", &UserDB{} }, `user image docker.io/library/waitdaemon-ocispec-shell:1: USER "nobody": cannot be resolved: the image's /etc/passwd has no user nobody`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := base(t)
			tc.edit(&in)
			out, err := Plan(in)
			if err == nil {
				t.Fatalf("Plan = %s, want error %q", golden.JSON(t, out), tc.want)
			}
			is(t, "error", err.Error(), tc.want)
		})
	}
}

// TestPlanLeavesInput checks that a plan does not change its input.
func TestPlanLeavesInput(t *testing.T) {
	for _, name := range requiredCases {
		in := readCase(t, name).input(t)
		in.WithholdSources = []string{"/run"}
		before := golden.JSON(t, in)
		if _, err := Plan(in); err != nil {
			t.Fatal(err)
		}
		is(t, name+" input after Plan", string(golden.JSON(t, in)), string(before))
	}
}

// TestPlanNoRoot plans from a spec without root, which containerd's
// default spec always has.
func TestPlanNoRoot(t *testing.T) {
	in := base(t)
	in.Spec.Root = nil
	out, err := Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	is(t, "root", out.Root, &Root{Path: "rootfs"})
}

// FuzzPlan plans from any spec with extra env lines, and checks that no
// control variable leaks, nothing withheld or temporary travels, and the
// plan encodes to a spec that decodes to itself.
func FuzzPlan(f *testing.F) {
	for _, name := range requiredCases {
		f.Add([]byte(readCase(f, name).Container.Spec.Value), "")
	}
	f.Add([]byte(`{"process":{"args":["/waitdaemon","action","--"],"env":["IMAGE=a"]},"linux":{"namespaces":[{"type":"network","path":"/x"}]},"mounts":[{"destination":"/root/.docker/x"},{"destination":"/etc//hosts"}]}`), "WAITDAEMON_IMAGE=b\nWAIT_SECONDS=1")
	f.Add([]byte(`{"process":{"args":["/waitdaemon","action","--","reboot"]},"linux":{},"mounts":[{"destination":"/root/","type":"bind","source":"/root"},{"destination":"/root/.docker/","type":"bind","source":"/etc/waitdaemon"}]}`), "")
	f.Fuzz(func(t *testing.T, data []byte, env string) {
		var s Spec
		if err := json.Unmarshal(data, &s); err != nil || s.Process == nil || !utf8.ValidString(env) {
			return // JSON, and so a spec, holds no invalid UTF-8
		}
		if env != "" {
			s.Process.Env = append(s.Process.Env, strings.Split(env, "\n")...)
		}
		set := func(name string) bool {
			return slices.ContainsFunc(s.Process.Env, func(kv string) bool {
				k, v, _ := strings.Cut(kv, "=")
				return k == name && strings.TrimSpace(v) != ""
			})
		}
		out, err := Plan(Input{
			Spec: s, Image: waitdaemonImage, UserImage: ImageConfig{Env: []string{"PATH=/bin"}, Cmd: []string{"/bin/sh"}},
			UserImageRef: "docker.io/library/alpine:3.20", Namespace: "tinkerbell", ID: newID,
			Withhold: []string{"/root/.docker"}, WithholdSources: []string{"/etc/waitdaemon"},
		})
		if err != nil {
			return
		}
		for _, kv := range out.Process.Env {
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
		hostNet := HostNetwork(s)
		reached, masked := false, false
		for _, m := range out.Mounts {
			mask := m.Destination == "/root/.docker" && m.Type == "tmpfs" && m.Source == "tmpfs" && slices.Contains(m.Options, "ro")
			masked = masked || mask
			reached = reached || isBind(m) && below("/root/.docker", path.Clean(m.Destination))
			if !mask && (under(m.Destination, []string{"/root/.docker"}) || under(m.Source, []string{"/etc/waitdaemon"})) {
				t.Errorf("withheld mount travels: %+v", m)
			}
			if slices.Contains(HostFiles, filepath.Clean(m.Destination)) && (!hostNet || m.Source != m.Destination) {
				t.Errorf("the action's %s travels: %+v", m.Destination, m)
			}
		}
		if reached != masked {
			t.Errorf("a bind reaches the withheld /root/.docker: %v; it is hidden: %v", reached, masked)
		}
		if out.Root.Path != "rootfs" || out.Linux.CgroupsPath != "/tinkerbell/"+newID {
			t.Errorf("root %q, cgroupsPath %q", out.Root.Path, out.Linux.CgroupsPath)
		}
		if out.Hostname != "" && out.Hostname != newID[:12] && (!hostNet || out.Hostname != s.Hostname) {
			t.Errorf("hostname %q", out.Hostname)
		}
		if len(out.Process.Args) == 0 {
			t.Error("no args")
		}
		js, err := json.MarshalIndent(out, "", " ")
		if err != nil {
			t.Fatalf("the plan does not encode: %v", err)
		}
		var back Spec
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatalf("the plan does not decode: %v", err)
		}
		again, err := json.MarshalIndent(back, "", " ")
		if err != nil || !bytes.Equal(js, again) {
			t.Errorf("the plan changes through JSON (%v):\n%s", err, linediff.Text(string(js), string(again)))
		}
	})
}

// TestAgain: the spec Again makes from a plan, for another ID, is the
// plan for that ID, for every recorded case, under either cgroup driver.
func TestAgain(t *testing.T) {
	for _, name := range caseNames(t) {
		for _, systemd := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, systemd's cgroup driver %v", name, systemd), func(t *testing.T) {
				in := readCase(t, name).input(t)
				if systemd {
					in.Spec.Linux.CgroupsPath = "system.slice:tinkerbell:act"
				}
				testAgain(t, in)
			})
		}
	}
}

func testAgain(t *testing.T, in Input) {
	in.ID = "tinkerbell_kexec-waitdaemon-user-0a1b2c3d"
	first, err := Plan(in)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	firstJSON, _ := json.Marshal(first)
	in.ID = "kexec-waitdaemon-user-2-0a1b2c3d"
	want, err := Plan(in)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	got := Again(first, in.Namespace, "tinkerbell_kexec-waitdaemon-user-0a1b2c3d", in.ID)
	wantJSON, _ := json.MarshalIndent(want, "", "  ")
	gotJSON, _ := json.MarshalIndent(got, "", "  ")
	if diff := linediff.Text(string(wantJSON), string(gotJSON)); diff != "" {
		t.Errorf("Again (-the plan for its ID +got):\n%s", diff)
	}
	if again, _ := json.Marshal(first); !bytes.Equal(again, firstJSON) {
		t.Errorf("Again changed the spec it was given")
	}
}
