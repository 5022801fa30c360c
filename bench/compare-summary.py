#!/usr/bin/env python3
"""compare-summary: the table of a compare.sh results directory (Python 3 standard library).

    compare-summary.py RESULTS_DIR [--shaped] [--link-gbps 0.125] [--target 0.118]

Reads every RESULTS_DIR/rep<k>/<lib>-<shape>.txt (coll-perf, mpi-allreduce and torch-gloo
output, with or without the launcher's "[r0] " prefix). lib is coll, mpi or gloo; shape is
<nodes>x<ranks per node> for coll and the rank count for the others. For each run and size it
takes busbw and time; the table gives the median over the repetitions. It writes
RESULTS_DIR/raw.csv (every row of every run) and RESULTS_DIR/summary.md (the table, and the
min-max over repetitions), and prints the table. Exit status 1 when a run is missing or failed,
or a result was wrong.
"""
import argparse
import glob
import os
import re
import statistics
import sys

NAME_RE = re.compile(r"^(coll|mpi|gloo)-(\d+)(?:x(\d+))?(-shaped)?\.txt$")
LIB_TITLE = {"coll": "collectived", "mpi": "Open MPI", "gloo": "torch gloo"}


def parse_run(path):
    """size -> (busbw, time_us, wrong, algo) of one output file, and whether it completed."""
    rows, complete = {}, False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = re.sub(r"^\[r\d+\] ", "", line.rstrip("\n"))
            if line.startswith("# #wrong total:"):
                complete = True
            p = line.split()
            if len(p) == 12 and p[0].isdigit():  # mpi-allreduce, torch-gloo
                wrong = int(p[11]) if p[11].isdigit() else 0
                rows[int(p[0])] = (float(p[9]), float(p[6]), wrong, p[10])
            elif len(p) == 15 and p[0].isdigit():  # coll-perf: its out-of-place columns
                wrong = int(p[9]) if p[9].isdigit() else 0
                rows[int(p[0])] = (float(p[7]), float(p[5]), wrong, p[8])
    return rows, complete


def load(resdir):
    """(lib, ranks, shape, shaped) -> size -> list of (busbw, time, wrong, algo); and problems."""
    data, problems = {}, []
    for path in sorted(glob.glob(os.path.join(resdir, "rep*", "*.txt"))):
        m = NAME_RE.match(os.path.basename(path))
        if not m:
            continue
        lib, a, b, shaped = m.group(1), int(m.group(2)), m.group(3), bool(m.group(4))
        ranks, shape = (a * int(b), "%dx%s" % (a, b)) if b else (a, "np%d" % a)
        rows, complete = parse_run(path)
        rel = os.path.relpath(path, resdir)
        if not complete:
            problems.append("%s: incomplete (see %s)" % (rel, rel[:-4] + ".err"))
        for size, r in rows.items():
            if r[2]:
                problems.append("%s: %d wrong elements at %d B" % (rel, r[2], size))
            data.setdefault((lib, ranks, shape, shaped), {}).setdefault(size, []).append(r)
    return data, problems


def fmt_bw(v):
    return "-" if v is None else "%.3f" % v


def fmt_us(v):
    if v is None:
        return "-"
    return "%.1f" % v if v < 100 else "%.0f" % v


