#!/usr/bin/env python3
"""Fault-injection and access-control tests of collectived, one case per run.

Real daemons, real UCX, real trainer processes (fault_rank); the harness (tests/system/harness)
starts and tears them down. Every fault case runs a job with a short timeout (COLL_TIMEOUT_MS,
3000 ms by default) whose ranks allreduce large float32 buffers in a loop, injects the fault once
every rank has completed a few operations, and then checks:

  1. every surviving rank's operation fails with the documented error, whose message names the
     lost node or rank, within timeout + 2 s of the fault (measured: the rank prints the
     CLOCK_MONOTONIC time its wait returned; the fault time is taken just before the signal or
     the `ip link` command), and every other operation it had in flight fails too (or succeeds
     with the right data);
  2. the surviving daemons stay up and their GET /status shows the job failed, with an error
     message naming the lost node or rank;
  3. a fresh job (new job id) on the same daemons, without the killed one, allreduces
     correctly (every element checked);
  4. the surviving daemons exit 0 on SIGTERM, and none is left running.

The errors each case expects (the contract these tests pin down):

  daemon_kill   3 nodes x 1 rank; SIGKILL node 1's daemon during 4 MiB allreduces (ring:
                reduce-scatter then all-gather). Ranks 0 and 2: COLL_ERR_PEER naming "node 1"
                (node 2 misses its heartbeats, fails the job and tells node 0). Rank 1, whose
                daemon is gone: COLL_ERR_CLOSED. Then a restarted daemon in node 1's place
                joins a fresh job with the survivors.
  alltoall_daemon_kill  the same during all-to-alls (direct exchanges between every pair of
                nodes, 768 KiB per rank): the same errors, then a fresh job of the survivors.
  trainer_kill  2 x 2; SIGKILL rank 3 with 4 allreduces in flight on every rank. Ranks 0-2:
                COLL_ERR_JOB naming "rank 3" (its daemon sees it leave with work pending).
  trainer_leave 2 x 2, then 2 x 1; rank 3 (then 1) destroys its communicator between
                operations, the others submit the next one 0.5 s later. The survivors:
                COLL_ERR_JOB naming "rank 3" (then "node 1": its daemon said goodbye) before
                the timeout; the leaving rank exits 0.
  daemon_stop   3 x 1; SIGSTOP node 1's daemon. Ranks 0 and 2: COLL_ERR_PEER naming "node 1".
                Rank 1: COLL_ERR_TIMEDOUT from the library's own bound (its daemon answers
                nothing). Node 1's /status does not answer while it is stopped; after SIGCONT
                it answers again and a fresh job including it works.
  link_down     4 x 1, each daemon in its own network namespace (UCX over TCP on a veth pair
                to a bridge); host 2's link goes down mid-run. Ranks 0, 1 and 3: COLL_ERR_PEER
                naming "node 2". Rank 2 (cut off): an error (COLL_ERR_PEER or
                COLL_ERR_TIMEDOUT) within the same bound. The link comes back up and a fresh job
                on all four daemons works.
  stall         2 x 2; rank 3 stops submitting (sleeps) before its 6th allreduce. Its daemon
                logs a stall warning naming rank 3 between 0.4 and 0.5 x timeout + one health
                tick (+0.5 s) after that; ranks 0-2 get COLL_ERR_TIMEDOUT naming "rank 3" no
                earlier than timeout - 0.5 s and no later than timeout + 2 s after the stall.

The shared-memory path (1 node x 3 ranks, 4 KiB allreduces, which the local ranks
run among themselves, checked through coll_req_algo(); ctest -L latency):

  shm_kill      SIGKILL rank 2 with operations in flight. Ranks 0 and 1, waiting in shared
                memory: COLL_ERR_JOB naming "rank 2" (its daemon sees it leave while
                collectives wait there, or the next post finds it gone).
  shm_stop      SIGSTOP rank 2. Ranks 0 and 1: COLL_ERR_TIMEDOUT naming "rank 2", no earlier
                than the timeout - 0.5 s (the daemon watches what waits in shared memory).
  shm_abort     rank 2 stops submitting and calls coll_comm_abort(). Ranks 0 and 1, asleep in
                shared memory: COLL_ERR_JOB naming "rank 2" within 1 s (the daemon wakes them).
  shm_shutdown  rank 2 stops submitting; the daemon gets SIGTERM. Ranks 0 and 1, waiting in
                shared memory: COLL_ERR_JOB "shutting down" within 1 s; the daemon exits 0.
  shm_daemon_kill  SIGKILL the daemon while the ranks complete allreduces without it. Every
                rank: COLL_ERR_CLOSED within the job's health tick + 1 s.

Multi-node allreduces reduced and distributed among each node's ranks around the daemons'
algorithm (2 nodes x 2 ranks, 4 KiB, checked through coll_req_algo() "shm+rd"):

  node_kill     SIGKILL rank 1 with operations in flight. Ranks 0, 2 and 3: COLL_ERR_JOB naming
                "rank 1" (its daemon sees it leave while collectives wait).
  node_stop     SIGSTOP rank 1. Ranks 0, 2 and 3, waiting in shared memory or in the daemons:
                COLL_ERR_TIMEDOUT naming "rank 1", no earlier than the timeout - 0.5 s.
  node_abort    rank 1 stops submitting and calls coll_comm_abort(). Ranks 0, 2 and 3, asleep
                in shared memory or in the daemons: COLL_ERR_JOB naming "rank 1" within 1 s.
  node_leave    rank 3 leaves between operations (communicator destroyed, nothing pending).
                Ranks 0, 1 and 2: COLL_ERR_JOB naming "rank 3", well before the timeout (its
                daemon finds rank 2's next allreduce waiting in shared memory without it).

Access control and resources (not timed faults):

  job_token     a rank without the job's token, and one with another token, are refused with
                COLL_ERR_DENIED and the daemon logs why ("refused rank ... wrong job token");
                the job then forms with the right rank and works. A daemon with
                require_job_token = 1 refuses a rank without a token ("requires a job token").
  peer_secret   daemons 0 and 1 share a secret file, daemon 2 has none (and runs with
                allow_unauthenticated_peers), daemon 3 another one:
                the job on 0 and 1 allreduces correctly; jobs rooted at 0 with a rank on 2 or 3
                fail at the rendezvous and node 0 logs a "rejected peer" line for each.
  pool_budget   pool_budget = 64 MiB: a job asking for 40 MiB forms; a second one asking for
                40 MiB, and one asking for 128 MiB, fail at join with COLL_ERR_NOMEM and a
                message naming the budget and the request; once the first job ended, a 40 MiB
                job forms again (the budget was given back).

Exit status: 0 pass, 1 fail (with the daemons' logs and the ranks' output), 77 skip (says why).
"""

