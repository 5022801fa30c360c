#!/usr/bin/env python3
"""Fault-injection tests of the direct path, one case per run (fault_test.py's harness and
checks: real daemons, real UCX, real trainer processes; every survivor's error within the job's
timeout + 2 s; /status of the surviving daemons; a fresh job on the same daemons).

The direct path (COLLD_DIRECT_MAX_BYTES=32K: the nodes' leaders, local rank 0 of each, run the
inter-node rounds of the 4 KiB allreduces between themselves over UCX, checked through
coll_req_algo() "shm+direct" / "direct"):

  direct_kill   2 x 2; SIGKILL rank 2, node 1's leader, in its rounds. Ranks 0, 1 and 3:
                COLL_ERR_JOB naming "rank 2" (its daemon saw it leave) or COLL_ERR_TRANSPORT
                naming "node 1's leader" (node 0's leader's endpoint to it failed).
  direct_stop   2 x 2; SIGSTOP rank 2. Ranks 0, 1 and 3: COLL_ERR_TIMEDOUT naming "rank 2" (its
                daemon) or "node 1's leader" (node 0's leader, whose rounds wait for it), no
                earlier than the timeout - 0.5 s.
  direct_abort  2 x 2; rank 2 stops submitting and aborts while node 0's leader waits for it in
                the rounds. Ranks 0, 1 and 3: COLL_ERR_JOB naming "rank 2" within 1 s.
  direct_daemon_kill  3 x 1; SIGKILL node 1's daemon. Ranks 0 and 2: COLL_ERR_PEER naming
                "node 1"; rank 1: COLL_ERR_CLOSED.
  direct_leave  4 x 1; rank 1, node 1's leader, leaves between operations (communicator
                destroyed, nothing pending; the others submit the next allreduce 0.5 s later).
                Ranks 0, 2 and 3: COLL_ERR_JOB naming "rank 1" (its daemon's goodbye), at the
                latest a second after their rounds began, well before the job's timeout.
  direct_linger 4 x 1; rank 1 leaves between operations but its process stays, and the others
                submit the next allreduce at once: their leaders already wait for it in their
                rounds when its daemon's goodbye comes (its endpoints stay up). Ranks 0, 2 and 3:
                COLL_ERR_JOB naming "rank 1" a second after its leaving (the rounds' grace for a
                partner's last message), well before the job's timeout.
  direct_route  2 x 2; node 1's ranks allreduce 12001 float32 (48004 bytes, above the bound:
                through the daemons), node 0's 8000 (32000 bytes: the direct path), with a
                30 s job timeout. Every rank (allreduce_check's mismatch mode):
                COLL_ERR_MISMATCH within 5 s, naming both counts and both routes, no output
                written; then a fresh job on the same daemons, every result right.
  direct_token  2 x 2; SIGSTOP rank 2; a UCX sender outside the job (direct_rogue, the leader's
                address and the waiting keys from node 0's /status) sends node 0's leader
                messages with a wrong token: node 0 counts them
                (collectived_direct_refused_total) and logs them; after SIGCONT the job goes on,
                every result right (the rogue payload was never combined).

Exit status: 0 pass, 1 fail (with the daemons' logs and the ranks' output), 77 skip (says why).
"""

import re
import signal
import time

import fault_test as ft
from fault_test import SHM_COUNT, end_job, expect_failures, expect_status_failed, fresh_job, \
    finish, inject, kill_daemon_1, loop_job
from fault_test import h, check, log

DIRECT_ENV = {"COLLD_DIRECT_MAX_BYTES": "32K"}  # the 4 KiB allreduces take the direct path
ROUTE_TIMEOUT_MS = 30000  # direct_route: the job's timeout, and
ROUTE_BOUND_MS = 5000     # the bound on its mismatch error, far inside it


