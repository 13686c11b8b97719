#!/usr/bin/env bash
# faultbench.sh - IMB collectives across hosts under faults, spray against tcp in the same
# run: IMB-MPI1 Alltoall and Allreduce times, repetitions interleaved (spray, tcp, tcp,
# spray, ...), each after waiting for an idle machine; medians, ranges, spray/tcp ratios,
# spray's retransmission timeouts (FI_SPRAY_STATS) and the issue's targets as a markdown table.
#
# usage: mpi-tests/faultbench.sh [-H N] [-P PPN] [-n RUNS] [-c "COND..."] [-b "BENCH..."]
#                                [-s "SIZE..."] [-m MPI] [-o DIR] [-q]
#   -H N    hosts (default 4), -P PPN ranks per host (default 1)
#   -n      repetitions per condition and provider (default 5)
#   -c      conditions (default "none loss slow incast"), each on its own testbed built and
#           removed here, with faults.sh's knobs (see there): none = the ECMP fabric;
#           loss = FAULT_LOSS % (1) of UDP and of tcp's connections; slow = links at
#           SLOW_RATE (200mbit here, see below), link FAULT_LINK SLOW_FACTOR (10) x slower;
#           incast = the hosts behind one switch, every downlink INCAST_RATE (500mbit) with
#           INCAST_BUF (65536) bytes of buffer; also blackhole and flap (link FAULT_LINK
#           dead / flapping)
#   -b      IMB-MPI1 benchmarks (default "Alltoall Allreduce")
#   -s      message sizes in bytes (default "4096 65536 1048576")
#   -m      impi (default; IMB-MPI1 is Intel MPI's) or mpich (the same IMB-MPI1 binary over
#           MPICH's libmpi.so.12, same ABI)
#   -o DIR  results (default <repo>/results/faultbench-<date>): table.md, runs.tsv, logs/,
#           stats/ (spray's dumps per run)
#   -q      quick: 1 repetition, IMB -iter 20 -time 2 (checks the script, not the fabric)
# env: SPRAY_HOSTS_PREFIX (default sprfb-), IMB_ITER (default 100: at most that many
#      repetitions per size), IMB_TIME (s per size, default 10), LAUNCH_TIMEOUT (s per
#      launch, default 600), IDLE_WAIT_S (most seconds to wait for an idle machine before a
#      run, default 10; the idle share seen is recorded), FAULTBENCH_NICE (the niceness
#      every launch runs at, default -10, 0 to leave it: on a machine whose CPUs other work
#      keeps busy it stands in for the idle machine waited for; both providers alike),
#      PROVDIR, FI_SPRAY_*, MPI_YIELD.
# Time = IMB's t_avg (usec, the mean over ranks of each rank's mean time per call).
# Targets (issue 18): spray at most tcp's time everywhere; with loss and on the slow link at
# most half of tcp's at 64 KiB and 1 MiB; no RTO in the loss-free incast runs.
# Exit status: 0 if every run produced its numbers, 1 if some failed (cells n/a), 2 on usage
# or a missing prerequisite. Targets missed do not change it: the table says so.
set -u
export SPRAY_HOSTS_PREFIX=${SPRAY_HOSTS_PREFIX:-sprfb-}
LAUNCH_TIMEOUT=${LAUNCH_TIMEOUT:-600}
# shellcheck source=mpi-tests/lib.sh
. "$(dirname "$0")/lib.sh"

NH=4 PPN=1 RUNS=5 CONDS="none loss slow incast" BENCHES="Alltoall Allreduce" SIZES="4096 65536 1048576"
BMPI=impi OUT="" QUICK=0
while getopts "H:P:n:c:b:s:m:o:qh" o; do
    case $o in
    H) NH=$OPTARG ;;
    P) PPN=$OPTARG ;;
    n) RUNS=$OPTARG ;;
    c) CONDS=$OPTARG ;;
    b) BENCHES=$OPTARG ;;
    s) SIZES=$OPTARG ;;
    m) BMPI=$OPTARG ;;
    o) OUT=$OPTARG ;;
    q) QUICK=1 ;;
    *) sed -n '2,/^set -u/p' "$0" | grep '^#'; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