import argparse
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import TestFailure, check, log  # noqa: E402

SLACK_S = 2.0  # the specified bound: an error within the job's timeout + 2 s


class Ctx:
    def __init__(self, args, cluster):
        self.args = args
        args.fault_rank = os.path.abspath(args.fault_rank)
        self.c = cluster
        self.t_ms = args.timeout_ms
        self.t_s = args.timeout_ms / 1000.0
        self.times = {}  # rank -> detection time, for the summary

    def loop_argv(self, *extra):
        return [self.args.fault_rank] + list(extra)


# ---- shared checks ------------------------------------------------------------------------------

def inject(what, action):
    """Run @action (the fault); returns the monotonic time taken just before it."""
    t = time.monotonic()
    action()
    log("fault: %s" % what)
    return t


def expect_failures(ctx, job, t_fault, expected, lower=None, upper=None):
    """@expected: {rank: (set of status names, regex the message must match or None)}. Each of
    those ranks must print FAILED with one of the statuses within timeout + 2 s (or @upper s) of
    @t_fault (and no earlier than @lower seconds after it, when given). Under the sanitizers the
    bound has harness.SANITIZER_SLACK_S more (it says why)."""
    bound = (ctx.t_s + SLACK_S if upper is None else upper) + h.SANITIZER_SLACK_S
    job.wait_event("FAILED", ranks=sorted(expected), timeout=bound + 10)
    for r, (statuses, pattern) in sorted(expected.items()):
        ev = job.rank(r).event("FAILED")
        dt = float(ev["t_mono"]) - t_fault
        ctx.times[r] = dt
        log("rank %d: %s after %.3f s (bound %.1f s): %s" % (r, ev["status"], dt, bound,
                                                           ev.get("msg", "")))
        check(ev["status"] in statuses, "rank %d failed with %s, expected %s (message: %s)"
              % (r, ev["status"], " or ".join(sorted(statuses)), ev.get("msg")))
        check(dt <= bound, "rank %d got its error %.3f s after the fault, more than %.1f s"
              % (r, dt, bound))
        check(lower is None or dt >= lower, "rank %d got its error %.3f s after the fault, "
              "earlier than %.2f s" % (r, dt, lower or 0))
        if pattern is not None:
            check(re.search(pattern, ev.get("msg", "")), "rank %d: the message does not name "
                  "%s: '%s'" % (r, pattern, ev.get("msg")))
        for also in job.rank(r).events("ALSO"):  # a success: the rank checked its data
            log("rank %d: operation %s in flight ended with %s" % (r, also["seq"],
                                                                  also["status"]))


