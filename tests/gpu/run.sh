#!/bin/sh
# run.sh: the device checks of the GPU path, in one command on a machine with an NVIDIA GPU,
# CUDA, CMake and a C compiler (docs/gpu-verification.md).
#
#   tests/gpu/run.sh LOGDIR
#
# Builds everything (Release, the CUDA module for the machine's own GPU) in build-gpu/build
# against the Debian packages' files that tests/gpu/pack.sh unpacked into build-gpu/root on the
# build machine (carried here with the sources; where a library is installed system-wide that
# one serves as well), then runs, each with its log in LOGDIR:
#   kernels   coll_cuda_kernel_check: every entry of the CUDA executor against the host's,
#             every dtype and operation at counts 0, 1, 1023 and 2^20 + 3, and the reduction's
#             bandwidth at 256 MiB against the device's copy bandwidth
#   nccl      nccl_check: NCCL's table (device/nccl.h) on the GPUs, one rank per GPU (up to two),
#             every collective of the NCCL path checked; skipped without NCCL
#   gpu       ctest -L gpu on the real device: the device pool shared by 4 local ranks on one
#             GPU (integration.devpool_1x4), 4 ranks of one node combined on the GPU by the CUDA
#             executor on the daemon's stream, named device+local (integration.device_1x4),
#             2 daemons x 2 ranks on one GPU over the staged path
#             (integration.staged_2x2; send, receive and all-to-all: staged_p2p_2x2; the
#             parameter service with 1-bit compression: staged_ps_2x2; stream ordering:
#             stream_2x2), the daemon with the
#             CUDA module loaded as the executor of device memory (integration.gpu_executor),
#             and the tests over the fake device layer
#   nccl_local  2 daemons x 2 ranks, daemon k and its ranks on GPU k, staged_check --nccl: each
#             node's two ranks reduced and served on its GPU by the CUDA executor on the job's
#             stream around NCCL between the daemons, every collective named "nccl" and checked;
#             needs two GPUs (NCCL refuses two daemons on one), skipped with fewer
#   nccl_groups_local  the same shape, nccl_group_check: split groups' collectives through
#             their own NCCL communicators beside the world's (a group on one node device+local);
#             needs two GPUs, skipped with fewer
#   torch     the build configured again for the machine's own torch with CUDA and the torch
#             backend built, then tests/gpu/torch_cuda_check.py: CUDA tensors in every collective,
#             4 ranks on one GPU against a float64 reference with the stream order checked
#             (integration.torch_cuda_1x4), and a group of one rank against torch's NCCL
#             backend (integration.torch_cuda_nccl_1x1)
# and prints one line per check (PASS, FAIL or SKIP with why) and the kernel check's figures.
# What it does not check yet is printed too, so the summary says what a device run covered.
# Bounded: each step has a timeout; the whole run stays under 8 minutes on 16 cores.
# Exit status: 0 when every check that ran passed, 1 otherwise, 2 usage.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 LOGDIR" >&2; exit 2; }
logs=$1
mkdir -p "$logs" && logs=$(cd "$logs" && pwd)
root=$top/build-gpu/root
build=$top/build-gpu/build
lib=$root/usr/lib/x86_64-linux-gnu
summary=$logs/summary.txt
: >"$summary"
failed=0

say() { echo "$*" | tee -a "$summary"; }
# check NAME TIMEOUT CMD...: run CMD with its output in LOGDIR/NAME.log, one summary line.
check() {
    name=$1 limit=$2
    shift 2
    timeout "$limit" "$@" >"$logs/$name.log" 2>&1
    rc=$?
    case $rc in
    0) say "PASS $name" ;;
    77) say "SKIP $name: $(tail -n 1 "$logs/$name.log")" ;;
    124) say "FAIL $name: over ${limit} s (log: $logs/$name.log)"; failed=1 ;;
    *) say "FAIL $name: exit $rc (log: $logs/$name.log)"; failed=1 ;;
    esac
}

say "run.sh $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '(no git)') on $(hostname), $(date -u '+%Y-%m-%d %H:%M UTC')"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 |
        sed 's/^/device: /' | tee -a "$summary"
else
    say "device: none seen (no nvidia-smi): the device checks will skip"
fi
say "glibc $(ldd --version 2>/dev/null | head -n 1 | awk '{print $NF}') (the packed libraries are Debian 12's, built for 2.36)"

# The packed Debian files: pkg-config and protoc-c from there, their libraries on the path.
if [ -d "$root" ]; then
    export PATH="$root/usr/bin:$PATH"
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PKG_CONFIG_LIBDIR="$lib/pkgconfig:$root/usr/share/pkgconfig"
    export PKG_CONFIG_SYSROOT_DIR="$root"
    export UCX_MODULE_DIR="$lib/ucx"
    cmake_prefix="-DCMAKE_PREFIX_PATH=$root/usr -DCMAKE_LIBRARY_PATH=$lib -DCMAKE_INCLUDE_PATH=$root/usr/include"
