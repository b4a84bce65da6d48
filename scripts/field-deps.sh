#!/usr/bin/env bash
# Makes sure the VM suite's tools are on this machine: QEMU, mmdebstrap
# and what builds the machines' images and the target disk, and Debian's
# registry server. Installs Debian's packages for whichever are missing;
# leaves them alone when all are there.
set -euo pipefail

need=(
	qemu-system-x86_64:qemu-system-x86
	mmdebstrap:mmdebstrap
	busybox:busybox-static
	zstd:zstd
	cpio:cpio
	mkfs.ext4:e2fsprogs
	debugfs:e2fsprogs
	docker-registry:docker-registry
)
missing=()
for n in "${need[@]}"; do
	command -v "${n%%:*}" >/dev/null || missing+=("${n#*:}")
done
if [ ${#missing[@]} = 0 ]; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "field: missing ${missing[*]}; installing them needs root (sudo make field)" >&2
	exit 1
fi
echo "field: installing Debian's ${missing[*]}" >&2
began=$SECONDS
apt-get -o DPkg::Lock::Timeout=300 update -qq
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "field: installed in $((SECONDS - began)) s" >&2