def expect_status_failed(ctx, nodes, job_id, pattern, lost_node=None):
    """Daemons @nodes answer /status with @job_id failed, its error message matching @pattern,
    and (with @lost_node) that node marked down among the job's peers."""
    for k in nodes:
        j = ctx.c.daemons[k].job(job_id)
        check(j is not None, "node %d: /status has no job %s (the ranks still hold it)"
              % (k, job_id))
        err = j.get("error") or {}
        check(j["state"] == "failed", "node %d: job %s is %s, expected failed" % (k, job_id,
                                                                              j["state"]))
        check(re.search(pattern, err.get("message", "")),
              "node %d: job %s's error does not name %s: %s" % (k, job_id, pattern, err))
        if lost_node is not None:
            peer = [p for p in j.get("peers", []) if p.get("node") == lost_node]
            check(peer and not peer[0]["up"], "node %d: job %s's peers do not show node %d "
                  "down: %s" % (k, job_id, lost_node, j.get("peers")))
        log("node %d: /status: job %s %s: %s: %s" % (k, job_id, j["state"], err.get("status"),
                                                    err.get("message")))


def end_job(job, expect=3):
    """Let the holding ranks of a failed job leave; each must have exited with @expect."""
    job.release()
    job.wait_exit(20, expect=expect)


def fresh_job(ctx, job_id, nodes, ranks_per_node, timeout_ms=None):
    """A new job on the same daemons allreduces correctly: 8 operations (two sizes), every
    element checked by the ranks."""
    for count, window in ((1048576 + 17, 2), (4099, 4)):
        job = ctx.c.start_job("%s-%d" % (job_id, count), nodes, ranks_per_node,
                              ctx.loop_argv("--count", str(count), "--window", str(window),
                                            "--iters", "4", "--progress", "0"),
                              timeout_ms=timeout_ms or 30000)
        job.wait_exit(90, expect=0)
        for r in job.ranks.values():
            check(r.event("DONE") is not None, "%s: no DONE line" % r.label)
    log("fresh job %s on nodes %s (%d ranks each): every result correct"
        % (job_id, nodes, ranks_per_node))


def finish(ctx, survivors):
    """The surviving daemons are still running, logged no crash, and exit 0 on SIGTERM."""
    for k in survivors:
        check(ctx.c.daemons[k].alive(), "node %d: collectived died" % k)
    ctx.c.check_no_crash()
    ctx.c.stop_daemons(survivors)
    log("detection times: %s" % ", ".join("rank %d %.3f s" % (r, t)
                                           for r, t in sorted(ctx.times.items())))


def loop_job(ctx, job_id, nodes, rpn, count, window, *extra):
    job = ctx.c.start_job(job_id, nodes, rpn, ctx.loop_argv("--count", str(count), "--window",
                                                            str(window), *extra),
                          timeout_ms=ctx.t_ms)
    job.wait_event("JOINED", timeout=30)
    job.wait_event("PROGRESS", timeout=60, count=3)
    return job


# ---- fault cases --------------------------------------------------------------------------------

def kill_daemon_1(ctx, job):
    """SIGKILL node 1's daemon under @job (nodes 0-2): daemon_kill's errors, then end @job."""
    c = ctx.c
    t = inject("SIGKILL node 1's daemon (pid %d)" % c.daemons[1].pid,
               lambda: c.daemons[1].signal(signal.SIGKILL))
    expect_failures(ctx, job, t, {0: ({"COLL_ERR_PEER"}, r"\bnode 1\b"),
                                  2: ({"COLL_ERR_PEER"}, r"\bnode 1\b"),
                                  1: ({"COLL_ERR_CLOSED"}, None)})
    expect_status_failed(ctx, [0, 2], job.id, r"\bnode 1\b", lost_node=1)
    end_job(job)
    c.daemons[1].popen.wait(5)
    c.daemons[1].exit_code = c.daemons[1].popen.returncode


def case_daemon_kill(ctx):
    c = ctx.c
    c.start_daemons(3)
    kill_daemon_1(ctx, loop_job(ctx, "kill-daemon", [0, 1, 2], 1, 1 << 20, 2))
    fresh_job(ctx, "kill-daemon-fresh", [0, 2], 1)
    # A daemon restarted on node 1's host (node 3 here: a new process, a new port) rejoins: a
    # job on all three hosts works again.
    c.start_daemons(1)
    fresh_job(ctx, "kill-daemon-rejoin", [0, 3, 2], 1)
    finish(ctx, [0, 2, 3])


def case_alltoall_daemon_kill(ctx):
    ctx.c.start_daemons(3)
    kill_daemon_1(ctx, loop_job(ctx, "kill-daemon-a2a", [0, 1, 2], 1, 3 << 16, 2, "--op=alltoall"))
    fresh_job(ctx, "kill-daemon-a2a-fresh", [0, 2], 1)
    finish(ctx, [0, 2])


def case_trainer_kill(ctx):
    c = ctx.c
    c.start_daemons(2)
    job = loop_job(ctx, "kill-trainer", [0, 1], 2, 1 << 18, 4)
    kill_rank(ctx, job, 3, "with allreduces in flight", [0, 1])
    fresh_job(ctx, "kill-trainer-fresh", [0, 1], 2)
    finish(ctx, [0, 1])


