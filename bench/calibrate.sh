#!/bin/bash
# calibrate.sh: the constants of the cost model (daemon/engine/cost.h, docs/cost-model.md),
# measured on this machine, one set per link rate.
#
#   bench/calibrate.sh [--rates "1gbit 10gbit"] [-R N] [-o DIR] [-Q SECONDS]
#
# Per rate, on two hosts of bench/netns.sh joined by links of that rate:
#   iperf3 -t 3 from host 1 to host 0: what the link carries while it streams, beta;
#   ucx_perftest -t tag_lat over TCP between the hosts at 8 B, 64 KiB, 1 MiB and 4 MiB, the
#     ping-pong (reported: a busy-polling endpoint's latency; its slope
#     (a message after an idle turn restarts TCP's slow start and finds the token bucket full:
#     not the streaming rate the algorithms see);
#   coll-lat -p on 2 daemons x 1 rank, 8 B to 64 KiB: recursive doubling's one round.
#     alpha_op = the median of arrive + notify (the hand-offs between a rank and its daemon),
#     alpha = p50 at 8 B - alpha_op (a message between daemons, with the wake-ups);
#   coll-lat on 2 x 1 with the direct path, 8-512 B: alpha_direct (the mean latency: one round
#     between the nodes' leaders over their own endpoints, with their wake-ups);
#   the CPU the daemons and ranks use (their cgroup's CPU seconds, the difference of two
#     coll-perf runs of few and many operations, so that the start and the end cancel) on
#     2 daemons x 1 rank: 8 B allreduces by recursive doubling and the ring (cpu_op, cpu_msg),
#     the ring at 16 MiB (cpu_byte), fp16, onebit and topk:0.01 at 16 MiB (codec_cast,
#     codec_onebit, codec_topk: a whole operation's codec work per element); cost-model.py
#     solves them through the model (coll-cost's cpu_work_s); cpus is this machine's CPUs,
#     which every host shares (cpus_shared 1);
# and on this host:
#   coll-lat on 1 node x 2 ranks (pinned one per CPU), p50 at 16-512 B: alpha_shm (one step of
#     the ranks in shared memory; the first size of a run is left out: it pays the run's start);
#   reduce-bw at 64 MiB: gamma (float32, 2 sources: 3 bytes moved per byte reduced) and beta_mem
#     (memcpy's payload rate);
#   compress-bw at 16 MiB: codec_flop (PowerSGD's whole step at rank 2 on 1024 x 1024, over its
#     6 n r flops), and the kernels of fp16 (encode with error feedback + accumulate), 1-bit and
#     TopK (1 %, auto select) alone, which the params' comments show beside the whole
#     operations' codec_cast, codec_onebit and codec_topk.
# -R repeats every cluster measurement (3); the constants are medians over the repetitions.
# Writes DIR/params-<rate>.txt (KEY = VALUE lines, as coll-cost --params reads them; comments say
# what each came from) and DIR/calibration.md, also on stdout; the raw outputs beside them.
# Environment: BUILD_DIR (default <repo>/build-bench). Needs root (namespaces), iperf3 and
# ucx-utils (installed when missing). Exit status 1 when a measurement failed.
set -u

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init calibrate.sh
REPEATS=3 RUN_LIMIT=300 QUIET_WAIT=60
RATES="1gbit 10gbit"
PORT=13337

# The CPU runs: operations of the few and the many run of each, per size.
CPU_8B="500 20500" CPU_16M="5 65"

while [ $# -gt 0 ]; do
    case $1 in
    --rates) RATES=$(bench_value --rates "${2:-}" '([0-9]+[kmg]?bit|none)( ([0-9]+[kmg]?bit|none))*' \
            "rates like '1gbit 10gbit'") || exit 2; shift 2 ;;
    --inner) INNER=${2:?}; shift 2 ;; # internal: the measurements of one rate, in its cluster
    *) bench_option "$@" || bench_usage_error "$1"; shift "$BENCH_SHIFT" ;;
    esac
done

# ucx_perftest ping-pong of SIZE bytes between host 1 and host 0's server, into FILE.
pingpong() { # file size
    # shellcheck disable=SC2054 # tcp,self is one value
    local ucx=(env UCX_TLS=tcp,self UCX_NET_DEVICES="$NETNS_DEV")
    ip netns exec "${NETNS_PREFIX}0" "${ucx[@]}" timeout 60 ucx_perftest -p "$PORT" \
        >"$1.server" 2>&1 &
    local server=$! tries=0
    # The server listens once it has printed nothing yet; give it a moment (bounded).
    while [ $tries -lt 20 ] && ! ip netns exec "${NETNS_PREFIX}0" ss -ltn 2>/dev/null |
            grep -q ":$PORT "; do
        sleep 0.1
        tries=$((tries + 1))
    done
    run_one "$1" ip netns exec "${NETNS_PREFIX}1" "${ucx[@]}" ucx_perftest 10.9.0.1 -p "$PORT" \
        -t tag_lat -s "$2" -n "$([ "$2" -gt 65536 ] && echo 100 || echo 2000)"
    wait "$server"
}

