#!/usr/bin/env python3
"""ab-summary: the table of a bench/ab-latency.sh or bench/ab-builds.sh results directory.

    ab-summary.py lat DIR                  # rep<k>/{A,B}.txt of coll-lat
    ab-summary.py perf DIR SIZES SHAPES    # rep<k>/{A,B}-<shape>.json of coll-perf

Medians over the repetitions of each build, and B / A. Exit status 1 when a run is missing.
"""
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402


def lat(resdir):
    runs, problems = bl.repetitions(resdir, re.compile(r"[AB]"), bl.parse_lat)
    a, b = runs.get("A", {}), runs.get("B", {})
    rows = []
    for size in sorted(set(a) & set(b)):
        ma, mb = bl.med(a[size], 0), bl.med(b[size], 0)
        rows.append([bl.fmt_size(size), "%.1f" % ma, "%.1f" % mb, bl.ratio(mb, ma),
                     "%.1f / %.1f" % (bl.med(a[size], 1), bl.med(b[size], 1)),
                     "%.1f-%.1f" % (min(r[0] for r in a[size]), max(r[0] for r in a[size])),
                     "%.1f-%.1f" % (min(r[0] for r in b[size]), max(r[0] for r in b[size])),
                     "%s / %s" % (",".join(sorted({r[3] for r in a[size]})),
                                  ",".join(sorted({r[3] for r in b[size]})))])
    sys.stdout.write(bl.table(["size", "p50 A (us)", "p50 B (us)", "B / A", "p90 A / B",
                               "A p50 min-max", "B p50 min-max", "algo A / B"], rows))
    return problems


def busbw(resdir, label, shape, size):
    out = []
    for path in sorted(glob.glob(os.path.join(resdir, "rep*", "%s-%s.json" % (label, shape)))):
        with open(path) as f:
            for row in json.load(f)["rows"]:
                if row["bytes"] == size:  # coll-perf before its placements had one busbw
                    out.append(row["busbw"] if "busbw" in row else row["out_of_place"]["busbw"])
    return out


def perf(resdir, sizes, shapes):
    rows, problems = [], []
    for shape in shapes.split():
        for s in sizes.split():
            a = busbw(resdir, "A", shape, bl.parse_size(s))
            b = busbw(resdir, "B", shape, bl.parse_size(s))
            if not a or not b:
                problems.append("%s %s: no result of %s" % (shape, s, "A" if not a else "B"))
                continue
            ma, mb = statistics.median(a), statistics.median(b)
            rows.append([shape, s, "%.3f" % ma, "%.3f" % mb, bl.ratio(mb, ma),
                         "%.3f-%.3f" % (min(a), max(a)), "%.3f-%.3f" % (min(b), max(b))])
    sys.stdout.write(bl.table(["shape", "size", "busbw A (GB/s)", "busbw B (GB/s)", "B / A",
                               "A min-max", "B min-max"], rows))
    return problems


def main(argv):
    if len(argv) == 2 and argv[0] == "lat":
        problems = lat(argv[1])
    elif len(argv) == 4 and argv[0] == "perf":
        problems = perf(argv[1], argv[2], argv[3])
    else:
        sys.exit(__doc__)
    for p in problems:
        print("PROBLEM: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
