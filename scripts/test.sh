#!/usr/bin/env bash
# make test's tests: the Go tests of every package but field/ (go test
# -race), and beside them the VM suite (make field),
# whose output goes to a log that is printed when both have ended. It
# fails when either fails.
#
# The two share the machine: the end-to-end tests mostly wait on engines
# and timers, the VMs take the cores. Each builds its images apart (the
# field's in a directory of its own, with tags of its own), and the field
# uses no engine socket the end-to-end tests restart.
set -uo pipefail
cd "$(dirname "$0")/.."
log=${FIELD_LOG:-bin/field.log}
mkdir -p "$(dirname "$log")"

echo "test: the VM suite runs beside the Go tests; its output: $log"
# Each in a process group of its own (set -m), which an interrupted run
# stops whole (the field's TestMain then kills the VMs); and both in the
# background, since bash runs a trap only once its foreground command
# ends, but interrupts a wait.
set -m
make --no-print-directory field >"$log" 2>&1 &
field=$!
# shellcheck disable=SC2046 # one argument per package
go test -race -count=1 -timeout 75m $(go list ./... | grep -v /field) &
tests=$!
set +m
trap 'kill -TERM -- -$tests -$field 2>/dev/null; wait; exit 130' INT TERM

wait $tests
rc=$?

echo "test: the Go tests ended (exit $rc); waiting for the VM suite"
wait $field
frc=$?
echo "test: the VM suite (exit $frc), as it printed:"
cat "$log"
if [ $rc != 0 ] || [ $frc != 0 ]; then
	echo "test: FAIL (go test: exit $rc, the VM suite: exit $frc)"
	exit 1
fi
echo "test: PASS"
