#!/usr/bin/env bash
# Builds runc VERSION (default v1.4.0; with seccomp, linked statically)
# into /var/cache/waitdaemon/runc-VERSION if it is not there yet, and
# prints that directory on stdout (everything else goes to stderr).
# Docker 29 and the test containerd run on runc 1.4, Docker 28.2 on 1.2.6
# and 26.1 on 1.1.12, as their releases ship them (scripts/docker.sh):
# real actions are privileged, and each starts privileged containers on
# these machines (Docker 20.10 cannot, on any runc: a missing
# capability); Debian's runc 1.1.5 does not take Docker 29's specs (the
# time namespace). Static, it runs on a machine without libseccomp too (a
# HookOS-like VM).
set -euo pipefail

version=${1:-v1.4.0}
dir=${ENGINES_CACHE:-/var/cache/waitdaemon}/runc-$version
say() { echo "runc: $*" >&2; }

if [ ! -x "$dir/runc" ]; then
	[ "$(id -u)" = 0 ] || { say "building runc $version needs root"; exit 1; }
	if ! pkg-config --exists libseccomp 2>/dev/null || [ ! -e "$(pkg-config --variable=libdir libseccomp)/libseccomp.a" ]; then
		say "installing libseccomp-dev and pkg-config for runc's seccomp"
		began=$SECONDS
		apt-get -o DPkg::Lock::Timeout=300 update -qq
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq libseccomp-dev pkg-config >/dev/null
		say "installed in $((SECONDS - began)) s"
	fi
	say "building runc $version into $dir (once; it is cached there)"
	began=$SECONDS
	mkdir -p "$dir"
	PATH=/usr/local/go/bin:$PATH CGO_ENABLED=1 GOBIN=$dir GOFLAGS=-mod=mod go install \
		-tags 'seccomp netgo osusergo' -ldflags "-s -w -X main.version=${version#v} -extldflags -static" "github.com/opencontainers/runc@$version" >&2
	say "built in $((SECONDS - began)) s"
fi
echo "$dir"
