#!/usr/bin/env python3
"""DDP on the "collectived" backend trains as one process on the global batch does.

collective-launch runs this as every rank (ctest: 2 nodes x 2 ranks). Every rank builds the
same MLP (same seed) twice: "ddp" is DistributedDataParallel over the default process group,
dist.init_process_group("collectived"), with small buckets so that a step has several; "single"
is a plain copy. For --steps SGD steps (momentum 0.9) on synthetic classification batches,
"single" takes the whole global batch of --batch rows and rank r's "ddp" takes rows
[r*b, (r+1)*b): the mean loss over b rows, with DDP averaging the gradients over the ranks,
has the gradient of the mean loss over the global batch, so both end with the same
parameters up to the order of floating-point additions:

  normwise = max_i |ddp_i - single_i| / max_i |single_i|   <= --tolerance (1e-5)

over all parameters as one vector. So that this proves something, also checked: training
moved the parameters (max |single - init| / max |init| >= --min-change), the ranks started
from different initial parameters (DDP's broadcast made them equal), the DDP parameters are
bitwise equal on every rank (the collectived MIN and MAX of them equal them), and the process
group is the collectived backend's with --expect-ranks ranks.

Exit status: 0 pass, 1 a check failed, 77 skip (torch or the backend missing).
"""

import argparse
import copy
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import common  # noqa: E402
import torch_common  # noqa: E402

torch, dist = torch_common.require_backend()
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=128, help="global batch")
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--bucket-cap-mb", type=float, default=0.1)
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--min-change", type=float, default=0.01)
    p.add_argument("--expect-ranks", type=int, default=0)
    return p.parse_args()


def mlp(args):
    return torch.nn.Sequential(
        torch.nn.Linear(args.features, args.hidden), torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, args.classes))


def batch(args, step):
    """Global batch @step: inputs and the labels a fixed random linear teacher gives them."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(args.batch, args.features, generator=g)
    teacher = torch.randn(args.features, args.classes,
                          generator=torch.Generator().manual_seed(7))
    return x, (x @ teacher).argmax(1)


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def main():
    args = parse_args()
    dist.init_process_group("collectived", timeout=torch_common.TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        common.log("FAIL: global batch %d does not split over %d ranks" % (args.batch, world))
        return 1
    b = args.batch // world

    torch.manual_seed(0)
    single = mlp(args)
    init = flat(single).clone()
    local = copy.deepcopy(single)
    with torch.no_grad():  # a different start on every rank but 0: DDP must broadcast rank 0's
        for p in local.parameters():
            p.add_(rank)
    local_init = flat(local).clone()
    ddp = DDP(local, bucket_cap_mb=args.bucket_cap_mb)
    opt_d = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    opt_s = torch.optim.SGD(single.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    for step in range(args.steps):
        x, y = batch(args, step)
        opt_s.zero_grad()
        loss_fn(single(x), y).backward()
        opt_s.step()
        opt_d.zero_grad()
        loss_fn(ddp(x[rank * b:(rank + 1) * b]), y[rank * b:(rank + 1) * b]).backward()
        opt_d.step()

    ref, got = flat(single), flat(ddp.module)
    normwise = ((got - ref).abs().max() / ref.abs().max()).item()
    change = ((ref - init).abs().max() / init.abs().max()).item()
    lo, hi = got.clone(), got.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    checks = [
        ("normwise %.3g <= %g" % (normwise, args.tolerance), normwise <= args.tolerance),
        ("parameters moved by %.3g >= %g" % (change, args.min_change), change >= args.min_change),
        ("rank %d started elsewhere" % rank, rank == 0 or not torch.equal(local_init, init)),
        ("DDP parameters equal on every rank", torch.equal(lo, got) and torch.equal(hi, got)),
        ("backend %s" % dist.get_backend(), dist.get_backend() == "collectived"),
        ("ranks %d (expected %d)" % (world, args.expect_ranks),
         not args.expect_ranks or world == args.expect_ranks),
    ]
    failed = [what for what, ok in checks if not ok]
    for what, ok in checks:
        common.log("%s: %s" % ("ok" if ok else "FAIL", what))
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
