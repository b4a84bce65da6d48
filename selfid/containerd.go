package selfid

import (
	"strconv"
	"strings"
)

// ContainerdCgroup returns the containerd namespace and container ID that
// the cgroup paths in cgroup (the contents of /proc/self/cgroup) name. A
// container that containerd made with its default spec, as tink-agent's
// are, has the cgroup /<namespace>/<id>, and on the host's cgroup
// namespace every line of /proc/self/cgroup ends with it, on cgroup v1 and
// v2. The namespace is the one to ask containerd in about the ID.
//
// A line names a container when its path ends with a namespace name and a
// 64-hex ID; lines that do not (such as "1:rdma:/") are skipped. ok is
// false when no line names one, or when two lines name different ones.
// Docker's /docker/<id> reads as the namespace "docker": as with
// Candidates, the caller confirms what it is given.
func ContainerdCgroup(cgroup string) (namespace, id string, ok bool) {
	return cgroupPaths(cgroup, func(ns, id string) bool { return isID(id) && isNamespace(ns) })
}

// ContainerIn is the container ID that the cgroup paths in cgroup name
// under namespace, /<namespace>/<ID>, whatever the ID's form (the waiter's
// is a name, not 64 hex); empty when no line names one, or when two lines
// name different ones.
func ContainerIn(cgroup, namespace string) string {
	_, id, _ := cgroupPaths(cgroup, func(ns, id string) bool { return ns == namespace && id != "" })
	return id
}

// cgroupPaths reads the lines of cgroup, hierarchy-ID:controllers:path,
// whose path ends in /<ns>/<id> with keep(ns, id), and returns their ns
// and id, if every such line names the same.
func cgroupPaths(cgroup string, keep func(ns, id string) bool) (namespace, id string, ok bool) {
	for _, line := range strings.Split(cgroup, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		dir, last, found := cutLast(f[2])
		if !found {
			continue
		}
		_, ns, _ := cutLast(dir)
		if !keep(ns, last) {
			continue
		}
		if id != "" && (ns != namespace || last != id) {
			return "", "", false
		}
		namespace, id = ns, last
	}
	return namespace, id, id != ""
}

// cutLast splits a path at its last slash.
func cutLast(p string) (dir, last string, found bool) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p, false
	}
	return p[:i], p[i+1:], true
}

// isNamespace reports whether s is a valid containerd namespace name:
// letters and digits, in runs joined by one of ".", "_" or "-", at most
// 76 characters.
func isNamespace(s string) bool {
	if s == "" || len(s) > 76 {
		return false
	}
	run := false // in a run of letters and digits
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			run = true
		} else if (c == '.' || c == '_' || c == '-') && run {
			run = false
		} else {
			return false
		}
	}
	return run
}

// RootUpperdir returns the upperdir of the overlay mounted at the root in
// mountinfo (the contents of /proc/self/mountinfo): the container's
// writable snapshot, which containerd's Snapshots/Mounts names in the same
// option (see Upperdir). It needs no cgroup, so it works in a private
// cgroup namespace too. Where several mounts are stacked at the root, the
// last one, which is the one seen, counts. ok is false when the root is no
// overlay or has no upperdir.
func RootUpperdir(mountinfo string) (upperdir string, ok bool) {
	for _, line := range strings.Split(mountinfo, "\n") {
		// id parent major:minor root mountpoint options [optional...] -
		// fstype source superoptions
		f := strings.Split(line, " ")
		if len(f) < 5 || f[4] != "/" {
			continue
		}
		sep := -1
		for i := 5; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(f) < sep+4 {
			continue
		}
		if f[sep+1] != "overlay" {
			upperdir, ok = "", false
			continue
		}
		upperdir, ok = Upperdir(strings.Split(f[sep+3], ","))
		if ok {
			upperdir = unescape(upperdir)
		}
	}
	return upperdir, ok
}

// Upperdir returns the value of the upperdir option in an overlay's
// options, as containerd's Snapshots/Mounts gives them.
func Upperdir(options []string) (string, bool) {
	for _, o := range options {
		if dir, found := strings.CutPrefix(o, "upperdir="); found && dir != "" {
			return dir, true
		}
	}
	return "", false
}

// unescape undoes the kernel's octal escapes in mountinfo (\040 for a
// space, \054 for a comma in an overlay option).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
