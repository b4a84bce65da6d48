// Package selfid lists the candidates for the ID of the container this process
// runs in, from what the process can see of itself: an explicit override, its
// cgroup paths, its mount table and its hostname. Each candidate is tagged with
// the method that found it. None of them is proof, and that one exists and
// runs is not proof either: under NetworkMode container:X, the mount table's
// /etc/hosts, /etc/hostname and /etc/resolv.conf and the hostname are X's, so
// X is a candidate, and with a private cgroup namespace the container's own
// ID appears nowhere. The caller confirms identity: the Docker engine leaves a
// token in its own root file system and asks which candidate holds it.
//
// On containerd, ContainerdCgroup reads the containerd namespace and the
// container ID from the same cgroup paths (ContainerIn, the ID under a
// namespace already known, whatever its form), and RootUpperdir the root
// overlay's upperdir from the same mount table, for the caller to match
// against its snapshots' mounts (Upperdir) where the cgroup says nothing.
// All but Read are pure functions of what they are given.
package selfid

import (
	"os"
	"strings"
)

// Method says how a candidate was found.
type Method string

// The methods, in the order their candidates are listed.
const (
	Override  Method = "override"  // given explicitly by flag/env
	Cgroup    Method = "cgroup"    // a 64-hex ID in /proc/self/cgroup
	Mountinfo Method = "mountinfo" // container file paths in /proc/self/mountinfo
	Hostname  Method = "hostname"  // the short ID with default networking, else a name
)

// Candidate is a possible ID, short ID or name of the current container.
type Candidate struct {
	ID     string
	Method Method
}

// Sources holds everything Candidates looks at.
type Sources struct {
	Override  string // explicit override; may be a name, full ID, or short ID
	Cgroup    string // contents of /proc/self/cgroup
	Mountinfo string // contents of /proc/self/mountinfo
	Hostname  string
}

// Read fills Sources from the live system (/proc/self/cgroup,
// /proc/self/mountinfo, os.Hostname); missing files are simply empty.
// This is the only function doing I/O.
func Read(override string) Sources {
	cgroup, _ := os.ReadFile("/proc/self/cgroup")
	mountinfo, _ := os.ReadFile("/proc/self/mountinfo")
	hostname, _ := os.Hostname()
	return Sources{
		Override:  override,
		Cgroup:    string(cgroup),
		Mountinfo: string(mountinfo),
		Hostname:  hostname,
	}
}

// Candidates returns the candidate IDs found in s, without duplicates (the
// first occurrence wins): the override, then IDs from the cgroup paths, then
// IDs from container file paths in the mount table, then the hostname.
// It returns nil if there are none.
func Candidates(s Sources) []Candidate {
	var out []Candidate
	seen := make(map[string]bool)
	add := func(id string, m Method) {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, Candidate{ID: id, Method: m})
		}
	}
	add(strings.TrimSpace(s.Override), Override)
	for _, id := range cgroupIDs(s.Cgroup) {
		add(id, Cgroup)
	}
	for _, id := range mountinfoIDs(s.Mountinfo) {
		add(id, Mountinfo)
	}
	add(strings.TrimSpace(s.Hostname), Hostname)
	return out
}

// scopePrefixes name the cgroups of containers: systemd scope units, as in
// docker-<id>.scope, and cgroupfs directories, as Podman's libpod-<id>.
var scopePrefixes = []string{"docker-", "libpod-", "cri-containerd-", "crio-"}

// cgroupIDs returns the IDs in the paths of /proc/self/cgroup, whose lines are
// hierarchy-ID:controllers:path. Within a path the deepest ID comes first, as
// that is the innermost container when containers are nested.
func cgroupIDs(cgroup string) []string {
	var ids []string
	for _, line := range strings.Split(cgroup, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		parts := strings.Split(f[2], "/")
		for i := len(parts) - 1; i >= 0; i-- {
			if id := scopeID(parts[i]); id != "" {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// scopeID returns the ID a cgroup path component is, or names as a scope
// unit or a prefixed directory.
func scopeID(part string) string {
	if isID(part) {
		return part
	}
	unit := strings.TrimSuffix(part, ".scope")
	for _, p := range scopePrefixes {
		if id, ok := strings.CutPrefix(unit, p); ok && isID(id) {
			return id
		}
	}
	return ""
}

// mountinfoIDs returns the IDs in container file paths of /proc/self/mountinfo,
// whose lines are "id parent major:minor root mountpoint options ...".
// The kernel escapes spaces in paths (as \040), so the fields are split on
// spaces. The paths need no unescaping, as an escape holds neither a slash nor
// a hex digit. IDs from the root field come first, in order of appearance:
// they are where /etc/hostname and the like come from. IDs only seen in mount
// points follow; they show up when a host directory holding other containers
// is mounted in.
func mountinfoIDs(mountinfo string) []string {
	var roots, points []string
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Split(line, " ")
		if len(f) < 5 {
			continue
		}
		if id := pathID(f[3]); id != "" {
			roots = append(roots, id)
		}
		if id := pathID(f[4]); id != "" {
			points = append(points, id)
		}
	}
	return append(roots, points...)
}

// pathID returns the ID in a path to a file of a container:
// Docker's <data-root>/containers/<id>/<file> or Podman's
// .../<driver>-containers/<id>/userdata/<file>.
func pathID(path string) string {
	parts := strings.Split(path, "/")
	for i := 0; i+2 < len(parts); i++ {
		dir, id, next := parts[i], parts[i+1], parts[i+2]
		if !isID(id) {
			continue
		}
		if dir == "containers" || (strings.HasSuffix(dir, "-containers") && next == "userdata") {
			return id
		}
	}
	return ""
}

// isID reports whether s is a full container ID: 64 lowercase hex digits.
func isID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}
