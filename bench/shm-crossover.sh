#!/bin/bash
# shm-crossover.sh: where a single-node job's allreduce should leave the local ranks' shared
# memory for the daemon's multi-threaded path (shm_max_bytes). For each shape, coll-lat runs
# once with every size in shared memory (COLLD_SHM_MAX_BYTES=1G) and once with every size in
# the daemon (COLLD_SHM_MAX_BYTES=0), alternating, -R times; the table gives the median p50 of
# each path per size and the smallest size from which the daemon is faster at every larger one.
#
#   bench/shm-crossover.sh [-R N] [-o DIR] [-b MIN] [-e MAX] [-T SECONDS] [-S SHAPES]
#
# Defaults: 3 repetitions, 64K to 16M (x2 steps), 0.5 s per size, shapes "1x2 1x4", results in
# /tmp/coll-crossover-<date> (rep<k>/{shm,daemon}-<shape>.txt, table.md). Environment:
# BUILD_DIR (default <repo>/build-bench, configured Release when new). Exit status 1 when a
# run failed.
set -u

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init shm-crossover.sh
MINB=64K MAXB=16M BUDGET=0.5 QUIET_WAIT=60 RUN_LIMIT=300
SHAPES="1x2 1x4"

while [ $# -gt 0 ]; do
    case $1 in
    -S) SHAPES=${2:?}; shift 2 ;;
    *) bench_option "$@" || bench_usage_error "$1"; shift "$BENCH_SHIFT" ;;
    esac
done

run_path() { # dir path shape
    local limit=1G
    [ "$2" = daemon ] && limit=0
    launch_cmd 1 "${3#*x}"
    COLLD_SHM_MAX_BYTES=$limit run_one "$1/$2-$3" "${LAUNCH_CMD[@]}" -- \
        "$LAT" -b "$MINB" -e "$MAXB" -f 2 -T "$BUDGET"
}

run_config() { # dir shape path
    run_path "$1" "$3" "$2"
}

bench_resdir crossover
build_targets collectived coll-lat
wait_quiet
describe_machine >"$RESDIR/machine.txt"
CONFIGS=()
for s in $SHAPES; do
    CONFIGS+=("$s shm" "$s daemon")
done
bench_repeat run_config "${CONFIGS[@]}"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESDIR/machine.txt"
python3 - "$RESDIR" "$HERE" >"$RESDIR/table.md" <<'EOF' || FAILED=1
import os, re, sys

sys.path.insert(0, sys.argv[2])
import benchlib as bl

runs, problems = bl.repetitions(sys.argv[1], re.compile(r"(shm|daemon)-\d+x\d+"), bl.parse_lat)
print(open(os.path.join(sys.argv[1], "machine.txt")).read())
for shape in sorted({n.split("-")[1] for n in runs}, key=bl.shape_key):
    shm, dmn = runs.get("shm-" + shape, {}), runs.get("daemon-" + shape, {})
    sizes = sorted(set(shm) & set(dmn))
    print("\n### %s: p50 (us), median over repetitions\n" % shape)
    rows, faster = [], []
    for s in sizes:
        a, b = bl.med(shm[s], 0), bl.med(dmn[s], 0)
        faster.append(b < a)
        rows.append([bl.fmt_size(s), "%.1f" % a, "%.1f" % b, bl.ratio(a, b)])
    sys.stdout.write(bl.table(["size", "shared memory", "daemon", "shm / daemon"], rows))
    cross = next((s for i, s in enumerate(sizes) if all(faster[i:])), None)
    print("\ncrossover: %s" % (bl.fmt_size(cross) if cross else "none measured (shm faster)"))
for p in problems:
    print("PROBLEM: " + p)
EOF
cat "$RESDIR/table.md"
say "results in $RESDIR"
exit $FAILED
