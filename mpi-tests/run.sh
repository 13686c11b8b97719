#!/usr/bin/env bash
# run.sh - runs the MPI test programs under one MPI library over one libfabric
# provider, checks from the launch logs that the provider carried the traffic, and
# prints PASS/FAIL/SKIP per program and a closing "N passed, N failed" line.
#
# usage: mpi-tests/run.sh [-H N [-P PPN] [-U]] MPI PROV [NP] [TEST...]
#   MPI  ompi4 | ompi4-btl | ompi5 | mpich | impi | mpi4py
#   PROV libfabric provider name (tcp, spray, ...)
#   NP   ranks (default 2, or N x PPN in hosts mode; the programs need an even number)
#   TEST p2p coll rma thread osu (default: all), impi also imb-mpi1 imb-rma,
#        mpi4py: py-suite
#   -H N hosts mode: ranks round-robin on N hosts of scripts/hosts.sh (env MPI_HOSTS),
#        started by the MPI's own launcher (run in host 0) through scripts/netns-rsh;
#        the testbed must be up (scripts/hosts.sh up N ...) unless -U is given
#   -P PPN ranks per host when NP is not given (env MPI_PPN, default 1)
#   -U   bring the testbed up first (scripts/hosts.sh up N $MPI_HOSTS_UP_ARGS, e.g.
#        MPI_HOSTS_UP_ARGS="--mtu 9000 --loss 1") and down at exit (env MPI_HOSTS_UP=1)
# env: PROVDIR (directory holding lib<PROV>-fi.so; for spray defaults to <repo>/build,
#      refreshed from target/release/libspray_fi.so when that is newer),
#      LAUNCH_TIMEOUT (s per launch, default 240), IMPI_FABRIC=deb|wheel,
#      OMPI4_FABRIC_DIR, P2P_ARGS (p2p arguments, replacing the per-provider default),
#      SPRAY_HOSTS_PREFIX (hosts mode: the testbed's prefix, default sprh-),
#      MPI_LOG_DIR (where the logs go, default mpi-tests/logs), SPRAY_STATS_DIR (spray
#      only: each launch's ranks write FI_SPRAY_STATS dumps to DIR/<mpi>-<test>-<pid>.jsonl,
#      every FI_SPRAY_STATS_MS (default 2000) and at close; the result line then ends with
#      their totals, e.g. [spray eps=4 closed=4 rto=0 tlp=20 retx=3 ...], from spraystats.py),
#      MPI_YIELD (auto|1|0, see lib.sh: ranks yield their CPU while waiting; auto = in hosts
#      mode with more ranks than CPUs).
# Exit status: 0 if everything run passed (skips allowed), 1 otherwise, 2 on usage or
# when the MPI, the provider library or the hosts cannot be had.
set -u
. "$(dirname "$0")/lib.sh"

MPI_PPN=${MPI_PPN:-1} MPI_HOSTS_UP=${MPI_HOSTS_UP:-0} TOPO=ecmp
while getopts "H:P:U" o; do
    case $o in
    H) MPI_HOSTS=$OPTARG ;;
    P) MPI_PPN=$OPTARG ;;
    U) MPI_HOSTS_UP=1 ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -lt 2 ]; then
    sed -n '2,32p' "$0"
    exit 2
fi
[[ $MPI_HOSTS =~ ^(0|[2-8])$ ]] || { echo "run.sh: -H must be 2..8" >&2; exit 2; }
[[ $MPI_PPN =~ ^[1-9][0-9]?$ ]] || { echo "run.sh: -P must be 1..99" >&2; exit 2; }
MPI=$1 PROV=$2
shift 2
NP=2
[ "$MPI_HOSTS" -gt 0 ] && NP=$((MPI_HOSTS * MPI_PPN))
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then NP=$1; shift; fi
TESTS=("$@")
if [ ${#TESTS[@]} -eq 0 ]; then
    case $MPI in
    impi) TESTS=(p2p coll rma thread osu imb-mpi1 imb-rma) ;;
    mpi4py) TESTS=(py-suite) ;;
    *) TESTS=(p2p coll rma thread osu) ;;
    esac
fi

why=$(mpi_missing "$MPI")
if [ -n "$why" ]; then
    echo "run.sh: cannot run $MPI: $why" >&2
    exit 2
