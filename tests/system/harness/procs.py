"""The processes of a system test: a daemon, a rank, and a process whose output lines are timed.

Daemons and ranks start as collective-launch starts its children (tools/launch/children.py): each
leads its own process group and gets SIGTERM when the test process dies, even by SIGKILL, so
that none outlives the test; stop() signals the whole group.
"""

import json
import os
import re
import signal
import subprocess
import threading
import time

from launch.children import child_setup
from launch.daemon import read_addr

from .basics import TestFailure, clean_env, log, node_secret, wait_until
from .status_server import http_get

SUN_PATH_MAX = 107  # sockaddr_un.sun_path is 108 bytes with the terminating NUL
PYTHON = "/usr/bin/python3"  # Debian's interpreter: it has numpy and torch

# "<HH:MM:SS.us> collectived[pid] <level> <subsystem>: <text>"
LOG_LINE = re.compile(r"^(\d\d):(\d\d):(\d\d\.\d+) collectived\[(\d+)\] (\w+) (\w+): (.*)$")


class Proc:
    """A child process, leader of its own process group, its output in files (@err_path None:
    stderr goes to @out_path too); @stdin_pipe keeps its standard input open until release()."""

    def __init__(self, label, argv, env, out_path, err_path=None, stdin_pipe=False, cwd=None):
        self.label = label
        self.out_path = out_path
        self.err_path = err_path or out_path
        out = open(out_path, "wb")
        err = open(err_path, "wb") if err_path not in (None, out_path) else None
        try:
            self.popen = subprocess.Popen(
                argv, env=env, cwd=cwd, stdout=out,
                stderr=err if err is not None else subprocess.STDOUT,
                stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
                start_new_session=True, preexec_fn=child_setup)
        finally:
            out.close()
            if err is not None:
                err.close()
        self.pid = self.popen.pid

    def alive(self):
        return self.popen.poll() is None

    def signal(self, sig):
        """Send @sig to its process group."""
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

    def wait(self, timeout):
        """Its exit code; a process still running after @timeout seconds fails the test."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TestFailure("%s did not finish within %.0f s:\n%s"
                              % (self.label, timeout, self.text()[-3000:]))

    def stop(self, grace=10.0):
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

    def kill(self):
        """SIGKILL to its process group, at once."""
        self.release()
        self.signal(signal.SIGKILL)
        return self.popen.wait()

    def text(self, which="out"):
        path = self.out_path if which == "out" else self.err_path
        try:
            with open(path, "r", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""


class Daemon(Proc):
    """One collectived in <work>/<name>/ (its client socket collectived.sock, status socket
    status.sock, addr file control.addr and log daemon.log there), with --config none so that a
    configuration file of the test machine changes nothing. With @peers it listens at @listen
    for peers with a node secret: @secret, else <work>/peer.secret (made on first use, shared by
    the daemons of one work directory); without, it has neither (single-node jobs only).
    @extra: more arguments; @wrap: a command that runs it (setpriv, ip netns exec ...)."""

    def __init__(self, binary, work, name, extra=(), env=None, wrap=(), secret=None, peers=True,
                 listen="127.0.0.1:0", node=0):
        self.node = node
        self.name = name
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        self.sock = os.path.join(self.dir, "collectived.sock")
        self.status_sock = os.path.join(self.dir, "status.sock")
        self.addr_file = os.path.join(self.dir, "control.addr")
        self.log_path = os.path.join(self.dir, "daemon.log")
        if len(self.sock) > SUN_PATH_MAX:
            raise TestFailure("socket path too long; set TMPDIR to a shorter directory")
        self.peers = peers
        self.addr = None
        self.exit_code = None
        argv = [os.path.abspath(binary), "--config", "none", "--socket", self.sock]
        if peers:
            argv += ["--listen", listen,
                     "--peer-secret-file", secret or node_secret(os.path.join(work,
                                                                              "peer.secret")),
                     "--addr-file", self.addr_file]
        super().__init__("%s collectived" % name, list(wrap) + argv + list(extra),
                         env if env is not None else clean_env(), self.log_path, cwd=self.dir)

    def wait_ready(self, timeout=20.0):
        """Wait until it is up: its control address written (with peers), else its "ready on"
        line; returns self."""
        seen = {}

        def ready():
            if not self.alive():
                raise TestFailure("%s exited with %s before it was ready:\n%s"
                                  % (self.label, self.popen.returncode, self.text()[-3000:]))
            if not self.peers:
                return "none" if "ready on" in self.text() else None
            return read_addr(self.addr_file, seen)
        self.addr = wait_until(ready, timeout, "%s to be ready" % self.name)
        return self

    def status(self, timeout=3.0):
        """The /status document; raises TestFailure when the daemon does not answer."""
        try:
            code, body = http_get(self.status_sock, "/status", timeout)
        except OSError as e:
            raise TestFailure("%s: GET /status failed: %s" % (self.name, e))
        if code != 200:
            raise TestFailure("%s: GET /status answered %d" % (self.name, code))
        return json.loads(body)

    def job(self, job_id):
        """The /status entry of @job_id, or None."""
        for j in self.status().get("jobs", []):
            if j.get("id") == job_id:
                return j
        return None

    def log(self):
        """Its log so far."""
        return self.text()

    def log_lines(self):
        """Parsed log lines: (seconds of the day, level, subsystem, text)."""
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
    """A rank of a job (@local: its local rank on @node); its stdout lines are events
    'KIND key=value ... msg=rest' for the programs that print them."""

    def __init__(self, rank, node, argv, env, out_path, err_path=None, local=0,
                 stdin_pipe=True):
        self.rank = rank
        self.node = node
        self.local = local
        super().__init__("rank %d (node %d)" % (rank, node), argv, env, out_path, err_path,
                         stdin_pipe)

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


class Timed:
    """A process whose output lines are kept with the time (s since start) each arrived."""

    def __init__(self, argv, env, stdin=subprocess.DEVNULL):
        self.start = time.monotonic()
        self.lines = []
        self.proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=env)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            self.lines.append((time.monotonic() - self.start, raw.decode(errors="replace")))

    def wait(self, timeout):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise TestFailure("%s did not finish within %.0f s:\n%s"
                              % (self.proc.args[0], timeout, self.text()))
        self._reader.join(10)
        self.elapsed = time.monotonic() - self.start
        return rc

    def text(self):
        return "".join(l for _, l in self.lines)

    def first(self, needle):
        """(time, line) of the first line containing @needle, or None."""
        return next(((t, l) for t, l in self.lines if needle in l), None)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def python_env(args, extra=None):
    """clean_env() with the build's Python package (args.build_dir/python) on the path."""
    env = clean_env()
    env["PYTHONPATH"] = os.path.join(args.build_dir, "python")
    env.update(extra or {})
    return env
