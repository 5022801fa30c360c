#!/usr/bin/env bash
# Run every libFuzzer harness of tests/fuzz for a bounded time and fail on any finding.
#
#   tests/fuzz/run-fuzz.sh [--merge] [--build DIR] [--no-build] [SECONDS] [HARNESS...]
#
# SECONDS per harness: the argument, else $COLL_FUZZ_SECONDS, else 60. Harnesses: the names
# given (client_msg, frame, ...), else every corpus/<name> of the tree. First it configures and
# builds DIR (default build-fuzz: cmake -DCMAKE_C_COMPILER=clang -DCOLL_FUZZ=ON, target
# `fuzzers`; incremental), unless --no-build. Up to $COLL_FUZZ_JOBS harnesses (default: the
# number of CPUs) run at once.
#
# Each harness fuzzes a temporary copy of its seed corpus (the tree is left alone unless
# --merge is given: then inputs that add coverage are merged into corpus/<name>), with its
# dictionary <name>.dict when there is one, a memory limit (-rss_limit_mb), a time limit per
# input (-timeout) and LeakSanitizer. A crash, a leak, a timeout or running out of memory fails
# the script, which prints the reproducer and the command that replays it; the temporary
# directory of a failed harness is kept.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=$top/build-fuzz
merge=0
configure=1
seconds=${COLL_FUZZ_SECONDS:-60}
jobs=${COLL_FUZZ_JOBS:-$(nproc)}
rss_mb=${COLL_FUZZ_RSS_MB:-2048}
names=()

while [ $# -gt 0 ]; do
    case $1 in
    --merge) merge=1 ;;
    --build) build=$(mkdir -p "$2" && cd "$2" && pwd); shift ;;
    --no-build) configure=0 ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    [0-9]*) seconds=$1 ;;
    -*) echo "run-fuzz: unknown option $1" >&2; exit 2 ;;
    *) names+=("$1") ;;
    esac
    shift
done
if [ ${#names[@]} -eq 0 ]; then
    for d in "$here"/corpus/*/; do
        names+=("$(basename "$d")")
    done
fi

# Longest input tried: the HTTP harness must be able to exceed COLL_HTTP_REQUEST_MAX (16 KiB).
max_len() {
    case $1 in
    http_request) echo 20000 ;;
    *) echo 8192 ;;
    esac
}

# run_one NAME: fuzz one harness; writes $work/NAME/status (ok or failed) and the log.
run_one() {
    local name=$1 dir=$work/$1 bin=$build/tests/fuzz/fuzz_$1 dict=()
    mkdir -p "$dir/corpus" "$dir/artifacts"
    cp -r "$here/corpus/$name/." "$dir/corpus/"
    if [ -f "$here/$name.dict" ]; then
        dict=(-dict="$here/$name.dict")
    fi
    # -max_total_time bounds the run; timeout(1) is only a backstop if the harness hangs.
    if timeout --kill-after=10 $((seconds + 120)) "$bin" -max_total_time="$seconds" \
        -rss_limit_mb="$rss_mb" -timeout=10 -max_len="$(max_len "$name")" -detect_leaks=1 \
        -print_final_stats=1 -artifact_prefix="$dir/artifacts/" "${dict[@]}" "$dir/corpus" \
        >"$dir/log" 2>&1 && [ -z "$(ls -A "$dir/artifacts")" ]; then
        echo ok >"$dir/status"
    else
        echo failed >"$dir/status"
    fi
}

if [ $configure -eq 1 ]; then
    echo "run-fuzz: building the harnesses in $build"
    mkdir -p "$build"
    exec 9>"$build/.build-lock"
    flock 9
    if ! { cmake -S "$top" -B "$build" -DCMAKE_C_COMPILER=clang -DCOLL_FUZZ=ON &&
           cmake --build "$build" -j "$(nproc)" --target fuzzers; } >"$build/fuzz-build.log" 2>&1
    then
        tail -40 "$build/fuzz-build.log" >&2
        echo "run-fuzz: building the harnesses failed; log $build/fuzz-build.log" >&2
        exit 2
    fi
    exec 9>&-
fi

for name in "${names[@]}"; do
    if [ ! -x "$build/tests/fuzz/fuzz_$name" ] || [ ! -d "$here/corpus/$name" ]; then
        echo "run-fuzz: no harness $build/tests/fuzz/fuzz_$name or no corpus/$name;" \
             "build with: cmake -B build-fuzz -DCMAKE_C_COMPILER=clang -DCOLL_FUZZ=ON &&" \
             "cmake --build build-fuzz --target fuzzers" >&2
        exit 2
    fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/coll-fuzz.XXXXXX")
echo "run-fuzz: ${#names[@]} harnesses, ${seconds} s each, $jobs at a time, in $work"
start=$(date +%s)
for name in "${names[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n || true
    done
    run_one "$name" &
done
wait

failed=0
for name in "${names[@]}"; do
    dir=$work/$name
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log")
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$dir/log")
    cov=$(grep -E '^#[0-9]+.*(DONE|INITED)' "$dir/log" | tail -1 | grep -oE 'cov: [0-9]+' || true)
    if [ "$(cat "$dir/status" 2>/dev/null)" = ok ]; then
        printf 'run-fuzz: %-12s ok  %9s runs, %s, peak %s MB, corpus %s -> %s inputs\n' "$name" \
            "$runs" "$cov" "$rss" "$(ls "$here/corpus/$name" | wc -l)" "$(ls "$dir/corpus" | wc -l)"
        if [ $merge -eq 1 ]; then
            "$build/tests/fuzz/fuzz_$name" -merge=1 -max_len="$(max_len "$name")" \
                "$here/corpus/$name" "$dir/corpus" >"$dir/merge.log" 2>&1
            echo "run-fuzz: $name: merged into $here/corpus/$name" \
                 "($(ls "$here/corpus/$name" | wc -l) inputs)"
        fi
        continue
    fi
    failed=1
    echo "run-fuzz: $name FAILED; log $dir/log; its end:" >&2
    grep -A1 -E 'ERROR|SUMMARY|invariant violated|runtime error|Test unit written' "$dir/log" |
        head -20 >&2 || tail -20 "$dir/log" >&2
    for a in "$dir"/artifacts/*; do
        [ -e "$a" ] || continue
        echo "run-fuzz: reproducer $a; replay: $build/tests/fuzz/fuzz_$name $a" >&2
    done
done
echo "run-fuzz: done in $(($(date +%s) - start)) s"
if [ $failed -ne 0 ]; then
    echo "run-fuzz: FAILED (kept $work)" >&2
    exit 1
fi
rm -rf "$work"
