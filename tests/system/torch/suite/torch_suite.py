#!/usr/bin/env python3
"""torch's own distributed test suite against collectived and gloo, side by side.

Runs the DistributedTest tests of torch/testing/_internal/distributed/distributed_test.py (torch
1.13, Debian's python3-torch) of the families in suite_lists.FAMILIES on both backends, on the
same tests in the same run, and prints per family passed/error/skipped for each. The assertion:
every test gloo passes, collectived passes too, except the tests of suite_lists.EXCEPTIONS (they
need another device or name gloo in their logic) and of suite_lists.PENDING (operations
collectived refuses today, each failing with an error, never a wrong value); the same lists,
with why, are in docs/torch-suite.md, which the run checks.

How: for each backend, --shards groups of --world-size long-lived ranks (suite_worker.py) split
the tests; collectived's ranks run under collective-launch, one simulated node (daemon) per
rank, gloo's as plain processes. The ranks connect to this process's Unix socket and run one
test at a time when told, all ranks of a group the same test. A test that gives no result
within --test-timeout seconds is an error (hang), and its group is started again for the rest.

Messages, JSON lines: a rank sends {"hello": {"backend", "group", "rank", "tests"}} (rank 0 with
every test name of the class), then {"result": name, "status", "detail"} per test; this process
sends {"run": name, "init": file store path} and {"quit": true}.

Exit status: 0 the assertion holds; 1 it does not (the report says which tests); 2 usage or
set-up error; 77 torch or the backend's extension cannot be imported (skipped).
"""

import argparse
import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from suite_lists import EXCEPTIONS, FAMILIES, PENDING, UNGATED  # noqa: E402

PYTHON = "/usr/bin/python3"
BACKENDS = ("collectived", "gloo")
STATUSES = ("passed", "error", "skipped")
RESTARTS = 3          # a group started again more often than this runs nothing more
SANITIZER_REPORT = re.compile(r"runtime error:|ERROR: (Address|Leak|UndefinedBehavior)Sanitizer")
SKIP = 77


def log(msg):
    sys.stdout.write("torch_suite: %s\n" % msg)
    sys.stdout.flush()


def family_of(name):
    for family, pattern in FAMILIES:
        if re.search(pattern, name):
            return family
    return None


def combine(results):
    """One test's outcome from its ranks' (status, detail): a wrong result or an error of any
    rank wins, then a skip, else passed."""
    for status in ("wrong result", "error", "skipped"):
        found = [d for s, d in results if s == status]
        if found:
            return status, max(found, key=lambda d: "barrier timeout" not in d)
    return "passed", ""


