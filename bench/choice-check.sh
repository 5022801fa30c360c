#!/bin/bash
# choice-check.sh: the automatic algorithm choice against each algorithm forced, measured
# (docs/cost-model.md, "The daemon's choice").
#
#   bench/choice-check.sh [-R 5] [-b 4K] [-e 4M] [-f 2] [--shapes "2x2 4x1"] [--cost-params FILE]
#
# On simulated nodes on this host (collective-launch, one daemon per node on loopback), for each
# shape: float32 SUM allreduce in place (coll-perf --place in, the mean over ranks) with --algo
# auto, rd and ring, sizes -b to -e in x-f steps (rd up to 128 KiB: it runs in one segment). A
# repetition runs every (shape, algorithm) once, the order rotated by one from one repetition to
# the next. The node-reduced path
# (shm_node_max_bytes) is off, so that auto and the forced algorithms all run in the daemons:
# which path small allreduces take is the clients' choice, not the table's. --cost-params
# gives the daemons' cost_params (default: the built-in constants).
#
# The summary (stdout and <dir>/summary.md): per shape and size the median time of each
# algorithm (quartiles over repetitions), what auto ran, the fastest forced one, and whether auto
# was within the spread of the fastest. The crossovers in force are in <dir>/choice-<shape>.txt
# (bench/coll-cost's prediction). Raw outputs: <dir>/rep<k>/<shape>-<algo>.txt (+ .err);
# <dir>/machine.txt. Common options: bench/lib.sh (-R 3, -o /tmp/coll-choice-<date>, -n 100,
# -w 5, -T 0.5 s per size, -L 600, -Q 180). Environment: BUILD_DIR (default <repo>/build-bench,
# configured Release when new). Exit status 1 when a run failed or a result was wrong.
set -u

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init choice-check.sh
REPEATS=3 MINB=4K MAXB=4M BUDGET=0.5
FACTOR=2 SHAPES="2x2 4x1" COST_PARAMS=''

while [ $# -gt 0 ]; do
    case $1 in
    -f) FACTOR=$(bench_value -f "${2:-}" '[0-9]+') || exit 2; shift 2 ;;
    --shapes) SHAPES=$(bench_value --shapes "${2:-}" '[0-9]+x[0-9]+( [0-9]+x[0-9]+)*') || exit 2
              shift 2 ;;
    --cost-params) COST_PARAMS=$(bench_value --cost-params "${2:-}" '.+' "a file") || exit 2
                   shift 2 ;;
    *) bench_option "$@" || bench_usage_error "$1"; shift "$BENCH_SHIFT" ;;
    esac
done

# Recursive doubling runs the whole buffer and a descriptor in one segment (256 KiB): forced,
# it runs up to 128 KiB of the sizes in x2 steps and is refused above.
RD_MAXB=128K

run_choice() { # dir nodes ranks_per_node algo
    local args=(--daemon-arg=--shm-node-max-bytes=0) maxb=$MAXB
    [ -n "$COST_PARAMS" ] && args+=(--daemon-arg=--cost-params="$COST_PARAMS")
    [ "$4" = rd ] && maxb=$RD_MAXB
    launch_cmd "$2" "$3"
    run_one "$1/$2x$3-$4" "${LAUNCH_CMD[@]}" "${args[@]}" -- "$PERF" --collective allreduce \
        -d float -o sum -b "$MINB" -e "$maxb" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" \
        --time-budget "$BUDGET" -c 1 --place in --algo "$4"
}

bench_resdir choice
build_targets collectived coll-perf coll-cost
configs=()
for shape in $SHAPES; do
    for algo in auto rd ring; do
        configs+=("${shape%x*} ${shape#*x} $algo")
    done
    "$BUILD/bench/coll-cost" ${COST_PARAMS:+--params "$COST_PARAMS"} -N "${shape%x*}" \
        -L "${shape#*x}" -b "$MINB" -e "$MAXB" -f "$FACTOR" >"$RESDIR/choice-$shape.txt"
done
describe_machine >"$RESDIR/machine.txt"
wait_quiet
bench_repeat run_choice "${configs[@]}"
echo "load after: $(uptime | sed 's/.*load average: //')" >>"$RESDIR/machine.txt"
python3 "$HERE/choice-summary.py" "$RESDIR" | tee "$RESDIR/summary.md" || FAILED=1
exit $FAILED
