package selfid

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

// Container IDs used in the samples.
const (
	own      = "5b3975651c3cab92d044c096dc30a1c2d9525497457472de48c51ecb363d1f4a" // this container
	netOwner = "5bf2944152bb5b92db038c838f58da8514bd8a573fa6b246cd33389a70b2a85d" // the X of --network container:X
	outer    = "560e3e12b1e0dafa161e62fb3327ad65c98b7cd53849b17c627e8d3e1d419d6a" // the outer container of Docker in Docker
	layer    = "77ea7eee3d80b1a38f83906dd3048e2689457eb90e18a7d12f839c5ae37106a2" // an overlay layer, not a container
	podman   = "2f259bab93aaaaa2542ba43ef33eb990d0999ee1b9924b557b7be53c0b7a1bb9"
	rootless = "12b961af5feb3e9d39f93b2cefb9a1a944f18d02cca0cac2f04f5a982240605f"
	k8s      = "17c132990e8e8523ccd403287b6ae761c1cd57f764df278bce7ed310bbddd7f1"
)

// fill puts the IDs above in place of their {names} in a sample.
func fill(sample string) string {
	return strings.NewReplacer(
		"{own}", own, "{net}", netOwner, "{outer}", outer, "{layer}", layer,
		"{podman}", podman, "{rootless}", rootless, "{k8s}", k8s,
	).Replace(sample)
}

// /proc/self/cgroup of a Docker 20.10 container on cgroup v1.
var dockerV1Cgroup = fill(`12:pids:/docker/{own}
11:hugetlb:/docker/{own}
10:net_cls,net_prio:/docker/{own}
9:memory:/docker/{own}
8:cpuset:/docker/{own}
7:freezer:/docker/{own}
6:perf_event:/docker/{own}
5:devices:/docker/{own}
4:blkio:/docker/{own}
3:cpu,cpuacct:/docker/{own}
2:rdma:/
1:name=systemd:/docker/{own}
0::/system.slice/containerd.service
`)

// dockerV1Mountinfo is /proc/self/mountinfo of a Docker 20.10 container on
// cgroup v1 whose /etc/hostname, /etc/hosts and /etc/resolv.conf are those of
// the container filesOf.
func dockerV1Mountinfo(filesOf string) string {
	return strings.ReplaceAll(fill(`590 512 0:52 / / rw,relatime master:297 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/5NQJ3PXGJ6CQ2OZ2TCQTW4WQ5A:/var/lib/docker/overlay2/l/JL3GCNFB4GX6GWKIRAZ4LHSSIA,upperdir=/var/lib/docker/overlay2/{layer}/diff,workdir=/var/lib/docker/overlay2/{layer}/work
591 590 0:55 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
592 590 0:56 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
593 592 0:57 / /dev/pts rw,nosuid,noexec,relatime - devpts devpts rw,gid=5,mode=620,ptmxmode=666
594 590 0:58 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro
595 594 0:59 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=755
596 595 0:30 /docker/{own} /sys/fs/cgroup/systemd ro,nosuid,nodev,noexec,relatime master:11 - cgroup cgroup rw,xattr,name=systemd
597 595 0:33 /docker/{own} /sys/fs/cgroup/pids ro,nosuid,nodev,noexec,relatime master:15 - cgroup cgroup rw,pids
598 595 0:34 /docker/{own} /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime master:16 - cgroup cgroup rw,memory
608 592 0:54 / /dev/mqueue rw,nosuid,nodev,noexec,relatime - mqueue mqueue rw
609 590 254:1 /var/lib/docker/containers/{files}/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda1 rw
610 590 254:1 /var/lib/docker/containers/{files}/hostname /etc/hostname rw,relatime - ext4 /dev/vda1 rw
611 590 254:1 /var/lib/docker/containers/{files}/hosts /etc/hosts rw,relatime - ext4 /dev/vda1 rw
612 592 0:53 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k
613 590 0:19 /docker.sock /var/run/docker.sock rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=817672k,mode=755
514 591 0:55 /bus /proc/bus ro,relatime - proc proc rw
515 591 0:55 /sys /proc/sys ro,relatime - proc proc rw
516 592 0:56 /null /proc/kcore rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
`), "{files}", filesOf)
}