def direct_job(ctx, job_id, nodes, rpn, *extra):
    """@nodes x @rpn ranks looping on 4 KiB allreduces whose inter-node rounds the nodes' leaders
    (local rank 0 of each) run between themselves ("shm+direct", "direct" with one rank a node)."""
    ctx.c.start_daemons(nodes, env=DIRECT_ENV)
    job = loop_job(ctx, job_id, list(range(nodes)), rpn, SHM_COUNT, 2, *extra)
    algo = job.rank(0).event("PROGRESS").get("algo")
    want = "shm+direct" if rpn > 1 else "direct"
    check(algo == want, "job %s: its allreduces ran as '%s', not '%s'" % (job_id, algo, want))
    return job


def case_direct_kill(ctx):
    """SIGKILL node 1's leader (rank 2 of 2 x 2) in its rounds: the others fail naming it, from
    its daemon (the rank left with work pending) or from node 0's leader (its endpoint to the
    dead leader failed), whichever comes first."""
    job = direct_job(ctx, "direct-kill", 2, 2)
    victim = job.rank(2)
    t = inject("SIGKILL rank 2, node 1's leader (pid %d)" % victim.pid,
               lambda: victim.signal(signal.SIGKILL))
    expect_failures(ctx, job, t, {r: ({"COLL_ERR_JOB", "COLL_ERR_TRANSPORT"},
                                      r"\brank 2\b|\bnode 1's leader\b") for r in (0, 1, 3)})
    expect_status_failed(ctx, [0, 1], job.id, r"\brank 2\b|\bnode 1's leader\b")
    victim.popen.wait(5)
    del job.ranks[2]
    end_job(job)
    fresh_job(ctx, "direct-kill-fresh", [0, 1], 2)
    finish(ctx, [0, 1])


def case_direct_stop(ctx):
    """SIGSTOP node 1's leader (rank 2 of 2 x 2): the others time out naming it, not earlier
    than the timeout - 0.5 s."""
    job = direct_job(ctx, "direct-stop", 2, 2)
    victim = job.rank(2)
    t = inject("SIGSTOP rank 2, node 1's leader (pid %d)" % victim.pid,
               lambda: victim.signal(signal.SIGSTOP))
    try:
        expect_failures(ctx, job, t, {r: ({"COLL_ERR_TIMEDOUT"}, r"\brank 2\b|\bnode 1's leader\b")
                                      for r in (0, 1, 3)}, lower=ctx.t_s - 0.5)
        expect_status_failed(ctx, [0, 1], job.id, r"\brank 2\b|\bnode 1's leader\b")
    finally:
        victim.signal(signal.SIGCONT)
    end_job(job, expect=None)  # rank 2 fails too once it runs again
    fresh_job(ctx, "direct-stop-fresh", [0, 1], 2)
    finish(ctx, [0, 1])


def case_direct_abort(ctx):
    """Node 1's leader (rank 2 of 2 x 2) stops submitting and aborts while node 0's leader waits
    for it in the rounds: every other rank fails naming it within 1 s."""
    job = direct_job(ctx, "direct-abort", 2, 2, "--stall-rank", "2", "--stall-after", "20",
                     "--abort")
    job.wait_event("ABORTED", ranks=[2], timeout=30)
    t = float(job.rank(2).event("ABORTED")["t_mono"])
    expect_failures(ctx, job, t, {r: ({"COLL_ERR_JOB"}, r"\brank 2\b") for r in (0, 1, 3)})
    check(max(ctx.times.values()) < 1.0, "the waiting ranks heard of the abort %.3f s after it"
          % max(ctx.times.values()))
    expect_status_failed(ctx, [0, 1], job.id, r"\brank 2\b.*fault_rank --abort")
    end_job(job, expect=None)  # rank 2 ended the job and exits 0
    fresh_job(ctx, "direct-abort-fresh", [0, 1], 2)
    finish(ctx, [0, 1])


def case_direct_daemon_kill(ctx):
    """SIGKILL node 1's daemon (3 x 1) while the leaders run their rounds without the daemons:
    ranks 0 and 2 fail with COLL_ERR_PEER naming node 1, rank 1 with COLL_ERR_CLOSED."""
    job = direct_job(ctx, "direct-daemon-kill", 3, 1)
    kill_daemon_1(ctx, job)
    fresh_job(ctx, "direct-daemon-kill-fresh", [0, 2], 1)
    finish(ctx, [0, 2])


