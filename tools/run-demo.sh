#!/bin/sh
# The main job on one machine: install dependencies, build, then train an MLP on Fashion-MNIST
# with 2 simulated nodes (2 collectived daemons on loopback) x 2 trainer ranks each.
# Extra arguments go to the trainer (see build/examples/train/coll-train --help).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/deploy/install-deps.sh"
"$top/tools/build.sh"
build=${BUILD_DIR:-$top/build}
exec "$build/tools/collective-launch" --nodes "${NODES:-2}" --ranks-per-node "${RANKS:-2}" \
    -- "$build/examples/train/coll-train" --epochs 2 "$@"
