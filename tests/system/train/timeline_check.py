#!/usr/bin/env python3
"""Timeline: coll-train on 4 ranks over 2 daemons with COLL_TIMELINE=<dir>/tl-%r.json writes one
Chrome trace per rank, and tools/coll-timeline renders them to a PNG.

Checks, on the files of a real run (784-300-200-100-10, three buckets, 8 steps):
  - one file per rank, each a JSON object whose traceEvents array holds: per step and bucket one
    allreduce event on the rank's track "grads bucket <b>" (8 x 3), with the bucket, iteration,
    bytes and algorithm in its args; phase events ("wait local ranks", "reduce", "complete", and
    "wait other nodes" / "distribute" on the ring) each inside the [ts, ts + dur] of an
    allreduce on the same track; inside each allreduce exactly its algorithm's steps on 2 nodes
    ("reduce-scatter step 1/1", "all-gather step 1/1"; "round 1/1"; none for "shm+rd" and
    "shm+ring"), one after the other; the spans forward, backward, optimizer and "grads wait_all"
    on the track "step"; metadata naming the process "rank <r>";
  - a run stopped by SIGTERM in the middle (no coll_comm_destroy) leaves files that still parse
    and hold the events written until then;
  - coll-timeline -o out.png draws them: a PNG (signature, IHDR of a sensible size, more than
    20 KB); --merge gives one JSON file with the events of all ranks; --summary prints a line
    per rank counting each collective once (not its phases or steps) and the steps by kind.
Skips (77, saying why) when Fashion-MNIST or matplotlib is missing.
"""

import glob
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness  # noqa: E402
from harness import TestFailure  # noqa: E402

