#!/usr/bin/env python3
"""The default group of the "collectived" backend initialised and destroyed again in one process.

collective-launch runs this as every rank (ctest: 2 nodes x 2 ranks, env:// rendezvous: rank 0
hosts torch's TCPStore at MASTER_ADDR:MASTER_PORT). --rounds times, every rank calls
dist.init_process_group("collectived"), all-reduces (rank + 1) * (round + 1) and checks the
sum, world * (world + 1) / 2 * (round + 1), then dist.destroy_process_group(). Before each
destroy, rank 0 first waits --rank0-lag seconds, so that it is the last rank out of destroy
(as in the report of this bug, where the backend's init was faster than gloo's): a rank that
returned from destroy before rank 0 had closed its store would begin its next rendezvous on
rank 0's old TCPStore and fail with "Connection reset by peer" (see
python/torch_backend/shutdown.cpp). The lag is the test's way to make the order certain; the
backend must not depend on it.

Exit status: 0 pass, 1 a check failed (or torch raised), 77 skip (torch or the backend missing).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import common  # noqa: E402
import torch_common  # noqa: E402

torch, dist = torch_common.require_backend()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rank0-lag", type=float, default=0.3,
                   help="seconds rank 0 waits before each destroy_process_group()")
    p.add_argument("--backend", default="collectived",
                   help="gloo shows torch's own race (it fails with a lag too)")
    return p.parse_args()


def one_round(args, rnd):
    """init, one checked allreduce, destroy; returns whether the sum was right."""
    dist.init_process_group(args.backend, timeout=torch_common.TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.full((1000,), float((rank + 1) * (rnd + 1)), dtype=torch.float64)
    dist.all_reduce(t)
    want = world * (world + 1) / 2 * (rnd + 1)
    ok = bool(t.eq(want).all()) and dist.get_backend() == args.backend
    common.log("%s: rank %d round %d: allreduce %s, want %s on backend %s"
               % ("ok" if ok else "FAIL", rank, rnd, t[0].item(), want, dist.get_backend()))
    if rank == 0:
        time.sleep(args.rank0_lag)
    dist.destroy_process_group()
    return ok


def main():
    args = parse_args()
    ok = all([one_round(args, rnd) for rnd in range(args.rounds)])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
