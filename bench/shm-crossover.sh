#!/bin/bash
# shm-crossover.sh: where a single-node job's allreduce should leave the local ranks' shared
# memory for the daemon's multi-threaded path (shm_max_bytes). For each shape, coll-lat runs
# once with every size in shared memory (COLLD_SHM_MAX_BYTES=1G) and once with every size in
# the daemon (COLLD_SHM_MAX_BYTES=0), alternating, -R times; the table gives the median p50 of
# each path per size and the smallest size from which the daemon is faster at every larger one.
#
#   bench/shm-crossover.sh [-R N] [-o DIR] [-b MIN] [-e MAX] [-T SECONDS] [-S SHAPES]
#
# Defaults: 3 repetitions, 64K to 16M (x2 steps), 0.5 s per size, shapes "1x2 1x4", results in
# /tmp/coll-crossover-<date> (rep<k>/{shm,daemon}-<shape>.txt, table.md). Environment:
# BUILD_DIR (default <repo>/build-bench, configured Release when new). Exit status 1 when a
# run failed.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(dirname "$HERE")
BUILD=${BUILD_DIR:-$TOP/build-bench}
REPEATS=3
RESDIR=
MINB=64K
MAXB=16M
BUDGET=0.5
SHAPES="1x2 1x4"
QUIET_WAIT=60
RUN_LIMIT=300

say() { echo "shm-crossover.sh: $*" >&2; }
die() { say "$*"; exit 1; }

while [ $# -gt 0 ]; do
    case $1 in
    -R) REPEATS=${2:?}; shift 2 ;;
    -o) RESDIR=${2:?}; shift 2 ;;
    -b) MINB=${2:?}; shift 2 ;;
    -e) MAXB=${2:?}; shift 2 ;;
    -T) BUDGET=${2:?}; shift 2 ;;
    -S) SHAPES=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) say "unknown option $1 (see --help)"; exit 2 ;;
    esac
done

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

run_path() { # dir path shape
    local limit=1G
    [ "$2" = daemon ] && limit=0
    COLLD_SHM_MAX_BYTES=$limit run_one "$1/$2-$3" "$BUILD/tools/collective-launch" \
        --nodes 1 --ranks-per-node "${3#*x}" --daemon "$BUILD/daemon/collectived" \
        --timeout "$((RUN_LIMIT - 20))" -- "$BUILD/bench/coll-lat" -b "$MINB" -e "$MAXB" -f 2 \
        -T "$BUDGET"
}

RESDIR=${RESDIR:-/tmp/coll-crossover-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RESDIR" || die "cannot create $RESDIR"
build_targets collectived coll-lat
wait_quiet
describe_machine >"$RESDIR/machine.txt"
for ((k = 1; k <= REPEATS; k++)); do
    mkdir -p "$RESDIR/rep$k"
    say "repetition $k of $REPEATS (load $(cut -d' ' -f1 /proc/loadavg))"
    for s in $SHAPES; do
        if ((k % 2)); then paths="shm daemon"; else paths="daemon shm"; fi
        for p in $paths; do
            run_path "$RESDIR/rep$k" "$p" "$s"
        done
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESDIR/machine.txt"
python3 - "$RESDIR" "$HERE/latency-summary.py" >"$RESDIR/table.md" <<'EOF' || FAILED=1
import glob, importlib.util, os, statistics, sys

spec = importlib.util.spec_from_file_location("summary", sys.argv[2])
summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(summary)
p50 = {}  # (path, shape) -> {size: [p50 of each repetition]}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "rep*", "*.txt"))):
    path, shape = os.path.basename(f)[:-4].split("-")
    for size, row in summary.read_run(f).items():
        p50.setdefault((path, shape), {}).setdefault(size, []).append(row[0])
print(open(os.path.join(sys.argv[1], "machine.txt")).read())
for shape in sorted({s for _, s in p50}):
    shm, dmn = p50[("shm", shape)], p50[("daemon", shape)]
    sizes = sorted(set(shm) & set(dmn))
    print("\n### %s: p50 (us), median over repetitions\n" % shape)
    print("| size | shared memory | daemon | shm / daemon |\n|---|---|---|---|")
    faster = []
    for s in sizes:
        a, b = statistics.median(shm[s]), statistics.median(dmn[s])
        faster.append(b < a)
        print("| %s | %.1f | %.1f | %.2f |" % (summary.fmt_size(s), a, b, a / b))
    cross = next((s for i, s in enumerate(sizes) if all(faster[i:])), None)
    print("\ncrossover: %s" % (summary.fmt_size(cross) if cross else "none measured (shm faster)"))
EOF
cat "$RESDIR/table.md"
say "results in $RESDIR"
exit $FAILED
