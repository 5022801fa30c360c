#!/usr/bin/env python3
"""pollwin-summary: the table of a bench/pollwin.sh results directory.

    pollwin-summary.py DIR

Per shape and size: the median over repetitions of each window's p50 (us), and each window's
ratio to window 0 (below 1: the window is faster); then the idle CPU lines of idle-w<us>.txt.
Exit status 1 when a run is missing or a result was wrong.
"""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

SIZES = (8, 4096, 65536, 1 << 20)


def main(resdir):
    runs, problems = bl.repetitions(resdir, re.compile(r"\d+x\d+-w\d+"), bl.parse_lat)
    shapes = sorted({n.split("-")[0] for n in runs}, key=bl.shape_key)
    windows = sorted({int(n.split("-w")[1]) for n in runs})
    head = ["shape", "size"] + ["w=%d p50 (us)" % w for w in windows]
    head += ["w=%d / w=0" % w for w in windows if w != 0]
    rows = []
    for shape in shapes:
        for size in SIZES:
            p50 = {w: bl.med(runs.get("%s-w%d" % (shape, w), {}).get(size, []), 0)
                   for w in windows}
            rows.append([shape, bl.fmt_size(size)] + [bl.fmt_us(p50[w]) for w in windows] +
                        [bl.ratio(p50[w], p50.get(0)) for w in windows if w != 0])
    sys.stdout.write(bl.table(head, rows))
    sys.stdout.write("\nrepetitions: %d\n\n" % bl.count_repetitions(resdir))
    for path in sorted(glob.glob(os.path.join(resdir, "idle-w*.txt")),
                       key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0])):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if "repetition" in line:
                    sys.stdout.write("    %s: %s" % (os.path.basename(path)[:-4], line))
    for p in problems:
        sys.stderr.write("pollwin-summary: %s\n" % p)
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
