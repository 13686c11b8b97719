#!/usr/bin/env python3
"""suite.py - mpi4py smoke suite: p2p (sizes, wildcards, probe, ordering),
collectives and one-sided, all verified; exits non-zero on any failure."""
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL rank {rank}: {what}", file=sys.stderr, flush=True)


def pattern(n, seed):
    return bytes(((i * 131 + (i >> 8) * 7 + seed) & 0xFF) for i in range(n)) if n < 65536 \
        else (bytes(((i * 131 + seed) & 0xFF) for i in range(251)) * (n // 251 + 1))[:n]


partner = rank ^ 1
assert size % 2 == 0, "needs an even number of ranks"

if rank == 0:
    print("mpi4py", __import__("mpi4py").__version__, "on", MPI.Get_library_version().splitlines()[0],
          flush=True)

# p2p: buffer sizes 0 B .. 4 MiB both ways, verified
for k, n in enumerate([0, 1, 1023, 1024, 1025, 8192, 65537, 1 << 20, 4 << 20]):
    send = pattern(n, rank + k)
    recv = bytearray(n)
    comm.Sendrecv(send, dest=partner, sendtag=k, recvbuf=recv, source=partner, recvtag=k)
    check(bytes(recv) == pattern(n, partner + k), f"sendrecv {n} B corrupt")

# same-tag ordering with pickled objects
if rank % 2 == 0:
    reqs = [comm.isend(("seq", i), dest=partner, tag=5) for i in range(500)]
    MPI.Request.Waitall(reqs)
else:
    got = [comm.recv(source=partner, tag=5)[1] for _ in range(500)]
    check(got == list(range(500)), "same-tag order broken")

# wildcards + probe
comm.Barrier()
if rank != 0:
    comm.send({"src": rank, "blob": b"x" * (rank * 1000)}, dest=0, tag=100 + rank)
else:
    for _ in range(size - 1):
        st = MPI.Status()
        comm.Probe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
        msg = comm.recv(source=st.Get_source(), tag=st.Get_tag())
        check(msg["src"] == st.Get_source() and st.Get_tag() == 100 + msg["src"],
              f"probe/wildcard mismatch: {st.Get_source()} {st.Get_tag()}")
        check(len(msg["blob"]) == msg["src"] * 1000, "wildcard payload length")

# collectives
for n in (1, 1000, 100000):
    data = bytearray(pattern(n, 9)) if rank == 0 else bytearray(n)
    comm.Bcast(data, root=0)
    check(bytes(data) == pattern(n, 9), f"bcast {n} B")
vals = comm.allgather(rank)
check(vals == list(range(size)), "allgather")
check(comm.allreduce(rank + 1, op=MPI.SUM) == size * (size + 1) // 2, "allreduce")
a2a = comm.alltoall([rank * 100 + d for d in range(size)])
check(a2a == [s * 100 + rank for s in range(size)], "alltoall")
red = comm.reduce(rank, op=MPI.MAX, root=size - 1)
if rank == size - 1:
    check(red == size - 1, "reduce max")

# one-sided: put into the right neighbour under fences, accumulate under a lock
n = 4096
mem = bytearray(n * 4)
win = MPI.Win.Create(mem, disp_unit=4, comm=comm)
right, left = (rank + 1) % size, (rank - 1) % size
src = b"".join(int.to_bytes(rank * 1000 + i, 4, "little") for i in range(n))
win.Fence()
win.Put(src, right)
win.Fence()
check(bytes(mem) == b"".join(int.to_bytes(left * 1000 + i, 4, "little") for i in range(n)),
      "fence put")
win.Fence()
comm.Barrier()
one = bytearray(int.to_bytes(rank + 1, 4, "little"))
win.Lock(0, MPI.LOCK_SHARED)
win.Accumulate([one, MPI.INT], 0, target=(0, 1, MPI.INT), op=MPI.SUM)
win.Unlock(0)
comm.Barrier()
if rank == 0:
    win.Lock(0, MPI.LOCK_EXCLUSIVE)
    total = int.from_bytes(mem[0:4], "little")
    win.Unlock(0)
    expect = (left * 1000) + size * (size + 1) // 2
    check(total == expect, f"lock accumulate: {total} != {expect}")
win.Free()

nfail = comm.allreduce(len(failures), op=MPI.SUM)
if rank == 0:
    print("py-suite: all checks passed" if nfail == 0 else f"py-suite: {nfail} checks FAILED",
          flush=True)
sys.exit(0 if nfail == 0 else 1)
