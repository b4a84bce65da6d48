#!/usr/bin/env bash
# Re-records the ocispec.Plan inputs in testdata/ocispec from a real
# containerd 2.2.1: action containers made the way tink-agent's containerd
# runtime makes them (recorder/, which calls the containerd client as the
# agent does), as containerd then stores them. The containers are only
# CREATED, never started (a privileged container cannot be started on the
# development machines), and removed again. See README.md.
#
#   testdata/ocispec/record.sh
#
# Needs root, a containerd at $SOCK (CONTAINERD.md's test setup), ctr,
# Docker (to build the images), the waitdaemon:dev image (make image), Go,
# jq and /bin/busybox.
set -euo pipefail
cd "$(dirname "$0")"

SOCK=${SOCK:-/run/containerd-test/containerd.sock}
CTR=${CTR:-/var/cache/waitdaemon/containerd-v2.2.1/ctr}
NS=tinkerbell
ACTION=docker.io/library/waitdaemon:dev
USER_IMAGES=(shell kexec nonroot)
work=$(mktemp -d)
made=()

ctr() { "$CTR" -a "$SOCK" -n "$NS" "$@" 2> >(grep -v 'DEPRECATION' >&2); }

cleanup() {
	for c in "${made[@]}"; do
		ctr containers rm "$c" >/dev/null 2>&1 || true
	done
	for i in "${USER_IMAGES[@]}"; do
		ctr images rm "docker.io/library/waitdaemon-ocispec-$i:1" >/dev/null 2>&1 || true
		docker rmi "waitdaemon-ocispec-$i:1" >/dev/null 2>&1 || true
	done
	rm -rf "$work" /tmp/tink-dns-ocispec-*
}
trap cleanup EXIT

(cd recorder && go build -o "$work/recorder" .)
cp /bin/busybox "$work/"
for i in "${USER_IMAGES[@]}"; do
	DOCKER_BUILDKIT=0 docker build -q -f "images/Dockerfile.$i" -t "waitdaemon-ocispec-$i:1" "$work" >/dev/null 2>&1
done
docker save waitdaemon:dev $(printf 'waitdaemon-ocispec-%s:1 ' "${USER_IMAGES[@]}") | ctr images import - >/dev/null

# config REF: the image's config blob, without its build history (the
# builder's timestamps and container IDs) and its layers' diff IDs (which
# change with every build, as the layers hold file times).
config() {
	"$work/recorder" -address "$SOCK" -namespace "$NS" -config-of -image "$1" |
		jq '{architecture, os, config: (.config | del(.Image))}'
}
config "$ACTION" >"$work/action-image.json"

# record CASE USER-IMAGE WITHHOLD-JSON NOTE RECORDER-FLAGS...: makes the
# action container, saves it with the image configs, removes it. The ID
# is fixed per case (a hash of its name), so re-recording changes nothing
# that did not change.
record() {
	local name=$1 user=docker.io/library/waitdaemon-ocispec-$2:1 withhold=$3 note=$4
	shift 4
	local id dns
	id=$(printf 'waitdaemon-ocispec-%s' "$name" | sha256sum | cut -c1-64)
	dns=/tmp/tink-dns-ocispec-$name
	mkdir -p "$dns"
	touch "$dns/resolv.conf" "$dns/hosts" "$dns/hostname"
	ctr containers rm "$id" >/dev/null 2>&1 || true
	made+=("$id")
	"$work/recorder" -address "$SOCK" -namespace "$NS" -id "$id" -image "$ACTION" \
		-dns-dir "$dns" -hostname captainos "$@" >"$work/container.json"
	config "$user" >"$work/user-image.json"
	jq -n --arg note "$note" --arg user "$user" --argjson withhold "$withhold" \
		--slurpfile c "$work/container.json" \
		--slurpfile i "$work/action-image.json" \
		--slurpfile u "$work/user-image.json" \
		'{note: $note, containerd: "2.2.1", namespace: "tinkerbell", userImageRef: $user, withhold: $withhold,
		  container: $c[0], image: $i[0], userImage: $u[0]}' >"$name.json"
	ctr containers rm "$id" >/dev/null
	ctr snapshots rm "$(jq -r .SnapshotKey "$work/container.json")" >/dev/null 2>&1 || true
	echo "recorded $name.json"
}

