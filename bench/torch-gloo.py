#!/usr/bin/python3
"""torch-gloo: the coll-perf allreduce sweep for torch.distributed with the gloo backend.

compare.sh runs it to measure gloo with the same sizes, timing rules and output columns as
collectived. Run it with Debian's interpreter, which sees python3-torch:

    GLOO_SOCKET_IFNAME=lo /usr/bin/python3 bench/torch-gloo.py --world-size 4 -b 4K -e 256M

By default it starts --world-size processes itself (torch.multiprocessing). With --rank it runs
one rank only, for ranks started separately: every rank then needs the same --init file://PATH.
With --netns-prefix P it starts rank r as `ip netns exec P<h> ... --rank r`, h = r // M with M
= --ranks-per-netns (1 by default: one rank per network namespace), gloo on device --ifname
there; the file rendezvous works across namespaces.

float32 SUM, in place (dist.all_reduce is always in place). For each size: -w warmup operations;
one operation timed to choose the iteration count (at most -n, fewer when -n of them would take
longer than -T seconds, never fewer than 3); a barrier; the batch back to back; per-rank times
(time.monotonic) all-gathered. With -c 1 one more operation on fresh data, compared element by
element with sums computed here (small integers, exact in float32). time = per-op time averaged
over ranks (max shown too), algbw = size/time, busbw = algbw * 2(n-1)/n, GB = 1e9 bytes.
Exit status: 0, 1 on wrong results, 2 on a usage error.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

MIN_ITERS = 3
CLASSES = 13
CHUNK = 1 << 22  # elements per step of the fill and the check, to bound temporary memory


def parse_size(text):
    text = text.strip()
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:].lower(), 1)
    return int(float(text[:-1] if mult > 1 else text) * mult)


def element_classes(torch, start, count, seed):
    """1..CLASSES for elements start..start+count-1: a hash of the index and the seed."""
    i = torch.arange(start, start + count, dtype=torch.int64)
    x = (i ^ (seed * 40503)) * 0x9E3779B1  # wraps modulo 2^64 like C
    return torch.remainder(x >> 20, CLASSES) + 1


def fill(torch, t, rank, seed):
    for s in range(0, t.numel(), CHUNK):
        n = min(CHUNK, t.numel() - s)
        t[s:s + n] = (element_classes(torch, s, n, seed) * (rank + 1)).to(torch.float32)


def count_wrong(torch, t, world, seed):
    scale = world * (world + 1) // 2
    wrong = 0
    for s in range(0, t.numel(), CHUNK):
        n = min(CHUNK, t.numel() - s)
        want = (element_classes(torch, s, n, seed) * scale).to(torch.float32)
        wrong += int((t[s:s + n] != want).sum().item())
    return wrong


def time_size(torch, dist, args, t):
    """Per-op seconds of this rank and the batch size."""
    for _ in range(args.warmup):
        dist.all_reduce(t)
    dist.barrier()
    t0 = time.monotonic()
    dist.all_reduce(t)
    one = torch.tensor([time.monotonic() - t0], dtype=torch.float64)
    dist.all_reduce(one, op=dist.ReduceOp.MAX)
    n = args.iters
    if one.item() > 0 and one.item() * n > args.budget:
        n = int(args.budget / one.item())
    n = max(MIN_ITERS, n)
    t.zero_()  # in place: keeps the values from growing over the batch
    dist.barrier()
    t0 = time.monotonic()
    for _ in range(n):
        dist.all_reduce(t)
    return (time.monotonic() - t0) / n, n


def gather_times(torch, dist, dt, world):
    mine = torch.tensor([dt], dtype=torch.float64)
    out = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(out, mine)
    return [x.item() for x in out]


def header(torch, args, world):
    print("# torch-gloo: torch.distributed all_reduce, backend gloo, %d ranks, float32 sum, in "
          "place; torch %s, GLOO_SOCKET_IFNAME=%s" % (world, torch.__version__,
                                                     os.environ.get("GLOO_SOCKET_IFNAME", "")))
    print("# sizes %d..%d B x%d, warmup %d, iters <= %d, budget %g s per size (at least %d iters), "
          "check %s" % (args.min_bytes, args.max_bytes, args.factor, args.warmup, args.iters,
                        args.budget, MIN_ITERS, "on" if args.check else "off"))
    print("# time: per-op wall time averaged over ranks (max over ranks also shown); "
          "algbw = size/time; busbw = algbw * 2(n-1)/n, n = %d; GB = 1e9 B" % world)
    print("#%13s %12s %9s %6s %5s %6s %12s %12s %11s %11s %10s %7s" % (
        "size(B)", "count", "type", "redop", "root", "iters", "time(us)", "maxtime(us)",
        "algbw(GB/s)", "busbw(GB/s)", "algo", "#wrong"))
    sys.stdout.flush()


def row(nbytes, n, times, wrong, check):
    world = len(times)
    avg = sum(times) / world
    algbw = nbytes / avg / 1e9
    print(" %13d %12d %9s %6s %5d %6d %12.1f %12.1f %11.3f %11.3f %10s %7s" % (
        nbytes, nbytes // 4, "float32", "sum", -1, n, avg * 1e6, max(times) * 1e6, algbw,
        algbw * 2 * (world - 1) / world, "gloo", str(wrong) if check else "N/A"))
    sys.stdout.flush()


def worker(rank, args, init_method):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init_method, rank=rank,
                            world_size=args.world_size)
    world = dist.get_world_size()
    buf = torch.empty(args.max_bytes // 4, dtype=torch.float32)
    fill(torch, buf, rank, 0)
    if rank == 0:
        header(torch, args, world)
    total_wrong = 0
    nbytes, idx = args.min_bytes, 0
    while nbytes <= args.max_bytes:
        t = buf[:nbytes // 4]
        dt, n = time_size(torch, dist, args, t)
        times = gather_times(torch, dist, dt, world)
        wrong = 0
        if args.check:
            idx += 1
            fill(torch, t, rank, idx)
            dist.barrier()
            dist.all_reduce(t)
            w = torch.tensor([count_wrong(torch, t, world, idx)], dtype=torch.int64)
            dist.all_reduce(w)
            wrong = int(w.item())
        total_wrong += wrong
        if rank == 0:
            row(nbytes, n, times, wrong, args.check)
        nbytes *= args.factor
    if rank == 0:
        print("# #wrong total: %d (%s)" % (total_wrong, "not checked" if not args.check else
                                          "WRONG RESULTS" if total_wrong else "all sizes correct"))
        sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()
    if total_wrong:
        sys.exit(1)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--rank", type=int, help="run this one rank (needs --init file://PATH)")
    p.add_argument("--init", help="init_method, e.g. file:///tmp/x (default: a new temp file)")
    p.add_argument("--netns-prefix", metavar="P", help="run rank r in network namespace P<r>")
    p.add_argument("--ifname", default="lo", help="GLOO_SOCKET_IFNAME with --netns-prefix")
    p.add_argument("--ranks-per-netns", type=int, default=1, metavar="M",
                   help="with --netns-prefix: ranks r*M .. r*M+M-1 in namespace P<r>")
    p.add_argument("-b", "--min-bytes", type=parse_size, default=4096)
    p.add_argument("-e", "--max-bytes", type=parse_size, default=64 << 20)
    p.add_argument("-f", "--factor", type=int, default=4)
    p.add_argument("-n", "--iters", type=int, default=100)
    p.add_argument("-w", "--warmup", type=int, default=5)
    p.add_argument("-T", "--budget", type=float, default=5.0, help="seconds per size")
    p.add_argument("-c", "--check", type=int, choices=(0, 1), default=1)
    args = p.parse_args(argv)
    if args.min_bytes < 4 or args.max_bytes < args.min_bytes or args.factor < 2:
        p.error("need 4 <= -b <= -e and -f >= 2")
    if args.ranks_per_netns < 1 or args.world_size % args.ranks_per_netns:
        p.error("--ranks-per-netns must divide --world-size")
    if args.rank is not None and not (args.init or "").startswith("file://"):
        p.error("--rank needs --init file://PATH, the same for every rank")
    return args


def spawn(args, init):
    """All ranks in this namespace, as processes of torch.multiprocessing."""
    import torch.multiprocessing as mp
    try:
        mp.spawn(worker, args=(args, init), nprocs=args.world_size, join=True)
    except mp.ProcessRaisedException as e:
        sys.stderr.write("torch-gloo: a rank failed: %s\n" % str(e).strip().splitlines()[-1])
        return 1
    except mp.ProcessExitedException as e:
        sys.stderr.write("torch-gloo: %s\n" % e)
        return 1
    return 0


def spawn_netns(args, argv, init):
    """Rank r as `ip netns exec P<r // M> python3 this --rank r`; rank 0's output is ours."""
    procs = []
    env = dict(os.environ, GLOO_SOCKET_IFNAME=args.ifname)
    for r in range(args.world_size):
        host = r // args.ranks_per_netns
        cmd = ["ip", "netns", "exec", "%s%d" % (args.netns_prefix, host), sys.executable,
               os.path.abspath(__file__), "--rank", str(r), "--init", init] + argv
        procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                      stdout=None if r == 0 else subprocess.DEVNULL))
    try:
        codes = [p.wait() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    bad = [(r, c) for r, c in enumerate(codes) if c != 0]
    for r, c in bad:
        sys.stderr.write("torch-gloo: rank %d exited with %d\n" % (r, c))
    return 1 if bad else 0


def without_netns_options(argv):
    """argv less the netns options (and their values), for the per-rank commands."""
    out, skip = [], False
    names = ("--netns-prefix", "--ifname", "--ranks-per-netns")
    for a in argv:
        if skip:
            skip = False
        elif a in names:
            skip = True
        elif not a.startswith(tuple(n + "=" for n in names)):
            out.append(a)
    return out


def main(argv):
    args = parse_args(argv)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if args.rank is not None:
        worker(args.rank, args, args.init)
        return 0
    tmp = tempfile.mkdtemp(prefix="torch-gloo-")
    init = args.init or "file://" + os.path.join(tmp, "rendezvous")
    try:
        if args.netns_prefix:
            return spawn_netns(args, without_netns_options(argv), init)
        return spawn(args, init)
    finally:
        for name in os.listdir(tmp):
            os.unlink(os.path.join(tmp, name))
        os.rmdir(tmp)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
