package inherit

import (
	"strconv"
	"strings"
)

// Root reports whether a container's user, as an engine records it
// (Docker's USER, containerd's uid:gid), is root: none, or uid 0 by
// number or by name, in any group.
func Root(user string) bool {
	u, _, _ := strings.Cut(user, ":")
	n, err := strconv.Atoi(u)
	return u == "" || u == "root" || err == nil && n == 0
}

// Prefix starts the name of every variable of waitdaemon's own. None of
// them reaches the user container.
const Prefix = "WAITDAEMON_"

// Var is a control variable that templates know by a plain name, with a
// namespaced alias. When the alias is set, the plain name belongs to the
// user and passes through to the user container. An alias is set when it
// has a value other than spaces: an empty one is none, as for every
// variable waitdaemon reads.
type Var struct {
	Plain string
	Alias string
}

// The control variables with plain names. Each alias begins with Prefix.
var (
	Image       = Var{Plain: "IMAGE", Alias: "WAITDAEMON_IMAGE"}
	WaitSeconds = Var{Plain: "WAIT_SECONDS", Alias: "WAITDAEMON_WAIT_SECONDS"}
)

// Name is the name in force in env: the alias when it is set, else the
// plain name.
func (v Var) Name(env []string) string {
	if lookup(env, v.Alias) {
		return v.Alias
	}
	return v.Plain
}

// Control returns the names in env that are waitdaemon's to read, and so
// never passed on: every WAITDAEMON_ variable, and each plain name whose
// alias is not set.
func Control(env []string) map[string]bool {
	out := map[string]bool{}
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, Prefix) {
			out[name] = true
		}
	}
	for _, v := range []Var{Image, WaitSeconds} {
		if !lookup(env, v.Alias) {
			out[v.Plain] = true
		}
	}
	return out
}

func lookup(env []string, name string) bool {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == name && strings.TrimSpace(v) != "" {
			return true
		}
	}
	return false
}
