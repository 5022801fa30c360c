#!/usr/bin/python3
"""ddp-resnet: torchvision resnet18 trained with DistributedDataParallel on Fashion-MNIST, one
rank of a job; bench/ddp-resnet.sh runs it on namespace hosts (collective-launch
--netns-ranks) and compares the ways of reducing the gradients.

    ddp-resnet.py --comm gloo|collectived|hook [--compression SPEC] [--steps 60] [--warmup 5]
                  [--batch 32] [--lr 0.02] [--eval 2000] [--data DIR]

  gloo         dist.init_process_group("gloo"): DDP's own allreduce over gloo (TCP)
  collectived  dist.init_process_group("collectived"): DDP's own allreduce through collectived's
               torch backend (python/collective/torch_backend.py)
  hook         a gloo group for DDP's set-up, and the gradient buckets averaged by collectived's
               DDP comm hook (python/collective/ddp.py), compressed as --compression says
               (none, powersgd:2, topk:0.01, ...: Communicator.set_compression's specs)

The model: resnet18 (11.2 M parameters, 44.7 MB of float32 gradients) with a 1-channel first
convolution (7x7, stride 2) for the 28x28 images and 10 classes; SGD with momentum 0.9 at --lr,
seed 1; DDP with broadcast_buffers=False (each rank keeps its batch-norm statistics, so that
only the gradients travel) and its default 25 MB buckets. Every run takes the same images in the
same order: global batch = --batch x world, rank r the r-th slice of it. A step is zero_grad,
forward, backward (DDP's allreduces overlap it and end inside it) and the optimizer step, timed
on every rank with a barrier (gloo's, outside the timing) before each. Printed by rank 0:
"step K step_ms=..." for every step, then "result: ..." with the median step time after the
warm-up (the slowest rank's), the loss of the last step, and the test accuracy of rank 0's model
on the first --eval test images. Run with Debian's /usr/bin/python3 and the build tree's
package on PYTHONPATH (ddp-resnet.sh does). Exit status 0, 1 on failure.
"""
import argparse
import gzip
import os
import statistics
import struct
import sys
import time

import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP

DATA = "/usr/share/datasets/fashion-mnist"  # Debian package dataset-fashion-mnist


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--comm", choices=("gloo", "collectived", "hook"), required=True)
    p.add_argument("--compression", default="none")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=32, help="images per rank and step")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--eval", type=int, default=2000, help="test images for the accuracy")
    p.add_argument("--data", default=DATA)
    return p.parse_args()


def idx(path):
    """The array of an idx file (gzip), as a uint8 tensor of its shape."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    shape = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(shape)


def load(data, split):
    x = idx(os.path.join(data, "%s-images-idx3-ubyte.gz" % split)).float().div_(255.0)
    y = idx(os.path.join(data, "%s-labels-idx1-ubyte.gz" % split)).long()
    return ((x - 0.2860) / 0.3530).unsqueeze(1), y


def resnet18():
    torch.manual_seed(1)
    net = torchvision.models.resnet18(num_classes=10)
    net.conv1 = torch.nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
    return net


def setup(args):
    """(ddp model, the gloo group for barriers, the hook's state or None, communicator)."""
    comm, state = None, None
    if args.comm == "hook":
        import collective
        import collective.ddp
        comm = collective.Communicator()
        collective.ddp.init_process_group(comm)
    else:
        if args.comm == "collectived":
            import collective.torch_backend  # noqa: F401 (registers the backend)
        dist.init_process_group(args.comm)
    barrier = dist.new_group(backend="gloo") if args.comm == "collectived" else None
    model = DDP(resnet18(), broadcast_buffers=False)
    if comm is not None:
        spec = None if args.compression == "none" else args.compression
        state = collective.ddp.register(model, comm, compression=spec)
    return model, barrier, state, comm


def evaluate(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for s in range(0, len(x), 500):
            correct += (model(x[s:s + 500]).argmax(1) == y[s:s + 500]).sum().item()
    return 100.0 * correct / len(x)


def train(args, model, barrier, rank, world):
    x, y = load(args.data, "train")
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(1))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    times, loss = [], None
    g = args.batch * world
    for step in range(args.warmup + args.steps):
        start = (step * g) % (len(x) - g)
        sel = order[start + rank * args.batch:start + (rank + 1) * args.batch]
        dist.barrier(group=barrier)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(x[sel]), y[sel])
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if step >= args.warmup:
            times.append(dt)
        if rank == 0:
            print("step %d step_ms=%.1f loss=%.4f" % (step, dt * 1e3, loss.item()), flush=True)
    return statistics.median(times), loss.item()


def main():
    args = parse_args()
    torch.set_num_threads(1)
    model, barrier, state, comm = setup(args)
    rank, world = dist.get_rank(), dist.get_world_size()
    med, loss = train(args, model, barrier, rank, world)
    slowest = torch.tensor([med * 1e3], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=barrier)
    if rank == 0:
        tx, ty = load(args.data, "t10k")
        acc = evaluate(model.module, tx[:args.eval], ty[:args.eval])
        nparams = sum(p.numel() for p in model.parameters())
        extra = ""
        if state is not None and state.dense_bytes:
            extra = " wire_mb_per_step=%.3f ratio=%.1f" % (
                state.wire_bytes / 1e6 / max(state.iterations, 1),
                state.dense_bytes / max(state.wire_bytes, 1))
        print("result: comm=%s compression=%s world=%d params=%d step_ms=%.1f loss=%.4f "
              "test_acc=%.2f%s" % (args.comm, args.compression, world, nparams,
                                   slowest.item(), loss, acc, extra), flush=True)
    if comm is not None:
        comm.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
