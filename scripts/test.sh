#!/usr/bin/env bash
# make test's tests: the Go tests of every package but field/ (go test
# -race), and beside them the VM suite (field/, as make field runs it),
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
go test -count=1 -timeout 60m -v ./field/ >"$log" 2>&1 &
field=$!
# An interrupted run stops the field too: its TestMain kills the VMs.
trap 'kill -TERM $field 2>/dev/null; wait $field; exit 130' INT TERM

# shellcheck disable=SC2046 # one argument per package
go test -race -count=1 -timeout 45m $(go list ./... | grep -v /field)
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
