#!/usr/bin/env python3
"""collective.optim.ServiceOptimizer trains as torch.optim does in one process on the global batch.

collective-launch runs this as every rank (ctest: 2 nodes x 2 ranks). Every rank builds the
same MLP (same seed) twice: "service" is trained with ServiceOptimizer (the daemons average the
gradients and run the optimizer on their node's shard), "single" with the torch.optim
optimizer of the same name on the whole global batch of --batch rows, rank r's "service"
taking rows [r*b, (r+1)*b). Weights have weight decay, biases are a group with
weight_decay 0. The learning rate follows the service's schedule (linear scaling from
--base-batch to --batch, a warmup, then a step or cosine decay), which the test computes by
its closed form for torch.optim. The buckets are [fc1.weight, fc1.bias] and
[fc2.weight, fc2.bias]; with 2 nodes each bucket is cut in the middle, inside its weight, so
each weight layer is split between the two shards.

Checks (each printed):
  - 2 buckets; every rank starts from rank 0's parameters (the others perturbed theirs);
  - after --steps steps, max_i |service_i - single_i| / max(|single_i|, rms of i's layer)
    <= --tolerance (1e-5), training moved the parameters, and they are bitwise equal on
    every rank (MIN and MAX over the ranks equal them);
  - checkpoint: state_dict() after --save-at steps, the parameters restored and
    load_state_dict() after the run, then the same steps again: bitwise the run's parameters;
  - load_state_dict() of something else raises ValueError.
With --fault nan instead: rank 1's gradient of step 3 holds a NaN; step() raises
CollectiveError COLL_ERR_INVALID saying the gradient is not finite on every rank (no rank's
step 3 returns as if it had succeeded).
With --compression SPEC instead (ServiceOptimizer(..., compression=SPEC)): after --steps steps
the parameters are bitwise equal on every rank, not within 1e-6 of torch.optim's on the exact
global batch (the gradients did travel compressed), and the loss on a held-out batch fell below
its initial value (the C tests, tests/system/ps, check the algorithm against its reference step by
step).

Exit status: 0 pass, 1 a check failed, 77 skip (torch missing).
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

torch = common.require("torch")
import collective  # noqa: E402
from collective.optim import ServiceOptimizer  # noqa: E402

FEATURES, HIDDEN, CLASSES = 32, 64, 10
# Holds fc1 (8448 bytes) but not fc1 and fc2 together (11048 bytes): two buckets.
BUCKET_CAP_MB = 0.01


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--optimizer", choices=("sgd", "adamw"), required=True)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--save-at", type=int, default=10)
    p.add_argument("--batch", type=int, default=128, help="global batch")
    p.add_argument("--base-batch", type=int, default=32)
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--min-change", type=float, default=0.01)
    p.add_argument("--fault", choices=("nan",), help="see the module's doc")
    p.add_argument("--compression", help="see the module's doc")
    return p.parse_args()


def settings(args):
    """(torch.optim class, its keyword arguments, the service's schedule) of the run."""
    if args.optimizer == "sgd":
        return (torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
                dict(warmup_steps=5, decay="step", milestones=[20], gamma=0.5))
    return (torch.optim.AdamW, dict(lr=2e-3, betas=(0.8, 0.99), eps=1e-7, weight_decay=0.05),
            dict(warmup_steps=3, warmup_start_lr=0.0, decay="cosine", total_steps=args.steps,
                 final_lr=1e-4))


def lr_at(args, base, sched, t):
    """The schedule's learning rate of step t (0, 1, ...): common/schedule.h's closed forms."""
    peak = base * args.batch / args.base_batch
    warm = sched["warmup_steps"]
    start = sched.get("warmup_start_lr", base)
    if t < warm:
        return start + (peak - start) * t / warm
    if sched["decay"] == "step":
        return peak * sched["gamma"] ** sum(1 for m in sched["milestones"] if m <= t)
    total, final = sched["total_steps"], sched["final_lr"]
    if t >= total:
        return final
    return peak - (peak - final) * (1 - math.cos(math.pi * (t - warm) / (total - warm))) / 2


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
                               torch.nn.Linear(HIDDEN, CLASSES))


