#!/usr/bin/env python3
"""Soak test of collectived: many random allreduces from several jobs at once, every
result checked, with flat daemon resources.

Two daemons serve three jobs at the same time for --seconds:

  steady-a   2 nodes x 2 ranks, for the whole run;
  steady-b   2 nodes x 1 rank, for the whole run (a second job on the same daemons);
  churn-K    2 nodes x 1 rank, --churn-ops operations, then it ends and churn-K+1 starts: jobs
             are created and destroyed over and over while the others run.

Every rank is soak_rank: random datatype, reduction, size (0 to 2 MiB, log-uniform), placement
and number in flight; it checks every element of every result against values it computes itself
and exits 1 on the first wrong one. The test then checks:

  1. every rank of every job exits 0 and says how many operations it completed; the total is
     printed (thousands in the CI size);
  2. flat resources: each daemon's open fds, memfds and /dev/shm files (open or mapped) are
     sampled after every churn job ended and must not move while the steady jobs run. Once
     every job ended they are back to the counts before any job, /status lists no job, and the
     daemon's heap in use (/status heap_bytes: malloc's bytes in use, which a leak makes grow)
     and RssAnon are within --heap-slack-kb and --rss-slack-mb of what they were when idle
     after the warm-up job. (RSS while jobs run is no measure: it counts pool pages as they are
     first touched, and each job's UCX worker grows its memory pools up to its peak. Under
     AddressSanitizer neither number measures a leak; LeakSanitizer checks the daemons at exit.)
  3. no daemon crashed or logged a sanitizer report, and both exit 0 on SIGTERM.

--long runs it for 5 minutes. Exit status: 0 pass, 1 fail (with the logs), 77 skip.
"""

import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import check, log  # noqa: E402

OPS = re.compile(r"rank (\d+): OPS (\d+) bytes (\d+)")
FLAT = ("fds", "memfds", "shm")


def parser():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--daemon", required=True, help="collectived binary")
    p.add_argument("--soak-rank", required=True, help="soak_rank binary")
    p.add_argument("--seconds", type=int, default=70, help="length of the run (default 70)")
    p.add_argument("--long", action="store_true", help="run for 5 minutes")
    p.add_argument("--churn-ops", type=int, default=150,
                   help="operations of each churn job (default 150)")
    p.add_argument("--heap-slack-kb", type=int, default=256,
                   help="growth of an idle daemon's heap in use allowed over the run (256)")
    p.add_argument("--rss-slack-mb", type=int, default=4,
                   help="growth of an idle daemon's RssAnon allowed over the run (4)")
    p.add_argument("--dump", action="store_true", help="print the logs also on success")
    return p


def soak_argv(args, seed, *extra):
    return [os.path.abspath(args.soak_rank), "--seed", str(seed)] + list(extra)


def completed_ops(job):
    """Operations every rank of @job reports; fails when a rank did not say."""
    total = 0
    for r in sorted(job.ranks):
        m = OPS.search(job.rank(r).text())
        check(m is not None, "job %s rank %d printed no OPS line:\n%s"
              % (job.id, r, job.rank(r).text()[-2000:]))
        total += int(m.group(2))
    return total // len(job.ranks)


def run_churn(c, args, k, ops):
    """One churn job to its end; returns the operations it completed."""
    job = c.start_job("churn-%d" % k, [0, 1], 1,
                      soak_argv(args, 1000 + k, "--max-ops", str(ops), "--seconds", "120"))
    job.wait_exit(180, expect=0)
    for d in c.daemons:
        h.wait_until(lambda: d.job(job.id) is None, 10, "job %s to close on node %d"
                     % (job.id, d.node))
    return completed_ops(job)


def settled_resources(d):
    """@d's resources once two readings 50 ms apart agree on the counts (the daemon closes the
    connection of our last GET /status a moment after we did)."""
    prev = d.resources()
    for _ in range(40):
        time.sleep(0.05)
        now = d.resources()
        if all(now[k] == prev[k] for k in FLAT):
            return now
        prev = now
    return now


def sample(daemons):
    """Each daemon's resources and its heap in use (/status heap_bytes), by node."""
    out = {}
    for d in daemons:
        heap = d.status()["node"]["heap_bytes"]
        out[d.node] = settled_resources(d)
        out[d.node]["heap_bytes"] = heap
    return out