else
    say "note: no $root (tests/gpu/pack.sh makes it): the system's libraries must serve"
    cmake_prefix=""
fi
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d .)
# shellcheck disable=SC2086 # cmake_prefix is a list of options
check build 360 sh -c "cmake -S '$top' -B '$build' -DCMAKE_BUILD_TYPE=Release -DCOLL_WITH_CUDA=ON \
    ${arch:+-DCMAKE_CUDA_ARCHITECTURES=$arch} $cmake_prefix && cmake --build '$build' -j $(nproc)"
if [ "$failed" -ne 0 ]; then
    say "the build failed: nothing else ran (tail of $logs/build.log):"
    tail -n 30 "$logs/build.log"
    exit 1
fi

check kernels 180 "$build/tests/gpu/coll_cuda_kernel_check"
grep -iE 'GB/s|bandwidth' "$logs/kernels.log" | sed 's/^/  /' | tee -a "$summary"
check nccl 120 "$build/tests/gpu/nccl_check"
head -n 1 "$logs/nccl.log" | sed 's/^/  /' | tee -a "$summary"
check gpu 240 sh -c "cd '$build' && ctest -L gpu --output-on-failure --timeout 120"
grep -E 'tests passed|Skipped|Failed' "$logs/gpu.log" | sed 's/^/  /' | tee -a "$summary"

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$ngpu" -ge 2 ]; then
    # Daemon k (its socket .../node<k>/collectived.sock) and its ranks see GPU k as device 0.
    wrap=$logs/daemon-on-gpu.sh
    printf '%s\n' '#!/bin/sh' 'k=0; for a; do case $a in */node*/collectived.sock) k=${a%/collectived.sock}; k=${k##*/node} ;; esac; done' \
        "CUDA_VISIBLE_DEVICES=\$k exec '$build/daemon/collectived' \"\$@\"" >"$wrap"
    chmod +x "$wrap"
    check nccl_local 120 "$top/tools/collective-launch" --nodes 2 --ranks-per-node 2 \
        --timeout 100 --daemon "$wrap" -- sh -c \
        "CUDA_VISIBLE_DEVICES=\$COLL_NODE_RANK exec '$build/tests/gpu/staged_check' --nccl --count 100000"
    check nccl_groups_local 120 "$top/tools/collective-launch" --nodes 2 --ranks-per-node 2 \
        --timeout 100 --daemon "$wrap" -- sh -c \
        "CUDA_VISIBLE_DEVICES=\$COLL_NODE_RANK exec '$build/tests/gpu/nccl_group_check'"
else
    say "SKIP nccl_local: $ngpu GPU(s): NCCL between daemons with several ranks each needs two"
    say "SKIP nccl_groups_local: $ngpu GPU(s): NCCL between daemons needs two"
fi

# The torch backend with CUDA tensors, built last against the machine's own torch (its Python and
# CMake package) so that a failure there costs none of the checks above.
tpy=""
for p in python3 python; do
    if command -v "$p" >/dev/null &&
        "$p" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
        tpy=$(command -v "$p")
        break
    fi
done
pyh=""
[ -n "$tpy" ] && pyh=$("$tpy" -c 'import os, sysconfig; p = sysconfig.get_paths()["include"]
print(p if os.path.exists(os.path.join(p, "Python.h")) else "")')
if [ -n "$tpy" ] && [ -z "$pyh" ]; then
    say "SKIP torch: $tpy has no Python.h (its development headers), which the backend needs"
elif [ -n "$tpy" ]; then
    tprefix=$("$tpy" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
    # The build above, configured again for that torch: only the extension is built.
    check torch_build 240 sh -c "cmake '$build' -DCOLL_PYTHON='$tpy' \
        -DCMAKE_PREFIX_PATH='$tprefix;$root/usr' && cmake --build '$build' -j $(nproc) \
        --target coll_torch_pg"
    grep 'torch backend' "$logs/torch_build.log" | sed 's/^/  /' | tee -a "$summary"
    if grep -q '^PASS torch_build' "$summary" &&
        tail -n 1 "$summary" | grep -q 'CUDA tensors ON'; then
        check torch 240 sh -c \
            "cd '$build' && ctest -R torch_cuda --output-on-failure --timeout 120"
        grep -E 'tests passed|Skipped|Failed|Work.wait' "$logs/torch.log" | sed 's/^/  /' |
            tee -a "$summary"
    else
        say "FAIL torch: no backend with CUDA tensors was built (log: $logs/torch_build.log)"
        failed=1
    fi
else
    say "SKIP torch: no python3 here imports a torch that sees a CUDA device"
fi

say "not covered by this run: NCCL between daemons with one GPU (nccl checks NCCL's table"
say "alone, two ranks only with two GPUs)"
say "not covered: one node's ranks on several GPUs as peers (device+peers; one GPU here: the fake only)"
[ "$failed" -eq 0 ] && say "run.sh: every check that ran passed" || say "run.sh: FAILED"
exit "$failed"
