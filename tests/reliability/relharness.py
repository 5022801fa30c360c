"""Harness of the reliability tests (Python 3 standard library only).

Unlike collective-launch, which tears the whole job down when a daemon dies, these tests need
daemons that outlive their jobs, faults injected into one process at a chosen moment, and
several jobs on the same daemons. So the harness starts the pieces itself:

- Cluster: daemons (one directory each: client socket, status socket, addr file, log file),
  optionally inside network namespaces (Netns), and jobs of trainer processes on any subset of
  them with the COLL_* environment that collective-launch would give.
- Every process is bounded: it gets SIGKILL when the test process dies (PR_SET_PDEATHSIG), runs
  in its own process group, and Cluster.close() (a context manager, also run on SIGTERM/SIGINT)
  stops everything, checks that none of its daemons is left, and removes the directory.
- Daemon state comes from GET /status on each daemon's status socket; resource counts from
  /proc/PID (open fds, memfds, /dev/shm files, VmRSS).

Times are time.monotonic(), the CLOCK_MONOTONIC that the rank programs print, so detection
times are measured from the moment of the fault to the moment a rank got its error.
"""

import ctypes
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77  # ctest SKIP_RETURN_CODE
PR_SET_PDEATHSIG = 1
SUN_PATH_MAX = 107
T0 = time.monotonic()

# Shared with the operations tests: failures and skips (main() turns them into exit codes),
# bounded polling, HTTP on a Unix socket.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ops"))
from opslib import Skip, TestFailure, http_unix, wait_until  # noqa: E402

# "<HH:MM:SS.us> collectived[pid] <level> <subsystem>: <text>"
LOG_LINE = re.compile(r"^(\d\d):(\d\d):(\d\d\.\d+) collectived\[(\d+)\] (\w+) (\w+): (.*)$")
CRASH = re.compile(r"AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|Assertion .* "
                   r"failed|Segmentation fault|core dumped|stack smashing")

# The sanitizers of this build (-DCOLL_SANITIZE; tests/sanitizer-env.cmake exports it to every
# test, "" in a normal build). Instrumented daemons and ranks run several times slower (ASan:
# 2-3x, more on a loaded machine), which delays each wake-up, submission and report by tens of
# milliseconds (ThreadSanitizer: 5-15x, more): a detection time checked against a bound gets
# SANITIZER_SLACK_S more there. The
# bounds themselves are what the normal build checks.
SANITIZE = os.environ.get("COLL_SANITIZE", "")
SANITIZER_SLACK_S = 1.0 if "thread" in SANITIZE else 0.5 if SANITIZE else 0.0


def log(msg):
    print("[%7.2f] %s" % (time.monotonic() - T0, msg), flush=True)


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


_LIBC = ctypes.CDLL(None, use_errno=True)


