"""A cluster of one test: daemons on loopback (or in network namespaces), and jobs of rank
processes on any subset of them with the COLL_* environment collective-launch would give.

Unlike collective-launch, which tears the whole job down when a daemon dies, the tests need
daemons that outlive their jobs, faults injected into one process at a chosen moment, and
several jobs on the same daemons, so the cluster starts the pieces itself. Cluster is a context
manager (also on SIGTERM, SIGINT and SIGHUP) whose close() stops everything, checks that none of
its daemons is left, and removes its directory. Daemon state comes from GET /status on each
daemon's status socket; resource counts from /proc/PID.

Times are time.monotonic(), the CLOCK_MONOTONIC that the rank programs print, so detection
times are measured from the moment of the fault to the moment a rank got its error.
"""

import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time

from .basics import TestFailure, check, clean_env, log, wait_until, write_secret
from .netns import Netns
from .procs import Daemon, Rank

CRASH = re.compile(r"AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|Assertion .* "
                   r"failed|Segmentation fault|core dumped|stack smashing")


class Job:
    """The ranks of one job."""

    def __init__(self, job_id, ranks, timeout_ms):
        self.id = job_id
        self.ranks = ranks
        self.timeout_ms = timeout_ms

    def rank(self, r):
        return self.ranks[r]

    def wait_event(self, kind, ranks=None, timeout=30.0, count=1):
        """Wait until every rank of @ranks printed @count lines of @kind; a rank that exits
        first fails the test."""
        ranks = [self.ranks[r] for r in (ranks if ranks is not None else sorted(self.ranks))]

        def ready():
            for r in ranks:
                if len(r.events(kind)) >= count:
                    continue
                if not r.alive():
                    raise TestFailure("%s of job %s exited (code %s) before printing %s:\n%s%s"
                                      % (r.label, self.id, r.popen.returncode, kind,
                                         r.text()[-2000:], r.text("err")[-2000:]))
                return False
            return True
        wait_until(ready, timeout, "%s from ranks %s of job %s"
                   % (kind, [r.rank for r in ranks], self.id))

    def wait_exit(self, timeout, expect=None):
        """Wait for every rank to exit; with @expect, each must exit with that code."""
        end = time.monotonic() + timeout
        for r in self.ranks.values():
            try:
                code = r.popen.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise TestFailure("%s of job %s still runs after %.0f s:\n%s%s"
                                  % (r.label, self.id, timeout, r.text()[-2000:],
                                     r.text("err")[-2000:]))
            if expect is not None and code != expect:
                raise TestFailure("%s of job %s exited with %d, expected %d:\n%s%s"
                                  % (r.label, self.id, code, expect, r.text()[-3000:],
                                     r.text("err")[-3000:]))

    def release(self):
        for r in self.ranks.values():
            r.release()


