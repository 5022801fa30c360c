#!/usr/bin/env python3
"""One rank of torchrun_test.py's torchrun job: DDP on the collectived backend, set up from
torchrun's variables alone (no COLL_ROOT, COLL_JOB or COLL_JOB_TOKEN).

It trains a linear model for a few steps on a global batch split over the ranks and checks the
weights against one process trained on the whole batch here; it creates a group of every rank
and allreduces in it; rank 0 prints the job id and token of both groups from torch's store
("GROUP <name> <job> <token>") for the test to compare. Prints "RANK <r> OK" when all held.
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, BATCH, IN, OUT = 5, 8, 16, 4


def data(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(BATCH, IN, generator=g), torch.randn(BATCH, OUT, generator=g)


def train(model, parts, opt):
    for step in range(STEPS):
        x, y = parts(step)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def main():
    dist.init_process_group("collectived")
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    reference = nn.Linear(IN, OUT)
    model = DDP(nn.Linear(IN, OUT))
    model.module.load_state_dict(reference.state_dict())
    share = BATCH // size
    train(model, lambda s: tuple(t[rank * share:(rank + 1) * share] for t in data(s)),
          torch.optim.SGD(model.parameters(), lr=0.1))
    train(reference, data, torch.optim.SGD(reference.parameters(), lr=0.1))
    for got, want in zip(model.module.parameters(), reference.parameters()):
        if not torch.allclose(got, want, rtol=1e-5, atol=1e-6):
            sys.exit("rank %d: DDP weights differ from one process's: %s vs %s"
                     % (rank, got, want))
    group = dist.new_group(list(range(size)))
    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t, group=group)
    if t.tolist() != [size * (size + 1) / 2] * 3:
        sys.exit("rank %d: allreduce in the new group gave %s" % (rank, t.tolist()))
    if rank == 0:
        store = dist.distributed_c10d._get_default_store()
        for name in ("0", "1"):
            setup = json.loads(store.get("%s/collectived/setup" % name).decode())
            print("GROUP %s %s %s %s" % (name, setup["job"], setup["token"], setup["root"]))
    dist.barrier()
    print("RANK %d OK (MASTER_ADDR %s)" % (rank, os.environ.get("MASTER_ADDR")))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
