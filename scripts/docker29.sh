#!/usr/bin/env bash
# Starts a real Docker 29 engine (dockerd from moby v2.0.0-beta.24, API
# 1.56) beside Debian's Docker 20.10, and prints its socket's path on
# stdout (everything else goes to stderr):
#
#	sock=$(scripts/docker29.sh)          # /run/docker29/docker.sock
#	DOCKER_HOST=unix://$sock docker version
#	scripts/docker29.sh stop
#
# An engine that already answers on the socket is left alone. The first
# run builds dockerd, docker-proxy, runc 1.4 (with seccomp) and, when the
# cache lacks it, containerd 2.2.1 into /var/cache/waitdaemon/ (about 10
# minutes); later runs start in a few seconds.
#
# It shares nothing with 20.10: its own data root, exec root, pid file and
# socket (runc's state lies under the exec root too), its own managed
# containerd (2.2.1, under the exec root; never
# /run/containerd/containerd.sock), and its own bridge, docker29 on
# 10.229.0.1/24, with no firewall rules (--iptables=false): containers on
# the default network get an address on the bridge and reach the host, but
# nothing beyond it. Networks created on it avoid 20.10's: Docker 29
# skips subnets the host already routes. (Do not give it
# --default-address-pool: with one, a restart deletes the host's docker0,
# 20.10's bridge.)
#
# Its daemon.json lists the end-to-end tests' registry by name in
# insecure-registries, as HookOS declares a plain-HTTP registry. An engine
# that already answers but lacks that setting (started by an older copy
# of this script) is restarted with it.
set -euo pipefail

cache=${WAITDAEMON_CACHE:-/var/cache/waitdaemon}
moby_version=v2.0.0-beta.24
# What it reports: its releases/versions.yaml says the last release is
# 29.8.0 and the next 29.8.1, so it is 29.8.1 in the making.
docker_version=29.8.1-dev
containerd_version=v2.2.1
bin_dockerd=$cache/docker-$moby_version
bin_containerd=$cache/containerd-$containerd_version

run=/run/docker29
sock=$run/docker.sock
data_root=/var/lib/docker29
bridge=docker29
bridge_addr=10.229.0.1/24
log=/var/log/waitdaemon-docker29.log
# The tests' plain-HTTP registry by name (e2e/namedregistry_test.go).
insecure_registry=registry.waitdaemon.test:5017

say() { echo "docker29: $*" >&2; }
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

# build NAME DIR GO-INSTALL-ARGS...: go install into DIR unless NAME is there.
build() {
	local name=$1 dir=$2
	shift 2
	[ -x "$dir/$name" ] && return 0
	command -v go >/dev/null || die "building $name needs Go on the PATH (/usr/local/go/bin)"
	say "building $name into $dir (once; it is cached there)"
	built=1
	mkdir -p "$dir"
	GOBIN=$dir GOFLAGS=-mod=mod go install "$@" >&2
}

start() {
	[ "$(id -u)" = 0 ] || die "starting Docker 29 needs root"
	mkdir -p "$cache" "$run"
	# One start at a time: a second caller waits, then finds it up.
	exec 9>"$cache/docker29.lock"
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
	export PATH=/usr/local/go/bin:$PATH
	local began=$SECONDS
	CGO_ENABLED=0 build dockerd "$bin_dockerd" \
		-tags 'exclude_graphdriver_btrfs exclude_graphdriver_devicemapper exclude_graphdriver_zfs no_btrfs' \
		-ldflags "-X github.com/moby/moby/v2/dockerversion.Version=$docker_version -X github.com/moby/moby/v2/dockerversion.GitCommit=$moby_version" \
		"github.com/moby/moby/v2/cmd/dockerd@$moby_version"
	# Docker 29 starts docker-proxy with flags 20.10's does not know.
	CGO_ENABLED=0 build docker-proxy "$bin_dockerd" "github.com/moby/moby/v2/cmd/docker-proxy@$moby_version"
	# Debian's runc 1.1.5 refuses Docker 29's specs (the time namespace).
	bin_runc=$("$(dirname "$0")/runc.sh")
	if [ ! -x "$bin_containerd/containerd" ] || [ ! -x "$bin_containerd/containerd-shim-runc-v2" ]; then
		rm -f "$bin_containerd/containerd"
		CGO_ENABLED=0 build containerd "$bin_containerd" -tags no_btrfs,no_devmapper,no_zfs,no_aufs \
			"github.com/containerd/containerd/v2/cmd/containerd@$containerd_version" \
			"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$containerd_version" \
			"github.com/containerd/containerd/v2/cmd/ctr@$containerd_version"
	fi
	if [ -n "${built:-}" ]; then say "built in $((SECONDS - began)) s"; fi

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
		say "/run/containerd/containerd.sock exists: hiding it from Docker 29"
		cmd="mount -t tmpfs -o mode=0711 tmpfs /run/containerd && $cmd"
		cmd="unshare --mount --propagation slave sh -c $(printf '%q' "$cmd")"
	fi
	say "starting dockerd (log: $log)"
	PATH=$path setsid sh -c "$cmd" >>"$log" 2>&1 </dev/null 9>&- &
	ready $!
	say "started in $((SECONDS - began)) s"
}

case ${1:-start} in
start) start ;;
stop) stop ;;
*) die "usage: $0 [start|stop]" ;;
esac
