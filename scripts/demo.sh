#!/usr/bin/env bash
# The double fork on the local engine: one action run exactly as tink-worker
# runs it (create, start, wait, remove), then the waiter's work.
set -euo pipefail
IMAGE=${IMAGE:-waitdaemon:dev}
PROBE_IMAGE=${PROBE_IMAGE:-waitdaemon-probe:dev}
WAIT=${WAIT_SECONDS:-3}

# ENGINE=containerd: on the test containerd (make containerd), the action
# made as tink-agent makes it, by tools/demo-containerd.
if [ "${ENGINE:-docker}" = containerd ]; then
	SOCK=${CONTAINERD_SOCKET:-/run/containerd-test/containerd.sock}
	CTR=${CTR:-${ENGINES_CACHE:-/var/cache/waitdaemon}/containerd-v2.2.1/ctr}
	docker save "$IMAGE" "$PROBE_IMAGE" | "$CTR" -a "$SOCK" -n tinkerbell images import - >/dev/null
	exec go run ./tools/demo-containerd -image "$IMAGE" -probe "$PROBE_IMAGE" -socket "$SOCK" -wait "$WAIT"
fi
name=action_demo_reboot
out=$(mktemp -d)
trap 'docker rm -f $name ${name}-waitdaemon-user ${name}-waitdaemon-waiter >/dev/null 2>&1 || true; rm -rf "$out"' EXIT

ms() { date -d "$1" +%s%3N; }

echo "== the worker creates and starts the action (image $IMAGE, command: reboot --force)"
docker create --name $name --tty --pid host \
	-v "$out:/workflow" -v /var/run/docker.sock:/var/run/docker.sock \
	-e IMAGE="$PROBE_IMAGE" -e WAIT_SECONDS="$WAIT" -e BLOCK_DEVICE=/dev/sda -e PROBE_DIR=/workflow \
	"$IMAGE" reboot --force >/dev/null
docker start $name >/dev/null
code=$(docker wait $name)
docker logs $name
started=$(docker inspect -f '{{.State.StartedAt}}' $name)
finished=$(docker inspect -f '{{.State.FinishedAt}}' $name)
waiter=$(docker ps -q --filter label=org.waitdaemon.role=waiter --filter label=org.waitdaemon.action=$name)
docker rm -f $name >/dev/null
echo "== the action exited $code after $(( $(ms "$finished") - $(ms "$started") )) ms; the worker reports success and removes it"
echo
echo "== the waiter ($waiter) waits ${WAIT}s, then starts the user container"
docker logs -f "$waiter" >"$out/waiter.log" 2>&1 || true
cat "$out/waiter.log"
echo
python3 - "$started" "$finished" "$out/waiter.log" "$out/probe.json" <<'PY'
import json, sys
from datetime import datetime
def t(s):  # RFC 3339 with nanoseconds, to seconds
    s = s.rstrip("Z")
    base, _, frac = s.partition(".")
    return datetime.fromisoformat(base).timestamp() + float("0." + (frac or "0"))
started, finished = t(sys.argv[1]), t(sys.argv[2])
ev = {}
for line in open(sys.argv[3]):
    try:
        e = json.loads(line)
        ev[e["msg"]] = e
    except ValueError:
        pass
ms = lambda x: "%6d ms" % round((x - started) * 1000)
print("== timeline, from the action's start")
print("  action started           ", ms(started))
print("  action exited            ", ms(finished), " (t)")
s = ev.get("started user container")
x = ev.get("user container exited")
if s:
    print("  start request sent       ", ms(t(s["start_sent"])), " (t + %ds WAIT_SECONDS, %+d ms)" % (s["wait_seconds"], s["late_ms"]))
if x:
    print("  user container started   ", ms(t(x["started_at"])), " (engine)")
    print("  user container exited    ", ms(t(x["finished_at"])), " (exit code %d)" % x["exit_code"])
r = json.load(open(sys.argv[4]))
print()
print("== what the user container received (the probe's record)")
print("  command:", r["args"])
print("  env:    ", [e for e in r["env"] if not e.startswith("HOSTNAME=")])
print("  pid ns: ", r["namespaces"]["pid"], "(the host's: pid host)")
print("  mounts: ", [m for m in r["mounts"] if m in ("/workflow", "/var/run/docker.sock")])
PY
echo
left=$(docker ps -aq --filter label=org.waitdaemon.action=$name | wc -l)
echo "== containers left behind: $left"
