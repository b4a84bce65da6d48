package ocispec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// Spec is an OCI runtime spec (runtime-spec v1, config.json): the value of
// containerd's Container.spec, whose type URL is TypeURL. It declares the
// members a plan reads or rewrites; Rest holds every other member as it
// came (annotations, hooks, domainname, ...), so that nothing the action's
// spec says is lost on the way through.
type Spec struct {
	OCIVersion string   `json:"ociVersion"`
	Process    *Process `json:"process,omitempty"`
	Root       *Root    `json:"root,omitempty"`
	Hostname   string   `json:"hostname,omitempty"`
	Mounts     []Mount  `json:"mounts,omitempty"`
	Linux      *Linux   `json:"linux,omitempty"`
	Rest       Rest     `json:"-"`
}

// TypeURL names an OCI runtime spec in containerd's Container.spec (an
// Any): containerd takes any URL at create, and fails the task create
// for a wrong one.
const TypeURL = "types.containerd.io/opencontainers/runtime-spec/1/Spec"

// Process is the spec's process: what runs, and as whom. Rest holds
// capabilities, rlimits, terminal, noNewPrivileges, apparmorProfile,
// oomScoreAdj and the like.
type Process struct {
	User User     `json:"user"`
	Args []string `json:"args,omitempty"`
	Env  []string `json:"env,omitempty"`
	Cwd  string   `json:"cwd"`
	Rest Rest     `json:"-"`
}

// User is the process's user. Rest holds umask and username.
type User struct {
	UID            uint32   `json:"uid"`
	GID            uint32   `json:"gid"`
	AdditionalGids []uint32 `json:"additionalGids,omitempty"`
	Rest           Rest     `json:"-"`
}

// Root is the container's root file system: a path relative to the
// bundle (containerd's is "rootfs").
type Root struct {
	Path     string `json:"path"`
	Readonly bool   `json:"readonly,omitempty"`
	Rest     Rest   `json:"-"`
}

// Mount is one of the spec's mounts. Rest holds uidMappings and
// gidMappings.
type Mount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type,omitempty"`
	Source      string   `json:"source,omitempty"`
	Options     []string `json:"options,omitempty"`
	Rest        Rest     `json:"-"`
}

// Linux is the spec's Linux section. Rest holds devices, resources
// (device cgroup rules among them), sysctl, seccomp, maskedPaths,
// readonlyPaths, uidMappings and the like.
type Linux struct {
	Namespaces  []Namespace `json:"namespaces,omitempty"`
	CgroupsPath string      `json:"cgroupsPath,omitempty"`
	Rest        Rest        `json:"-"`
}

// Namespace is a namespace the container gets: a new one, or with Path,
// the one at that path. A type missing from Linux.Namespaces is the
// host's.
type Namespace struct {
	Type string `json:"type"`
	Path string `json:"path,omitempty"`
	Rest Rest   `json:"-"`
}

// The namespace types a plan looks at.
const (
	NetworkNamespace = "network"
	UTSNamespace     = "uts"
	PIDNamespace     = "pid"
	UserNamespace    = "user"
)

// Rest is the JSON members of an object that its Go type does not
// declare, by name. It travels with the object: decoded into Rest, and
// encoded after the declared members, in the order of their names. A
// member that differs from a declared one only in case (which
// encoding/json decodes into the declared field) is not kept apart.
type Rest map[string]json.RawMessage

// ImageConfig is the config member of an OCI image config (image-spec v1,
// the blob an image's manifest names), with the fields a plan reads.
type ImageConfig struct {
	User       string
	Env        []string
	Entrypoint []string
	Cmd        []string
	WorkingDir string
}

// Image is an OCI image config blob, as read from containerd's content
// store: json.Unmarshal the blob into it and pass its Config.
type Image struct {
	Config ImageConfig `json:"config"`
}

// The JSON methods keep what a type does not declare in its Rest. Each
// converts to a type without methods of the same shape, so the standard
// encoding does the declared members.

func (s *Spec) UnmarshalJSON(b []byte) error {
	type plain Spec
	return decode(b, (*plain)(s), &s.Rest)
}

func (s Spec) MarshalJSON() ([]byte, error) {
	type plain Spec
	return encode(plain(s), s.Rest)
}

func (p *Process) UnmarshalJSON(b []byte) error {
	type plain Process
	return decode(b, (*plain)(p), &p.Rest)
}

func (p Process) MarshalJSON() ([]byte, error) {
	type plain Process
	return encode(plain(p), p.Rest)
}

