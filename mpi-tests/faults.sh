#!/usr/bin/env bash
# faults.sh - the MPI test suites with their ranks on several hosts, under network faults:
# every MPI x fault x provider, each fault on a testbed of its own (scripts/hosts.sh, built
# and removed here), providers alternating; prints and writes a summary table.
#
# usage: mpi-tests/faults.sh [-H N] [-P PPN] [-m "MPI..."] [-p "PROV..."] [-f "FAULT..."]
#                            [-t "TEST..."] [-o DIR]
#   -H N    hosts (default 4); -P PPN ranks per host (default 1; NP = N x PPN)
#   -m      MPIs (default "ompi5 mpich impi mpi4py"; any of run.sh's)
#   -p      providers (default "spray tcp"); within a fault they alternate, the first one
#           first for the 1st, 3rd, ... MPI and last for the others
#   -f      faults (default "none loss blackhole flap slow"):
#           none       the K-link ECMP fabric (hosts.sh up N), nothing wrong
#           loss       FAULT_LOSS % (default 1) of the UDP arriving at every host dropped at
#                      random, and as much of libfabric tcp's connections (its listening
#                      ports are put in FAULT_TCP_PORTS, which the rules cover both ways)
#           blackhole  ECMP link FAULT_LINK (default 1) silently drops every UDP packet and
#                      tcp's (hosts.sh bad drop LINK 100), for the whole stage
#           flap       link FAULT_LINK flaps for the whole stage: FLAP_DOWN_S (2) s down,
#                      FLAP_UP_S (2) s up (hosts.sh bad flap; FLAP_MODE down (default): it
#                      loses carrier and the routers route around it; blackhole: it drops
#                      silently while "down" and the routers keep using it)
#           slow       every ECMP link shaped to SLOW_RATE (default 1gbit), link FAULT_LINK
#                      SLOW_FACTOR (default 10) times slower (hosts.sh up --rate; bad slow)
#           incast     the hosts behind one switch instead (hosts.sh up --topo incast), every
#                      downlink a TBF bottleneck of INCAST_RATE (default 500mbit) with an
#                      INCAST_BUF (default 65536) byte buffer
#   -t      only these of each MPI's tests (default: each MPI's whole list: p2p coll rma
#           thread osu; impi also imb-mpi1 imb-rma; mpi4py py-suite); an MPI left with none
#           is left out
#   -o DIR  results (default <repo>/results/faults-<date>): summary.md (the tables),
#           results.tsv (a line per launch), <fault>-<mpi>-<prov>.out (run.sh's output),
#           logs/<fault>/ (every launch's log), stats/<fault>/ (spray's FI_SPRAY_STATS dumps)
# env: SPRAY_HOSTS_PREFIX (default sprf-), FAULT_MTU (1500), FAULT_UP_ARGS (more hosts.sh up
#      options for every fault), LAUNCH_TIMEOUT (s per launch, default 240, lib.sh's),
#      TCP_DEAD_LINK_TIMEOUT (s per launch of tcp under blackhole, default 90: a TCP
#      connection hashed onto the dead link never recovers, each such launch hangs until
#      its bound), PROVDIR, every FI_SPRAY_* (reaches the ranks), MPI_YIELD (lib.sh).
# Every launch is bounded (run.sh: timeout per launch); a stage is bounded by STAGE_TIMEOUT
# (s, default 3600) for each run.sh. The testbed goes down at exit, also on a signal.
# Exit status: 0 when every launch of every provider but tcp passed (skips allowed; tcp's
# failures are listed, not counted: the baseline's own limits, mpi-tests/README.md), 1
# otherwise, 2 on usage or when nothing could run.
set -u
export SPRAY_HOSTS_PREFIX=${SPRAY_HOSTS_PREFIX:-sprf-}
# shellcheck source=mpi-tests/lib.sh
. "$(dirname "$0")/lib.sh"

