#!/bin/sh
# Configure and build collectived in build/ (or $BUILD_DIR). Used by run-demo.sh and
# run-tests.sh; safe to run again (incremental) and from several shells at once (a lock file
# serialises builds of one directory). $CMAKE_ARGS adds configuration options, e.g.
# CMAKE_ARGS=-DCOLL_SANITIZE=address,undefined (tools/check-sanitizers.sh).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
mkdir -p "$build"
exec 9>"$build/.build-lock"
flock 9
# shellcheck disable=SC2086 # CMAKE_ARGS is a list of options
cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} ${CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "$(nproc)"
