#!/usr/bin/env bash
# Re-records the inherit.Plan inputs in testdata/inherit from real engines:
# Docker at /var/run/docker.sock, and Podman 4.3's Docker-compatible API on a
# temporary socket. Containers are only CREATED, never started (a privileged
# container cannot be started on the development machines, and nothing needs
# to run). Everything it creates is removed again.
#
#   testdata/inherit/record.sh            # all cases
#
# Needs root, a Docker engine, podman, jq, curl and /bin/busybox.
set -euo pipefail
cd "$(dirname "$0")"

SRC=waitdaemon-inherit-src:1
DOCKER_SOCK=/var/run/docker.sock
PODMAN_SOCK=/tmp/podman-inherit.sock
API=v1.41
work=$(mktemp -d)
podman_pid=
# Podman creates a missing bind source at create time (Docker does not):
# remove /worker again if this run made it.
worker_existed=false
[ -e /worker ] && worker_existed=true

cleanup() {
	docker rm -f -v action_reboot action_kexec-image action_empty action_aliases \
		tinkerbell_reboot_abc123 tinkerbell_reboot_def456 \
		wd-inherit-hostname wd-inherit-netns wd-inherit-container-network \
		wd-inherit-uts-host wd-inherit-privileged wd-inherit-mounts \
		wd-inherit-caps wd-inherit-resources wd-inherit-dns wd-inherit-env \
		wd-inherit-compose wd-inherit-db wd-inherit-links wd-inherit-links-bridge wd-inherit-ports \
		>/dev/null 2>&1 || true
	docker volume rm wd-inherit-vol >/dev/null 2>&1 || true
	docker network rm wd-inherit-net >/dev/null 2>&1 || true
	if [ -n "$podman_pid" ]; then
		podman rm -f -v action_reboot wd-inherit-podman-mounts >/dev/null 2>&1 || true
		podman volume rm wd-inherit-vol >/dev/null 2>&1 || true
		podman rmi localhost/$SRC >/dev/null 2>&1 || true
		kill "$podman_pid" 2>/dev/null || true
	fi
	$worker_existed || rmdir /worker/wf-1 /worker 2>/dev/null || true
	docker rmi $SRC >/dev/null 2>&1 || true
	rm -rf "$work" "$PODMAN_SOCK"
}
trap cleanup EXIT

# api SOCK METHOD PATH [BODY]: one Docker API call, prints the body, fails
# on a status >= 300.
api() {
	local sock=$1 method=$2 path=$3 body=${4-}
	local out status
	if [ -n "$body" ]; then
		out=$(curl -sS --unix-socket "$sock" -X "$method" -H 'Content-Type: application/json' \
			-w '\n%{http_code}' "http://d/$API$path" -d "$body")
	else
		out=$(curl -sS --unix-socket "$sock" -X "$method" -w '\n%{http_code}' "http://d/$API$path")
	fi
	status=${out##*$'\n'}
	out=${out%$'\n'*}
	if [ "$status" -ge 300 ]; then
		echo "record: $method $path: $status $out" >&2
		return 1
	fi
	printf '%s' "$out"
}

# save CASE ENGINE SOCK CONTAINER IMAGEREF NOTE: writes CASE.json from
# GET /containers/CONTAINER/json and GET /images/IMAGEREF/json's .Config.
save() {
	local name=$1 engine=$2 sock=$3 ctr=$4 img=$5 note=$6
	local container image
	container=$(api "$sock" GET "/containers/$ctr/json")
	image=$(api "$sock" GET "/images/$img/json" | jq '.Config')
	jq -n --arg note "$note" --arg engine "$engine" \
		--argjson container "$container" --argjson image "$image" \
		'{note: $note, engine: $engine, userImage: "alpine:3.20", apiVersion: "1.41",
		  container: $container, image: $image}' >"$name.json"
	echo "  $name.json"
}

# create_api NAME BODY: POST /containers/create on Docker, prints the ID.
create_api() {
	api "$DOCKER_SOCK" POST "/containers/create?name=$1" "$2" | jq -r .Id
}

