#!/usr/bin/env bash
# Starts Podman 4.3's Docker-compatible API service for `make bench` (the
# end-to-end tests start one of their own), installing Debian's podman if
# it is missing, and prints its socket's path on stdout:
#
#	sock=$(scripts/podman.sh)      # /run/waitdaemon-podman/podman.sock
#	scripts/podman.sh stop
#
# Its containers.conf has no default ulimits: with them no container
# starts on these machines ("error setting rlimit type 7"). A service that
# already answers is left alone.
set -euo pipefail

dir=/run/waitdaemon-podman
sock=$dir/podman.sock
conf=$dir/containers.conf

say() { echo "podman: $*" >&2; }
up() { curl -fsS --max-time 2 --unix-socket "$sock" http://podman/_ping >/dev/null 2>&1; }

if [ "${1:-}" = stop ]; then
	pid=$(cat "$dir/service.pid" 2>/dev/null || true)
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && say "stopped the service (pid $pid)"
	exit 0
fi
if up; then
	echo "$sock"
	exit 0
fi
if ! command -v podman >/dev/null; then
	say "installing Debian's podman"
	apt-get -o DPkg::Lock::Timeout=300 update -qq
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq podman >/dev/null
fi
mkdir -p "$dir"
printf '[containers]\ndefault_ulimits = []\n' >"$conf"
CONTAINERS_CONF=$conf setsid podman system service --time=0 "unix://$sock" >"$dir/service.log" 2>&1 </dev/null &
echo $! >"$dir/service.pid"
for _ in $(seq 100); do
	if up; then
		echo "$sock"
		exit 0
	fi
	sleep 0.2
done
say "the service did not answer on $sock within 20 s; its log:"
tail -20 "$dir/service.log" >&2
exit 1
