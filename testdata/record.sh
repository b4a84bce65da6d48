#!/usr/bin/env bash
# Re-records the fixtures under testdata/fixtures from real engines:
# Docker at /var/run/docker.sock (or DOCKER_HOST), a throwaway local
# registry, Podman's Docker-compatible API, and Docker 29, 28.2 and 26.1
# beside them (scripts/docker.sh). Run it as `make record`;
# RECORD="docker-28.2 docker-26.1" testdata/record.sh re-records only the
# fixture directories it names.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
pids=()
socks=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	docker rm -f rr-run-to-exit rr-start-twice >/dev/null 2>&1 || true
	for sock in "${socks[@]}"; do docker -H "unix://$sock" rm -f rr-run-to-exit rr-start-twice >/dev/null 2>&1 || true; done
	rm -rf "$work"
}
trap cleanup EXIT

command -v docker-registry >/dev/null || { echo "record: needs Debian's docker-registry (apt-get install -y docker-registry)" >&2; exit 1; }
command -v htpasswd >/dev/null || { echo "record: needs htpasswd (apt-get install -y apache2-utils)" >&2; exit 1; }
command -v podman >/dev/null || { echo "record: needs podman (apt-get install -y podman)" >&2; exit 1; }
docker version --format '{{.Server.Version}}' >/dev/null || { echo "record: needs a running Docker engine (see README)" >&2; exit 1; }

echo "== fixture image"
cp /bin/busybox testdata/fixture-image/busybox
DOCKER_BUILDKIT=0 docker build -q -t waitdaemon-fixture:1 testdata/fixture-image
rm testdata/fixture-image/busybox

echo "== registry on 127.0.0.1:5000"
cat >"$work/registry.yml" <<YML
version: 0.1
storage:
  filesystem:
    rootdirectory: $work/registry
http:
  addr: 127.0.0.1:5000
YML
docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do curl -fs http://127.0.0.1:5000/v2/ >/dev/null && break; sleep 0.1; done
# rr/broken gets a layer of its own, whose blob is then deleted: the pull
# starts fine and fails mid-stream.
printf 'FROM waitdaemon-fixture:1\nCOPY broken /broken\n' >"$work/Dockerfile"
date +%s%N >"$work/broken"
DOCKER_BUILDKIT=0 docker build -q -t 127.0.0.1:5000/rr/broken:1 "$work" >/dev/null
docker tag waitdaemon-fixture:1 127.0.0.1:5000/rr/good:1
for name in good broken; do
	docker push -q 127.0.0.1:5000/rr/$name:1 >/dev/null
	docker rmi 127.0.0.1:5000/rr/$name:1 >/dev/null
done
layer=$(curl -fs -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
	http://127.0.0.1:5000/v2/rr/broken/manifests/1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"][-1]["digest"].split(":")[1])')
rm -rf "$work/registry/docker/registry/v2/blobs/sha256/${layer:0:2}/$layer"

echo "== the same registry with a password, on 127.0.0.1:5001"
# The user and password dockerapi's TestPullAuth sends.
htpasswd -Bbn rr rr-password >"$work/htpasswd"
sed -e 's/127.0.0.1:5000/127.0.0.1:5001/' "$work/registry.yml" >"$work/registry-auth.yml"
printf 'auth:\n  htpasswd:\n    realm: rr\n    path: %s\n' "$work/htpasswd" >>"$work/registry-auth.yml"
docker-registry serve "$work/registry-auth.yml" >"$work/registry-auth.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:5001/v2/)" = 401 ] && break; sleep 0.1; done
docker rmi 127.0.0.1:5001/rr/good:1 >/dev/null 2>&1 || true

echo "== podman"
printf '[containers]\ndefault_ulimits = []\n' >"$work/containers.conf"
export CONTAINERS_CONF="$work/containers.conf"
podman system service --time=0 "unix://$work/podman.sock" >"$work/podman.log" 2>&1 &
pids+=($!)
docker save waitdaemon-fixture:1 | podman load -q >/dev/null
podman rm -f rr-run-to-exit rr-start-twice >/dev/null 2>&1 || true
for _ in $(seq 50); do [ -S "$work/podman.sock" ] && break; sleep 0.1; done

# The fixture directory of each Docker that scripts/docker.sh starts.
declare -A dirs=([29]=docker-29.8 [28]=docker-28.2 [26]=docker-26.1)
for v in 29 28 26; do
	echo "== docker $v"
	sock=$(scripts/docker.sh "$v")
	socks+=("$sock")
	docker save waitdaemon-fixture:1 | docker -H "unix://$sock" load -q >/dev/null
	docker -H "unix://$sock" rm -f rr-run-to-exit rr-start-twice >/dev/null 2>&1 || true
	# The pulls must find nothing there.
	docker -H "unix://$sock" rmi -f 127.0.0.1:5000/rr/good:1 127.0.0.1:5000/rr/broken:1 127.0.0.1:5001/rr/good:1 >/dev/null 2>&1 || true
done

echo "== record"
# Each run replays the other engine's fixtures, so a first recording may
# report those missing; the second run then finds them.
record=${RECORD:-docker-20.10 podman-4.3 docker-29.8 docker-28.2 docker-26.1}
wanted() { [[ " $record " == *" $1 "* ]]; }
rc=0
if wanted docker-20.10; then go test ./dockerapi/ -count=1 -record=docker-20.10 || rc=1; fi
if wanted podman-4.3; then DOCKER_HOST="unix://$work/podman.sock" go test ./dockerapi/ -count=1 -record=podman-4.3 || rc=1; fi
i=0
for v in 29 28 26; do
	if wanted "${dirs[$v]}"; then DOCKER_HOST="unix://${socks[$i]}" go test ./dockerapi/ -count=1 -record="${dirs[$v]}" || rc=1; fi
	i=$((i + 1))
done
exit $rc
