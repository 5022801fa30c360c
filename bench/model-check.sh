#!/bin/bash
# model-check.sh: the cost model (daemon/engine/cost.h) against the namespace cluster: each
# algorithm the daemons run, at N hosts and each link rate, measured and predicted side by side.
#
#   bench/model-check.sh --params DIR [--rates "1gbit"] [--nodes "2 4"] [--sizes "4K 1M"]
#                        [-R N] [-o DIR]
#
# DIR is a bench/calibrate.sh results directory (its params-<rate>.txt: the constants measured
# on this machine). Per rate and node count N, on N hosts of bench/netns.sh (one daemon each,
# daemon and ranks in the host's namespace), coll-perf in place, one size per run, 5 warm-ups,
# then -n timed operations at most (200; fewer when they would take longer than -T seconds, 1;
# at least 3):
#   ring, rd          allreduce --algo ring / rd, N x 1 (rd at 1 MiB with segment_size 2M, the
#                     largest buffer it runs is one segment; not above)
#   chain             broadcast --algo chain, N x 1
#   node_rd           allreduce N x 2 up to shm_node_max_bytes (16 KiB), direct_max_bytes 0:
#                     the ranks reduce in shared memory, the daemons run recursive doubling on
#                     one buffer per node
#   direct            allreduce N x 2 up to direct_max_bytes (64 KiB): the same, the nodes'
#                     leaders running the rounds
#   fp16, onebit,     allreduce with COLL_COMPRESSION=fp16, onebit, topk:0.01 (N x 1; lossy, so
#   topk              not checked element by element)
# then bench/cost-model.py check compares each median with coll-cost's prediction from the
# rate's constants and marks every error above 15 %. Defaults modest (1gbit, N = 2 4, 4 KiB and
# 1 MiB, -R 1); the full study: --rates "1gbit 10gbit" --nodes "2 4 8" --sizes "4K 1M 64M" -R 3.
# Raw outputs: DIR/<rate>/N<n>/rep<k>/<algo>-<size>.txt (+ .err); DIR/check.md, also on stdout.
# Environment: BUILD_DIR (default <repo>/build-bench). Needs root (namespaces). Exit status 1
# when a run failed.
set -u

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init model-check.sh
REPEATS=1 RUN_LIMIT=300 QUIET_WAIT=60 ITERS=200 BUDGET=1
RATES=1gbit NODES="2 4" SIZES="4K 1M" PARAMS=
ARGS=("$@")

while [ $# -gt 0 ]; do
    case $1 in
    --params) PARAMS=${2:?}; shift 2 ;;
    --rates) RATES=$(bench_value --rates "${2:-}" '([0-9]+[kmg]?bit)( [0-9]+[kmg]?bit)*') ||
            exit 2; shift 2 ;;
    --nodes) NODES=$(bench_value --nodes "${2:-}" '[0-9]+( [0-9]+)*') || exit 2; shift 2 ;;
    --sizes) SIZES=$(bench_value --sizes "${2:-}" "$SIZE( $SIZE)*") || exit 2; shift 2 ;;
    --inner) INNER=${2:?}; shift 2 ;; # internal: one rate and node count, in its cluster
    *) bench_option "$@" || bench_usage_error "$1"; shift "$BENCH_SHIFT" ;;
    esac
done

# perf DIR NAME RANKS SIZE [LAUNCHER ARGS...] -- COLL-PERF ARGS...: one coll-perf run of one
# size on every host, RANKS ranks each.
perf() {
    local dir=$1 name=$2 l=$3 size=$4 largs=()
    shift 4
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        largs+=("$1")
        shift
    done
    shift
    launch_cmd "$(cluster_hosts)" "$l"
    run_one "$dir/$name-$size" "${LAUNCH_CMD[@]}" "${largs[@]}" -- "$PERF" -b "$size" \
        -e "$size" -n "$ITERS" -w 5 --time-budget "$BUDGET" --place in "$@"
}

# size_bytes SIZE: the bytes of 4K, 1M, ...
size_bytes() { python3 "$HERE/benchlib.py" bytes "$1"; }

run_size() { # dir size
    local dir=$1 s=$2 b
    b=$(size_bytes "$s")
    perf "$dir" ring 1 "$s" -- --collective allreduce --algo ring
    if [ "$b" -le 131072 ]; then
        perf "$dir" rd 1 "$s" -- --collective allreduce --algo rd
    elif [ "$b" -le 1048576 ]; then
        perf "$dir" rd 1 "$s" --daemon-arg=--segment-size=2M -- --collective allreduce --algo rd
    fi
    perf "$dir" chain 1 "$s" -- --collective broadcast --algo chain
    if [ "$b" -le 16384 ]; then
        COLLD_DIRECT_MAX_BYTES=0 perf "$dir" node_rd 2 "$s" -- --collective allreduce
    fi
    if [ "$b" -le 65536 ]; then
        COLLD_DIRECT_MAX_BYTES=64K perf "$dir" direct 2 "$s" -- --collective allreduce
    fi
    local c
    for c in fp16 onebit topk:0.01; do
        COLL_COMPRESSION=$c COLL_POOL_SIZE=2G perf "$dir" "${c%%:*}" 1 "$s" -- \
            --collective allreduce -c 0
    done
}

inner() {
    local k s dir
    for ((k = 1; k <= REPEATS; k++)); do
        dir=$RESDIR/$INNER/N$(cluster_hosts)/rep$k
        mkdir -p "$dir"
        say "$INNER, $(cluster_hosts) hosts, repetition $k (load $(cut -d' ' -f1 /proc/loadavg))"
        for s in $SIZES; do
            run_size "$dir" "$s"
        done
    done
    return $FAILED
}

if [ -n "${INNER:-}" ]; then
    inner
    exit $?
fi
[ -n "$PARAMS" ] || die "give --params DIR (a bench/calibrate.sh results directory)"
for rate in $RATES; do
    [ -f "$PARAMS/params-$rate.txt" ] || die "no $PARAMS/params-$rate.txt: calibrate $rate first"
done
bench_resdir model-check
build_targets collectived coll-perf coll-cost
wait_quiet
describe_machine >"$RESDIR/machine.txt"
say "results in $RESDIR"
for rate in $RATES; do
    for n in $NODES; do
        RATE=$rate
        CLUSTER=${n}x1
        cluster_run $((REPEATS * 30 * RUN_LIMIT)) "${ARGS[@]}" --inner "$rate" -o "$RESDIR" ||
            FAILED=1
    done
done
CLUSTER=
echo "load after: $(uptime | sed 's/.*load average: //')" >>"$RESDIR/machine.txt"
python3 "$HERE/cost-model.py" check "$RESDIR" "$PARAMS" | tee "$RESDIR/check.md" || FAILED=1
exit $FAILED
