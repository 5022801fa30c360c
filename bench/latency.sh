#!/bin/bash
# latency.sh: allreduce latency of collectived against Open MPI, per size from 8 B to 1 MiB:
# p50, p90 and p99 over iterations (bench/lat-common.h), all libraries in one run, alternating.
#
#   bench/latency.sh [-R N] [-o DIR] [-b MIN] [-e MAX] [-n ITERS] [-T SECONDS] [-S SHAPES]
#                    [-p] [-Q SECONDS] [-L SECONDS]
#
# Shapes (-S, default "1x2 1x4 2x2 4x1", nodes x ranks per node): collectived through
# collective-launch (coll-lat), Open MPI with as many processes on this host (mpi-lat) over its
# default transport (shared memory, "mpi"), and for the multi-node shapes also over its TCP
# transport on loopback ("mpi-tcp": the transport collectived's daemons would use between
# hosts). A repetition runs every configuration once, the order rotated by one per repetition;
# -R repetitions (default 5); the table gives the median over repetitions of each percentile.
# Pinning, where it is fair: 2 ranks on this 2-CPU machine are pinned one per CPU for both
# libraries (Open MPI's default for 2 processes; collectived's ranks with taskset, its daemon
# free); 4 ranks are oversubscribed and pinned by neither.
#
# Options: -b/-e the sizes (8, 1M; x2 steps), -n iterations per size at most (2000), -T seconds
# per size (2), -p the phases of collectived's operations (coll-lat -p), -Q seconds to wait for
# a load average below 0.5 first (180), -L seconds one run may take (600), -o the results
# directory (default /tmp/coll-latency-<date>).
# Environment: BUILD_DIR (default <repo>/build-bench, configured Release when new).
#
# Raw outputs: <dir>/rep<k>/<lib>-<shape>.txt (+ .err); <dir>/machine.txt (state, loads);
# <dir>/table.md (bench/latency-summary.py), also on stdout. Exit status 1 when a run failed.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(dirname "$HERE")
BUILD=${BUILD_DIR:-$TOP/build-bench}
REPEATS=5
RESDIR=
MINB=8
MAXB=1M
ITERS=2000
BUDGET=2
SHAPES="1x2 1x4 2x2 4x1"
PHASES=()
QUIET_WAIT=180
RUN_LIMIT=600

say() { echo "latency.sh: $*" >&2; }
die() { say "$*"; exit 1; }

while [ $# -gt 0 ]; do
    case $1 in
    -R) REPEATS=${2:?}; shift 2 ;;
    -o) RESDIR=${2:?}; shift 2 ;;
    -b) MINB=${2:?}; shift 2 ;;
    -e) MAXB=${2:?}; shift 2 ;;
    -n) ITERS=${2:?}; shift 2 ;;
    -T) BUDGET=${2:?}; shift 2 ;;
    -S) SHAPES=${2:?}; shift 2 ;;
    -p) PHASES=(-p); shift ;;
    -Q) QUIET_WAIT=${2:?}; shift 2 ;;
    -L) RUN_LIMIT=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) say "unknown option $1 (see --help)"; exit 2 ;;
    esac
done
SWEEP=(-b "$MINB" -e "$MAXB" -f 2 -n "$ITERS" -T "$BUDGET")
LAUNCH=$BUILD/tools/collective-launch
DAEMON=$BUILD/daemon/collectived

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

build() {
    build_targets collectived coll-lat
    timeout 120 mpicc -O2 -o "$RESDIR/mpi-lat" "$HERE/mpi-lat.c" || die "mpicc failed"
}

# Whether NP ranks are pinned one per CPU: 2 ranks on a machine with at least 2 CPUs.
pinned() { [ "$1" = 2 ] && [ "$(nproc)" -ge 2 ]; }

run_coll() { # dir nodes ranks_per_node
    local cmd=("$BUILD/bench/coll-lat" "${SWEEP[@]}" "${PHASES[@]}")
    if pinned $(($2 * $3)); then # rank r on CPU r
        # shellcheck disable=SC2016 # the rank's own sh expands them
        cmd=(sh -c 'exec taskset -c "$COLL_RANK" "$@"' pin "${cmd[@]}")
    fi
    run_one "$1/coll-$2x$3" "$LAUNCH" --nodes "$2" --ranks-per-node "$3" --daemon "$DAEMON" \
        --timeout "$((RUN_LIMIT - 20))" -- "${cmd[@]}"
}

run_mpi() { # dir nodes ranks_per_node transport
    local np=$(($2 * $3)) bind=(--bind-to none) btl=()
    pinned "$np" && bind=(--bind-to core)
    # shellcheck disable=SC2054 # tcp,self is one value of --mca btl
    [ "$4" = tcp ] && btl=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
    run_one "$1/mpi${4:+-$4}-$2x$3" mpirun --allow-run-as-root --oversubscribe \
        --mca oob_tcp_if_include lo "${bind[@]}" "${btl[@]}" -np "$np" "$RESDIR/mpi-lat" \
        "${SWEEP[@]}"
}

# Every configuration of one repetition, in shape order; Open MPI over TCP for the shapes with
# several (simulated) nodes.
configs() {
    local s
    for s in $SHAPES; do
        echo "coll ${s%x*} ${s#*x}"
        echo "mpi ${s%x*} ${s#*x} "
        [ "${s%x*}" -gt 1 ] && echo "mpi ${s%x*} ${s#*x} tcp"
    done
}

measure() {
    local all k i n dir c
    mapfile -t all < <(configs)
    n=${#all[@]}
    for ((k = 1; k <= REPEATS; k++)); do
        dir=$RESDIR/rep$k
        mkdir -p "$dir"
        say "repetition $k of $REPEATS (load $(cut -d' ' -f1 /proc/loadavg))"
        for ((i = 0; i < n; i++)); do
            read -r -a c <<<"${all[$(((i + k - 1) % n))]}"
            if [ "${c[0]}" = coll ]; then
                run_coll "$dir" "${c[1]}" "${c[2]}"
            else
                run_mpi "$dir" "${c[1]}" "${c[2]}" "${c[3]:-}"
            fi
        done
    done
}

RESDIR=${RESDIR:-/tmp/coll-latency-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RESDIR" || die "cannot create $RESDIR"
RESDIR=$(cd "$RESDIR" && pwd)
ensure_packages openmpi-bin libopenmpi-dev
build
wait_quiet
{ describe_machine; echo "sweep: ${SWEEP[*]}; shapes: $SHAPES; repetitions: $REPEATS"; } \
    >"$RESDIR/machine.txt"
say "results in $RESDIR"
measure
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESDIR/machine.txt"
{
    echo "# collectived and Open MPI allreduce latency (float32 sum, out of place)"
    echo
    sed 's/^/    /' "$RESDIR/machine.txt"
    echo
    python3 "$HERE/latency-summary.py" "$RESDIR" || FAILED=1
} >"$RESDIR/table.md"
cat "$RESDIR/table.md"
say "results in $RESDIR (table.md, rep*/)"
exit $FAILED
