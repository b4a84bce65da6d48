// Package tinkagent makes action containers on containerd the way
// tink-agent does on CaptainOS (see testdata/ocispec), for the end-to-end
// tests and the bench: a random 64-hex ID, nerdctl's name label, the
// image's entrypoint and the action's command, its env, the volumes, the
// /run tmpfs, /etc files from a directory of the caller's, the output to
// a file; privileged, with the host's devices; the container and its task
// created, not started. (The test containerd runs on runc 1.4, which
// starts privileged containers on the test machines.)
package tinkagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/waitdaemon/waitdaemon/containerdapi"
)

// Action is an action container as tink-agent makes one.
type Action struct {
	ID      string   // 64 hex digits (NewID)
	Name    string   // nerdctl/name, tinkerbell_<name>_<action ID>
	Image   string   // as containerd names it: docker.io/library/NAME:TAG
	Args    []string // the action's command, after the image's entrypoint
	Env     []string // its environment, PATH included
	Volumes [][2]string
	Etc     string // a directory holding resolv.conf, hosts and hostname (EtcDir)
	Private bool   // pid and network namespaces of its own, else the host's
	Log     string // the host file its output goes to
}

// NewID is a random 64-hex container ID, as tink-agent's.
func NewID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// EtcDir copies the host's resolv.conf, hosts and hostname into dir.
func EtcDir(dir string) error {
	for _, f := range []string{"resolv.conf", "hosts", "hostname"} {
		data, err := os.ReadFile("/etc/" + f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// SnapshotKey is the key of a's snapshot.
func (a Action) SnapshotKey() string { return a.Name + "-" + a.ID[:8] }

// Create creates a's container, under a lease until it holds its
// snapshot, and its task, not started, in c's namespace.
func Create(ctx context.Context, c *containerdapi.Client, a Action) error {
	img, err := c.ImageUnpacked(ctx, a.Image, containerdapi.DefaultPlatform(), containerdapi.DefaultSnapshotter)
	if err != nil {
		return fmt.Errorf("the action's image %s: %w", a.Image, err)
	}
	args := append(slices.Clone(img.Config.Config.Entrypoint), a.Args...)
	lease := "tinkagent-" + a.ID[:12]
	if _, err := c.LeaseCreate(ctx, lease, time.Now().Add(time.Hour)); err != nil {
		return fmt.Errorf("creating action %s: %w", a.Name, err)
	}
	lctx := containerdapi.WithLease(ctx, lease)
	mounts, err := c.SnapshotPrepare(lctx, containerdapi.DefaultSnapshotter, a.SnapshotKey(), img.ChainID)
	if err != nil {
		return fmt.Errorf("creating action %s: %w", a.Name, err)
	}
	ns := c.Namespace
	if ns == "" {
		ns = containerdapi.DefaultNamespace
	}
	_, err = c.ContainerCreate(lctx, containerdapi.Container{
		ID: a.ID, Image: a.Image, Labels: map[string]string{"nerdctl/name": a.Name, "nerdctl/namespace": ns},
		Runtime:     containerdapi.Runtime{Name: containerdapi.RuncV2},
		Spec:        containerdapi.SpecAny(Spec(ns, a.ID, args, a.Env, a.Volumes, a.Etc, a.Private)),
		Snapshotter: containerdapi.DefaultSnapshotter, SnapshotKey: a.SnapshotKey(),
	})
	if err != nil {
		return fmt.Errorf("creating action %s: %w", a.Name, err)
	}
	if err := c.LeaseDelete(ctx, lease, true); err != nil {
		return fmt.Errorf("creating action %s: %w", a.Name, err)
	}
	if _, err := c.TaskCreate(ctx, a.ID, containerdapi.TaskSpec{Rootfs: mounts, Stdout: "file://" + a.Log, Stderr: "file://" + a.Log}); err != nil {
		return fmt.Errorf("creating the task of action %s: %w", a.Name, err)
	}
	return nil
}

// Delete is what the agent does after an exit 0: it deletes the task,
// then the container, then its snapshot.
func Delete(ctx context.Context, c *containerdapi.Client, a Action) error {
	if _, err := c.TaskDelete(ctx, a.ID); err != nil {
		return fmt.Errorf("deleting the task of action %s: %w", a.Name, err)
	}
	if err := c.ContainerDelete(ctx, a.ID); err != nil {
		return fmt.Errorf("deleting action %s: %w", a.Name, err)
	}
	_ = c.SnapshotRemove(ctx, containerdapi.DefaultSnapshotter, a.SnapshotKey())
	return nil
}

// Spec is the OCI spec of an action container in namespace, as tink-agent
// makes one: privileged (every capability, no masked or read-only paths,
// a writable /sys, every device allowed and the host's devices made),
// with args, env, the volumes (host, container), the /run tmpfs, /etc
// files from etc, the host's pid and network or (private) namespaces of
// its own, the cgroup /<namespace>/<id>.
func Spec(namespace, id string, args, env []string, volumes [][2]string, etc string, private bool) []byte {
	caps := AllCaps()
	mounts := []map[string]any{
		{"destination": "/proc", "type": "proc", "source": "proc", "options": []string{"nosuid", "noexec", "nodev"}},
		{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": []string{"nosuid", "noexec", "nodev"}},
		{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "rw"}},
		{"destination": "/run", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
	}
	for _, v := range volumes {
		mounts = append(mounts, map[string]any{"destination": v[1], "type": "bind", "source": v[0], "options": []string{"rbind", "rw"}})
	}
	for _, f := range []string{"resolv.conf", "hosts", "hostname"} {
		mounts = append(mounts, map[string]any{"destination": "/etc/" + f, "type": "bind", "source": filepath.Join(etc, f), "options": []string{"bind", "rprivate", "rw"}})
	}
	namespaces := []map[string]string{{"type": "ipc"}, {"type": "uts"}, {"type": "mount"}}
	if private {
		// tink-agent's defaults: a pid namespace, and a network one
		// without path, where it sets up CNI.
		namespaces = append(namespaces, map[string]string{"type": "pid"}, map[string]string{"type": "network"})
	}
	spec := map[string]any{
		"ociVersion": "1.1.0",
		"process": map[string]any{
			"user": map[string]any{"uid": 0, "gid": 0, "additionalGids": []int{0}}, "args": args, "env": env, "cwd": "/",
			"capabilities": map[string]any{"bounding": caps, "effective": caps, "permitted": caps},
		},
		"root":   map[string]any{"path": "rootfs"},
		"mounts": mounts,
		"linux": map[string]any{
			"namespaces":  namespaces,
			"cgroupsPath": "/" + namespace + "/" + id,
			"resources":   map[string]any{"devices": []map[string]any{{"allow": true, "access": "rwm"}}},
			"devices":     HostDevices("/dev"),
		},
	}
	data, _ := json.Marshal(spec)
	return data
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