def kill_rank(ctx, job, rank, doing, nodes):
    """SIGKILL rank @rank of @job while it is @doing: every other rank fails with COLL_ERR_JOB
    naming it, the status of @nodes' daemons shows the job failed, and the job is ended."""
    victim = job.rank(rank)
    t = inject("SIGKILL rank %d (pid %d) %s" % (rank, victim.pid, doing),
               lambda: victim.signal(signal.SIGKILL))
    pattern = r"\brank %d\b" % rank
    expect_failures(ctx, job, t, {r: ({"COLL_ERR_JOB"}, pattern)
                                  for r in list(job.ranks) if r != rank})
    expect_status_failed(ctx, nodes, job.id, pattern)
    victim.popen.wait(5)
    del job.ranks[rank]
    end_job(job)


def case_trainer_leave(ctx):
    """A rank that leaves between operations (communicator destroyed, nothing pending) strands
    the next collective: with 2 ranks per node, its node fails the job as soon as the other
    local rank submits, naming the rank; alone on its node, its daemon says goodbye and the
    other node fails naming that node. Either way, every survivor's error comes well within the
    timeout, not at it."""
    c = ctx.c
    c.start_daemons(2)
    for job_id, rpn, victim, pattern, failed_nodes in (
            ("leave-2x2", 2, 3, r"\brank 3\b", [0, 1]), ("leave-2x1", 1, 1, r"\bnode 1\b", [0])):
        job = c.start_job(job_id, [0, 1], rpn,
                          ctx.loop_argv("--count", "65536", "--window", "1", "--stall-rank",
                                        str(victim), "--stall-after", "5", "--leave",
                                        "--progress", "0"), timeout_ms=ctx.t_ms)
        job.wait_event("LEFT", ranks=[victim], timeout=60)
        t = float(job.rank(victim).event("LEFT")["t_mono"])
        log("rank %d left job %s between operations" % (victim, job_id))
        expect_failures(ctx, job, t, {r: ({"COLL_ERR_JOB"}, pattern)
                                      for r in range(2 * rpn) if r != victim})
        # The timeout's verdict would come at the earliest a timeout after the next submit
        # (LEAVE_WAIT_MS = 0.5 s after LEFT): an error before the timeout is not that one.
        check(max(ctx.times.values()) < ctx.t_s,
              "job %s: errors %.3f s after the rank left: the timeout's verdict (%.1f s), not "
              "the leave's" % (job_id, max(ctx.times.values()), ctx.t_s))
        expect_status_failed(ctx, failed_nodes, job.id, pattern)
        check(job.rank(victim).popen.wait(10) == 0, "the leaving rank did not exit 0")
        del job.ranks[victim]
        end_job(job)
        ctx.times.clear()
    fresh_job(ctx, "leave-fresh", [0, 1], 2)
    finish(ctx, [0, 1])


def status_hangs(daemon):
    try:
        daemon.status(timeout=1.0)
    except TestFailure:
        return True
    return False


def case_daemon_stop(ctx):
    c = ctx.c
    c.start_daemons(3)
    job = loop_job(ctx, "stop-daemon", [0, 1, 2], 1, 1 << 20, 2)
    d1 = c.daemons[1]
    t = inject("SIGSTOP node 1's daemon (pid %d)" % d1.pid, lambda: d1.signal(signal.SIGSTOP))
    try:
        expect_failures(ctx, job, t, {0: ({"COLL_ERR_PEER"}, r"\bnode 1\b"),
                                      2: ({"COLL_ERR_PEER"}, r"\bnode 1\b"),
                                      1: ({"COLL_ERR_TIMEDOUT"}, r"timeout")})
        expect_status_failed(ctx, [0, 2], job.id, r"\bnode 1\b", lost_node=1)
        check(status_hangs(d1), "node 1 answered /status while stopped")
        end_job(job)
    finally:
        d1.signal(signal.SIGCONT)
    log("SIGCONT node 1's daemon after %.1f s stopped" % (time.monotonic() - t))
    st = h.wait_until(lambda: not status_hangs(d1) and d1.status(), 10,
                      "node 1 to answer /status after SIGCONT")
    old = [j for j in st.get("jobs", []) if j["id"] == job.id]
    check(not old or old[0]["state"] == "failed", "node 1 after SIGCONT: job %s is %s"
          % (job.id, old and old[0]["state"]))
    log("node 1 answers /status again (job %s: %s)" % (job.id, old[0]["state"] if old
                                                         else "gone"))
    fresh_job(ctx, "stop-daemon-fresh", [0, 1, 2], 1)
    finish(ctx, [0, 1, 2])


