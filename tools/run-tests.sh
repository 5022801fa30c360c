#!/bin/sh
# Install dependencies, build, and run what CI runs (.ci/run), in three steps:
#   1. the whole test suite, unit and integration tests with real daemons, in build/;
#   2. the same suite under AddressSanitizer and UndefinedBehaviorSanitizer in build-asan/
#      (tools/check-sanitizers.sh), less $ASAN_SKIP: a failed test or any sanitizer report
#      fails it; then the concurrency and fault tests ($TSAN_TESTS) under ThreadSanitizer in
#      build-tsan/;
#   3. every fuzz harness for $COLL_FUZZ_SECONDS seconds each (default 35) in build-fuzz/
#      (tests/fuzz/run-fuzz.sh): any finding fails it.
# Both suites run as many tests at once as there are CPUs; the tests that measure detection
# times run alone (RUN_SERIAL). Extra arguments go to both ctest runs, e.g. -L foundation. For quicker local runs,
# COLL_CHECK_SANITIZERS=0 leaves out step 2 and COLL_FUZZ_SECONDS=0 step 3. Every step runs
# even when an earlier one failed; a summary with each step's result and time ends the output.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/deploy/install-deps.sh"

summary=""
failed=0

# step NAME COMMAND...: run one step, and record its result and duration.
step() {
    name=$1
    shift
    echo "==== run-tests: $name"
    t0=$(date +%s)
    if "$@"; then
        result=passed
    else
        result=FAILED
        failed=1
    fi
    summary="$summary$(printf '  %-46s %-7s %5s s' "$name" "$result" $(($(date +%s) - t0)))
"
    echo "==== run-tests: $name: $result"
}

# What runs under ThreadSanitizer: the tests where threads share state (the shared-memory
# path's flags and futexes with threads as ranks, several threads on one communicator,
# concurrent operations, the bucketer's hooks, the kernel threads of large reductions) and the
# fault tests (the daemon's loop, the loop watch's thread, failures).
TSAN_TESTS='unit\.shm|integration\.(threads_|window_|engine_concurrent|engine_allreduce_large|bucketing_(order|stall|timeout))|reliability\.(fault_|blame_)'
# ThreadSanitizer slows every callback 5-15x: on two loaded cores one UCX drive then holds the
# loop past the default loop_stall_ms (1 s), and the tests fail on the daemon's warning about a
# stall that is only the sanitizer's. Under TSan the loop watch warns from 10 s. ASan slows them
# 2-3x, and with a dozen daemons and ranks on two cores a loop thread waits its turn for several
# scheduler ticks (a CI run saw one warning in 332 tests): under ASan it warns from 5 s.
TSAN_LOOP_STALL_MS=10000
ASAN_LOOP_STALL_MS=5000
# Left out under ASan, to keep .ci/run inside 40 minutes: the four-rank runs of the large
# shared-memory counts (25-40 s each there) and of the Python DDP bucketing script (49 s). Their
# two-rank siblings run the same kernels, chunking, pool allocations and library calls under
# ASan; four ranks at small and medium counts run in shm_all_1x4.
ASAN_SKIP='integration\.((shm_allreduce_16mi_|shm_large_).*_1x4|python_ddp_whole_model_1x4)'

suite() (
    "$top/tools/build.sh" && cd "${BUILD_DIR:-$top/build}" &&
        ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@"
)

start=$(date +%s)
step "1. test suite (build/)" suite "$@"
if [ "${COLL_CHECK_SANITIZERS:-1}" != 0 ]; then
    step "2. test suite under ASan+UBSan (build-asan/)" env \
        COLLD_LOOP_STALL_MS="$ASAN_LOOP_STALL_MS" "$top/tools/check-sanitizers.sh" -E "$ASAN_SKIP" "$@"
    step "2b. concurrency and fault tests under TSan (build-tsan/)" env COLL_SANITIZE=thread \
        COLLD_LOOP_STALL_MS="$TSAN_LOOP_STALL_MS" ASAN_BUILD_DIR="$top/build-tsan" \
        "$top/tools/check-sanitizers.sh" -R "$TSAN_TESTS" "$@"
fi
if [ "${COLL_FUZZ_SECONDS:-35}" != 0 ]; then
    step "3. fuzz harnesses, ${COLL_FUZZ_SECONDS:-35} s each (build-fuzz/)" \
        "$top/tests/fuzz/run-fuzz.sh" "${COLL_FUZZ_SECONDS:-35}"
fi
printf '==== run-tests: summary (%s s in all)\n%s' $(($(date +%s) - start)) "$summary"
exit "$failed"
