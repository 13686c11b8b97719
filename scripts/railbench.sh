#!/usr/bin/env bash
# railbench.sh [-n REPS] [--rate MBIT] [--secs S] [--size BYTES] [--out FILE]: multi-rail benchmark.
#
# One flow's bandwidth over one NIC against two NICs (multi-rail, FI_SPRAY_RAILS=1), and
# a NIC taken down mid-flow. Two hosts (namespaces sprr-rb-a and sprr-rb-b, or
# SPRAY_RAILBENCH_PREFIX-a/-b) joined by two veth pairs, r0 (198.18.130.0/24) and r1
# (198.18.131.0/24): each host has two NICs. Every NIC is rate-limited with TBF (--rate,
# default 400 Mbit/s, both directions) because on this 2-core shared machine a veth is
# not a bottleneck: the CPU is (spray streams 0.4-1 GB/s between namespaces, a veth
# carries more), so without a limit "two NICs" would measure the same CPU twice. With the
# NIC the bottleneck, a second NIC can double one flow's rate, and what is measured is the
# provider's use of it.
#
# Each repetition runs, in alternating order (one NIC first in odd repetitions, two first
# in even ones), scripts/fi_stream.c (tagged messages of --size bytes, default 1 MiB, for
# --secs seconds, default 3) from host a to host b:
#   one NIC:  FI_SPRAY_IFACE=r0 (the domain r0);
#   two NICs: FI_SPRAY_IFACE=r0,r1 FI_SPRAY_RAILS=1 (the domain r0+r1, offered first).
# The receiver's rate of each run; the table gives the median (and range) of each and
# the median of the per-repetition ratio. Then, -n times, the NIC-down case: two NICs, a
# stream of 2 x --secs seconds, `ip link set r1 down` in host a after --secs / 2 seconds:
# the stream must complete with every message received (fi_stream's receiver counts them
# against the sender's count), the rate before and after from the receiver's 100 ms ticks.
# The machine is shared: each run waits up to 10 s for a load average below 2.
#
# Writes the table to --out (default results/railbench-<date>.md) and stdout. Needs root,
# ip, tc, ethtool, cc and libfabric headers; builds fi_stream into a temporary directory.
# Tears the testbed down on exit (also on failure or Ctrl-C). Exit 1 if a run failed.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REPS=5
RATE=400
SECS=3
SIZE=1048576
OUT=""
while [ $# -gt 0 ]; do
	case "$1" in
	-n) REPS=$2; shift 2 ;;
	--rate) RATE=$2; shift 2 ;;
	--secs) SECS=$2; shift 2 ;;
	--size) SIZE=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done
if ! [[ $REPS =~ ^[0-9]+$ && $REPS -ge 1 && $REPS -le 50 ]]; then die "-n: 1..50"; fi
if ! [[ $RATE =~ ^[0-9]+$ && $RATE -ge 10 ]]; then die "--rate: Mbit/s, >= 10"; fi
if ! [[ $SECS =~ ^[0-9]+$ && $SECS -ge 1 && $SECS -le 60 ]]; then die "--secs: 1..60"; fi
if ! [[ $SIZE =~ ^[0-9]+$ && $SIZE -ge 1 ]]; then die "--size: bytes"; fi
need_root
need_cmd ip tc ethtool cc timeout awk
find_cargo || true

PFX=${SPRAY_RAILBENCH_PREFIX:-sprr-rb}
A=$PFX-a
B=$PFX-b
stamp=$(date -u +%Y%m%d-%H%M%S)
[ -n "$OUT" ] || OUT="$SPRAY_ROOT/results/railbench-$stamp.md"
mkdir -p "$(dirname "$OUT")"
work=$(mktemp -d /tmp/railbench.XXXXXX)

# The library: target/release's, copied (a rebuild during the run changes nothing).
lib="$SPRAY_ROOT/target/release/libspray_fi.so"
[ -f "$lib" ] || die "no $lib: cargo build --release first"
mkdir -p "$work/prov"
cp "$lib" "$work/prov/libspray-fi.so"

