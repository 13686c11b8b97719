#!/usr/bin/env bash
# demo.sh: one command from a fresh clone: set up, then spray vs tcp between two namespaces.
#
# Installs what is missing and builds the provider (scripts/setup.sh), creates
# the namespace testbed, runs fi_pingpong over spray and over libfabric's tcp
# provider in the same run, prints a side-by-side table, checks spray's data
# integrity across the namespaces with 1 % random UDP loss, and tears down.
#
# Usage: scripts/demo.sh [--no-setup] [-n N] [--providers "spray tcp"]
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

setup=1
reps=3
providers="spray tcp"
while [ "$#" -gt 0 ]; do
	case "$1" in
	--no-setup) setup=0 ;;
	-n) reps="${2:?}" && shift ;;
	--providers) providers="${2:?}" && shift ;;
	-h | --help)
		usage
		exit 0
		;;
	*) die "unknown option: $1" ;;
	esac
	shift
done

need_root
[ "$setup" -eq 0 ] || bash "$SPRAY_ROOT/scripts/setup.sh"

# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() { bash "$SPRAY_ROOT/scripts/netns.sh" down >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
bash "$SPRAY_ROOT/scripts/netns.sh" up

echo
echo "== fi_pingpong -e rdm between namespaces $SPRAY_NS_B -> $SPRAY_NS_A ($SPRAY_ADDR_A), median of $reps"
rc=0
bash "$SPRAY_ROOT/scripts/bench.sh" --netns -n "$reps" --providers "$providers" --no-save 2>/dev/null || rc=1

first="${providers%% *}"
echo
echo "== $first: fi_pingpong -e rdm -S all -c (every size to 6 MiB, verified) with 1 % UDP loss"
if out="$(bash "$SPRAY_ROOT/scripts/pingpong.sh" -p "$first" --loss 1 -c -S all -I 10 --timeout 120 2>&1)"; then
	grep '^SUMMARY' <<<"$out"
else
	grep '^SUMMARY' <<<"$out" || tail -n 5 <<<"$out"
	rc=1
fi
echo
if [ "$rc" -eq 0 ]; then echo "demo: ok"; else echo "demo: FAILED (see above)"; fi
exit "$rc"
