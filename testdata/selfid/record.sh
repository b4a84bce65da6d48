#!/usr/bin/env bash
# Re-records what a containerd action container sees of itself, for
# selfid's tests: /proc/self/cgroup and /proc/self/mountinfo read inside a
# container made as tink-agent makes one (../ocispec/recorder), but
# unprivileged, since a privileged container cannot be started on the
# development machines; and the Snapshots/Mounts answer for its snapshot,
# whose overlay upperdir the root mount must show. See README.md.
#
#   testdata/selfid/record.sh
#
# Needs root, a containerd at $SOCK (CONTAINERD.md's test setup), ctr,
# Docker (to build the image), Go and /bin/busybox.
set -euo pipefail
cd "$(dirname "$0")"

SOCK=${SOCK:-/run/containerd-test/containerd.sock}
CTR=${CTR:-/var/cache/waitdaemon/containerd-v2.2.1/ctr}
NS=tinkerbell
IMAGE=docker.io/library/waitdaemon-ocispec-shell:1
work=$(mktemp -d)
made=()

ctr() { "$CTR" -a "$SOCK" -n "$NS" "$@" 2> >(grep -v 'DEPRECATION' >&2); }

cleanup() {
	for c in "${made[@]}"; do
		ctr tasks rm -f "$c" >/dev/null 2>&1 || true
		ctr containers rm "$c" >/dev/null 2>&1 || true
	done
	ctr images rm "$IMAGE" >/dev/null 2>&1 || true
	docker rmi waitdaemon-ocispec-shell:1 >/dev/null 2>&1 || true
	rm -rf "$work" /tmp/tink-dns-selfid-*
}
trap cleanup EXIT

(cd ../ocispec/recorder && go build -o "$work/recorder" .)
cp /bin/busybox "$work/"
DOCKER_BUILDKIT=0 docker build -q -f ../ocispec/images/Dockerfile.shell -t waitdaemon-ocispec-shell:1 "$work" >/dev/null 2>&1
docker save waitdaemon-ocispec-shell:1 | ctr images import - >/dev/null

# record CASE RECORDER-FLAGS...: runs the container, which prints its
# cgroup and mountinfo, and saves them with its ID and snapshot mounts.
record() {
	local name=$1
	shift
	local id dns
	id=$(printf 'waitdaemon-selfid-%s' "$name" | sha256sum | cut -c1-64)
	dns=/tmp/tink-dns-selfid-$name
	mkdir -p "$dns" "$name"
	echo "nameserver 127.0.0.1" >"$dns/resolv.conf"
	echo "127.0.0.1 localhost" >"$dns/hosts"
	echo "${id:0:12}" >"$dns/hostname"
	ctr containers rm "$id" >/dev/null 2>&1 || true
	made+=("$id")
	"$work/recorder" -address "$SOCK" -namespace "$NS" -id "$id" -image "$IMAGE" \
		-dns-dir "$dns" -hostname captainos -privileged=false -run -mounts "$name/snapshot-mounts.json" \
		-cmd /bin/sh -arg -c -arg 'cat /proc/self/cgroup; echo =====; cat /proc/self/mountinfo' \
		"$@" >"$work/out"
	sed -n '1,/^=====$/p' "$work/out" | sed '$d' >"$name/cgroup"
	sed -n '/^=====$/,$p' "$work/out" | sed '1d' >"$name/mountinfo"
	echo "$id" >"$name/id"
	ctr snapshots rm "$(ctr containers info "$id" | sed -n 's/.*"SnapshotKey": "\(.*\)",/\1/p')" >/dev/null 2>&1 || true
	ctr containers rm "$id" >/dev/null
	echo "recorded $name/"
}

record pid-host-network-host -name probe-host -action-id 01JRECORDSELFIDHOST0000000 -pid host -network host
record private -name probe-private -action-id 01JRECORDSELFIDPRIVATE0000
