#!/bin/sh
# Configure and build collectived in build/ (or $BUILD_DIR). Used by run-demo.sh and
# run-tests.sh; safe to run again (incremental) and from several shells at once (a lock file
# serialises builds of one directory).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
mkdir -p "$build"
exec 9>"$build/.build-lock"
flock 9
cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} >/dev/null
cmake --build "$build" -j "$(nproc)"
