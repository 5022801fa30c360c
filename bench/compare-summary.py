#!/usr/bin/env python3
"""compare-summary: the tables of a bench/compare.sh results directory.

    compare-summary.py RESULTS_DIR

Reads RESULTS_DIR/rep<k>/<config>.txt: coll-<H>x<M> (coll-perf, its in-place columns),
mpi-shm-np<N>, mpi-tcp-np<N> (mpi-allreduce -I) and gloo-np<N> (torch-gloo). For every rank
count, one table per collectived shape of that many ranks: per size the median over the
repetitions of each library's time per operation (us, the mean over ranks), collectived's busbw
and algorithm, and the ratios collectived / other of the times. Writes RESULTS_DIR/raw.csv
(every row of every run) and RESULTS_DIR/summary.md (machine.txt, the tables, the min-max of
collectived's times), and prints the tables. Exit status 1 when a run is missing, failed or was
wrong.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

NAME_RE = re.compile(r"(coll)-(\d+x\d+)|(mpi-shm|mpi-tcp|gloo)-np(\d+)")
OTHERS = (("mpi-shm", "Open MPI shm"), ("mpi-tcp", "Open MPI TCP"), ("gloo", "torch gloo"))


def world(name):
    m = NAME_RE.fullmatch(name)
    if m.group(1):
        h, r = bl.shape_key(m.group(2))
        return h * r
    return int(m.group(4))


def shape_table(runs, shape, n):
    coll = runs["coll-" + shape]
    others = [(k, t, runs.get("%s-np%d" % (k, n))) for k, t in OTHERS]
    others = [(k, t, r) for k, t, r in others if r]
    head = ["size", "collectived %s time" % shape] + ["%s time" % t for _, t, _ in others]
    head += ["coll / %s" % t for _, t, _ in others] + ["collectived busbw", "algo"]
    rows = []
    for size in sorted(set(coll).union(*[set(r) for _, _, r in others])):
        c = bl.med(coll.get(size, []), 0)
        o = [bl.med(r.get(size, []), 0) for _, _, r in others]
        algos = "/".join(sorted({x[3] for x in coll.get(size, [])})) or "-"
        rows.append([bl.fmt_size(size), bl.fmt_us(c)] + [bl.fmt_us(x) for x in o] +
                    [bl.ratio(c, x) for x in o] +
                    [bl.fmt_bw(bl.med(coll.get(size, []), 1)), algos])
    return bl.table(head, rows)


def write_raw(runs, resdir):
    with open(os.path.join(resdir, "raw.csv"), "w") as f:
        f.write("config,ranks,size_bytes,run,time_us,busbw_GBps,wrong,algo\n")
        for name, sizes in sorted(runs.items()):
            for size, rows in sorted(sizes.items()):
                for k, r in enumerate(rows):
                    f.write("%s,%d,%d,%d,%.3f,%.6f,%d,%s\n" % (name, world(name), size, k + 1,
                                                               r[0], r[1], r[2], r[3]))


def ranges(runs):
    rows = []
    for name, sizes in sorted(runs.items()):
        for size, r in sorted(sizes.items()):
            t = [x[0] for x in r]
            rows.append([name, bl.fmt_size(size), len(t), bl.fmt_us(bl.med(r, 0)),
                         bl.fmt_us(min(t)), bl.fmt_us(max(t))])
    return bl.table(["configuration", "size", "runs", "time median", "min", "max"], rows)


def main(argv):
    if len(argv) != 1:
        sys.exit(__doc__)
    resdir = argv[0]
    runs, problems = bl.repetitions(resdir, NAME_RE, bl.parse_perf)
    if not runs:
        sys.stderr.write("compare-summary: no results in %s\n" % resdir)
        return 1
    write_raw(runs, resdir)
    reps = bl.count_repetitions(resdir)
    text = ["Allreduce float32 sum, in place for every library. Time per operation in us (the "
            "mean over ranks), the median of %d repetitions; %s; busbw in GB/s." %
            (reps, bl.RATIO_NOTE), ""]
    shapes = sorted((n[5:] for n in runs if n.startswith("coll-")), key=bl.shape_key)
    for n in sorted({world(s) for s in runs}):
        for shape in (s for s in shapes if world("coll-" + s) == n):
            text += ["### %d ranks: collectived %s (nodes x ranks per node)" % (n, shape), "",
                     shape_table(runs, shape, n)]
    text += ["PROBLEM: " + p for p in problems]
    out = "\n".join(text) + "\n"
    machine = os.path.join(resdir, "machine.txt")
    head = open(machine).read() if os.path.exists(machine) else ""
    with open(os.path.join(resdir, "summary.md"), "w") as f:
        f.write("# collectived, Open MPI and torch gloo allreduce\n\n")
        f.write("".join("    " + line for line in head.splitlines(True)) + "\n")
        f.write(out + "\nTimes over the repetitions (us):\n\n" + ranges(runs))
    sys.stdout.write(out)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