def case_link_down(ctx):
    c = ctx.c
    ns = c.make_netns(4)
    c.start_daemons(4, netns=ns)
    job = loop_job(ctx, "link-down", [0, 1, 2, 3], 1, 1 << 20, 2)
    try:
        t = inject("host 2's link (p2 on the bridge) down", lambda: ns.link(2, False))
        expect_failures(ctx, job, t, {0: ({"COLL_ERR_PEER"}, r"\bnode 2\b"),
                                      1: ({"COLL_ERR_PEER"}, r"\bnode 2\b"),
                                      3: ({"COLL_ERR_PEER"}, r"\bnode 2\b"),
                                      2: ({"COLL_ERR_PEER", "COLL_ERR_TIMEDOUT"}, None)})
        expect_status_failed(ctx, [0, 1, 3], job.id, r"\bnode 2\b", lost_node=2)
        expect_status_failed(ctx, [2], job.id, r".")
    finally:
        ns.link(2, True)
    log("host 2's link up again")
    end_job(job)
    fresh_job(ctx, "link-down-fresh", [0, 1, 2, 3], 1)
    finish(ctx, [0, 1, 2, 3])


def stall_warning(ctx, daemon, stall_real):
    """The stall warning naming rank 3 in @daemon's log, in seconds after the stall."""
    lt = time.localtime(stall_real)
    stall_day = lt.tm_hour * 3600 + lt.tm_min * 60 + lt.tm_sec + (stall_real % 1)
    for t, level, _, text in daemon.log_lines():
        if level == "warn" and "stalled" in text and re.search(r"\brank 3\b", text):
            return (t - stall_day) % 86400, text
    return None


def case_stall(ctx):
    c = ctx.c
    c.start_daemons(2)
    job = loop_job(ctx, "stall", [0, 1], 2, 1 << 16, 1, "--stall-rank", "3", "--stall-after",
                   "5")
    job.wait_event("STALL", ranks=[3], timeout=30)
    ev = job.rank(3).event("STALL")
    t = float(ev["t_mono"])
    log("rank 3 stopped submitting before operation %s" % ev["seq"])
    # Rank 2 shares rank 3's daemon, which knows who did not submit and times out first; node
    # 0, which only waits for node 1's data, gives it two health ticks to say so.
    expect_failures(ctx, job, t, {r: ({"COLL_ERR_TIMEDOUT"}, r"\brank 3\b") for r in (0, 1, 2)},
                    lower=ctx.t_s - 0.5)
    warn = stall_warning(ctx, c.daemons[1], float(ev["t_real"]))
    check(warn is not None, "node 1 logged no stall warning naming rank 3")
    tick = min(max(ctx.t_ms / 8, 50), 250) / 1000.0
    lo, hi = 0.4 * ctx.t_s, 0.5 * ctx.t_s + tick + 0.5
    log("node 1 warned %.3f s after the stall (expected %.2f..%.2f s): %s" % (warn[0], lo, hi,
                                                                           warn[1]))
    check(lo <= warn[0] <= hi, "the stall warning came %.3f s after the stall, expected about "
          "half the timeout (%.2f..%.2f s)" % (warn[0], lo, hi))
    expect_status_failed(ctx, [0, 1], job.id, r"\brank 3\b")
    job.release()
    job.wait_exit(20)
    for r in (0, 1, 2):
        check(job.rank(r).popen.returncode == 3, "rank %d exited with %d, expected 3"
              % (r, job.rank(r).popen.returncode))
    fresh_job(ctx, "stall-fresh", [0, 1], 2)
    finish(ctx, [0, 1])


# ---- the shared-memory path ----------------------------------------------------------------------

SHM_COUNT = 1024  # 4 KiB: below the default crossover, the local ranks run it themselves


def shm_job(ctx, job_id, *extra):
    """1 node x 3 ranks looping on 4 KiB allreduces, which must run in shared memory."""
    ctx.c.start_daemons(1)
    job = loop_job(ctx, job_id, [0], 3, SHM_COUNT, 2, *extra)
    algo = job.rank(0).event("PROGRESS").get("algo")
    check(algo == "shm", "job %s: its allreduces ran as '%s', not in shared memory" % (job_id,
                                                                                    algo))
    return job


def case_shm_kill(ctx):
    job = shm_job(ctx, "shm-kill")
    kill_rank(ctx, job, 2, "with allreduces in shared memory", [0])
    fresh_job(ctx, "shm-kill-fresh", [0], 3)
    finish(ctx, [0])


def case_shm_stop(ctx):
    job = shm_job(ctx, "shm-stop")
    victim = job.rank(2)
    t = inject("SIGSTOP rank 2 (pid %d)" % victim.pid, lambda: victim.signal(signal.SIGSTOP))
    try:
        expect_failures(ctx, job, t, {r: ({"COLL_ERR_TIMEDOUT"}, r"\brank 2\b") for r in (0, 1)},
                        lower=ctx.t_s - 0.5)
        expect_status_failed(ctx, [0], job.id, r"\brank 2\b")
    finally:
        victim.signal(signal.SIGCONT)
    end_job(job, expect=None)  # rank 2 fails too once it runs again
    fresh_job(ctx, "shm-stop-fresh", [0], 3)
    finish(ctx, [0])