def leave_job(ctx, job_id, event, *extra):
    """Node 1's leader, the one rank of node 1 of 4 x 1, leaves between operations (@extra: how):
    every other rank fails with COLL_ERR_JOB naming it, well before the job's timeout."""
    job = direct_job(ctx, job_id, 4, 1, "--window", "1", "--stall-rank", "1",
                     "--stall-after", "20", "--leave", *extra)
    job.wait_event(event, ranks=[1], timeout=30)
    t = float(job.rank(1).event("LEFT")["t_mono"])
    expect_failures(ctx, job, t, {r: ({"COLL_ERR_JOB"}, r"\brank 1\b") for r in (0, 2, 3)})
    check(max(ctx.times.values()) < ctx.t_s - 1.0, "errors %.3f s after the rank left: the "
          "timeout's verdict, not the leave's" % max(ctx.times.values()))
    expect_status_failed(ctx, [0, 2, 3], job.id, r"\brank 1\b")
    return job


def case_direct_leave(ctx):
    """The leader leaves and its process exits: the leaders whose rounds needed it fail the job
    naming it (their daemons heard its daemon's goodbye), not with their endpoints' error after
    the grace, and every other rank hears that."""
    job = leave_job(ctx, "direct-leave", "LEFT")
    check(job.rank(1).popen.wait(10) == 0, "the leaving rank did not exit 0")
    del job.ranks[1]
    end_job(job)
    fresh_job(ctx, "direct-leave-fresh", [0, 2, 3], 1)
    finish(ctx, [0, 2, 3])


def case_direct_linger(ctx):
    """The leader leaves and its process stays; the other leaders already wait for it in their
    rounds: the job fails naming it after the rounds' grace (1 s), not by the timeout (which
    blamed whichever leader another one waited for)."""
    job = leave_job(ctx, "direct-linger", "LINGER", "--linger")
    end_job(job, expect=None)  # rank 1 exits 0 once stdin closes, the others 3
    fresh_job(ctx, "direct-linger-fresh", [0, 1, 2, 3], 1)
    finish(ctx, [0, 1, 2, 3])


def case_direct_route(ctx):
    """An allreduce on the direct path on node 0 and through the daemons on node 1 (counts on
    either side of direct_max_bytes): node 0's daemon finds node 1's descriptor waiting while
    its leader waits in the rounds, and every rank fails with COLL_ERR_MISMATCH far inside the
    job's timeout, not by it; the daemons then run a fresh job exactly."""
    c = ctx.c
    bound_ms = ROUTE_BOUND_MS + int(h.SANITIZER_SLACK_S * 1000)
    c.start_daemons(2, env=DIRECT_ENV)
    t = time.monotonic()
    job = c.start_job("direct-route", [0, 1], 2,
                      [ctx.args.allreduce_check, "--inplace", "--mismatch-node", "1",
                       "--counts", "8000", "--mismatch-ms", str(bound_ms),
                       "--mismatch-text", "ran it through the daemons",
                       "--mismatch-text", "on the direct path"], timeout_ms=ROUTE_TIMEOUT_MS)
    job.wait_exit(60, expect=0)  # each rank checked its error, its time and its buffers
    for r in sorted(job.ranks):
        log("rank %d: %s" % (r, (job.rank(r).text().strip().splitlines() or [""])[-1]))
    log("every rank failed with COLL_ERR_MISMATCH within %d ms (job timeout %d ms), %.1f s "
        "after the job started" % (bound_ms, ROUTE_TIMEOUT_MS, time.monotonic() - t))
    fresh_job(ctx, "direct-route-fresh", [0, 1], 2)
    finish(ctx, [0, 1])


