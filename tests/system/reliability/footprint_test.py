#!/usr/bin/env python3
"""What a one-rank job costs its daemon beyond its pool: under 1 MiB and a handful of fds.

A job with no other node needs no UCX worker, endpoints, pool registration or staging. The
daemon runs a first job to the end (so that what stays for the daemon's life, such as malloc
arenas, is paid), then a second one-rank job holds its communicator: the daemon's anonymous
memory (RssAnon: the pool is a memfd and counts as shared memory, not here) must grow by less
than 1 MiB, and its fds by at most 3 (the rank's socket, the pool's memfd, the job's doorbell).
Once the rank left, its fds are back to where they were, or fewer.

Exit status: 0 pass, 1 fail.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import check, log  # noqa: E402

MAX_ANON_KB = 1024
MAX_FDS = 3


def settled(d, timeout=5.0):
    """@d's resources once its fd count holds still for 0.2 s (a status query's socket closes
    after its reply, on the daemon's loop, so a reading just after one may still count it)."""
    deadline = time.monotonic() + timeout
    prev = d.resources()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        cur = d.resources()
        if cur["fds"] == prev["fds"]:
            return cur
        prev = cur
    return prev


def body(args, c):
    d = c.start_daemons(1)[0]
    rank = os.path.abspath(args.fault_rank)
    first = c.start_job("warm", [0], 1, [rank, "--count", "4099", "--iters", "3"])
    first.wait_exit(30, expect=0)
    h.wait_until(lambda: d.job("warm") is None, 10, "job warm to close")
    base = settled(d)
    hold = c.start_job("held", [0], 1, [rank, "--count", "4099", "--window", "1",
                                        "--stall-rank", "0", "--stall-after", "3",
                                        "--progress", "0"])
    hold.wait_event("STALL", timeout=30)
    during = d.resources()
    grew_kb = during["anon_kb"] - base["anon_kb"]
    grew_fds = during["fds"] - base["fds"]
    log("a one-rank job costs its daemon %d KiB of anonymous memory and %d fds (before: %s, "
        "during: %s)" % (grew_kb, grew_fds, base, during))
    check(grew_kb < MAX_ANON_KB, "RssAnon grew by %d KiB, more than %d" % (grew_kb, MAX_ANON_KB))
    check(grew_fds <= MAX_FDS, "%d more fds, more than %d" % (grew_fds, MAX_FDS))
    hold.release()
    hold.wait_exit(20)
    h.wait_until(lambda: d.job("held") is None, 10, "job held to close")
    h.wait_until(lambda: d.resources()["fds"] <= base["fds"], 5,
                 "node 0's fds to come back to %d after the job (%s)"
                 % (base["fds"], sorted(os.listdir("/proc/%d/fd" % d.pid))))
    c.check_no_crash()
    c.stop_daemons()


def parser():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--daemon", required=True)
    p.add_argument("--fault-rank", required=True)
    return p


if __name__ == "__main__":
    h.main(body, parser(), cluster="footprint")