class Cluster:
    """Daemons and jobs of one test; a context manager that tears everything down."""

    def __init__(self, daemon, name):
        self.daemon_bin = os.path.abspath(daemon)
        self.dir = tempfile.mkdtemp(prefix="coll-%s-" % name)
        self.secret = os.path.join(self.dir, "peer.secret")
        write_secret(self.secret, secrets.token_hex(32).encode() + b"\n")
        self.daemons = []
        self.jobs = []
        self.extra = []  # ranks started with a label of their own (start_rank)
        self.netns = None
        self._old_handlers = {}

    # -- context management: also on SIGTERM (ctest's timeout) and SIGINT --------------------------

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum, frame):
        raise TestFailure("received signal %d" % signum)

    def __exit__(self, *exc):
        self.close()
        for sig, h in self._old_handlers.items():
            signal.signal(sig, h)
        return False

    # -- daemons ---------------------------------------------------------------------------------

    def make_netns(self, n):
        """@n network namespaces (Netns), deleted by close()."""
        self.netns = Netns(n)
        return self.netns

    def start_daemons(self, n, args=(), node_args=None, netns=None, env=None):
        """Start @n daemons (more when called again) named node<k>; @node_args(k) gives extra
        arguments of daemon k, @env variables over clean_env(). Every daemon gets the cluster's
        node secret (self.secret) unless its arguments name another peer_secret_file. Waits for
        their control addresses and /status; returns the new Daemon objects."""
        new = []
        for _ in range(n):
            k = len(self.daemons)
            extra = list(args) + (list(node_args(k)) if node_args is not None else [])
            d = Daemon(self.daemon_bin, self.dir, "node%d" % k, extra,
                       env=dict(clean_env(), **(env or {})),
                       wrap=netns.wrap(k, []) if netns else (), secret=self.secret,
                       listen="%s:0" % (netns.addr(k) if netns else "127.0.0.1"), node=k)
            self.daemons.append(d)
            new.append(d)
        for d in new:
            d.wait_ready()
            st = d.status()
            check(st["node"]["pid"] == d.pid, "node %d: /status says pid %s, we started %d"
                  % (d.node, st["node"]["pid"], d.pid))
        log("daemons %s up: %s" % ([d.node for d in new], ", ".join(
            "%d=%s(pid %d)" % (d.node, d.addr, d.pid) for d in new)))
        return new

    # -- jobs ------------------------------------------------------------------------------------

    def start_job(self, job_id, nodes, ranks_per_node, argv, timeout_ms=None, token="random",
                  env=None, rank_env=None, ranks=None):
        """Start the ranks of a job on daemons @nodes (indices), @ranks_per_node each. @token:
        'random', None (no COLL_JOB_TOKEN) or a string. @rank_env(rank) adds variables to one
        rank. @ranks: start only these global ranks (the others later, with start_rank)."""
        if token == "random":
            token = secrets.token_hex(16)
        job = Job(job_id, {}, timeout_ms)
        job.spec = (nodes, ranks_per_node, argv, timeout_ms, token, env, rank_env)
        self.jobs.append(job)
        world = len(nodes) * ranks_per_node
        for r in range(world) if ranks is None else ranks:
            self.start_rank(job, r)
        log("job %s: started ranks %s on nodes %s (timeout %s ms)"
            % (job_id, sorted(job.ranks), nodes, timeout_ms))
        return job

    def rank_env(self, job, r, token="same"):
        nodes, rpn, argv, timeout_ms, job_token, env, rank_env = job.spec
        node = self.daemons[nodes[r // rpn]]
        e = {k: v for k, v in os.environ.items() if not k.startswith("COLL_")}
        e.update({
            "COLL_SOCKET": node.sock, "COLL_JOB": job.id, "COLL_RANK": str(r),
            "COLL_WORLD_SIZE": str(len(nodes) * rpn), "COLL_LOCAL_RANK": str(r % rpn),
            "COLL_LOCAL_SIZE": str(rpn), "COLL_ROOT": self.daemons[nodes[0]].addr,
        })
        if timeout_ms is not None:
            e["COLL_TIMEOUT_MS"] = str(timeout_ms)
        tok = job_token if token == "same" else token
        if tok is not None:
            e["COLL_JOB_TOKEN"] = tok
        e.update(env or {})
        if rank_env is not None:
            e.update(rank_env(r))
        return e, node

    def start_rank(self, job, r, token="same", label=None, argv=None):
        """Start global rank @r of @job (token 'same': the job's; None: none; or a string)."""
        e, node = self.rank_env(job, r, token)
        name = label or "%s.r%d" % (job.id, r)
        p = Rank(r, node.node, argv or job.spec[2], e, os.path.join(self.dir, name + ".out"),
                 os.path.join(self.dir, name + ".err"), local=r % job.spec[1])
        if label is None:
            job.ranks[r] = p
        else:
            self.extra.append(p)
        return p

    @property
    def ranks(self):
        """Every rank of every job, in the order they were started."""
        return [r for job in self.jobs for r in job.ranks.values()]

    # -- teardown --------------------------------------------------------------------------------

    def stop_daemons(self, nodes=None, expect_clean=True):
        """SIGTERM daemons @nodes (default all still running); with @expect_clean each must
        exit 0 (a clean shutdown). Returns {node: exit code}."""
        codes = {}
        for d in self.daemons:
            if (nodes is None or d.node in nodes) and d.exit_code is None:
                d.exit_code = codes[d.node] = d.stop(10.0)
        for k, code in codes.items():
            if expect_clean and code != 0:
                raise TestFailure("node %d: collectived exited with %d on SIGTERM, expected a "
                                  "clean exit 0:\n%s" % (k, code, self.daemons[k].text()[-3000:]))
        return codes

    def close(self):
        for job in self.jobs:
            for r in job.ranks.values():
                r.stop(3.0)
        for p in self.extra:
            p.stop(3.0)
        left = []
        for d in self.daemons:
            if d.exit_code is None:
                d.exit_code = d.stop(10.0)
            if os.path.exists("/proc/%d" % d.pid):
                left.append(d.pid)
        if self.netns is not None:
            self.netns.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        if left:
            raise TestFailure("collectived processes %s are still there after teardown" % left)

    # -- diagnostics -----------------------------------------------------------------------------

    def dump(self, limit=6000):
        """Print the daemons' logs and the ranks' output (tails), after a failure."""
        for d in self.daemons:
            print("---- node %d daemon log (%s) ----" % (d.node, d.log_path))
            print(d.text()[-limit:])
        for job in self.jobs:
            for r in sorted(job.ranks):
                p = job.ranks[r]
                print("---- job %s %s ----" % (job.id, p.label))
                print(p.text()[-limit // 3:] + p.text("err")[-limit // 3:])
        for p in self.extra:
            print("---- %s ----" % p.label)
            print(p.text()[-limit // 3:] + p.text("err")[-limit // 3:])

    def check_no_crash(self):
        """No daemon log line that says a daemon crashed or a sanitizer reported."""
        for d in self.daemons:
            for line in d.text().splitlines():
                if CRASH.search(line):
                    raise TestFailure("node %d: %s" % (d.node, line))
