#!/usr/bin/env bash
# bench.sh - OSU-style latency and bandwidth through each available MPI over spray and
# over a baseline provider (tcp) in the same run, repetitions interleaved, median of N;
# prints a markdown table with ratios and writes results/mpi-bench-<date>.md.
#
# usage: mpi-tests/bench.sh [-n RUNS] [-m "MPI..."] [-p "PROV BASELINE"] [-q] [-H [-U]]
#   -n RUNS   repetitions per combination (default 3; median reported)
#   -m MPIS   default "ompi4 ompi5 mpich impi" (unavailable ones are left out)
#   -p PROVS  providers, first is measured, second the baseline (default "spray tcp")
#   -q        quick: fewer iterations (for a smoke check of the script itself)
#   -H        across hosts: rank 0 on host 0, rank 1 on host 1 of scripts/hosts.sh
#             (over the ECMP fabric; see run.sh -H), providers on h0
#   -U        with -H: bring the testbed up (scripts/hosts.sh up 2 $MPI_HOSTS_UP_ARGS,
#             e.g. MPI_HOSTS_UP_ARGS="--mtu 9000") and down at the end
# env: PROVDIR as for run.sh (spray defaults to <repo>/build), LAUNCH_TIMEOUT,
#      BW_MAX (largest bandwidth size in bytes, default 1048576),
#      FI_SPRAY_IFACE (default lo, as tcp gets FI_TCP_IFACE=lo in lib.sh; h0 with -H),
#      SPRAY_HOSTS_PREFIX (with -H, default sprh-).
set -u
. "$(dirname "$0")/lib.sh"

RUNS=3 MPIS="ompi4 ompi5 mpich impi" PROVS="spray tcp" QUICK=0 UP=0
MPI_HOSTS=0
while getopts "n:m:p:qHUh" o; do
    case $o in
    n) RUNS=$OPTARG ;;
    m) MPIS=$OPTARG ;;
    p) PROVS=$OPTARG ;;
    q) QUICK=1 ;;
    H) MPI_HOSTS=2 ;;
    U) UP=1 ;;
    *) sed -n '2,20p' "$0"; exit 2 ;;
    esac
done
where="2 ranks on one machine ($(nproc) cores)"
if [ "$MPI_HOSTS" -gt 0 ]; then
    if [ $UP = 1 ]; then
        trap 'bash "$HOSTS_SH" down' EXIT
        trap 'exit 143' TERM
        trap 'exit 130' INT
        # shellcheck disable=SC2086 # a list of options on purpose
        bash "$HOSTS_SH" up 2 ${MPI_HOSTS_UP_ARGS:-} >&2 || { echo "bench.sh: scripts/hosts.sh up failed" >&2; exit 2; }
    fi
    why=$(hosts_missing 2)
    [ -z "$why" ] || { echo "bench.sh: -H: $why" >&2; exit 2; }
    export FI_SPRAY_IFACE=h0
    where="2 ranks on 2 hosts (namespaces $SPRAY_HOSTS_PREFIX""h0, h1 on one $(nproc)-core machine) over $(bash "$HOSTS_SH" get LINKS) ECMP links, MTU $(bash "$HOSTS_SH" get MTU), rate $(bash "$HOSTS_SH" get RATE), offloads $(bash "$HOSTS_SH" get OFFLOADS)"
fi
[[ $RUNS =~ ^[1-9][0-9]?$ ]] || { echo "bench.sh: -n must be 1..99" >&2; exit 2; }
read -r P1 P2 <<<"$PROVS"
P2=${P2:-tcp}

# bandwidth sizes: 1 MiB up to BW_MAX bytes (default 1 MiB: a slow provider at
# 30 MB/s would otherwise take minutes per run)
BW_MAX=${BW_MAX:-1048576}
if [ $QUICK = 1 ]; then
    LAT=(-t latency -m 8:1048576 -i 100 -I 10 -x 10)
    BW=(-t bw -m "1048576:$BW_MAX" -i 3 -I 3 -x 1 -W 16)