# cli CASE NOTE COMMAND: runs a `docker create` command line, saves the
# container and removes it. The note ends with the exact command line.
cli() {
	local name=$1 note=$2 cmd=$3 id
	id=$(eval "$cmd")
	save "$name" "docker-$DOCKER_VERSION" "$DOCKER_SOCK" "$id" "$SRC" "$note Created with: $cmd"
	docker rm -f -v "$id" >/dev/null
}

# api_case CASE NAME NOTE BODY: like cli, through the API.
api_case() {
	local name=$1 ctr=$2 note=$3 body id
	body=$(jq -c . <<<"$4")
	id=$(create_api "$ctr" "$body")
	save "$name" "docker-$DOCKER_VERSION" "$DOCKER_SOCK" "$id" "$SRC" \
		"$note Created with: POST /$API/containers/create?name=$ctr $body"
	docker rm -f -v "$id" >/dev/null
}

DOCKER_VERSION=$(docker version --format '{{.Server.Version}}')
DOCKER_VERSION=${DOCKER_VERSION%%+*} # 20.10.24+dfsg1 -> 20.10.24

echo "== source image $SRC"
cp /bin/busybox "$work/waitdaemon"
cat >"$work/Dockerfile" <<'EOF'
FROM scratch
COPY waitdaemon /waitdaemon
ENTRYPOINT ["/waitdaemon", "action", "--"]
LABEL org.opencontainers.image.title=waitdaemon
EOF
DOCKER_BUILDKIT=0 docker build -q -t $SRC "$work" >/dev/null

echo "== docker $DOCKER_VERSION"

# --- tink-worker shapes (Docker Go SDK, through the API) ---
api_case tink-worker-reboot action_reboot \
	"tink-worker's shape for the reboot template: Cmd is the action's command, Tty and attach on, privileged, the /workflow bind first, then the action's volumes, pid host, default bridge network, no Entrypoint (the image's applies)." \
	'{"Image":"waitdaemon-inherit-src:1","Cmd":["reboot"],"Env":["IMAGE=alpine:3.20","WAIT_SECONDS=10"],"Tty":true,"AttachStdout":true,"AttachStderr":true,
	  "HostConfig":{"Privileged":true,"Binds":["/worker/wf-1:/workflow","/var/run/docker.sock:/var/run/docker.sock"],"PidMode":"host"}}'

api_case tink-worker-kexec action_kexec-image \
	"tink-worker's shape for CAPT's kexec template: no command (Cmd null), env BLOCK_DEVICE/FS_TYPE/IMAGE/WAIT_SECONDS, privileged, pid host, the socket bind." \
	'{"Image":"waitdaemon-inherit-src:1","Cmd":null,"Env":["BLOCK_DEVICE=/dev/sda1","FS_TYPE=ext4","IMAGE=quay.io/tinkerbell/actions/kexec:latest","WAIT_SECONDS=5"],"Tty":true,"AttachStdout":true,"AttachStderr":true,
	  "HostConfig":{"Privileged":true,"Binds":["/worker/wf-1:/workflow","/var/run/docker.sock:/var/run/docker.sock"],"PidMode":"host"}}'

api_case empty-command action_empty \
	"tink-worker's shape with an empty command (Cmd [] in the create body) and no Entrypoint override: the image's ENTRYPOINT applies alone." \
	'{"Image":"waitdaemon-inherit-src:1","Cmd":[],"Env":["IMAGE=alpine:3.20","WAIT_SECONDS=10"],"Tty":true,"AttachStdout":true,"AttachStderr":true,
	  "HostConfig":{"Privileged":true,"Binds":["/worker/wf-1:/workflow","/var/run/docker.sock:/var/run/docker.sock"],"PidMode":"host"}}'

api_case aliases action_aliases \
	"tink-worker's shape with both the WAITDAEMON_* names and the legacy IMAGE/WAIT_SECONDS names set, plus WAITDAEMON_VERBOSE, and a command." \
	'{"Image":"waitdaemon-inherit-src:1","Cmd":["reboot"],"Env":["WAITDAEMON_IMAGE=alpine:3.20","WAITDAEMON_WAIT_SECONDS=3","IMAGE=user-value","WAIT_SECONDS=user-value","WAITDAEMON_VERBOSE=true"],"Tty":true,"AttachStdout":true,"AttachStderr":true,
	  "HostConfig":{"Privileged":true,"Binds":["/worker/wf-1:/workflow","/var/run/docker.sock:/var/run/docker.sock"],"PidMode":"host"}}'

