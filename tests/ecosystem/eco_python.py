#!/usr/bin/env python3
"""Ecosystem tests of the Python package (ctest label ecosystem): `eco_python.py NAME ...`.

  python_timeline  a Python rank's COLL_TIMELINE file holds its events while it runs (flushed
                   every second, with no event to trigger a write) and after it exits with pool
                   arrays still alive (flushed at exit); spans of its own appear, from
                   comm.span() and comm.timeline_span()
"""

import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ecolib  # noqa: E402
from ecolib import TestFailure, expect, log, opslib  # noqa: E402

RANK = r"""
import sys, time
import collective
comm = collective.Communicator()
assert comm.timeline_enabled
x = comm.zeros(1000)
for i in range(3):
    comm.allreduce(x).result(timeout=30)
with comm.span("step", "forward"):
    time.sleep(0.01)
now = time.monotonic_ns()
comm.timeline_span("step", "backward", now, now + 1000)
try:
    comm.timeline_span("step", "bad", now, now - 1)
    print("NO ERROR")
except ValueError:
    pass
print("WAIT", flush=True)
sys.stdin.readline()
comm.allreduce(x).result(timeout=30)
print("EXIT", flush=True)
# Exits with x alive: the communicator is never destroyed.
"""


def events(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise TestFailure("%s is not a complete trace: %s" % (path, e))
    evs = doc["traceEvents"]
    allreduces = [e for e in evs if e.get("ph") == "X" and e.get("cat") == "allreduce"]
    spans = {e["name"] for e in evs if e.get("ph") == "X" and e.get("cat") == "span"}
    return len(allreduces), spans


def test_python_timeline(args, work):
    d = opslib.Daemon(args.daemon, work, "d").wait_ready()
    tl = os.path.join(work, "tl") + "/"
    env = ecolib.python_env(args, {"COLL_SOCKET": d.socket, "COLL_JOB": "tl", "COLL_RANK": "0",
                                   "COLL_WORLD_SIZE": "1", "COLL_LOCAL_RANK": "0",
                                   "COLL_LOCAL_SIZE": "1", "COLL_TIMELINE": tl})
    p = subprocess.Popen([ecolib.PYTHON, "-c", RANK], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        line = p.stdout.readline().decode()
        if line.strip() != "WAIT":
            raise TestFailure("the rank says %r:\n%s" % (line, p.stdout.read().decode()))
        time.sleep(2.0)  # the timer's period is 1 s; no event comes meanwhile
        n, spans = events(os.path.join(tl, "rank0.json"))
        log("while running: %d allreduces, spans %s" % (n, sorted(spans)))
        expect(n == 3, "%d allreduces in the file while the rank runs, not 3" % n)
        expect({"forward", "backward"} <= spans and "bad" not in spans, "spans %s" % spans)
        out, _ = p.communicate(b"\n", timeout=60)
        expect(p.returncode == 0 and b"EXIT" in out and b"NO ERROR" not in out,
               "the rank exited with %d:\n%s" % (p.returncode, out.decode()))
        n, _ = events(os.path.join(tl, "rank0.json"))
        expect(n == 4, "%d allreduces in the file after exit, not 4" % n)
    finally:
        if p.poll() is None:
            p.kill()
        d.kill()


TESTS = {name[len("test_"):]: fn for name, fn in globals().items() if name.startswith("test_")}

if __name__ == "__main__":
    opslib.main(TESTS, ecolib.parser(__doc__, TESTS))