else
    # enough iterations that one run lasts about a second: a run of a few ms
    # measures the scheduler of this shared 2-core machine more than the fabric.
    # Sizes up to 8 KiB: 10000 iterations, OSU's own count (5000 left the 8 B
    # medians of one provider 4.9-8.3 us apart between runs of the table).
    LAT=(-t latency -m 8:1048576 -i 10000 -I 100 -x 200)
    BW=(-t bw -m "1048576:$BW_MAX" -i 30 -I 30 -x 3 -W 64)
fi

provdir_for() { # provdir_for PROV -> directory for FI_PROVIDER_PATH ("" for built-ins)
    if [ "$1" = spray ]; then
        local d=${PROVDIR:-$REPO/build} src=$REPO/target/release/libspray_fi.so
        if [ -z "${PROVDIR:-}" ] && [ -e "$src" ] && { [ ! -e "$d/libspray-fi.so" ] || [ "$src" -nt "$d/libspray-fi.so" ]; }; then
            mkdir -p "$d" && cp "$src" "$d/libspray-fi.so"
        fi
        echo "$d"
    elif [ "$1" = "$P1" ]; then
        echo "${PROVDIR:-}"
    fi
}
for p in $P1 $P2; do
    d=$(provdir_for "$p")
    if [ -n "$d" ] && [ ! -e "$d/lib$p-fi.so" ]; then
        echo "bench.sh: $d/lib$p-fi.so missing (cargo build --release --lib)" >&2
        exit 2
    fi
done

# Both providers on the loopback interface. Two ranks on one host talk over lo
# whichever local address they use (the kernel routes local addresses there),
# and tcp, sized by that route, sends 64 KiB segments. spray sizes its
# datagrams by the interface it is bound to: left to choose (first non-loopback
# interface, here eth0 with MTU 1400) it would send 1372-byte datagrams, 48x
# as many packets per MiB, and the table would compare MTUs, not transports.
# The run inherits this into every rank (mpirun/mpiexec pass the environment
# to local processes).
export FI_SPRAY_IFACE=${FI_SPRAY_IFACE:-lo}

RAW=$(mktemp)
LOGDIR=$MT_DIR/logs
mkdir -p "$LOGDIR"
if [ "$MPI_HOSTS" -gt 0 ] && [ $UP = 1 ]; then
    trap 'rm -f "$RAW"; bash "$HOSTS_SH" down' EXIT
else
    trap 'rm -f "$RAW"' EXIT
fi
avail=()
for m in $MPIS; do
    why=$(mpi_missing "$m")
    if [ -n "$why" ] || [ "$m" = mpi4py ]; then
        echo "# leaving out $m: ${why:-no C benchmark for mpi4py}" >&2
        continue
    fi
    mpi_build "$m" || { echo "# leaving out $m: build failed" >&2; continue; }
    avail+=("$m")