NH=4 PPN=1 MPIS="ompi5 mpich impi mpi4py" PROVS="spray tcp" FAULTS="none loss blackhole flap slow"
TESTS="" OUT=""
while getopts "H:P:m:p:f:t:o:h" o; do
    case $o in
    H) NH=$OPTARG ;;
    P) PPN=$OPTARG ;;
    m) MPIS=$OPTARG ;;
    p) PROVS=$OPTARG ;;
    f) FAULTS=$OPTARG ;;
    t) TESTS=$OPTARG ;;
    o) OUT=$OPTARG ;;
    *) sed -n '2,/^set -u/p' "$0" | grep '^#'; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "faults.sh: unexpected arguments: $* (see -h)" >&2; exit 2; }
[[ $NH =~ ^[2-8]$ ]] || { echo "faults.sh: -H must be 2..8" >&2; exit 2; }
[[ $PPN =~ ^[1-4]$ ]] || { echo "faults.sh: -P must be 1..4" >&2; exit 2; }
for f in $FAULTS; do
    case $f in none | loss | blackhole | flap | slow | incast) ;;
    *) echo "faults.sh: unknown fault '$f' (none loss blackhole flap slow incast)" >&2; exit 2 ;;
    esac
done
# shellcheck source=mpi-tests/faultlib.sh
. "$MT_DIR/faultlib.sh"
TCP_DEAD_LINK_TIMEOUT=${TCP_DEAD_LINK_TIMEOUT:-90}
STAGE_TIMEOUT=${STAGE_TIMEOUT:-3600}
export LAUNCH_TIMEOUT

if [ "$(id -u)" -ne 0 ]; then
    echo "faults.sh: cannot run: needs root (network namespaces)" >&2
    exit 2
fi
read -ra MPI_LIST <<<"$MPIS"
read -ra PROV_LIST <<<"$PROVS"
avail=()
for m in "${MPI_LIST[@]}"; do
    why=$(mpi_missing "$m")
    if [ -n "$why" ]; then echo "faults.sh: leaving out $m: $why" >&2; else avail+=("$m"); fi
