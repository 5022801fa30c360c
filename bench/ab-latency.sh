#!/bin/bash
# ab-latency.sh: allreduce latency of two builds of collectived side by side in one sitting, e.g.
# before and after a change of the small-message path. coll-lat (float32 sum, out of place,
# p50/p90/p99 per size, bench/lat-common.h) through collective-launch for one shape (nodes x
# ranks per node), the two builds alternating (A B, then B A, ...), -R repetitions; the table
# gives per size the median over repetitions of each build's p50 and p90, their ratio B / A, the
# p50 ranges and the algorithms coll_req_algo() named.
#
#   bench/ab-latency.sh -a BUILD_A -b BUILD_B [-R 5] [-S 2x2] [-s 4K] [-e 1M] [-f 4]
#                       [-n 2000] [-T 2] [-o DIR]
#
# BUILD_A and BUILD_B are build directories (each with daemon/collectived, bench/coll-lat and
# tools/collective-launch). -s/-e/-f: the sizes (coll-lat -b/-e/-f); -n iterations per size at
# most, -T seconds per size; the other options are bench/lib.sh's. The environment reaches both
# builds' daemons and ranks alike (e.g. COLLD_SHM_NODE_MAX_BYTES). Raw outputs in DIR (default
# /tmp/coll-ab-latency-<date>): rep<k>/<A|B>.txt (+ .err); machine.txt; the markdown table
# (bench/ab-summary.py) goes to stdout. Every run is bounded by timeout. Exit status 1 when a
# run failed.
set -u

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init ab-latency.sh
REPEATS=5 MINB=4K MAXB=1M ITERS=2000 BUDGET=2 RUN_LIMIT=600
SHAPE=2x2 FACTOR=4 A='' B=''

while [ $# -gt 0 ]; do
    case $1 in
    -a) A=${2:?}; shift 2 ;;
    -b) B=${2:?}; shift 2 ;;
    -s) MINB=$(bench_value -s "${2:-}" "$SIZE") || exit 2; shift 2 ;;
    -S) SHAPE=$(bench_value -S "${2:-}" '[0-9]+x[0-9]+') || exit 2; shift 2 ;;
    -f) FACTOR=$(bench_value -f "${2:-}" "$NUM") || exit 2; shift 2 ;;
    *) bench_option "$@" || bench_usage_error "$1"; shift "$BENCH_SHIFT" ;;
    esac
done
ab_check_builds "$A" "$B" LAT

run_build() { # dir label
    local build=$A
    [ "$2" = B ] && build=$B
    run_one "$1/$2" "$(built_in "$build" LAUNCH)" --nodes "${SHAPE%x*}" \
        --ranks-per-node "${SHAPE#*x}" --daemon "$(built_in "$build" DAEMON)" \
        --timeout "$((RUN_LIMIT - 20))" -- \
        "$(built_in "$build" LAT)" -b "$MINB" -e "$MAXB" -f "$FACTOR" -n "$ITERS" -T "$BUDGET"
}

bench_resdir ab-latency
{ describe_machine; echo "A: $A; B: $B; shape $SHAPE"; } >"$RESDIR/machine.txt"
bench_repeat run_build A B
echo "load after: $(uptime | sed 's/.*load average: //')" >>"$RESDIR/machine.txt"
python3 "$HERE/ab-summary.py" lat "$RESDIR" || FAILED=1
exit $FAILED
