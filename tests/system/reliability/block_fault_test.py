#!/usr/bin/env python3
"""Faults during the collectives over per-rank blocks (gather, scatter, all-to-all with
per-pair sizes), one case per run: fault_test.py's harness and checks (real daemons, real UCX,
real trainer processes; every survivor's error within the job's timeout + 2 s of the fault; the
surviving daemons' /status names the culprit; a fresh job of the same collective on the same
daemons; the daemons exit 0 on SIGTERM).

The ranks (fault_rank --op OP) loop on OP over blocks of 64 Ki float32 elements, two operations
in flight, every element of every result checked; the root of a gather or scatter moves to the
next rank with every operation, so a fault finds some operations rooted on the lost node and
some elsewhere.

  daemon_kill   3 x 1; SIGKILL node 1's daemon mid-run. Ranks 0 and 2: COLL_ERR_PEER naming
                "node 1"; rank 1, whose daemon is gone: COLL_ERR_CLOSED.
  rank_kill     2 x 2; SIGKILL rank 3 with operations in flight. Ranks 0-2: COLL_ERR_JOB naming
                "rank 3" (its daemon sees it leave with work pending).
  abort         2 x 2; rank 1 stops submitting and calls coll_comm_abort() while the others
                wait in their next operation. Ranks 0, 2 and 3: COLL_ERR_JOB naming "rank 1",
                before half the timeout (the abort's verdict, not the timeout's); /status gives
                the reason.
  absent        --shape N x R; rank 1 never submits (it joins and holds the job): with
                operations 0 and 1 in flight on the others, it is not the root of the first
                gather or scatter and the root of the second. Every other rank:
                COLL_ERR_TIMEDOUT naming "rank 1 (pid P, node K, not submitted)", no earlier
                than the timeout - 0.5 s and no later than the timeout + 2 s after the others
                submitted, and the same error for its second operation. On 4 x 1 no daemon but
                rank 1's own holds an operation from it: the others learn who is missing from
                that daemon.

Exit status: 0 pass, 1 fail (with the daemons' logs and the ranks' output), 77 skip (says why).
"""

import argparse
import re

import fault_test as ft
from fault_test import end_job, expect_failures, expect_status_failed, fresh_job, finish, \
    kill_daemon_1, kill_rank, loop_job
from fault_test import h, check, log

COUNT = 1 << 16  # elements of one rank's block, times the world size per buffer


class Ctx(ft.Ctx):
    """fault_test's context whose ranks run --op (the fresh jobs too)."""

    def __init__(self, args, cluster):
        super().__init__(args, cluster)
        self.op = args.op

    def loop_argv(self, *extra):
        return super().loop_argv("--op", self.op, *extra)


def case_daemon_kill(ctx):
    ctx.c.start_daemons(3)
    kill_daemon_1(ctx, loop_job(ctx, "kill-daemon-" + ctx.op, [0, 1, 2], 1, 3 * COUNT, 2))
    fresh_job(ctx, "kill-daemon-%s-fresh" % ctx.op, [0, 2], 1)
    finish(ctx, [0, 2])


def case_rank_kill(ctx):
    ctx.c.start_daemons(2)
    job = loop_job(ctx, "kill-rank-" + ctx.op, [0, 1], 2, 4 * COUNT, 2)
    kill_rank(ctx, job, 3, "with %ss in flight" % ctx.op, [0, 1])
    fresh_job(ctx, "kill-rank-%s-fresh" % ctx.op, [0, 1], 2)
    finish(ctx, [0, 1])


def case_abort(ctx):
    ctx.c.start_daemons(2)
    job = loop_job(ctx, "abort-" + ctx.op, [0, 1], 2, 4 * COUNT, 2, "--stall-rank", "1",
                   "--stall-after", "20", "--abort")
    job.wait_event("ABORTED", ranks=[1], timeout=30)
    t = float(job.rank(1).event("ABORTED")["t_mono"])
    expect_failures(ctx, job, t, {r: ({"COLL_ERR_JOB"}, r"\brank 1\b") for r in (0, 2, 3)})
    check(max(ctx.times.values()) < ctx.t_s / 2, "the waiting ranks heard of the abort %.3f s "
          "after it: the timeout's verdict, not the abort's" % max(ctx.times.values()))
    expect_status_failed(ctx, [0, 1], job.id, r"\brank 1\b.*fault_rank --abort")
    end_job(job, expect=None)  # rank 1 ended the job and exits 0
    fresh_job(ctx, "abort-%s-fresh" % ctx.op, [0, 1], 2)
    finish(ctx, [0, 1])


def case_absent(ctx):
    nodes, rpn = ctx.args.shape
    world = nodes * rpn
    victim = 1  # not the root of operation 0, the root of operation 1
    c = ctx.c
    c.start_daemons(nodes)
    job = c.start_job("absent-" + ctx.op, list(range(nodes)), rpn,
                      ctx.loop_argv("--count", str(world * COUNT), "--window", "2",
                                    "--stall-rank", str(victim), "--stall-after", "0"),
                      timeout_ms=ctx.t_ms)
    job.wait_event("JOINED", timeout=30)
    job.wait_event("STALL", ranks=[victim], timeout=30)
    # The others submit once they joined, as the absent rank said STALL instead: the later of
    # the two starts the clock.
    t = max(float(job.rank(r).event("JOINED")["t_mono"]) for r in job.ranks)
    t = max(t, float(job.rank(victim).event("STALL")["t_mono"]))
    log("rank %d joined and never submits its first %s" % (victim, ctx.op))
    pattern = r"\brank %d \(pid %d, node %d, not submitted\)" % (victim, job.rank(victim).pid,
                                                                victim // rpn)
    others = [r for r in range(world) if r != victim]
    expect_failures(ctx, job, t, {r: ({"COLL_ERR_TIMEDOUT"}, pattern) for r in others},
                    lower=ctx.t_s - 0.5)
    for r in others:  # the second operation in flight cannot complete either
        also = [(e["seq"], e["status"]) for e in job.rank(r).events("ALSO")]
        check(also == [("1", "COLL_ERR_TIMEDOUT")], "rank %d: the other operation in flight "
              "ended as %s, expected operation 1 with COLL_ERR_TIMEDOUT" % (r, also))
    expect_status_failed(ctx, range(nodes), job.id, r"\brank %d\b" % victim)
    end_job(job, expect=None)  # the absent rank leaves with nothing pending and exits 0
    fresh_job(ctx, "absent-%s-fresh" % ctx.op, list(range(nodes)), rpn)
    finish(ctx, range(nodes))


CASES = {"daemon_kill": case_daemon_kill, "rank_kill": case_rank_kill, "abort": case_abort,
         "absent": case_absent}


def shape(text):
    m = re.fullmatch(r"(\d+)x(\d+)", text)
    if m is None or int(m.group(1)) * int(m.group(2)) < 2:
        raise argparse.ArgumentTypeError("'%s' is not NODESxRANKS of 2 ranks or more" % text)
    return int(m.group(1)), int(m.group(2))


def parser():
    p = ft.parser(__doc__, CASES, 2000)
    p.add_argument("--op", required=True, choices=("gather", "scatter", "alltoallv"))
    p.add_argument("--shape", type=shape, default=(2, 2),
                   help="nodes x ranks per node of case absent (default 2x2)")
    return p


def body(args, cluster):
    log("case %s of %ss, job timeout %d ms" % (args.case, args.op, args.timeout_ms))
    CASES[args.case](Ctx(args, cluster))


if __name__ == "__main__":
    p = parser()
    h.main(body, p, cluster=p.parse_known_args()[0].case)
