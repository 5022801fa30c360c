#!/usr/bin/env python3
"""Errors that name the culprit, and refusals that reach every rank at once.

  stall_1x3   3 nodes x 1 rank; rank 2 stops submitting before its 6th allreduce. Ranks 0 and 1
              get COLL_ERR_TIMEDOUT naming "rank 2" (not their own node) within the timeout
              + 2 s of the stall; while it stalls, nodes 0 and 1 show rank 2 in /status
              (missing_elsewhere), and the stall warning every node logs at half the timeout
              names it (not only the node whose data has not come).
  stall_2x2   2 nodes x 2 ranks; rank 3 stops: ranks 0-2 get COLL_ERR_TIMEDOUT naming "rank 3",
              and both nodes' stall warnings name it.
  budget      2 nodes x 1 rank; node 1's pool_budget (64 MiB) is below the job's pool (128 MiB).
              Both ranks fail to join within 1 s of each other with COLL_ERR_NOMEM and a message
              naming the budget; node 1 logs the refusal once and counts it in
              collectived_job_refusals_total; a job that fits then forms on both nodes.

Exit status: 0 pass, 1 fail (with logs), 77 skip.
"""

import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import check, log  # noqa: E402

TIMEOUT_MS = 3000
SLACK_S = 2.0


def rank_argv(args, *extra):
    return [args.fault_rank, "--count", "65536", "--window", "1", "--progress", "0"] + list(extra)


def stall_case(args, c, nodes, rpn, victim):
    c.start_daemons(nodes)
    job = c.start_job("blame", list(range(nodes)), rpn,
                      rank_argv(args, "--stall-rank", str(victim), "--stall-after", "5"),
                      timeout_ms=TIMEOUT_MS)
    job.wait_event("STALL", ranks=[victim], timeout=60)
    t_stall = float(job.rank(victim).event("STALL")["t_mono"])
    others = [r for r in range(nodes * rpn) if r != victim]
    pattern = r"\brank %d \(pid \d+, node %d, not submitted\)" % (victim, victim // rpn)
    if rpn == 1:
        check_status_names(c, [n for n in range(nodes) if n != victim // rpn], pattern)
    job.wait_event("FAILED", ranks=others, timeout=TIMEOUT_MS / 1000 + 15)
    for r in others:
        ev = job.rank(r).event("FAILED")
        dt = float(ev["t_mono"]) - t_stall
        log("rank %d: %s after %.3f s: %s" % (r, ev["status"], dt, ev.get("msg")))
        check(ev["status"] == "COLL_ERR_TIMEDOUT", "rank %d failed with %s" % (r, ev["status"]))
        check(re.search(pattern, ev.get("msg", "")), "rank %d's error does not name rank %d: %s"
              % (r, victim, ev.get("msg")))
        check(dt <= TIMEOUT_MS / 1000 + SLACK_S + h.SANITIZER_SLACK_S,
              "rank %d got its error %.3f s after the stall" % (r, dt))
    check_warnings(c, [k for k in range(nodes) if rpn > 1 or k != victim // rpn], victim)
    job.release()
    job.wait_exit(20)
    c.check_no_crash()
    c.stop_daemons()


def check_warnings(c, nodes, victim):
    """The stall warning of each of @nodes (the nodes with a rank that submitted, logged at
    half the timeout) names rank @victim."""
    for k in nodes:
        lines = [t for _, level, _, t in c.daemons[k].log_lines()
                 if level == "warn" and "stalled" in t]
        check(lines, "node %d logged no stall warning" % k)
        check(re.search(r"\brank %d\b" % victim, lines[0]), "node %d's stall warning does not "
              "name rank %d: %s" % (k, victim, lines[0]))
        log("node %d: %s" % (k, lines[0]))


def check_status_names(c, nodes, pattern):
    """While the job stalls, each of @nodes shows the culprit in /status (after half the
    timeout, when the stalled operation asked the other nodes)."""
    def named():
        for k in nodes:
            j = c.daemons[k].job("blame")
            ops = j.get("operations", []) if j else []
            if not any(re.search(pattern, o.get("missing_elsewhere", "")) for o in ops):
                return False
        return True
    h.wait_until(named, TIMEOUT_MS / 1000.0, "nodes %s to show the culprit in /status" % nodes)
    log("nodes %s show %s in /status" % (nodes, pattern))


def case_budget(args, c):
    c.start_daemons(2, node_args=lambda k: ["--pool-budget", "64M"] if k == 1 else [])
    job = c.start_job("refused", [0, 1], 1, rank_argv(args, "--iters", "3"),
                      timeout_ms=30000, env={"COLL_POOL_SIZE": "128M"})
    job.wait_exit(20, expect=4)  # JOINFAIL
    times = {}
    for r in (0, 1):
        ev = job.rank(r).event("JOINFAIL")
        err = job.rank(r).text("err")
        times[r] = float(ev["t_mono"])
        log("rank %d: %s: %s" % (r, ev["status"], err.strip()))
        check(ev["status"] == "COLL_ERR_NOMEM", "rank %d: %s" % (r, ev["status"]))
        check(re.search(r"budget is 67108864 \(pool_budget\)", err), "rank %d's message does "
              "not name node 1's budget: %s" % (r, err))
    check(abs(times[0] - times[1]) < 1.0, "the ranks failed %.3f s apart"
          % abs(times[0] - times[1]))
    refused = [t for _, lvl, _, t in c.daemons[1].log_lines()
               if lvl == "error" and "refused job refused" in t]
    check(len(refused) == 1, "node 1 logged the refusal %d times, not once" % len(refused))
    code, body = h.http_get(c.daemons[1].status_sock, "/metrics", 3.0)
    check(re.search(r'^collectived_job_refusals_total\{kind="COLL_ERR_NOMEM"\} 1$', body, re.M),
          "node 1's metrics do not count the refusal:\n%s" %
          "\n".join(l for l in body.splitlines() if "refusal" in l))
    fits = c.start_job("fits", [0, 1], 1, rank_argv(args, "--iters", "3"), timeout_ms=30000,
                       env={"COLL_POOL_SIZE": "32M"})
    fits.wait_exit(60, expect=0)
    c.check_no_crash()
    c.stop_daemons()


CASES = {
    "stall_1x3": lambda args, c: stall_case(args, c, 3, 1, 2),
    "stall_2x2": lambda args, c: stall_case(args, c, 2, 2, 3),
    "budget": case_budget,
}


def body(args, c):
    CASES[args.case](args, c)


def parser():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--daemon", required=True)
    p.add_argument("--fault-rank", required=True)
    p.add_argument("--case", choices=sorted(CASES), required=True)
    return p


if __name__ == "__main__":
    h.main(body, parser(), cluster="blame")