def write_secret(path, data):
    """A node secret file (mode 0600, as the daemon requires)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _child_setup():
    """Runs in each child before exec: SIGKILL when the test dies, own process group."""
    _LIBC.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def http_get(sock_path, path, timeout):
    """GET @path on a Unix socket; returns (status code, body text), code 0 when the answer is
    not HTTP (e.g. the connection closed first)."""
    try:
        code, _, body = http_unix(sock_path, path, timeout=timeout)
    except (IndexError, ValueError):
        return 0, ""
    return code, body


# ---- network namespaces -------------------------------------------------------------------------

class Netns:
    """N namespaces <P>0..<P>N-1, each with veth0 (10.9.0.k+1/24) whose peer p<k> sits on a
    bridge in namespace <P>sw: the same topology as bench/netns.sh, unshaped. The prefix holds
    our pid, so only what this test made is ever touched; close() deletes it all."""

    SUBNET = "10.9.0"

    def __init__(self, n):
        if os.geteuid() != 0:
            raise Skip("network namespaces need root")
        if shutil.which("ip") is None:
            raise Skip("the ip command (iproute2) is not installed")
        self.prefix = "crel%dx" % os.getpid()
        self.n = n
        self.made = []
        try:
            self._setup()
        except TestFailure:
            self.close()
            raise

    def _ip(self, *args):
        try:
            p = subprocess.run(["ip"] + list(args), stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            raise TestFailure("ip %s did not finish within 10 s" % " ".join(args))
        if p.returncode != 0:
            raise TestFailure("ip %s failed: %s" % (" ".join(args), p.stderr.strip()))

    def ns(self, k):
        return "%s%d" % (self.prefix, k)

    def addr(self, k):
        return "%s.%d" % (self.SUBNET, k + 1)

    def _add_ns(self, name):
        if os.path.exists(os.path.join("/run/netns", name)):
            raise TestFailure("namespace %s exists already; not touching it" % name)
        try:
            self._ip("netns", "add", name)
        except TestFailure as e:
            raise Skip("cannot create a network namespace here: %s" % e)
        self.made.append(name)

    def _setup(self):
        sw = self.prefix + "sw"
        self._add_ns(sw)
        self._ip("-n", sw, "link", "add", "br0", "type", "bridge")
        self._ip("-n", sw, "link", "set", "br0", "up")
        for k in range(self.n):
            ns = self.ns(k)
            self._add_ns(ns)
            self._ip("link", "add", "veth0", "netns", ns, "type", "veth", "peer", "name",
                     "p%d" % k, "netns", sw)
            self._ip("-n", ns, "addr", "add", "%s/24" % self.addr(k), "dev", "veth0")
            self._ip("-n", ns, "link", "set", "lo", "up")
            self._ip("-n", ns, "link", "set", "veth0", "up")
            self._ip("-n", sw, "link", "set", "p%d" % k, "master", "br0")
            self._ip("-n", sw, "link", "set", "p%d" % k, "up")
        log("namespaces %s0..%s%d on bridge %ssw, addresses %s.1-%d"
            % (self.prefix, self.prefix, self.n - 1, self.prefix, self.SUBNET, self.n))

    def link(self, k, up):
        """Cut (or restore) host k's cable: its port on the bridge goes down (up)."""
        self._ip("-n", self.prefix + "sw", "link", "set", "p%d" % k, "up" if up else "down")

    def wrap(self, k, argv):
        return ["ip", "netns", "exec", self.ns(k), "env", "UCX_TLS=tcp,self",
                "UCX_NET_DEVICES=veth0"] + argv

    def close(self):
        for name in reversed(self.made):
            try:
                subprocess.run(["ip", "netns", "del", name], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=10)
            except subprocess.TimeoutExpired:
                log("warning: could not delete namespace %s" % name)
        self.made = []


# ---- processes ----------------------------------------------------------------------------------