def stalled_shm_job(ctx, job_id, *extra):
    """shm_job whose rank 2 stops submitting before its 20th operation; returns the job and
    the time it stopped (the others then wait in shared memory)."""
    job = shm_job(ctx, job_id, "--stall-rank", "2", "--stall-after", "20", *extra)
    job.wait_event("STALL", ranks=[2], timeout=30)
    return job, float(job.rank(2).event("STALL")["t_mono"])


def case_shm_abort(ctx):
    job, t = stalled_shm_job(ctx, "shm-abort", "--abort")
    job.wait_event("ABORTED", ranks=[2], timeout=10)
    t = float(job.rank(2).event("ABORTED")["t_mono"])
    expect_failures(ctx, job, t, {r: ({"COLL_ERR_JOB"}, r"\brank 2\b") for r in (0, 1)})
    check(max(ctx.times.values()) < 1.0, "the ranks waiting in shared memory heard of the abort "
          "%.3f s after it" % max(ctx.times.values()))
    expect_status_failed(ctx, [0], job.id, r"\brank 2\b.*fault_rank --abort")
    end_job(job, expect=None)  # rank 2 ended the job and exits 0
    fresh_job(ctx, "shm-abort-fresh", [0], 3)
    finish(ctx, [0])


def case_shm_shutdown(ctx):
    c = ctx.c
    job, _ = stalled_shm_job(ctx, "shm-shutdown")
    time.sleep(0.2)  # ranks 0 and 1 poll, then sleep on their control blocks
    t = inject("SIGTERM the daemon (pid %d)" % c.daemons[0].pid,
               lambda: c.daemons[0].signal(signal.SIGTERM))
    expect_failures(ctx, job, t, {r: ({"COLL_ERR_JOB"}, r"shutting down") for r in (0, 1)})
    check(max(ctx.times.values()) < 1.0, "the ranks waiting in shared memory heard of the "
          "shutdown %.3f s after it" % max(ctx.times.values()))
    check(c.daemons[0].popen.wait(10) == 0, "the daemon did not exit 0 on SIGTERM")
    c.daemons[0].exit_code = 0
    end_job(job, expect=None)
    c.check_no_crash()


def case_shm_daemon_kill(ctx):
    c = ctx.c
    job = shm_job(ctx, "shm-daemon-kill")
    d = c.daemons[0]
    t = inject("SIGKILL the daemon (pid %d)" % d.pid, lambda: d.signal(signal.SIGKILL))
    tick = min(max(ctx.t_ms / 8, 50), 250) / 1000.0
    expect_failures(ctx, job, t, {r: ({"COLL_ERR_CLOSED"}, r"collectived") for r in (0, 1, 2)},
                    upper=tick + 1.0)
    d.popen.wait(5)
    d.exit_code = d.popen.returncode
    end_job(job)


def node_job(ctx, job_id, *extra):
    """2 nodes x 2 ranks looping on 4 KiB allreduces, which each node's ranks must reduce and
    distribute in shared memory around the daemons' recursive doubling (the direct path off:
    direct_fault_test.py has its own cases)."""
    ctx.c.start_daemons(2, args=["--direct-max-bytes", "0"])
    job = loop_job(ctx, job_id, [0, 1], 2, SHM_COUNT, 2, *extra)
    algo = job.rank(0).event("PROGRESS").get("algo")
    check(algo == "shm+rd", "job %s: its allreduces ran as '%s', not 'shm+rd'" % (job_id, algo))
    return job


def case_node_kill(ctx):
    job = node_job(ctx, "node-kill")
    kill_rank(ctx, job, 1, "with allreduces in shared memory", [0, 1])
    fresh_job(ctx, "node-kill-fresh", [0, 1], 2)
    finish(ctx, [0, 1])


def case_node_stop(ctx):
    job = node_job(ctx, "node-stop")
    victim = job.rank(1)
    t = inject("SIGSTOP rank 1 (pid %d)" % victim.pid, lambda: victim.signal(signal.SIGSTOP))
    try:
        expect_failures(ctx, job, t,
                        {r: ({"COLL_ERR_TIMEDOUT"}, r"\brank 1\b") for r in (0, 2, 3)},
                        lower=ctx.t_s - 0.5)
        expect_status_failed(ctx, [0, 1], job.id, r"\brank 1\b")
    finally:
        victim.signal(signal.SIGCONT)
    end_job(job, expect=None)  # rank 1 fails too once it runs again
    fresh_job(ctx, "node-stop-fresh", [0, 1], 2)
    finish(ctx, [0, 1])