done
[ ${#avail[@]} -gt 0 ] || { echo "faults.sh: cannot run: no MPI available (mpi-tests/setup.sh)" >&2; exit 2; }
[ ${#PROV_LIST[@]} -gt 0 ] || { echo "faults.sh: -p: no provider" >&2; exit 2; }

stamp=$(date -u +%Y%m%d-%H%M%S)
OUT=${OUT:-$REPO/results/faults-$stamp}
mkdir -p "$OUT" || { echo "faults.sh: cannot create $OUT" >&2; exit 2; }
OUT=$(cd "$OUT" && pwd)
TSV=$OUT/results.tsv
: >"$TSV"

# What a run.sh stopped by STAGE_TIMEOUT left in the hosts (only these harnesses start
# processes in the namespaces of this prefix), then the testbed.
teardown() {
    bash "$HOSTS_SH" get N >/dev/null 2>&1 && hosts_reap "$(bash "$HOSTS_SH" get N)" >/dev/null 2>&1
    bash "$HOSTS_SH" down >/dev/null 2>&1
}
cleanup() { teardown; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() { echo "faults.sh: $*" >&2; }
t_all=$(date +%s)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
{
    echo "#meta command $0 -H $NH -P $PPN -m \"$MPIS\" -p \"$PROVS\" -f \"$FAULTS\"${TESTS:+ -t \"$TESTS\"}"
    echo "#meta started $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "#meta machine $(nproc) CPUs, kernel $(uname -r)"
    echo "#meta tree $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null)$(git -C "$REPO" diff --quiet 2>/dev/null || echo +changes)"
    echo "#meta spray_env $(env | grep '^FI_SPRAY_' | sort | tr '\n' ' ')"
    echo "#meta settings mtu=$FAULT_MTU loss=$FAULT_LOSS% link=$FAULT_LINK flap=${FLAP_DOWN_S}s/${FLAP_UP_S}s/$FLAP_MODE slow=$SLOW_RATE/$SLOW_FACTOR incast=$INCAST_RATE/$INCAST_BUF tcp_ports=$FAULT_TCP_PORTS launch_timeout=$LAUNCH_TIMEOUT tcp_dead_link_timeout=$TCP_DEAD_LINK_TIMEOUT"
    echo "#meta load_start $load0"
} >>"$TSV"

# mpi_tests MPI -> the tests of -t that MPI has (run.sh's default list for it)
mpi_tests() {
    local all t out=""
    case $1 in
    impi) all="p2p coll rma thread osu imb-mpi1 imb-rma" ;;
    mpi4py) all="py-suite" ;;
    *) all="p2p coll rma thread osu" ;;
    esac
    for t in $TESTS; do [[ " $all " == *" $t "* ]] && out+="${out:+ }$t"; done
    echo "$out"
}



# evidence FAULT T0 -> one line: what the fault did during the stage (after it ran)
evidence() {
    local f=$1 t0=$2 el
    el=$(($(date +%s) - t0))
    case $f in
    loss) echo "loss rules: $(bash "$HOSTS_SH" drops | awk '{ printf "udp_in=%d udp_dropped=%d (%.2f %%) tcp_dropped=%d", $1, $2, $1 ? 100 * $2 / $1 : 0, $3 }')" ;;
    blackhole) echo "packets dropped by the blackholed link: $(bash "$HOSTS_SH" bad counts | awk -v l="l$FAULT_LINK" '$1 == l { print $2 }')" ;;
    flap)
        local pidf=/run/spray-hosts/${SPRAY_HOSTS_PREFIX}flap-$FAULT_LINK.pid alive=no
        [ -e "$pidf" ] && kill -0 "$(cat "$pidf")" 2>/dev/null && alive=yes
        echo "flapper still running at the end: $alive; about $(awk -v e="$el" -v d="$FLAP_DOWN_S" -v u="$FLAP_UP_S" 'BEGIN { printf "%d", e / (d + u) }') down/up cycles in ${el}s"
        ;;
    slow | incast) echo "TBF (where port sent dropped overlimits): $(bash "$HOSTS_SH" qdisc | tail -n +2 | tr '\n' ';')" ;;
    none) echo "loss rules: $(bash "$HOSTS_SH" drops | awk '{ printf "udp_in=%d udp_dropped=%d tcp_dropped=%d", $1, $2, $3 }')" ;;
    esac
}

# record FAULT MPI PROV OUTFILE -> appends run.sh's result lines to the TSV:
# fault mpi prov test verdict secs why fabric stats
record() {
    local f=$1 m=$2 p=$3 out=$4
    python3 - "$f" "$m" "$p" "$out" >>"$TSV" <<'EOF'
import re, sys
f, m, p, fn = sys.argv[1:5]
pat = re.compile(r'^(PASS|FAIL|SKIP) (\S+)/(\S+) np=(\d+)(?: on \d+ hosts(?: \(incast\))?)? (\S+?):? (?:\(([\d.]+)s\))?(.*)$')
n = 0
for ln in open(fn, errors="replace"):
    ln = ln.rstrip("\n")
    mm = pat.match(ln)
    if not mm:
        continue
    verdict, _, _, _, test, secs, rest = mm.groups()
    fab = re.search(r'\[fabric ([^\]]*)\]', rest)
    st = re.search(r'\[spray ([^\]]*)\]', rest)
    why = re.sub(r'\s*\[(fabric|spray) [^\]]*\]', '', rest).strip().lstrip(':').strip()
    print("\t".join([f, m, p, test, verdict, secs or "", why, fab.group(1) if fab else "", st.group(1) if st else ""]))
    n += 1
if n == 0:
    # run.sh did not get to the programs (build, provider, hosts): one line says so
    tail = [l.strip() for l in open(fn, errors="replace") if l.strip()][-3:]
    print("\t".join([f, m, p, "(run)", "FAIL", "", "run.sh ran no program: " + " | ".join(tail), "", ""]))
EOF
}

