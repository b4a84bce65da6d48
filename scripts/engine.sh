#!/usr/bin/env bash
# Makes sure a Docker engine answers on /var/run/docker.sock: leaves one
# that already answers alone, else installs Debian's docker.io if dockerd
# is missing, starts it in the background, and waits for it.
set -euo pipefail

up() { docker version --format '{{.Server.APIVersion}}' >/dev/null 2>&1; }

if up; then
	echo "engine: $(docker version --format 'Docker {{.Server.Version}}, API {{.Server.APIVersion}}') already running"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "engine: no Docker engine answers on /var/run/docker.sock, and starting one needs root (sudo make engine)" >&2
	exit 1
fi
if ! command -v dockerd >/dev/null; then
	echo "engine: installing Debian's docker.io"
	began=$SECONDS
	apt-get -o DPkg::Lock::Timeout=300 update -qq
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq docker.io >/dev/null
	echo "engine: docker.io installed in $((SECONDS - began)) s"
fi
if ! command -v docker >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq docker-cli >/dev/null || true
fi
log=${DOCKERD_LOG:-/var/log/waitdaemon-dockerd.log}
echo "engine: starting dockerd (log: $log)"
began=$SECONDS
setsid dockerd >"$log" 2>&1 </dev/null &
for _ in $(seq 120); do
	if up; then
		echo "engine: $(docker version --format 'Docker {{.Server.Version}}, API {{.Server.APIVersion}}') is up, in $((SECONDS - began)) s"
		exit 0
	fi
	sleep 0.5
done
echo "engine: dockerd did not answer within 60 s; its log:" >&2
tail -20 "$log" >&2
exit 1