def case_node_abort(ctx):
    job = node_job(ctx, "node-abort", "--stall-rank", "1", "--stall-after", "20", "--abort")
    job.wait_event("ABORTED", ranks=[1], timeout=30)
    t = float(job.rank(1).event("ABORTED")["t_mono"])
    expect_failures(ctx, job, t, {r: ({"COLL_ERR_JOB"}, r"\brank 1\b") for r in (0, 2, 3)})
    check(max(ctx.times.values()) < 1.0, "the waiting ranks heard of the abort %.3f s after it"
          % max(ctx.times.values()))
    expect_status_failed(ctx, [0, 1], job.id, r"\brank 1\b.*fault_rank --abort")
    end_job(job, expect=None)  # rank 1 ended the job and exits 0
    fresh_job(ctx, "node-abort-fresh", [0, 1], 2)
    finish(ctx, [0, 1])


def case_node_leave(ctx):
    job = node_job(ctx, "node-leave", "--window", "1", "--stall-rank", "3", "--stall-after", "20",
                   "--leave")
    job.wait_event("LEFT", ranks=[3], timeout=30)
    t = float(job.rank(3).event("LEFT")["t_mono"])
    expect_failures(ctx, job, t, {r: ({"COLL_ERR_JOB"}, r"\brank 3\b") for r in (0, 1, 2)})
    check(max(ctx.times.values()) < ctx.t_s / 2, "errors %.3f s after the rank left: not the "
          "leave's verdict" % max(ctx.times.values()))
    expect_status_failed(ctx, [0, 1], job.id, r"\brank 3\b")
    check(job.rank(3).popen.wait(10) == 0, "the leaving rank did not exit 0")
    del job.ranks[3]
    end_job(job)
    fresh_job(ctx, "node-leave-fresh", [0, 1], 2)
    finish(ctx, [0, 1])


# ---- access control and resources ---------------------------------------------------------------

def expect_joinfail(proc, status, stderr_pattern, timeout=20):
    proc.popen.wait(timeout)
    ev = proc.event("JOINFAIL")
    err = proc.text("err")
    check(ev is not None and ev["status"] == status, "%s: expected JOINFAIL status=%s, got %s "
          "(exit %s):\n%s%s" % (proc.label, status, ev, proc.popen.returncode, proc.text(), err))
    check(re.search(stderr_pattern, err), "%s: the library's message does not match '%s': %s"
          % (proc.label, stderr_pattern, err.strip()))
    log("%s refused: %s: %s" % (proc.label, status, err.strip().splitlines()[-1] if err.strip()
                                else ""))
    return err


def expect_log(daemon, pattern, what):
    lines = [text for _, level, _, text in daemon.log_lines() if re.search(pattern, text)]
    check(lines, "node %d logged no line matching '%s' (%s)" % (daemon.node, pattern, what))
    log("node %d logged: %s" % (daemon.node, lines[0]))
    return lines


def case_job_token(ctx):
    c = ctx.c
    d0, d1 = c.start_daemons(1)[0], c.start_daemons(1, args=["--require-job-token", "1"])[0]
    argv = ctx.loop_argv("--count", "65536", "--iters", "4", "--progress", "0")
    job = c.start_job("tok", [0], 2, argv, timeout_ms=20000, ranks=[0])
    h.wait_until(lambda: (d0.job("tok") or {}).get("joined") == 1, 20, "rank 0 of job tok")
    intruders = [(c.start_rank(job, 1, token=None, label="tok.none"), "no token"),
                 (c.start_rank(job, 1, token="f00d" * 8, label="tok.wrong"), "another token")]
    for p, what in intruders:
        expect_joinfail(p, "COLL_ERR_DENIED", r"token")
        lines = expect_log(d0, r"refused rank 1 \(pid %d\b.*job tok: wrong job token" % p.pid,
                           "a rank with %s" % what)
    j = d0.job("tok")
    check(j is not None and j["state"] == "gathering" and j["joined"] == 1,
          "job tok after the intruders: %s" % j)
    c.start_rank(job, 1)
    job.wait_exit(60, expect=0)
    log("job tok formed with its own rank 1 and allreduced correctly")
    # A daemon that requires tokens refuses a rank without one, and takes one with a token.
    strict = c.start_job("tok-strict", [1], 1, argv, timeout_ms=20000, token=None)
    expect_joinfail(strict.rank(0), "COLL_ERR_DENIED", r"token")
    expect_log(d1, r"refused rank 0 .*job tok-strict: this daemon requires a job token",
               "no token on a daemon with require_job_token")
    ok = c.start_job("tok-strict2", [1], 1, argv, timeout_ms=20000)
    ok.wait_exit(60, expect=0)
    c.check_no_crash()
    c.stop_daemons()