STEPS = 8
BUCKETS = 3
TRAIN_ARGS = ["--hidden", "300,200,100", "--bucket-cap-mb", "0.1", "--first-bucket-cap-mb",
              "0.01"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def launch_cmd(args, pattern, extra):
    return [args.launcher, "--nodes", "2", "--ranks-per-node", "2", "--daemon", args.daemon,
            "--timeout", str(int(args.timeout)), "--", "env", "COLL_TIMELINE=" + pattern,
            args.train] + TRAIN_ARGS + extra


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except ValueError as e:
        with open(path, "rb") as f:
            data = f.read()
        raise TestFailure("%s (%d bytes) is not JSON: %s; it ends with %r"
                          % (path, len(data), e, data[-300:]))
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TestFailure("%s: no traceEvents array" % path)
    return doc


def track_names(events):
    return {e["tid"]: e["args"]["name"] for e in events
            if e.get("ph") == "M" and e.get("name") == "thread_name"}


def check_allreduces(path, events, tracks, steps):
    colls = [e for e in events if e.get("ph") == "X" and e.get("cat") == "allreduce" and
             tracks.get(e["tid"], "").startswith("grads bucket ")]
    if len(colls) != steps * BUCKETS:
        raise TestFailure("%s: %d bucket allreduces, expected %d steps x %d buckets"
                          % (path, len(colls), steps, BUCKETS))
    seen = {(e["args"]["iteration"], e["args"]["bucket"]) for e in colls}
    want = {(i, b) for i in range(steps) for b in range(BUCKETS)}
    if seen != want:
        raise TestFailure("%s: (iteration, bucket) pairs %s, expected %s"
                          % (path, sorted(seen), sorted(want)))
    for e in colls:
        a = e["args"]
        if tracks[e["tid"]] != "grads bucket %d" % a["bucket"] or a["bytes"] <= 0 or \
                a["algo"] not in STEP_NAMES or a["op"] != "avg":
            raise TestFailure("%s: unexpected allreduce event %s" % (path, e))
    return colls


def check_phases(path, events, colls):
    by_tid = {}
    for c in colls:
        by_tid.setdefault(c["tid"], []).append((float(c["ts"]), float(c["ts"]) + float(c["dur"])))
    phases = [e for e in events if e.get("ph") == "X" and e.get("cat") == "phase"]
    names = {e["name"] for e in phases}
    need = {"wait local ranks", "reduce", "complete", "wait other nodes", "distribute"}
    if not need <= names:
        raise TestFailure("%s: phases %s, expected at least %s" % (path, sorted(names),
                                                                     sorted(need)))
    for p in phases:
        if p["tid"] not in by_tid:
            continue  # a phase of another collective (the loss allreduce, ...)
        t0, t1 = float(p["ts"]), float(p["ts"]) + float(p["dur"])
        if not any(b - 0.002 <= t0 and t1 <= e + 0.002 for b, e in by_tid[p["tid"]]):
            raise TestFailure("%s: phase %s [%s, %s] is inside no allreduce of its track"
                              % (path, p["name"], t0, t1))


# The algorithm's steps on 2 nodes (coll_req_steps()): the ring's one reduce-scatter and one
# all-gather step, recursive doubling's one round; none for the allreduces the local ranks
# reduce and distribute in shared memory around the daemons' algorithm ("shm+rd", "shm+ring":
# the daemons' steps are not handed to the ranks), whose phases the timeline still shows.
STEP_NAMES = {"ring": ["reduce-scatter step 1/1", "all-gather step 1/1"], "rd": ["round 1/1"],
              "shm+ring": [], "shm+rd": []}


def check_steps(path, events, colls):
    """Every bucket allreduce holds exactly its algorithm's step events, in order, each inside
    it and each beginning no earlier than the previous one ended."""
    steps = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "step":
            steps.setdefault(e["tid"], []).append(e)
    for c in colls:
        t0, t1 = float(c["ts"]), float(c["ts"]) + float(c["dur"])
        inside = sorted((e for e in steps.get(c["tid"], []) if
                         t0 - 0.002 <= float(e["ts"]) and
                         float(e["ts"]) + float(e["dur"]) <= t1 + 0.002),
                        key=lambda e: float(e["ts"]))
        names = [e["name"] for e in inside]
        if names != STEP_NAMES[c["args"]["algo"]]:
            raise TestFailure("%s: allreduce %s (%s) holds steps %s, expected %s"
                              % (path, c["name"], c["args"]["algo"], names,
                                 STEP_NAMES[c["args"]["algo"]]))
        for a, b in zip(inside, inside[1:]):
            if float(b["ts"]) + 0.002 < float(a["ts"]) + float(a["dur"]):
                raise TestFailure("%s: step %s begins before %s ended" % (path, b, a))


def check_spans(path, events, tracks, steps):
    for name, want in (("forward", steps), ("backward", steps), ("optimizer", steps),
                       ("grads wait_all", steps)):
        n = sum(1 for e in events if e.get("ph") == "X" and e.get("name") == name and
                tracks.get(e["tid"]) == "step")
        if n != want:
            raise TestFailure("%s: %d '%s' spans on track 'step', expected %d"
                              % (path, n, name, want))


def check_files(tmp, steps):
    files = sorted(glob.glob(os.path.join(tmp, "tl-*.json")))
    if [os.path.basename(f) for f in files] != ["tl-%d.json" % r for r in range(4)]:
        raise TestFailure("timeline files %s, expected tl-0.json .. tl-3.json" % files)
    for rank, path in enumerate(files):
        doc = load(path)
        events = doc["traceEvents"]
        if doc.get("otherData", {}).get("rank") != rank or not any(
                e.get("name") == "process_name" and e["args"]["name"] == "rank %d" % rank
                for e in events):
            raise TestFailure("%s: not marked as rank %d" % (path, rank))
        tracks = track_names(events)
        colls = check_allreduces(path, events, tracks, steps)
        check_phases(path, events, colls)
        check_steps(path, events, colls)
        check_spans(path, events, tracks, steps)
        harness.log("%s: %d events, %d bucket allreduces, tracks %s"
                    % (os.path.basename(path), len(events), len(colls),
                       ", ".join(sorted(set(tracks.values())))))
    return files


def run_complete(args, tmp):
    rc, text = harness.run(launch_cmd(args, os.path.join(tmp, "tl-%r.json"),
                                      ["--steps", str(STEPS)]), args.timeout + 30,
                           env=harness.launch_env(), check=False)
    lines = text.splitlines()
    if rc != 0:
        raise TestFailure("collective-launch exited with %d" % rc)
    harness.check_no_warnings(lines)
    return check_files(tmp, STEPS)


def bucket_events(path):
    try:
        with open(path) as f:
            return sum(1 for e in json.load(f)["traceEvents"] if e.get("cat") == "allreduce")
    except (OSError, ValueError, KeyError):
        return -1


def run_interrupted(args, tmp):
    """Stop a long run with SIGTERM once every rank wrote some events; the files must parse."""
    cmd = launch_cmd(args, os.path.join(tmp, "cut-%r.json"), ["--epochs", "50"])
    harness.log("running (to be interrupted): %s" % " ".join(cmd))
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=harness.launch_env())
    paths = [os.path.join(tmp, "cut-%d.json" % r) for r in range(4)]
    deadline = time.monotonic() + 60
    try:
        while not all(bucket_events(f) > 0 for f in paths):
            if time.monotonic() > deadline or p.poll() is not None:
                raise TestFailure("the interrupted run wrote no events within 60 s")
            time.sleep(0.5)
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for path in paths:
        n = sum(1 for e in load(path)["traceEvents"] if e.get("cat") == "allreduce")
        harness.log("%s after SIGTERM: valid JSON, %d allreduce events" % (os.path.basename(path),
                                                                          n))


