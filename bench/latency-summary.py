#!/usr/bin/env python3
"""The tables of a bench/latency.sh results directory: per shape and size, the median over the
repetitions of each percentile (p50, p90, p99, microseconds) of collectived and Open MPI, and
their ratios (collectived / Open MPI, below 1: collectived is faster).

usage: latency-summary.py RESULTS_DIR
"""

import glob
import os
import re
import statistics
import sys

LIBS = (("coll", "collectived"), ("mpi", "Open MPI"), ("mpi-tcp", "Open MPI TCP"))


def read_run(path):
    """{size: (p50, p90, p99, algo, phases)} of one run's output (collective-launch prefixes
    each of a rank's lines with "[r<rank>] ")."""
    rows = {}
    with open(path) as f:
        for line in f:
            line = re.sub(r"^\[r\d+\] ", "", line)
            if line.startswith("#") or not line.strip():
                continue
            v = line.split()
            if len(v) < 7:
                continue
            phases = [float(x) for x in v[7:11]] if len(v) >= 11 else None
            rows[int(v[0])] = (float(v[2]), float(v[3]), float(v[4]), v[6], phases)
    return rows


def collect(resdir):
    """{(lib, shape): {size: [rows of each repetition]}}."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(resdir, "rep*", "*.txt"))):
        m = re.match(r"(coll|mpi-tcp|mpi)-(\d+x\d+)\.txt$", os.path.basename(path))
        if not m:
            continue
        for size, row in read_run(path).items():
            runs.setdefault((m.group(1), m.group(2)), {}).setdefault(size, []).append(row)
    return runs


def med(rows, i):
    return statistics.median(r[i] for r in rows)


def fmt_size(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return "%d %s" % (b // n, unit)
    return "%d B" % b


def shape_table(runs, shape):
    libs = [(k, name) for k, name in LIBS if (k, shape) in runs]
    sizes = sorted(runs[("coll", shape)]) if ("coll", shape) in runs else []
    head = ["size"] + ["%s p50 / p90 / p99" % name for _, name in libs] + ["algo"]
    head += ["coll/%s p50" % name for k, name in libs if k != "coll"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for s in sizes:
        cells, p50 = [fmt_size(s)], {}
        for k, _ in libs:
            rows = runs[(k, shape)].get(s)
            if not rows:
                cells.append("-")
                continue
            p50[k] = med(rows, 0)
            cells.append("%.1f / %.1f / %.1f" % (p50[k], med(rows, 1), med(rows, 2)))
        cells.append(runs[("coll", shape)][s][-1][3])
        for k, _ in libs:
            if k != "coll":
                cells.append("%.2f" % (p50["coll"] / p50[k]) if k in p50 and p50[k] else "-")
        print("| " + " | ".join(cells) + " |")


def phase_table(runs, shape):
    rows = runs.get(("coll", shape), {})
    sizes = [s for s in sorted(rows) if all(r[4] for r in rows[s])]
    if not sizes:
        return
    print("\nWhere collectived's time goes (%s, medians over iterations, averaged over ranks, "
          "then the median over repetitions; us):\n" % shape)
    print("| size | arrive | peers | reduce | notify |")
    print("|---|---|---|---|---|")
    for s in sizes:
        ph = [statistics.median(r[4][i] for r in rows[s]) for i in range(4)]
        print("| %s | %s |" % (fmt_size(s), " | ".join("%.1f" % x for x in ph)))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    runs = collect(sys.argv[1])
    reps = len(glob.glob(os.path.join(sys.argv[1], "rep*")))
    shapes = sorted({shape for _, shape in runs}, key=lambda s: (int(s.split("x")[0]), s))
    print("Microseconds per operation, median of %d repetitions of each percentile." % reps)
    for shape in shapes:
        print("\n### %s (nodes x ranks per node)\n" % shape)
        shape_table(runs, shape)
        phase_table(runs, shape)


if __name__ == "__main__":
    main()
