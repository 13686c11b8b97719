#!/usr/bin/env bash
# abbench.sh: two builds (or two settings) of the provider against each other between two
# hosts (namespaces of scripts/hosts.sh over its 4-link ECMP fabric), in interleaved
# repetitions. The testbed shares a noisy machine: a change of a few percent shows only as
# medians and paired ratios of many back-to-back runs, not in one benchmark table.
#
# Usage: scripts/abbench.sh [options] A B
#   A, B          each DIR[,FI_SPRAY_X=V...]: a directory holding libspray-fi.so (used as
#                 FI_PROVIDER_PATH) and settings for that side, e.g. build,FI_SPRAY_ACK_EVERY=64
#   -n N          repetitions (default 7); the order alternates (A B, then B A, ...)
#   --client C    pingpong: fi_pingpong -e rdm -m tagged, us per transfer (lower is better);
#                 stream: scripts/fi_stream.c, the receiver's MB/s (higher is better)
#   --size BYTES  message size (default 65536)
#   --iters N     fi_pingpong iterations (default 3000)
#   --ms MS       stream length (default 2000)
#   --mtu M       the testbed's MTU (default 1500)
#   --pin         host 0's process on CPU 0, host 1's on CPU 1
# Output: every value as it comes, then per side the median (min-max), and the median
# (min-max) of B/A over the repetitions (each pair ran back to back).
# The testbed (prefix sprab-) is built here and removed on exit. Exit status: 0; 1 when a
# run failed; 2 on bad usage or a missing prerequisite.

set -uo pipefail
export SPRAY_HOSTS_PREFIX=sprab-
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() { sed -n '2,/^$/s/^# \{0,1\}//p' "$0"; }
fatal() {
	log "error: $*"
	exit 2
}

runs=7 client=pingpong size=65536 iters=3000 ms=2000 mtu=1500 pin=0 sides=()
while [ "$#" -gt 0 ]; do
	case "$1" in
	-n) runs="${2:?}" && shift ;;
	--client) client="${2:?}" && shift ;;
	--size) size="${2:?}" && shift ;;
	--iters) iters="${2:?}" && shift ;;
	--ms) ms="${2:?}" && shift ;;
	--mtu) mtu="${2:?}" && shift ;;
	--pin) pin=1 ;;
	-h | --help)
		usage
		exit 0
		;;
	-*) fatal "unknown option: $1 (see --help)" ;;
	*) sides+=("$1") ;;
	esac
	shift
done
[ "${#sides[@]}" -eq 2 ] || fatal "two sides needed, A and B (see --help)"
case "$client" in pingpong | stream) ;; *) fatal "--client pingpong or stream" ;; esac
for n in "$runs" "$size" "$iters" "$ms" "$mtu"; do
	[[ "$n" =~ ^[1-9][0-9]*$ ]] || fatal "not a positive number: $n"
done
[ "$(id -u)" -eq 0 ] || fatal "needs root (network namespaces)"
command -v fi_pingpong >/dev/null || fatal "fi_pingpong missing (libfabric-bin)"
for s in "${sides[@]}"; do
	[ -f "${s%%,*}/libspray-fi.so" ] || fatal "no libspray-fi.so in ${s%%,*}"
	if [[ "$s" == *,* ]]; then
		IFS=, read -r -a kv <<<"${s#*,}"
		for e in "${kv[@]}"; do
			[[ "$e" == FI_SPRAY_*=* ]] || fatal "not an FI_SPRAY_ setting: $e"
		done
	fi
done

tmp="$(mktemp -d)"
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	bash "$SPRAY_ROOT/scripts/hosts.sh" down >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [ "$client" = stream ]; then
	cc -O2 -Wall -o "$tmp/fi_stream" "$SPRAY_ROOT/scripts/fi_stream.c" -lfabric 2>"$tmp/cc.log" ||
		fatal "building scripts/fi_stream.c failed: $(cat "$tmp/cc.log")"
fi
bash "$SPRAY_ROOT/scripts/hosts.sh" up 2 --mtu "$mtu" >"$tmp/hosts.log" 2>&1 ||
	fatal "hosts.sh up failed: $(tail -n 3 "$tmp/hosts.log")"
ns0="${SPRAY_HOSTS_PREFIX}h0" ns1="${SPRAY_HOSTS_PREFIX}h1"
addr1="$(bash "$SPRAY_ROOT/scripts/hosts.sh" addr 1)"

