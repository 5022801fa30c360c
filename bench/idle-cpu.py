#!/usr/bin/env python3
"""What an idle job costs: the CPU share of its daemons and its ranks while nothing is computed.

usage: idle-cpu.py --daemon BUILD/daemon/collectived
                   --fault-rank BUILD/tests/system/reliability/fault_rank
                   [--window-s 1.0] [--repeats 3] [--daemon-arg=--KEY=VALUE ...]

Per shape (1 node x 3 ranks, in shared memory; 2 nodes x 2 ranks, through the daemons), a job of
tests/system/reliability/fault_rank loops on 4 KiB allreduces until its last rank stops
submitting (--stall-rank): the other ranks then wait for it, in shared memory (1x3) or on their
daemon (2x2), with their operation posted. After 0.3 s of that, the user and system CPU time of
every daemon and every waiting rank (/proc/<pid>/stat) is read over --window-s seconds; the
stalled rank, which holds its communicator and sleeps, is counted too. Prints one line per
repetition and shape: the share of one core of the daemons, of the waiting ranks, and of all
together. The bound of the shared-memory path is below 1 % all together (docs/benchmarks.md);
--daemon-arg (repeatable) gives every daemon a flag, e.g. --daemon-arg=--poll-window-us=50
(bench/pollwin.sh). This is a measurement, not a test: the CPU time is read in clock ticks (10 ms
at USER_HZ 100), so a window of 1 s resolves 1 %, and a longer window finer.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "system"))  # the harness of the system tests
import harness as h  # noqa: E402

STALL_AFTER = 50   # operations before the last rank stops submitting
SETTLE_S = 0.3     # the waiting ranks' bounded spin ends long before this
SHAPES = ((1, 3), (2, 2))


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def share(pids, window_s):
    """The CPU time of @pids over @window_s, as a share of one core."""
    t0, c0 = time.monotonic(), sum(cpu_seconds(p) for p in pids)
    time.sleep(window_s)
    return (sum(cpu_seconds(p) for p in pids) - c0) / (time.monotonic() - t0)


def measure(args, c, nodes, rpn, k):
    world = nodes * rpn
    victim = world - 1
    job = c.start_job("idle-%dx%d-%d" % (nodes, rpn, k), list(range(nodes)), rpn,
                      [os.path.abspath(args.fault_rank), "--count", "1024", "--window", "1",
                       "--stall-rank", str(victim), "--stall-after", str(STALL_AFTER),
                       "--progress", "10"], timeout_ms=60000)
    job.wait_event("STALL", ranks=[victim], timeout=60)
    algo = job.rank(0).event("PROGRESS").get("algo")
    time.sleep(SETTLE_S)
    daemons = [d.pid for d in c.daemons[:nodes]]
    waiting = [job.rank(r).pid for r in range(world) if r != victim]
    d, w = share(daemons, args.window_s), share(waiting, args.window_s)
    a = share(daemons + waiting + [job.rank(victim).pid], args.window_s)
    print("%dx%d (%s) repetition %d: daemons %.2f %%, waiting ranks %.2f %%, all %.2f %% of a "
          "core over %.1f s (load %s)" % (nodes, rpn, algo, k, 100 * d, 100 * w, 100 * a,
                                         args.window_s, "%.1f" % os.getloadavg()[0]), flush=True)
    job.release()  # the stalled rank leaves; the others time out later: kill them now
    for r in job.ranks.values():
        r.stop(2.0)


def body(args, c):
    c.start_daemons(max(n for n, _ in SHAPES), args=args.daemon_arg)
    for k in range(1, args.repeats + 1):
        for nodes, rpn in SHAPES:
            measure(args, c, nodes, rpn, k)
    c.stop_daemons()


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--daemon", required=True)
    p.add_argument("--fault-rank", required=True)
    p.add_argument("--window-s", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--daemon-arg", action="append", default=[])
    return p


if __name__ == "__main__":
    h.main(body, parser(), cluster="idle-cpu")