usage_err() { echo "faultbench.sh: $*" >&2; exit 2; }
[ $# -eq 0 ] || usage_err "unexpected arguments: $*"
[[ $NH =~ ^[2-8]$ ]] || usage_err "-H must be 2..8"
[[ $PPN =~ ^[1-4]$ ]] || usage_err "-P must be 1..4"
[[ $RUNS =~ ^[1-9][0-9]?$ ]] || usage_err "-n must be 1..99"
for c in $CONDS; do
    case $c in none | loss | slow | incast | blackhole | flap) ;; *) usage_err "unknown condition '$c'" ;; esac
done
for s in $SIZES; do [[ $s =~ ^[0-9]+$ ]] || usage_err "-s: '$s' is not bytes"; done
case $BMPI in impi | mpich) ;; *) usage_err "-m impi or mpich" ;; esac
IMB_ITER=${IMB_ITER:-100} IMB_TIME=${IMB_TIME:-10} IDLE_WAIT_S=${IDLE_WAIT_S:-10} NICE=${FAULTBENCH_NICE:--10}
[[ $NICE =~ ^-?[0-9]+$ ]] || usage_err "FAULTBENCH_NICE must be a number"
[ $QUICK = 1 ] && { RUNS=1 IMB_ITER=20 IMB_TIME=2; }
# The slow-link fabric at 200 Mbit/s per link, not faults.sh's 1 Gbit/s: a benchmark of
# spreading over links needs links, not CPUs, to be the limit. With shaping the fabric runs
# without offloads, and every packet crosses both routers' TBFs on the sending host's CPU:
# on a 2-CPU machine four raw UDP streams over 4 links of 1 Gbit/s delivered 1.7 Gbit/s in
# all, and spray's one-way 1 MiB stream (fi_stream) 131 MB/s against tcp's 119 (both at the
# CPUs' limit); at 200 Mbit/s per link 85 against 24 MB/s (spray on 4 links, tcp on 1).
SLOW_RATE=${SLOW_RATE:-200mbit}
# shellcheck source=mpi-tests/faultlib.sh
. "$MT_DIR/faultlib.sh"
NP=$((NH * PPN))
MPI_HOSTS=$NH

[ "$(id -u)" -eq 0 ] || { echo "faultbench.sh: cannot run: needs root (network namespaces)" >&2; exit 2; }
why=$(mpi_missing impi)
[ "$BMPI" = mpich ] && why+=$(mpi_missing mpich)
[ -z "$why" ] || { echo "faultbench.sh: cannot run: $why" >&2; exit 2; }
IMB=$VENV_IMPI/bin/IMB-MPI1
[ -x "$IMB" ] || { echo "faultbench.sh: cannot run: $IMB missing (mpi-tests/setup.sh)" >&2; exit 2; }

# spray's library: as run.sh finds it, copied once so that rebuilds meanwhile change nothing
src_dir=${PROVDIR:-$REPO/build}
src=$REPO/target/release/libspray_fi.so
if [ -z "${PROVDIR:-}" ] && [ -e "$src" ] && { [ ! -e "$src_dir/libspray-fi.so" ] || [ "$src" -nt "$src_dir/libspray-fi.so" ]; }; then
    mkdir -p "$src_dir" && cp "$src" "$src_dir/libspray-fi.so"
fi
[ -e "$src_dir/libspray-fi.so" ] || { echo "faultbench.sh: cannot run: $src_dir/libspray-fi.so missing (cargo build --release --lib)" >&2; exit 2; }
prov_tmp=$(mktemp -d /tmp/faultbench-provider.XXXXXX)
cp "$src_dir/libspray-fi.so" "$prov_tmp/"
SPRAY_DIR=$prov_tmp

stamp=$(date -u +%Y%m%d-%H%M%S)
OUT=${OUT:-$REPO/results/faultbench-$stamp}
mkdir -p "$OUT/logs" "$OUT/stats" || usage_err "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
TSV=$OUT/runs.tsv
: >"$TSV"
LENS=$OUT/msglen
read -ra SIZE_LIST <<<"$SIZES"
printf '%s\n' "${SIZE_LIST[@]}" >"$LENS"