// dockerV2Mountinfo is /proc/self/mountinfo of a Docker 20.10 container on
// cgroup v2 with the given mounts after the standard ones.
func dockerV2Mountinfo(mounts string) string {
	return fill(`1021 961 0:88 / / rw,relatime master:512 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/QYV2OUF2TS7VNJ5AB3QGDHFJ3H,upperdir=/var/lib/docker/overlay2/{layer}/diff,workdir=/var/lib/docker/overlay2/{layer}/work
1022 1021 0:91 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
1023 1021 0:92 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755,inode64
1024 1023 0:93 / /dev/pts rw,nosuid,noexec,relatime - devpts devpts rw,gid=5,mode=620,ptmxmode=666
1025 1021 0:94 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro
1026 1025 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw,nsdelegate,memory_recursiveprot
1027 1023 0:90 / /dev/mqueue rw,nosuid,nodev,noexec,relatime - mqueue mqueue rw
1028 1023 0:95 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k,inode64
`) + fill(mounts)
}

// The bind mounts Docker makes for the files of the container {own}.
const dockerFiles = `1029 1021 8:1 /var/lib/docker/containers/{own}/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/sda1 rw,discard,errors=remount-ro
1030 1021 8:1 /var/lib/docker/containers/{own}/hostname /etc/hostname rw,relatime - ext4 /dev/sda1 rw,discard,errors=remount-ro
1031 1021 8:1 /var/lib/docker/containers/{own}/hosts /etc/hosts rw,relatime - ext4 /dev/sda1 rw,discard,errors=remount-ro
`

// podmanMountinfo is /proc/self/mountinfo of a Podman 4.3 container with the
// given mounts of its files.
func podmanMountinfo(files string) string {
	return fill(`560 520 0:47 / / rw,relatime - overlay overlay rw,lowerdir=/var/lib/containers/storage/overlay/l/Q2XMFYG5PF2M7UYQ5ANV3NZDDI,upperdir=/var/lib/containers/storage/overlay/{layer}/diff,workdir=/var/lib/containers/storage/overlay/{layer}/work,metacopy=on
561 560 0:49 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
562 560 0:50 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755,inode64
563 560 0:51 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs rw
564 562 0:52 / /dev/pts rw,nosuid,noexec,relatime - devpts devpts rw,gid=5,mode=620,ptmxmode=666
565 562 0:46 / /dev/mqueue rw,nosuid,nodev,noexec,relatime - mqueue mqueue rw
` + files + `570 562 0:45 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=64000k,uid=0,gid=0,inode64
571 563 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`)
}

// The bind mounts rootful Podman makes for the files of the container
// {podman}, from /run/containers/storage on the /run tmpfs.
const podmanFiles = `566 560 0:25 /containers/storage/overlay-containers/{podman}/userdata/.containerenv /run/.containerenv rw,nosuid,nodev,relatime - tmpfs tmpfs rw,size=1631916k,nr_inodes=819200,mode=755,inode64
567 560 0:25 /containers/storage/overlay-containers/{podman}/userdata/hostname /etc/hostname rw,nosuid,nodev,relatime - tmpfs tmpfs rw,size=1631916k,nr_inodes=819200,mode=755,inode64
568 560 0:25 /containers/storage/overlay-containers/{podman}/userdata/resolv.conf /etc/resolv.conf rw,nosuid,nodev,relatime - tmpfs tmpfs rw,size=1631916k,nr_inodes=819200,mode=755,inode64
569 560 0:25 /containers/storage/overlay-containers/{podman}/userdata/hosts /etc/hosts rw,nosuid,nodev,relatime - tmpfs tmpfs rw,size=1631916k,nr_inodes=819200,mode=755,inode64
`

