#!/usr/bin/env bash
# Re-records the fixtures under testdata/fixtures/containerd-2.2.1 from
# the test containerd (scripts/containerd.sh) and two throwaway local
# registries: plain HTTP on 127.0.0.1:5010, and with htpasswd on
# 127.0.0.1:5011. Run it as `make record-containerd`.
set -euo pipefail
cd "$(dirname "$0")/.."

SOCK=/run/containerd-test/containerd.sock
DIR=${CONTAINERD_DIR:-/var/cache/waitdaemon/containerd-v2.2.1}
NS=waitdaemon-rr
CTR=("$DIR/ctr" -a "$SOCK" -n "$NS")
PASSWORD=rr-Secret-0b6f # the fixtures' test password (containerdapi/fixtures_test.go)

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

command -v docker-registry >/dev/null || { echo "record: needs Debian's docker-registry (apt-get install -y docker-registry)" >&2; exit 1; }
command -v htpasswd >/dev/null || { echo "record: needs htpasswd (apt-get install -y apache2-utils)" >&2; exit 1; }
docker version --format '{{.Server.Version}}' >/dev/null || { echo "record: needs a running Docker engine to build the fixture image (make engine)" >&2; exit 1; }
scripts/containerd.sh

echo "== fixture image into namespace $NS"
if ! docker image inspect waitdaemon-fixture:1 >/dev/null 2>&1; then
	cp /bin/busybox testdata/fixture-image/busybox
	DOCKER_BUILDKIT=0 docker build -q -t waitdaemon-fixture:1 testdata/fixture-image
	rm testdata/fixture-image/busybox
fi
docker save waitdaemon-fixture:1 | "${CTR[@]}" images import - >/dev/null 2>&1

echo "== registries on 127.0.0.1:5010 and :5011"
registry() { # name port [htpasswd]
	cat >"$work/$1.yml" <<YML
version: 0.1
storage:
  filesystem:
    rootdirectory: $work/storage
http:
  addr: 127.0.0.1:$2
YML
	if [ -n "${3:-}" ]; then
		printf 'auth:\n  htpasswd:\n    realm: rr\n    path: %s\n' "$3" >>"$work/$1.yml"
	fi
	docker-registry serve "$work/$1.yml" >"$work/$1.log" 2>&1 &
	pids+=($!)
}
htpasswd -Bbn rr "$PASSWORD" >"$work/htpasswd"
registry plain 5010
registry auth 5011 "$work/htpasswd"
for _ in $(seq 50); do curl -fs http://127.0.0.1:5010/v2/ >/dev/null && break; sleep 0.1; done
docker tag waitdaemon-fixture:1 127.0.0.1:5010/rr/good:1
docker push -q 127.0.0.1:5010/rr/good:1 >/dev/null
docker rmi 127.0.0.1:5010/rr/good:1 >/dev/null
# Both registries share one storage: the image is on :5011 too.

echo "== clean $NS"
for c in $("${CTR[@]}" containers list -q); do
	# rr-*: containerdapi's; tinkerbell_*: engine/containerd's user
	# containers; 64 hex: its action containers.
	case $c in rr-* | tinkerbell_* | [0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]*) "${CTR[@]}" tasks delete -f "$c" >/dev/null 2>&1 || true; "${CTR[@]}" containers delete "$c" >/dev/null 2>&1 || true ;; esac
done
for s in $("${CTR[@]}" snapshots list | awk '$1 ~ /^(rr-|tinkerbell_)/ {print $1}'); do "${CTR[@]}" snapshots rm "$s" >/dev/null 2>&1 || true; done
for l in $("${CTR[@]}" leases list -q); do case $l in rr-*) "${CTR[@]}" leases rm "$l" >/dev/null 2>&1 || true ;; esac; done
"${CTR[@]}" images rm 127.0.0.1:5010/rr/good:1 127.0.0.1:5011/rr/good:1 >/dev/null 2>&1 || true

echo "== record"
CONTAINERD_ADDRESS=$SOCK go test ./containerdapi/ -count=1 -run 'Test(Version|Unimplemented|Containers|RunToExit|Pull)' -record=containerd-2.2.1 || true
CONTAINERD_ADDRESS=$SOCK go test ./engine/containerd/ -count=1 -run 'TestEngine(Self|Run)$' -record=containerd-2.2.1 || true
CONTAINERD_ADDRESS=$SOCK go test . -count=1 -run 'TestAPIContainerd$' -record=containerd-2.2.1 || true
if grep -rq "$PASSWORD" testdata/fixtures/containerd-2.2.1/; then
	echo "record: a fixture holds the registry's password" >&2
	exit 1
fi
go test ./containerdapi/ ./engine/containerd/ -count=1
go test . -count=1 -run 'TestAPIContainerd$'
