#!/usr/bin/env bash
# rankdeath.sh - a rank that dies mid-job: kill -9 of one rank, or its host's link taken
# away, and how long until the job ends. Runs src/rankdeath.c under each MPI over each
# provider and prints one line per run and a markdown table.
#
# usage: mpi-tests/rankdeath.sh [-H N [-U]] [-m "kill link"] [-b BOUND_S] [-n RUNS]
#                               "MPI..." "PROV..."
#   MPI  ompi5 mpich impi (ompi4 works too); PROV spray tcp ...
#   -H N ranks on N hosts of scripts/hosts.sh (1 per host), as run.sh -H; without -H all
#        ranks run on this machine (NP=2)
#   -U   bring the testbed up first and down at exit (scripts/hosts.sh up N $MPI_HOSTS_UP_ARGS)
#   -m   kill: the victim (the last rank, on the last host) SIGKILLs itself after 10
#             iterations, with messages to and from it in flight (its death time is
#             the time it wrote just before);
#        link: its host's one interface goes down (ip link set h0 down in that host's
#             namespace) while the job runs; hosts mode only. The link comes back
#             (with its route) once the run ends.
#   -b   the job must end within BOUND_S seconds of the death (default 30), with a
#        non-zero status, and leave no process behind
#   -n   runs per combination (default 1)
# A run PASSes when the launcher exits non-zero within the bound and no process of the
# job is left LEFT_GRACE_S after the launcher's exit: none in the launch's session (it
# runs under setsid) and, across hosts, none in any host's namespace (only these
# harnesses start processes there). What is left is killed by pid and reported. Measured per run: `end` = seconds from the death
# to the launcher's exit, `ranks` = to the moment no survivor's rank process was left,
# `err` = to the first "operation failed" line a survivor printed (`-` if the launcher
# killed them first, or the MPI aborted in its own handler), `cause` = error (that line),
# unreachable (the MPI aborted quoting "No route to host", the provider's FI_EHOSTUNREACH)
# or launcher (neither: the launcher killed the survivors). Logs: mpi-tests/logs/rankdeath-<mpi>-<prov>-<mode>[-hN]-<run>.log.
# env: FI_SPRAY_UNREACHABLE_TIMEOUT_MS (and every FI_SPRAY_*) reach the ranks;
#      LAUNCH_TIMEOUT (s, default 120), LEFT_GRACE_S (s a process may take to go once the
#      launcher has exited, default 5), PROVDIR, SPRAY_HOSTS_PREFIX, RANKDEATH_ARGS
#      (extra program options, e.g. "-l 65536").
# Exit status: 0 if every run passed, 1 if one failed, 2 if nothing could run (an MPI,
# the provider or the hosts missing; the reasons are printed with "cannot run").
set -u
LAUNCH_TIMEOUT=${LAUNCH_TIMEOUT:-120} LEFT_GRACE_S=${LEFT_GRACE_S:-5}
# shellcheck source=mpi-tests/lib.sh
. "$(dirname "$0")/lib.sh"
MODES="kill" BOUND=30 RUNS=1 UP=0
while getopts "H:Um:b:n:" o; do
    case $o in
    H) MPI_HOSTS=$OPTARG ;;
    U) UP=1 ;;
    m) MODES=$OPTARG ;;
    b) BOUND=$OPTARG ;;
    n) RUNS=$OPTARG ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -ne 2 ]; then
    sed -n '2,/^set -u/p' "$0" | grep '^#'
    exit 2
