#!/bin/bash
# latency.sh: allreduce latency of collectived against Open MPI per size, from 8 B to 1 MiB:
# p50, p90 and p99 over iterations (bench/lat-common.h), all libraries in one run, alternating.
#
#   bench/latency.sh [options] [-S SHAPES] [-p]
#   bench/latency.sh --cluster HxM [--rate R] [options] [-p]
#
# Every library runs float32 SUM allreduce in place (coll-lat -I, mpi-lat -I). On this host the
# shapes are -S (default "1x2 1x4 2x2 4x1", nodes x ranks per node): collectived through
# collective-launch (coll-lat); Open MPI (mpi-lat) with as many processes over its default
# transport (shared memory: "mpi-shm") and, for the rank counts of multi-node shapes, over TCP
# on loopback only ("mpi-tcp", --mca pml ob1 --mca btl tcp,self: what it uses between hosts).
# Each Open MPI configuration runs once per repetition and is compared with every collectived
# shape of its rank count. With --cluster HxM (bench/netns.sh: H namespaces, links of --rate):
# collectived H x M in the namespaces and Open MPI across them (lib.sh, mpi_cmd).
# A repetition runs every configuration once, the order rotated by one per repetition; the
# table gives the median over repetitions of each percentile and the ratio collectived / Open
# MPI of the p50s (below 1: collectived is faster). Pinning, where it is fair: 2 ranks on this
# 2-CPU machine are pinned one per CPU for both libraries (Open MPI's default for 2 processes;
# collectived's ranks with taskset, its daemon free); more ranks are oversubscribed and pinned
# by neither.
#
# Options (bench/lib.sh): -R repetitions (3), -o results directory (/tmp/coll-latency-<date>),
# -b/-e sizes (8, 1M; x2 steps), -n iterations per size at most (1000), -T seconds per size (0.5),
# -Q, -L (600), --cluster, --rate, --qdisc; of its own: -S shapes, -p the phases of collectived's
# operations (coll-lat -p). The full study: -R 5 -n 2000 -T 2 -p (docs/benchmarking.md).
# Environment: BUILD_DIR (default <repo>/build-bench, configured Release when new).
#
# Raw outputs: <dir>/rep<k>/<config>.txt (+ .err); <dir>/machine.txt (state, loads);
# <dir>/table.md (bench/latency-summary.py), also on stdout. Exit status 1 when a run failed.
set -u

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init latency.sh
MAXB=1M ITERS=1000 BUDGET=0.5
SHAPES="1x2 1x4 2x2 4x1"
PHASES=()
ARGS=("$@")

while [ $# -gt 0 ]; do
    case $1 in
    -S) SHAPES=$(bench_value -S "${2:-}" '[0-9]+x[0-9]+( [0-9]+x[0-9]+)*' "shapes like '2x2 4x1'") ||
            exit 2; shift 2 ;;
    -p) PHASES=(-p); shift ;;
    *) bench_option "$@" || bench_usage_error "$1"; shift "$BENCH_SHIFT" ;;
    esac
done
SWEEP=(-b "$MINB" -e "$MAXB" -f 2 -n "$ITERS" -T "$BUDGET" -I)

# Whether NP ranks are pinned one per CPU: 2 ranks on this host when it has at least 2 CPUs.
pinned() { ! in_cluster && [ "$1" = 2 ] && [ "$(nproc)" -ge 2 ]; }

run_coll() { # dir nodes ranks_per_node
    local cmd=("$LAT" "${SWEEP[@]}" "${PHASES[@]}")
    if pinned $(($2 * $3)); then # rank r on CPU r
        # shellcheck disable=SC2016 # the rank's own sh expands them
        cmd=(sh -c 'exec taskset -c "$COLL_RANK" "$@"' pin "${cmd[@]}")
    fi
    launch_cmd "$2" "$3"
    run_one "$1/coll-$2x$3" "${LAUNCH_CMD[@]}" -- "${cmd[@]}"
}

run_mpi() { # dir np transport [ranks per host]
    mpi_cmd "$2" "$3" "${4:-}"
    run_one "$1/mpi-$3-np$2" "${MPI_CMD[@]}" "$RESDIR/mpi-lat" "${SWEEP[@]}"
}

run_config() { # dir lib args...
    local dir=$1 lib=$2
    shift 2
    "run_$lib" "$dir" "$@"
}

# Every configuration of one repetition: each shape, and each Open MPI configuration once.
configs() {
    local s np
    declare -A seen=()
    for s in $SHAPES; do
        echo "coll ${s%x*} ${s#*x}"
        np=$((${s%x*} * ${s#*x}))
        [ -n "${seen[shm$np]:-}" ] || echo "mpi $np shm"
        seen[shm$np]=1
        if [ "${s%x*}" -gt 1 ] && [ -z "${seen[tcp$np]:-}" ]; then
            echo "mpi $np tcp"
            seen[tcp$np]=1
        fi
    done
}

if [ -n "$CLUSTER" ] && in_cluster; then
    h=$(cluster_hosts)
    m=$(cluster_ranks)
    bench_repeat run_config "coll $h $m" "mpi $((h * m)) tcp $m"
    exit $FAILED
fi
bench_resdir latency
ensure_packages openmpi-bin libopenmpi-dev
build_targets collectived coll-lat
build_mpi mpi-lat
wait_quiet
{ describe_machine; echo "sweep: ${SWEEP[*]}; shapes: ${CLUSTER:-$SHAPES}; repetitions: $REPEATS"; } \
    >"$RESDIR/machine.txt"
say "results in $RESDIR"
if [ -n "$CLUSTER" ]; then
    cluster_run $((REPEATS * 2 * RUN_LIMIT + 120)) "${ARGS[@]}" -o "$RESDIR" || FAILED=1
else
    mapfile -t CONFIGS < <(configs)
    bench_repeat run_config "${CONFIGS[@]}"
fi
echo "load after: $(uptime | sed 's/.*load average: //')" >>"$RESDIR/machine.txt"
{
    echo "# collectived and Open MPI allreduce latency (float32 sum, in place)"
    echo
    sed 's/^/    /' "$RESDIR/machine.txt"
    echo
    python3 "$HERE/latency-summary.py" "$RESDIR" || FAILED=1
} >"$RESDIR/table.md"
cat "$RESDIR/table.md"
say "results in $RESDIR (table.md, rep*/)"
exit $FAILED