spray_fail=0 base_fail=0
for f in $FAULTS; do
    t0=$(date +%s)
    say "=== fault $f: scripts/hosts.sh up $NH $(up_args "$f")"
    # shellcheck disable=SC2046 # up_args is a list of options on purpose
    if ! up_out=$(bash "$HOSTS_SH" up "$NH" $(up_args "$f") 2>&1); then
        say "hosts.sh up failed: $up_out"
        echo -e "$f\t-\t-\t(testbed)\tFAIL\t\thosts.sh up failed: $(echo "$up_out" | tail -1)\t\t" >>"$TSV"
        spray_fail=$((spray_fail + 1))
        continue
    fi
    say "$(echo "$up_out" | tail -1)"
    # enough flap cycles for the longest stage
    cycles=$(awk -v t="$STAGE_TIMEOUT" -v d="$FLAP_DOWN_S" -v u="$FLAP_UP_S" 'BEGIN { n = int(t / (d + u)) + 1; if (n > 10000) n = 10000; print n }')
    say "fault: $(inject "$f" "$cycles" 2>&1 | tr '\n' ' ')"
    echo "#stage $f up $(echo "$up_out" | tail -1 | tr '\t' ' ')" >>"$TSV"
    i=0
    for m in "${avail[@]}"; do
        order=("${PROV_LIST[@]}")
        if [ $((i % 2)) -eq 1 ]; then
            order=()
            for ((k = ${#PROV_LIST[@]} - 1; k >= 0; k--)); do order+=("${PROV_LIST[$k]}"); done
        fi
        i=$((i + 1))
        for p in "${order[@]}"; do
            out=$OUT/$f-$m-$p.out
            lt=$LAUNCH_TIMEOUT
            [ "$p" = tcp ] && [ "$f" = blackhole ] && lt=$TCP_DEAD_LINK_TIMEOUT
            args=(-H "$NH" -P "$PPN" "$m" "$p")
            if [ -n "$TESTS" ]; then
                sel=$(mpi_tests "$m")
                [ -n "$sel" ] || { say "$f: leaving out $m: none of -t \"$TESTS\" is one of its tests"; continue; }
                # shellcheck disable=SC2206 # a list of tests on purpose
                args+=("$((NH * PPN))" $sel)
            fi
            say "$f: run.sh ${args[*]} (load $(cut -d' ' -f1 /proc/loadavg))"
            t1=$(date +%s)
            LAUNCH_TIMEOUT=$lt MPI_LOG_DIR=$OUT/logs/$f SPRAY_STATS_DIR=$OUT/stats/$f \
                timeout -k 10 "$STAGE_TIMEOUT" bash "$MT_DIR/run.sh" "${args[@]}" >"$out" 2>&1
            rc=$?
            grep -E '^(PASS|FAIL|SKIP) ' "$out" | cut -c1-220 | sed 's/^/  /' >&2
            [ $rc -eq 2 ] && say "run.sh could not run: $(tail -2 "$out" | tr '\n' ' ')"
            record "$f" "$m" "$p" "$out"
            echo "#took $f $m $p $(($(date +%s) - t1)) rc=$rc load=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$TSV"
        done
    done
    ev=$(evidence "$f" "$t0")
    say "$f: $ev"
    echo "#evidence $f $ev" >>"$TSV"
    echo "#stage_secs $f $(($(date +%s) - t0))" >>"$TSV"
    teardown
done
echo "#meta load_end $(cut -d' ' -f1-3 /proc/loadavg)" >>"$TSV"
echo "#meta total_secs $(($(date +%s) - t_all))" >>"$TSV"

python3 "$MT_DIR/faults_report.py" "$TSV" >"$OUT/summary.md"
cat "$OUT/summary.md"
say "results: $OUT/summary.md, $TSV, logs in $OUT/logs"
read -r spray_fail base_fail < <(awk -F'\t' '!/^#/ && $5 == "FAIL" { if ($3 == "tcp") b++; else s++ } END { print s + 0, b + 0 }' "$TSV")
say "failures: $spray_fail of providers under test, $base_fail of tcp (the baseline)"
[ "$spray_fail" -eq 0 ]
