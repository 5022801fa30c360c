"""Helpers of the operations tests (Python 3 standard library only): daemons and ranks started
in a private directory and always torn down, HTTP over the status socket, polling with a bound.

Daemons run with --config none (a configuration file on the test machine must not change what
is tested) and their own socket directory, so the status socket is <dir>/status.sock.
"""

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77  # ctest SKIP_RETURN_CODE

# Daemon log lines: "<time> collectived[<pid>] <level> <subsystem>: <text>".
WARN_MARKERS = (" warn ", " error ")


class TestFailure(Exception):
    """A failed check; main() prints it and exits 1."""


class Skip(Exception):
    """The test cannot run here; main() says why and exits 77."""


def log(msg):
    print("%s: %s" % (os.path.basename(sys.argv[0]), msg), flush=True)


def wait_until(fn, timeout, what, period=0.05):
    """Poll fn() until it returns a true value (returned) or @timeout seconds pass (failure)."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() >= end:
            raise TestFailure("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(period)


def http_unix(sock_path, path, method="GET", timeout=10.0, raw=None):
    """(status code, headers dict, body text) of one request on a Unix socket."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock_path)
        s.sendall(raw if raw is not None else
                  ("%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (method, path))
                  .encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    return parse_http(data)


def http_tcp(addr, path, timeout=10.0):
    host, _, port = addr.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as s:
        s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path).encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return parse_http(data)


def parse_http(data):
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    code = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return code, headers, body.decode("utf-8", errors="replace")


def status_json(sock_path):
    code, _, body = http_unix(sock_path, "/status")
    if code != 200:
        raise TestFailure("GET /status on %s: %d %s" % (sock_path, code, body))
    return json.loads(body)


def test_env():
    """The environment without COLL_*/COLLD_* variables of whoever runs the tests."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("COLL_") and not k.startswith("COLLD_")}


def node_secret(path):
    """The node secret at @path, made (mode 0600, random) unless it is there: daemons that
    share it authenticate each other."""
    if not os.path.exists(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
    return path


class Daemon:
    """One collectived in <work>/<name>/, its output in <work>/<name>/log; @wrap: a command
    that runs it (e.g. setpriv ... as another user). Its node secret: @secret, else
    <work>/peer.secret (made on first use, shared by the daemons of one work directory). With
    @peers False it gets neither a secret nor a control listener (single-node jobs only)."""

    def __init__(self, binary, work, name, extra=(), env=None, wrap=(), secret=None,
                 peers=True):
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir, exist_ok=True)
        self.name = name
        self.socket = os.path.join(self.dir, "c.sock")
        self.status = os.path.join(self.dir, "status.sock")
        self.addr_file = os.path.join(self.dir, "control.addr")
        self.log_path = os.path.join(self.dir, "log")
        self.peers = peers
        self.argv = [binary, "--config", "none", "--socket", self.socket]
        if peers:
            secret = secret or node_secret(os.path.join(work, "peer.secret"))
            self.argv += ["--listen", "127.0.0.1:0", "--peer-secret-file", secret,
                          "--addr-file", self.addr_file]
        self.argv += list(extra)
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(list(wrap) + self.argv, stdin=subprocess.DEVNULL,
                                     stdout=self.logf,
                                     stderr=subprocess.STDOUT,
                                     env=env if env is not None else test_env())
        self.addr = None

    def wait_ready(self, timeout=20.0):
        def ready():
            if self.proc.poll() is not None:
                raise TestFailure("%s exited with %d before it was ready:\n%s"
                                  % (self.name, self.proc.returncode, self.log()))
            if not self.peers:  # no control address to wait for: the status server
                return "none" if "ready on" in self.log() else None
            try:
                with open(self.addr_file) as f:
                    text = f.read()
            except FileNotFoundError:
                return None
            return text.strip() if text.endswith("\n") else None
        self.addr = wait_until(ready, timeout, "%s to write its address" % self.name)
        return self

    def log(self):
        if not self.logf.closed:
            self.logf.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=20.0):
        """Signal the daemon and wait; returns its exit code. Kills it after @timeout."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise TestFailure("%s did not exit within %.0f s of signal %d:\n%s"
                                  % (self.name, timeout, sig, self.log()))
        self.logf.close()
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.logf.closed:
            self.logf.close()


