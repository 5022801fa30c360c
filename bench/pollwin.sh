#!/bin/bash
# pollwin.sh: a daemon's polling window (poll_window_us: the loop spins on UCX for a bounded
# window while a receive is posted) measured: the allreduce latency of collectived (coll-lat,
# float32 sum, in place, p50 per size) for each window, in one sitting with one build, the
# windows alternating (the order rotated by one per repetition), and the idle CPU of a waiting
# job with each window (bench/idle-cpu.py).
#
#   bench/pollwin.sh [-W "0 20 50 200"] [-S "2x2 4x1"] [-R 5] [-b 8] [-e 1M] [-T 0.25]
#                    [-n 1000] [-o DIR] [--no-idle]
#
# The window was measured and not kept (docs/benchmarks.md, "a polling window in the daemon"):
# the daemon of main has no poll_window_us, and the script stops with a message on a build
# without it. Build one of the commits measured there (b37e197 spin, 0468277 spin + yield,
# 3847087 between rounds only) into BUILD_DIR to run it again, e.g. on hosts with cores of
# their own per node.
#
# -W the windows in us (0: none, the loop sleeps on UCX's event fd), passed to every daemon as
# COLLD_POLL_WINDOW_US; -S the shapes (nodes x ranks per node); the other options are
# bench/lib.sh's (-b/-e the sizes, x2 steps; -T seconds per size; -n iterations per size at
# most). Raw outputs in DIR (default /tmp/coll-pollwin-<date>): rep<k>/<shape>-w<us>.txt
# (+ .err), idle-w<us>.txt; machine.txt (the state and the loads). The table
# (bench/pollwin-summary.py): per shape and size the median p50 over repetitions of each window, and its ratio to window 0;
# then the idle CPU. Environment: BUILD_DIR (default <repo>/build-bench, configured Release when
# new). Every run is bounded by timeout. Exit status 1 when a run failed.
set -u

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init pollwin.sh
REPEATS=5 MAXB=1M ITERS=1000 BUDGET=0.25 RUN_LIMIT=300
WINDOWS="0 20 50 200" SHAPES="2x2 4x1" IDLE=1

while [ $# -gt 0 ]; do
    case $1 in
    -W) WINDOWS=$(bench_value -W "${2:-}" '[0-9]+( [0-9]+)*' "windows like '0 50'") || exit 2
        shift 2 ;;
    -S) SHAPES=$(bench_value -S "${2:-}" '[0-9]+x[0-9]+( [0-9]+x[0-9]+)*' \
            "shapes like '2x2 4x1'") || exit 2; shift 2 ;;
    --no-idle) IDLE=0; shift ;;
    *) bench_option "$@" || bench_usage_error "$1"; shift "$BENCH_SHIFT" ;;
    esac
done

run_window() { # dir shape window
    launch_cmd "${2%x*}" "${2#*x}"
    COLLD_POLL_WINDOW_US=$3 run_one "$1/$2-w$3" "${LAUNCH_CMD[@]}" -- \
        "$LAT" -b "$MINB" -e "$MAXB" -f 2 -n "$ITERS" -T "$BUDGET" -I
}

bench_resdir pollwin
build_targets collectived coll-lat fault_rank
"$DAEMON" --print-config 2>/dev/null | grep -q '^poll_window_us ' ||
    die "$DAEMON has no poll_window_us: build a commit with the window (docs/benchmarks.md)"
wait_quiet
{ describe_machine; echo "windows (us): $WINDOWS; shapes: $SHAPES; repetitions: $REPEATS"; } \
    >"$RESDIR/machine.txt"
say "results in $RESDIR"
configs=()
for s in $SHAPES; do
    for w in $WINDOWS; do
        configs+=("$s $w")
    done
done
bench_repeat run_window "${configs[@]}"
if [ "$IDLE" = 1 ]; then
    for w in $WINDOWS; do
        timeout -k 10 "$RUN_LIMIT" "$PY" "$HERE/idle-cpu.py" --daemon "$DAEMON" \
            --fault-rank "$BUILD/tests/system/reliability/fault_rank" \
            --daemon-arg=--poll-window-us="$w" --repeats 3 >"$RESDIR/idle-w$w.txt" \
            2>"$RESDIR/idle-w$w.err" || FAILED=1
        say "  idle-w$w: load $(cut -d' ' -f1 /proc/loadavg)"
    done
fi
echo "load after: $(uptime | sed 's/.*load average: //')" >>"$RESDIR/machine.txt"
{
    echo "# collectived allreduce latency by polling window (float32 sum, in place)"
    echo
    sed 's/^/    /' "$RESDIR/machine.txt"
    echo
    python3 "$HERE/pollwin-summary.py" "$RESDIR" || FAILED=1
} >"$RESDIR/table.md"
cat "$RESDIR/table.md"
exit $FAILED
