// Package ocispec plans the user's container on containerd from the
// action's: it turns the action container's OCI runtime spec, as
// tink-agent's containerd runtime made it, into the spec of a container
// that runs the user's image instead, with everything the operator set on
// the action. It is containerd's planner, as engine/docker/hostconfig,
// which makes a Docker create request, is Docker's; both take the control
// variables from package inherit and follow the same rules where the two
// engines meet. It does no I/O.
//
// What travels, untouched: the namespaces (so pid and network host or
// not), capabilities, privileges, devices and device cgroup rules,
// rlimits, sysctls, seccomp, AppArmor and SELinux settings, masked and
// read-only paths, annotations, hooks, the mounts (the default ones, the
// /run tmpfs and the operator's volumes), and every member of the spec
// this package does not know.
//
// What is rebuilt:
//   - process.args: the action's command (its args after the action
//     image's ENTRYPOINT, which for waitdaemon is ["/waitdaemon",
//     "action", "--"]) is the user image's command, run by the user
//     image's ENTRYPOINT. No command runs the user image's ENTRYPOINT and
//     CMD. Args that do not start with the action image's ENTRYPOINT
//     replaced it, and travel whole. Input.ImageDefault (the fallback's
//     image without a command) runs the user image's ENTRYPOINT and CMD,
//     whatever the action ran; Input.Command (the fallback's command)
//     runs after the user image's ENTRYPOINT, whatever the action ran.
//   - process.env: the action's, less waitdaemon's control variables
//     (inherit.Control) and the entries its image brought unchanged,
//     merged over the user image's Env (the user image's entries first,
//     the action's replacing them by name), as containerd merges an
//     image's Env with a container's.
//   - process.cwd and process.user: the user image's, unless the action's
//     differ from what its image gave (then the operator set them, and
//     they travel). A user image's USER is resolved as runc's callers
//     (Docker, containerd's WithUser) resolve it: empty is root, and a
//     numeric uid:gid is itself, each with its own group, then, as
//     containerd's WithAdditionalGIDs adds them, the groups of the
//     image's /etc/group that list root (for an empty USER, whose
//     process lacks CAP_DAC_OVERRIDE: see ReadsUserDB) or the uid's
//     user by name, but the one of that user's own name; a user
//     by name, or a uid alone, is looked up in the image's /etc/passwd
//     (a uid that is not there is itself, in group 0), and its
//     additional groups are those of the image's /etc/group that list
//     it by name; a group by name is looked up in /etc/group. The plan
//     does not read files: the engine gives it the image's /etc/passwd
//     and /etc/group (Input.UserDB), which a USER that NeedsUserDB says
//     needs them cannot do without; without them the others get their
//     own group alone. A name that is not there is ErrUser.
//   - root.path: "rootfs"; linux.cgroupsPath: /<namespace>/<id> of the
//     new container, or under systemd's cgroup driver the action's
//     slice:prefix: with its ID (CgroupsPath).
//   - network: with no network namespace in the action's spec, the user
//     container shares the host's network. With one, it gets a new,
//     private network namespace (no path): the action's was made for it,
//     and its CNI network (which tink-agent sets up on the task's own
//     namespace, and removes with the action) does not outlive it. That
//     namespace has a loopback interface only.
//   - hostname: where it has its own UTS namespace, the first 12
//     characters of the new ID, as tink-agent and nerdctl name a
//     container, on a private network; on the host's network, the
//     action's, which tink-agent sets to the host's name. With the host's
//     UTS namespace there is nothing to set.
//   - /etc/resolv.conf, /etc/hosts and /etc/hostname: tink-agent binds
//     them from a temporary directory that it deletes when the action
//     ends, so the action's binds at these paths never travel. On the
//     host's network the user container binds, read-only, those of the
//     host's own three files that the host has (Input.HostEtc: the files
//     the agent read to make the action's; CaptainOS has no
//     /etc/hostname, and a missing bind source would fail the task
//     create); for one the host lacks it sees its image's own. On a
//     private network it binds none and sees its image's own, since it
//     has no network to resolve names on.
//   - withheld mounts: those at or below an Input.Withhold path (the
//     registry config the action read its credentials from) or from at
//     or below an Input.WithholdSources host path do not travel. A
//     withheld path that a bind of a parent directory still reaches (a
//     bind of /root, with /root/.docker withheld) is hidden under an
//     empty, read-only tmpfs mounted after the action's mounts; the
//     path, a directory, must be there below the bind.
package ocispec

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/waitdaemon/waitdaemon/inherit"
)

