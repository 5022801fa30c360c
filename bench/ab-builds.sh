#!/bin/bash
# ab-builds.sh: two builds of collectived side by side in one sitting, e.g. before and after a
# change that must not cost speed. coll-perf allreduce (float32 SUM, out of place) busbw at
# chosen sizes for chosen shapes (nodes x ranks per node) through collective-launch, the two
# builds alternating (A B, then B A, ...), R repetitions; the table gives the median busbw of
# each build and their ratio B / A, with the min-max.
#
#   bench/ab-builds.sh -a BUILD_A -b BUILD_B [-R 5] [-s "4K 1M 256M"] [-S "1x4 2x2"] [-T 2]
#                      [-f 256] [-o DIR]
#
# BUILD_A and BUILD_B are build directories (each with daemon/collectived, bench/coll-perf and
# tools/collective-launch). -T: seconds per size (coll-perf -T). -f: the factor between the
# sizes coll-perf sweeps from the first to the last of -s (256; 4 for 4K 16K 64K 256K 1M). Raw outputs in DIR (default
# /tmp/ab-builds-<date>): <build>-<shape>-rep<k>.json; the markdown table goes to stdout.
# Every run is bounded by timeout. Exit status 1 when a run failed or a result was wrong.
set -u

REPEATS=5
SIZES="4K 1M 256M"
SHAPES="1x4 2x2"
BUDGET=2
FACTOR=256
A=
B=
RESDIR=

say() { echo "ab-builds.sh: $*" >&2; }
die() { say "$*"; exit 1; }

while getopts "a:b:R:s:S:T:f:o:" opt; do
    case $opt in
    a) A=$OPTARG ;;
    b) B=$OPTARG ;;
    R) REPEATS=$OPTARG ;;
    s) SIZES=$OPTARG ;;
    S) SHAPES=$OPTARG ;;
    T) BUDGET=$OPTARG ;;
    f) FACTOR=$OPTARG ;;
    o) RESDIR=$OPTARG ;;
    *) die "usage: ab-builds.sh -a BUILD_A -b BUILD_B [-R N] [-s SIZES] [-S SHAPES] [-T S] [-f F] [-o DIR]" ;;
    esac
done
[ -n "$A" ] && [ -n "$B" ] || die "give both builds: -a BUILD_A -b BUILD_B"
for d in "$A" "$B"; do
    for f in daemon/collectived bench/coll-perf tools/collective-launch; do
        [ -x "$d/$f" ] || die "$d/$f is missing (build it first)"
    done
done
RESDIR=${RESDIR:-/tmp/ab-builds-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RESDIR"

# run BUILD LABEL SHAPE REP: one coll-perf sweep over SIZES; writes its JSON.
run() {
    local build=$1 label=$2 shape=$3 rep=$4 nodes=${3%x*} rpn=${3#*x} out
    out="$RESDIR/$label-$shape-rep$rep.json"
    local min max
    min=$(echo "$SIZES" | awk '{print $1}')
    max=$(echo "$SIZES" | awk '{print $NF}')
    # shellcheck disable=SC2046 # budget_and_json gives several words, none with spaces
    timeout 900 "$build/tools/collective-launch" --nodes "$nodes" --ranks-per-node "$rpn" \
        --daemon "$build/daemon/collectived" -- "$build/bench/coll-perf" -b "$min" -e "$max" \
        -f "$FACTOR" $(budget_and_json "$build" "$out") >"$out.txt" 2>&1 ||
        { say "run failed: $out.txt"; return 1; }
}

# The time budget and JSON flags of BUILD's coll-perf: nccl-tests' flags since issue 16
# (--time-budget, -J; -T became the timeout), -T and --json before.
budget_and_json() {
    if "$1/bench/coll-perf" --help 2>&1 | grep -q -- --time-budget; then
        echo "--time-budget $BUDGET -J $2"
    else
        echo "-T $BUDGET --json $2"
    fi
}

failed=0
for rep in $(seq 1 "$REPEATS"); do
    for shape in $SHAPES; do
        if [ $((rep % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
        for which in $order; do
            if [ "$which" = A ]; then build=$A; else build=$B; fi
            say "rep $rep, $shape, build $which"
            run "$build" "$which" "$shape" "$rep" || failed=1
        done
    done
done

/usr/bin/env python3 - "$RESDIR" "$SIZES" "$SHAPES" <<'EOF'
import glob, json, os, statistics, sys
resdir, sizes, shapes = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def parse(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)
def busbw(label, shape, size):
    out = []
    for path in sorted(glob.glob(os.path.join(resdir, "%s-%s-rep*.json" % (label, shape)))):
        with open(path) as f:
            for row in json.load(f)["rows"]:
                if row["bytes"] == size:  # coll-perf before issue 16 had no placements
                    out.append(row["busbw"] if "busbw" in row else row["out_of_place"]["busbw"])
    return out
print("| shape | size | busbw A (GB/s) | busbw B (GB/s) | B / A | A min-max | B min-max |")
print("|---|---|---|---|---|---|---|")
for shape in shapes:
    for s in sizes:
        a, b = busbw("A", shape, parse(s)), busbw("B", shape, parse(s))
        if not a or not b:
            print("| %s | %s | - | - | - | - | - |" % (shape, s))
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        print("| %s | %s | %.3f | %.3f | %.2f | %.3f-%.3f | %.3f-%.3f |" % (
            shape, s, ma, mb, mb / ma if ma else 0, min(a), max(a), min(b), max(b)))
EOF
exit "$failed"
