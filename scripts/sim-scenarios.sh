#!/usr/bin/env bash
# sim-scenarios.sh: runs the SRD simulator scenarios of PROTOCOL.md / the SRD
# issue (loss, reordering, blackhole, slow path, incast, restart, vanished
# peer, 1000-seed property test, handshake under loss/dup/reordering, idle peer reclamation, testbed-like incast without RTOs, testbed-like 10x slower ECMP link, one
# flow over unevenly hashed ports with a lossy or 10x slower link) in release mode and prints their results as
# one markdown table. Exit status is cargo test's (the tests assert the bars).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
cargo test -p spray --release --test sim_scenarios --test sim_incast --test sim_incast_sched --test sim_slowlink --test sim_badpath --test sim_stall \
	--test sim_lifecycle --test sim_property --test sim_handshake --test sim_reclaim -- --nocapture --test-threads=1 >"$log" 2>&1 || rc=$?
echo "| scenario | measured | must reach | |"
echo "|---|---|---|---|"
# A test's first row shares its line with cargo's "test name ... " prefix.
grep -a -o 'SCENARIO|.*' "$log" | sed 's/^SCENARIO|//; s/|/ | /g; s/^/| /; s/$/ |/'
grep -a -E '^test result:' "$log" | awk '{p+=$4; f+=$6} END {printf "\n%d passed, %d failed\n", p, f}'
if [ "$rc" -ne 0 ]; then
	grep -a -E 'panicked|FAILED' "$log" | head -20
fi
exit "$rc"
