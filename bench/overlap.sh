#!/bin/bash
# overlap.sh: gradient bucketing with overlap against one allreduce after backward and one
# allreduce per tensor (examples/train/overlap.c), on loopback and on shaped 1 Gbit/s links; the
# results go to docs/benchmarks.md ("Overlapping communication with backward").
#
#   bench/overlap.sh [-o DIR] [-R ROUNDS] [-S STEPS] [-B IMAGES] [-N NICE] [-L SECONDS]
#                    [-Q SECONDS] [--only NAME] [-- OVERLAP ARGS...]
#
# Runs, each as one job of overlap (examples/train) under collective-launch, one trainer process
# per rank:
#   loopback-2x1        2 daemons x 1 rank on 127.0.0.1 (no shaping)
#   loopback-2x2        2 daemons x 2 ranks on 127.0.0.1
#   shaped-2x1          2 network namespaces joined by links shaped to 1 Gbit/s (bench/netns.sh),
#                       one daemon and one rank per namespace: the main configuration
#   shaped-2x1-default  the same with the library's bucket caps (25 MiB, first 1 MiB)
#   shaped-2x1-wide     the same with 4 wide layers (--hidden 512,2048x4, 14.1 M parameters)
#   shaped-4x1          4 namespaces, one daemon and one rank each
# Model: 784-1024x12-10 (12.4 M parameters, 49.4 MB of float32 gradients), bucket cap 4 MiB
# (first bucket 1 MiB: one layer per bucket), IMAGES images per rank and step (the global batch
# is IMAGES x ranks). On the shaped links one step's communication is comparable to its compute
# and each layer's gradient leaves the link before the next one is ready. OVERLAP ARGS come last
# on every run's command line, so they override (--hidden, --bucket-cap-mb, ...).
#
# Options: -o results directory (default /tmp/coll-overlap-<date>); -R rounds (8) and -S
# measured steps per round and mode (2), warmup 1 step per block; -B images per rank (512);
# -N nice of every daemon and trainer (default 0: unchanged; e.g. -5 on a shared machine), set
# as the autogroup nice too, since collective-launch starts each process in its own session and
# with autogroup scheduling a process's nice only counts within its session; -L bound of one run
# in seconds (900); -Q seconds to wait for a load average below 0.5 before each run (0; it
# measures anyway after a warning); --only NAME runs only that configuration.
# Environment: BUILD_DIR (default <repo>/build-bench, configured Release when new).
#
# Needs root for the shaped runs (network namespaces, tc; iproute2) and for a negative -N.
# Outputs: <dir>/<name>.txt (the job's output), <dir>/table.md (every run's table, "overlap:"
# lines and load averages), <dir>/machine.txt. Exit status 1 when a run failed.
# bench/overlap-summary.py DIR... gives the medians over several results directories.
set -u

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init overlap.sh
REPEATS=8 RUN_LIMIT=900 QUIET_WAIT=0
STEPS=2
IMAGES=512
ONLY=
MODEL=(--hidden 1024x12 --bucket-cap-mb 4 --first-bucket-cap-mb 1)
EXTRA=()

while [ $# -gt 0 ]; do
    case $1 in
    -S) STEPS=$(bench_value -S "${2:-}" "$NUM") || exit 2; shift 2 ;;
    -B) IMAGES=$(bench_value -B "${2:-}" "$NUM") || exit 2; shift 2 ;;
    --only) ONLY=${2:?}; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) bench_option "$@" || bench_usage_error "$1"; shift "$BENCH_SHIFT" ;;
    esac
done
ROUNDS=$REPEATS

# run NAME NODES RANKS SHAPED [extra overlap args]
run() {
    local name=$1 nodes=$2 ranks=$3 shaped=$4 out before
    shift 4
    [ -z "$ONLY" ] || [ "$ONLY" = "$name" ] || return 0
    out="$RESDIR/$name.txt"
    wait_quiet
    before=$(cut -d' ' -f1-3 /proc/loadavg)
    local args=("$OVERLAP" "${MODEL[@]}" --batch $((IMAGES * nodes * ranks)) --rounds "$ROUNDS"
                --steps "$STEPS" --warmup 1 --label "$name" "$@" "${EXTRA[@]}")
    say "$name: $nodes x $ranks$([ "$shaped" = 1 ] && echo " (shaped)") -> $out"
    if [ "$shaped" = 1 ]; then
        # netns.sh gives the command NETNS_PREFIX and NETNS_ADDR_TEMPLATE: expand them there.
        timeout -k 10 "$RUN_LIMIT" "$HERE/netns.sh" -n "$nodes" -t $((RUN_LIMIT - 30)) -- \
            sh -c 'l=$1 n=$2 m=$3 d=$4 t=$5; shift 5
                   exec env COLL_POOL_SIZE=1G "$l" --nodes "$n" --ranks-per-node "$m" \
                       --netns-prefix "$NETNS_PREFIX" --netns-addr "$NETNS_ADDR_TEMPLATE" \
                       --daemon "$d" --timeout "$t" -- "$@"' \
            sh "$LAUNCH" "$nodes" "$ranks" "$DAEMON" $((RUN_LIMIT - 60)) "${args[@]}" \
            >"$out" 2>&1
    else
        COLL_POOL_SIZE=1G timeout -k 10 "$RUN_LIMIT" "$LAUNCH" --nodes "$nodes" \
            --ranks-per-node "$ranks" --daemon "$DAEMON" --timeout $((RUN_LIMIT - 30)) \
            -- "${args[@]}" >"$out" 2>&1
    fi
    local rc=$?
    echo "$name: load average before $before, after $(cut -d' ' -f1-3 /proc/loadavg)" \
        >>"$RESDIR/machine.txt"
    if [ $rc -ne 0 ] || ! grep -q "^\[r0\] overlap: " "$out"; then
        say "$name failed (exit $rc); see $out"
        FAILED=1
        return
    fi
    { sed -n 's/^\[r0\] //p' "$out" | grep -v "^overlap: "; echo
      sed -n 's/^\[r0\] \(overlap: .*\)/    \1/p' "$out"
      echo "    load average before $before, after $(cut -d' ' -f1-3 /proc/loadavg)"
      echo; } >>"$RESDIR/table.md"
}

bench_resdir overlap
build_targets collectived overlap
if [ "$NICE" != 0 ]; then
    DAEMON=$(bench_nice_wrapper collectived "$DAEMON") || exit 1
    OVERLAP=$(bench_nice_wrapper overlap "$OVERLAP") || exit 1
fi
{ describe_machine
  echo "model: ${MODEL[*]} ${EXTRA[*]}, $IMAGES images per rank, rounds $ROUNDS, steps $STEPS," \
       "nice $NICE"; } >"$RESDIR/machine.txt"
: >"$RESDIR/table.md"
run loopback-2x1 2 1 0
run loopback-2x2 2 2 0
run shaped-2x1 2 1 1
run shaped-2x1-default 2 1 1 --bucket-cap-mb 0 --first-bucket-cap-mb 0
run shaped-2x1-wide 2 1 1 --hidden 512,2048x4
run shaped-4x1 4 1 1
cat "$RESDIR/table.md"
say "results in $RESDIR"
exit $FAILED