def check_png(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != PNG_SIGNATURE or data[12:16] != b"IHDR":
        raise TestFailure("%s is not a PNG" % path)
    width, height = struct.unpack(">II", data[16:24])
    harness.log("%s: %d bytes, %d x %d" % (path, len(data), width, height))
    if len(data) < 20000 or width < 800 or height < 300:
        raise TestFailure("%s: %d bytes, %d x %d: too small for a chart of 4 ranks"
                          % (path, len(data), width, height))


def render(args, tmp, files):
    out = os.path.join(tmp, "timeline.png")
    rc, _ = harness.run([args.render, "-o", out] + files, args.timeout, check=False)
    if rc != 0:
        raise TestFailure("coll-timeline exited with %d" % rc)
    check_png(out)
    merged = os.path.join(tmp, "merged.json")
    rc, _ = harness.run([args.render, "--merge", merged] + files, args.timeout, check=False)
    pids = {e.get("pid") for e in load(merged)["traceEvents"]} if rc == 0 else set()
    if pids != {0, 1, 2, 3}:
        raise TestFailure("coll-timeline --merge: exit %d, pids %s" % (rc, sorted(pids)))
    rc, text = harness.run([args.render, "--summary"] + files, args.timeout, check=False)
    lines = text.splitlines()
    ranks = [l for l in lines if l.startswith("rank ")]
    if rc != 0 or len(ranks) != 4:
        raise TestFailure("coll-timeline --summary: exit %d, %d rank lines" % (rc, len(lines)))
    # Every collective counted once: steps and phases are not collectives.
    for rank, (path, line) in enumerate(zip(files, sorted(ranks))):
        want = sum(1 for e in load(path)["traceEvents"] if e.get("ph") == "X" and
                   e.get("cat") not in ("phase", "span", "step"))
        m = re.search(r"\bcollective (\d+) x", line)
        if m is None or int(m.group(1)) != want or "reduce-scatter step" not in line:
            raise TestFailure("coll-timeline --summary for rank %d: '%s', expected %d "
                              "collectives and the reduce-scatter steps" % (rank, line, want))


def main():
    p = harness.launch_parser(__doc__.splitlines()[0])
    p.add_argument("--train", required=True, help="coll-train binary")
    p.add_argument("--render", required=True, help="tools/coll-timeline")
    args = p.parse_args()
    harness.dataset_or_skip()
    with open(args.render) as f:
        interpreter = f.readline()[2:].split()  # coll-timeline's #! line: /usr/bin/python3
    if subprocess.run(interpreter + ["-c", "import matplotlib"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        harness.log("SKIP: %s cannot import matplotlib (Debian python3-matplotlib, see "
                    "deploy/install-deps.sh), so coll-timeline cannot draw" % interpreter[0])
        sys.exit(harness.SKIP)
    with tempfile.TemporaryDirectory(prefix="coll-timeline-") as tmp:
        harness.main(lambda: (render(args, tmp, run_complete(args, tmp)),
                              run_interrupted(args, tmp)))


if __name__ == "__main__":
    main()