class Proc:
    """A child process in its own process group, output in files."""

    def __init__(self, label, argv, env, out_path, err_path, stdin_pipe, cwd=None):
        self.label = label
        self.out_path = out_path
        self.err_path = err_path
        out = open(out_path, "wb")
        err = open(err_path, "wb") if err_path != out_path else None
        try:
            self.popen = subprocess.Popen(
                argv, env=env, cwd=cwd, stdout=out,
                stderr=err if err is not None else subprocess.STDOUT,
                stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
                start_new_session=True, preexec_fn=_child_setup)
        finally:
            out.close()
            if err is not None:
                err.close()
        self.pid = self.popen.pid

    def alive(self):
        return self.popen.poll() is None

    def signal(self, sig):
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def release(self):
        """Close our end of its standard input (a holding rank then leaves)."""
        if self.popen.stdin is not None and not self.popen.stdin.closed:
            try:
                self.popen.stdin.close()
            except OSError:
                pass

    def stop(self, grace):
        """SIGTERM (after SIGCONT), SIGKILL after @grace seconds; returns the exit code."""
        self.release()
        if self.alive():
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                log("%s did not stop within %.0f s of SIGTERM; SIGKILL" % (self.label, grace))
        self.signal(signal.SIGKILL)  # the group: anything it left behind
        return self.popen.wait()

    def text(self, which="out"):
        path = self.out_path if which == "out" else self.err_path
        try:
            with open(path, "r", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""


class Daemon(Proc):
    def __init__(self, node, node_dir, argv, env):
        self.node = node
        self.dir = node_dir
        self.sock = os.path.join(node_dir, "collectived.sock")
        self.status_sock = os.path.join(node_dir, "status.sock")
        self.addr_file = os.path.join(node_dir, "control.addr")
        self.log_path = os.path.join(node_dir, "daemon.log")
        self.addr = None
        self.exit_code = None
        super().__init__("node %d collectived" % node, argv, env, self.log_path, self.log_path,
                         False, cwd=node_dir)

    def status(self, timeout=3.0):
        """The /status document; raises TestFailure when the daemon does not answer."""
        try:
            code, body = http_get(self.status_sock, "/status", timeout)
        except OSError as e:
            raise TestFailure("node %d: GET /status failed: %s" % (self.node, e))
        if code != 200:
            raise TestFailure("node %d: GET /status answered %d" % (self.node, code))
        return json.loads(body)

    def job(self, job_id):
        """The /status entry of @job_id, or None."""
        for j in self.status().get("jobs", []):
            if j.get("id") == job_id:
                return j
        return None

    def log_lines(self):
        """Parsed daemon log lines: (seconds of the day, level, subsystem, text)."""
        out = []
        for line in self.text().splitlines():
            m = LOG_LINE.match(line)
            if m:
                t = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
                out.append((t, m.group(5), m.group(6), m.group(7)))
        return out

    def resources(self):
        """Open fds, memfds and /dev/shm files (open or mapped), VmRSS and RssAnon in KiB."""
        fds = memfds = shm_fds = 0
        proc = "/proc/%d" % self.pid
        for fd in os.listdir(proc + "/fd"):
            try:
                target = os.readlink("%s/fd/%s" % (proc, fd))
            except OSError:
                continue
            fds += 1
            memfds += target.startswith("/memfd:")
            shm_fds += target.startswith("/dev/shm/")
        shm_maps = set()
        with open(proc + "/maps") as f:
            for line in f:
                path = line.split(None, 5)[5].strip() if len(line.split(None, 5)) == 6 else ""
                if path.startswith("/dev/shm/"):
                    shm_maps.add(path)
        rss = anon = 0
        with open(proc + "/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("RssAnon:"):
                    anon = int(line.split()[1])
        return {"fds": fds, "memfds": memfds, "shm": shm_fds + len(shm_maps), "rss_kb": rss,
                "anon_kb": anon}


class Rank(Proc):
    """A trainer process; its stdout lines are events 'KIND key=value ... msg=rest'."""

    def __init__(self, rank, node, argv, env, out_path, err_path):
        self.rank = rank
        self.node = node
        super().__init__("rank %d (node %d)" % (rank, node), argv, env, out_path, err_path, True)

    def events(self, kind):
        out = []
        for line in self.text().splitlines():
            if line.startswith(kind + " ") or line == kind:
                out.append(parse_event(line))
        return out

    def event(self, kind):
        ev = self.events(kind)
        return ev[0] if ev else None


def parse_event(line):
    """'FAILED seq=3 status=X t_mono=1.5 msg=a b c' -> {'kind': 'FAILED', 'seq': '3', ...}."""
    kind, _, rest = line.partition(" ")
    ev = {"kind": kind}
    head, sep, msg = rest.partition("msg=")
    if sep:
        ev["msg"] = msg
    for tok in head.split():
        k, _, v = tok.partition("=")
        ev[k] = v
    return ev


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
        self.dir = tempfile.mkdtemp(prefix="crel-%s-" % name)
        self.secret = os.path.join(self.dir, "peer.secret")
        write_secret(self.secret, secrets.token_hex(32).encode() + b"\n")
        self.daemons = []
        self.jobs = []
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

    def start_daemons(self, n, args=(), node_args=None, netns=None, env=None, wait_addr=True):
        """Start @n daemons (more when called again); @node_args(k) gives extra arguments of
        daemon k. Every daemon gets the cluster's node secret (self.secret) unless its
        arguments name another peer_secret_file. Waits for their control addresses (with
        @wait_addr; a daemon without a secret has no control listener) and /status; returns
        the new Daemon objects."""
        new = []
        for _ in range(n):
            k = len(self.daemons)
            node_dir = os.path.join(self.dir, "node%d" % k)
            os.mkdir(node_dir, 0o700)
            listen = "%s:0" % (netns.addr(k) if netns else "127.0.0.1")
            argv = [self.daemon_bin, "--config", "none", "--socket",
                    os.path.join(node_dir, "collectived.sock"), "--listen", listen,
                    "--peer-secret-file", self.secret,
                    "--addr-file", os.path.join(node_dir, "control.addr")] + list(args)
            if node_args is not None:
                argv += list(node_args(k))
            if len(os.path.join(node_dir, "collectived.sock")) > SUN_PATH_MAX:
                raise TestFailure("socket path too long; set TMPDIR to a shorter directory")
            if netns:
                argv = netns.wrap(k, argv)
            denv = {k2: v for k2, v in os.environ.items()
                    if not k2.startswith("COLL_") and not k2.startswith("COLLD_")}
            denv.update(env or {})
            d = Daemon(k, node_dir, argv, denv)
            self.daemons.append(d)
            new.append(d)
        for d in new:
            if wait_addr:
                d.addr = wait_until(lambda: self._read_addr(d), 20, "node %d's control address"
                                    % d.node)
            else:
                wait_until(lambda: d.alive() and os.path.exists(d.status_sock), 20,
                           "node %d's status socket" % d.node)
            st = d.status()
            check(st["node"]["pid"] == d.pid, "node %d: /status says pid %s, we started %d"
                  % (d.node, st["node"]["pid"], d.pid))
        log("daemons %s up: %s" % ([d.node for d in new], ", ".join(
            "%d=%s(pid %d)" % (d.node, d.addr, d.pid) for d in new)))
        return new

    def _read_addr(self, d):
        if not d.alive():
            raise TestFailure("node %d: collectived exited with %s before it was ready:\n%s"
                              % (d.node, d.popen.returncode, d.text()[-3000:]))
        try:
            with open(d.addr_file) as f:
                text = f.read()
        except FileNotFoundError:
            return None
        return text.strip() if text.endswith("\n") else None

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
                 os.path.join(self.dir, name + ".err"))
        if label is None:
            job.ranks[r] = p
        else:
            self.extra = getattr(self, "extra", []) + [p]
        return p

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
        for p in getattr(self, "extra", []):
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
        for p in getattr(self, "extra", []):
            print("---- %s ----" % p.label)
            print(p.text()[-limit // 3:] + p.text("err")[-limit // 3:])

    def check_no_crash(self):
        """No daemon log line that says a daemon crashed or a sanitizer reported."""
        for d in self.daemons:
            for line in d.text().splitlines():
                if CRASH.search(line):
                    raise TestFailure("node %d: %s" % (d.node, line))


def main(body, name, argv_parser):
    """Parse arguments, run @body(args, cluster) in a Cluster; exit 0, 1 (FAIL) or 77 (SKIP)."""
    args = argv_parser.parse_args()
    cluster = None
    try:
        with Cluster(args.daemon, name) as cluster:
            try:
                body(args, cluster)
            except TestFailure:
                cluster.dump()
                raise
            if getattr(args, "dump", False):
                cluster.dump()
    except Skip as e:
        log("SKIP: %s" % e)
        sys.exit(SKIP)
    except TestFailure as e:
        log("FAIL: %s" % e)
        sys.exit(1)
    log("PASS")
