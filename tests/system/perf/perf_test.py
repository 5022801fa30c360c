#!/usr/bin/env python3
"""coll-perf as operators run it (ctest label ecosystem): `perf_test.py NAME ...`.

  perf_single_rank  coll-perf started alone (no launcher, only COLL_SOCKET) takes nccl-tests'
                    flags (-b -e -f -g -t -n -w -c -o -d -r -a -T -J), and prints out of place
                    and in place side by side, every size checked correct
  perf_datatypes    nccl-tests' datatype names are accepted and shown; those collectived lacks
                    are refused with a reason
  perf_two_nodes    a broadcast from rank 3 over 2 nodes x 2 ranks through the launcher: both
                    placements correct, the root shown
"""

import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import check  # noqa: E402


def perf(args):
    return os.path.join(args.build_dir, "bench", "coll-perf")


def rows(out):
    """The table's rows: lists of 15 fields (size, count, type, redop, root, then time, algbw,
    busbw, algo, #wrong out of place and in place)."""
    found = []
    for line in out.splitlines():
        line = line.split("] ", 1)[1] if line.startswith("[r") else line
        p = line.split()
        if p and p[0].isdigit():
            check(len(p) == 15, "a row of %d fields: %r" % (len(p), line))
            found.append(p)
    return found


def run_alone(args, d, *flags, must_pass=True):
    env = dict(h.clean_env(), COLL_SOCKET=d.sock)
    rc, out = h.run([perf(args)] + list(flags), env=env, check=False, timeout=120)
    if must_pass:
        check(rc == 0, "coll-perf %s exited with %d:\n%s" % (" ".join(flags), rc, out))
    return rc, out


def test_perf_single_rank(args, work):
    d = h.Daemon(args.daemon, work, "d").wait_ready()
    js = os.path.join(work, "r.json")
    try:
        _, out = run_alone(args, d, "-b", "8", "-e", "1K", "-f", "4", "-g", "1", "-t", "1",
                           "-n", "3", "-w", "1", "-c", "1", "-o", "max", "-d", "int32", "-r",
                           "0", "-a", "3", "-T", "60", "-J", js)
        check("out-of-place" in out and "in-place" in out, "no placement headers:\n" + out)
        got = rows(out)
        check([int(p[0]) for p in got] == [8, 32, 128, 512], "sizes %s" % [p[0] for p in got])
        for p in got:
            check(p[2:4] == ["int32", "max"], "type and redop %s" % p[2:4])
            check(p[9] == "0" and p[14] == "0", "#wrong of a row: %s" % p)
        check("# #wrong total: 0 (all sizes correct)" in out, out)
        with open(js) as f:
            doc = json.load(f)
        check(doc["world"] == 1 and doc["average"] == 3, "JSON header %s" % doc)
        for r in doc["rows"]:
            for place in ("out_of_place", "in_place"):
                res = r[place]
                check(abs(res["time_us"] - max(res["rank_time_us"])) < 1e-2,
                      "-a 3 shows %s, not the max of %s" % (res["time_us"],
                                                             res["rank_time_us"]))
        check("job coll-perf-" in d.log(), "not a job of its own:\n" + d.log())
    finally:
        d.kill()


NAMES = {"float": "float", "float32": "float", "double": "double", "float64": "double",
         "half": "half", "float16": "half", "bfloat16": "bfloat16", "int8": "int8",
         "char": "int8", "uint8": "uint8", "int32": "int32", "int": "int32", "int64": "int64"}


def test_perf_datatypes(args, work):
    d = h.Daemon(args.daemon, work, "d").wait_ready()
    try:
        for name, shown in NAMES.items():
            _, out = run_alone(args, d, "-b", "64", "-e", "64", "-n", "1", "-w", "0", "-d",
                               name, "-o", "sum")
            got = rows(out)
            check(len(got) == 1 and got[0][2] == shown and got[0][9] == "0" and
                  got[0][14] == "0", "-d %s: %s" % (name, got))
        for name in ("uint32", "uint64", "f8e4m3"):
            rc, out = run_alone(args, d, "-d", name, must_pass=False)
            check(rc == 2 and "collectived has no such datatype" in out,
                  "-d %s: %d %s" % (name, rc, out))
        rc, out = run_alone(args, d, "-g", "2", must_pass=False)
        check(rc == 2 and "one rank per process" in out, "-g 2: %s" % out)
    finally:
        d.kill()


def test_perf_two_nodes(args, work):
    launch = os.path.join(args.build_dir, "tools", "collective-launch")
    rc, out = h.run([launch, "--nodes", "2", "--ranks-per-node", "2", "--daemon",
                     args.daemon, "--timeout", "150", "--", perf(args), "--collective",
                     "broadcast", "-r", "3", "-d", "half", "-b", "4", "-e", "64K", "-f",
                     "16", "-n", "3", "-w", "1", "--time-budget", "1"], timeout=180,
                    check=False)
    check(rc == 0, "coll-perf on 2 x 2 exited with %d:\n%s" % (rc, out))
    got = rows(out)
    check(len(got) == 4 and all(p[4] == "3" and p[9] == "0" and p[14] == "0" for p in got),
          "rows %s" % got)


TESTS = {name[len("test_"):]: fn for name, fn in globals().items() if name.startswith("test_")}

if __name__ == "__main__":
    h.main(lambda args, work: TESTS[args.test](args, work), h.named_parser(__doc__, TESTS))