var candidateCases = []struct {
	name string
	src  Sources
	want []Candidate
}{
	{
		name: "a cgroup path without its leading slash: every part is read",
		src:  Sources{Cgroup: "0::docker-" + own + ".scope\n"},
		want: []Candidate{{own, Cgroup}},
	},
	{
		name: "a mountinfo line cut after the mount point",
		src:  Sources{Mountinfo: fill("612 590 254:1 /var/lib/docker/containers/{own}/hostname /etc/hostname\n")},
		want: []Candidate{{own, Mountinfo}},
	},
	{
		name: "default bridge, cgroup v1",
		src:  Sources{Cgroup: dockerV1Cgroup, Mountinfo: dockerV1Mountinfo(own), Hostname: own[:12] + "\n"},
		want: []Candidate{{own, Cgroup}, {own[:12], Hostname}},
	},
	{
		name: "network host: hostname is the host's",
		src:  Sources{Cgroup: dockerV1Cgroup, Mountinfo: dockerV1Mountinfo(own), Hostname: "hookos"},
		want: []Candidate{{own, Cgroup}, {"hookos", Hostname}},
	},
	{
		name: "custom hostname, private cgroup namespace",
		src:  Sources{Cgroup: "0::/\n", Mountinfo: dockerV2Mountinfo(dockerFiles), Hostname: "provisioner"},
		want: []Candidate{{own, Mountinfo}, {"provisioner", Hostname}},
	},
	{
		name: "private cgroup namespace: only mountinfo has the ID",
		src:  Sources{Cgroup: "0::/\n", Mountinfo: dockerV2Mountinfo(dockerFiles), Hostname: own[:12]},
		want: []Candidate{{own, Mountinfo}, {own[:12], Hostname}},
	},
	{
		name: "network container:X: files and hostname are X's",
		src:  Sources{Cgroup: dockerV1Cgroup, Mountinfo: dockerV1Mountinfo(netOwner), Hostname: netOwner[:12]},
		want: []Candidate{{own, Cgroup}, {netOwner, Mountinfo}, {netOwner[:12], Hostname}},
	},
	{
		name: "systemd cgroup driver, host cgroup namespace",
		src:  Sources{Cgroup: fill("0::/system.slice/docker-{own}.scope\n"), Mountinfo: dockerV2Mountinfo(dockerFiles), Hostname: own[:12]},
		want: []Candidate{{own, Cgroup}, {own[:12], Hostname}},
	},
	{
		name: "docker in docker: innermost first",
		src:  Sources{Cgroup: fill("12:pids:/docker/{outer}/docker/{own}\n1:name=systemd:/docker/{outer}/docker/{own}\n0::/\n"), Hostname: own[:12]},
		want: []Candidate{{own, Cgroup}, {outer, Cgroup}, {own[:12], Hostname}},
	},
	{
		name: "kubernetes with containerd, cgroup v1 and systemd",
		src: Sources{
			Cgroup: fill(`11:pids:/kubepods/besteffort/pod2c5c1c2e-3b8e-4c4a-9d0f-6f1b2a3c4d5e/{k8s}
1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod2c5c1c2e_3b8e_4c4a_9d0f_6f1b2a3c4d5e.slice/cri-containerd-{k8s}.scope
`),
			Mountinfo: fill(`1611 1590 8:1 /var/lib/kubelet/pods/2c5c1c2e-3b8e-4c4a-9d0f-6f1b2a3c4d5e/etc-hosts /etc/hosts rw,relatime - ext4 /dev/sda1 rw
1612 1590 8:1 /var/lib/kubelet/pods/2c5c1c2e-3b8e-4c4a-9d0f-6f1b2a3c4d5e/containers/action/6d1f0e5c /dev/termination-log rw,relatime - ext4 /dev/sda1 rw
1613 1590 8:1 /var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/{layer}/hostname /etc/hostname rw,relatime - ext4 /dev/sda1 rw
`),
			Hostname: "tink-action-7d9f6",
		},
		want: []Candidate{{k8s, Cgroup}, {"tink-action-7d9f6", Hostname}},
	},
	{
		name: "podman, libpod scope",
		src:  Sources{Cgroup: fill("0::/machine.slice/libpod-{podman}.scope/container\n"), Mountinfo: podmanMountinfo(podmanFiles), Hostname: podman[:12]},
		want: []Candidate{{podman, Cgroup}, {podman[:12], Hostname}},
	},
	{
		name: "podman, cgroupfs manager",
		src:  Sources{Cgroup: fill("0::/libpod_parent/libpod-{podman}\n"), Mountinfo: podmanMountinfo(podmanFiles), Hostname: podman[:12]},
		want: []Candidate{{podman, Cgroup}, {podman[:12], Hostname}},
	},
	{
		name: "podman, private cgroup namespace",
		src:  Sources{Cgroup: "0::/\n", Mountinfo: podmanMountinfo(podmanFiles), Hostname: podman[:12]},
		want: []Candidate{{podman, Mountinfo}, {podman[:12], Hostname}},
	},
	{
		name: "podman, vfs driver and absolute run path",
		src: Sources{
			Cgroup:    "0::/\n",
			Mountinfo: podmanMountinfo(fill("567 560 253:0 /run/containers/storage/vfs-containers/{podman}/userdata/hostname /etc/hostname rw,relatime - xfs /dev/mapper/rl-root rw\n")),
		},
		want: []Candidate{{podman, Mountinfo}},
	},
	{
		name: "rootless podman",
		src: Sources{
			Cgroup: "0::/\n",
			Mountinfo: podmanMountinfo(fill(`566 560 0:39 /@home/alice/.local/share/containers/storage/overlay-containers/{rootless}/userdata/hostname /etc/hostname rw,relatime - btrfs /dev/nvme0n1p2 rw,ssd,space_cache=v2,subvolid=256,subvol=/@home
567 560 0:39 /@home/alice/.local/share/containers/storage/overlay-containers/{rootless}/userdata/hosts /etc/hosts rw,relatime - btrfs /dev/nvme0n1p2 rw,ssd,space_cache=v2,subvolid=256,subvol=/@home
568 560 0:61 /containers/overlay-containers/{rootless}/userdata/.containerenv /run/.containerenv rw,nosuid,nodev,relatime - tmpfs tmpfs rw,size=1631912k,nr_inodes=407978,mode=700,uid=1000,gid=1000,inode64
`)),
			Hostname: rootless[:12],
		},
		want: []Candidate{{rootless, Mountinfo}, {rootless[:12], Hostname}},
	},
	{
		name: "docker data root on its own file system",
		src: Sources{
			Cgroup: "0::/\n",
			Mountinfo: dockerV2Mountinfo(`1029 1021 8:17 /docker/containers/{own}/resolv.conf /etc/resolv.conf rw,relatime - xfs /dev/sdb1 rw,attr2,inode64
1030 1021 8:17 /docker/containers/{own}/hostname /etc/hostname rw,relatime - xfs /dev/sdb1 rw,attr2,inode64
1031 1021 8:17 /docker/containers/{own}/hosts /etc/hosts rw,relatime - xfs /dev/sdb1 rw,attr2,inode64
`),
			Hostname: own[:12],
		},
		want: []Candidate{{own, Mountinfo}, {own[:12], Hostname}},
	},
	{
		name: "escaped spaces in mountinfo",
		src: Sources{
			Cgroup: "0::/\n",
			Mountinfo: dockerV2Mountinfo(`1029 1021 8:1 /mnt/my\040data\040root/containers/{own}/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/sda1 rw
1030 1021 8:1 /mnt/my\040data\040root/containers/{own}/hostname /etc/hostname rw,relatime - ext4 /dev/sda1 rw
1032 1021 8:1 /mnt/my\040data\040root/volumes/tink\040data/_data /tink\040data\134x rw,relatime - ext4 /dev/sda1 rw
`),
			Hostname: own[:12],
		},
		want: []Candidate{{own, Mountinfo}, {own[:12], Hostname}},
	},
	{
		name: "host docker directory mounted in: own files before other containers",
		src: Sources{
			Cgroup: "0::/\n",
			Mountinfo: dockerV2Mountinfo(`1029 1021 8:1 /var/lib/docker /host-docker rw,relatime master:1 - ext4 /dev/sda1 rw
1030 1029 0:97 / /host-docker/containers/{net}/mounts/shm rw,nosuid,nodev,noexec,relatime master:402 - tmpfs shm rw,size=65536k,inode64
1031 1029 0:98 / /host-docker/overlay2/{layer}/merged rw,relatime master:405 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/QYV2OUF2TS7VNJ5AB3QGDHFJ3H
` + dockerFiles),
			Hostname: own[:12],
		},
		want: []Candidate{{own, Mountinfo}, {netOwner, Mountinfo}, {own[:12], Hostname}},
	},
	{
		name: "override name comes first",
		src:  Sources{Override: " tink-action-1\n", Cgroup: dockerV1Cgroup, Mountinfo: dockerV1Mountinfo(own), Hostname: own[:12]},
		want: []Candidate{{"tink-action-1", Override}, {own, Cgroup}, {own[:12], Hostname}},
	},
	{
		name: "override ID is not repeated",
		src:  Sources{Override: own + "\n", Cgroup: dockerV1Cgroup, Mountinfo: dockerV1Mountinfo(own), Hostname: own[:12]},
		want: []Candidate{{own, Override}, {own[:12], Hostname}},
	},
	{
		name: "blank override and hostname",
		src:  Sources{Override: " \t\n", Cgroup: "0::/\n", Hostname: "  "},
		want: nil,
	},
	{
		name: "empty",
		want: nil,
	},
	{
		name: "garbage",
		src: Sources{
			Cgroup: fill(`not a cgroup file
0::/docker/{own}ab
1:cpu:/docker/` + strings.ToUpper(own) + `
2:pids:/system.slice/docker-{own}.scope.bak
3:memory:/system.slice/docker-` + own[:63] + `.scope
4:devices:/system.slice/podman-{own}.scope
5:blkio:/x{own}
/docker/{own}
`),
			Mountinfo: fill("\x00\xff\xfe binary\n1 2 3\n" +
				`612 590 254:1 /var/lib/docker/containers/{own} /etc/hostname rw - ext4 /dev/vda1 rw
613 590 254:1 /var/lib/containers/storage/overlay-containers/{own}/hostname /etc/hostname rw - ext4 /dev/vda1 rw
614 590 254:1 /var/lib/docker/containers/{own}0/hostname /etc/hostname rw - ext4 /dev/vda1 rw
615 590 254:1 /var/lib/docker/overlay2/{own}/diff /x rw - ext4 /dev/vda1 rw
616 590 254:1 / / rw - ext4 /var/lib/docker/containers/{own}/hostname rw
617 590 254:1\040/var/lib/docker/containers/{own}/hostname /etc/hostname rw - ext4 /dev/vda1 rw
`),
		},
		want: nil,
	},
}