def fmt_size(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d %s" % (b // div, unit)
    return "%d B" % b


def med(runs, i):
    return statistics.median(r[i] for r in runs) if runs else None


def ratio(a, b):
    return "-" if a is None or not b else "%.2f" % (a / b)


def write_raw(data, resdir):
    with open(os.path.join(resdir, "raw.csv"), "w") as f:
        f.write("lib,ranks,shape,shaped,size_bytes,run,busbw_GBps,time_us,wrong,algo\n")
        for (lib, ranks, shape, shaped), sizes in sorted(data.items()):
            for size, runs in sorted(sizes.items()):
                for k, r in enumerate(runs):
                    f.write("%s,%d,%s,%d,%d,%d,%.6f,%.3f,%d,%s\n" % (
                        lib, ranks, shape, shaped, size, k + 1, r[0], r[1], r[2], r[3]))


def coll_shapes(data, ranks):
    """collectived shapes measured at this rank count: one node (the shape of the other
    libraries' processes on one host) first, one rank per node last."""
    shapes = {s for (lib, n, s, sh) in data if lib == "coll" and n == ranks and not sh}
    return sorted(shapes, key=lambda s: (int(s.split("x")[0]), s))


def loopback_table(data):
    out = ["| ranks | collectived shape | size | collectived busbw | collectived time (us) | "
           "MPI busbw | MPI time (us) | gloo busbw | gloo time (us) | coll/MPI | coll/gloo | "
           "algo |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for ranks in sorted({k[1] for k in data if not k[3]}):
        mpi = data.get(("mpi", ranks, "np%d" % ranks, False), {})
        gloo = data.get(("gloo", ranks, "np%d" % ranks, False), {})
        for shape in coll_shapes(data, ranks):
            coll = data[("coll", ranks, shape, False)]
            for size in sorted(set(coll) | set(mpi) | set(gloo)):
                c, m, g = coll.get(size, []), mpi.get(size, []), gloo.get(size, [])
                algos = "/".join(sorted({r[3] for r in c})) or "-"
                out.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    ranks, shape, fmt_size(size), fmt_bw(med(c, 0)), fmt_us(med(c, 1)),
                    fmt_bw(med(m, 0)), fmt_us(med(m, 1)), fmt_bw(med(g, 0)), fmt_us(med(g, 1)),
                    ratio(med(c, 0), med(m, 0)), ratio(med(c, 0), med(g, 0)), algos))
    return out


def shaped_table(data, link, target):
    out = ["| size | collectived busbw | min-max | time (us) | of link | target %.3f | "
           "gloo busbw | gloo time (us) | coll/gloo | algo |" % target,
           "|---|---|---|---|---|---|---|---|---|---|"]
    coll = next((v for k, v in data.items() if k[0] == "coll" and k[3]), {})
    gloo = next((v for k, v in data.items() if k[0] == "gloo" and k[3]), {})
    for size in sorted(set(coll) | set(gloo)):
        c, g = coll.get(size, []), gloo.get(size, [])
        bw = med(c, 0)
        span = "%.3f-%.3f" % (min(r[0] for r in c), max(r[0] for r in c)) if c else "-"
        verdict = "-" if size < (1 << 20) or bw is None else ("met" if bw >= target else "MISSED")
        algos = "/".join(sorted({r[3] for r in c})) or "-"
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            fmt_size(size), fmt_bw(bw), span, fmt_us(med(c, 1)),
            "-" if bw is None else "%.0f %%" % (100 * bw / link), verdict, fmt_bw(med(g, 0)),
            fmt_us(med(g, 1)), ratio(bw, med(g, 0)), algos))
    return out


def ranges_table(data):
    """busbw min-max over repetitions, every configuration (for summary.md)."""
    out = ["| configuration | size | runs | busbw median | min | max |", "|---|---|---|---|---|---|"]
    for (lib, ranks, shape, shaped), sizes in sorted(data.items()):
        name = "%s %s%s" % (LIB_TITLE[lib], shape, " shaped" if shaped else "")
        for size, runs in sorted(sizes.items()):
            bws = [r[0] for r in runs]
            out.append("| %s | %s | %d | %.3f | %.3f | %.3f |" % (
                name, fmt_size(size), len(bws), statistics.median(bws), min(bws), max(bws)))
    return out


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("resdir")
    p.add_argument("--shaped", action="store_true", help="the --shaped table")
    p.add_argument("--link-gbps", type=float, default=0.125, help="link rate in GB/s (1 Gbit/s)")
    p.add_argument("--target", type=float, default=0.118, help="busbw target from 1 MiB up")
    args = p.parse_args(argv)

    data, problems = load(args.resdir)
    if not data:
        sys.stderr.write("compare-summary: no results in %s\n" % args.resdir)
        return 1
    write_raw(data, args.resdir)
    table = (shaped_table(data, args.link_gbps, args.target) if args.shaped
             else loopback_table(data))
    text = "\n".join(table) + "\n"
    if problems:
        text += "\n" + "\n".join("PROBLEM: " + x for x in problems) + "\n"
    with open(os.path.join(args.resdir, "summary.md"), "w") as f:
        f.write(text + "\nbusbw over the repetitions:\n\n" + "\n".join(ranges_table(data)) + "\n")
    sys.stdout.write(text)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
