#!/usr/bin/env python3
"""A training script written for gloo, as torch users write them: run with torchrun's
environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), dist.init_process_group(backend),
parameters broadcast from rank 0, a barrier, DistributedDataParallel, metrics averaged with
all_reduce, a barrier before the end. It imports nothing of collectived: the backend name is
all that changes (--backend, default gloo; gloo_switch.py runs it with gloo and
with collectived and compares what rank 0 writes to --out).

--out gets one JSON object: per epoch the loss summed over every sample of every rank, the
number of correct predictions and of samples (all_reduce SUM of float64/int64 tensors), the
largest per-rank loss (all_reduce MAX), and at the end the parameters (a list of floats).
"""

import argparse
import json
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="gloo")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps-per-epoch", type=int, default=8)
    p.add_argument("--batch", type=int, default=32, help="per rank")
    p.add_argument("--out", required=True)
    return p.parse_args()


def data(rank, step, batch):
    """This rank's batch @step of a synthetic 3-class problem (a fixed linear teacher)."""
    g = torch.Generator().manual_seed(10007 * step + rank)
    x = torch.randn(batch, 20, generator=g)
    w = torch.randn(20, 3, generator=torch.Generator().manual_seed(1))
    return x, (x @ w).argmax(1)


def main():
    args = parse_args()
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(rank)  # every rank starts elsewhere ...
    model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.Tanh(), torch.nn.Linear(64, 3))
    for p in model.parameters():  # ... until rank 0's parameters are broadcast
        dist.broadcast(p.data, src=0)
    dist.barrier()
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")

    epochs = []
    for epoch in range(args.epochs):
        loss_sum, correct, worst = 0.0, 0, 0.0
        for step in range(args.steps_per_epoch):
            x, y = data(rank, epoch * args.steps_per_epoch + step, args.batch)
            opt.zero_grad()
            out = ddp(x)
            loss = loss_fn(out, y)
            (loss / args.batch).backward()
            opt.step()
            loss_sum += loss.item()
            correct += int((out.argmax(1) == y).sum())
            worst = max(worst, loss.item() / args.batch)
        sums = torch.tensor([loss_sum], dtype=torch.float64)
        counts = torch.tensor([correct, args.steps_per_epoch * args.batch], dtype=torch.int64)
        peak = torch.tensor([worst])
        dist.all_reduce(sums)
        dist.all_reduce(counts)
        dist.all_reduce(peak, op=dist.ReduceOp.MAX)
        epochs.append({"loss_sum": sums.item(), "correct": int(counts[0]),
                       "samples": int(counts[1]), "worst_loss": peak.item()})
        if rank == 0:
            print("epoch %d: loss %.5f accuracy %.4f" % (epoch, sums.item() / int(counts[1]),
                                                          int(counts[0]) / int(counts[1])))
    dist.barrier()
    if rank == 0:
        params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        with open(args.out, "w") as f:
            json.dump({"world": world, "epochs": epochs, "params": params.tolist()}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