SOCKET_VOLUME=/run/containerd/containerd.sock:/run/containerd/containerd.sock

record reboot shell '[]' \
	"the reboot template on CaptainOS: command [reboot], IMAGE and WAIT_SECONDS, pid host, the containerd socket as a volume, the agent's default network (CNI: a private network namespace)" \
	-name reboot -action-id 01JRECORDREBOOT00000000000 -pid host \
	-env IMAGE=docker.io/library/waitdaemon-ocispec-shell:1 -env WAIT_SECONDS=10 \
	-volume "$SOCKET_VOLUME" -arg reboot

record kexec kexec '[]' \
	"CAPT's kexec template: no command, BLOCK_DEVICE, FS_TYPE, IMAGE, WAIT_SECONDS=5, pid host, the socket volume, CNI network; the user image has an ENTRYPOINT, a CMD, a WORKDIR and an Env that sets BLOCK_DEVICE too" \
	-name kexec -action-id 01JRECORDKEXEC000000000000 -pid host \
	-env BLOCK_DEVICE=/dev/sda1 -env FS_TYPE=ext4 \
	-env IMAGE=docker.io/library/waitdaemon-ocispec-kexec:1 -env WAIT_SECONDS=5 \
	-volume "$SOCKET_VOLUME"

record network-host shell '[]' \
	"namespaces.network host and pid host: no network namespace in the spec, and the host's name (captainos) as hostname" \
	-name reboot-host-network -action-id 01JRECORDHOSTNET0000000000 -pid host -network host \
	-env IMAGE=docker.io/library/waitdaemon-ocispec-shell:1 -env WAIT_SECONDS=10 \
	-volume "$SOCKET_VOLUME" -arg reboot

record cni-volumes nonroot '[]' \
	"the agent's defaults (private pid namespace, CNI network) with a read-only volume with an extra option and a read-write one; the user image has USER 1000:1000 and a CMD only" \
	-name id -action-id 01JRECORDCNIVOLUMES0000000 \
	-env IMAGE=docker.io/library/waitdaemon-ocispec-nonroot:1 \
	-volume /var/lib/tink/data:/data:ro,rslave -volume /var/log:/var/log -arg /bin/id -arg -u

record registry-config shell '["/root/.docker"]' \
	"the registry config bound in for waitdaemon's pull (withheld), DOCKER_CONFIG, the WAITDAEMON_ aliases with IMAGE and WAIT_SECONDS as the user's, WAITDAEMON_REGISTRY_USERNAME/PASSWORD, a PATH of the operator's, host network and pid" \
	-name reboot-private -action-id 01JRECORDREGISTRY000000000 -pid host -network host \
	-env WAITDAEMON_IMAGE=registry.example:5000/team/shell:1 -env IMAGE=user-value \
	-env WAITDAEMON_WAIT_SECONDS=3 -env WAIT_SECONDS=user-value \
	-env WAITDAEMON_REGISTRY_USERNAME=bob -env WAITDAEMON_REGISTRY_PASSWORD=secret \
	-env DOCKER_CONFIG=/root/.docker -env PATH=/custom/bin \
	-volume /etc/waitdaemon/registry:/root/.docker:ro -volume "$SOCKET_VOLUME" -arg reboot

record entrypoint shell '[]' \
	"an action with a cmd (file and NATS transports only): the image's ENTRYPOINT replaced, so the args do not start with waitdaemon's" \
	-name entrypoint -action-id 01JRECORDENTRYPOINT0000000 -pid host \
	-env IMAGE=docker.io/library/waitdaemon-ocispec-shell:1 \
	-cmd /bin/sh -arg -c -arg 'echo hi; reboot'
