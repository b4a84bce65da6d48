#!/usr/bin/env bash
# Builds one of the field's machines from Debian trixie's packages and
# the project's own engine builds, and prints the directory that holds it:
# vmlinuz (Debian's kernel), root.cpio.zst (the whole root as an
# initramfs) and nextboot.cpio (the modules a small initrd needs to mount
# the target disk). Cached under /var/cache/waitdaemon/field/, keyed on a hash
# of this script, the package list, the modules and the binaries it
# copies in; everything else goes to stderr.
#
#   scripts/field-image.sh captainos   systemd PID 1, networkd DHCP, no
#                                      /etc/hostname, containerd 2.2.1 on
#                                      runc 1.4 with its CRI plugin
#                                      disabled, CNI's plugins and bridge
#                                      conflist, systemd-resolved without
#                                      its stub, as CaptainOS
#   scripts/field-image.sh hookos      busybox init PID 1 with LinuxKit's
#                                      shutdown, Docker 28.2.2 on
#                                      containerd 1.7.27 and runc 1.2.6,
#                                      as HookOS v0.11 ships; dockerd in
#                                      a mount namespace of its own, as
#                                      hook-docker, logging to syslog
#   scripts/field-image.sh hookos26    the same on Debian trixie's
#                                      docker.io 26.1.5, with its
#                                      containerd and runc, HookOS
#                                      v0.9-v0.10's line: no engine built
#                                      from source, so make test's HookOS
#                                      machine needs no Docker build
#
# hookos's engine is the project's own static build (scripts/docker.sh 28
# paths: built once into the cache); the docker CLI that the runner's
# script calls is trixie's docker-cli.
#
# Both boot from RAM: /init copies the root into a tmpfs and switch_roots
# there, as CaptainOS's and LinuxKit's do, because runc's pivot_root
# rejects the initramfs root. The guest reaches the host's registry as
# registry.waitdaemon.test:5017, which /etc/hosts maps to QEMU's guestfwd
# address, 10.0.2.100, and each OS declares as it declares a plain-HTTP
# registry (hosts.toml under /etc/containerd/certs.d, or Docker's
# insecure-registries).
set -euo pipefail

os=${1:-}
self=$(readlink -f "$0")
cache=${ENGINES_CACHE:-/var/cache/waitdaemon}
mirror=${FIELD_MIRROR:-http://deb.debian.org/debian}
registry=registry.waitdaemon.test:5017
guestfwd=10.0.2.100
# HookOS's syslog host (syslog_host=, the provisioning server): here the
# HookOS-like machine's own address, where a listener prints what it gets.
syslog_host=10.0.2.15
say() { echo "field-image: $*" >&2; }

# The kernel modules each machine loads; their dependencies come along.
# ext4 asks the crypto API for crc32c (metadata checksums), which no
# depends line names: without it, mounting the target disk fails, ENOENT.
# device-mapper's delay target: the field's slow result device.
modules_common="virtio_pci virtio_net virtio_blk virtio_scsi sd_mod ext4 crc32c_generic overlay dm_mod dm_delay"
# CNI's bridge, its masquerade and its firewall, with iptables-nft.
modules_captainos="bridge veth nf_tables nft_compat nft_chain_nat nft_masq nf_nat nf_conntrack
	xt_MASQUERADE xt_addrtype xt_conntrack xt_comment xt_mark xt_multiport"
modules_hookos="bridge br_netfilter veth nf_tables nft_compat nft_chain_nat nft_masq nf_nat nf_conntrack
	xt_MASQUERADE xt_addrtype xt_conntrack xt_nat xt_mark xt_comment iptable_nat iptable_filter ip6table_nat ip6table_filter"

case $os in
captainos)
	# Debian's containernetworking-plugins: CaptainOS's CNI plugins
	# (bridge, host-local, loopback, portmap, firewall, tuning), which
	# run iptables.
	packages="systemd systemd-sysv systemd-resolved udev dbus kmod iproute2 iptables libseccomp2 containernetworking-plugins dmsetup"
	modules="$modules_common $modules_captainos"
	;;
hookos)
	packages="docker-cli busybox-static kmod iproute2 iptables socat dmsetup"
	modules="$modules_common $modules_hookos"
	docker=28
	;;
hookos26)
	packages="docker.io docker-cli busybox-static kmod iproute2 iptables socat dmsetup"
	modules="$modules_common $modules_hookos"
	;;
customize)
	# mmdebstrap's customize hook: customize OS ROOT WORK.
	;;
