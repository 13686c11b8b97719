#!/usr/bin/env bash
# netfuzz.sh: the network fuzzer at full size: N hostile datagrams (default
# 1000000) at two live spray endpoints on loopback while they exchange
# checked messages (tests/ffi_netfuzz.rs, which the test suite runs with
# 100000). Prints the counts, time, drop counters, messages and RSS before
# and after; non-zero exit on any failure.
#
# Usage: scripts/netfuzz.sh [-n DATAGRAMS] [-s SEED]
# Needs root (sniffing real packets on lo; without it only constructed
# packets are sent).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

count=1000000
seed=""
while [ "$#" -gt 0 ]; do
	case "$1" in
	-n) count="${2:?}" && shift ;;
	-s) seed="${2:?}" && shift ;;
	-h | --help)
		usage
		exit 0
		;;
	*) die "unknown option: $1 (see --help)" ;;
	esac
	shift
done
[[ "$count" =~ ^[0-9]+$ ]] || die "-n must be a number"
find_cargo || die "cargo not found (scripts/setup.sh installs it)"
cd "$SPRAY_ROOT"
export SPRAY_NETFUZZ_DATAGRAMS="$count"
[ -z "$seed" ] || export SPRAY_NETFUZZ_SEED="$seed"
# Periodic statistics (kept in the file the test names when it fails): a
# stall's last dumps show where the session stood.
export FI_SPRAY_STATS_MS="${FI_SPRAY_STATS_MS:-2000}"
exec cargo test --release --test ffi_netfuzz -- --nocapture --test-threads=1
