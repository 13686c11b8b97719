#!/usr/bin/env bash
# bench-poll.sh: per-call costs on an MPI progress loop's path (idle fi_cq_read, posting a
# receive, fi_tinject / fi_tsend, send-to-receive-completion), spray against libfabric's
# tcp, under the system libfabric and (when the MPI wheels are set up) the bundled 2.5.
#
# Usage: scripts/bench-poll.sh [-n RUNS] [-i ITERS]
#   -n RUNS   repetitions per provider and libfabric, interleaved; medians shown (default 5)
#   -i ITERS  rounds per repetition (default 20000)
# Each repetition is one process (scripts/poll_cost.c) pinned to one CPU. Prints a
# markdown table; ratio = spray / tcp (lower is better).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

runs=5 iters=20000
while getopts "n:i:h" o; do
	case $o in
	n) runs=$OPTARG ;;
	i) iters=$OPTARG ;;
	*) sed -n '2,10p' "$0" && exit 2 ;;
	esac
done
[[ $runs =~ ^[1-9][0-9]?$ ]] || die "-n must be 1..99"
[[ $iters =~ ^[0-9]+$ ]] || die "-i must be a number"

prov_dir=${PROVDIR:-$SPRAY_ROOT/build}
[ -e "$prov_dir/libspray-fi.so" ] || die "$prov_dir/libspray-fi.so missing (cargo build --release --lib && bash scripts/install.sh)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/poll_cost" "$SPRAY_ROOT/scripts/poll_cost.c" -lfabric || die "cc poll_cost.c (libfabric-dev)"

# libfabric builds to run under: the system one, and the one the MPI wheels bundle.
libs=("system:")
fab2=$SPRAY_ROOT/.venv-mpich/lib/mpich
[ -e "$fab2/libfabric.so.1" ] && libs+=("2.5:$fab2")
cpu=$(($(nproc) - 1))

one() { # one LIBDIR PROV -> "idle trecv tinject tsend recv_cq"
	LD_LIBRARY_PATH=$1 FI_PROVIDER=$2 FI_PROVIDER_PATH=$prov_dir FI_SPRAY_IFACE=lo FI_TCP_IFACE=lo \
		timeout 120 taskset -c "$cpu" "$tmp/poll_cost" "$iters" |
		sed -n 's/.*idle_cq_read_ns=\([0-9]*\) trecv_ns=\([0-9]*\) tinject_ns=\([0-9]*\) tsend_ns=\([0-9]*\) recv_cq_ns=\([0-9]*\).*/\1 \2 \3 \4 \5/p'
}
col_median() { # col_median COLUMN FILE
	awk -v c="$1" '{print $c}' "$2" | sort -n |
		awk '{v[NR]=$1} END{if (NR) print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'
}

names=(idle_cq_read trecv tinject tsend send_to_recv_cq)
echo "| libfabric | call (8 B) | spray ns | tcp ns | ratio |"
echo "|---|---|---|---|---|"
for l in "${libs[@]}"; do
	label=${l%%:*} dir=${l#*:}
	: >"$tmp/spray" && : >"$tmp/tcp"
	for _ in $(seq "$runs"); do
		one "$dir" spray >>"$tmp/spray" || die "poll_cost over spray failed ($label)"
		# libfabric 1.17's tcp;ofi_rxm never completes the in-process
		# connection of this test (posts stay EAGAIN): shown as n/a.
		one "$dir" tcp >>"$tmp/tcp" 2>/dev/null || echo "bench-poll.sh: tcp failed under libfabric $label" >&2
	done
	for c in 1 2 3 4 5; do
		s=$(col_median "$c" "$tmp/spray")
		t=$(col_median "$c" "$tmp/tcp")
		t=${t:-n/a}
		r=$(awk -v s="$s" -v t="$t" 'BEGIN{if (t+0>0) printf "%.2f", s/t; else print "n/a"}')
		echo "| $label | ${names[$((c - 1))]} | $s | $t | $r |"
	done
done
echo
echo "(median of $runs runs x $iters rounds each, one CPU; load average $(cut -d' ' -f1-3 /proc/loadavg))"
