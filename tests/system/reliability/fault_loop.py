#!/usr/bin/env python3
"""A fault, many times over: the daemon that survives it must never be captured.

Each run starts two fresh daemons (node 0 is the root) with one rank each, runs a loop of
4 MiB float32 allreduces (fault_rank, every element checked), injects one fault mid-run, and
asserts, for the survivor:

  1. its rank gets an error naming what was lost ("node N" or "rank R") within the job's
     timeout + 2 s of the fault;
  2. its status socket answers throughout: a poller asks GET /status every 50 ms from just
     before the fault until the job is re-formed, and every answer comes within 1 s;
  3. once the failed job is gone, its CPU is idle: less than 10 % of a core over 1 s
     (a captured loop spins at 100 %);
  4. the same job id forms again on it (with a daemon in the lost node's place) and allreduces
     correctly;
  5. SIGTERM stops it within 2 s, exit code 0;
  6. its log has no UCX warning about requests left at a worker's or endpoint's destruction
     ("... was not returned to mpool ucp_requests", "... pending operations were not
     flushed"): its teardown ended or released every request first (net/teardown.h).

Faults (--case): peer_kill (SIGKILL node 1's daemon), peer_kill_tcp (the same with
ucx_error_mode = peer, TCP between the daemons as between hosts: UCX's own check of its request
pool stays on there), peer_stop (SIGSTOP it; SIGCONT after the checks, and it rejoins),
root_kill (SIGKILL node 0's daemon, the root), rank_kill (SIGKILL rank 1; both daemons
survive). --runs says how many times (the ctest entries: 30, 10, 10, 10, 10).
Exit status: 0 pass, 1 fail (with logs of the failed run).
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import TestFailure, check, log  # noqa: E402

SLACK_S = 2.0  # the bound: an error within the job's timeout + 2 s
COUNT = 1 << 20  # 4 MiB of float32
STATUS_EVERY_S = 0.05
STATUS_BOUND_S = 1.0
IDLE_WINDOW_S = 1.0
IDLE_MAX = 0.10
STOP_BOUND_S = 2.0

# case -> (victim kind, victim index, survivor nodes, pattern the survivors' errors match,
# signal, the job's timeout in ms). A killed daemon leaves the survivor's UCX worker in a state
# that captured the old loop some 10 s after the kill: the kill cases have a timeout long
# enough (30 s: heartbeats alone would take 15 s) for that to show. A stopped peer is found
# by its heartbeats only, in half the timeout.
CASES = {
    "peer_kill": ("daemon", 1, [0], r"\bnode 1\b", signal.SIGKILL, 30000),
    "peer_kill_tcp": ("daemon", 1, [0], r"\bnode 1\b", signal.SIGKILL, 30000),
    "peer_stop": ("daemon", 1, [0], r"\bnode 1\b", signal.SIGSTOP, 4000),
    "root_kill": ("daemon", 0, [1], r"\bnode 0\b", signal.SIGKILL, 30000),
    "rank_kill": ("rank", 1, [0, 1], r"\brank 1\b", signal.SIGKILL, 4000),
}

# The daemons' arguments of a case (default none).
DAEMON_ARGS = {"peer_kill_tcp": ["--ucx-error-mode", "peer"]}
# UCX's warnings at a worker's or endpoint's destruction with requests still out.
UCX_LEFT = re.compile(r"UCX +WARN .*(not returned to mpool|pending operations were not flushed)")


class StatusPoller(threading.Thread):
    """GET /status on @daemons every STATUS_EVERY_S until stop(); records the slowest answer
    and every failure."""

    def __init__(self, daemons):
        super().__init__(daemon=True)
        self.daemons = daemons
        self.halt = threading.Event()
        self.failures = []
        self.slowest = 0.0
        self.polls = 0

    def run(self):
        while not self.halt.is_set():
            for d in self.daemons:
                t = time.monotonic()
                try:
                    code, _ = h.http_get(d.status_sock, "/status", STATUS_BOUND_S)
                    if code != 200:
                        self.failures.append("node %d answered %d" % (d.node, code))
                except OSError as e:
                    self.failures.append("node %d: %s after %.2f s" % (d.node, e,
                                                                      time.monotonic() - t))
                self.slowest = max(self.slowest, time.monotonic() - t)
                self.polls += 1
            self.halt.wait(STATUS_EVERY_S)

    def stop(self):
        self.halt.set()
        self.join(5)
        check(not self.failures, "the survivor's status socket did not answer within %.1f s: "
              "%s" % (STATUS_BOUND_S, "; ".join(self.failures[:5])))
        log("status polled %d times, slowest answer %.3f s" % (self.polls, self.slowest))


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def check_idle(daemon):
    t0, c0 = time.monotonic(), cpu_seconds(daemon.pid)
    time.sleep(IDLE_WINDOW_S)
    share = (cpu_seconds(daemon.pid) - c0) / (time.monotonic() - t0)
    check(share < IDLE_MAX, "node %d uses %.0f %% of a core with no job running"
          % (daemon.node, 100 * share))
    return share


def wait_job_gone(daemon, job_id):
    h.wait_until(lambda: daemon.job(job_id) is None, 10,
                 "node %d to free job %s" % (daemon.node, job_id))


def start_loop(c, job_id, nodes, timeout_ms):
    job = c.start_job(job_id, nodes, 1, [c.fault_rank, "--count", str(COUNT), "--window", "2",
                                         "--progress", "1"], timeout_ms=timeout_ms)
    job.wait_event("JOINED", timeout=30)
    job.wait_event("PROGRESS", timeout=60, count=2)
    return job


def expect_error(job, ranks, t_fault, pattern, timeout_ms):
    bound = timeout_ms / 1000.0 + SLACK_S + h.SANITIZER_SLACK_S
    job.wait_event("FAILED", ranks=ranks, timeout=bound + 10)
    for r in ranks:
        ev = job.rank(r).event("FAILED")
        dt = float(ev["t_mono"]) - t_fault
        check(dt <= bound, "rank %d got its error %.3f s after the fault (bound %.1f s)"
              % (r, dt, bound))
        check(re.search(pattern, ev.get("msg", "")), "rank %d: the error does not name %s: "
              "%s: %s" % (r, pattern, ev["status"], ev.get("msg")))
        log("rank %d: %s after %.3f s: %s" % (r, ev["status"], dt, ev.get("msg")))


def re_form(c, job_id, nodes):
    """The same job id on @nodes: a few allreduces, every element checked."""
    job = c.start_job(job_id, nodes, 1, [c.fault_rank, "--count", str(COUNT + 17), "--window",
                                         "2", "--iters", "4", "--progress", "0"],
                      timeout_ms=30000)
    job.wait_exit(60, expect=0)


def stop_within(daemon):
    t = time.monotonic()
    daemon.signal(signal.SIGTERM)
    try:
        code = daemon.popen.wait(STOP_BOUND_S + h.SANITIZER_SLACK_S)
    except subprocess.TimeoutExpired:
        raise TestFailure("node %d did not stop within %.1f s of SIGTERM"
                          % (daemon.node, STOP_BOUND_S))
    daemon.exit_code = code
    check(code == 0, "node %d exited with %d on SIGTERM" % (daemon.node, code))
    return time.monotonic() - t


def inject(c, job, case):
    kind, k, _, _, sig, _ = CASES[case]
    victim = c.daemons[k] if kind == "daemon" else job.rank(k)
    t = time.monotonic()
    victim.signal(sig)
    log("fault: %s to %s (pid %d)" % (signal.Signals(sig).name, victim.label, victim.pid))
    return victim, t


def replacement_nodes(c, case, victim):
    """The nodes of the re-formed job: the survivors and a daemon in the lost one's place."""
    kind, k, survivors, _, sig, _ = CASES[case]
    if kind == "rank":
        return [0, 1]
    if sig == signal.SIGSTOP:
        victim.signal(signal.SIGCONT)
        h.wait_until(lambda: victim.status(timeout=1.0), 10, "node 1 to answer after SIGCONT")
        return [0, 1]
    victim.popen.wait(5)
    victim.exit_code = victim.popen.returncode
    new = c.start_daemons(1, args=DAEMON_ARGS.get(case, []))[0]
    return [new.node, survivors[0]] if k == 0 else [survivors[0], new.node]