# run_side SIDE: one run; prints the value, or nothing when the run failed.
run_side() {
	local dir="${1%%,*}" extra=() on0=() on1=() rx_pid hex
	if [[ "$1" == *,* ]]; then
		IFS=, read -r -a extra <<<"${1#*,}"
	fi
	local env=(env FI_PROVIDER=spray FI_PROVIDER_PATH="$dir" FI_SPRAY_IFACE=h0 "${extra[@]}")
	[ "$pin" = 1 ] && on0=(taskset -c 0) && on1=(taskset -c 1)
	if [ "$client" = pingpong ]; then
		ip netns exec "$ns1" "${env[@]}" timeout -k 5 60 "${on1[@]}" \
			fi_pingpong -p spray -e rdm -m tagged -S "$size" -I "$iters" >"$tmp/srv.log" 2>&1 &
		rx_pid=$!
		sleep 0.3
		ip netns exec "$ns0" "${env[@]}" timeout -k 5 60 "${on0[@]}" \
			fi_pingpong -p spray -e rdm -m tagged -S "$size" -I "$iters" "$addr1" >"$tmp/cli.log" 2>&1
		wait "$rx_pid" || return 0
		# The result line: bytes iters total time MB/sec usec/xfer Mxfers/sec.
		awk 'NF == 8 && $1 ~ /^[0-9]/ { v = $7 } END { if (v != "") print v }' "$tmp/cli.log"
	else
		ip netns exec "$ns1" "${env[@]}" timeout -k 5 60 "${on1[@]}" \
			"$tmp/fi_stream" recv -p spray -s "$size" -t 60 >"$tmp/rx.log" 2>&1 &
		rx_pid=$!
		hex=""
		for _ in $(seq 1 100); do
			hex="$(sed -n 's/^name=//p' "$tmp/rx.log")"
			[ -n "$hex" ] && break
			kill -0 "$rx_pid" 2>/dev/null || break
			sleep 0.05
		done
		if [ -z "$hex" ]; then
			kill "$rx_pid" 2>/dev/null
			wait "$rx_pid"
			return 0
		fi
		ip netns exec "$ns0" "${env[@]}" timeout -k 5 60 "${on0[@]}" \
			"$tmp/fi_stream" send -p spray -a "$hex" -s "$size" -d "$ms" -t 60 >"$tmp/tx.log" 2>&1
		wait "$rx_pid" || return 0
		sed -n 's/.*mb_per_sec=\([0-9.]*\).*/\1/p' "$tmp/rx.log" | tail -n 1
	fi
}

unit="us per transfer (lower is better)"
[ "$client" = stream ] && unit="MB/s (higher is better)"
log "$client, $size B, MTU $mtu, $runs repetitions; A = ${sides[0]}, B = ${sides[1]}; $unit"
vals_a=() vals_b=() ratios=() failed=0
for r in $(seq 1 "$runs"); do
	order=(0 1)
	[ $((r % 2)) -eq 0 ] && order=(1 0)
	va="" vb=""
	for k in "${order[@]}"; do
		v="$(run_side "${sides[$k]}")"
		if [ -z "$v" ]; then
			log "run $r: side $([ "$k" = 0 ] && echo A || echo B) failed"
			failed=1
		fi
		if [ "$k" = 0 ]; then va="$v"; else vb="$v"; fi
	done
	echo "run $r: A $va B $vb"
	[ -n "$va" ] && vals_a+=("$va")
	[ -n "$vb" ] && vals_b+=("$vb")
	[ -n "$va" ] && [ -n "$vb" ] && ratios+=("$(awk -v a="$va" -v b="$vb" 'BEGIN { printf "%.3f", b / a }')")
done

# summary NAME VALUES...: median (min-max).
summary() {
	local name="$1"
	shift
	[ "$#" -gt 0 ] || {
		echo "$name: no values"
		return
	}
	printf '%s\n' "$@" | sort -g | awk -v n="$name" '{ v[NR] = $1 } END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%s: median %g (%g-%g), %d runs\n", n, m, v[1], v[NR], NR }'
}
summary "A ${sides[0]}" "${vals_a[@]}"
summary "B ${sides[1]}" "${vals_b[@]}"
summary "B/A paired" "${ratios[@]}"
exit "$failed"
