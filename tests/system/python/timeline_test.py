#!/usr/bin/env python3
"""Timelines of the Python package (ctest label ecosystem): `timeline_test.py NAME ...`.

  python_timeline  a Python rank's COLL_TIMELINE file holds its events while it runs (flushed
                   every second, with no event to trigger a write) and after it exits with pool
                   arrays still alive (flushed at exit); spans of its own appear, from
                   comm.span() and comm.timeline_span()
  python_ddp_timeline  a DDP model with collective.ddp.register: the timeline has a forward and
                   a backward span per iteration (backward after forward, the buckets'
                   allreduces after the backward began), and coll-timeline's PNG legend names
                   exactly the kinds of bar drawn (no wait_all, which DDP has not)
"""

import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import TestFailure, check, log  # noqa: E402

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


DDP_RANK = r"""
import torch, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
import collective, collective.ddp
comm = collective.Communicator()
collective.ddp.init_process_group(comm)
model = DDP(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)))
state = collective.ddp.register(model, comm)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(3):
    opt.zero_grad()
    model(torch.randn(32, 64)).sum().backward()
    opt.step()
comm.timeline_flush()
print("DONE", state.iterations, flush=True)
"""


def spans_of(path):
    """{name: [(begin_us, end_us)]} of the spans, and the allreduces' (begin, end), in order."""
    with open(path) as f:
        evs = json.load(f)["traceEvents"]
    spans = {}
    for e in evs:
        if e.get("ph") == "X" and e.get("cat") == "span":
            spans.setdefault(e["name"], []).append((e["ts"], e["ts"] + e["dur"]))
    ops = [(e["ts"], e["ts"] + e["dur"]) for e in evs
           if e.get("ph") == "X" and e.get("cat") == "allreduce"]
    return {k: sorted(v) for k, v in spans.items()}, sorted(ops)


def test_python_ddp_timeline(args, work):
    d = h.Daemon(args.daemon, work, "d").wait_ready()
    tl = os.path.join(work, "tl") + "/"
    env = h.python_env(args, {"COLL_SOCKET": d.sock, "COLL_JOB": "ddptl",
                              "COLL_RANK": "0", "COLL_WORLD_SIZE": "1",
                              "COLL_LOCAL_RANK": "0", "COLL_LOCAL_SIZE": "1",
                              "COLL_TIMELINE": tl, "GLOO_SOCKET_IFNAME": "lo"})
    try:
        rc, out = h.run([h.PYTHON, "-c", DDP_RANK], env=env, timeout=120,
                        check=False)
    finally:
        d.kill()
    check(rc == 0 and "DONE 3" in out, "the DDP rank (%d):\n%s" % (rc, out))
    trace = os.path.join(tl, "rank0.json")
    spans, ops = spans_of(trace)
    check(len(spans.get("forward", [])) == 3 and len(spans.get("backward", [])) == 3,
          "forward and backward spans: %s" % {k: len(v) for k, v in spans.items()})
    for (f0, f1), (b0, b1) in zip(spans["forward"], spans["backward"]):
        check(f1 <= b0 <= b1, "a backward span %s not after its forward %s" % ((b0, b1),
                                                                                (f0, f1)))
    check(ops and all(any(b0 <= o0 for b0, _ in spans["backward"]) for o0, _ in ops),
          "an allreduce began before any backward")
    png = os.path.join(work, "ddp.png")
    rc, out = h.run([os.path.join(args.build_dir, "tools", "coll-timeline"), "-o", png,
                     trace], timeout=120, check=False)
    legend = out.split("legend: ", 1)[-1].split(")")[0].split(", ")
    check(rc == 0 and "forward" in legend and "backward" in legend and
          "wait_all (exposed)" not in legend and "collective" in legend,
          "coll-timeline (%d), legend %s:\n%s" % (rc, legend, out))


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
    d = h.Daemon(args.daemon, work, "d").wait_ready()
    tl = os.path.join(work, "tl") + "/"
    env = h.python_env(args, {"COLL_SOCKET": d.sock, "COLL_JOB": "tl", "COLL_RANK": "0",
                              "COLL_WORLD_SIZE": "1", "COLL_LOCAL_RANK": "0",
                              "COLL_LOCAL_SIZE": "1", "COLL_TIMELINE": tl})
    p = subprocess.Popen([h.PYTHON, "-c", RANK], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        line = p.stdout.readline().decode()
        if line.strip() != "WAIT":
            raise TestFailure("the rank says %r:\n%s" % (line, p.stdout.read().decode()))
        time.sleep(2.0)  # the timer's period is 1 s; no event comes meanwhile
        n, spans = events(os.path.join(tl, "rank0.json"))
        log("while running: %d allreduces, spans %s" % (n, sorted(spans)))
        check(n == 3, "%d allreduces in the file while the rank runs, not 3" % n)
        check({"forward", "backward"} <= spans and "bad" not in spans, "spans %s" % spans)
        out, _ = p.communicate(b"\n", timeout=60)
        check(p.returncode == 0 and b"EXIT" in out and b"NO ERROR" not in out,
              "the rank exited with %d:\n%s" % (p.returncode, out.decode()))
        n, _ = events(os.path.join(tl, "rank0.json"))
        check(n == 4, "%d allreduces in the file after exit, not 4" % n)
    finally:
        if p.poll() is None:
            p.kill()
        d.kill()


TESTS = {name[len("test_"):]: fn for name, fn in globals().items() if name.startswith("test_")}

if __name__ == "__main__":
    h.main(lambda args, work: TESTS[args.test](args, work), h.named_parser(__doc__, TESTS))
