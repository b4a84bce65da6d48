#!/usr/bin/env bash
# make test's tests: the Go tests of every package but field/ (go test
# -race), then the VM suite (make field), two machines at a time. It
# fails when either fails; the VM suite runs even when the Go tests
# failed.
#
# One after the other, not beside each other: on a 2-core machine the
# two together starved the VMs (a CaptainOS boot of 3.5 min, an action's
# CNI set-up killed at its 90 s timeout) and the end-to-end tests ran past
# their timeout. Alone, each VM has a core of its own.
set -uo pipefail
cd "$(dirname "$0")/.."
log=${FIELD_LOG:-bin/field.log}
mkdir -p "$(dirname "$log")"

# Each in a process group of its own (set -m), which an interrupted run
# stops whole (the field's TestMain then kills the VMs); in the
# background, since bash runs a trap only once its foreground command
# ends, but interrupts a wait.
job=
trap '[ -n "$job" ] && kill -TERM -- -"$job" 2>/dev/null; wait; exit 130' INT TERM
group() {
	set -m
	"$@" &
	job=$!
	set +m
	wait $job
}
field() { make --no-print-directory field 2>&1 | tee "$log"; }

start=$SECONDS
# shellcheck disable=SC2046 # one argument per package
group go test -race -count=1 -timeout 75m $(go list ./... | grep -v /field)
rc=$?
echo "test: the Go tests ended (exit $rc) in $((SECONDS - start)) s; the VM suite now (its output also in $log)"

start=$SECONDS
group field
frc=$?
echo "test: the VM suite ended (exit $frc) in $((SECONDS - start)) s"
if [ $rc != 0 ] || [ $frc != 0 ]; then
	echo "test: FAIL (go test: exit $rc, the VM suite: exit $frc)"
	exit 1
fi
echo "test: PASS"
