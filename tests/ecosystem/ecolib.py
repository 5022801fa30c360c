"""Helpers of the ecosystem tests (issue 16), over those of the operations tests (opslib):
the command line every script takes, processes whose output lines are time-stamped as they
come, and the Python package's interpreter (Debian's, which has numpy and torch).
"""

import argparse
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ops"))
import opslib  # noqa: E402,F401  (re-exported for the scripts)
from opslib import Skip, TestFailure, log  # noqa: E402,F401  (re-exported)

PYTHON = "/usr/bin/python3"


def expect(cond, msg):
    if not cond:
        raise TestFailure(msg)


def parser(doc, tests):
    """The arguments of every ecosystem script: the test's name and the build's programs."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("test", choices=sorted(tests))
    p.add_argument("--daemon", required=True)
    p.add_argument("--rank", required=True, help="ops_rank binary")
    p.add_argument("--source-dir", required=True)
    p.add_argument("--build-dir", required=True)
    p.add_argument("--sanitize", default="",
                   help="the build's COLL_SANITIZE: programs built here against it need it too")
    return p


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
    """The test environment with the build's Python package on the path."""
    env = opslib.test_env()
    env["PYTHONPATH"] = os.path.join(args.build_dir, "python")
    env.update(extra or {})
    return env
