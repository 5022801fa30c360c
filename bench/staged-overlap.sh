#!/bin/bash
# staged-overlap.sh: the staged path's large allreduce on device buffers (docs/gpu.md, "The
# staged path") over the fake device layer, whose copies take time: the pipelined path of this
# build (staged+pipelined+ring: the copies overlap the ring, the copies back on streams of their
# own; staged+pipelined+local on one node) against the daemon of an earlier commit with the same
# fake device layer (the baseline: one that copies the whole input in before the algorithm and
# the whole output back after it, or an earlier pipelined path). The results go to
# docs/benchmarks.md.
#
#   bench/staged-overlap.sh [-o DIR] [-R ROUNDS] [-T TIMED] [-n COUNT] [-s SHAPE] [-b BASE_DAEMON]
#
# Every run is one job of SHAPE (NODESxRANKS, default 2x2: 2 daemons x 2 ranks) on loopback
# (collective-launch); on one node (1x2, 1x4) without the executor of device memory
# (COLL_DEVICE_FAKE_NO_EXEC=1), so the local algorithm runs on the staged copies; each rank
# running tests/gpu/staged_check --time TIMED: a checked float32 allreduce out of place of COUNT
# elements (default 16 Mi: 64 MiB) on device buffers, then TIMED of them (default 5), each after
# a barrier; rank 0 prints their median. Configurations (the fake's knobs, daemons and ranks):
#   none           copies instant, events at once: the ring and the host's memcpys alone
#   delay20        COLL_DEVICE_FAKE_COPY_DELAY_MS=20: every event 20 ms after its record, the
#                  copies themselves instant
#   delay20-bw     the same, and each stream at COLL_DEVICE_FAKE_COPY_MBPS=1000 (a node of 2
#                  ranks copies their 128 MiB in about 67 ms on its two streams, as much back)
#   delay20-slow   the same at 250 MB/s a stream (about 270 ms each way)
# Each round runs every configuration with this build's daemon and, with -b, with the baseline
# daemon, in an order rotated by one each round; the summary gives the median over rounds of
# each run's median. Timing is never a test.
#
# Options: -o results directory (default /tmp/coll-staged-overlap-<date>); -R rounds (3); -T
# timed allreduces per run (5); -n elements (16777216); -s the shape (2x2); -b the baseline's
# collectived.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
out=/tmp/coll-staged-overlap-$(date +%Y%m%d-%H%M%S)
rounds=3 timed=5 count=16777216 shape=2x2 base=
while getopts "o:R:T:n:s:b:" o; do
    case $o in
    o) out=$OPTARG ;;
    R) rounds=$OPTARG ;;
    T) timed=$OPTARG ;;
    n) count=$OPTARG ;;
    s) shape=$OPTARG ;;
    b) base=$OPTARG ;;
    *) sed -n 2,30p "$0" >&2; exit 2 ;;
    esac
done
nodes=${shape%x*} ppn=${shape#*x}
case $nodes$ppn in *[!0-9]* | "") echo "bad shape $shape (NODESxRANKS)" >&2; exit 2 ;; esac
local_knob=
[ "$nodes" = 1 ] && local_knob=COLL_DEVICE_FAKE_NO_EXEC=1
mkdir -p "$out"
machine_file "$out/machine.txt" "$top" "$base"

configs=(none delay20 delay20-bw delay20-slow)
daemons=(pipelined)
[ -n "$base" ] && daemons+=(baseline)

knobs() {
    case $1 in
    none) echo "COLL_DEVICE_FAKE=1" ;;
    delay20) echo "COLL_DEVICE_FAKE_COPY_DELAY_MS=20" ;;
    delay20-bw) echo "COLL_DEVICE_FAKE_COPY_DELAY_MS=20 COLL_DEVICE_FAKE_COPY_MBPS=1000" ;;
    delay20-slow) echo "COLL_DEVICE_FAKE_COPY_DELAY_MS=20 COLL_DEVICE_FAKE_COPY_MBPS=250" ;;
    esac
}

runs=()
for c in "${configs[@]}"; do
    for d in "${daemons[@]}"; do runs+=("$c/$d"); done
done
for ((r = 0; r < rounds; r++)); do
    for ((i = 0; i < ${#runs[@]}; i++)); do
        run=${runs[$(((i + r) % ${#runs[@]}))]}
        c=${run%/*} d=${run#*/}
        daemon=$build/daemon/collectived
        [ "$d" = baseline ] && daemon=$base
        log="$out/${c}-${d}.r$r.log"
        # shellcheck disable=SC2046 # the knobs are words
        env COLL_DEVICE_FAKE=1 $local_knob $(knobs "$c") "$build/tools/collective-launch" \
            --nodes "$nodes" --ranks-per-node "$ppn" --daemon "$daemon" --timeout 300 -- \
            "$build/tests/gpu/staged_check" --count "$count" --time "$timed" >"$log" 2>&1 ||
            echo "run $run round $r failed: $log" >&2
        grep -ho 'median [0-9.]* ms.*' "$log" | sed "s|^|$run r$r: |" || true
    done
done
echo "load after: $(uptime)" >>"$out/machine.txt"
echo "== median over rounds of each run's median (ms), $count floats, $shape"
for run in "${runs[@]}"; do
    c=${run%/*} d=${run#*/}
    grep -ho 'median [0-9.]* ms' "$out/${c}-${d}".r*.log | awk '{print $2}' | sort -n |
        awk -v run="$run" '{v[NR] = $1} END {if (NR) printf "%-24s %8.1f  (%d rounds)\n", run,
            v[int((NR + 1) / 2)], NR}'
done | tee "$out/summary.txt"