# --- tink-agent shapes (moby client, through the API) ---
api_case tink-agent-host-network tinkerbell_reboot_abc123 \
	"tink-agent v0.25's shape with namespaces.network host: no Tty, Env sorted, Cmd is the template's command, privileged, the socket bind (no /workflow), pid host, NetworkMode host (Config.Hostname is then the host's name)." \
	'{"Image":"waitdaemon-inherit-src:1","Cmd":["reboot"],"Env":["IMAGE=alpine:3.20","WAIT_SECONDS=10"],
	  "HostConfig":{"Privileged":true,"Binds":["/var/run/docker.sock:/var/run/docker.sock"],"PidMode":"host","NetworkMode":"host"}}'

api_case tink-agent-entrypoint tinkerbell_reboot_def456 \
	"tink-agent's shape when the action sets cmd: Entrypoint overridden to [/bin/sh -c], Cmd is the command; default network." \
	'{"Image":"waitdaemon-inherit-src:1","Entrypoint":["/bin/sh","-c"],"Cmd":["echo hi; reboot"],"Env":["IMAGE=alpine:3.20","WAIT_SECONDS=10"],
	  "HostConfig":{"Privileged":true,"Binds":["/var/run/docker.sock:/var/run/docker.sock"],"PidMode":"host"}}'

# --- docker CLI cases ---
cli custom-hostname "An operator-set hostname, which must be kept." \
	"docker create --name wd-inherit-hostname --hostname foo $SRC"

netns=$(docker create --name wd-inherit-netns $SRC)
cli container-network "NetworkMode container:<id> of a helper container wd-inherit-netns ($netns), created first and never started; Config.Hostname must not be copied (400 conflicting options)." \
	"docker create --name wd-inherit-container-network --network container:$netns $SRC"
docker rm -f -v "$netns" >/dev/null

cli uts-host "UTSMode host; Config.Hostname must not be copied (400 conflicting options)." \
	"docker create --name wd-inherit-uts-host --uts host $SRC"

cli privileged "Privileged; MaskedPaths and ReadonlyPaths are null in the inspect." \
	"docker create --name wd-inherit-privileged --privileged $SRC"

cli mounts-and-tmpfs "A read-only bind mount and a named volume in HostConfig.Mounts, a tmpfs in HostConfig.Tmpfs, a -v bind in Binds; the top-level Mounts array is runtime data." \
	"docker create --name wd-inherit-mounts --mount type=bind,src=/tmp,dst=/hosttmp,readonly --mount type=volume,src=wd-inherit-vol,dst=/data --tmpfs /run:rw,size=64m -v /var/run/docker.sock:/var/run/docker.sock $SRC"
docker volume rm wd-inherit-vol >/dev/null

cli caps-and-devices "Capabilities, a device, a device cgroup rule, security options and an extra group." \
	"docker create --name wd-inherit-caps --cap-add SYS_ADMIN --cap-drop NET_RAW --device /dev/null:/dev/mynull:rwm --device-cgroup-rule 'c 1:3 rmw' --security-opt apparmor=unconfined --security-opt seccomp=unconfined --group-add 10 $SRC"

cli resources-and-limits "Resources, ulimits, sysctls, shm size, OOM score, init, read-only rootfs, private IPC and cgroup namespaces, a log driver with options." \
	"docker create --name wd-inherit-resources --memory 256m --cpus 0.5 --pids-limit 100 --ulimit nofile=1024:2048 --sysctl net.ipv4.ip_forward=1 --shm-size 128m --oom-score-adj 100 --init --read-only --ipc private --cgroupns private --log-driver json-file --log-opt max-size=1m $SRC"

cli dns-and-hosts "DNS servers, search domains and options, and an extra host." \
	"docker create --name wd-inherit-dns --dns 1.1.1.1 --dns-search example.test --dns-option ndots:2 --add-host provisioner:192.168.1.1 $SRC"

cli image-env-and-labels "A PATH that differs from the image's (it must be kept), an extra env var, a label next to the image's label, and WorkingDir, User and StopSignal that differ from the image's (empty) ones." \
	"docker create --name wd-inherit-env -e PATH=/custom/bin -e FOO=bar -l app=reboot --workdir /work --user 1000:1000 --stop-signal SIGINT $SRC"