*)
	echo "usage: $0 captainos|hookos|hookos26" >&2
	exit 2
	;;
esac

containerd_dir=$cache/containerd-v2.2.1
runc_dir=$cache/runc-v1.4.0

# customize OS ROOT WORK runs inside mmdebstrap, once the packages are in.
if [ "$os" = customize ]; then
	os=$2 root=$3 work=$4
	case $os in
	captainos) modules="$modules_common $modules_captainos" ;;
	hookos | hookos26) modules="$modules_common $modules_hookos" ;;
	esac

	# Debian's kernel: downloaded, unpacked beside the root, never installed.
	pkg=$(chroot "$root" apt-cache depends linux-image-amd64 | sed -n 's/.*Depends: \(linux-image-[0-9].*\)/\1/p' | head -1)
	say "kernel package $pkg"
	(cd "$root/tmp" && chroot "$root" sh -c "cd /tmp && apt-get download -q $pkg" >&2)
	dpkg-deb -x "$root"/tmp/"$pkg"_*.deb "$work/kernel"
	rm -f "$root"/tmp/*.deb
	moddir=$work/kernel/usr/lib/modules
	[ -d "$moddir" ] || moddir=$work/kernel/lib/modules
	kver=$(ls "$moddir")
	echo "$kver" >"$work/kernel-version"
	cp "$work/kernel/boot/vmlinuz-$kver" "$work/vmlinuz"

	# Only the modules the machine loads, and theirs, then depmod in the
	# root (the host's depmod over the whole tree is slow).
	src=$moddir/$kver
	dst=$root/lib/modules/$kver
	mkdir -p "$dst"
	cp "$src"/modules.order "$src"/modules.builtin* "$dst"/
	find "$src/kernel" -name '*.ko*' >"$work/modules.all"
	want=$(echo $modules)
	done_=" "
	while [ -n "$want" ]; do
		set -- $want
		m=${1//-/_}
		shift
		want="$*"
		case $done_ in *" $m "*) continue ;; esac
		done_="$done_$m "
		if grep -Eq "/${m//_/[_-]}\.ko" "$src/modules.builtin"; then continue; fi
		f=$(grep -E "/${m//_/[_-]}\.ko(\.xz|\.zst)?$" "$work/modules.all" | head -1)
		[ -n "$f" ] || { say "no module $m in $kver"; exit 1; }
		rel=${f#"$src"/}
		mkdir -p "$dst/$(dirname "$rel")"
		cp "$f" "$dst/$rel"
		deps=$(chroot "$root" modinfo -F depends "/lib/modules/$kver/$rel" | tr , ' ')
		want="$want $deps"
	done
	chroot "$root" depmod "$kver"
	echo "$modules" | tr ' \t' '\n\n' | sed '/^$/d' >"$root/etc/modules-field"

	# The next boot's modules: what mounting the target disk takes,
	# uncompressed and in load order, for the busybox initrd that reads
	# the result file after a kexec or a reset (field/disk_rig_test.go).
	nb=$work/nextboot
	mkdir -p "$nb/modules"
	: >"$nb/modules/order"
	for m in virtio_pci virtio_scsi sd_mod crc32c_generic ext4; do
		chroot "$root" modprobe -S "$kver" --show-depends "$m" | while read -r what path _; do
			[ "$what" = insmod ] || continue
			name=$(basename "$path")
			name=${name%.xz}
			name=${name%.zst}
			grep -qx "$name" "$nb/modules/order" && continue
			case $path in
			*.xz) xz -dc "$root$path" ;;
			*.zst) zstd -dcq "$root$path" ;;
			*) cat "$root$path" ;;
			esac >"$nb/modules/$name"
			echo "$name" >>"$nb/modules/order"
		done
	done
	(cd "$nb" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) >"$work/nextboot.cpio"

	# As CaptainOS boots: no hostname set at build time, a new machine ID
	# at each boot.
	rm -f "$root/etc/hostname"
	: >"$root/etc/machine-id"
	echo "$guestfwd ${registry%:*}" >>"$root/etc/hosts"

	cat >"$root/init" <<'EOF'
#!/bin/sh
# runc's pivot_root rejects the initramfs root: copy the root into a
# tmpfs and switch_root there, as CaptainOS and LinuxKit do.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /newroot
mount -t tmpfs -o mode=0755 root /newroot
for d in /*; do
	case $d in /newroot|/proc|/sys|/dev|/init) ;; *) cp -a "$d" /newroot/ ;; esac
done
mkdir -p /newroot/proc /newroot/sys /newroot/dev /newroot/run
exec switch_root /newroot /sbin/init
EOF
	chmod 755 "$root/init"

	case $os in
	captainos)
		install -m 755 "$containerd_dir/containerd" "$containerd_dir/containerd-shim-runc-v2" "$containerd_dir/ctr" \
			"$runc_dir/runc" "$root/usr/local/bin/"
		mkdir -p "$root/etc/containerd/certs.d/$registry"
		# CaptainOS's config.toml (mkosi.extra/etc/containerd): the CRI
		# plugin disabled.
		cat >"$root/etc/containerd/config.toml" <<'EOF'
version = 3
root = '/var/lib/containerd'
state = '/run/containerd'

disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.internal.v1.opt"]

[grpc]
  address = '/run/containerd/containerd.sock'

[plugins.'io.containerd.cri.v1.images'.registry]
  config_path = '/etc/containerd/certs.d'

[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = 'runc'

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ['/opt/cni/bin']
  conf_dir = '/etc/cni/net.d'
EOF
		# CNI as CaptainOS has it: the plugins in /opt/cni/bin (Debian
		# keeps them in /usr/lib/cni) and its bridge conflist
		# (mkosi.extra/etc/cni/net.d), which tink-agent reads.
		mkdir -p "$root/opt/cni/bin" "$root/etc/cni/net.d"
		for p in "$root"/usr/lib/cni/*; do ln -s "/usr/lib/cni/${p##*/}" "$root/opt/cni/bin/${p##*/}"; done
		cat >"$root/etc/cni/net.d/10-bridge.conflist" <<'EOF'
{
  "cniVersion": "1.0.0",
  "name": "bridge",
  "nerdctlID": "bridge",
  "nerdctlLabels": {
    "nerdctl/default-network": "true"
  },
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [
          [
            {
              "subnet": "172.17.0.0/23",
              "gateway": "172.17.0.1"
            }
          ]
        ],
        "routes": [
          {
            "dst": "0.0.0.0/0"
          }
        ]
      }
    },
    {
      "type": "portmap",
      "capabilities": {
        "portMappings": true
      }
    },
    {
      "type": "firewall",
      "ingressPolicy": "same-bridge"
    },
    {
      "type": "tuning"
    }
  ]
}
EOF
		# systemd-resolved without its stub listener, /etc/resolv.conf a
		# link to the upstream servers' file (resolved.conf.d/no-stub.conf,
		# mkosi.finalize).
		mkdir -p "$root/etc/systemd/resolved.conf.d"
		printf '[Resolve]\nDNSStubListener=no\n' >"$root/etc/systemd/resolved.conf.d/no-stub.conf"
		ln -sf /run/systemd/resolve/resolv.conf "$root/etc/resolv.conf"
		# What the machine has of CaptainOS, said on the console before
		# the runner starts (containerd is up: Type=notify).
		cat >"$root/usr/local/bin/field-shipped" <<'EOF'
