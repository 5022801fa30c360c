#!/bin/sh
# Install what collectived needs to build, test and run its demo on Debian 12, by package name.
# Operations: libinih (configuration file), libhttp-parser and libjansson (status
# server), libsystemd (sd_notify); for the tests prometheus (promtool check metrics), systemd
# (systemd-analyze verify, systemd-tmpfiles, systemd-sysusers) and python3-yaml (k8s example).
# Python package: python3-numpy and python3-torch (CPU) for its tests and the DDP hook.
# Reliability: clang and its runtimes (libclang-rt-14-dev: libFuzzer, ASan, UBSan) for
# the fuzz harnesses (tests/fuzz) and the sanitizer build (tools/check-sanitizers.sh).
# Bucketing: python3-matplotlib for tools/coll-timeline (timeline PNGs) and its test.
# torch.distributed backend: libtorch-dev (the C++ headers and CMake package of torch
# 1.13, matching python3-torch; brings python3-dev) and pybind11-dev for python/torch_backend.
# Ecosystem: openmpi-bin (mpirun launches ranks that read OMPI_COMM_WORLD_*).
# Benchmarks (bench/, docs/benchmarking.md): libopenmpi-dev (mpicc for the Open MPI side),
# iperf3 and iputils-ping (the namespace cluster's links), python3-torchvision (resnet18 with DDP).
# python3-prometheus-client: collectivectl's parser of the Prometheus text (metrics --json).
# Idempotent: only missing packages are installed (apt-get update runs only then). Needs root.
set -eu

PACKAGES="build-essential cmake pkg-config python3
libuv1-dev libucx-dev ucx-utils libprotobuf-c-dev protobuf-c-compiler libcmocka-dev
zlib1g-dev libopenblas-dev dataset-fashion-mnist
libinih-dev libhttp-parser-dev libjansson-dev libsystemd-dev libsodium-dev
prometheus systemd python3-yaml
python3-numpy python3-torch
clang libclang-rt-14-dev
python3-matplotlib
libtorch-dev pybind11-dev
openmpi-bin libopenmpi-dev iperf3 iputils-ping python3-torchvision python3-prometheus-client"

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages:$missing; run as root (or sudo $0)" >&2
    exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