# cpu_group_new, cpu_group_seconds DIR: a cgroup for one run's CPU time (cgroup v1's cpuacct or
# v2), its path; the CPU seconds its processes used (with the kernel's network work done in
# their context: this kernel charges softirqs to the task they interrupt).
cpu_group_new() {
    local root=/sys/fs/cgroup/cpuacct
    [ -d "$root" ] || root=/sys/fs/cgroup
    mkdir "$root/collectived-calibrate-$$" && echo "$root/collectived-calibrate-$$"
}
cpu_group_seconds() {
    if [ -f "$1/cpuacct.usage" ]; then
        awk '{ printf "%.4f", $1 / 1e9 }' "$1/cpuacct.usage"
    else
        awk '$1 == "usage_usec" { printf "%.4f", $2 / 1e6 }' "$1/cpu.stat"
    fi
}

# cpu_perf DIR NAME SIZE "FEW MANY" COLL-PERF ARGS...: two coll-perf runs of SIZE on 2 x 1,
# FEW and MANY timed operations, each into DIR/NAME-<ops>.txt with a line "# cpu_seconds X"
# appended: the CPU time of the launcher, daemons and ranks over the run.
cpu_perf() {
    local dir=$1 name=$2 size=$3 counts=$4 n group
    shift 4
    launch_cmd 2 1
    for n in $counts; do
        group=$(cpu_group_new) || { FAILED=1; return; }
        # shellcheck disable=SC2016 # the inner sh expands $$: itself, then exec the launcher
        COLLD_DIRECT_MAX_BYTES=0 run_one "$dir/$name-$n" sh -c \
            'echo $$ >"$0/cgroup.procs" && exec "$@"' "$group" "${LAUNCH_CMD[@]}" -- "$PERF" \
            -b "$size" -e "$size" -n "$n" -w 5 -c 0 --place in "$@" &&
            echo "# cpu_seconds $(cpu_group_seconds "$group")" >>"$dir/$name-$n.txt"
        rmdir "$group"
    done
}

inner() { # rate
    local dir k s
    for ((k = 1; k <= REPEATS; k++)); do
        dir=$RESDIR/$1/rep$k
        mkdir -p "$dir"
        ip netns exec "${NETNS_PREFIX}0" timeout 20 iperf3 -s -1 -B 10.9.0.1 >/dev/null 2>&1 &
        sleep 0.5
        run_one "$dir/iperf3" ip netns exec "${NETNS_PREFIX}1" iperf3 -c 10.9.0.1 -t 3 -f g
        wait
        for s in 8 65536 1048576 4194304; do
            pingpong "$dir/pingpong-$s" "$s"
        done
        launch_cmd 2 1
        # through the daemons: the direct path would take these sizes between the leaders
        COLLD_DIRECT_MAX_BYTES=0 run_one "$dir/coll-lat-2x1" "${LAUNCH_CMD[@]}" -- "$LAT" \
            -b 8 -e 64K -f 8 -n 1000 -T 0.5 -p
        # the leaders' own round (the direct path: one rank per node is its leader)
        COLLD_DIRECT_MAX_BYTES=64K run_one "$dir/coll-lat-direct-2x1" "${LAUNCH_CMD[@]}" -- \
            "$LAT" -b 8 -e 512 -f 8 -n 1000 -T 0.5
        cpu_perf "$dir" cpu-rd8 8 "$CPU_8B" --collective allreduce --algo rd
        cpu_perf "$dir" cpu-ring8 8 "$CPU_8B" --collective allreduce --algo ring
        cpu_perf "$dir" cpu-ring16m 16M "$CPU_16M" --collective allreduce --algo ring
        for c in fp16 onebit topk:0.01; do
            COLL_COMPRESSION=$c COLL_POOL_SIZE=2G cpu_perf "$dir" "cpu-${c%%:*}" 16M "$CPU_16M" \
                --collective allreduce
        done
    done
    return $FAILED
}

if [ -n "${INNER:-}" ]; then
    inner "$INNER"
    exit $?
fi
bench_resdir calibrate
ensure_packages iperf3 ucx-utils iproute2
build_targets collectived coll-lat coll-perf coll-cost reduce-bw compress-bw
wait_quiet
describe_machine >"$RESDIR/machine.txt"
say "results in $RESDIR"
for rate in $RATES; do
    say "links of $rate"
    RATE=$rate
    CLUSTER=2x1
    cluster_run $((REPEATS * 400 + 60)) --inner "$rate" -R "$REPEATS" -o "$RESDIR" || FAILED=1
done
CLUSTER=
mkdir -p "$RESDIR/host"
launch_cmd 1 2
# shellcheck disable=SC2016 # the rank's own sh expands it: rank r on CPU r, as latency.sh does
run_one "$RESDIR/host/coll-lat-1x2" "${LAUNCH_CMD[@]}" -- \
    sh -c 'exec taskset -c "$((COLL_RANK % $(nproc)))" "$@"' pin "$LAT" -b 8 -e 512 -n 2000 -T 0.5
run_one "$RESDIR/host/reduce-bw" "$REDUCE_BW" -s 64 -r 5
run_one "$RESDIR/host/compress-bw" "$COMPRESS_BW" -s 16 -r 5
echo "load after: $(uptime | sed 's/.*load average: //')" >>"$RESDIR/machine.txt"
python3 "$HERE/cost-model.py" calibrate "$RESDIR" $RATES | tee "$RESDIR/calibration.md" ||
    FAILED=1
exit $FAILED