def waiting_keys(ctx, node, job_id, older_ms):
    """(leader address, keys) of node @node's allreduces of @job_id that have waited in shared
    memory for more than @older_ms (the leader's rounds wait for a stopped leader)."""
    j = ctx.c.daemons[node].job(job_id) or {}
    keys = [str(o["key"]) for o in j.get("operations", [])
            if o.get("collective") == "allreduce" and o.get("age_ms", 0) > older_ms]
    return (j.get("shm") or {}).get("leader_address"), keys


def refused_total(daemon):
    code, body = h.http_get(daemon.status_sock, "/metrics", 3.0)
    check(code == 200, "%s: GET /metrics answered %d" % (daemon.name, code))
    m = re.search(r"^collectived_direct_refused_total (\d+)$", body, re.M)
    check(m is not None, "%s: no collectived_direct_refused_total in /metrics" % daemon.name)
    return int(m.group(1))


def case_direct_token(ctx):
    """A UCX sender outside the job (direct_rogue) sends node 0's leader, waiting in its rounds
    for a stopped node 1 leader, messages with a wrong token and a payload that would show in
    any sum: they are dropped, counted (collectived_direct_refused_total) and logged by node 0;
    once node 1's leader runs again every result is still right (the ranks check every
    element), and the job goes on."""
    c = ctx.c
    job = direct_job(ctx, "direct-token", 2, 2)
    victim = job.rank(2)
    inject("SIGSTOP rank 2, node 1's leader (pid %d)" % victim.pid,
           lambda: victim.signal(signal.SIGSTOP))
    try:
        addr, keys = h.wait_until(lambda: (lambda a, k: (a, k) if a and k else None)(
            *waiting_keys(ctx, 0, job.id, 200)), 5, "node 0's rounds to wait for node 1")
        code, out = h.run([ctx.args.direct_rogue, addr, str(SHM_COUNT * 4)] + keys, timeout=30)
        check(code == 0 and "SENT %d" % len(keys) in out, "direct_rogue failed: %s" % out)
        h.wait_until(lambda: refused_total(c.daemons[0]) >= 1, 5,
                     "node 0 to count the refused messages")
        check(re.search(r"rank 0 \(the node's leader\) dropped \d+ direct messages without the "
                        r"job's token", c.daemons[0].log()), "node 0 did not log the refusal")
        log("node 0: %d direct messages refused (keys %s)" % (refused_total(c.daemons[0]),
                                                               " ".join(keys)))
    finally:
        victim.signal(signal.SIGCONT)
    seen = len(job.rank(0).events("PROGRESS"))
    h.wait_until(lambda: len(job.rank(0).events("PROGRESS")) >= seen + 20, 20,
                 "the job to go on after SIGCONT")
    for r in job.ranks.values():  # a wrong element ends a rank with exit status 1
        check(r.event("FAILED") is None and r.popen.poll() is None, "%s failed (exit %s): %s"
              % (r.label, r.popen.poll(), r.event("FAILED")))
    log("the job goes on with every result right after the refused messages")
    for r in list(job.ranks.values()):  # it would loop on: its ranks end here
        r.signal(signal.SIGKILL)
        r.popen.wait(5)
    finish(ctx, [0, 1])


CASES = {
    "direct_kill": case_direct_kill, "direct_stop": case_direct_stop,
    "direct_abort": case_direct_abort, "direct_daemon_kill": case_direct_daemon_kill,
    "direct_route": case_direct_route, "direct_token": case_direct_token,
    "direct_leave": case_direct_leave, "direct_linger": case_direct_linger,
}


def parser():
    p = ft.parser(__doc__, CASES)
    p.add_argument("--direct-rogue", help="direct_rogue binary (case direct_token)")
    p.add_argument("--allreduce-check", help="allreduce_check binary (case direct_route)")
    return p


def body(args, cluster):
    log("case %s, job timeout %d ms" % (args.case, args.timeout_ms))
    CASES[args.case](ft.Ctx(args, cluster))


if __name__ == "__main__":
    p = parser()
    h.main(body, p, cluster=p.parse_known_args()[0].case)
