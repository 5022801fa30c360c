#!/bin/bash
# compare.sh: allreduce of collectived against Open MPI and torch.distributed gloo on this
# machine, with the same sweep, timing rules and conventions (docs/benchmarks.md).
#
#   bench/compare.sh [-R N] [-o DIR] [-T SECONDS] [-n ITERS] [-w WARMUP] [-b MIN] [-e MAX]
#   bench/compare.sh --shaped [same options]
#
# Loopback mode (default): float32 SUM allreduce from 4 KiB to 256 MiB in x4 steps at 2 and 4
# ranks: collectived (coll-perf through collective-launch) as 2x1 and 1x2 (nodes x ranks per
# node) for 2 ranks, 1x4, 2x2 and 4x1 for 4 ranks (1x4, one daemon with four ranks, is the
# shape of Open MPI's four processes on one host); Open MPI MPI_Allreduce
# (bench/mpi-allreduce.c, default shared-memory transport) and torch gloo (bench/torch-gloo.py,
# TCP on lo) with 2 and 4 processes. One repetition runs every configuration once, the libraries
# alternating, the order rotated by one per repetition; -R repetitions (default 3); the table
# gives the medians.
#
# --shaped: 4 network namespaces on a bridge with every link shaped to 1 Gbit/s
# (bench/netns.sh), one daemon per namespace (4x1), 4 KiB to 64 MiB; torch gloo with one rank per
# namespace on the same links for comparison. The table gives busbw against the link (1 Gbit/s
# = 0.125 GB/s) and the target (>= 0.118 GB/s from 1 MiB up).
#
# Options: -R repetitions (3); -o results directory (default /tmp/coll-compare-<date>);
# -T seconds per size (5), -n iterations at most (100), -w warmup (5) as coll-perf; -b/-e the
# sweep; -L seconds one run may take (1200); -Q seconds to wait for a load average below 0.5
# before measuring (180; it measures anyway after a warning).
# Environment: BUILD_DIR (default <repo>/build-bench, configured Release when new).
#
# It installs what is missing (apt: openmpi-bin libopenmpi-dev python3-torch python3-numpy
# iproute2, and the project's build dependencies through deploy/install-deps.sh), builds
# collectived and coll-perf, builds mpi-allreduce with mpicc into the results directory, and
# bounds every run with timeout. Raw outputs: <dir>/rep<k>/<lib>-<shape>.txt (+ .err), all rows
# in <dir>/raw.csv, the table and min-max in <dir>/summary.md; the markdown table goes to
# stdout, progress to stderr. Exit status 1 when a run failed or a result was wrong.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(dirname "$HERE")
BUILD=${BUILD_DIR:-$TOP/build-bench}
REPEATS=3
SHAPED=0
INNER=0
RESDIR=
BUDGET=5
ITERS=100
WARMUP=5
MINB=4K
MAXB=
RUN_LIMIT=1200
QUIET_WAIT=180
PY=/usr/bin/python3

say() { echo "compare.sh: $*" >&2; }
die() { say "$*"; exit 1; }

while [ $# -gt 0 ]; do
    case $1 in
    -R) REPEATS=${2:?}; shift 2 ;;
    -o) RESDIR=${2:?}; shift 2 ;;
    -T) BUDGET=${2:?}; shift 2 ;;
    -n) ITERS=${2:?}; shift 2 ;;
    -w) WARMUP=${2:?}; shift 2 ;;
    -b) MINB=${2:?}; shift 2 ;;
    -e) MAXB=${2:?}; shift 2 ;;
    -L) RUN_LIMIT=${2:?}; shift 2 ;;
    -Q) QUIET_WAIT=${2:?}; shift 2 ;;
    --shaped) SHAPED=1; shift ;;
    --in-netns) INNER=1; shift ;; # internal: the shaped runs, under bench/netns.sh
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) say "unknown option $1 (see --help)"; exit 2 ;;
    esac
done
[ -n "$MAXB" ] || { [ $SHAPED = 1 ] && MAXB=64M || MAXB=256M; }
SWEEP=(-b "$MINB" -e "$MAXB" -f 4 -n "$ITERS" -w "$WARMUP" -T "$BUDGET" -c 1)
# coll-perf takes nccl-tests' flags, where -T is an operation's timeout: the budget is its own.
PERF_SWEEP=(-b "$MINB" -e "$MAXB" -f 4 -n "$ITERS" -w "$WARMUP" --time-budget "$BUDGET" -c 1)
LAUNCH=$BUILD/tools/collective-launch
PERF=$BUILD/bench/coll-perf
DAEMON=$BUILD/daemon/collectived

# ---- set-up ---------------------------------------------------------------------------------

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

build() {
    build_targets collectived coll-perf
    timeout 120 mpicc -O2 -o "$RESDIR/mpi-allreduce" "$HERE/mpi-allreduce.c" ||
        die "mpicc failed"
}

# ---- one run ----------------------------------------------------------------------------------

run_coll() { # dir nodes ranks_per_node
    run_one "$1/coll-$2x$3" "$LAUNCH" --nodes "$2" --ranks-per-node "$3" --daemon "$DAEMON" \
        --timeout "$((RUN_LIMIT - 20))" -- \
        "$PERF" --collective allreduce -d float -o sum "${PERF_SWEEP[@]}"
}

