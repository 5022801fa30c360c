#!/bin/sh
# Install dependencies, build, and run the whole test suite (unit and integration tests with
# real daemons). Extra arguments go to ctest, e.g. -L foundation.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/deploy/install-deps.sh"
"$top/tools/build.sh"
cd "${BUILD_DIR:-$top/build}"
exec ctest --output-on-failure --timeout 900 "$@"
