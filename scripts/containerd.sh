#!/usr/bin/env bash
# Makes sure a test containerd 2.2.1 answers on
# /run/containerd-test/containerd.sock, for recording the containerd
# fixtures and for the end-to-end tests: builds containerd, its runc shim
# and ctr into a cache outside the clone if they are missing (about four
# minutes, once), and runc 1.4 (scripts/runc.sh), and starts the daemon
# on that runc with its own root and state, leaving one that already
# answers on it alone.
#
# It stays off /run/containerd/containerd.sock: Debian's dockerd adopts a
# containerd it finds there, and breaks once that one stops.
#
#   scripts/containerd.sh         start (or find) it
#   scripts/containerd.sh stop    stop it (its tasks first)
set -euo pipefail

VERSION=v2.2.1
DIR=${CONTAINERD_DIR:-${ENGINES_CACHE:-/var/cache/waitdaemon}/containerd-$VERSION}
ROOT=/var/lib/containerd-test
STATE=/run/containerd-test
SOCK=$STATE/containerd.sock
LOG=${CONTAINERD_LOG:-/var/log/waitdaemon-containerd.log}
CTR=("$DIR/ctr" -a "$SOCK")

up() { [ -S "$SOCK" ] && "${CTR[@]}" version >/dev/null 2>&1; }

# daemon_pid is the PID of the daemon serving $SOCK: the one this script
# started, else whichever listens there.
daemon_pid() {
	if [ -f "$STATE/containerd.pid" ] && kill -0 "$(cat "$STATE/containerd.pid")" 2>/dev/null; then
		cat "$STATE/containerd.pid"
		return
	fi
	ss -xlpn | awk -v s="$SOCK" '$5==s {if (match($0,/pid=[0-9]+/)) print substr($0,RSTART+4,RLENGTH-4); exit}'
}

stop() {
	pid=$(daemon_pid)
	if [ -n "$pid" ]; then
		if up; then
			for ns in $("${CTR[@]}" namespaces list -q); do
				for t in $("${CTR[@]}" -n "$ns" tasks list -q); do
					"${CTR[@]}" -n "$ns" tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
					"${CTR[@]}" -n "$ns" tasks delete -f "$t" >/dev/null 2>&1 || true
				done
			done
		fi
		kill "$pid"
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		echo "containerd: stopped"
	else
		echo "containerd: not running"
	fi
	rm -f "$STATE/containerd.pid"
}

if [ "${1:-start}" = stop ]; then
	stop
	exit 0
fi
[ "${1:-start}" = start ] || { echo "usage: $0 [start|stop]" >&2; exit 2; }

if [ "$(id -u)" != 0 ]; then
	echo "containerd: starting the test containerd needs root (sudo make containerd)" >&2
	exit 1
fi
if [ ! -x "$DIR/containerd" ] || [ ! -x "$DIR/containerd-shim-runc-v2" ] || [ ! -x "$DIR/ctr" ]; then
	echo "containerd: building containerd $VERSION into $DIR (about 2 min, once)"
	began=$SECONDS
	mkdir -p "$DIR"
	CGO_ENABLED=0 GOBIN=$DIR GOFLAGS=-mod=mod go install -tags no_btrfs,no_devmapper,no_zfs,no_aufs -ldflags "-s -w" \
		github.com/containerd/containerd/v2/cmd/containerd@$VERSION \
		github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$VERSION \
		github.com/containerd/containerd/v2/cmd/ctr@$VERSION
	echo "containerd: built in $((SECONDS - began)) s"
fi
# runc 1.4, as CaptainOS has: tink-agent's actions are privileged, and
# Debian's runc 1.1.5 cannot start a privileged container here. The shim
# finds runc on the daemon's PATH.
RUNC_DIR=$("$(dirname "$0")/runc.sh")
if up; then
	pid=$(daemon_pid)
	if [ -n "$pid" ] && tr '\0' '\n' <"/proc/$pid/environ" | grep -q "^PATH=$RUNC_DIR:"; then
		echo "containerd: $("${CTR[@]}" version 2>/dev/null | awk '/Server:/{s=1} s&&/Version:/{print $2; exit}') already answers on $SOCK"
		exit 0
	fi
	echo "containerd: the one on $SOCK does not run on $RUNC_DIR/runc: restarting it"
	stop
fi
mkdir -p "$STATE" "$ROOT"
cat >"$STATE/config.toml" <<TOML
version = 3
root = '$ROOT'
state = '$STATE'
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.internal.v1.opt"]
[grpc]
  address = '$SOCK'
[ttrpc]
  address = '$SOCK.ttrpc'
TOML
echo "containerd: starting $DIR/containerd on $SOCK (log: $LOG)"
began=$SECONDS
PATH=$RUNC_DIR:$DIR:$PATH setsid "$DIR/containerd" --config "$STATE/config.toml" >"$LOG" 2>&1 </dev/null &
echo $! >"$STATE/containerd.pid"
for _ in $(seq 100); do
	if up; then
		echo "containerd: up on $SOCK, in $((SECONDS - began)) s"
		exit 0
	fi
	sleep 0.2
done
echo "containerd: no answer on $SOCK within 20 s; its log:" >&2
tail -20 "$LOG" >&2
exit 1