func (u *User) UnmarshalJSON(b []byte) error {
	type plain User
	return decode(b, (*plain)(u), &u.Rest)
}

func (u User) MarshalJSON() ([]byte, error) {
	type plain User
	return encode(plain(u), u.Rest)
}

func (r *Root) UnmarshalJSON(b []byte) error {
	type plain Root
	return decode(b, (*plain)(r), &r.Rest)
}

func (r Root) MarshalJSON() ([]byte, error) {
	type plain Root
	return encode(plain(r), r.Rest)
}

func (m *Mount) UnmarshalJSON(b []byte) error {
	type plain Mount
	return decode(b, (*plain)(m), &m.Rest)
}

func (m Mount) MarshalJSON() ([]byte, error) {
	type plain Mount
	return encode(plain(m), m.Rest)
}

func (l *Linux) UnmarshalJSON(b []byte) error {
	type plain Linux
	return decode(b, (*plain)(l), &l.Rest)
}

func (l Linux) MarshalJSON() ([]byte, error) {
	type plain Linux
	return encode(plain(l), l.Rest)
}

func (n *Namespace) UnmarshalJSON(b []byte) error {
	type plain Namespace
	return decode(b, (*plain)(n), &n.Rest)
}

func (n Namespace) MarshalJSON() ([]byte, error) {
	type plain Namespace
	return encode(plain(n), n.Rest)
}

// decode unmarshals b into known, a pointer to a struct, and the members
// that none of its fields names into rest.
func decode(b []byte, known any, rest *Rest) error {
	if err := json.Unmarshal(b, known); err != nil {
		return err
	}
	var all Rest
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	names := memberNames(reflect.TypeOf(known).Elem())
	for k := range all {
		if declared(names, k) {
			delete(all, k)
		}
	}
	if len(all) == 0 {
		all = nil
	}
	*rest = all
	return nil
}

// encode marshals known, a struct, with the members of rest after its
// own, leaving out those of rest that one of its fields names.
func encode(known any, rest Rest) ([]byte, error) {
	b, err := json.Marshal(known)
	if err != nil || len(rest) == 0 {
		return b, err
	}
	names := memberNames(reflect.TypeOf(known))
	keys := make([]string, 0, len(rest))
	for k := range rest {
		if !declared(names, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out bytes.Buffer
	out.Write(b[:len(b)-1]) // without the closing brace
	for i, k := range keys {
		if i > 0 || len(b) > 2 {
			out.WriteByte(',')
		}
		name, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		out.Write(name)
		out.WriteByte(':')
		if v := rest[k]; len(v) > 0 {
			out.Write(v)
		} else {
			out.WriteString("null")
		}
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

// memberNames is the JSON member names of a struct type's fields.
func memberNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

// declared reports whether encoding/json decodes the member k into one
// of the fields named names: it matches names without regard to case.
func declared(names []string, k string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, k) })
}

// HostPID reports whether a container with spec s shares the host's pid
// namespace: its spec names no pid namespace, or one at the path of PID
// 1's. One without a path is a new namespace; one at another path is
// some other container's.
func HostPID(s Spec) bool {
	if s.Linux == nil {
		return true
	}
	for _, ns := range s.Linux.Namespaces {
		if ns.Type == PIDNamespace {
			return ns.Path == "/proc/1/ns/pid"
		}
	}
	return true
}

// SysBoot is the capability reboot(2) needs.
const SysBoot = "CAP_SYS_BOOT"

// CanBoot reports whether the process of a container with spec s holds
// CAP_SYS_BOOT: in its bounding set, and in its effective set, which the
// runtime gives the process as the spec says; a process other than root
// (uid 0) has no effective capabilities after its exec but its ambient
// ones, and so needs it in its ambient set. A process with no
// capabilities member has none; nor does one in a user namespace of its
// own, as reboot(2) asks for it in the user namespace that owns the
// host's pid namespace, the host's.
func CanBoot(s Spec) bool {
	if s.Process == nil {
		return false
	}
	if s.Linux != nil && slices.ContainsFunc(s.Linux.Namespaces, func(ns Namespace) bool {
		return ns.Type == UserNamespace && ns.Path != "/proc/1/ns/user"
	}) {
		return false
	}
	var caps struct{ Bounding, Effective, Ambient []string }
	raw, ok := s.Process.Rest["capabilities"]
	if !ok || json.Unmarshal(raw, &caps) != nil {
		return false
	}
	effective := caps.Effective
	if s.Process.User.UID != 0 {
		effective = caps.Ambient
	}
	return slices.Contains(caps.Bounding, SysBoot) && slices.Contains(effective, SysBoot)
}
