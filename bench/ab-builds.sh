#!/bin/bash
# ab-builds.sh: two builds of collectived side by side in one sitting, e.g. before and after a
# change that must not cost speed. coll-perf allreduce (float32 SUM, out of place) busbw at
# chosen sizes for chosen shapes (nodes x ranks per node) through collective-launch, the two
# builds alternating (A B, then B A, ...), -R repetitions; the table gives the median busbw of
# each build and their ratio B / A, with the min-max.
#
#   bench/ab-builds.sh -a BUILD_A -b BUILD_B [-R 5] [-s "4K 1M 256M"] [-S "1x4 2x2"] [-T 2]
#                      [-f 256] [-o DIR]
#
# BUILD_A and BUILD_B are build directories (each with daemon/collectived, bench/coll-perf and
# tools/collective-launch). -T: seconds per size (coll-perf's time budget). -f: the factor
# between the sizes coll-perf sweeps from the first to the last of -s (256; 4 for 4K 16K 64K
# 256K 1M); the other options are bench/lib.sh's. Raw outputs in DIR (default
# /tmp/coll-ab-builds-<date>): rep<k>/<A|B>-<shape>.json and .txt; the markdown table
# (bench/ab-summary.py) goes to stdout. Every run is bounded by timeout. Exit status 1 when a
# run failed or a result was wrong.
set -u

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init ab-builds.sh
REPEATS=5 BUDGET=2 RUN_LIMIT=900
SIZES="4K 1M 256M" SHAPES="1x4 2x2" FACTOR=256 A='' B=''

while [ $# -gt 0 ]; do
    case $1 in
    -a) A=${2:?}; shift 2 ;;
    -b) B=${2:?}; shift 2 ;;
    -s) SIZES=$(bench_value -s "${2:-}" "$SIZE( $SIZE)*" "sizes like '4K 1M'") || exit 2; shift 2 ;;
    -S) SHAPES=${2:?}; shift 2 ;;
    -f) FACTOR=$(bench_value -f "${2:-}" "$NUM") || exit 2; shift 2 ;;
    *) bench_option "$@" || bench_usage_error "$1"; shift "$BENCH_SHIFT" ;;
    esac
done
ab_check_builds "$A" "$B" PERF

# The time budget and JSON flags of BUILD's coll-perf: nccl-tests' flags (--time-budget, -J;
# -T is the timeout), -T and --json in builds older than those.
budget_and_json() {
    if "$(built_in "$1" PERF)" --help 2>&1 | grep -q -- --time-budget; then
        echo "--time-budget $BUDGET -J $2"
    else
        echo "-T $BUDGET --json $2"
    fi
}

run_build() { # dir label shape
    local build=$A out=$1/$2-$3
    [ "$2" = B ] && build=$B
    # shellcheck disable=SC2046 # budget_and_json gives several words, none with spaces
    run_one "$out" "$(built_in "$build" LAUNCH)" --nodes "${3%x*}" --ranks-per-node "${3#*x}" \
        --daemon "$(built_in "$build" DAEMON)" --timeout "$((RUN_LIMIT - 20))" -- \
        "$(built_in "$build" PERF)" -b "${SIZES%% *}" -e "${SIZES##* }" -f "$FACTOR" \
        $(budget_and_json "$build" "$out.json")
}

bench_resdir ab-builds
{ describe_machine; echo "A: $A; B: $B; shapes $SHAPES; sizes $SIZES"; } >"$RESDIR/machine.txt"
CONFIGS=()
for s in $SHAPES; do
    CONFIGS+=("A $s" "B $s")
done
bench_repeat run_build "${CONFIGS[@]}"
python3 "$HERE/ab-summary.py" perf "$RESDIR" "$SIZES" "$SHAPES" || FAILED=1
exit $FAILED
