#!/usr/bin/env python3
"""DDP step time on the collectived backend against DDP on gloo, in the same run.

collective-launch runs this as every rank (2 nodes x 2 ranks for the numbers of
docs/benchmarks.md). The default process group is "collectived"; a gloo group of the same
ranks is made with new_group(backend="gloo"). Three copies of one MLP train on the same
batches, one step of each in turn, in every order in turn (the six permutations, so that no
variant always follows the same one):

  gloo              DDP(process_group=<the gloo group>), DDP's own allreduce
  collectived       DDP over the collectived group, DDP's own allreduce (SUM of pre-divided
                    gradients through the backend: each bucket staged into the group's pool)
  collectived+hook  the same, with collective.ddp.allreduce_hook registered on a
                    collective.Communicator (its own job): buckets averaged by the hook

A step is zero_grad, forward, backward (DDP's allreduces overlap it and end inside it) and the
optimizer step; the ranks meet at a barrier before each, outside the timing. After --warmup
steps, --steps are timed; each rank takes the median per variant and the report gives the
slowest rank's (all_reduce MAX), in milliseconds, and each variant's ratio to gloo.

Checked (so that the times compare like with like): the two collectived models end with the
same parameters (--tolerance, normwise; DDP's pre-division by the world size and the hook's
average differ only by exact divisions by a power of two), the gloo model too as long as the
run is short (--gloo-tolerance; over a hundred steps or so the order of the additions, which
differs between gloo and collectived, moves some ReLU input across zero, and the trajectories
part), and the hook saw every step.
Exit status: 0 pass, 1 a check failed, 77 skip.
"""

import argparse
import copy
import itertools
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import common  # noqa: E402
import torch_common  # noqa: E402

torch, dist = torch_common.require_backend()
import collective  # noqa: E402
import collective.ddp  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

VARIANTS = ("gloo", "collectived", "collectived+hook")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--features", type=int, default=784)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--gloo-tolerance", type=float, default=1e-5)
    return p.parse_args()


def mlp(args):
    layers, width = [], args.features
    for _ in range(args.layers):
        layers += [torch.nn.Linear(width, args.hidden), torch.nn.ReLU()]
        width = args.hidden
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def main():
    args = parse_args()
    dist.init_process_group("collectived", timeout=torch_common.TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo", timeout=torch_common.TIMEOUT)
    comm = collective.Communicator()

    torch.manual_seed(0)
    base = mlp(args)
    nparams = sum(p.numel() for p in base.parameters())
    models = {v: copy.deepcopy(base) for v in VARIANTS}
    ddps = {"gloo": DDP(models["gloo"], process_group=gloo),
            "collectived": DDP(models["collectived"]),
            "collectived+hook": DDP(models["collectived+hook"])}
    hook = collective.ddp.register(ddps["collectived+hook"], comm)
    opts = {v: torch.optim.SGD(d.parameters(), lr=0.01, momentum=0.9) for v, d in ddps.items()}
    loss_fn = torch.nn.CrossEntropyLoss()
    times = {v: [] for v in VARIANTS}
    orders = list(itertools.permutations(VARIANTS))
    teacher = torch.randn(args.features, 10, generator=torch.Generator().manual_seed(1))

    for step in range(args.warmup + args.steps):
        g = torch.Generator().manual_seed(step * world + rank)
        x = torch.randn(args.batch, args.features, generator=g)
        y = (x @ teacher).argmax(1)
        for v in orders[step % len(orders)]:
            dist.barrier()
            t0 = time.perf_counter()
            opts[v].zero_grad()
            loss_fn(ddps[v](x), y).backward()
            opts[v].step()
            if step >= args.warmup:
                times[v].append(time.perf_counter() - t0)

    med = torch.tensor([statistics.median(times[v]) * 1e3 for v in VARIANTS],
                       dtype=torch.float64)
    dist.all_reduce(med, op=dist.ReduceOp.MAX)
    checks = []
    for a, b, tol in (("collectived+hook", "collectived", args.tolerance),
                      ("collectived", "gloo", args.gloo_tolerance)):
        ref = flat(models[b])
        diff = ((flat(models[a]) - ref).abs().max() / ref.abs().max()).item()
        checks.append(("%s vs %s parameters: %.3g <= %g" % (a, b, diff, tol), diff <= tol))
    checks.append(("hook iterations %d >= %d" % (hook.iterations, args.warmup + args.steps),
                   hook.iterations >= args.warmup + args.steps))
    if rank == 0:
        common.log("MLP %d-%s-10 (%d parameters, %.1f MiB of gradients), batch %d per rank, "
                   "%d ranks, %d timed steps per variant (median of the slowest rank):"
                   % (args.features, "-".join([str(args.hidden)] * args.layers), nparams,
                      nparams * 4 / 2**20, args.batch, world, args.steps))
        for v, m in zip(VARIANTS, med.tolist()):
            common.log("  %-17s %8.2f ms  %.2f x gloo" % (v, m, m / med[0].item()))
    for what, ok in checks:
        common.log("%s: %s" % ("ok" if ok else "FAIL", what))
    comm.close()
    dist.destroy_process_group()
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
