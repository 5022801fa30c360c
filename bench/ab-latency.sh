#!/bin/bash
# ab-latency.sh: allreduce latency of two builds of collectived side by side in one sitting, e.g.
# before and after a change of the small-message path. coll-lat (float32 sum, out of place,
# p50/p90/p99 per size, bench/lat-common.h) through collective-launch for one shape (nodes x
# ranks per node), the two builds alternating (A B, then B A, ...), R repetitions; the table
# gives per size the median over repetitions of each build's p50 and p90, their ratio B / A, the
# p50 ranges and the algorithms coll_req_algo() named.
#
#   bench/ab-latency.sh -a BUILD_A -b BUILD_B [-R 5] [-S 2x2] [-s 4K] [-e 1M] [-f 4]
#                       [-n 2000] [-T 2] [-o DIR]
#
# BUILD_A and BUILD_B are build directories (each with daemon/collectived, bench/coll-lat and
# tools/collective-launch). -s/-e/-f: the sizes (coll-lat -b/-e/-f); -n iterations per size at
# most, -T seconds per size. The environment reaches both builds' daemons and ranks alike (e.g.
# COLLD_SHM_NODE_MAX_BYTES). Raw outputs in DIR (default /tmp/ab-latency-<date>):
# <A|B>-rep<k>.txt (+ .err); the load before and after in DIR/load.txt; the markdown table goes to
# stdout. Every run is bounded by timeout. Exit status 1 when a run failed.
set -u

REPEATS=5
SHAPE=2x2
MINB=4K
MAXB=1M
FACTOR=4
ITERS=2000
BUDGET=2
A=
B=
RESDIR=

say() { echo "ab-latency.sh: $*" >&2; }
die() { say "$*"; exit 1; }

while getopts "a:b:R:S:s:e:f:n:T:o:" opt; do
    case $opt in
    a) A=$OPTARG ;;
    b) B=$OPTARG ;;
    R) REPEATS=$OPTARG ;;
    S) SHAPE=$OPTARG ;;
    s) MINB=$OPTARG ;;
    e) MAXB=$OPTARG ;;
    f) FACTOR=$OPTARG ;;
    n) ITERS=$OPTARG ;;
    T) BUDGET=$OPTARG ;;
    o) RESDIR=$OPTARG ;;
    *) die "usage: ab-latency.sh -a BUILD_A -b BUILD_B [-R N] [-S SHAPE] [-s MIN] [-e MAX] [-f F] [-n N] [-T S] [-o DIR]" ;;
    esac
done
[ -n "$A" ] && [ -n "$B" ] || die "give both builds: -a BUILD_A -b BUILD_B"
for d in "$A" "$B"; do
    for f in daemon/collectived bench/coll-lat tools/collective-launch; do
        [ -x "$d/$f" ] || die "$d/$f is missing (build it first)"
    done
done
RESDIR=${RESDIR:-/tmp/ab-latency-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RESDIR"
echo "before: $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >"$RESDIR/load.txt"

failed=0
for rep in $(seq 1 "$REPEATS"); do
    if [ $((rep % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
    for which in $order; do
        if [ "$which" = A ]; then build=$A; else build=$B; fi
        say "rep $rep, build $which (load $(cut -d' ' -f1 /proc/loadavg))"
        timeout 600 "$build/tools/collective-launch" --nodes "${SHAPE%x*}" \
            --ranks-per-node "${SHAPE#*x}" --daemon "$build/daemon/collectived" -- \
            "$build/bench/coll-lat" -b "$MINB" -e "$MAXB" -f "$FACTOR" -n "$ITERS" -T "$BUDGET" \
            >"$RESDIR/$which-rep$rep.txt" 2>"$RESDIR/$which-rep$rep.err" ||
            { say "run failed: $RESDIR/$which-rep$rep.err"; failed=1; }
    done
done
echo "after: $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESDIR/load.txt"

/usr/bin/env python3 - "$RESDIR" <<'PY'
import glob, os, re, statistics, sys
rows = {}
for path in glob.glob(os.path.join(sys.argv[1], "[AB]-rep*.txt")):
    which = os.path.basename(path)[0]
    for line in open(path):
        m = re.match(r"\[r0\]\s+(\d+)\s+\d+\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+(\S+)", line)
        if m:
            rows.setdefault((which, int(m.group(1))), []).append(
                (float(m.group(2)), float(m.group(3)), m.group(4)))
print("| size (B) | p50 A (us) | p50 B (us) | B / A | p90 A / B | A p50 min-max | B p50 min-max "
      "| algo A / B |")
print("|---|---|---|---|---|---|---|---|")
for size in sorted({s for _, s in rows}):
    a, b = rows.get(("A", size), []), rows.get(("B", size), [])
    if not a or not b:
        continue
    ma, mb = statistics.median(x[0] for x in a), statistics.median(x[0] for x in b)
    print("| %d | %.1f | %.1f | %.2f | %.1f / %.1f | %.1f-%.1f | %.1f-%.1f | %s / %s |" % (
        size, ma, mb, mb / ma if ma else 0, statistics.median(x[1] for x in a),
        statistics.median(x[1] for x in b), min(x[0] for x in a), max(x[0] for x in a),
        min(x[0] for x in b), max(x[0] for x in b), ",".join(sorted({x[2] for x in a})),
        ",".join(sorted({x[2] for x in b}))))
PY
cat "$RESDIR/load.txt" >&2
exit "$failed"