func TestCandidates(t *testing.T) {
	for _, tc := range candidateCases {
		t.Run(tc.name, func(t *testing.T) {
			got := Candidates(tc.src)
			if d := diff(tc.want, got); d != "" {
				t.Errorf("Candidates() mismatch (-want +got):\n%s", d)
			}
		})
	}
}

// diff lists two lists of candidates line by line, marking what only want has
// with - and what only got has with +. It returns "" if they are equal.
func diff(want, got []Candidate) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	var b strings.Builder
	for i := 0; i < max(len(want), len(got)); i++ {
		if i < len(want) && i < len(got) && want[i] == got[i] {
			fmt.Fprintf(&b, "  %s %q\n", want[i].Method, want[i].ID)
			continue
		}
		if i < len(want) {
			fmt.Fprintf(&b, "- %s %q\n", want[i].Method, want[i].ID)
		}
		if i < len(got) {
			fmt.Fprintf(&b, "+ %s %q\n", got[i].Method, got[i].ID)
		}
	}
	if b.Len() == 0 { // nil against empty
		fmt.Fprintf(&b, "- %#v\n+ %#v\n", want, got)
	}
	return b.String()
}

func TestRead(t *testing.T) {
	s := Read(" tink-action-1 ")
	if s.Override != " tink-action-1 " {
		t.Errorf("Read() Override = %q, want %q", s.Override, " tink-action-1 ")
	}
	if want, err := os.Hostname(); err == nil && s.Hostname != want {
		t.Errorf("Read() Hostname = %q, want %q", s.Hostname, want)
	}
	if want, err := os.ReadFile("/proc/self/cgroup"); err == nil && s.Cgroup != string(want) {
		t.Errorf("Read() Cgroup = %q, want %q", s.Cgroup, want)
	}
}