# shellcheck disable=SC2317 # called through the trap
cleanup() {
	local n
	for n in "$A" "$B"; do
		# Anything a bounded run left behind in our namespaces, by PID.
		for p in $(ip netns pids "$n" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
		ip netns del "$n" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cc -O2 -Wall -o "$work/fi_stream" "$SPRAY_ROOT/scripts/fi_stream.c" -lfabric || die "building fi_stream"

# Testbed.
for n in "$A" "$B"; do
	ip netns del "$n" 2>/dev/null || true
	ip netns add "$n"
	ip -n "$n" link set lo up
done
for i in 0 1; do
	ip -n "$A" link add "r$i" type veth peer name "r$i" netns "$B"
	ip -n "$A" addr add "198.18.13$i.1/24" dev "r$i"
	ip -n "$B" addr add "198.18.13$i.2/24" dev "r$i"
	for n in "$A" "$B"; do
		ip -n "$n" link set "r$i" up
		# Offloads off: TBF then shapes packets, not 64 KB super-packets.
		ip netns exec "$n" ethtool -K "r$i" tso off gso off gro off >/dev/null 2>&1 || true
		tc -n "$n" qdisc add dev "r$i" root tbf rate "${RATE}mbit" burst 32kb limit 262144
	done
done

wait_idle() {
	local i
	for i in $(seq 20); do
		awk '{ exit !($1 < 2) }' /proc/loadavg && return 0
		sleep 0.5
	done
}

# run NAME MS [DOWN_MS] -> prints the receiver's MB/s (10^6 B/s) or "fail"; logs in $work.
# Env for both sides from the variables IFACES and RAILS.
run() {
	local ms=$2 down=${3:-} log="$work/$1" hex="" i rc=0
	local w=$((67108864 / SIZE))
	[ "$w" -le 64 ] || w=64
	[ "$w" -ge 2 ] || w=2
	local env=(env FI_PROVIDER=spray FI_PROVIDER_PATH="$work/prov" FI_SPRAY_IFACE="$IFACES" FI_SPRAY_RAILS="$RAILS")
	local limit=$((ms / 1000 + 30))
	ip netns exec "$B" "${env[@]}" timeout "$limit" "$work/fi_stream" recv -p spray -s "$SIZE" -w "$w" \
		-t "$limit" -T 100 >"$log.rx" 2>"$log.ticks" &
	local rx=$!
	for i in $(seq 200); do
		hex=$(sed -n 's/^name=//p' "$log.rx")
		[ -n "$hex" ] && break
		sleep 0.05
	done
	if [ -z "$hex" ]; then
		kill "$rx" 2>/dev/null || true
		wait "$rx" 2>/dev/null || true
		echo fail
		return
	fi
	local down_pid=""
	if [ -n "$down" ]; then
		(sleep "$(awk -v m="$down" 'BEGIN { print m / 1000 }')" && ip -n "$A" link set r1 down) &
		down_pid=$!
	fi
	ip netns exec "$A" "${env[@]}" timeout "$limit" "$work/fi_stream" send -p spray -a "$hex" -s "$SIZE" \
		-d "$ms" -w "$w" -t "$limit" >"$log.tx" 2>&1 || rc=1
	wait "$rx" || rc=1
	if [ -n "$down_pid" ]; then
		wait "$down_pid" || true
		ip -n "$A" link set r1 up
		# The route of r1 comes back with the link; wait for it.
		for i in $(seq 50); do
			ip -n "$A" route get 198.18.131.2 >/dev/null 2>&1 && break
			sleep 0.1
		done
	fi
	if [ "$rc" -ne 0 ]; then
		echo fail
		return
	fi
	sed -n 's/.*mb_per_sec=\([0-9.]*\).*/\1/p' "$log.rx" | tail -1
}

# Rate in MB/s between two tick times (s) of a run's receiver ticks.
tick_rate() {
	awk -v a="$2" -v b="$3" '/^tick/ {
		split($2, t, "="); split($3, y, "=")
		if (t[2] >= a && !ta) { ta = t[2]; ya = y[2] }
		if (t[2] <= b) { tb = t[2]; yb = y[2] }
	} END { if (tb > ta) printf "%.1f\n", (yb - ya) / (tb - ta) / 1e6; else print "n/a" }' "$1"
}

one=()
two=()
ratio=()
failed=0
ms=$((SECS * 1000))
for rep in $(seq "$REPS"); do
	order="one two"
	[ $((rep % 2)) -eq 0 ] && order="two one"
	for k in $order; do
		wait_idle
		if [ "$k" = one ]; then
			IFACES=r0 RAILS=0
		else
			IFACES=r0,r1 RAILS=1
		fi
		r=$(run "$k-$rep" "$ms")
		log "rep $rep $k NIC(s): $r MB/s"
		if [ "$r" = fail ] || [ -z "$r" ]; then
			failed=1
			eval "r_$k=fail"
			continue
		fi
		eval "r_$k=$r"
		if [ "$k" = one ]; then one+=("$r"); else two+=("$r"); fi
	done
	# shellcheck disable=SC2154 # set by eval above
	if [ "$r_one" != fail ] && [ "$r_two" != fail ]; then
		ratio+=("$(awk -v a="$r_two" -v b="$r_one" 'BEGIN { printf "%.3f\n", a / b }')")
	fi
done

# The NIC-down case: r1 down at half the stream.
down_rows=()
IFACES=r0,r1 RAILS=1
for rep in $(seq "$REPS"); do
	wait_idle
	r=$(run "down-$rep" $((2 * ms)) $((ms / 2)))
	t=$work/down-$rep.ticks
	sent=$(sed -n 's/.*msgs=\([0-9]*\).*/\1/p' "$work/down-$rep.tx" | tail -1)
	got=$(sed -n 's/.*msgs=\([0-9]*\).*/\1/p' "$work/down-$rep.rx" | tail -1)
	# Ticks count from the first data message, which comes a moment after the sender starts.
	before=$(tick_rate "$t" 0.2 "$(awk -v s="$SECS" 'BEGIN { print s / 2 - 0.1 }')")
	after=$(tick_rate "$t" "$(awk -v s="$SECS" 'BEGIN { print s / 2 + 0.5 }')" "$(awk -v s="$SECS" 'BEGIN { print 2 * s - 0.2 }')")
	status=ok
	if [ "$r" = fail ] || [ -z "$sent" ] || [ "$sent" != "$got" ]; then
		status=FAIL
		failed=1
	fi
	log "NIC down, rep $rep: $status, sent ${sent:-?} received ${got:-?}, before $before MB/s after $after MB/s"
	down_rows+=("| $rep | ${sent:-n/a} | ${got:-n/a} | $before | $after | $status |")
done

range() {
	[ "$#" -gt 0 ] || {
		echo n/a
		return
	}
	printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'
}
m1=$(median "${one[@]}")
m2=$(median "${two[@]}")
mr=$(median "${ratio[@]}")
nic_mb=$(awk -v r="$RATE" 'BEGIN { printf "%.1f", r / 8 }')
{
	echo "# railbench $stamp"
	echo
	echo "Command: \`scripts/railbench.sh -n $REPS --rate $RATE --secs $SECS --size $SIZE\`. Two hosts"
	echo "(namespaces) joined by two veth NICs each side, each NIC TBF-limited to $RATE Mbit/s"
	echo "($nic_mb MB/s of IP packets) both ways; one flow of fi_stream (tagged $SIZE-byte messages)"
	echo "for $SECS s, receiver's rate in MB/s (10^6 B/s of payload), $REPS interleaved repetitions;"
	echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); $(git -C "$SPRAY_ROOT" log -1 --format='%h %s' 2>/dev/null | cut -c1-80)."
	echo
	echo "| NICs | median MB/s | range | runs |"
	echo "|---|---|---|---|"
	echo "| 1 (FI_SPRAY_IFACE=r0) | $m1 | $(range "${one[@]}") | ${one[*]} |"
	echo "| 2 (FI_SPRAY_IFACE=r0,r1 FI_SPRAY_RAILS=1) | $m2 | $(range "${two[@]}") | ${two[*]} |"
	echo
	echo "Two NICs / one NIC, median of the per-repetition ratios: **$mr** (each: ${ratio[*]}; target >= 1.8)."
	echo
	echo "NIC down mid-flow: two NICs, a stream of $((2 * SECS)) s, host a's r1 set down after $(awk -v s="$SECS" 'BEGIN { print s / 2 }') s"
	echo "(and up again after the run). Messages the sender sent and the receiver received (fi_stream's"
	echo "receiver waits for every message the sender's end message counts), rate before (0.2 s to the"
	echo "down) and after (0.5 s after it to the end) from the receiver's 100 ms ticks:"
	echo
	echo "| rep | sent | received | MB/s before | MB/s after | |"
	echo "|---|---|---|---|---|---|"
	printf '%s\n' "${down_rows[@]}"
} | tee "$OUT"
log "table: $OUT"
exit "$failed"