fi
HOSTS_TAG=""
if [ "$MPI_HOSTS" -gt 0 ]; then
    HOSTS_TAG=" on $MPI_HOSTS hosts"
    if [ "$MPI_HOSTS_UP" = 1 ]; then
        if [ "$(id -u)" -ne 0 ]; then
            echo "run.sh: cannot run $MPI on $MPI_HOSTS hosts: hosts mode needs root (network namespaces)" >&2
            exit 2
        fi
        trap 'bash "$HOSTS_SH" down' EXIT
        trap 'exit 143' TERM
        trap 'exit 130' INT
        # shellcheck disable=SC2086 # MPI_HOSTS_UP_ARGS is a list of options on purpose
        if ! up_out=$(bash "$HOSTS_SH" up "$MPI_HOSTS" ${MPI_HOSTS_UP_ARGS:-} 2>&1); then
            echo "run.sh: cannot run $MPI on $MPI_HOSTS hosts: scripts/hosts.sh up failed: $up_out" >&2
            exit 2
        fi
        echo "# $(echo "$up_out" | tail -1)"
    fi
    why=$(hosts_missing "$MPI_HOSTS")
    if [ -n "$why" ]; then
        echo "run.sh: cannot run $MPI on $MPI_HOSTS hosts: $why" >&2
        exit 2
    fi
    # ecmp: the K-link fabric; incast: the hosts behind one switch (no links to spray over)
    TOPO=$(bash "$HOSTS_SH" get TOPO)
    [ "$TOPO" = incast ] && HOSTS_TAG+=" (incast)"
fi

PROVDIR=${PROVDIR:-}
if [ "$PROV" = spray ] && [ -z "$PROVDIR" ]; then
    PROVDIR=$REPO/build
    src=$REPO/target/release/libspray_fi.so
    if [ -e "$src" ] && { [ ! -e "$PROVDIR/libspray-fi.so" ] || [ "$src" -nt "$PROVDIR/libspray-fi.so" ]; }; then
        mkdir -p "$PROVDIR" && cp "$src" "$PROVDIR/libspray-fi.so"
    fi
fi
if [ -n "$PROVDIR" ] && ! ls "$PROVDIR"/lib"$PROV"-fi.so >/dev/null 2>&1; then
    echo "run.sh: $PROVDIR/lib$PROV-fi.so not found (build: cargo build --release --lib)" >&2
    exit 2
fi

# Known limits of libfabric's own tcp provider (found with these programs; each one
# fails or hangs the full test, which then fails after its bounded wait). Other
# providers (spray) always get the full tests.
#  - libfabric 1.17 (Debian; tcp;ofi_rxm), used by ompi4 and impi with IMPI_FABRIC=deb:
#    a truncated receive breaks the connection or the following message, and
#    OpenMPI's mtl spins forever in MPI_Irecv once ~1k receives are pre-posted.
#  - OpenMPI 5's osc rdma over btl ofi aborts/segfaults in MPI_Put over tcp (tcp has
#    no FI_ATOMIC; there is no osc pt2pt in 5.0), so ompi5's rma is skipped for tcp.
P2P_DEFAULT=()
KNOWN_SKIP=()
fabric117=0
case $MPI in
ompi4) [ -z "${OMPI4_FABRIC_DIR:-}" ] && fabric117=1 ;;
impi) [ "$IMPI_FABRIC" = deb ] && fabric117=1 ;;
esac
#  - libfabric 2.5.1 tcp under OpenMPI 5 across hosts (-H): MPI_Mrecv of a message
#    claimed by MPI_Mprobe/Improbe fails (MPI_ERR_OTHER; libfabric warns "msg recv
#    truncated": the claim takes another message's data); on one host it passes.
if [ "$PROV" = tcp ]; then
    [ $fabric117 = 1 ] && P2P_DEFAULT=(-s trunc -n 1000)
    [ "$MPI" = ompi5 ] && [ "$MPI_HOSTS" -gt 0 ] && P2P_DEFAULT=(-s mprobe)
    [ "$MPI" = ompi5 ] && KNOWN_SKIP+=("rma: OpenMPI 5 osc rdma over btl ofi crashes with tcp (no FI_ATOMIC)")
fi
# OpenMPI 5 has no osc pt2pt: its MPI one-sided runs over osc rdma + btl ofi, which
# crashes in two-sided mode; one-sided mode (BTL_OFI_MODE=0) needs FI_RMA+FI_ATOMIC.
if [ "$MPI" = ompi5 ] && [ "$PROV" != tcp ] && [ -z "${BTL_OFI_MODE:-}" ] && command -v fi_info >/dev/null; then
    if FI_PROVIDER_PATH=$PROVDIR fi_info -p "$PROV" -t FI_EP_RDM -c 'FI_RMA|FI_ATOMIC' >/dev/null 2>&1; then
        export BTL_OFI_MODE=0
    else
        KNOWN_SKIP+=("rma: OpenMPI 5 one-sided needs FI_RMA+FI_ATOMIC from the provider (btl ofi one-sided mode); $PROV has not both")
    fi
