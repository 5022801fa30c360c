#!/bin/sh
# ctest smoke test of coll-perf: a short checked allreduce sweep (out of place and in place) on
# 2 nodes x 2 ranks through
# the launcher must exit 0 and report "#wrong total: 0". Timings are printed, never judged.
# usage: perf-smoke.sh LAUNCHER DAEMON COLL_PERF
set -u
launcher=$1 daemon=$2 perf=$3
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
"$launcher" --nodes 2 --ranks-per-node 2 --daemon "$daemon" --timeout 150 -- \
    "$perf" --collective allreduce -b 4 -e 4M -f 32 -n 5 -w 1 --time-budget 1 -c 1 >"$out"
rc=$?
cat "$out"
if [ "$rc" -ne 0 ]; then
    echo "perf-smoke: the launcher exited with $rc" >&2
    exit 1
fi
if ! grep -q '^\[r0\] # #wrong total: 0 (all sizes correct)$' "$out"; then
    echo "perf-smoke: no '#wrong total: 0' line from rank 0" >&2
    exit 1
fi
echo "perf-smoke: ok"