#!/bin/sh
cri=$(/usr/local/bin/ctr plugins ls | awk '$1 == "io.containerd.grpc.v1" && $2 == "cri" {print $NF; f = 1} END {if (!f) print "absent"}')
stub=no
ss -Hln src 127.0.0.53 | grep -q . && stub=yes
echo "FIELD-CAPTAINOS cni-plugins=$(ls /opt/cni/bin | tr '\n' , | sed 's/,$//') cni-conf=$(ls /etc/cni/net.d | tr '\n' , | sed 's/,$//') resolv-conf=$(readlink /etc/resolv.conf || echo not-a-link) resolved=$(systemctl is-active systemd-resolved) stub-listener=$stub cri=$cri"
EOF
		chmod 755 "$root/usr/local/bin/field-shipped"
		# What tink-agent-setup writes for insecure_registries=.
		cat >"$root/etc/containerd/certs.d/$registry/hosts.toml" <<EOF
server = "http://$registry"

[host."http://$registry"]
  capabilities = ["pull", "resolve", "push"]
  skip_verify = true
EOF
		cat >"$root/etc/systemd/system/containerd.service" <<'EOF'
[Unit]
Description=containerd container runtime
After=network.target local-fs.target

[Service]
ExecStart=/usr/local/bin/containerd
Type=notify
Delegate=yes
KillMode=process
Restart=always
LimitNOFILE=infinity
TasksMax=infinity
OOMScoreAdjust=-999

[Install]
WantedBy=multi-user.target
EOF
		# The runner runs on the host as a service, as tink-agent.service.
		cat >"$root/etc/systemd/system/field-runner.service" <<'EOF'
