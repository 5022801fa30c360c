#!/usr/bin/env python3
"""benchlib: what the bench scripts' summaries share (Python 3 standard library only).

The paths of the built binaries the benchmarks measure (BUILT: the one place that names them;
bench/lib.sh reads them with ``benchlib.py shell-paths BUILD``, or one of another build with
``benchlib.py path BUILD NAME``), the parsers of every
benchmark's output (coll-perf, mpi-allreduce and torch-gloo rows; coll-lat and mpi-lat rows),
the results directories of repetitions (rep<k>/<name>.txt), medians, units and markdown tables.

Conventions of every table (docs/benchmarking.md): times in microseconds per operation, the mean
over ranks; the median over repetitions; ratios are **collectived / other** of times (below 1:
collectived is faster); sizes in B, KiB, MiB, GiB; GB = 1e9 bytes.
"""
import glob
import os
import re
import shlex
import statistics
import sys

# Relative to the build directory. examples/train holds the demo trainer (the real client the
# benchmarks train with) and overlap, its training step run three ways; when a binary moves,
# only its line here changes.
BUILT = {
    "LAUNCH": "tools/collective-launch",
    "DAEMON": "daemon/collectived",
    "PERF": "bench/coll-perf",
    "LAT": "bench/coll-lat",
    "COST": "bench/coll-cost",
    "REDUCE_BW": "bench/reduce-bw",
    "COMPRESS_BW": "bench/compress-bw",
    "OVERLAP": "examples/train/overlap",
    "TRAIN": "examples/train/coll-train",
    "PLAN": "tools/plan",
    "PYLIB": "python",
}

RATIO_NOTE = ("ratios are collectived / other of the times (below 1: collectived is faster)")


def built(build, name):
    """The path of built binary @name (a key of BUILT) in @build."""
    return os.path.join(build, BUILT[name])


def launcher_prefix(line):
    """@line without collective-launch's "[r<rank>] " prefix."""
    return re.sub(r"^\[r\d+\] ", "", line.rstrip("\n"))


# ---- outputs of the benchmarks -------------------------------------------------------------

def parse_perf(path, place="in"):
    """{size: (time_us, busbw, wrong, algo)} of a coll-perf, mpi-allreduce or torch-gloo output,
    and whether it completed (its "#wrong total" line). coll-perf rows have both placements:
    @place ("in" or "out") picks one; the others have one placement (their header says)."""
    rows, complete = {}, False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = launcher_prefix(line)
            if line.startswith("# #wrong total:"):
                complete = True
            p = line.split()
            if not p or not p[0].isdigit():
                continue
            if len(p) == 12:  # mpi-allreduce, torch-gloo
                rows[int(p[0])] = (float(p[6]), float(p[9]), _wrong(p[11]), p[10])
            elif len(p) == 15:  # coll-perf: out of place in 5..9, in place in 10..14
                o = 10 if place == "in" else 5
                if p[o] != "-":
                    rows[int(p[0])] = (float(p[o]), float(p[o + 2]), _wrong(p[o + 4]), p[o + 3])
    return rows, complete


def _wrong(text):
    return int(text) if text.isdigit() else 0


def parse_lat(path):
    """{size: (p50, p90, p99, algo, phases, mean)} of a coll-lat or mpi-lat output (us); phases
    is the four phase medians of coll-lat -p, or None."""
    rows = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = launcher_prefix(line)
            if line.startswith("#") or not line.strip():
                continue
            v = line.split()
            if len(v) < 7 or not v[0].isdigit():
                continue
            phases = [float(x) for x in v[7:11]] if len(v) >= 11 else None
            rows[int(v[0])] = (float(v[2]), float(v[3]), float(v[4]), v[6], phases, float(v[5]))
    return rows


def repetitions(resdir, name_re, parse):
    """{name: {size: [row of each repetition]}} over RESDIR/rep<k>/<name>.txt whose name matches
    @name_re (a compiled regex), with @parse(path) -> {size: row} (or (rows, complete)); and the
    problems found (incomplete runs, wrong results)."""
    runs, problems = {}, []
    for path in sorted(glob.glob(os.path.join(resdir, "rep*", "*.txt"))):
        name = os.path.basename(path)[:-4]
        if not name_re.fullmatch(name):
            continue
        got = parse(path)
        rows, complete = got if isinstance(got, tuple) else (got, True)
        rel = os.path.relpath(path, resdir)
        if not complete or not rows:
            problems.append("%s: incomplete (see %s.err)" % (rel, rel[:-4]))
        for size, row in rows.items():
            if len(row) == 4 and row[2]:
                problems.append("%s: %d wrong elements at %d B" % (rel, row[2], size))
            runs.setdefault(name, {}).setdefault(size, []).append(row)
    return runs, problems


def count_repetitions(resdir):
    return len(glob.glob(os.path.join(resdir, "rep*")))


# ---- numbers and tables --------------------------------------------------------------------

def med(rows, i):
    """The median of column @i of @rows, or None."""
    return statistics.median(r[i] for r in rows) if rows else None


def fmt_size(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d %s" % (b // div, unit)
    return "%d B" % b


def parse_size(text):
    """Bytes of "64K", "1M", "8" (powers of 1024)."""
    text = text.strip()
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:].lower(), 1)
    return int(float(text[:-1] if mult > 1 else text) * mult)


def fmt_us(v):
    if v is None:
        return "-"
    return "%.1f" % v if v < 100 else "%.0f" % v


def fmt_bw(v):
    return "-" if v is None else "%.3f" % v


def ratio(a, b):
    """a / b as text, two decimals or two significant digits below 0.1 ("-" when either is
    missing)."""
    if a is None or not b:
        return "-"
    return "%.2f" % (a / b) if a / b >= 0.1 else "%.2g" % (a / b)


def table(head, rows):
    """A markdown table: @head a list of column titles, @rows lists of cells."""
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def shape_key(shape):
    """Sort key of "HxM" shapes: hosts, then ranks per host."""
    h, m = shape.split("x")
    return int(h), int(m)


# ---- command line: the paths for bench/lib.sh ----------------------------------------------

def main(argv):
    if len(argv) == 2 and argv[0] == "shell-paths":
        for name in BUILT:
            print("%s=%s" % (name, shlex.quote(built(argv[1], name))))
        return 0
    if len(argv) == 3 and argv[0] == "path" and argv[2] in BUILT:
        print(built(argv[1], argv[2]))
        return 0
    if len(argv) == 2 and argv[0] == "bytes":
        print(parse_size(argv[1]))
        return 0
    sys.stderr.write("usage: benchlib.py shell-paths BUILD_DIR | path BUILD_DIR NAME | "
                     "bytes SIZE\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