run_mpi() { # dir np
    run_one "$1/mpi-$2" mpirun --allow-run-as-root --oversubscribe --mca oob_tcp_if_include lo \
        -np "$2" "$RESDIR/mpi-allreduce" "${SWEEP[@]}"
}

run_gloo() { # dir np
    run_one "$1/gloo-$2" env GLOO_SOCKET_IFNAME=lo "$PY" "$HERE/torch-gloo.py" --world-size "$2" \
        "${SWEEP[@]}"
}

# ---- loopback comparison ----------------------------------------------------------------------

loopback() {
    local configs=("coll 2 1" "mpi 2" "gloo 2" "coll 1 2" "coll 4 1" "mpi 4" "gloo 4" "coll 2 2"
        "coll 1 4")
    local k i n=${#configs[@]} dir c
    for ((k = 1; k <= REPEATS; k++)); do
        dir=$RESDIR/rep$k
        mkdir -p "$dir"
        say "repetition $k of $REPEATS (load $(cut -d' ' -f1 /proc/loadavg))"
        for ((i = 0; i < n; i++)); do
            read -r -a c <<<"${configs[$(((i + k - 1) % n))]}"
            "run_${c[0]}" "$dir" "${c[@]:1}"
        done
    done
}

# ---- shaped links -----------------------------------------------------------------------------

# Inside bench/netns.sh: NETNS_PREFIX, NETNS_COUNT, NETNS_ADDR_TEMPLATE, NETNS_DEV are set.
run_coll_netns() { # dir
    run_one "$1/coll-${NETNS_COUNT}x1-shaped" "$LAUNCH" --nodes "$NETNS_COUNT" --ranks-per-node 1 \
        --netns-prefix "$NETNS_PREFIX" --netns-addr "$NETNS_ADDR_TEMPLATE" --daemon "$DAEMON" \
        --timeout "$((RUN_LIMIT - 20))" -- \
        "$PERF" --collective allreduce -d float -o sum "${PERF_SWEEP[@]}"
}

# torch gloo, rank r in namespace <prefix>r on its veth device.
run_gloo_netns() { # dir
    run_one "$1/gloo-${NETNS_COUNT}-shaped" "$PY" "$HERE/torch-gloo.py" --world-size "$NETNS_COUNT" \
        --netns-prefix "$NETNS_PREFIX" --ifname "$NETNS_DEV" "${SWEEP[@]}"
}

shaped_inner() {
    local k dir
    for ((k = 1; k <= REPEATS; k++)); do
        dir=$RESDIR/rep$k
        mkdir -p "$dir"
        say "shaped repetition $k of $REPEATS (load $(cut -d' ' -f1 /proc/loadavg))"
        if [ $((k % 2)) = 1 ]; then
            run_coll_netns "$dir"; run_gloo_netns "$dir"
        else
            run_gloo_netns "$dir"; run_coll_netns "$dir"
        fi
    done
    return $FAILED
}

# ---- main -------------------------------------------------------------------------------------

if [ $INNER = 1 ]; then
    if [ -z "${NETNS_PREFIX:-}" ] || [ -z "$RESDIR" ]; then
        die "--in-netns is internal to --shaped"
    fi
    shaped_inner
    exit $?
fi

RESDIR=${RESDIR:-/tmp/coll-compare-$(date +%Y%m%d-%H%M%S)$([ $SHAPED = 1 ] && echo -shaped)}
mkdir -p "$RESDIR" || die "cannot create $RESDIR"
RESDIR=$(cd "$RESDIR" && pwd)
ensure_packages openmpi-bin libopenmpi-dev python3-torch python3-numpy iproute2
build
wait_quiet
{ describe_machine; echo "sweep: ${SWEEP[*]}; repetitions: $REPEATS"; } >"$RESDIR/machine.txt"
say "results in $RESDIR"
if [ $SHAPED = 1 ]; then
    total=$((REPEATS * 2 * RUN_LIMIT + 60))
    "$HERE/netns.sh" -n 4 -r 1gbit -t "$total" -- "$0" --in-netns -o "$RESDIR" -R "$REPEATS" \
        -T "$BUDGET" -n "$ITERS" -w "$WARMUP" -b "$MINB" -e "$MAXB" -L "$RUN_LIMIT" || FAILED=1
else
    loopback
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESDIR/machine.txt"

{
    echo "# collectived allreduce comparison$([ $SHAPED = 1 ] && echo ", shaped 1 Gbit/s links")"
    echo
    sed 's/^/    /' "$RESDIR/machine.txt"
    echo
    if [ $SHAPED = 1 ]; then
        echo "busbw in GB/s (nccl-tests: algbw * 2(n-1)/n, n = 4), median of $REPEATS; link" \
            "1 Gbit/s = 0.125 GB/s; target >= 0.118 GB/s from 1 MiB up."
    else
        echo "busbw in GB/s (nccl-tests: algbw * 2(n-1)/n), time per op in us (average over" \
            "ranks), median of $REPEATS runs; ratios of busbw (> 1: collectived faster)."
    fi
    echo
} >"$RESDIR/table.md"
summary_opts=()
[ $SHAPED = 1 ] && summary_opts=(--shaped)
python3 "$HERE/compare-summary.py" "$RESDIR" "${summary_opts[@]}" >>"$RESDIR/table.md" || FAILED=1
cat "$RESDIR/table.md"
say "results in $RESDIR (table.md, summary.md, raw.csv, rep*/)"
exit $FAILED