[Unit]
Description=the field's action runner, as tink-agent runs
After=containerd.service network-online.target
Wants=containerd.service network-online.target
ConditionPathExists=/field/run

[Service]
Type=exec
ExecStartPre=/usr/local/bin/field-shipped
ExecStart=/field/run
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0

[Install]
WantedBy=multi-user.target
EOF
		cat >"$root/etc/systemd/network/20-dhcp.network" <<'EOF'
[Match]
Name=en* eth*

[Network]
DHCP=yes

[DHCPv4]
UseHostname=yes
EOF
		cp "$root/etc/modules-field" "$root/etc/modules-load.d/field.conf"
		chroot "$root" systemctl enable systemd-networkd.service systemd-resolved.service containerd.service field-runner.service >&2
		chroot "$root" systemctl mask serial-getty@ttyS0.service getty@tty1.service >&2
		;;
	hookos | hookos26)
		if [ "$os" = hookos ]; then
			# shellcheck disable=SC2086 # three directories
			set -- $(cat "$work/docker-paths")
			install -m 755 "$1/dockerd" "$1/docker-proxy" "$2/containerd" "$2/containerd-shim-runc-v2" \
				"$3/runc" "$root/usr/local/bin/"
		fi
		# trixie's docker.io (hookos26) puts dockerd, containerd and runc in
		# /usr/sbin and /usr/bin; busybox init runs no service of the
		# package's: /etc/init.d/engine starts dockerd as hook-docker does.
		rm -f "$root/etc/init.d/docker" "$root/etc/init.d/containerd"
		# Nor does it need containerd's client and its old shims: 48 MB
		# that every boot would unpack.
		rm -f "$root/usr/bin/ctr" "$root/usr/bin/containerd-shim" "$root/usr/bin/containerd-shim-runc-v1" "$root/usr/bin/containerd-stress"
		ln -sf /bin/busybox "$root/sbin/init"
		mkdir -p "$root/etc/docker" "$root/etc/init.d"
		# hook-docker's daemon.json: debug, and container output to the
		# syslog host (the provisioning server on HookOS; here a listener
		# in the machine, /etc/init.d/engine's, that prints what it gets).
		cat >"$root/etc/docker/daemon.json" <<EOF
{"debug": true, "log-driver": "syslog", "log-opts": {"syslog-address": "udp://$syslog_host:514"}, "insecure-registries": ["$registry"]}
EOF
		# LinuxKit's inittab: its shutdown signals, waits, kills, unmounts.
		cat >"$root/etc/inittab" <<'EOF'
::sysinit:/etc/init.d/rcS
::once:/etc/init.d/engine
::ctrlaltdel:/bin/busybox reboot
::shutdown:/etc/rc.shutdown
EOF
		cat >"$root/etc/init.d/rcS" <<'EOF'
#!/bin/busybox sh
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
hostname hookos
while read -r m; do /usr/sbin/modprobe "$m"; done </etc/modules-field
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
EOF
		# LinuxKit's shutdown (rc.init): signal every process, wait 5 s,
		# kill, sync, unmount. kill(-1) spares only its caller and PID 1,
		# so the shell signals from its own process (its builtin kill), as
		# rc.init does: an external kill would take the shell down with the
		# rest, and nothing after it would run. Its last line says that all
		# of it ran.
		cat >"$root/etc/rc.shutdown" <<'EOF'
#!/bin/busybox sh
kill -TERM -1
/bin/busybox sleep 5
kill -KILL -1
/bin/busybox sync
/bin/busybox umount -a -r 2>/dev/null
echo "FIELD-SHUTDOWN signalled, killed after 5 s, synced, unmounted" >/dev/console
EOF
		cat >"$root/etc/init.d/engine" <<'EOF'
#!/bin/busybox sh
# The engine's static builds are in /usr/local/bin, which busybox init's
# PATH lacks.
export PATH=/usr/local/sbin:/usr/local/bin:$PATH
# The syslog host: each datagram dockerd's syslog driver sends, one line
# on the console.
socat -u UDP-RECV:514 STDOUT | while IFS= read -r l; do echo "FIELD-SYSLOG $l"; done &
# LinuxKit's runtime mkdir for hook-docker, then the service.
mkdir -p /var/run/images /var/run/docker /var/run/worker
unshare -m --propagation private /etc/init.d/hook-docker >/var/log/dockerd.log 2>&1 &
# hook-docker's /var/run is the host's /var/run/docker.
export DOCKER_HOST=unix:///var/run/docker/docker.sock
[ -x /field/run ] && exec /field/run
EOF
		# LinuxKit's hook-docker service: dockerd in a mount namespace of
		# its own (pid and network the host's), with the service's binds, so
		# that bind sources in a create resolve there. The binds under
		# /var/run go before /var/run's own, which hides them.
		cat >"$root/etc/init.d/hook-docker" <<'EOF'
