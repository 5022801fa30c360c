#!/usr/bin/env python3
"""The tables of a bench/latency.sh results directory: per collectived shape and size, the
median over the repetitions of each percentile (p50, p90, p99, microseconds) of collectived and
of the Open MPI configurations of the same rank count (mpi-shm-np<N>, mpi-tcp-np<N>), and the
ratios collectived / Open MPI of the p50s (below 1: collectived is faster).

usage: latency-summary.py RESULTS_DIR
"""

import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

NAME_RE = re.compile(r"coll-\d+x\d+|mpi-(shm|tcp)-np\d+")
MPIS = (("mpi-shm", "Open MPI shm"), ("mpi-tcp", "Open MPI TCP"))


def shape_table(runs, shape):
    h, m = bl.shape_key(shape)
    coll = runs["coll-" + shape]
    libs = [("coll-" + shape, "collectived")]
    libs += [("%s-np%d" % (k, h * m), t) for k, t in MPIS if "%s-np%d" % (k, h * m) in runs]
    head = ["size"] + ["%s p50 / p90 / p99" % t for _, t in libs] + ["algo"]
    head += ["coll / %s p50" % t for _, t in libs[1:]]
    rows = []
    for s in sorted(coll):
        cells, p50 = [bl.fmt_size(s)], {}
        for k, _ in libs:
            r = runs[k].get(s)
            if not r:
                cells.append("-")
                continue
            p50[k] = bl.med(r, 0)
            cells.append("%.1f / %.1f / %.1f" % (p50[k], bl.med(r, 1), bl.med(r, 2)))
        cells.append(coll[s][-1][3])
        cells += [bl.ratio(p50.get(libs[0][0]), p50.get(k)) for k, _ in libs[1:]]
        rows.append(cells)
    return bl.table(head, rows)


def phase_table(runs, shape):
    rows = runs["coll-" + shape]
    sizes = [s for s in sorted(rows) if all(r[4] for r in rows[s])]
    if not sizes:
        return ""
    cells = [[bl.fmt_size(s)] + ["%.1f" % statistics.median(r[4][i] for r in rows[s])
                                 for i in range(4)] for s in sizes]
    return ("\nWhere collectived's time goes (%s, medians over iterations, averaged over ranks, "
            "then the median over repetitions; us):\n\n" % shape +
            bl.table(["size", "arrive", "peers", "reduce", "notify"], cells))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    runs, problems = bl.repetitions(sys.argv[1], NAME_RE, bl.parse_lat)
    shapes = sorted((n[5:] for n in runs if n.startswith("coll-")), key=bl.shape_key)
    print("Microseconds per operation, median of %d repetitions of each percentile; %s." %
          (bl.count_repetitions(sys.argv[1]), bl.RATIO_NOTE.replace("times", "p50s")))
    for shape in shapes:
        print("\n### %s (nodes x ranks per node)\n" % shape)
        sys.stdout.write(shape_table(runs, shape))
        sys.stdout.write(phase_table(runs, shape))
    for p in problems:
        print("PROBLEM: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