def check_flat(samples):
    """Every sample's fd, memfd and shm counts equal the first one's."""
    for node, series in samples.items():
        first, last = series[0], series[-1]
        for i, s in enumerate(series):
            for key in FLAT:
                check(s[key] == first[key], "node %d: %s moved from %d to %d at sample %d of %d"
                      % (node, key, first[key], s[key], i, len(series)))
        log("node %d: fds %d memfds %d shm %d flat over %d samples; heap in use %d -> %d bytes, "
            "RssAnon %d -> %d KiB (the steady jobs' UCX workers grow their memory pools)"
            % (node, first["fds"], first["memfds"], first["shm"], len(series),
               first["heap_bytes"], last["heap_bytes"], first["anon_kb"], last["anon_kb"]))


def check_idle(args, d, idle, warm):
    """Once every job ended: fds, memfds and shm as before any job; heap in use and RssAnon
    within their slack of what they were after the warm-up job."""
    now = sample([d])[d.node]
    for key in FLAT:
        check(now[key] == idle[key], "node %d: %s %d after every job ended, %d before any"
              % (d.node, key, now[key], idle[key]))
    log("node %d idle after the warm-up job and at the end: heap in use %d and %d bytes, "
        "RssAnon %d and %d KiB" % (d.node, warm["heap_bytes"], now["heap_bytes"],
                                   warm["anon_kb"], now["anon_kb"]))
    if "address" in h.SANITIZE:
        # AddressSanitizer's allocator is not malloc's (mallinfo2() does not count it) and keeps
        # freed memory in its quarantine (up to 256 MiB resident): neither number measures a
        # leak here. LeakSanitizer checks both daemons for leaks when they exit instead.
        log("node %d: heap and RssAnon growth not checked under AddressSanitizer; "
            "LeakSanitizer checks for leaks at exit" % d.node)
        return
    grew = now["heap_bytes"] - warm["heap_bytes"]
    check(grew <= args.heap_slack_kb * 1024, "node %d: the heap in use when idle grew by %d "
          "bytes over the run (allowed %d KiB)" % (d.node, grew, args.heap_slack_kb))
    grew = now["anon_kb"] - warm["anon_kb"]
    check(grew <= args.rss_slack_mb * 1024, "node %d: RssAnon when idle grew by %d KiB over the "
          "run (allowed %d MiB)" % (d.node, grew, args.rss_slack_mb))


def steady_running(jobs):
    return all(r.alive() for job in jobs for r in job.ranks.values())


def body(args, c):
    seconds = 300 if args.long else args.seconds
    daemons = c.start_daemons(2)
    idle = sample(daemons)
    log("idle: %s" % idle)
    ops = run_churn(c, args, 0, args.churn_ops)  # warm-up: first UCX endpoints, allocator
    warm = sample(daemons)
    steady = [c.start_job("steady-a", [0, 1], 2, soak_argv(args, 1, "--seconds", str(seconds))),
              c.start_job("steady-b", [0, 1], 1, soak_argv(args, 2, "--seconds", str(seconds),
                                                          "--window", "8"))]
    for d in daemons:
        for job in steady:
            h.wait_until(lambda: (d.job(job.id) or {}).get("state") == "ready", 30,
                         "job %s to be ready on node %d" % (job.id, d.node))
    samples = {n: [r] for n, r in sample(daemons).items()}
    k = 1
    while steady_running(steady):
        ops += run_churn(c, args, k, args.churn_ops)
        now = sample(daemons)
        if steady_running(steady):  # else a steady job may have ended while sampling
            for n, r in now.items():
                samples[n].append(r)
        k += 1
    for job in steady:
        job.wait_exit(seconds + 60, expect=0)
        ops += completed_ops(job)
    log("%d churn jobs; %d allreduces checked in all" % (k, ops))
    check(k >= 3, "only %d churn jobs ran during the steady ones" % k)
    check_flat(samples)
    for d in daemons:
        h.wait_until(lambda: not d.status().get("jobs"), 10, "node %d to list no job" % d.node)
        check_idle(args, d, idle[d.node], warm[d.node])
    c.check_no_crash()
    c.stop_daemons()


if __name__ == "__main__":
    h.main(body, parser(), cluster="soak")
