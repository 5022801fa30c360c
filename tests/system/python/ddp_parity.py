#!/usr/bin/env python3
"""DDP parity: PyTorch DistributedDataParallel with collectived's communication hook ends with
the same parameters as DDP with its default gloo allreduce.

collective-launch runs this as every rank (the test: 2 nodes x 2 ranks). Each rank builds one
MLP, wraps two copies of it in DDP over the same gloo process group (made by
collective.ddp.init_process_group) and trains both for --steps SGD steps (momentum 0.9) on the
same Fashion-MNIST batches: rank r takes rows [r*b, (r+1)*b) of each global batch. "hook" has
collective.ddp.allreduce_hook registered, so its gradient buckets are averaged by collectived;
"ref" is unmodified DDP. The gradients of both differ only by the order of the floating-point
additions of the allreduce, so the parameters must agree to float32 rounding:

  normwise    = max_i |hook_i - ref_i| / max_i |ref_i|            <= --tolerance (1e-5)
  elementwise = max_i |hook_i - ref_i| / (|ref_i| + --floor)      <= --tolerance
                (the floor, 1e-3 by default, a twentieth of the median |parameter|, keeps
                parameters near zero from dividing by ~0)

over all parameters as one vector. Also checked, so that the comparison proves something:
training moved the parameters (max|ref - init| / max|init| >= --min-change), every step sent
its buckets through collectived (the hook saw --steps iterations; DDP rebuilds its buckets
after the first, so later ones may have more), every bucket's allreduce completed with an
algorithm, the hooked
parameters are bitwise the same on every rank (collectived min and max of them equal them),
and the job really had the expected shape (--expect-ranks, --expect-nodes).

Exit status: 0 pass, 1 a check failed, 77 skip (torch, numpy or the data set missing).
"""

import argparse
import copy
import gzip
import os
import struct
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

DATA_DIR = "/usr/share/datasets/fashion-mnist"
IMAGES = "train-images-idx3-ubyte"
LABELS = "train-labels-idx1-ubyte"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=256, help="global batch (default 256)")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--hidden", type=int, default=512, help="width of the hidden layers")
    p.add_argument("--layers", type=int, default=3, help="number of hidden layers")
    p.add_argument("--bucket-cap-mb", type=float, default=0.25,
                   help="DDP bucket_cap_mb of both models (small: several buckets)")
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--floor", type=float, default=1e-3)
    p.add_argument("--min-change", type=float, default=0.01)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds, for every wait")
    p.add_argument("--expect-ranks", type=int, default=0)
    p.add_argument("--expect-nodes", type=int, default=0)
    p.add_argument("--data-dir", default=DATA_DIR)
    return p.parse_args()


def open_idx(data_dir, name):
    for path, opener in ((os.path.join(data_dir, name + ".gz"), gzip.open),
                         (os.path.join(data_dir, name), open)):
        if os.path.exists(path):
            return opener(path, "rb")
    common.skip("Fashion-MNIST %s not found in %s (install Debian's dataset-fashion-mnist)"
                % (name, data_dir))


def read_idx(data_dir, name, count, np):
    """The first @count items of an IDX file: uint8 array of shape (count, *item dims)."""
    with open_idx(data_dir, name) as f:
        magic, n = struct.unpack(">II", f.read(8))
        ndim = magic & 0xff
        dims = struct.unpack(">%dI" % (ndim - 1), f.read(4 * (ndim - 1)))
        if magic >> 8 != 0x08 or count > n:
            raise SystemExit("%s: not a uint8 IDX file with %d items" % (name, count))
        item = int(np.prod(dims, dtype=np.int64))
        data = f.read(count * item)
    return np.frombuffer(data, dtype=np.uint8).reshape((count,) + tuple(dims))


def model(torch, hidden, layers):
    """An MLP 784 -> hidden (x layers) -> 10 with ReLUs."""
    mods, width = [torch.nn.Flatten()], 784
    for _ in range(layers):
        mods += [torch.nn.Linear(width, hidden), torch.nn.ReLU()]
        width = hidden
    return torch.nn.Sequential(*mods, torch.nn.Linear(width, 10))


def flat(torch, module):
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()]).double()


def check_same_on_all_ranks(comm, torch, params, timeout):
    """The collectived min and max of @params over all ranks equal @params."""
    lo = comm.empty_tensor(params.numel())
    lo.copy_(params)
    hi = comm.empty_tensor(params.numel())
    hi.copy_(params)
    comm.allreduce(lo, op="min").result(timeout)
    comm.allreduce(hi, op="max").result(timeout)
    return bool(torch.equal(lo, hi) and torch.equal(lo, params))