// Input is what a plan is made from.
type Input struct {
	// Spec is the action container's spec, as containerd stores it
	// (Container.spec's value, decoded with json.Unmarshal).
	Spec Spec
	// Image is the config of the action container's image (waitdaemon's),
	// whose defaults are subtracted.
	Image ImageConfig
	// UserImage is the config of the image the user container runs, and
	// UserImageRef its name, for messages.
	UserImage    ImageConfig
	UserImageRef string
	// UserDB is the user image's /etc/passwd and /etc/group, which its
	// USER needs when NeedsUserDB says so; nil when not read. The plan
	// reads it only where ReadsUserDB says it depends on it.
	UserDB *UserDB
	// ImageDefault runs the user image's own ENTRYPOINT and CMD, whatever
	// the action's command: the fallback's, when its image is set without
	// a command.
	ImageDefault bool
	// Command, when not nil, replaces the action's command, and runs
	// after the user image's ENTRYPOINT: the fallback's command.
	Command []string
	// Role is the container's, for messages: "user" when empty, or
	// "fallback".
	Role string
	// Namespace is the containerd namespace the user container is made
	// in, and ID its ID: its cgroup is /<Namespace>/<ID>.
	Namespace string
	ID        string
	// Withhold are directories in the action container whose mounts (at
	// the path or below it) do not travel: the registry config that
	// waitdaemon reads its credentials from. One that a bind of a parent
	// reaches is hidden under an empty tmpfs.
	Withhold []string
	// WithholdSources are host paths whose mounts (of the path or of
	// something below it) do not travel.
	WithholdSources []string
	// HostEtc are the HostFiles the host has, as the planner found them:
	// on the host's network, only these are bound.
	HostEtc []string
}

// HostFiles are the files the user container binds read-only from the
// host, at the same paths, when it shares the host's network and the
// host has them (Input.HostEtc); on any network, the action's mounts at
// these paths do not travel.
var HostFiles = []string{"/etc/resolv.conf", "/etc/hosts", "/etc/hostname"}

// The errors of a plan that the operator can act on.
var (
	// ErrNoCommand is a user image with neither ENTRYPOINT nor CMD, run
	// by an action with no command.
	ErrNoCommand = errors.New("no command: the action's command is empty and the image has no ENTRYPOINT or CMD")
	// ErrNoDefault is a user image with neither ENTRYPOINT nor CMD,
	// asked for its own default command.
	ErrNoDefault = errors.New("no command: the image has no ENTRYPOINT or CMD of its own to run")
	// ErrUser is a user image whose USER cannot be resolved: a user or
	// group by name that its /etc/passwd or /etc/group does not have, or
	// an ID beyond runc's limit.
	ErrUser = errors.New("cannot be resolved")
)

// defaultEnv is the Env containerd gives a container whose image has
// none.
var defaultEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// rootfs is the root path containerd gives every container: the bundle's
// rootfs directory, where the task's root mounts go.
const rootfs = "rootfs"

