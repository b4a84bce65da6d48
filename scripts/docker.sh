#!/usr/bin/env bash
# Starts a real Docker engine of another version beside Debian's Docker
# 20.10, and prints its socket's path on stdout (everything else goes to
# stderr). Three versions, each the engine of a HookOS or the next one:
#
#	29  dockerd 29.8.1-dev (moby v2.0.0-beta.24, API 1.56), containerd
#	    2.2.1, runc 1.4; the containerd image store
#	28  dockerd 28.2.2 (API 1.50), HookOS v0.11's, with the containerd
#	    1.7.27 and runc 1.2.6 it ships with; the graph driver's store
#	26  dockerd 26.1.4 (API 1.45), HookOS v0.9-v0.10's 26.1 line, on
#	    containerd 1.7.27 and the runc 1.1.12 it ships with
#
#	sock=$(scripts/docker.sh 28)         # /run/docker28/docker.sock
#	DOCKER_HOST=unix://$sock docker version
#	scripts/docker.sh 28 stop
#	scripts/docker.sh 28 paths           # builds; prints the binaries' dirs
#
# An engine that already answers on the socket is left alone. The first
# run builds dockerd and docker-proxy (static, CGO_ENABLED=0), runc (with
# seccomp, static) and, when the cache lacks it, containerd into
# /var/cache/waitdaemon/ (several minutes); later runs start in a few
# seconds. Docker 29 is built with go install from the module proxy;
# 28 and 26 from github.com/docker/docker's module zip, whose vendor.mod
# and vendor.sum become the go.mod and go.sum that pin its dependencies.
#
# Each version shares nothing with 20.10 nor with the others: its own
# data root, exec root, pid file and socket (runc's state lies under the
# exec root too), its own managed containerd (under the exec root; never
# /run/containerd/containerd.sock), and its own bridge, dockerNN on
# 10.2NN.0.1/24, with no firewall rules (--iptables=false): containers on
# the default network get an address on the bridge and reach the host, but
# nothing beyond it. Networks created on it avoid the others': Docker
# skips subnets the host already routes. (Do not give it
# --default-address-pool: with one, a restart deletes the host's docker0,
# 20.10's bridge.)
#
# Pairing: 28.2.2 runs on what its release ships (containerd 1.7.27, runc
# 1.2.6), and 26.1.4 on its runc 1.1.12, but on 28's containerd 1.7.27
# rather than its 1.7.18: the same 1.7 line, the same API and shim
# (HookOS v0.9's 26.1.0 shipped 1.7.15, so no one patch release is
# HookOS's), one build fewer. Both start privileged containers here, as
# every real action is; only Docker 20.10's cannot ("unable to apply
# caps", on any runc).
#
# Its daemon.json lists the end-to-end tests' registry by name in
# insecure-registries, as HookOS declares a plain-HTTP registry. An engine
# that already answers but lacks that setting (started by an older copy
# of this script) is restarted with it.
set -euo pipefail

engine=${1:-}
action=${2:-start}
cache=${ENGINES_CACHE:-/var/cache/waitdaemon}

case $engine in
29)
	# What it reports: moby's releases/versions.yaml says the last
	# release is 29.8.0 and the next 29.8.1, so it is 29.8.1 in the making.
	source=moby
	moby_version=v2.0.0-beta.24
	docker_version=29.8.1-dev
	containerd_version=v2.2.1
	runc_version=v1.4.0
	;;
28)
	source=docker
	docker_version=28.2.2
	containerd_version=v1.7.27
	runc_version=v1.2.6
	;;
26)
	source=docker
	docker_version=26.1.4
	containerd_version=v1.7.27
	runc_version=v1.1.12
	;;
*)
	echo "usage: $0 29|28|26 [start|stop|paths]" >&2
	exit 2
	;;
esac
bin_dockerd=$cache/docker-${moby_version:-$docker_version}
bin_containerd=$cache/containerd-$containerd_version

name=docker$engine
run=/run/$name
sock=$run/docker.sock
data_root=/var/lib/$name
bridge=$name
bridge_addr=10.2$engine.0.1/24
log=/var/log/waitdaemon-$name.log
# The tests' plain-HTTP registry by name (e2e/namedregistry_test.go).
insecure_registry=registry.waitdaemon.test:5017

say() { echo "$name: $*" >&2; }
die() { say "$*"; exit 1; }