fi
# OpenMPI 4.1 runs MPI one-sided over btl ofi (osc rdma, one-sided mode) when the
# provider itself offers FI_RMA+FI_ATOMIC; otherwise over osc pt2pt on the mtl. A
# layered answer (tcp's is "tcp;ofi_rxm" in libfabric 1.17) does not count: it gives
# btl ofi no endpoint ("BTLs attempted: self", MPI_Win_create fails).
if [ "$MPI" = ompi4 ] && [ -z "${OMPI4_ONESIDED:-}" ] && [ -z "${OMPI4_FABRIC_DIR:-}" ] && command -v fi_info >/dev/null; then
    if FI_PROVIDER_PATH=$PROVDIR fi_info -p "$PROV" -t FI_EP_RDM -c 'FI_RMA|FI_ATOMIC' 2>/dev/null | grep -qx "provider: $PROV"; then
        export OMPI4_ONESIDED=1
    fi
fi
# shellcheck disable=SC2206 # P2P_ARGS is a space-separated argument list on purpose
P2P_ARGS_ARR=(${P2P_ARGS:-"${P2P_DEFAULT[@]}"})

if ! mpi_build "$MPI"; then
    echo "run.sh: building the programs for $MPI failed"
    echo "0 passed, 1 failed"
    exit 1
fi
mpi_launch "$MPI" "$PROV" "$PROVDIR" "$NP"

LOGDIR=${MPI_LOG_DIR:-$MT_DIR/logs}
mkdir -p "$LOGDIR"
STATS_DIR=""
if [ "$PROV" = spray ] && [ -n "${SPRAY_STATS_DIR:-}" ]; then
    STATS_DIR=$SPRAY_STATS_DIR
    mkdir -p "$STATS_DIR"
    export FI_SPRAY_STATS_MS=${FI_SPRAY_STATS_MS:-2000}