// Plan turns the action container's spec into the spec of the user
// container. It does not change in.Spec.
func Plan(in Input) (Spec, error) {
	s := in.Spec
	switch {
	case s.Process == nil:
		return Spec{}, errors.New("planning from the action's spec: it has no process")
	case len(s.Process.Args) == 0:
		return Spec{}, errors.New("planning from the action's spec: its process has no args")
	case s.Linux == nil:
		return Spec{}, errors.New("planning from the action's spec: it has no linux section")
	case in.ID == "":
		return Spec{}, errors.New("planning the user container: no container ID")
	case in.Namespace == "":
		return Spec{}, errors.New("planning the user container: no containerd namespace")
	}

	p := *s.Process
	var err error
	role := cmp.Or(in.Role, "user")
	if p.Args, err = command(p.Args, in.Command, in.Image, in.UserImage, in.ImageDefault); err != nil {
		return Spec{}, fmt.Errorf("%s image %s: %w", role, in.UserImageRef, err)
	}
	p.Env = userEnv(p.Env, in.Image.Env, in.UserImage.Env)
	if dir(p.Cwd) == dir(in.Image.WorkingDir) {
		p.Cwd = dir(in.UserImage.WorkingDir)
	}
	db := in.UserDB
	if !ReadsUserDB(in) {
		db = nil
	}
	if p.User, err = user(p.User, in.Image.User, in.UserImage.User, db); err != nil {
		return Spec{}, fmt.Errorf("%s image %s: USER %q: %w", role, in.UserImageRef, in.UserImage.User, err)
	}
	s.Process = &p

	if s.Root != nil {
		r := *s.Root
		r.Path = rootfs
		s.Root = &r
	} else {
		s.Root = &Root{Path: rootfs}
	}

	l := *s.Linux
	hostNet := HostNetwork(in.Spec)
	l.Namespaces = nil
	for _, ns := range in.Spec.Linux.Namespaces {
		if ns.Type == NetworkNamespace {
			ns = Namespace{Type: NetworkNamespace}
		}
		l.Namespaces = append(l.Namespaces, ns)
	}
	l.CgroupsPath = CgroupsPath(s.Linux.CgroupsPath, in.Namespace, in.ID)
	s.Linux = &l

	s.Hostname = ""
	if slices.ContainsFunc(l.Namespaces, func(ns Namespace) bool { return ns.Type == UTSNamespace }) {
		s.Hostname = in.ID[:min(12, len(in.ID))]
		if hostNet {
			s.Hostname = in.Spec.Hostname
		}
	}

	s.Mounts = mounts(in.Spec.Mounts, in.Withhold, in.WithholdSources, hostNet, in.HostEtc)
	return s, nil
}

// Again is the spec of container id, another of the container first
// whose spec s is, as Plan made it: the same, but for what Plan made of
// first's ID, its cgroup and the hostname it was given. It does not
// change s.
func Again(s Spec, namespace, first, id string) Spec {
	if s.Linux != nil && s.Linux.CgroupsPath == CgroupsPath(s.Linux.CgroupsPath, namespace, first) {
		l := *s.Linux
		l.CgroupsPath = CgroupsPath(s.Linux.CgroupsPath, namespace, id)
		s.Linux = &l
	}
	if s.Hostname != "" && s.Hostname == first[:min(12, len(first))] {
		s.Hostname = id[:min(12, len(id))]
	}
	return s
}

// HostNetwork reports whether a container with spec s shares the host's
// network: its spec names no network namespace.
func HostNetwork(s Spec) bool {
	return s.Linux == nil || !slices.ContainsFunc(s.Linux.Namespaces, func(ns Namespace) bool {
		return ns.Type == NetworkNamespace
	})
}

// command returns the user container's args. The args after the action
// image's ENTRYPOINT are the action's command, unless they are its image's
// CMD; the command runs with the user image's ENTRYPOINT, and no command
// runs its ENTRYPOINT and CMD. Args that do not start with the action
// image's ENTRYPOINT replaced it, and are kept whole. imageDefault runs
// the user image's ENTRYPOINT and CMD, whatever the args; a command set
// (not nil) runs after its ENTRYPOINT instead of the args.
func command(args, set []string, img, userImg ImageConfig, imageDefault bool) ([]string, error) {
	if set != nil {
		out := slices.Concat(userImg.Entrypoint, set)
		if len(out) == 0 {
			return nil, ErrNoCommand
		}
		return out, nil
	}
	if imageDefault {
		out := slices.Concat(userImg.Entrypoint, userImg.Cmd)
		if len(out) == 0 {
			return nil, ErrNoDefault
		}
		return out, nil
	}
	rest, ok := cutPrefix(args, img.Entrypoint)
	if !ok {
		return args, nil
	}
	var out []string
	if len(rest) == 0 || slices.Equal(rest, img.Cmd) {
		out = slices.Concat(userImg.Entrypoint, userImg.Cmd)
	} else {
		out = slices.Concat(userImg.Entrypoint, rest)
	}
	if len(out) == 0 {
		return nil, ErrNoCommand
	}
	return out, nil
}