done
[ ${#avail[@]} -gt 0 ] || { echo "bench.sh: no MPI available (mpi-tests/setup.sh)" >&2; exit 2; }

HTAG=""
[ "$MPI_HOSTS" -gt 0 ] && HTAG=-hosts
t_start=$(date +%s)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for m in "${avail[@]}"; do
    mpi_build "$m" >/dev/null
    for r in $(seq 1 "$RUNS"); do
        for p in $P1 $P2; do # interleaved so drift of the machine hits both alike
            mpi_launch "$m" "$p" "$(provdir_for "$p")" 2
            for kind in LAT BW; do
                if [ $kind = LAT ]; then args=("${LAT[@]}"); else args=("${BW[@]}"); fi
                log=$LOGDIR/bench-$m-$p-$kind-$r$HTAG.log
                "${LAUNCH[@]}" "$BIN_DIR/osu" "${args[@]}" >"$log" 2>&1 </dev/null
                rc=$?
                [ "$MPI_HOSTS" -gt 0 ] && hosts_reap 2 >/dev/null
                if [ $rc -ne 0 ] || ! grep -aEq "$VERIFY_RE" "$log" || ! grep -aEq "$VERIFY2_RE" "$log" || grep -aEq "$REJECT_RE" "$log"; then
                    echo "# $m/$p $kind run $r FAILED (exit $rc), log $log" >&2
                    continue
                fi
                awk -v m="$m" -v p="$p" -v r="$r" '$1 ~ /^(latency|bw)$/ && NF == 4 { print m, p, $1, $2, $3, r }' "$log" >>"$RAW"
            done
        done
    done
    echo "# $m done ($(( $(date +%s) - t_start ))s)" >&2
done

date_tag=$(date -u +%Y-%m-%d)
out_dir=$REPO/results
mkdir -p "$out_dir"
out=$out_dir/mpi-bench-$date_tag.md
[ "$MPI_HOSTS" -gt 0 ] && out=$out_dir/mpi-bench-hosts-mtu$(bash "$HOSTS_SH" get MTU)-$date_tag.md
{
    echo "# MPI OSU-style benchmark: $P1 vs $P2 ($(date -u '+%Y-%m-%d %H:%M UTC'))"
    echo
    echo "$where, shared memory off, median of $RUNS runs"
    echo "(FI_SPRAY_IFACE=$FI_SPRAY_IFACE; load average at start $load0, at end $(cut -d' ' -f1-3 /proc/loadavg))"
    echo "(runs interleaved $P1/$P2). Latency: half round trip in us (lower is better);"
    echo "bandwidth: window of ${BW[-1]} Isends + ack, MB/s = 1e6 B/s (higher is better)."
    echo "ratio = $P1 / $P2 of the medians; paired = median (and range) of $P1 / $P2 over the"
    echo "runs, each ratio taken between the two back-to-back runs of one repetition (the"
    echo "machine's drift between repetitions cancels). Generated by mpi-tests/bench.sh."
    echo
    echo "| MPI | test | size (B) | $P1 | $P2 | ratio | paired (range) |"
    echo "|---|---|---:|---:|---:|---:|---:|"
    sort -k1,1 -k3,3 -k4,4n "$RAW" | awk -v p1="$P1" -v p2="$P2" '
        function median(s,    a, n, i, j, t) {
            n = split(s, a, " ")
            for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        { k = $1 SUBSEP $3 SUBSEP $4; v[k, $2] = v[k, $2] " " $5; run[k, $6, $2] = $5; if ($6 > runs) runs = $6
          if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
        END {
            for (i = 1; i <= n; i++) {
                split(order[i], f, SUBSEP)
                a = (order[i], p1) in v ? median(v[order[i], p1]) : ""
                b = (order[i], p2) in v ? median(v[order[i], p2]) : ""
                r = (a != "" && b != "" && b > 0) ? sprintf("%.2f", a / b) : "-"
                pl = ""; lo = ""; hi = ""
                for (j = 1; j <= runs; j++) {
                    if (!((order[i], j, p1) in run) || !((order[i], j, p2) in run) || run[order[i], j, p2] <= 0) continue
                    q = run[order[i], j, p1] / run[order[i], j, p2]
                    pl = pl " " q
                    if (lo == "" || q < lo) lo = q
                    if (hi == "" || q > hi) hi = q
                }
                pr = pl == "" ? "-" : sprintf("%.2f (%.2f-%.2f)", median(pl), lo, hi)
                unit = f[2] == "latency" ? "us" : "MB/s"
                printf "| %s | %s %s | %s | %s | %s | %s | %s |\n", f[1], f[2], unit, f[3], a == "" ? "-" : a, b == "" ? "-" : b, r, pr
            }
        }'
} >"$out"
cat "$out"
echo "# written to $out ($(( $(date +%s) - t_start ))s)" >&2
