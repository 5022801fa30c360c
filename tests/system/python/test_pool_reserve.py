#!/usr/bin/env python3
"""A fixed pool that the job's own allocations fill before its first allreduce (one rank of a
multi-node job; collective-launch runs it as every rank, with a fixed pool and the direct path).

Local rank 0 takes the node buffers of the direct path when it joins, so allocations that fill
the pool end with COLL_ERR_POOL_FULL in the caller's own allocation, and the allreduces after
run on the direct path with the right sums. (They were taken at the first allreduce: that
allreduce failed the job with COLL_ERR_POOL_FULL.) Exit status 0 passed, 1 failed, 77 without
numpy.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

np = common.require("numpy")
import collective  # noqa: E402
from collective import CollectiveError  # noqa: E402

T = 30.0  # bound on every wait, seconds
BLOCK = 1 << 20  # bytes of each filler allocation
MAX_BLOCKS = 1024  # bounds the fill: the test's pool is far smaller


def fill(comm):
    """Allocate BLOCK-sized arrays until the pool is full; the arrays and the error."""
    held = []
    for _ in range(MAX_BLOCKS):
        try:
            held.append(comm.empty(BLOCK, "uint8"))
        except CollectiveError as e:
            return held, e
    raise AssertionError("%d blocks of %d bytes fit: is the pool fixed?" % (MAX_BLOCKS, BLOCK))


def main():
    comm = collective.Communicator(op_timeout=T)
    n = 1000  # 4000 bytes of float32: within the direct path's bound
    a = comm.empty(n, "float32")
    held, err = fill(comm)
    if err.name != "COLL_ERR_POOL_FULL":
        raise AssertionError("filling the pool ended with %s (%s)" % (err.name, err.detail))
    want = np.zeros(n, dtype=np.float64)
    for r in range(comm.world_size):
        want += (r + 1) * np.arange(n, dtype=np.float64) % 97
    for it in range(3):
        a[:] = (comm.rank + 1) * np.arange(n, dtype=np.float32) % 97 + it
        f = comm.allreduce(a)
        f.result(T)
        if not np.array_equal(a.astype(np.float64), want + it * comm.world_size):
            raise AssertionError("allreduce %d: wrong sums" % it)
        if f.algo not in ("shm+direct", "direct"):
            raise AssertionError("allreduce %d ran as %r, not on the direct path" % (it, f.algo))
    common.log("rank %d: %d MiB filled the pool (%s), then 3 allreduces on %s were right"
               % (comm.rank, len(held), err.name, f.algo))
    del held
    comm.close()


if __name__ == "__main__":
    main()
