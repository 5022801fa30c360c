#!/usr/bin/env python3
"""overlap-summary: one markdown table per configuration over several bench/overlap.sh runs.

    bench/overlap-summary.py DIR [DIR...]

Reads the "overlap:" lines of each DIR/table.md (one results directory of bench/overlap.sh per
run) and prints, per configuration and mode, the median over the runs of each run's value
(itself the median over the measured steps, averaged over the ranks), with the min-max over
the runs of the overlap efficiency and of step / after for the bucket mode. Exit status 0; 1
when a directory has no results; 2 on a usage error.
"""

import statistics
import sys

MODES = ("bucket", "after", "tensor")
# (key of the "overlap:" line, column title, format, min-max shown for the bucket mode)
COLUMNS = (
    ("step_ms", "step ms", "%.0f", False),
    ("compute_ms", "compute ms", "%.0f", False),
    ("comm_ms", "comm ms", "%.0f", False),
    ("exposed_ms", "exposed ms", "%.0f", False),
    ("overlap", "overlap efficiency", "%.2f", True),
    ("step_vs_after", "step / after", "%.2f", True),
    ("cpu", "cpu share", "%.2f", False),
)


def read_runs(dirs):
    """{(label, mode): [fields of each run]}, labels in the order first seen."""
    runs, labels = {}, []
    for d in dirs:
        with open(d + "/table.md") as f:
            lines = [l.strip()[len("overlap: "):] for l in f if l.strip().startswith("overlap: ")]
        if not lines:
            sys.exit("overlap-summary: no results in %s/table.md" % d)
        for line in lines:
            kv = dict(item.split("=", 1) for item in line.split())
            if kv["label"] not in labels:
                labels.append(kv["label"])
            runs.setdefault((kv["label"], kv["mode"]), []).append(kv)
    return runs, labels


def cell(rows, key, fmt, spread):
    values = [float(r[key]) for r in rows]
    text = fmt % statistics.median(values)
    if spread:
        text += " (%s-%s)" % (fmt % min(values), fmt % max(values))
    return text


def table(runs, label):
    first = runs[(label, "bucket")][0]
    print("%s: %s ranks, %s, global batch %s, %d runs\n" % (
        label, first["ranks"], first["model"], first["batch"], len(runs[(label, "bucket")])))
    print("| mode | buckets | " + " | ".join(c[1] for c in COLUMNS) + " |")
    print("|---|---|" + "---|" * len(COLUMNS))
    for mode in MODES:
        rows = runs.get((label, mode), [])
        if rows:
            cells = [cell(rows, key, fmt, spread and mode == "bucket")
                     for key, _, fmt, spread in COLUMNS]
            print("| %s | %s | %s |" % (mode, rows[0]["buckets"], " | ".join(cells)))
    print()


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    runs, labels = read_runs(sys.argv[1:])
    for label in labels:
        table(runs, label)


if __name__ == "__main__":
    main()
