package tinkagent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
)

// Release is the Tinkerbell whose server and worker the runner copies:
// how the server reads a template and shapes an action, and how the
// worker (tink-worker, or tink-agent on Docker or containerd) runs it.
// The zero value is Head.
type Release string

const (
	// TinkWorker is tinkerbell/tink's tink-worker (HookOS's Docker only)
	// with its server (tinkerbell/tink at 8748328b).
	TinkWorker Release = "tink-worker"
	// V023 is tinkerbell/tinkerbell v0.23.0 (2026-03-21), the first with
	// CaptainOS. It reads and shapes an action as v0.24.0 does.
	V023 Release = "v0.23"
	// V024 is tinkerbell/tinkerbell v0.24.0 (2026-07-16).
	V024 Release = "v0.24"
	// V025 is tinkerbell/tinkerbell v0.25.0 (2026-07-31).
	V025 Release = "v0.25"
	// Head is tinkerbell/tinkerbell's main (2026-08-18).
	Head Release = "head"
)

// Releases are those the runner copies, oldest first.
var Releases = []Release{TinkWorker, V023, V024, V025, Head}

// ParseRelease reads a release's name: tink-worker, v0.23, v0.24, v0.25
// or head ("" is head).
func ParseRelease(s string) (Release, error) {
	if s == "" {
		return Head, nil
	}
	for _, r := range Releases {
		if string(r) == s {
			return r, nil
		}
	}
	names := make([]string, len(Releases))
	for i, r := range Releases {
		names[i] = string(r)
	}
	return "", fmt.Errorf("release %q: want one of %s", s, strings.Join(names, ", "))
}

func (r Release) orHead() Release {
	if r == "" {
		return Head
	}
	return r
}

// readsNamespaces: v0.25.0 brought an action's namespaces: {pid, network}
// (the controller's workflow.Action, the server's ActionResponse and the
// agent's gRPC transport); before it the controller's yaml.Unmarshal
// drops the key without a word, and only the top-level pid reaches the
// worker.
func (r Release) readsNamespaces() bool {
	switch r.orHead() {
	case V025, Head:
		return true
	}
	return false
}

// hostDir is the certs.d tree the containerd runtime's pull reads: only
// HEAD's (containerd.WithRegistryConfigPath, default
// /etc/containerd/certs.d); v0.23.0 to v0.25.0 pull with
// docker.NewResolver's defaults, plain HTTP for localhost alone.
func (r Release) hostDir() string {
	if r.orHead() == Head {
		return containerdapi.DefaultHostDir
	}
	return ""
}

// snapshotKey is the containerd runtime's snapshot of container id,
// named name: v0.24.0 and later suffix the ID's first 8 characters, so
// that a retried action's snapshot does not collide with the one its
// failed run's kept container holds; v0.23.0 keeps no failed container
// and names the snapshot as the container (conv.ParseName).
func (r Release) snapshotKey(name, id string) string {
	if r == V023 {
		return name
	}
	return name + "-" + id[:8]
}

// labels are the containerd runtime's labels of a container named name in
// namespace ns: nerdctl's name, extra hosts and hostname, and from
// v0.24.0 its namespace (which `nerdctl logs` needs). v0.24.0 and later
// also label it with their json-file log and its directory, which the
// runner does not keep.
func (r Release) labels(ns, name, hostname string) map[string]string {
	l := map[string]string{"nerdctl/name": name, "nerdctl/extraHosts": "[]", "nerdctl/hostname": hostname}
	if r != V023 {
		l["nerdctl/namespace"] = ns
	}
	return l
}

// keepsFailed: the containerd runtime of v0.24.0 and later keeps a failed
// action's container and snapshot for the operator; v0.23.0's deletes
// them whatever the action's end (its deferred Delete with
// WithSnapshotCleanup).
func (r Release) keepsFailed() bool { return r != V023 }

// deadline is the worker's deadline for an action of timeout seconds:
// tink-worker gives a zero timeout an hour (worker.execute); tink-agent,
// every release, makes it a deadline already passed.
func (r Release) deadline(timeout int64) time.Duration {
	if r == TinkWorker && timeout == 0 {
		return time.Hour
	}
	return time.Duration(timeout) * time.Second
}

// containerName is the worker's name for a's container: tink-worker's
// action_<name> (makeValidContainerName); tink-agent's
// tinkerbell_<name>_<action ID> (conv.ParseName); every character
// outside [a-zA-Z0-9_.-] made _.
func (r Release) containerName(a Action) string {
	if r == TinkWorker {
		return "action_" + invalidName.ReplaceAllString(a.Name, "_")
	}
	return fmt.Sprintf("tinkerbell_%s_%s", invalidName.ReplaceAllString(a.Name, "_"), invalidName.ReplaceAllString(a.ID, "_"))
}

// SameSpec reports whether a and b, one action as two releases read it,
// make the same container on runtime ("docker" or "containerd"): the
// same name and create body, or the same OCI spec, for the same action
// ID, image and host. What else differs (the pull, the clean-up) is not
// part of it.
func SameSpec(runtime string, a, b Action) bool {
	a.ID, b.ID = "01SAMESPEC", "01SAMESPEC"
	switch runtime {
	case "docker":
		d := &Docker{}
		na, ra := d.createRequest(a)
		nb, rb := d.createRequest(b)
		ja, _ := json.Marshal(ra)
		jb, _ := json.Marshal(rb)
		return na == nb && bytes.Equal(ja, jb)
	case "containerd":
		if a.Release.orHead() == TinkWorker || b.Release.orHead() == TinkWorker {
			return false // tink-worker has no containerd runtime
		}
		id := strings.Repeat("5a", 32)
		of := func(x Action) []byte {
			vols, _ := parseVolumes(x.Volumes)
			return containerSpec(containerdapi.DefaultNamespace, id, hostnameOf(id, x.Network == "host"), "/tmp/tink-dns-same", x, imageConfig{}, vols)
		}
		return bytes.Equal(of(a), of(b))
	}
	return false
}
