#!/bin/bash
# stream-wait.sh: how long after a rank's stream writes its ready word a small allreduce on
# device buffers with that stream ends (docs/gpu.md, "Streams"), over the fake device layer with
# the staged path (COLL_DEVICE_FAKE_NO_EXEC): this build's daemon, whose copies in wait on the
# device for the word, against a baseline daemon (-b; e.g. one built from the commit before the
# device waits, whose loop polls the words every millisecond). Both use this build's ranks and
# fake layer. The results go to docs/benchmarks.md.
#
#   bench/stream-wait.sh [-o DIR] [-R ROUNDS] [-T TIMED] [-l LATE_MS] [-b BASE_DAEMON]
#
# Every run is one job of 1x2 or 2x2 on loopback (collective-launch), each rank running
# tests/gpu/stream_check --time TIMED --late LATE_MS: allreduces of 16 KiB with the rank's
# stream, whose ready word the fake writes LATE_MS after the call; rank 0 prints the median time
# from the word to the request's end. Each round runs every shape with each daemon, alternating
# which goes first; the summary is the median over rounds of each run's median. Timing is never
# a test. Defaults: -R 5, -T 101, -l 5.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
out=/tmp/coll-stream-wait-$(date +%Y%m%d-%H%M%S)
rounds=5 timed=101 late=5 base=
while getopts "o:R:T:l:b:" o; do
    case $o in
    o) out=$OPTARG ;;
    R) rounds=$OPTARG ;;
    T) timed=$OPTARG ;;
    l) late=$OPTARG ;;
    b) base=$OPTARG ;;
    *) sed -n 2,17p "$0" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
machine_file "$out/machine.txt" "$top" "$base"
daemons=(device-wait)
[ -n "$base" ] && daemons+=(baseline)
for ((r = 0; r < rounds; r++)); do
    for shape in 1x2 2x2; do
        for ((i = 0; i < ${#daemons[@]}; i++)); do
            d=${daemons[$(((i + r) % ${#daemons[@]}))]}
            bin=$build/daemon/collectived
            [ "$d" = baseline ] && bin=$base
            COLL_DEVICE_FAKE=1 COLL_DEVICE_FAKE_NO_EXEC=1 "$build/tools/collective-launch" \
                --nodes "${shape%x*}" --ranks-per-node "${shape#*x}" --daemon "$bin" --timeout 120 \
                -- "$build/tests/gpu/stream_check" --time "$timed" --late "$late" \
                >"$out/$d-$shape-$r.log" 2>&1
            ms=$(sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' "$out/$d-$shape-$r.log")
            echo "$d $shape $r $ms" | tee -a "$out/runs.txt"
        done
    done
done
echo "load after: $(uptime)" >>"$out/machine.txt"
echo "median over rounds of each run's median, ms from the ready word to the end:"
for d in "${daemons[@]}"; do
    for shape in 1x2 2x2; do
        awk -v d="$d" -v s="$shape" '$1 == d && $2 == s {print $4}' "$out/runs.txt" | sort -n |
            awk -v d="$d" -v s="$shape" \
                '{v[NR] = $1} END {printf "%-12s %s %.2f\n", d, s, v[int((NR + 1) / 2)]}'
    done
done
