"""CUDA tensors through the collectived torch backend, on a machine with a GPU (tests/gpu/run.sh;
docs/gpu-verification.md). Every rank uses device LOCAL_RANK % the devices seen,
so 4 ranks share one GPU where there is one.

  torch_cuda_check.py            against a float64 reference computed here from every rank's
                                 input: allreduce of every dtype and reduction, broadcast,
                                 all_gather_into_tensor, reduce_scatter_tensor,
                                 all_to_all_single, a send/recv ring, pool tensors (zero copy);
                                 stream order: an input written by the current stream behind a
                                 long kernel, read by the daemon only once the stream got there,
                                 and Work.wait() returning before the operation ended (no CPU
                                 wait), the result read on the stream after it
  torch_cuda_check.py --nccl     a group of one rank: the collectives above through collectived
                                 and through torch's own NCCL backend on the same inputs, both
                                 equal to the reference (the input itself)

Skips (77, saying why) without torch, a CUDA device, or a backend built with CUDA tensors.
"""

import datetime
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "system",
                                "python"))
import common  # noqa: E402

torch = common.require("torch")
if not torch.cuda.is_available():
    common.skip("no CUDA device visible to torch %s" % torch.__version__)
import torch.distributed as dist  # noqa: E402

import collective.torch_backend as tb  # noqa: E402

if not tb._torch_pg.CUDA:
    common.skip("the backend was built against a torch without CUDA")

R, W = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
LOCAL = int(os.environ.get("LOCAL_RANK", "0"))
N = 1000
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int32, torch.int64]
OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX}
failed = []


def values(rank, n, dtype, seed=0):
    """Rank @rank's input: small integers (-2..2, or 0..3 for uint8), exact in every dtype."""
    i = torch.arange(n, dtype=torch.int64)
    v = (i * 7 + rank * 3 + seed) % (4 if dtype == torch.uint8 else 5)
    return (v if dtype == torch.uint8 else v - 2).to(dtype)


def reference(op, n, dtype, seed=0):
    """@op over every rank's values(), in float64 (or int64), cast back to @dtype."""
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    xs = torch.stack([values(r, n, dtype, seed).to(wide) for r in range(W)])
    out = {"SUM": lambda: xs.sum(0), "PRODUCT": lambda: xs.prod(0),
           "MIN": lambda: xs.min(0).values, "MAX": lambda: xs.max(0).values}[op]()
    return out.to(dtype)


def check(what, got, want):
    got = got.cpu()
    if got.dtype != want.dtype or not torch.equal(got, want):
        failed.append(what)
        common.log("rank %d: %s: got %s, want %s" % (R, what, got.flatten()[:8],
                                                       want.flatten()[:8]))


def collectives(dev, group):
    """Every collective on CUDA tensors of @dev, checked against reference(); @group: the
    collectived group, or NCCL's of one rank (then the reference is the input itself)."""
    for dtype in DTYPES:
        for name, op in OPS.items():
            t = values(R, N, dtype).to(dev)
            dist.all_reduce(t, op=op, group=group)
            check("allreduce %s %s" % (name, dtype), t, reference(name, N, dtype))
    t = values(R, N, torch.float32).to(dev)
    dist.broadcast(t, src=W - 1, group=group)
    check("broadcast", t, values(W - 1, N, torch.float32))
    out = torch.empty(W * N, device=dev)
    dist.all_gather_into_tensor(out, values(R, N, torch.float32).to(dev), group=group)
    check("all_gather_into_tensor", out, torch.cat([values(r, N, torch.float32)
                                                    for r in range(W)]))
    got = torch.empty(N, device=dev)
    dist.reduce_scatter_tensor(got, values(R, W * N, torch.float32).to(dev), group=group)
    check("reduce_scatter_tensor", got, reference("SUM", W * N, torch.float32)[R * N:(R + 1) * N])
    got = torch.empty(W * N, device=dev)
    dist.all_to_all_single(got, values(R, W * N, torch.float32).to(dev), group=group)
    check("all_to_all_single", got, torch.cat([values(r, W * N, torch.float32)[R * N:(R + 1) * N]
                                               for r in range(W)]))


def ring(dev):
    """A send/recv ring of CUDA tensors (collectived only: needs two ranks)."""
    got = torch.empty(N, device=dev)
    send = dist.isend(values(R, N, torch.float32).to(dev), (R + 1) % W)
    dist.recv(got, (R - 1) % W)
    send.wait()
    check("recv from the left", got, values((R - 1) % W, N, torch.float32))


def pool_tensors(dev):
    """A tensor in the job's device pool (zero copy: no staging on either side)."""
    t = tb.empty(N, device=dev)
    t.copy_(values(R, N, torch.float32))
    dist.all_reduce(t)
    check("allreduce of a pool tensor", t, reference("SUM", N, torch.float32))


def stream_order(dev):
    """The input is written by the current stream behind a long kernel; the daemon must read it
    only once the stream got there. Work.wait() must not block the CPU until the end."""
    t = torch.zeros(N, device=dev)
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e8))  # ~100 ms of the current stream
    t.fill_(R + 1)
    work = dist.all_reduce(t, async_op=True)
    begun = time.monotonic()
    work.wait()
    returned = time.monotonic() - begun
    early = not work.is_completed()  # the stream is still asleep: the daemon cannot have begun
    doubled = t * 2  # queued on the current stream after the wait
    torch.cuda.synchronize()
    want = float(sum(r + 1 for r in range(W)) * 2)
    check("allreduce after the stream's write", doubled, torch.full((N,), want))
    if not early:
        failed.append("Work.wait() returned only once the operation completed (%.0f ms): it "
                      "blocked the CPU" % (returned * 1e3))
    common.log("rank %d: Work.wait() returned after %.1f ms of a ~100 ms stream, the operation "
               "%s" % (R, returned * 1e3, "still in flight" if early else "completed"))


def main():
    torch.cuda.set_device(LOCAL % torch.cuda.device_count())
    dev = torch.device("cuda", torch.cuda.current_device())
    nccl = "--nccl" in sys.argv
    if nccl and W != 1:
        common.log("--nccl takes a group of one rank (WORLD_SIZE %d)" % W)
        return 2
    dist.init_process_group("collectived", timeout=datetime.timedelta(seconds=60))
    if nccl:
        collectives(dev, None)
        ours = failed[:]
        group = dist.new_group(backend="nccl")
        collectives(dev, group)
        if failed != ours:
            common.log("NCCL's group differs from the reference: %s" % failed[len(ours):])
    else:
        collectives(dev, None)
        ring(dev)
        pool_tensors(dev)
        stream_order(dev)
    dist.barrier()
    dist.destroy_process_group()
    common.log("rank %d: %s" % (R, "every check passed" if not failed else
                               "%d failed: %s" % (len(failed), failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