up() { curl -fsS --max-time 5 --unix-socket "$sock" http://docker/_ping >/dev/null 2>&1; }

# configured: the running engine has the insecure registry of daemon.json.
configured() {
	curl -fsS --max-time 5 --unix-socket "$sock" http://docker/info |
		python3 -c 'import json,sys; c=json.load(sys.stdin)["RegistryConfig"]["IndexConfigs"].get(sys.argv[1]); sys.exit(0 if c and not c["Secure"] else 1)' "$insecure_registry"
}

# pid prints the pid of the dockerd that owns the pid file, if it runs.
pid() {
	local p
	p=$(cat "$run/docker.pid" 2>/dev/null || true)
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null && echo "$p"
}

# ready PID: waits up to 60 s for dockerd PID to answer, then prints the
# socket's path; fails with its log when it dies or stays silent.
ready() {
	local p=$1 began=$SECONDS
	for _ in $(seq 240); do
		if up; then
			local v
			v=$(curl -fsS --unix-socket "$sock" http://docker/version |
				python3 -c 'import json,sys; v=json.load(sys.stdin); print("Docker %s, API %s (minimum %s)" % (v["Version"], v["ApiVersion"], v["MinAPIVersion"]))')
			say "$v is up on unix://$sock"
			echo "$sock"
			return
		fi
		kill -0 "$p" 2>/dev/null || break
		sleep 0.25
	done
	say "dockerd did not answer within $((SECONDS - began)) s; its log ($log):"
	tail -20 "$log" >&2
	exit 1
}

stop() {
	local p
	p=$(pid || true)
	if [ -n "$p" ]; then
		say "stopping dockerd (pid $p)"
		kill -TERM "$p"
		for _ in $(seq 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
		kill -0 "$p" 2>/dev/null && die "dockerd (pid $p) did not stop within 30 s; its log: $log"
	else
		say "not running"
	fi
	if ip link show "$bridge" >/dev/null 2>&1; then
		ip link delete "$bridge"
	fi
}

needgo() { command -v go >/dev/null || die "building $1 needs Go on the PATH (/usr/local/go/bin)"; }

# build NAME DIR GO-INSTALL-ARGS...: go install into DIR unless NAME is there.
build() {
	local name=$1 dir=$2
	shift 2
	[ -x "$dir/$name" ] && return 0
	needgo "$name"
	say "building $name into $dir (once; it is cached there)"
	built=1
	mkdir -p "$dir"
	GOBIN=$dir GOFLAGS=-mod=mod go install "$@" >&2
}

# build_zip MODULE@VERSION DIR FLAGS -- PACKAGE...: builds each package
# of the module's zip from the module proxy into DIR, in a copy of its
# source where vendor.mod and vendor.sum, if it has them, are go.mod and
# go.sum (github.com/docker/docker's). It is how a module that go install
# refuses is built: containerd 1.7's go.mod has exclude directives.
build_zip() {
	local mod=$1 dir=$2 src tmp
	shift 2
	local flags=()
	while [ "$1" != -- ]; do flags+=("$1"); shift; done
	shift
	needgo "$mod"
	say "building $* of $mod into $dir (once; it is cached there)"
	built=1
	src=$(cd / && GOFLAGS=-mod=mod go mod download -json "$mod" |
		python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d["Error"]) if d.get("Error") else print(d["Dir"])')
	tmp=$(mktemp -d)
	cp -r "$src/." "$tmp"
	chmod -R u+w "$tmp"
	if [ -e "$tmp/vendor.mod" ]; then
		rm -rf "$tmp/vendor"
		cp "$tmp/vendor.mod" "$tmp/go.mod"
		cp "$tmp/vendor.sum" "$tmp/go.sum"
	fi
	mkdir -p "$dir"
	# One go build for them all: each package compiled once, the links
	# side by side.
	local rc=0
	(cd "$tmp" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$dir/" "${flags[@]}" "$@") >&2 || rc=1
	rm -rf "$tmp"
	[ $rc = 0 ] || die "building $mod failed"
}

# build_all builds dockerd, docker-proxy, containerd and its shim, and
# runc into the cache unless they are there, and sets bin_runc.
build_all() {
	export PATH=/usr/local/go/bin:$PATH
	local began=$SECONDS
	# One build at a time: Docker 28.2 and 26.1 share containerd and runc.
	exec 8>"$cache/build.lock"
	flock 8
	if [ "$source" = moby ]; then
		CGO_ENABLED=0 build dockerd "$bin_dockerd" \
			-tags 'exclude_graphdriver_btrfs exclude_graphdriver_devicemapper exclude_graphdriver_zfs no_btrfs' \
			-ldflags "-s -w -X github.com/moby/moby/v2/dockerversion.Version=$docker_version -X github.com/moby/moby/v2/dockerversion.GitCommit=$moby_version" \
			"github.com/moby/moby/v2/cmd/dockerd@$moby_version"
		# Docker 29 starts docker-proxy with flags 20.10's does not know.
		CGO_ENABLED=0 build docker-proxy "$bin_dockerd" -ldflags "-s -w" "github.com/moby/moby/v2/cmd/docker-proxy@$moby_version"
	elif [ ! -x "$bin_dockerd/dockerd" ] || [ ! -x "$bin_dockerd/docker-proxy" ]; then
		build_zip "github.com/docker/docker@v$docker_version+incompatible" "$bin_dockerd" \
			-tags 'exclude_graphdriver_btrfs exclude_graphdriver_devicemapper exclude_graphdriver_zfs no_btrfs' \
			-ldflags "-s -w -X github.com/docker/docker/dockerversion.Version=$docker_version -X github.com/docker/docker/dockerversion.GitCommit=v$docker_version" \
			-- ./cmd/dockerd ./cmd/docker-proxy
	fi
	# The engine's own runc: Debian's 1.1.5 does not take Docker 29's
	# specs (the time namespace).
	bin_runc=$("$(dirname "$0")/runc.sh" "$runc_version")
	if [ ! -x "$bin_containerd/containerd" ] || [ ! -x "$bin_containerd/containerd-shim-runc-v2" ]; then
		rm -f "$bin_containerd/containerd"
		case $containerd_version in
		v1.*)
			build_zip "github.com/containerd/containerd@$containerd_version" "$bin_containerd" \
				-tags no_btrfs,no_devmapper,no_zfs,no_aufs \
				-ldflags "-s -w -X github.com/containerd/containerd/version.Version=$containerd_version" \
				-- ./cmd/containerd ./cmd/containerd-shim-runc-v2 ./cmd/ctr
			;;
		*)
			CGO_ENABLED=0 build containerd "$bin_containerd" -tags no_btrfs,no_devmapper,no_zfs,no_aufs -ldflags "-s -w" \
				"github.com/containerd/containerd/v2/cmd/containerd@$containerd_version" \
				"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$containerd_version" \
				"github.com/containerd/containerd/v2/cmd/ctr@$containerd_version"
			;;
		esac
	fi
	exec 8>&-
	if [ -n "${built:-}" ]; then say "built in $((SECONDS - began)) s"; fi
}

# paths builds what the engine needs, unless cached, and prints the three
# directories that hold it: dockerd's, containerd's and runc's (the field's
# HookOS machine copies them in).
paths() {
	mkdir -p "$cache"
	build_all
	echo "$bin_dockerd $bin_containerd $bin_runc"
}

start() {
	[ "$(id -u)" = 0 ] || die "starting Docker $engine needs root"
	mkdir -p "$cache" "$run"
	# One start at a time: a second caller waits, then finds it up.
	exec 9>"$cache/$name.lock"
	flock 9
	if up; then
		if configured; then
			say "already running on unix://$sock"
			echo "$sock"
			return
		fi
		say "the running engine lacks insecure-registries $insecure_registry: restarting it with its new daemon.json"
		stop
	fi
	local p
	if p=$(pid); then
		say "dockerd (pid $p) runs but has not answered yet: waiting for it"
		ready "$p"
		return
	fi
	local began=$SECONDS
	build_all

	# dockerd needs a bridge of another name than docker0 to exist.
	if ! ip link show "$bridge" >/dev/null 2>&1; then
		ip link add "$bridge" type bridge
		ip addr add "$bridge_addr" dev "$bridge"
	fi
	ip link set "$bridge" up

	cat >"$run/daemon.json" <<-JSON
	{"insecure-registries": ["$insecure_registry"]}
	JSON
	local args=(
		--config-file "$run/daemon.json"
		--host "unix://$sock"
		--pidfile "$run/docker.pid"
		--exec-root "$run/exec"
		--data-root "$data_root"
		--bridge "$bridge"
		--iptables=false --ip6tables=false
	)
	# The cached binaries come first: dockerd finds containerd, the shim,
	# runc and docker-proxy on its PATH.
	local path=$bin_dockerd:$bin_runc:$bin_containerd:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	local cmd="exec dockerd $(printf '%q ' "${args[@]}")"
	if [ -e /run/containerd/containerd.sock ]; then
		# dockerd adopts a containerd whose socket is at the default path
		# when it starts. Hide that path from it, in a mount namespace of
		# its own that still sees the host's mounts.
		say "/run/containerd/containerd.sock exists: hiding it from Docker $engine"
		cmd="mount -t tmpfs -o mode=0711 tmpfs /run/containerd && $cmd"
		cmd="unshare --mount --propagation slave sh -c $(printf '%q' "$cmd")"
	fi
	say "starting dockerd (log: $log)"
	PATH=$path setsid sh -c "$cmd" >>"$log" 2>&1 </dev/null 9>&- &
	ready $!
	say "started in $((SECONDS - began)) s"
}

case $action in
start) start ;;
stop) stop ;;
paths) paths ;;
*) die "usage: $0 29|28|26 [start|stop|paths]" ;;
esac
