package tinkagent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// defaultPath is containerd's default PATH, which an image's own replaces.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// specInput is what an action container's OCI spec is made of.
type specInput struct {
	Namespace, ID string
	Args, Env     []string
	Cwd           string
	Hostname      string
	Volumes       []mount
	Etc           string // the directory of the generated /etc files
	HostPID       bool
	HostNetwork   bool
}

// mount is one bind mount of a volume.
type mount struct {
	Source, Destination string
	Options             []string
}

// spec is the OCI spec of an action container, as containerd's client
// makes it with the agent's options (recorded in testdata/ocispec).
func spec(in specInput) []byte {
	caps := AllCaps()
	mounts := []map[string]any{
		{"destination": "/proc", "type": "proc", "source": "proc", "options": []string{"nosuid", "noexec", "nodev"}},
		{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": []string{"nosuid", "noexec", "nodev"}},
		// WithPrivileged: a writable /sys.
		{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "rw"}},
		{"destination": "/run", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
	}
	// The volumes, as rbind mounts (parseVolumes).
	for _, v := range in.Volumes {
		mounts = append(mounts, map[string]any{"destination": v.Destination, "type": "bind", "source": v.Source, "options": v.Options})
	}
	// The generated /etc files bound in, never the host's (dnsSpecOpts).
	for _, f := range etcNames {
		mounts = append(mounts, map[string]any{"destination": "/etc/" + f, "type": "bind", "source": filepath.Join(in.Etc, f), "options": []string{"bind", "rprivate", "rw"}})
	}
	// pid and network namespaces each on its own: namespaces.pid host
	// drops the pid one, namespaces.network host the network one
	// (WithHostNamespace); a network namespace without path is where the
	// agent sets up CNI.
	var namespaces []map[string]string
	if !in.HostPID {
		namespaces = append(namespaces, map[string]string{"type": "pid"})
	}
	namespaces = append(namespaces, map[string]string{"type": "ipc"}, map[string]string{"type": "uts"}, map[string]string{"type": "mount"})
	if !in.HostNetwork {
		namespaces = append(namespaces, map[string]string{"type": "network"})
	}
	s := map[string]any{
		"ociVersion": "1.3.0",
		"process": map[string]any{
			"user": map[string]any{"uid": 0, "gid": 0, "additionalGids": []int{0}}, "args": in.Args, "env": in.Env, "cwd": in.Cwd,
			// WithPrivileged: every capability of the agent's.
			"capabilities": map[string]any{"bounding": caps, "effective": caps, "permitted": caps},
			// containerd's default spec: RLIMIT_NOFILE 1024, and no new
			// privileges.
			"rlimits":         []map[string]any{{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}},
			"noNewPrivileges": true,
		},
		"root": map[string]any{"path": "rootfs"},
		// WithHostname: the ID's first 12 characters, or the host's name
		// with the host's network.
		"hostname": in.Hostname,
		"mounts":   mounts,
		"linux": map[string]any{
			// WithAllDevicesAllowed.
			"resources":   map[string]any{"devices": []map[string]any{{"allow": true, "access": "rwm"}}},
			"cgroupsPath": "/" + in.Namespace + "/" + in.ID,
			"namespaces":  namespaces,
			// WithHostDevices: every host device.
			"devices": HostDevices("/dev"),
		},
	}
	data, _ := json.Marshal(s)
	return data
}

// mergeEnv is oci.WithEnv's: each of add replaces the variable of its
// name in env, or is appended.
func mergeEnv(env []string, add ...string) []string {
	out := append([]string(nil), env...)
	for _, kv := range add {
		k, _, _ := strings.Cut(kv, "=")
		replaced := false
		for i, e := range out {
			if ek, _, _ := strings.Cut(e, "="); ek == k {
				out[i], replaced = kv, true
				break
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}

// capNames are the capabilities by bit number.
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID",
	"CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
	"CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
	"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD",
	"CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// AllCaps are the capabilities of this process's bounding set: those a
// privileged container gets (containerd's WithPrivileged gives every
// capability its client has), and so tink-agent's actions.
func AllCaps() []string {
	data, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			bits, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				break
			}
			var caps []string
			for i, name := range capNames {
				if bits&(1<<i) != 0 {
					caps = append(caps, name)
				}
			}
			return caps
		}
	}
	return capNames
}

// device is one of an OCI spec's linux.devices.
type device struct {
	Path     string `json:"path"`
	Type     string `json:"type"`
	Major    int64  `json:"major"`
	Minor    int64  `json:"minor"`
	FileMode uint32 `json:"fileMode"`
	UID      uint32 `json:"uid"`
	GID      uint32 `json:"gid"`
}

// HostDevices lists the character and block devices under dir, as
// containerd's WithHostDevices makes them in a container: every one
// but those under pts, shm, fd and mqueue (the container has its own),
// and the console.
func HostDevices(dir string) []device {
	var out []device
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			switch e.Name() {
			case "pts", "shm", "fd", "mqueue", ".lxc", ".lxd-mounts", ".udev":
			default:
				out = append(out, HostDevices(p)...)
			}
			continue
		}
		if e.Name() == "console" {
			continue
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) != nil {
			continue
		}
		kind := ""
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFCHR:
			kind = "c"
		case syscall.S_IFBLK:
			kind = "b"
		default:
			continue
		}
		dev := uint64(st.Rdev)
		major := int64((dev>>8)&0xfff | (dev>>32)&^0xfff)
		minor := int64(dev&0xff | (dev>>12)&^0xff)
		out = append(out, device{Path: p, Type: kind, Major: major, Minor: minor, FileMode: st.Mode &^ syscall.S_IFMT, UID: st.Uid, GID: st.Gid})
	}
	return out
}