fi
pass=0 fail=0 skip=0
t_all=$(date +%s)
for t in "${TESTS[@]}"; do
    case $t in
    p2p) prog=("$BIN_DIR/p2p" "${P2P_ARGS_ARR[@]}") ;;
    coll | rma | thread) prog=("$BIN_DIR/$t") ;;
    osu) prog=("$BIN_DIR/osu" -m 1:262144 -i 100 -I 10 -x 10 -W 16) ;; # smoke; bench.sh measures
    imb-mpi1) prog=("$VENV_IMPI/bin/IMB-MPI1" -msglog 0:16 -iter 100 -time 5 -npmin "$NP"
        PingPong Sendrecv Exchange Allreduce Alltoall Bcast) ;;
    imb-rma) prog=("$VENV_IMPI/bin/IMB-RMA" -msglog 0:14 -iter 50 -time 5 -npmin "$NP"
        Unidir_put Unidir_get Bidir_put Accumulate Get_accumulate Fetch_and_op Compare_and_swap) ;;
    py-suite) prog=("$MT_DIR/py/suite.py") ;;
    *) echo "SKIP $t (unknown test)"; skip=$((skip + 1)); continue ;;
    esac
    known=""
    for k in "${KNOWN_SKIP[@]}"; do [ "${k%%:*}" = "$t" ] && known=${k#*: }; done
    if [ -n "$known" ]; then
        echo "SKIP $MPI/$PROV np=$NP $t: known limit: $known"; skip=$((skip + 1)); continue
    fi
    if [ "$MPI" != impi ] && [[ $t == imb-* ]]; then
        echo "SKIP $t (IMB comes with the impi wheel only)"; skip=$((skip + 1)); continue
    fi
    log=$LOGDIR/$MPI-$PROV-np$NP${HOSTS_TAG:+-h$MPI_HOSTS}-$t.log
    if [ -n "$STATS_DIR" ]; then
        # this launch's own dump files (the ranks expand %p); the launch line carries it
        rm -f "$STATS_DIR/$MPI-$t-"*.jsonl
        export FI_SPRAY_STATS=$STATS_DIR/$MPI-$t-%p.jsonl
        mpi_launch "$MPI" "$PROV" "$PROVDIR" "$NP"
    fi
    t0=$(date +%s.%N)
    # The launch runs in its own session so that any rank a timed-out or crashed
    # launcher leaves behind is found (by session id) and stopped afterwards.
    echo "+ ${LAUNCH[*]} ${prog[*]}" >"$log"
    [ "$MPI_HOSTS" -gt 0 ] && fab0=$(fabric_snapshot) && read -r udp0 drop0 tdrop0 <<<"$(bash "$HOSTS_SH" drops)"
    setsid "${LAUNCH[@]}" "${prog[@]}" >>"$log" 2>&1 </dev/null &
    lpid=$!
    wait "$lpid"
    rc=$?
    if pgrep -s "$lpid" >/dev/null 2>&1; then
        echo "  (stopping processes the launch left behind: $(pgrep -s "$lpid" | tr '\n' ' '))"
        pkill -KILL -s "$lpid" 2>/dev/null
    fi
    fabric=""
    if [ "$MPI_HOSTS" -gt 0 ]; then
        left=$(hosts_reap "$MPI_HOSTS")
        [ -z "$left" ] || echo "  (stopped processes left in the hosts: $left)"
        # TOTAL LINKS_USED per-link: proof that the ranks' traffic crossed the fabric
        read -r fab_total fab_links fabric <<<"$(fabric_delta "$fab0" "$(fabric_snapshot)")"
        read -r udp1 drop1 tdrop1 <<<"$(bash "$HOSTS_SH" drops)"
        # what the testbed's loss rules dropped on the way into the hosts
        fabric+="; dropped udp $((drop1 - drop0))/$((udp1 - udp0)) tcp $((tdrop1 - tdrop0))"
        echo "# fabric packets per ECMP link (r1->r2/r2->r1) during the launch: $fabric" >>"$log"
    fi
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    verdict=PASS why=""
    if [ $rc -ne 0 ] && { [ $rc -eq 77 ] || grep -q 'SKIP:' "$log"; }; then
        verdict=SKIP why=$(grep -m1 -o 'SKIP:.*' "$log")
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        verdict=FAIL why="timed out after ${LAUNCH_TIMEOUT}s"
    elif [ $rc -ne 0 ]; then
        verdict=FAIL why="exit status $rc"
    elif ! grep -aEq "$VERIFY_RE" "$log" || ! grep -aEq "$VERIFY2_RE" "$log"; then
        verdict=FAIL why="log does not show the $PROV provider / expected transport (/$VERIFY_RE/, /$VERIFY2_RE/)"
    elif grep -aEq "$REJECT_RE" "$log"; then
        verdict=FAIL why="another transport was used: $(grep -aEm1 "$REJECT_RE" "$log")"
    elif [ "$MPI_HOSTS" -gt 0 ] && [ "$fab_total" -lt 100 ]; then
        verdict=FAIL why="only $fab_total packets crossed the ECMP fabric: the ranks did not talk across hosts"
    elif [ "$MPI_HOSTS" -gt 0 ] && [ "$PROV" = spray ] && [ "$fab_links" -lt 2 ] && [ "$TOPO" = ecmp ]; then
        verdict=FAIL why="spray used $fab_links ECMP link(s) of $(bash "$HOSTS_SH" get LINKS): no spraying ($fabric)"
    fi
    stats=""
    if [ -n "$STATS_DIR" ]; then
        stats=$(python3 "$MT_DIR/spraystats.py" "$STATS_DIR/$MPI-$t-"*.jsonl 2>&1)
        echo "# spray statistics ($STATS_DIR/$MPI-$t-*.jsonl): $stats" >>"$log"
    fi
    case $verdict in
    PASS) pass=$((pass + 1)) ;;
    FAIL) fail=$((fail + 1)) ;;
    SKIP) skip=$((skip + 1)) ;;
    esac
    echo "$verdict $MPI/$PROV np=$NP$HOSTS_TAG $t (${dt}s)${why:+: $why}${fabric:+ [fabric $fabric]}${stats:+ [spray $stats]}"
    if [ "$verdict" = FAIL ]; then
        echo "  log: $log"
        grep -aE 'FAIL|Fatal|[Aa]bort|Segmentation|signal [0-9]|BAD TERMINATION|rror:' "$log" | grep -v '^+ ' | head -8 | sed 's/^/  | /'
    fi
done
echo "# $MPI over $PROV, $NP ranks$HOSTS_TAG, $(( $(date +%s) - t_all ))s, logs in $LOGDIR"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