def main():
    args = parse_args()
    np = common.require("numpy")
    torch = common.require("torch")
    import collective
    import collective.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP

    count = args.steps * args.batch
    images = torch.from_numpy(read_idx(args.data_dir, IMAGES, count, np).astype(np.float32)
                              / 255.0)
    labels = torch.from_numpy(read_idx(args.data_dir, LABELS, count, np).astype(np.int64))
    comm = collective.Communicator(op_timeout=args.timeout)
    rank, world = comm.rank, comm.world_size
    if args.batch % world:
        raise SystemExit("global batch %d does not divide by %d ranks" % (args.batch, world))
    local = args.batch // world

    torch.set_num_threads(1)
    collective.ddp.init_process_group(comm, timeout=args.timeout)
    torch.manual_seed(1234 + rank)  # DDP must broadcast rank 0's parameters to the others
    net = model(torch, args.hidden, args.layers)
    ref = DDP(copy.deepcopy(net), bucket_cap_mb=args.bucket_cap_mb)
    hook = DDP(copy.deepcopy(net), bucket_cap_mb=args.bucket_cap_mb)
    state = collective.ddp.register(hook, comm, timeout=args.timeout)
    init = flat(torch, ref.module)
    opts = [torch.optim.SGD(m.parameters(), lr=args.lr, momentum=0.9) for m in (ref, hook)]
    loss_fn = torch.nn.CrossEntropyLoss()

    start = time.monotonic()
    for step in range(args.steps):
        rows = slice(step * args.batch + rank * local, step * args.batch + (rank + 1) * local)
        for m, opt in zip((ref, hook), opts):
            opt.zero_grad()
            loss = loss_fn(m(images[rows]), labels[rows])
            loss.backward()
            opt.step()
        if rank == 0 and step in (0, args.steps - 1):
            common.log("step %d: loss %.4f" % (step, loss.item()))
    elapsed = time.monotonic() - start

    a, b = flat(torch, hook.module), flat(torch, ref.module)
    diff = (a - b).abs()
    normwise = float(diff.max() / b.abs().max())
    elementwise = float((diff / (b.abs() + args.floor)).max())
    change = float((b - init).abs().max() / init.abs().max())
    same = check_same_on_all_ranks(comm, torch, a.float(), args.timeout)
    nodes = int(os.environ.get("COLL_NUM_NODES", "0"))
    common.log("rank %d: steps=%d ranks=%d nodes=%d params=%d buckets=%d hook_calls=%d "
               "algos=%s normwise=%.3g elementwise=%.3g (floor %g) bitwise_equal=%d/%d "
               "change=%.3g same_on_all_ranks=%s comm_ms_per_step=%.2f train_s=%.2f"
               % (rank, args.steps, world, nodes, a.numel(), state.buckets, state.calls,
                  dict(state.algos), normwise, elementwise, args.floor,
                  int((diff == 0).sum()), a.numel(), change, same,
                  state.comm_ns / 1e6 / max(args.steps, 1), elapsed))

    failures = []
    if args.expect_ranks and world != args.expect_ranks:
        failures.append("world size %d, expected %d" % (world, args.expect_ranks))
    if args.expect_nodes and nodes != args.expect_nodes:
        failures.append("%d nodes, expected %d" % (nodes, args.expect_nodes))
    if change < args.min_change:
        failures.append("training changed the parameters by only %.3g (< %g): the comparison "
                        "would prove nothing" % (change, args.min_change))
    if (state.iterations != args.steps or state.calls < args.steps or
            sum(state.algos.values()) != state.calls or "" in state.algos):
        failures.append("the hook saw %d iterations of %d steps and reduced %d buckets "
                        "(algorithms %s)" % (state.iterations, args.steps, state.calls,
                                             dict(state.algos)))
    if not normwise <= args.tolerance:
        failures.append("normwise difference %.3g > %g" % (normwise, args.tolerance))
    if not elementwise <= args.tolerance:
        i = int((diff / (b.abs() + args.floor)).argmax())
        failures.append("elementwise difference %.3g > %g at %d: %.9g vs %.9g"
                        % (elementwise, args.tolerance, i, float(a[i]), float(b[i])))
    if not same:
        failures.append("the hooked model's parameters differ between ranks")
    for f in failures:
        common.log("rank %d: FAIL: %s" % (rank, f))
    torch.distributed.destroy_process_group()
    comm.close()
    if failures:
        return 1
    common.log("rank %d: PASS" % rank)
    return 0


if __name__ == "__main__":
    sys.exit(main())
