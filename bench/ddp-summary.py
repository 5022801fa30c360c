#!/usr/bin/env python3
"""ddp-summary: the table of a bench/ddp.sh results directory.

    ddp-summary.py RESULTS_DIR WARMUP

Per configuration (rep<k>/<config>.txt): the median over repetitions of its step time (the
"result:" line of ddp-resnet.py; for coll-train rank 0's median step_ms after WARMUP steps),
the ratio collectived / gloo of the step times, the test accuracy of the last repetition and
its difference to gloo's, and the hook's bytes per step and node. Exit status 1 when a run has
no result.
"""
import glob
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

FIELD = re.compile(r"(\w+)=([^\s]+)")
STEP = re.compile(r"^step (\d+) step_ms=([\d.]+)")


def parse(path, warmup):
    """{step_ms, test_acc, wire_mb_per_step, ...} of one run, or None."""
    result, steps, epoch = None, [], {}
    with open(path, errors="replace") as f:
        for line in f:
            line = bl.launcher_prefix(line)
            if line.startswith("result: ") or line.startswith("final: "):
                result = dict(FIELD.findall(line))
            m = STEP.match(line)
            if m and int(m.group(1)) >= warmup:
                steps.append(float(m.group(2)))
            if line.startswith("epoch ") and result is None:
                epoch = dict(FIELD.findall(line))
    if result is None:
        return None
    if "test_accuracy" in result:  # coll-train: its accuracy is a fraction
        result["test_acc"] = "%.2f" % (100 * float(result["test_accuracy"]))
        result["step_ms"] = "%.1f" % statistics.median(steps) if steps else "0"
        result.setdefault("wire_mb_per_step", epoch.get("wire_mb_per_step", "-"))
    return result


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    resdir, warmup = argv[0], int(argv[1])
    runs, problems = {}, []
    for path in sorted(glob.glob(os.path.join(resdir, "rep*", "*.txt"))):
        r = parse(path, warmup)
        name = os.path.basename(path)[:-4]
        if r is None:
            problems.append("%s: no result (see .err)" % os.path.relpath(path, resdir))
            continue
        runs.setdefault(name, []).append(r)
    gloo = runs.get("gloo")
    base = statistics.median(float(r["step_ms"]) for r in gloo) if gloo else None
    base_acc = float(gloo[-1]["test_acc"]) if gloo else None
    rows = []
    for name, rs in sorted(runs.items(), key=lambda kv: kv[0] != "gloo"):
        ms = statistics.median(float(r["step_ms"]) for r in rs)
        acc = float(rs[-1]["test_acc"])
        torch_run = name not in ("gloo", "coll-train")
        rows.append([name, len(rs), "%.0f" % ms, bl.ratio(ms, base) if torch_run else "-",
                     "%.2f %%" % acc,
                     "%+.2f" % (acc - base_acc) if base_acc is not None and torch_run else "-",
                     rs[-1].get("wire_mb_per_step", "-")])
    print("Step time in ms (the slowest rank's median over the timed steps; the median over "
          "repetitions); collectived / gloo of the step times (below 1: faster than gloo); test "
          "accuracy of rank 0's model after the run, and its difference to gloo's in points "
          "(coll-train trains another model and is not compared); MB per step and node the "
          "collectived hook sent.\n")
    sys.stdout.write(bl.table(["configuration", "runs", "step ms", "x gloo", "test accuracy",
                               "vs gloo", "MB/step sent"], rows))
    for p in problems:
        print("PROBLEM: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