def case_peer_secret(ctx):
    c = ctx.c
    secret_a = os.path.join(c.dir, "secret-a")
    secret_b = os.path.join(c.dir, "secret-b")
    h.write_secret(secret_a, os.urandom(32))
    h.write_secret(secret_b, os.urandom(32))
    files = {0: secret_a, 1: secret_a, 3: secret_b}
    # Daemon 2 has no secret and is told to go without: it connects unauthenticated.
    c.start_daemons(4, node_args=lambda k: ["--peer-secret-file", files[k]] if k in files
                    else ["--peer-secret-file", "", "--allow-unauthenticated-peers", "1"])
    argv = ctx.loop_argv("--count", "262147", "--iters", "4", "--progress", "0")
    good = c.start_job("auth-ok", [0, 1], 1, argv, timeout_ms=ctx.t_ms)
    bad = {2: c.start_job("auth-nosecret", [0, 2], 1, argv, timeout_ms=ctx.t_ms),
           3: c.start_job("auth-othersecret", [0, 3], 1, argv, timeout_ms=ctx.t_ms)}
    good.wait_exit(60, expect=0)
    log("job auth-ok (nodes 0 and 1, same secret) allreduced correctly")
    for k, job in bad.items():
        # The rank behind the rejected daemon fails its rendezvous; node 0's rank times out.
        err = expect_joinfail(job.rank(1), "COLL_ERR_RENDEZVOUS", r"auth|secret")
        expect_joinfail(job.rank(0), "COLL_ERR_TIMEDOUT", r".", timeout=ctx.t_s + 10)
    rejected = expect_log(c.daemons[0], r"^rejected peer ", "peers without the secret")
    check(len(rejected) >= 2, "node 0 logged %d 'rejected peer' lines, expected one for node 2 "
          "and one for node 3: %s" % (len(rejected), rejected))
    for line in rejected:
        log("node 0: %s" % line)
    c.check_no_crash()
    c.stop_daemons()


def case_pool_budget(ctx):
    c = ctx.c
    d = c.start_daemons(1, args=["--pool-budget", "64M"])[0]
    hold = ctx.loop_argv("--count", "1024", "--window", "1", "--stall-rank", "0",
                         "--stall-after", "1", "--progress", "0")
    a = c.start_job("budget-a", [0], 1, hold, env={"COLL_POOL_SIZE": "40M"})
    a.wait_event("STALL", timeout=30)
    log("job budget-a holds a 40 MiB pool: %s" % d.job("budget-a")["pool"])
    for name, size in (("budget-b", "40M"), ("budget-c", "128M")):
        job = c.start_job(name, [0], 1, hold, env={"COLL_POOL_SIZE": size})
        err = expect_joinfail(job.rank(0), "COLL_ERR_NOMEM",
                              r"asks for a pool of \d+ bytes; this daemon's budget is 67108864 "
                              r"\(pool_budget\)")
        asked = int(re.search(r"asks for a pool of (\d+) bytes", err).group(1))
        want = int(size[:-1]) << 20
        check(want <= asked < want + (1 << 20), "%s: the message names a request of %d bytes, "
              "the job asked for %d (+ control blocks)" % (name, asked, want))
    a.release()
    a.wait_exit(20, expect=0)
    h.wait_until(lambda: d.job("budget-a") is None, 10, "job budget-a to close")
    again = c.start_job("budget-b2", [0], 1, ctx.loop_argv("--count", "1024", "--iters", "3"),
                        env={"COLL_POOL_SIZE": "40M"})
    again.wait_exit(60, expect=0)
    log("after budget-a ended, a 40 MiB job formed again")
    c.check_no_crash()
    c.stop_daemons()


CASES = {
    "daemon_kill": case_daemon_kill, "alltoall_daemon_kill": case_alltoall_daemon_kill,
    "trainer_kill": case_trainer_kill,
    "trainer_leave": case_trainer_leave,
    "daemon_stop": case_daemon_stop, "link_down": case_link_down, "stall": case_stall,
    "shm_kill": case_shm_kill, "shm_stop": case_shm_stop, "shm_abort": case_shm_abort,
    "shm_shutdown": case_shm_shutdown, "shm_daemon_kill": case_shm_daemon_kill,
    "node_kill": case_node_kill,
    "node_stop": case_node_stop, "node_abort": case_node_abort, "node_leave": case_node_leave,
    "job_token": case_job_token, "peer_secret": case_peer_secret,
    "pool_budget": case_pool_budget,
}


def parser(doc=__doc__, cases=CASES, timeout_ms=3000):
    """The arguments of a fault test script (this one's, or direct_ and block_fault_test's)."""
    p = argparse.ArgumentParser(description=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--daemon", required=True, help="collectived binary")
    p.add_argument("--fault-rank", required=True, help="fault_rank binary")
    p.add_argument("--case", required=True, choices=sorted(cases))
    p.add_argument("--timeout-ms", type=int, default=timeout_ms, help="the job's timeout "
                   "(COLL_TIMEOUT_MS) of the fault cases (default %d)" % timeout_ms)
    p.add_argument("--dump", action="store_true",
                   help="print the daemons' logs and the ranks' output also when the test passes")
    return p


def body(args, cluster):
    log("case %s, job timeout %d ms" % (args.case, args.timeout_ms))
    CASES[args.case](Ctx(args, cluster))


if __name__ == "__main__":
    p = parser()
    h.main(body, p, cluster=p.parse_known_args()[0].case)
