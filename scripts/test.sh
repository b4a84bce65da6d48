#!/usr/bin/env bash
# The two tiers of tests (docs/development.md#the-two-tiers):
#
#   scripts/test.sh gate        make test: go vet, every package's tests
#                               with -race under -short (the engine
#                               table's gate rows, Docker 20.10 and
#                               containerd; the sweep's sample; no soak),
#                               the bench once per measure on those two
#                               engines (make bench-short: it fails when
#                               a measure cannot be taken, never on a
#                               figure), then the VM suite's gate rows
#   scripts/test.sh all [PART]  make test-all: the same without -short,
#                               every row, the whole sweep, the soak and
#                               every VM row; or one PART of it:
#                                 unit           every package but e2e and field
#                                 e2e            the end-to-end package, every row
#                                 e2e-ROW        the same on one row (docker,
#                                                docker29, docker28, docker26,
#                                                podman, containerd)
#                                 sweep, soak    TestFaultSweep, TestSoak
#                                 field          the VM suite, every row
#
# The VM suite runs once the Go tests have ended, even when they failed
# (docs/development.md says why not beside them). Each step prints a line
# when it starts and its time when it ends.
set -uo pipefail
cd "$(dirname "$0")/.."
tier=${1:-gate}
part=${2:-}
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

failed=()
# step NAME COMMAND...: runs it, saying when it starts and how long it
# took; a failure is remembered, and the next steps still run.
step() {
	local name=$1 start=$SECONDS rc
	shift
	echo "test: $name: started"
	group "$@"
	rc=$?
	echo "test: $name: exit $rc in $((SECONDS - start)) s"
	[ $rc = 0 ] || failed+=("$name (exit $rc)")
}

# The gate: -short (the engine table's gate rows, the sweep's sample).
# The whole matrix: -tags full, which builds the files of its own tests.
short=
case $tier in
gate) short=-short ;;
all) short="-tags full" ;;
*)
	echo "usage: $0 gate | all [unit|e2e|e2e-ROW|sweep|soak|field]" >&2
	exit 2
	;;
esac

pkgs() { go list ./... | grep -v -e /e2e$ -e /field$; }
unit() {
	# Both tiers' files: the full tier's must not rot under the gate.
	go vet ./... && go vet -tags full ./e2e/ && {
		# shellcheck disable=SC2046 # one argument per package
		go test -race -count=1 $short -timeout 20m $(pkgs)
	} && {
		# docs/mutants.md's rows, held to the code (a module of its own).
		go -C tools/mutate test -count=1 ./table/
	}
}
# shellcheck disable=SC2086 # $short is one or two words
e2e() { go test -race -count=1 $short -timeout 75m "$@" ./e2e/; }
field() {
	make --no-print-directory field FIELD_FLAGS="$short" 2>&1 | tee "$log"
	return "${PIPESTATUS[0]}"
}

# Tinkerbell's released agents and their server sides (make
# tink-agents): the whole matrix's comparison of the runner with them
# (e2e's TestRealAgent, on the docker and containerd rows) and the VM
# suite's rows run them. Built once into the cache; its own step, so
# that the build's time is not the tests'.
agents() { make --no-print-directory tink-agents; }

total=$SECONDS
if [ "$tier" = all ]; then
	case $part in
	'' | e2e | e2e-docker | e2e-containerd | field) step "Tinkerbell's releases (make tink-agents)" agents ;;
	esac
fi
case $part in
'')
	step "go vet and the unit tests" unit
	step "the end-to-end tests" e2e
	if [ "$tier" = gate ]; then
		step "the bench, one run per measure" make --no-print-directory bench-short
	fi
	step "the VM suite (its output also in $log)" field
	;;
unit) step "go vet and the unit tests" unit ;;
e2e) step "the end-to-end tests" e2e ;;
e2e-*)
	export WAITDAEMON_E2E_ENGINES=${part#e2e-}
	step "the end-to-end tests on $WAITDAEMON_E2E_ENGINES" e2e
	;;
sweep) step "the fault sweep" e2e -run '^TestFaultSweep$' ;;
soak) step "the soak" e2e -run '^TestSoak$' ;;
field) step "the VM suite (its output also in $log)" field ;;
*)
	echo "$0: no part $part; want unit, e2e, e2e-ROW, sweep, soak or field" >&2
	exit 2
	;;
esac
if [ ${#failed[@]} -gt 0 ]; then
	echo "test: FAIL in $((SECONDS - total)) s: ${failed[*]}"
	exit 1
fi
echo "test: PASS in $((SECONDS - total)) s"
