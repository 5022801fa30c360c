#!/bin/bash
# calibrate.sh: the constants of the cost model (daemon/engine/cost.h, docs/cost-model.md),
# measured on this machine, one set per link rate.
#
#   bench/calibrate.sh [--rates "1gbit 10gbit"] [-R N] [-o DIR] [-Q SECONDS]
#
# Per rate, on two hosts of bench/netns.sh joined by links of that rate:
#   iperf3 -t 3 from host 1 to host 0: what the link carries while it streams, beta;
#   ucx_perftest -t tag_lat over TCP between the hosts at 8 B, 64 KiB, 1 MiB and 4 MiB, the
#     ping-pong: alpha_direct (8 B: what a leader's own endpoint costs); its slope is reported
#     (a message after an idle turn restarts TCP's slow start and finds the token bucket full:
#     not the streaming rate the algorithms see);
#   coll-lat -p on 2 daemons x 1 rank, 8 B to 64 KiB: recursive doubling's one round.
#     alpha_op = the median of arrive + notify (the hand-offs between a rank and its daemon),
#     alpha = p50 at 8 B - alpha_op (a message between daemons, with the wake-ups);
# and on this host:
#   coll-lat on 1 node x 2 ranks (pinned one per CPU), p50 at 16-512 B: alpha_shm (one step of
#     the ranks in shared memory; the first size of a run is left out: it pays the run's start);
#   reduce-bw at 64 MiB: gamma (float32, 2 sources: 3 bytes moved per byte reduced) and beta_mem
#     (memcpy's payload rate);
#   compress-bw at 16 MiB: codec_cast (fp16 encode with error feedback + accumulate),
#     codec_onebit, codec_topk (1 %, auto select) and codec_flop (PowerSGD's whole step at rank 2
#     on 1024 x 1024, over its 6 n r flops).
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
    done
    return $FAILED
}

if [ -n "${INNER:-}" ]; then
    inner "$INNER"
    exit $?
fi
bench_resdir calibrate
ensure_packages iperf3 ucx-utils iproute2
build_targets collectived coll-lat coll-cost reduce-bw compress-bw
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
