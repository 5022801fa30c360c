#!/bin/bash
# compare.sh: allreduce of collectived against Open MPI and torch.distributed gloo, with the same
# sizes, warm-ups, placement and timing rules for all (docs/benchmarking.md).
#
#   bench/compare.sh [options]                            # simulated nodes on this host
#   bench/compare.sh --cluster HxM [--rate R] [options]   # H hosts (network namespaces), M ranks each
#
# Every library runs float32 SUM allreduce **in place** (torch gloo has no other form; coll-perf
# --place in, mpi-allreduce -I), sizes -b to -e in x-f steps, -w warm-up operations per size, then
# up to -n timed operations (fewer when they would take longer than -T seconds, at least 3), each
# rank timing its batch; time = the mean over ranks of the time per operation. A repetition runs
# every configuration once, the order rotated by one from one repetition to the next (no
# configuration always follows the same one); the tables give the median over repetitions and
# the ratio collectived / other of the times (below 1: collectived is faster).
#
# On this host: 2 ranks as collectived 1x2 and 2x1 (nodes x ranks per node), 4 ranks as 1x4, 2x2
# and 4x1; Open MPI np 2 and np 4 over its default transport (ob1 + vader shared memory: "mpi")
# and over TCP on loopback only (--mca pml ob1 --mca btl tcp,self: "mpi-tcp", the transport it
# uses between hosts, the fair partner of collectived's multi-node shapes); torch gloo np 2 and
# np 4 (TCP on lo). Each configuration runs once per repetition, whatever the shapes it is
# compared with.
# --cluster HxM: bench/netns.sh makes H namespaces on a bridge with links shaped to --rate
# (default 1gbit; none: unshaped) by --qdisc (tbf); collectived runs H daemons x M ranks, daemon
# and ranks of host k in namespace k (collective-launch --netns-ranks); Open MPI runs across the
# namespaces (mpirun in namespace 0, its daemons started by bench/netns-agent.sh; TCP between
# hosts, shared memory within one, the processes not pinned and yielding when idle); torch gloo
# with M ranks per namespace on the same links.
#
# Options (bench/lib.sh): -R repetitions (1), -o results directory (/tmp/coll-compare-<date>),
# -b/-e sizes (8, 256M), -f step factor (2), -w warm-up (5), -n iterations at most (100),
# -T seconds per size (0.5), -L seconds one run may take (1200), -Q seconds to wait for a load
# average below 0.5 first (180), --cluster, --rate, --qdisc. The full study: -R 5 -T 5, and
# --cluster 2x2 and 4x1 at 1gbit and 10gbit (docs/benchmarking.md, "The final sitting").
# Environment: BUILD_DIR (default <repo>/build-bench, configured Release when new).
#
# It installs what is missing (apt: openmpi-bin libopenmpi-dev python3-torch python3-numpy
# iproute2, and the project's build dependencies), builds collectived and coll-perf, builds
# mpi-allreduce with mpicc into the results directory, and bounds every run with timeout. Raw
# outputs: <dir>/rep<k>/<config>.txt (+ .err); <dir>/raw.csv, <dir>/summary.md (the tables and the
# min-max), <dir>/machine.txt; the tables also go to stdout. Exit status 1 when a run failed or a
# result was wrong.
set -u

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init compare.sh
REPEATS=1 MINB=8 MAXB=256M BUDGET=0.5 RUN_LIMIT=1200
FACTOR=2
ARGS=("$@")

while [ $# -gt 0 ]; do
    case $1 in
    -f) FACTOR=$(bench_value -f "${2:-}" '[0-9]+') || exit 2; shift 2 ;;
    *) bench_option "$@" || bench_usage_error "$1"; shift "$BENCH_SHIFT" ;;
    esac
done
SWEEP=(-b "$MINB" -e "$MAXB" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" -T "$BUDGET" -c 1)
# coll-perf takes nccl-tests' flags, where -T is an operation's timeout: the budget is its own.
PERF_SWEEP=(-b "$MINB" -e "$MAXB" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" --time-budget "$BUDGET"
            -c 1 --place in)

# ---- one run of each library ----------------------------------------------------------------

run_coll() { # dir nodes ranks_per_node
    launch_cmd "$2" "$3"
    run_one "$1/coll-$2x$3" "${LAUNCH_CMD[@]}" -- \
        "$PERF" --collective allreduce -d float -o sum "${PERF_SWEEP[@]}"
}

run_mpi() { # dir np transport [ranks per host]
    mpi_cmd "$2" "$3" "${4:-}"
    run_one "$1/mpi-$3-np$2" "${MPI_CMD[@]}" "$RESDIR/mpi-allreduce" -I "${SWEEP[@]}"
}

run_gloo() { # dir np [ranks per host]
    local where=()
    if in_cluster; then
        where=(--netns-prefix "$NETNS_PREFIX" --ranks-per-netns "$3" --ifname "$NETNS_DEV")
    fi
    run_one "$1/gloo-np$2" env GLOO_SOCKET_IFNAME=lo "$PY" "$HERE/torch-gloo.py" \
        --world-size "$2" "${where[@]}" "${SWEEP[@]}"
}

run_config() { # dir lib args...
    local dir=$1 lib=$2
    shift 2
    "run_$lib" "$dir" "$@"
}

loopback() {
    bench_repeat run_config "coll 1 2" "coll 2 1" "mpi 2 shm" "mpi 2 tcp" "gloo 2" \
        "coll 1 4" "coll 2 2" "coll 4 1" "mpi 4 shm" "mpi 4 tcp" "gloo 4"
}

cluster_inner() {
    local h m
    h=$(cluster_hosts)
    m=$(cluster_ranks)
    bench_repeat run_config "coll $h $m" "mpi $((h * m)) tcp $m" "gloo $((h * m)) $m"
    return $FAILED
}

# ---- main -----------------------------------------------------------------------------------

if [ -n "$CLUSTER" ] && in_cluster; then
    cluster_inner
    exit $?
fi
bench_resdir compare
ensure_packages openmpi-bin libopenmpi-dev python3-torch python3-numpy iproute2
build_targets collectived coll-perf
build_mpi mpi-allreduce
wait_quiet
{ describe_machine; echo "sweep: ${SWEEP[*]} (in place); repetitions: $REPEATS"; } \
    >"$RESDIR/machine.txt"
say "results in $RESDIR"
if [ -n "$CLUSTER" ]; then
    cluster_run $((REPEATS * 3 * RUN_LIMIT + 120)) "${ARGS[@]}" -o "$RESDIR" || FAILED=1
else
    loopback
fi
echo "load after: $(uptime | sed 's/.*load average: //')" >>"$RESDIR/machine.txt"
python3 "$HERE/compare-summary.py" "$RESDIR" || FAILED=1
say "results in $RESDIR (summary.md, raw.csv, rep*/)"
exit $FAILED