cleanup() {
    hosts_reap "$NH" >/dev/null 2>&1
    bash "$HOSTS_SH" down >/dev/null 2>&1
    rm -rf "$prov_tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
say() { echo "faultbench.sh: $*" >&2; }

# Waits (at most IDLE_WAIT_S) until the CPUs were >= 80 % idle over 0.5 s (hostbench.sh's
# wait_idle, longer); prints the idle share seen last.
wait_idle() {
    local i a b idle=0 n=$((IDLE_WAIT_S * 2))
    for i in $(seq 1 "$n"); do
        a=$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
        sleep 0.5
        b=$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
        idle=$(awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " "); d = y[2] - x[2]
            printf "%.2f", (d > 0 ? (y[1] - x[1]) / d : 0) }')
        awk -v i="$idle" 'BEGIN { exit !(i >= 0.8) }' && break
    done
    echo "$idle"
}


# one_run COND PROV REP -> runs IMB once; appends its numbers to the TSV; 0 if it produced them
one_run() {
    local c=$1 p=$2 r=$3 log pdir="" rc idle fab0 fab_total stats="" t0 dt
    log=$OUT/logs/$c-$p-r$r.log
    [ "$p" = spray ] && pdir=$SPRAY_DIR
    unset FI_SPRAY_STATS
    if [ "$p" = spray ]; then
        rm -f "$OUT/stats/$c-r$r-"*.jsonl
        export FI_SPRAY_STATS=$OUT/stats/$c-r$r-%p.jsonl FI_SPRAY_STATS_MS=${FI_SPRAY_STATS_MS:-2000}
    fi
    mpi_launch impi "$p" "$pdir" "$NP"
    local launch=("${LAUNCH[@]}")
    if [ "$BMPI" = mpich ]; then
        # the same IMB binary over MPICH's libmpi.so.12 (the MPICH ABI, which Intel MPI keeps)
        mpi_launch mpich "$p" "$pdir" "$NP"
        launch=("${LAUNCH[@]}" -genv LD_LIBRARY_PATH "$VENV_MPICH/lib")
    fi
    idle=$(wait_idle)
    fab0=$(fabric_snapshot)
    echo "+ ${launch[*]} $IMB ..." >"$log"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086 # BENCHES is a list
    setsid nice -n "$NICE" "${launch[@]}" "$IMB" -msglen "$LENS" -iter "$IMB_ITER" -time "$IMB_TIME" -npmin "$NP" \
        $BENCHES >>"$log" 2>&1 </dev/null &
    local lpid=$!
    wait "$lpid"
    rc=$?
    pkill -KILL -s "$lpid" 2>/dev/null
    hosts_reap "$NH" >/dev/null
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    read -r fab_total _ <<<"$(fabric_delta "$fab0" "$(fabric_snapshot)")"
    [ "$p" = spray ] && stats=$(python3 "$MT_DIR/spraystats.py" "$OUT/stats/$c-r$r-"*.jsonl 2>&1)
    local why=""
    if [ $rc -ne 0 ]; then
        why="exit $rc"
    elif ! grep -aEq "$VERIFY_RE" "$log" || ! grep -aEq "$VERIFY2_RE" "$log" || grep -aEq "$REJECT_RE" "$log"; then
        [ "$BMPI" = impi ] && why="the log does not show $p as the transport"
    fi
    [ -z "$why" ] && [ "${fab_total:-0}" -lt 100 ] && why="only ${fab_total:-0} packets crossed the fabric"
    if [ -n "$why" ]; then
        say "$c $p run $r FAILED: $why ($log)"
        printf '#fail\t%s\t%s\t%s\t%s\n' "$c" "$p" "$r" "$why ($log)" >>"$TSV"
        return 1
    fi
    # IMB's tables: "# Benchmarking NAME" then rows "#bytes #repetitions t_min t_max t_avg"
    # (TSV: cond bench bytes prov rep t_avg t_min t_max idle spray-stats secs)
    local rows
    rows=$(awk -v c="$c" -v p="$p" -v r="$r" -v idle="$idle" -v st="$stats" -v dt="$dt" '
        /^# Benchmarking / { b = $3; next }
        b != "" && $1 ~ /^[0-9]+$/ && NF == 5 { printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c, b, $1, p, r, $5, $3, $4, idle, st, dt }' "$log")
    if [ -z "$rows" ]; then
        say "$c $p run $r FAILED: no IMB result rows ($log)"
        printf '#fail\t%s\t%s\t%s\t%s\n' "$c" "$p" "$r" "no IMB result rows ($log)" >>"$TSV"
        return 1
    fi
    echo "$rows" >>"$TSV"
    say "$c $p run $r: ${dt}s, idle $idle before, $(echo "$rows" | awk -F'\t' '{ printf "%s %s %s us; ", $2, $3, $6 }')${stats:+spray $stats}"
    return 0
}

t_all=$(date +%s)
{
    echo "#meta command $0 -H $NH -P $PPN -n $RUNS -c \"$CONDS\" -b \"$BENCHES\" -s \"$SIZES\" -m $BMPI$([ $QUICK = 1 ] && echo " -q")"
    echo "#meta started $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "#meta machine $(nproc) CPUs, kernel $(uname -r)"
    echo "#meta tree $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null)$(git -C "$REPO" diff --quiet 2>/dev/null || echo +changes); spray sha256 $(sha256sum "$SPRAY_DIR/libspray-fi.so" | cut -c1-12)"
    echo "#meta spray_env $(env | grep '^FI_SPRAY_' | grep -v '^FI_SPRAY_STATS' | sort | tr '\n' ' ')"
    echo "#meta imb -msglen ($SIZES) -iter $IMB_ITER -time $IMB_TIME -npmin $NP $BENCHES; MPI $BMPI; $NH hosts x $PPN ranks; launches at niceness $NICE; MPI_YIELD=$MPI_YIELD"
    echo "#meta settings mtu=$FAULT_MTU loss=$FAULT_LOSS% link=$FAULT_LINK slow=$SLOW_RATE/$SLOW_FACTOR incast=$INCAST_RATE/$INCAST_BUF flap=${FLAP_DOWN_S}s/${FLAP_UP_S}s/$FLAP_MODE tcp_ports=$FAULT_TCP_PORTS"
    echo "#meta load_start $(cut -d' ' -f1-3 /proc/loadavg)"
} >>"$TSV"

failures=0
for c in $CONDS; do
    t0=$(date +%s)
    say "=== $c: scripts/hosts.sh up $NH $(up_args "$c")"
    # shellcheck disable=SC2046 # a list of options
    if ! up_out=$(bash "$HOSTS_SH" up "$NH" $(up_args "$c") 2>&1); then
        say "hosts.sh up failed: $up_out"
        printf '#fail\t%s\t-\t-\thosts.sh up failed\n' "$c" >>"$TSV"
        failures=$((failures + 1))
        continue
    fi
    echo "#stage $c $(echo "$up_out" | tail -1); $(inject "$c" 2>&1 | tr '\n' ' ')" >>"$TSV"
    q0=$(bash "$HOSTS_SH" qdisc 2>/dev/null | tail -n +2 | tr '\n' ';')
    for r in $(seq 1 "$RUNS"); do
        # interleaved: spray first in odd repetitions, tcp first in even ones
        order="spray tcp"
        [ $((r % 2)) -eq 0 ] && order="tcp spray"
        for p in $order; do
            one_run "$c" "$p" "$r" || failures=$((failures + 1))
        done
    done
    case $c in
    loss) ev="loss rules: $(bash "$HOSTS_SH" drops | awk '{ printf "udp_in=%d udp_dropped=%d (%.2f %%) tcp_dropped=%d", $1, $2, $1 ? 100 * $2 / $1 : 0, $3 }')" ;;
    slow | incast) ev="TBF before: $q0 after: $(bash "$HOSTS_SH" qdisc | tail -n +2 | tr '\n' ';')" ;;
    blackhole) ev="dropped by the dead link: $(bash "$HOSTS_SH" bad counts | tr '\n' ' ')" ;;
    *) ev="" ;;
    esac
    echo "#evidence $c $ev" >>"$TSV"
    echo "#stage_secs $c $(($(date +%s) - t0))" >>"$TSV"
    bash "$HOSTS_SH" down >/dev/null 2>&1
done
echo "#meta load_end $(cut -d' ' -f1-3 /proc/loadavg)" >>"$TSV"
echo "#meta total_secs $(($(date +%s) - t_all))" >>"$TSV"
python3 "$MT_DIR/faultbench_report.py" "$TSV" >"$OUT/table.md"
cat "$OUT/table.md"
say "results: $OUT/table.md, $TSV"
[ $failures -eq 0 ]
