#!/usr/bin/env python3
"""choice-summary.py RESDIR: the summary of bench/choice-check.sh.

Per shape and size: the median time per allreduce (us) of auto, rd and ring forced, each with
its spread over the repetitions (the quartiles from 4 repetitions on, else min-max); what auto ran; what the model predicts (bench/coll-cost's
choice-<shape>.txt, between the entries the daemon has: rd and ring); the measured fastest of the
forced ones ("rd~ring" when their spreads overlap: a tie within the noise); and whether
auto ran the measured fastest ("yes", "tie", "NO"). Exit status 1 when a run was incomplete or
wrong.
"""
import csv
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ALGOS = ("auto", "rd", "ring")


def model_choice(resdir, shape):
    """{bytes: 'rd' or 'ring'}: the cheaper of the two by coll-cost's prediction."""
    best = {}
    path = os.path.join(resdir, "choice-%s.txt" % shape)
    if not os.path.exists(path):
        return best
    with open(path, encoding="utf-8") as f:
        for row in csv.reader(f):
            if len(row) < 6 or row[4] not in ("rd", "ring"):
                continue
            size, t = int(row[3]), float(row[5])
            if size not in best or t < best[size][1]:
                best[size] = (row[4], t)
    return {s: a for s, (a, _) in best.items()}


def spread(rows):
    """(low, high) of the times of @rows: the quartiles from 4 repetitions on, else min-max."""
    times = sorted(r[0] for r in rows)
    if len(times) >= 4:
        q = statistics.quantiles(times, n=4)
        return q[0], q[2]
    return times[0], times[-1]


def cell(rows):
    if not rows:
        return "-"
    lo, hi = spread(rows)
    return "%s (%s-%s)" % (benchlib.fmt_us(benchlib.med(rows, 0)), benchlib.fmt_us(lo),
                           benchlib.fmt_us(hi))


def fastest(sizes, size):
    """The forced algorithm with the lowest median, or "rd~ring" when the ranges overlap."""
    got = {a: sizes[a].get(size, []) for a in ("rd", "ring")}
    have = [a for a in got if got[a]]
    if len(have) < 2:
        return have[0] if have else "-"
    lo = min(have, key=lambda a: benchlib.med(got[a], 0))
    hi = "ring" if lo == "rd" else "rd"
    if spread(got[hi])[0] <= spread(got[lo])[1]:
        return "rd~ring"
    return lo


def verdict(ran, best):
    if best == "-" or not ran:
        return "-"
    if best == "rd~ring":
        return "tie"
    return "yes" if ran == best else "NO"


def shape_table(resdir, shape, runs):
    sizes = {a: runs.get("%s-%s" % (shape, a), {}) for a in ALGOS}
    model = model_choice(resdir, shape)
    rows = []
    for size in sorted(set().union(*[set(s) for s in sizes.values()])):
        ran = sorted({r[3] for r in sizes["auto"].get(size, [])})
        best = fastest(sizes, size)
        rows.append([benchlib.fmt_size(size)] + [cell(sizes[a].get(size, [])) for a in ALGOS] +
                    ["/".join(ran) or "-", model.get(size, "-"), best,
                     verdict(ran[0] if len(ran) == 1 else "", best)])
    head = ["size", "auto us", "rd us", "ring us", "auto ran", "model", "fastest forced",
            "auto fastest?"]
    return "### %s\n\n%s" % (shape, benchlib.table(head, rows))


def main(argv):
    resdir = argv[1]
    runs, problems = benchlib.repetitions(resdir, re.compile(r"\d+x\d+-(auto|rd|ring)"),
                                          benchlib.parse_perf)
    shapes = sorted({n.split("-")[0] for n in runs}, key=benchlib.shape_key)
    print("Allreduce float32 SUM in place, time per operation (mean over ranks), median and "
          "quartiles (min-max below 4) of %d repetitions; node-reduced path off.\n"
          % benchlib.count_repetitions(resdir))
    for shape in shapes:
        print(shape_table(resdir, shape, runs))
    for p in problems:
        print("PROBLEM: %s" % p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