fi
read -ra MPIS <<<"$1"
read -ra PROVS <<<"$2"
[[ $MPI_HOSTS =~ ^(0|[2-8])$ ]] || { echo "rankdeath.sh: -H must be 2..8" >&2; exit 2; }
[[ $RUNS =~ ^[1-9][0-9]?$ ]] || { echo "rankdeath.sh: -n must be 1..99" >&2; exit 2; }
[[ $BOUND =~ ^[0-9]+$ ]] || { echo "rankdeath.sh: -b must be whole seconds" >&2; exit 2; }
for m in $MODES; do
    case $m in
    kill) ;;
    link) [ "$MPI_HOSTS" -gt 0 ] || { echo "rankdeath.sh: -m link needs -H N" >&2; exit 2; } ;;
    *) echo "rankdeath.sh: unknown mode $m (kill link)" >&2; exit 2 ;;
    esac
done
NP=2
[ "$MPI_HOSTS" -gt 0 ] && NP=$MPI_HOSTS
TAG=""
[ "$MPI_HOSTS" -gt 0 ] && TAG="-h$MPI_HOSTS"

if [ "$MPI_HOSTS" -gt 0 ] && [ "$UP" = 1 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "rankdeath.sh: cannot run: hosts mode needs root (network namespaces)" >&2
        exit 2
    fi
    trap 'bash "$HOSTS_SH" down' EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
    # shellcheck disable=SC2086 # MPI_HOSTS_UP_ARGS is a list of options on purpose
    if ! up_out=$(bash "$HOSTS_SH" up "$MPI_HOSTS" ${MPI_HOSTS_UP_ARGS:-} 2>&1); then
        echo "rankdeath.sh: cannot run: scripts/hosts.sh up failed: $up_out" >&2
        exit 2
    fi
    echo "# $(echo "$up_out" | tail -1)"
fi
if [ "$MPI_HOSTS" -gt 0 ]; then
    why=$(hosts_missing "$MPI_HOSTS")
    [ -z "$why" ] || { echo "rankdeath.sh: cannot run on $MPI_HOSTS hosts: $why" >&2; exit 2; }
fi

LOGDIR=$MT_DIR/logs
mkdir -p "$LOGDIR"
TMP=$(mktemp -d /tmp/rankdeath.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
[ "$MPI_HOSTS" -gt 0 ] && [ "$UP" = 1 ] && trap 'rm -rf "$TMP"; bash "$HOSTS_SH" down' EXIT

now() { date +%s.%N; }
# secs A B -> B - A with one decimal, or - when either is missing
secs() {
    if [ -z "$1" ] || [ -z "$2" ]; then echo -; else awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; fi
}

# rank_pids SKIP_HOST -> pids of rankdeath processes of the launch: in its session on one
# host; across hosts in every host's namespace but SKIP_HOST (the victim's)
rank_pids() {
    local i p
    if [ "$MPI_HOSTS" -eq 0 ]; then
        pgrep -s "$lpid" -x rankdeath 2>/dev/null
        return
    fi
    for i in $(seq 0 $((MPI_HOSTS - 1))); do
        [ "$i" = "$1" ] && continue
        for p in $(ip netns pids "$(bash "$HOSTS_SH" ns "$i")" 2>/dev/null); do
            [ "$(cat "/proc/$p/comm" 2>/dev/null)" = rankdeath ] && echo "$p"
        done
    done
}

# job_pids -> pids of the launch still alive: its session and, across hosts, everything in
# the hosts' namespaces (only these harnesses start processes there)
job_pids() {
    local i
    {
        pgrep -s "$lpid" 2>/dev/null
        for i in $(seq 0 $((MPI_HOSTS - 1))); do ip netns pids "$(bash "$HOSTS_SH" ns "$i")" 2>/dev/null; done
    } | sort -un | xargs
}

# link_restore I: host I's interface up again, with the default route the down removed
link_restore() {
    local ns
    ns=$(bash "$HOSTS_SH" ns "$1")
    ip -n "$ns" link set h0 up
    ip -n "$ns" route replace default via "198.18.$(($1 + 1)).1" 2>/dev/null
    bash "$HOSTS_SH" check >/dev/null 2>&1 || sleep 1
}

pass=0 fail=0 cant=0
ROWS=()
for mpi in "${MPIS[@]}"; do
    why=$(mpi_missing "$mpi")
    if [ -n "$why" ]; then
        echo "rankdeath.sh: cannot run $mpi: $why" >&2
        cant=$((cant + 1))
        continue
    fi
    if ! mpi_build "$mpi"; then
        echo "FAIL $mpi: building the programs failed"
        fail=$((fail + 1))
        continue
    fi
    for prov in "${PROVS[@]}"; do
        pdir=${PROVDIR:-}
        if [ "$prov" = spray ] && [ -z "$pdir" ]; then
            pdir=$REPO/build
            src=$REPO/target/release/libspray_fi.so
            if [ -e "$src" ] && { [ ! -e "$pdir/libspray-fi.so" ] || [ "$src" -nt "$pdir/libspray-fi.so" ]; }; then
                mkdir -p "$pdir" && cp "$src" "$pdir/libspray-fi.so"
            fi
        fi
        if [ -n "$pdir" ] && [ ! -e "$pdir/lib$prov-fi.so" ]; then
            echo "rankdeath.sh: cannot run $mpi/$prov: $pdir/lib$prov-fi.so not found (cargo build --release --lib)" >&2
            cant=$((cant + 1))
            continue
        fi
        mpi_launch "$mpi" "$prov" "$pdir" "$NP"
        for mode in $MODES; do
            for run in $(seq 1 "$RUNS"); do
                log=$LOGDIR/rankdeath-$mpi-$prov-$mode$TAG-$run.log
                rm -f "$TMP/killed" "$TMP/ready" "$TMP/errors"
                kargs=(-k 10 -t "$TMP/killed")
                [ "$mode" = link ] && kargs=(-k 0 -r "$TMP/ready")
                # the survivors' error lines also go to a file: the launcher may be
                # killed by their abort before it forwards their output
                kargs+=(-e "$TMP/errors")
                # shellcheck disable=SC2206 # extra options, split on purpose
                prog=("$BIN_DIR/rankdeath" "${kargs[@]}" -T 60 ${RANKDEATH_ARGS:-})
                victim_host=-1
                [ "$MPI_HOSTS" -gt 0 ] && victim_host=$(((NP - 1) % MPI_HOSTS))
                echo "+ ${LAUNCH[*]} ${prog[*]}" >"$log"
                t_start=$(now)
                setsid "${LAUNCH[@]}" "${prog[@]}" >>"$log" 2>&1 </dev/null &
                lpid=$!
                t_death="" t_ranks="" t_end="" downed=0
                # watch the launch (bounded by its own timeout): take the link down once the
                # job runs, note when the survivors' rank processes are gone
                while kill -0 "$lpid" 2>/dev/null; do
                    if [ "$mode" = link ] && [ "$downed" = 0 ] && [ -e "$TMP/ready" ]; then
                        ip -n "$(bash "$HOSTS_SH" ns "$victim_host")" link set h0 down
                        t_death=$(now) downed=1
                    fi
                    if [ -z "$t_ranks" ] && { [ -e "$TMP/killed" ] || [ "$downed" = 1 ]; } &&
                        [ -z "$(rank_pids "$victim_host")" ]; then
                        t_ranks=$(now)
                    fi
                    sleep 0.1
                done
                { wait "$lpid"; } 2>/dev/null # no "Killed" notice from bash
                rc=$?
                t_end=$(now)
                [ -z "$t_ranks" ] && t_ranks=$t_end
                [ "$mode" = kill ] && [ -e "$TMP/killed" ] &&
                    t_death=$(awk '{ printf "%.9f", $1 / 1e9 }' "$TMP/killed")
                # the dead host's link back first: its launcher daemon (and rank) can only
                # hear the launcher's kill over it
                [ "$downed" = 1 ] && link_restore "$victim_host"
                # anything of the job still alive (in its session, and in the hosts) once
                # LEFT_GRACE_S have passed: a remote daemon may still be on its way out
                left=""
                for _ in $(seq 1 $((LEFT_GRACE_S * 10))); do
                    left=$(job_pids)
                    [ -z "$left" ] && break
                    sleep 0.1
                done
                if [ -n "$left" ]; then
                    names=$(for p in $left; do echo "$p:$(cat "/proc/$p/comm" 2>/dev/null)"; done | xargs)
                    # shellcheck disable=SC2086 # a list of pids, all of this launch
                    kill -KILL $left 2>/dev/null
                    left=$names
                fi
                [ -e "$TMP/errors" ] && cat "$TMP/errors" >>"$log"
                # the survivors' first error line (earliest t_ns)
                t_err=$(grep -ao 'RANKDEATH error rank [0-9]* iter [0-9]* op [A-Za-z]* t_ns [0-9]*' "$log" |
                    awk '{ t = $NF / 1e9; if (!m || t < m) m = t } END { if (m) printf "%.9f", m }')
                # how the survivors learned of it: their own failed operation (the line above,
                # or the MPI's fatal handler quoting the provider's FI_EHOSTUNREACH), else the
                # launcher killed them
                cause=launcher
                grep -aq 'No route to host' "$log" && cause=unreachable
                [ -n "$t_err" ] && cause=error
                end=$(secs "$t_death" "$t_end") ranks=$(secs "$t_death" "$t_ranks") err=$(secs "$t_death" "$t_err")
                verdict=PASS why=""
                if [ -z "$t_death" ]; then
                    verdict=FAIL why="the victim never died (no kill stamp / the job never got running; exit $rc)"
                elif [ "$rc" -eq 0 ]; then
                    verdict=FAIL why="the job ended with status 0: the death went unnoticed"
                elif grep -aq 'RANKDEATH FAIL' "$log"; then
                    verdict=FAIL why="wrong contents: $(grep -am1 'RANKDEATH FAIL' "$log")"
                elif awk -v t="$(secs "$t_start" "$t_end")" -v l="$LAUNCH_TIMEOUT" 'BEGIN { exit !(t >= l) }'; then
                    verdict=FAIL why="hung until the launcher's timeout (${LAUNCH_TIMEOUT}s)"
                    [ "$t_ranks" = "$t_end" ] ||
                        why="the survivors' ranks were gone after ${ranks}s, but the launcher hung until its timeout (${LAUNCH_TIMEOUT}s)"
                elif awk -v e="$end" -v b="$BOUND" 'BEGIN { exit !(e > b) }'; then
                    verdict=FAIL why="ended ${end}s after the death, bound ${BOUND}s"
                elif [ -n "$left" ]; then
                    verdict=FAIL why="processes left after the launcher exited (killed): $left"
                fi
                [ "$verdict" = PASS ] && pass=$((pass + 1)) || fail=$((fail + 1))
                where="on one host"
                [ "$MPI_HOSTS" -gt 0 ] && where="on $MPI_HOSTS hosts"
                echo "$verdict $mpi/$prov $mode np=$NP $where run $run: end ${end}s ranks ${ranks}s err ${err}s cause $cause exit $rc${why:+: $why}"
                [ "$verdict" = FAIL ] && echo "  log: $log"
                ROWS+=("| $mpi | $prov | $mode | $NP | ${where#on } | $end | $ranks | $err | $cause | $rc | $verdict |")
                echo "# total $(secs "$t_start" "$t_end")s; death at +$(secs "$t_start" "$t_death")s; end ${end}s ranks ${ranks}s err ${err}s exit $rc; left: ${left:-none}" >>"$log"
            done
        done
    done
done
echo
echo "| MPI | provider | death | ranks | hosts | end (s) | survivors gone (s) | first error (s) | cause | exit | verdict |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
echo "$pass passed, $fail failed, $cant could not run"
if [ "$fail" -gt 0 ]; then exit 1; fi
if [ "$pass" -eq 0 ]; then exit 2; fi
exit 0
