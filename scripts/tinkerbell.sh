#!/usr/bin/env bash
# Builds Tinkerbell's released agent, and the release's own server side,
# for each release the end-to-end comparison and the VM suite run:
# tink-agent v0.23.0, v0.24.0 and v0.25.0 (main after v0.25.0 is not
# served by the module proxy; it differs from v0.25.0 only in the
# containerd runtime's certs.d pull).
#
#   scripts/tinkerbell.sh            builds what is missing, prints each
#                                    release's directory on stdout
#   scripts/tinkerbell.sh v0.25.0    one release
#
# Each release goes into $ENGINES_CACHE/tinkerbell-VERSION/ (default
# /var/cache/waitdaemon):
#   src/          the module's zip from the Go module proxy, with the
#                 nested api module at api/ (the main module's go.mod
#                 replaces github.com/tinkerbell/tinkerbell/api with
#                 ./api, and its zip has no such folder), and
#                 quamina.net/go/quamina replaced by
#                 github.com/timbray/quamina v1.5.1 (the pinned
#                 pseudo-version is refused by the proxy)
#   tink-agent    `go build ./cmd/agent`, static (CGO_ENABLED=0): the VM
#                 suite runs it on its machines
#   tink-server   tools/tinkerbell's harness, copied into src/ and built
#                 there, so that it uses the release's internal packages:
#                 the controller's template parse and hand-off
#                 (tink/controller/internal/workflow) and the gRPC
#                 handler (tink/server/internal/grpc) on an in-memory
#                 backend, without Kubernetes
#
# With EMBEDDED=1, v0.25.0's directory also gets
#   tinkerbell-embedded  `go build -tags embedded ./cmd/tinkerbell`: the
#                 whole control plane in one process (etcd,
#                 kube-apiserver, the controllers, tink-server), which the
#                 VM suite's control-plane rows run: 150 MB, 7-18 minutes
#                 and 3 GB of memory to link
#
# Nothing of Tinkerbell's source enters the repository: it stays in the
# cache. The agent is built once (3-5 CPU minutes a release from a cold
# Go cache); the harness again whenever tools/tinkerbell changes (its
# sources' sum is kept beside it). Each build prints a line when it starts
# and its time when it ends, on stderr.
set -euo pipefail

cd "$(dirname "$0")/.."
cache=${ENGINES_CACHE:-/var/cache/waitdaemon}
releases=("$@")
[ ${#releases[@]} -gt 0 ] || releases=(v0.23.0 v0.24.0 v0.25.0)
harness=tools/tinkerbell
export PATH=/usr/local/go/bin:$PATH

say() { echo "tinkerbell: $*" >&2; }

# The harness's files, and where each goes in the release's module: an
# export of the workflow package's unexported render (same package),
# a bridge that the server side may import (under tink/controller, the
# only tree that may import its internal packages), and the command
# (under tink/server, for the gRPC handler's).
harness_files=(
	"workflow_export.go:tink/controller/internal/workflow/waitdaemon_export.go"
	"bridge.go:tink/controller/waitdaemon/bridge.go"
	"main.go:tink/server/waitdaemon/main.go"
)

harness_sum() {
	local f
	for f in "${harness_files[@]}"; do
		sha256sum "$harness/${f%%:*}"
	done | sha256sum | cut -d' ' -f1
}

# source_tree makes dir/src from the module proxy, unless it is there.
source_tree() {
	local version=$1 dir=$2 main api
	[ -f "$dir/src/.complete" ] && return
	rm -rf "$dir/src"
	main=$(go mod download -json "github.com/tinkerbell/tinkerbell@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	api=$(go mod download -json "github.com/tinkerbell/tinkerbell/api@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	if [ -z "$main" ] || [ -z "$api" ]; then
		say "the module proxy did not give github.com/tinkerbell/tinkerbell@$version and its api module"
		exit 1
	fi
	mkdir -p "$dir"
	cp -r "$main" "$dir/src"
	chmod -R u+w "$dir/src"
	rm -rf "$dir/src/api"
	cp -r "$api" "$dir/src/api"
	chmod -R u+w "$dir/src/api"
	touch "$dir/src/.complete"
}

build() {
	local version=$1 dir=$cache/tinkerbell-$1 began sum
	source_tree "$version" "$dir"
	if [ ! -x "$dir/tink-agent" ]; then
		say "building tink-agent $version into $dir (3-5 CPU minutes from a cold Go cache)"
		began=$SECONDS
		(cd "$dir/src" && CGO_ENABLED=0 GOFLAGS=-mod=mod nice go build -trimpath -ldflags "-s -w" -o "$dir/tink-agent.new" ./cmd/agent)
		mv "$dir/tink-agent.new" "$dir/tink-agent"
		say "tink-agent $version built in $((SECONDS - began)) s"
	fi
	sum=$(harness_sum)
	if [ ! -x "$dir/tink-server" ] || [ "$(cat "$dir/tink-server.sum" 2>/dev/null)" != "$sum" ]; then
		say "building $version's server side (tools/tinkerbell in its module) into $dir"
		began=$SECONDS
		# The controller's workflow package imports quamina at a
		# pseudo-version the module proxy refuses; timbray/quamina v1.5.1
		# declares the same module path and API.
		(cd "$dir/src" && go mod edit -replace quamina.net/go/quamina=github.com/timbray/quamina@v1.5.1)
		local f
		for f in "${harness_files[@]}"; do
			mkdir -p "$(dirname "$dir/src/${f#*:}")"
			cp "$harness/${f%%:*}" "$dir/src/${f#*:}"
		done
		(cd "$dir/src" && CGO_ENABLED=0 GOFLAGS=-mod=mod nice go build -trimpath -ldflags "-s -w" -o "$dir/tink-server.new" ./tink/server/waitdaemon)
		mv "$dir/tink-server.new" "$dir/tink-server"
		echo "$sum" >"$dir/tink-server.sum"
		say "$version's server side built in $((SECONDS - began)) s"
	fi
	if [ "${EMBEDDED:-}" = 1 ] && [ "$version" = v0.25.0 ] && [ ! -x "$dir/tinkerbell-embedded" ]; then
		say "building $version's whole control plane (cmd/tinkerbell -tags embedded) into $dir (7-18 minutes, 3 GB of memory to link)"
		began=$SECONDS
		(cd "$dir/src" && go mod edit -replace quamina.net/go/quamina=github.com/timbray/quamina@v1.5.1)
		(cd "$dir/src" && CGO_ENABLED=0 GOFLAGS=-mod=mod nice go build -tags embedded -trimpath -ldflags "-s -w" -o "$dir/tinkerbell-embedded.new" ./cmd/tinkerbell)
		mv "$dir/tinkerbell-embedded.new" "$dir/tinkerbell-embedded"
		say "$version's whole control plane built in $((SECONDS - began)) s"
	fi
	echo "$dir"
}

mkdir -p "$cache"
# One build at a time, whoever asks: the module copies are shared.
exec 9>"$cache/tinkerbell.lock"
flock 9
for v in "${releases[@]}"; do
	case $v in
	v0.23.0 | v0.24.0 | v0.25.0) build "$v" ;;
	*)
		say "no release $v: want v0.23.0, v0.24.0 or v0.25.0"
		exit 2
		;;
	esac
done