class Group:
    """The ranks of one backend that run one share of the tests, one test at a time."""

    def __init__(self, run, backend, index, tests):
        self.run, self.backend, self.index = run, backend, index
        self.name = "%s.%d" % (backend, index)
        self.todo = list(tests)
        self.dir = os.path.join(run.work, self.name)
        self.procs, self.conns, self.ranks = [], {}, {}
        self.current, self.results, self.deadline = None, [], 0.0
        self.restarts, self.started = 0, 0
        self.logf = None

    def env(self):
        env = dict(os.environ)
        for k in list(env):
            if k.startswith(("COLL_", "MASTER_", "TORCHELASTIC")) or k in ("RANK", "WORLD_SIZE"):
                del env[k]
        env.update(BACKEND=self.backend, WORLD_SIZE=str(self.run.args.world_size),
                   TEMP_DIR=self.dir, INIT_METHOD="file://" + self.shared_init(), TORCH_SUITE_SOCKET=self.run.sock_path,
                   TORCH_SUITE_GROUP=self.name, GLOO_SOCKET_IFNAME="lo",
                   PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
        build = self.run.args.build_dir
        env["PYTHONPATH"] = os.path.join(build, "python")
        return env

    def shared_init(self):
        """The file store of INIT_METHOD, which tests that start their own group use (torch's
        harness makes it anew for every test: here it is removed before each)."""
        return os.path.join(self.dir, "init_dir", "shared_init_file")

    def start(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        for sub in ("barrier", "test_dir", "init_dir"):
            os.makedirs(os.path.join(self.dir, sub))
        self.logf = open(os.path.join(self.run.work, self.name + ".log"), "ab")
        env, worker = self.env(), [PYTHON, os.path.join(HERE, "suite_worker.py")]
        argv_env = []
        if self.backend == "collectived":
            argv_env.append(([self.run.args.launch, "--nodes", str(self.run.args.world_size),
                              "--ranks-per-node", "1", "--daemon", self.run.args.daemon,
                              "--"] + worker, env))
        else:
            for rank in range(self.run.args.world_size):
                argv_env.append((worker, dict(env, RANK=str(rank), MASTER_ADDR="127.0.0.1")))
        self.procs = [subprocess.Popen(a, env=e, stdin=subprocess.DEVNULL, stdout=self.logf,
                                       stderr=subprocess.STDOUT, start_new_session=True)
                      for a, e in argv_env]
        self.started = time.monotonic()
        self.deadline = self.started + self.run.args.start_timeout

    def stop(self):
        for conn in list(self.conns.values()):
            self.run.forget(conn)
        self.conns, self.ranks = {}, {}
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs = []
        if self.logf:
            self.logf.close()
            self.logf = None
            self.say_sanitizer_reports()

    def say_sanitizer_reports(self):
        """Repeat the sanitizer reports of the group's log (UBSan writes them on stderr) on
        this process's output, where the sanitizer pass of CI looks for them."""
        with open(os.path.join(self.run.work, self.name + ".log"), errors="replace") as f:
            found = [l for l in f if SANITIZER_REPORT.search(l)]
        for line in found[:50]:
            sys.stdout.write("%s: %s" % (self.name, line))

    def log_tail(self, lines=30):
        with open(os.path.join(self.run.work, self.name + ".log"), errors="replace") as f:
            return "".join(f.readlines()[-lines:])

    def ready(self):
        return len(self.conns) == self.run.args.world_size and self.run.tests is not None

    def send_next(self):
        """Starts the next test on every rank; False when there is none."""
        if not self.todo:
            for conn in self.conns.values():
                self.run.send(conn, {"quit": True})
            return False
        self.current, self.results = self.todo.pop(0), []
        for name in os.listdir(os.path.join(self.dir, "barrier")):
            os.unlink(os.path.join(self.dir, "barrier", name))
        if os.path.exists(self.shared_init()):
            os.unlink(self.shared_init())
        if self.run.args.verbose:
            log("%s: %s" % (self.name, self.current))
        init = os.path.join(self.dir, "init_dir", self.current)
        for conn in self.conns.values():
            self.run.send(conn, {"run": self.current, "init": init})
        self.deadline = time.monotonic() + self.run.args.test_timeout
        return True

    def on_result(self, msg):
        self.results.append((msg["status"], msg["detail"]))
        if len(self.results) == self.run.args.world_size:
            self.run.record(self.backend, self.current, *combine(self.results))
            self.current = None
            return self.send_next()
        return True

    def on_timeout(self):
        """No hello or no result in time: the test (if any) is a hang; start again."""
        if self.current is not None:
            self.run.record(self.backend, self.current, "error",
                            "no result within %d s (hang)" % self.run.args.test_timeout)
            self.current = None
        else:
            log("%s: the ranks did not start within %d s:\n%s" % (
                self.name, self.run.args.start_timeout, self.log_tail()))
        self.stop()
        self.restarts += 1
        if self.restarts > RESTARTS or not self.todo:
            for name in self.todo:
                self.run.record(self.backend, name, "error", "not run: its group failed")
            self.todo = []
            return False
        self.start()
        return True


class Run:
    def __init__(self, args, work):
        self.args, self.work = args, work
        self.sel = selectors.DefaultSelector()
        self.sock_path = os.path.join(work, "suite.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.sock_path)
        self.listener.listen(64)
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        self.tests = None
        self.groups = []
        self.outcomes = {b: {} for b in BACKENDS}
        self.buffers = {}

    def send(self, conn, msg):
        conn.sendall((json.dumps(msg) + "\n").encode())

    def forget(self, conn):
        if self.buffers.pop(conn, None) is not None:
            self.sel.unregister(conn)
            conn.close()

    def record(self, backend, name, status, detail):
        self.outcomes[backend][name] = (status, detail)

    def select_tests(self, names):
        wanted = self.args.families.split(",") if self.args.families else None
        return [n for n in names if family_of(n) and (not wanted or family_of(n) in wanted)]

    def on_hello(self, conn, hello):
        if hello["tests"] and self.tests is None:
            self.tests = self.select_tests(hello["tests"])
            for g in self.groups:
                g.todo = self.tests[g.index::self.args.shards]
        group = next(g for g in self.groups if g.name == hello["group"])
        group.conns[hello["rank"]] = conn
        self.buffers[conn] = (group, b"")

    def on_readable(self, conn):
        group, buf = self.buffers.get(conn, (None, b""))
        data = conn.recv(65536)
        if not data:
            if group is not None and group in self.active and conn in group.conns.values():
                log("%s: a rank closed its connection:\n%s" % (group.name, group.log_tail()))
                group.deadline = 0.0
            if group is not None:
                group.conns = {r: c for r, c in group.conns.items() if c is not conn}
            self.forget(conn)
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            msg = json.loads(line)
            if "hello" in msg:
                self.on_hello(conn, msg["hello"])
                group = self.buffers[conn][0]
            elif "result" in msg and group is not None and group.current == msg["result"]:
                if not group.on_result(msg):
                    self.active.discard(group)
        if conn in self.buffers:
            self.buffers[conn] = (self.buffers[conn][0], buf)

    def loop(self):
        self.active = set(self.groups)
        while self.active:
            for key, _ in self.sel.select(0.2):
                if key.fileobj is self.listener:
                    conn, _ = self.listener.accept()
                    self.sel.register(conn, selectors.EVENT_READ, None)
                    self.buffers[conn] = (None, b"")
                else:
                    self.on_readable(key.fileobj)
            for g in list(self.active):
                if g.current is None and g.ready() and g.todo is not None:
                    if not g.send_next():
                        self.active.discard(g)
                elif time.monotonic() > g.deadline and not g.on_timeout():
                    self.active.discard(g)

    def execute(self):
        self.groups = [Group(self, b, i, []) for b in BACKENDS for i in range(self.args.shards)]
        for g in self.groups:
            g.todo = None
            g.start()
        try:
            self.loop()
        finally:
            for g in self.groups:
                g.stop()


def counts(outcomes, names):
    """{status: count} of @names among @outcomes (a wrong result counts as an error)."""
    c = dict.fromkeys(STATUSES, 0)
    for n in names:
        status = outcomes.get(n, ("error", ""))[0]
        c["error" if status == "wrong result" else status] += 1
    return c


def family_table(run):
    by_family = {}
    for name in run.tests:
        by_family.setdefault(family_of(name), []).append(name)
    rows = [("family", "tests", "collectived p/e/s", "gloo p/e/s")]
    for family, _ in FAMILIES:
        names = by_family.get(family, [])
        if not names:
            continue
        cells = ["%(passed)d/%(error)d/%(skipped)d" % counts(run.outcomes[b], names)
                 for b in BACKENDS]
        rows.append((family, str(len(names))) + tuple(cells))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def judge(run):
    """(problems, pending, excepted): the tests that break the assertion, with why; the
    pending ones that failed as expected; the exceptions that gloo passed."""
    problems, pending, excepted = [], [], []
    for name in run.tests:
        ours, detail = run.outcomes["collectived"].get(name, ("error", "not run"))
        theirs = run.outcomes["gloo"].get(name, ("error", "not run"))[0]
        if ours == "wrong result" and theirs == "passed":
            problems.append("%s: a wrong result where gloo passes: %s" % (name, detail))
        elif name in PENDING and (ours == "passed" or theirs != "passed"):
            problems.append("%s: listed as pending (%s) but collectived %s and gloo %s: take it "
                            "off suite_lists.PENDING and docs/torch-suite.md"
                            % (name, PENDING[name], ours, theirs))
        elif name in PENDING:
            pending.append("%s (%s): %s" % (name, PENDING[name], detail.splitlines()[-1]))
        elif name in EXCEPTIONS and theirs == "passed" and ours != "passed":
            excepted.append("%s: %s" % (name, EXCEPTIONS[name]))
        elif theirs == "passed" and ours != "passed":
            problems.append("%s: gloo passes, collectived %s: %s" % (name, ours, detail))
    return problems, pending, excepted


def listed_in_doc(path):
    """The test names of docs/torch-suite.md's tables: {name: {section, ...}} (the sections
    by the first word of their heading, lowercase)."""
    found, section = {}, None
    with open(path) as f:
        for line in f:
            if line.startswith("## "):
                section = line[3:].split()[0].lower()
            m = re.match(r"\|\s*`(test_\w+)`\s*\|", line)
            if m:
                found.setdefault(m.group(1), set()).add(section)
    return found


def check_doc(path):
    """Problems of the doc's tables against suite_lists: every test of UNGATED, EXCEPTIONS and
    PENDING under its heading, and no other."""
    doc = listed_in_doc(path)
    lists = {"ungated": UNGATED, "exceptions": EXCEPTIONS, "pending": PENDING}
    out = []
    for section, names in lists.items():
        for name in names:
            if section not in doc.get(name, ()):
                out.append("%s is in suite_lists.%s but not under '## %s' in %s"
                           % (name, section.upper(), section.capitalize(), path))
    for name, sections in doc.items():
        for section in sections:
            if name not in lists.get(section, {}):
                out.append("%s is listed under '## %s' in %s but not in suite_lists"
                           % (name, section, path))
    return out


def report(run, elapsed):
    print("\n".join(family_table(run)))
    problems, pending, excepted = judge(run)
    print("(%d tests, world size %d, %d group(s) per backend, %.0f s; p/e/s: passed, error, "
          "skipped)" % (len(run.tests), run.args.world_size, run.args.shards, elapsed))
    for title, items in (("exceptions (gloo passes; the test needs another device or names "
                          "gloo)", excepted),
                         ("pending (an operation collectived refuses today)", pending),
                         ("PROBLEMS", problems)):
        if items:
            print("%s, %d:" % (title, len(items)))
            for item in items:
                print("  " + item)
    if run.args.verbose:
        for b in BACKENDS:
            for name in run.tests:
                status, detail = run.outcomes[b].get(name, ("error", "not run"))
                print("%s %s %s %s" % (b, status, name, detail.splitlines()[-1] if detail else ""))
    if run.args.json:
        with open(run.args.json, "w") as f:
            json.dump({b: run.outcomes[b] for b in BACKENDS}, f, indent=1, sort_keys=True)
    return problems


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--daemon", required=True, help="collectived")
    p.add_argument("--launch", required=True, help="collective-launch")
    p.add_argument("--build-dir", required=True, help="the build (its python/ package)")
    p.add_argument("--doc", required=True, help="docs/torch-suite.md, checked against the lists")
    p.add_argument("--world-size", type=int, default=3,
                   help="ranks per group (3: the tests that need more than 2 run too)")
    p.add_argument("--shards", type=int, default=2, help="groups per backend run at once")
    p.add_argument("--families", help="a comma-separated subset of the families")
    p.add_argument("--test-timeout", type=int, default=90, help="seconds per test")
    p.add_argument("--start-timeout", type=int, default=240, help="seconds for ranks to start")
    p.add_argument("--json", help="write every test's outcome per backend here")
    p.add_argument("--verbose", action="store_true", help="one line per test and backend")
    return p.parse_args()


def main():
    args = parse_args()
    problems = check_doc(args.doc)
    probe = subprocess.run([PYTHON, "-c", "import collective.torch_backend"],
                           capture_output=True, text=True, env=dict(
                               os.environ, PYTHONPATH=os.path.join(args.build_dir, "python")))
    if probe.returncode != 0:
        log("SKIP: torch or the collectived backend cannot be imported: %s"
            % probe.stderr.strip()[-300:])
        return SKIP
    work = tempfile.mkdtemp(prefix="torch-suite-", dir=os.environ.get("TMPDIR", "/tmp"))
    start = time.monotonic()
    try:
        run = Run(args, work)
        run.execute()
        if run.tests is None:
            log("no rank started: see the logs above")
            return 2
        problems += report(run, time.monotonic() - start)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if problems:
        log("FAIL: %d problem(s) (above)" % len(problems))
        return 1
    log("PASS: collectived passes every test gloo passes, but for the listed ones")
    return 0


if __name__ == "__main__":
    sys.exit(main())