class Rank:
    """One ops_rank process; its output in <work>/r<rank>.out."""

    def __init__(self, argv, env, work, rank, node, local):
        self.rank, self.node, self.local = rank, node, local
        self.out_path = os.path.join(work, "r%d.out" % rank)
        self.outf = open(self.out_path, "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.outf,
                                     stderr=subprocess.STDOUT, env=env)

    @property
    def pid(self):
        return self.proc.pid

    def output(self):
        if not self.outf.closed:
            self.outf.flush()
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def wait(self, timeout):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TestFailure("rank %d did not finish within %.0f s:\n%s"
                              % (self.rank, timeout, self.output()))
        self.outf.close()
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.outf.closed:
            self.outf.close()


class Cluster:
    """Daemons on loopback, one per simulated node, and the ranks of one job on them."""

    def __init__(self, args, work, nodes, daemon_extra=()):
        self.args, self.work = args, work
        self.daemons = [Daemon(args.daemon, work, "node%d" % k, daemon_extra)
                        for k in range(nodes)]
        for d in self.daemons:
            d.wait_ready()
        self.ranks = []

    def start_job(self, job, per_node, rank_args):
        nodes = len(self.daemons)
        for k, d in enumerate(self.daemons):
            for l in range(per_node):
                r = k * per_node + l
                env = test_env()
                env.update({"COLL_SOCKET": d.socket, "COLL_JOB": job, "COLL_RANK": str(r),
                            "COLL_WORLD_SIZE": str(nodes * per_node),
                            "COLL_LOCAL_RANK": str(l), "COLL_LOCAL_SIZE": str(per_node),
                            "COLL_TIMEOUT_MS": "30000"})
                if nodes > 1:
                    env["COLL_ROOT"] = self.daemons[0].addr
                self.ranks.append(Rank([self.args.rank] + list(rank_args), env, self.work, r,
                                       k, l))
        return self.ranks

    def wait_ranks(self, timeout=60.0, expect=0):
        for r in self.ranks:
            rc = r.wait(timeout)
            if rc != expect:
                raise TestFailure("rank %d exited with %d (expected %d):\n%s\n%s"
                                  % (r.rank, rc, expect, r.output(), self.logs()))

    def logs(self):
        return "\n".join("---- %s log ----\n%s" % (d.name, d.log()) for d in self.daemons)

    def teardown(self):
        for r in self.ranks:
            r.kill()
        for d in self.daemons:
            try:
                d.stop(timeout=10)
            except TestFailure as e:
                log("teardown: %s" % e)
            d.kill()


def check_no_warnings(text, what, allowed=()):
    bad = [l for l in text.splitlines()
           if any(m in l for m in WARN_MARKERS) and not any(a in l for a in allowed)]
    if bad:
        raise TestFailure("unexpected warnings or errors in %s:\n  %s" % (what, "\n  ".join(bad)))


def run(cmd, timeout=60, env=None, check=True, echo=True, cwd=None):
    """(exit code, output) of a command; a non-zero code fails the test when @check."""
    log("running: %s" % " ".join(cmd))
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout,
                           env=env if env is not None else test_env(), cwd=cwd)
    except subprocess.TimeoutExpired:
        raise TestFailure("%s did not finish within %d s" % (cmd[0], timeout))
    out = p.stdout.decode(errors="replace")
    if echo and out:
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
    if check and p.returncode != 0:
        raise TestFailure("%s exited with %d" % (" ".join(cmd), p.returncode))
    return p.returncode, out


def main(tests, parser):
    """Run the test named on the command line in a fresh directory that is removed after."""
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ops-", dir=os.environ.get("TMPDIR", "/tmp"))
    try:
        tests[args.test](args, work)
    except Skip as e:
        log("SKIP: %s" % e)
        sys.exit(SKIP)
    except TestFailure as e:
        log("FAIL: %s" % e)
        sys.exit(1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log("PASS")