cli compose-labels "com.docker.compose.* labels (not to be copied) next to a normal label." \
	"docker create --name wd-inherit-compose -l com.docker.compose.project=x -l com.docker.compose.service=y -l com.docker.compose.container-number=1 -l app=reboot $SRC"

docker network create wd-inherit-net >/dev/null
db=$(docker create --name wd-inherit-db --network wd-inherit-net $SRC)
cli links "A user-defined network wd-inherit-net, a link to the helper wd-inherit-db ($db, created on that network first, never started) and a network alias. On a user-defined network the link is kept in NetworkSettings.Networks[wd-inherit-net].Links as wd-inherit-db:db and HostConfig.Links is null; the short ID is added to Aliases only when the container is started (this one never was)." \
	"docker create --name wd-inherit-links --network wd-inherit-net --link wd-inherit-db:db --network-alias act $SRC"
docker rm -f -v "$db" >/dev/null
docker network rm wd-inherit-net >/dev/null

db=$(docker create --name wd-inherit-db $SRC)
cli links-bridge "A legacy link on the default bridge network to the helper wd-inherit-db ($db, created first, never started): HostConfig.Links has the inspect form /wd-inherit-db:/wd-inherit-links-bridge/db." \
	"docker create --name wd-inherit-links-bridge --link wd-inherit-db:db $SRC"
docker rm -f -v "$db" >/dev/null

cli port-bindings "A published port, an exposed port and an anonymous volume (Config.Volumes has /data, which the image does not)." \
	"docker create --name wd-inherit-ports -p 8080:80 --expose 9000 -v /data $SRC"

# --- Podman's Docker-compatible API ---
echo "== podman $(podman version --format '{{.Client.Version}}')"
PODMAN_VERSION=$(podman version --format '{{.Client.Version}}')
printf '[containers]\ndefault_ulimits = []\n' >"$work/containers.conf"
export CONTAINERS_CONF="$work/containers.conf"
rm -f "$PODMAN_SOCK"
podman system service --time=0 "unix://$PODMAN_SOCK" >"$work/podman.log" 2>&1 &
podman_pid=$!
docker save $SRC | podman load -q >/dev/null
for _ in $(seq 50); do [ -S "$PODMAN_SOCK" ] && break; sleep 0.1; done

# podman_case CASE NAME NOTE BODY
podman_case() {
	local name=$1 ctr=$2 note=$3 body id
	body=$(jq -c . <<<"$4")
	id=$(api "$PODMAN_SOCK" POST "/containers/create?name=$ctr" "$body" | jq -r .Id)
	save "$name" "podman-$PODMAN_VERSION" "$PODMAN_SOCK" "$id" "localhost/$SRC" \
		"$note Created through Podman's Docker-compatible API (CONTAINERS_CONF with default_ulimits = [], image loaded with docker save | podman load) with: POST /$API/containers/create?name=$ctr $body"
	podman rm -f -v "$id" >/dev/null
}

podman_case podman-tink-worker-reboot action_reboot \
	"tink-worker's reboot shape (as tink-worker-reboot) on Podman: Podman's compat view of the same create." \
	'{"Image":"waitdaemon-inherit-src:1","Cmd":["reboot"],"Env":["IMAGE=alpine:3.20","WAIT_SECONDS=10"],"Tty":true,"AttachStdout":true,"AttachStderr":true,
	  "HostConfig":{"Privileged":true,"Binds":["/worker/wf-1:/workflow","/var/run/docker.sock:/var/run/docker.sock"],"PidMode":"host"}}'

podman_case podman-mounts wd-inherit-podman-mounts \
	"Binds with and without options, a tmpfs and a named-volume mount on Podman: Podman reports Binds with its options appended." \
	'{"Image":"waitdaemon-inherit-src:1","Cmd":["reboot"],"Env":["IMAGE=alpine:3.20"],
	  "HostConfig":{"Binds":["/tmp:/hosttmp:ro","/var/run/docker.sock:/var/run/docker.sock"],"Tmpfs":{"/run":"rw,size=64m"},
	    "Mounts":[{"Type":"volume","Source":"wd-inherit-vol","Target":"/data"}]}}'
podman volume rm wd-inherit-vol >/dev/null

echo "done"