func cutPrefix(s, prefix []string) ([]string, bool) {
	if len(s) < len(prefix) || !slices.Equal(s[:len(prefix)], prefix) {
		return nil, false
	}
	return s[len(prefix):], true
}

// userEnv is the action's env less the control variables and the entries
// its image brought unchanged, merged over the user image's.
func userEnv(env, imageEnv, userImageEnv []string) []string {
	control := inherit.Control(env)
	imageEnv = orDefault(imageEnv)
	var own []string
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); control[name] || slices.Contains(imageEnv, kv) {
			continue
		}
		own = append(own, kv)
	}
	return mergeEnv(orDefault(userImageEnv), own)
}

// orDefault is env, or containerd's default for an image without one.
func orDefault(env []string) []string {
	if len(env) == 0 {
		return defaultEnv
	}
	return env
}

// mergeEnv is base with each entry of over replacing the one of the same
// name in place, or appended after; an entry without "=" removes its
// name. It is how containerd sets a container's env over its image's.
func mergeEnv(base, over []string) []string {
	out := slices.Clone(base)
	index := func(name string) int {
		return slices.IndexFunc(out, func(kv string) bool {
			k, _, _ := strings.Cut(kv, "=")
			return k == name
		})
	}
	for _, kv := range over {
		name, _, set := strings.Cut(kv, "=")
		if i := index(name); i >= 0 {
			if set {
				out[i] = kv
			} else {
				out = slices.Delete(out, i, i+1)
			}
		} else if set {
			out = append(out, kv)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// dir is the working directory an image's WorkingDir gives: none is the
// root.
func dir(d string) string {
	if d == "" {
		return "/"
	}
	return d
}

// user returns the user container's user: the action's, if it is not the
// one its image gave, else the user image's (see imageUser).
func user(action User, imageUser, userImageUser string, db *UserDB) (User, error) {
	if img, err := numericUser(imageUser); err != nil || img.UID != action.UID || img.GID != action.GID {
		return action, nil // set by the operator, or not to be told apart
	}
	u, err := imageUserOf(userImageUser, db)
	if err != nil {
		return User{}, err
	}
	u.Rest = action.Rest
	return u, nil
}

// ReadsUserDB reports whether the plan of in depends on the user image's
// /etc/passwd and /etc/group (Input.UserDB), so that the engine reads
// them only then: when the user container runs as its image's USER (the
// action's user is its own image's), whose group or additional groups
// they give, root's too (as containerd's WithImageConfig adds them, and
// Docker: root on Alpine is in 11 groups). A user the action sets travels
// as it is, and nothing is read.
func ReadsUserDB(in Input) bool {
	if in.Spec.Process == nil {
		return NeedsUserDB(in.UserImage.User)
	}
	action := in.Spec.Process.User
	if img, err := numericUser(in.Image.User); err != nil || img.UID != action.UID || img.GID != action.GID {
		return false // the action's user travels
	}
	return true
}

// imageUserOf is the user an image's USER runs as. One that needs no
// files to be resolved (see NeedsUserDB: empty, or a numeric uid:gid)
// has its own group, then, as containerd's WithImageConfig gives them,
// the groups of db that list root (for an empty USER) or the uid's user,
// but the one of that user's name: none when db is nil or lacks them.
// Any other needs db to hold the image's files.
func imageUserOf(spec string, db *UserDB) (User, error) {
	if !NeedsUserDB(spec) {
		u, err := numericUser(spec)
		if err != nil {
			return u, err
		}
		u.AdditionalGids = []uint32{u.GID}
		if db == nil {
			return u, nil
		}
		name := "root"
		if spec != "" {
			e, ok := findPasswd(db.Passwd, func(e passwdEntry) bool { return e.uid == int(u.UID) })
			if !ok {
				return u, nil
			}
			name = e.name
		}
		for _, g := range parseGroup(db.Group) {
			if g.name != name && slices.Contains(g.members, name) && !slices.Contains(u.AdditionalGids, uint32(g.gid)) {
				u.AdditionalGids = append(u.AdditionalGids, uint32(g.gid))
			}
		}
		return u, nil
	}
	if db == nil {
		return User{}, fmt.Errorf("%w: the image's /etc/passwd and /etc/group were not read", ErrUser)
	}
	return db.lookup(spec)
}

// numericUser reads an image's USER that needs no /etc/passwd: none
// (root), a uid:gid pair of numbers, and root or 0 for uid or gid 0.
func numericUser(s string) (User, error) {
	if s == "" {
		return User{}, nil
	}
	uid, gid, pair := strings.Cut(s, ":")
	if !pair {
		if s == "root" || s == "0" {
			return User{}, nil
		}
		return User{}, ErrUser
	}
	u, err1 := id(uid)
	g, err2 := id(gid)
	if err1 != nil || err2 != nil {
		return User{}, ErrUser
	}
	return User{UID: u, GID: g}, nil
}

// id reads a uid or gid: a number up to runc's limit, or root.
func id(s string) (uint32, error) {
	if s == "root" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 31)
	return uint32(n), err
}

// mounts returns the action's mounts that travel, then the masks of the
// withheld paths they reach, then, on the host's network, those of the
// host's files it has (hostEtc).
func mounts(action []Mount, withhold, withholdSources []string, hostNet bool, hostEtc []string) []Mount {
	var out []Mount
	for _, m := range action {
		switch {
		case slices.Contains(HostFiles, path.Clean(m.Destination)):
		case under(m.Destination, withhold), under(m.Source, withholdSources):
		default:
			out = append(out, m)
		}
	}
	out = append(out, masks(out, withhold)...)
	if hostNet {
		for _, f := range HostFiles {
			if !slices.Contains(hostEtc, f) {
				continue
			}
			out = append(out, Mount{Destination: f, Type: "bind", Source: f, Options: []string{"bind", "rprivate", "ro"}})
		}
	}
	return out
}

// masks returns an empty, read-only tmpfs at each withheld path that a
// bind among mounts (those that travel) reaches through a parent
// directory: a bind of /root carries /root/.docker along. Each goes after
// every mount of the action, so after its parent. A path no bind reaches
// is the action image's, not the user's, and needs none; nor does one
// below another withheld path that is hidden.
func masks(mounts []Mount, withhold []string) []Mount {
	var out []Mount
	for _, w := range withhold {
		if w == "" {
			continue
		}
		w = path.Clean(w)
		reached := slices.ContainsFunc(mounts, func(m Mount) bool {
			return isBind(m) && m.Destination != "" && below(w, path.Clean(m.Destination))
		})
		hidden := slices.ContainsFunc(withhold, func(q string) bool {
			q = path.Clean(q)
			return q != "" && q != "/" && below(w, q)
		})
		if w == "/" || !reached || hidden || slices.ContainsFunc(out, func(m Mount) bool { return m.Destination == w }) {
			continue
		}
		out = append(out, Mount{Destination: w, Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}})
	}
	return out
}

// isBind reports whether m binds a path of the host: by its type, or
// by its options, as runc reads them.
func isBind(m Mount) bool {
	return m.Type == "bind" || slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind")
}

// below reports whether p is strictly below dir.
func below(p, dir string) bool {
	return p != dir && (dir == "/" || strings.HasPrefix(p, dir+"/"))
}

// under reports whether p is one of paths or below one. The root and ""
// hold nothing back.
func under(p string, paths []string) bool {
	if p == "" {
		return false
	}
	p = path.Clean(p)
	return slices.ContainsFunc(paths, func(w string) bool {
		if w == "" {
			return false
		}
		w = path.Clean(w)
		return w != "/" && (p == w || strings.HasPrefix(p, w+"/"))
	})
}

// CgroupsPath is the cgroup path of container id in containerd namespace
// ns, in the form of the action's (action): /<ns>/<id>, as containerd's
// WithNamespacedCgroup makes it; or, when the action's is systemd's
// slice:prefix:name (its runtime's SystemdCgroup, which the container
// shares), the action's slice and prefix with id.
func CgroupsPath(action, ns, id string) string {
	if parts := strings.Split(action, ":"); len(parts) == 3 && !strings.HasPrefix(action, "/") {
		return parts[0] + ":" + parts[1] + ":" + id
	}
	return "/" + ns + "/" + id
}