func FuzzCandidates(f *testing.F) {
	for _, tc := range candidateCases {
		f.Add(tc.src.Override, tc.src.Cgroup, tc.src.Mountinfo, tc.src.Hostname)
	}
	f.Fuzz(func(t *testing.T, override, cgroup, mountinfo, hostname string) {
		src := Sources{Override: override, Cgroup: cgroup, Mountinfo: mountinfo, Hostname: hostname}
		seen := make(map[string]bool)
		for _, c := range Candidates(src) {
			if c.ID == "" {
				t.Fatalf("empty ID from %s", c.Method)
			}
			if seen[c.ID] {
				t.Fatalf("duplicate ID %q", c.ID)
			}
			seen[c.ID] = true
			in, ok := map[Method]string{Cgroup: cgroup, Mountinfo: mountinfo}[c.Method]
			if !ok {
				continue
			}
			if !isFullID(c.ID) {
				t.Fatalf("%s candidate %q is not a full ID", c.Method, c.ID)
			}
			if !strings.Contains(in, c.ID) {
				t.Fatalf("%s candidate %q is not in the %s input", c.Method, c.ID, c.Method)
			}
		}
	})
}

// isFullID reports whether id is 64 lowercase hex digits; unlike isID it is
// written without a loop over bytes, so the fuzzer checks one against the other.
func isFullID(id string) bool {
	return len(id) == 64 && strings.Trim(id, "0123456789abcdef") == ""
}
