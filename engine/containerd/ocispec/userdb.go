package ocispec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// UserDB is an image's /etc/passwd and /etc/group, as read from its
// layers; a file the image does not have is nil.
type UserDB struct {
	Passwd []byte
	Group  []byte
}

// maxID is the largest uid or gid runc takes.
const maxID = 1<<31 - 1

// NeedsUserDB reports whether an image's USER cannot be resolved without
// the image's /etc/passwd and /etc/group: a user or group by name (root
// too), or a uid alone, whose group the files give. Empty (root) and a
// numeric uid:gid are resolved without them, and get their additional
// groups from them when they are there.
func NeedsUserDB(spec string) bool {
	if spec == "" {
		return false
	}
	uid, gid, pair := strings.Cut(spec, ":")
	if !pair {
		return true
	}
	_, err1 := strconv.Atoi(uid)
	_, err2 := strconv.Atoi(gid)
	return err1 != nil || err2 != nil
}

// passwdEntry and groupEntry are the fields of a line of /etc/passwd and
// /etc/group that a lookup reads.
type (
	passwdEntry struct {
		name     string
		uid, gid int
	}
	groupEntry struct {
		name    string
		gid     int
		members []string
	}
)

// lookup resolves spec (user, or user:group; each a name or a number) as
// runc's GetExecUser does for Docker and containerd: the user is the
// first /etc/passwd entry of that name, or of that uid when it is a
// number (a number with none is that uid, in group 0); an explicit group
// is the first /etc/group entry of that name or gid (a number with none
// is that gid); without one, the user's own group, and as additional
// groups those of /etc/group that list the user by name. The groups are
// the user's group, then the additional ones, as Docker gives them.
func (db *UserDB) lookup(spec string) (User, error) {
	userArg, groupArg, _ := strings.Cut(spec, ":")
	uidArg, uidErr := strconv.Atoi(userArg)
	gidArg, gidErr := strconv.Atoi(groupArg)
	var u User
	matched := ""
	if e, ok := findPasswd(db.Passwd, func(e passwdEntry) bool {
		if uidErr == nil {
			return e.uid == uidArg
		}
		return e.name == userArg
	}); ok {
		matched, u.UID, u.GID = e.name, uint32(e.uid), uint32(e.gid)
	} else {
		if uidErr != nil {
			return User{}, fmt.Errorf("%w: the image's /etc/passwd has no user %s", ErrUser, userArg)
		}
		if uidArg < 0 || uidArg > maxID {
			return User{}, fmt.Errorf("%w: uid %d is beyond %d", ErrUser, uidArg, maxID)
		}
		u.UID = uint32(uidArg)
	}
	var extra []uint32
	switch {
	case groupArg != "":
		if g, ok := findGroup(db.Group, func(g groupEntry) bool {
			if gidErr == nil {
				return g.gid == gidArg
			}
			return g.name == groupArg
		}); ok {
			u.GID = uint32(g.gid)
		} else {
			if gidErr != nil {
				return User{}, fmt.Errorf("%w: the image's /etc/group has no group %s", ErrUser, groupArg)
			}
			if gidArg < 0 || gidArg > maxID {
				return User{}, fmt.Errorf("%w: gid %d is beyond %d", ErrUser, gidArg, maxID)
			}
			u.GID = uint32(gidArg)
		}
	case matched != "":
		for _, g := range parseGroup(db.Group) {
			if slices.Contains(g.members, matched) {
				extra = append(extra, uint32(g.gid))
			}
		}
	}
	u.AdditionalGids = append([]uint32{u.GID}, extra...)
	return u, nil
}

// fields splits the lines of an /etc file into their colon-separated
// fields, skipping empty lines and comments.
func fields(file []byte) [][]string {
	var out [][]string
	for _, line := range strings.Split(string(file), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.Split(line, ":"))
	}
	return out
}

// findPasswd is the first entry of /etc/passwd that match takes; lines
// that do not parse are skipped.
func findPasswd(file []byte, match func(passwdEntry) bool) (passwdEntry, bool) {
	for _, f := range fields(file) {
		if len(f) < 4 {
			continue
		}
		uid, err1 := strconv.Atoi(f[2])
		gid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			continue
		}
		if e := (passwdEntry{name: f[0], uid: uid, gid: gid}); match(e) {
			return e, true
		}
	}
	return passwdEntry{}, false
}

// parseGroup is the entries of /etc/group; lines that do not parse are
// skipped.
func parseGroup(file []byte) []groupEntry {
	var out []groupEntry
	for _, f := range fields(file) {
		if len(f) < 3 {
			continue
		}
		gid, err := strconv.Atoi(f[2])
		if err != nil {
			continue
		}
		g := groupEntry{name: f[0], gid: gid}
		if len(f) > 3 && f[3] != "" {
			g.members = strings.Split(f[3], ",")
		}
		out = append(out, g)
	}
	return out
}

// findGroup is the first entry of /etc/group that match takes.
func findGroup(file []byte, match func(groupEntry) bool) (groupEntry, bool) {
	for _, g := range parseGroup(file) {
		if match(g) {
			return g, true
		}
	}
	return groupEntry{}, false
}
