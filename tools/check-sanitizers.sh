#!/bin/sh
# The whole test suite under AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer:
# builds build-asan/ (or $ASAN_BUILD_DIR) with -DCOLL_SANITIZE=address,undefined (or
# $COLL_SANITIZE, e.g. thread for ThreadSanitizer, in build-tsan/), runs ctest there, and fails
# on a failed test or on any sanitizer report.
# Every instrumented process writes its ASan and LSan reports to
# build-asan/sanitizer-logs/report.<program>.<pid> (cmake/sanitizer-env.cmake.in says why files),
# so a report counts even when the test that started the process kept its stderr; each one is
# printed at the end. GCC's UBSan ignores log_path next to ASan and reports on stderr, then
# stops the process (-fno-sanitize-recover): the output of every test (ctest's LastTest.log) is
# searched for those reports too. Extra arguments go to ctest, e.g. -L unit.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${ASAN_BUILD_DIR:-$top/build-asan}

BUILD_DIR=$build CMAKE_ARGS="-DCOLL_SANITIZE=${COLL_SANITIZE:-address,undefined}" \
    "$top/tools/build.sh"
logs=$build/sanitizer-logs
rm -rf "$logs"
mkdir -p "$logs"
cd "$build"
rc=0
ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@" || rc=$?

n=0
for f in "$logs"/*; do
    [ -e "$f" ] || continue
    n=$((n + 1))
    echo "==== check-sanitizers: $f"
    cat "$f"
done
# Reports on stderr, in passing tests too (UBSan's; any sanitizer's where log_path was not set).
if grep -nE 'runtime error:|ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|WARNING: ThreadSanitizer' \
    Testing/Temporary/LastTest.log >"$build/sanitizer-stderr.txt" 2>/dev/null; then
    echo "==== check-sanitizers: sanitizer reports in the tests' output (Testing/Temporary/LastTest.log):"
    cat "$build/sanitizer-stderr.txt"
    n=$((n + $(wc -l <"$build/sanitizer-stderr.txt")))
fi
if [ "$n" -gt 0 ]; then
    echo "check-sanitizers: $n sanitizer report(s): $logs, $build/sanitizer-stderr.txt" >&2
    rc=1
elif [ "$rc" -eq 0 ]; then
    echo "check-sanitizers: every test passed; no sanitizer report"
fi
exit "$rc"