def check_no_ucx_leftovers(daemon):
    left = [l for l in daemon.text().splitlines() if UCX_LEFT.search(l)]
    check(not left, "node %d: UCX requests were still out when a worker or endpoint was "
          "destroyed (%d lines):\n  %s" % (daemon.node, len(left), "\n  ".join(left[:8])))


def one_run(args, c, case, run):
    c.fault_rank = os.path.abspath(args.fault_rank)
    c.start_daemons(2, args=DAEMON_ARGS.get(case, []))
    _, k, survivors, pattern, _, timeout_ms = CASES[case]
    job_id = "loop-%s" % case
    job = start_loop(c, job_id, [0, 1], timeout_ms)
    poller = StatusPoller([c.daemons[s] for s in survivors])
    poller.start()
    victim, t = inject(c, job, case)
    ranks = [r for r in survivors if not (CASES[case][0] == "rank" and r == k)]
    expect_error(job, ranks, t, pattern, timeout_ms)
    if CASES[case][0] == "rank":
        victim.popen.wait(5)
        del job.ranks[k]
    job.release()
    job.wait_exit(20)
    for s in survivors:
        wait_job_gone(c.daemons[s], job_id)
        share = check_idle(c.daemons[s])
        log("node %d idle after the fault: %.1f %% of a core" % (s, 100 * share))
    re_form(c, job_id, replacement_nodes(c, case, victim))
    poller.stop()
    for s in survivors:
        wait_job_gone(c.daemons[s], job_id)
        log("node %d stopped %.3f s after SIGTERM" % (s, stop_within(c.daemons[s])))
        check_no_ucx_leftovers(c.daemons[s])
    c.check_no_crash()
    log("run %d of %s: pass" % (run + 1, case))


def body(args, _cluster):
    runs = args.runs
    if h.SANITIZE:
        # Instrumented processes are several times slower: a fifth of the runs keeps the
        # sanitizer step within CI's time; the plain build runs them all.
        runs = max(2, args.runs // 5)
        log("under %s: %d of the %d runs" % (h.SANITIZE, runs, args.runs))
    for run in range(runs):
        with h.Cluster(args.daemon, "loop-%s-%d" % (args.case, run)) as c:
            try:
                one_run(args, c, args.case, run)
            except TestFailure as e:
                log("run %d of %s failed: %s" % (run + 1, args.case, e))
                c.dump()
                raise


def parser():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--daemon", required=True)
    p.add_argument("--fault-rank", required=True)
    p.add_argument("--case", choices=sorted(CASES), required=True)
    p.add_argument("--runs", type=int, default=10)
    return p


if __name__ == "__main__":
    h.main(body, parser(), cluster="loop")
