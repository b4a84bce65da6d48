#!/usr/bin/env bash
# Builds runc 1.4 (with seccomp) into /var/cache/waitdaemon/runc-v1.4.0
# if it is not there yet, and prints that directory on stdout (everything
# else goes to stderr). Docker 29 and the test containerd run on it: real
# actions are privileged, and runc 1.4 starts privileged containers on
# these machines, where Debian's runc 1.1.5 cannot (a missing
# capability), nor does it take Docker 29's specs (the time namespace).
set -euo pipefail

version=v1.4.0
dir=${WAITDAEMON_CACHE:-/var/cache/waitdaemon}/runc-$version
say() { echo "runc: $*" >&2; }

if [ ! -x "$dir/runc" ]; then
	[ "$(id -u)" = 0 ] || { say "building runc $version needs root"; exit 1; }
	if ! pkg-config --exists libseccomp 2>/dev/null; then
		say "installing libseccomp-dev and pkg-config for runc's seccomp"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libseccomp-dev pkg-config >/dev/null
	fi
	say "building runc $version into $dir (once; it is cached there)"
	mkdir -p "$dir"
	PATH=/usr/local/go/bin:$PATH CGO_ENABLED=1 GOBIN=$dir GOFLAGS=-mod=mod go install -tags seccomp "github.com/opencontainers/runc@$version" >&2
fi
echo "$dir"