def groups(model):
    """Weights with the optimizer's weight decay, biases in a group without."""
    named = list(model.named_parameters())
    return [{"params": [p for n, p in named if n.endswith("weight")]},
            {"params": [p for n, p in named if n.endswith("bias")], "weight_decay": 0.0}]


def batch(args, step):
    """Global batch @step: inputs and the labels a fixed random linear teacher gives them."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(args.batch, FEATURES, generator=g)
    teacher = torch.randn(FEATURES, CLASSES, generator=torch.Generator().manual_seed(7))
    return x, (x @ teacher).argmax(1)


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def max_relative(model, ref):
    """max over elements of |got - ref| / max(|ref|, rms of ref's layer)."""
    worst = 0.0
    for p, q in zip(model.parameters(), ref.parameters()):
        r = q.detach().double()
        floor = r.pow(2).mean().sqrt()
        rel = (p.detach().double() - r).abs() / torch.maximum(r.abs(), floor)
        worst = max(worst, rel.max().item())
    return worst


def train(args, model, opt, steps, rank, b, set_lr):
    loss_fn = torch.nn.CrossEntropyLoss()
    for t in steps:
        x, y = batch(args, t)
        if b is not None:
            x, y = x[rank * b:(rank + 1) * b], y[rank * b:(rank + 1) * b]
        set_lr(t)
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()


def same_everywhere(comm, x):
    """x is bitwise the same on every rank: its MIN and MAX over the ranks equal it."""
    lo, hi = comm.empty_tensor(x.numel()), comm.empty_tensor(x.numel())
    lo.copy_(x)
    hi.copy_(x)
    comm.allreduce(lo, op="min").result(timeout=60)
    comm.allreduce(hi, op="max").result(timeout=60)
    return torch.equal(lo, x) and torch.equal(hi, x)


def refuses_other_dicts(opt):
    try:
        opt.load_state_dict({"state": {}, "param_groups": []})
    except ValueError:
        return True
    return False


def run(args, comm):
    rank, world = comm.rank, comm.world_size
    b = args.batch // world
    cls, kw, sched = settings(args)
    sched = dict(sched, base_batch=args.base_batch, global_batch=args.batch)

    single, service = mlp(), mlp()
    init = flat(single).clone()
    with torch.no_grad():  # a different start on every rank but 0: the service broadcasts 0's
        for p in service.parameters():
            p.add_(rank)
    ref_opt = cls(groups(single), **kw)
    # adamw's run also takes another key space than the default.
    opt = ServiceOptimizer(comm, groups(service), args.optimizer, schedule=sched,
                           bucket_cap_mb=BUCKET_CAP_MB,
                           key_space=3 if args.optimizer == "adamw" else None, **kw)
    started = torch.equal(flat(service), init)

    def ref_lr(t):
        for g in ref_opt.param_groups:
            g["lr"] = lr_at(args, kw["lr"], sched, t)

    def no_lr(t):
        pass

    train(args, single, ref_opt, range(args.steps), rank, None, ref_lr)
    train(args, service, opt, range(args.save_at), rank, b, no_lr)
    saved, saved_params = opt.state_dict(), flat(service).clone()
    train(args, service, opt, range(args.save_at, args.steps), rank, b, no_lr)
    final = flat(service).clone()
    worst = max_relative(service, single)
    change = ((flat(single) - init).abs().max() / init.abs().max()).item()
    equal = same_everywhere(comm, final)

    with torch.no_grad():
        for p, (off, n) in zip(service.parameters(), offsets(service)):
            p.copy_(saved_params[off:off + n].view_as(p))
    opt.load_state_dict([saved] if args.optimizer == "sgd" else saved)  # both forms
    resumed_at = opt.steps
    train(args, service, opt, range(args.save_at, args.steps), rank, b, no_lr)
    differ = (flat(service) != final).sum().item()
    return [
        ("%d buckets (expected 2)" % opt.num_buckets, opt.num_buckets == 2),
        ("rank %d starts from rank 0's parameters" % rank, started),
        ("%s: max relative difference after %d steps %.3g <= %g"
         % (args.optimizer, args.steps, worst, args.tolerance), worst <= args.tolerance),
        ("parameters moved by %.3g >= %g" % (change, args.min_change), change >= args.min_change),
        ("parameters bitwise equal on every rank", equal),
        ("state_dict after step %d (says %d), loaded back at step %d"
         % (args.save_at, saved["step"], resumed_at),
         saved["step"] == args.save_at and resumed_at == args.save_at),
        ("resumed run: %d of %d parameters differ bitwise" % (differ, final.numel()),
         differ == 0),
        ("load_state_dict of a torch.optim state dict raises ValueError",
         refuses_other_dicts(opt)),
    ]


def run_nan(args, comm):
    """Steps 1-2 go through; rank 1 puts a NaN into its gradient of step 3."""
    cls, kw, sched = settings(args)
    model = mlp()
    opt = ServiceOptimizer(comm, groups(model), args.optimizer, schedule=sched,
                           bucket_cap_mb=BUCKET_CAP_MB, **kw)
    b = args.batch // comm.world_size
    train(args, model, opt, range(2), comm.rank, b, lambda t: None)
    x, y = batch(args, 2)
    opt.zero_grad()
    torch.nn.CrossEntropyLoss()(model(x[:b]), y[:b]).backward()
    if comm.rank == 1:
        next(model.parameters()).grad.view(-1)[5] = float("nan")
    try:
        opt.step()
        error = None
    except collective.CollectiveError as e:
        error = e
    name, text = (error.name, str(error)) if error else ("nothing", "")
    return [("step 3 raised %s: %s" % (name, text),
             name == "COLL_ERR_INVALID" and "not finite" in text)]


def run_compressed(args, comm):
    rank = comm.rank
    b = args.batch // comm.world_size
    cls, kw, sched = settings(args)
    sched = dict(sched, base_batch=args.base_batch, global_batch=args.batch)
    single, service = mlp(), mlp()
    ref_opt = cls(groups(single), **kw)
    opt = ServiceOptimizer(comm, groups(service), args.optimizer, schedule=sched,
                           bucket_cap_mb=BUCKET_CAP_MB, compression=args.compression, **kw)

    def ref_lr(t):
        for g in ref_opt.param_groups:
            g["lr"] = lr_at(args, kw["lr"], sched, t)

    def held_out_loss(model):
        x, y = batch(args, 10 ** 6)
        with torch.no_grad():
            return torch.nn.CrossEntropyLoss()(model(x), y).item()

    before = held_out_loss(service)
    train(args, single, ref_opt, range(args.steps), rank, None, ref_lr)
    train(args, service, opt, range(args.steps), rank, b, lambda t: None)
    worst = max_relative(service, single)
    after, exact = held_out_loss(service), held_out_loss(single)
    return [
        ("parameters bitwise equal on every rank", same_everywhere(comm, flat(service))),
        ("%s with %s: max relative difference to torch.optim on the exact batch after %d steps "
         "%.3g > 1e-6" % (args.optimizer, args.compression, args.steps, worst), worst > 1e-6),
        ("held-out loss %.4f -> %.4f (torch.optim on the exact batch: %.4f)"
         % (before, after, exact), after < before),
    ]


def offsets(model):
    out, off = [], 0
    for p in model.parameters():
        out.append((off, p.numel()))
        off += p.numel()
    return out


def main():
    args = parse_args()
    with collective.Communicator(op_timeout=120) as comm:
        if args.batch % comm.world_size:
            common.log("FAIL: global batch %d does not split over %d ranks"
                       % (args.batch, comm.world_size))
            return 1
        if args.fault:
            checks = run_nan(args, comm)
        elif args.compression:
            checks = run_compressed(args, comm)
        else:
            checks = run(args, comm)
    for what, ok in checks:
        common.log("%s: %s" % ("ok" if ok else "FAIL", what))
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