#!/bin/busybox sh
set -e
mkdir -p /host_root /worker /var/lib/docker
mount --rbind / /host_root
mount --bind /var/run/images /var/lib/docker
mount --bind /var/run/worker /worker
mount --bind /var/run/docker /var/run
exec dockerd
EOF
		chmod 755 "$root/etc/init.d/rcS" "$root/etc/rc.shutdown" "$root/etc/init.d/engine" "$root/etc/init.d/hook-docker"
		;;
	esac
	rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/usr/share/doc "$root"/usr/share/man "$root"/usr/share/locale
	# The engines' debug information and symbol tables, which nothing in
	# the machine reads: a third of their size, which every boot unpacks
	# and copies into its tmpfs.
	for f in "$root"/usr/local/bin/*; do
		[ "$(head -c 4 "$f")" != $'\x7fELF' ] || strip "$f"
	done
	if [ "$os" = captainos ]; then
		# /etc and /var marked up to date with /usr, as an image that
		# has booted once is: else systemd's first-boot chores
		# (ConditionNeedsUpdate: ldconfig, the journal's catalog) run on
		# every boot from RAM, 5 s under TCG.
		chroot "$root" /usr/lib/systemd/systemd-update-done
	fi
	exit 0
fi

for f in containerd containerd-shim-runc-v2 ctr; do
	if [ "$os" = captainos ] && [ ! -x "$containerd_dir/$f" ]; then
		say "no $containerd_dir/$f: run make containerd first"
		exit 1
	fi
done
if [ "$os" = captainos ] && [ ! -x "$runc_dir/runc" ]; then
	runc_dir=$("$(dirname "$self")/runc.sh")
fi
docker_paths=
if [ -n "${docker:-}" ]; then
	docker_paths=$("$(dirname "$self")/docker.sh" "$docker" paths)
fi
for tool in mmdebstrap zstd cpio; do
	command -v $tool >/dev/null || { say "no $tool: apt-get install -y qemu-system-x86 mmdebstrap busybox-static zstd cpio e2fsprogs docker-registry"; exit 1; }
done

key=$(
	{
		cat "$self"
		echo "$os $packages $modules"
		if [ "$os" = captainos ]; then
			sha256sum "$containerd_dir"/containerd "$containerd_dir"/containerd-shim-runc-v2 "$containerd_dir"/ctr "$runc_dir"/runc | cut -d' ' -f1
		fi
		if [ -n "$docker_paths" ]; then
			# shellcheck disable=SC2086
			set -- $docker_paths
			sha256sum "$1/dockerd" "$1/docker-proxy" "$2/containerd" "$2/containerd-shim-runc-v2" "$3/runc" | cut -d' ' -f1
		fi
	} | sha256sum | cut -c1-16
)
out=$cache/field/$os-$key
if [ -s "$out/root.cpio.zst" ] && [ -s "$out/vmlinuz" ] && [ -s "$out/nextboot.cpio" ]; then
	echo "$out"
	exit 0
fi

[ "$(id -u)" = 0 ] || { say "building the $os image needs root"; exit 1; }
start=$(date +%s)
work=$(mktemp -d "$cache/field/.build-$os.XXXXXX" 2>/dev/null || { mkdir -p "$cache/field" && mktemp -d "$cache/field/.build-$os.XXXXXX"; })
trap 'rm -rf "$work"' EXIT
echo "$docker_paths" >"$work/docker-paths"
say "building $os into $out (mmdebstrap trixie, once; it is cached there)"
mmdebstrap --variant=minbase --mode=root --aptopt='APT::Install-Recommends "false"' \
	--include="$(echo $packages | tr ' ' ,)" \
	--customize-hook="'$self' customize $os \"\$1\" '$work'" \
	trixie "$work/root" "$mirror" >&2
say "packing the root"
(cd "$work/root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) | zstd -q -T0 -3 >"$work/root.cpio.zst"
mkdir -p "$out"
mv "$work/vmlinuz" "$work/root.cpio.zst" "$work/nextboot.cpio" "$work/kernel-version" "$out/"
say "$os built in $(($(date +%s) - start)) s: $(du -sh "$out/root.cpio.zst" | cut -f1)"
echo "$out"
