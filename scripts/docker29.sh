#!/usr/bin/env bash
# Docker 29 beside Debian's 20.10: scripts/docker.sh 29 (see there).
#
#	sock=$(scripts/docker29.sh)          # /run/docker29/docker.sock
#	scripts/docker29.sh stop
exec "$(dirname "$0")/docker.sh" 29 "$@"
