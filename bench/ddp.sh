#!/bin/bash
# ddp.sh: real data-parallel training on the cluster of namespaces: torchvision resnet18 with
# DDP (bench/ddp-resnet.py) over gloo against collectived (its torch backend, and its DDP comm
# hook with and without compression), and the demo trainer coll-train; step times and accuracy.
#
#   bench/ddp.sh [--cluster 2x2] [--rate 1gbit] [--configs "CONFIG ..."] [--steps 60]
#                [--warmup 5] [--batch 32] [--lr 0.02] [-R 1] [-o DIR]
#
# CONFIG is one of
#   gloo             DDP over torch's gloo backend
#   collectived      DDP over collectived's torch backend (dist.init_process_group("collectived"))
#   hook[:SPEC]      DDP with collectived's comm hook, compressed as SPEC (powersgd:2, topk:0.01;
#                    none when absent)
#   coll-train       the demo trainer (its MLP on Fashion-MNIST, C, bucketed over collectived)
# (default "gloo collectived hook:powersgd:2 hook:topk:0.01"). Every run is one job on H hosts
# (bench/netns.sh, links of --rate: 1 Gbit/s by default) of M ranks each (--cluster HxM, default
# 2x2), the daemon and the ranks of host k in namespace k (collective-launch --netns-ranks), gloo
# on the hosts' veth devices. The torch runs take the same images in the same order (seed 1):
# --steps timed steps after --warmup, --batch images per rank, SGD at --lr (0.05 made short
# runs jump between losses of 0.5 and 4). A repetition runs every
# configuration once, the order rotated; the table gives per configuration the median over
# repetitions of the step time (the slowest rank's median over steps), its ratio to gloo's, the
# test accuracy of the last repetition (rank 0's model, 2,000 test images) and its difference
# to gloo's, and the bytes per step and node the hook sent. Accuracy after a short run says
# whether compression broke training, not how far it ends from the uncompressed run: the
# margins of docs/compression.md are for 15 epochs. The full study: -R 3 --steps 200.
# Options (bench/lib.sh): -R (1), -o (/tmp/coll-ddp-<date>), -L seconds one run may take (1800),
# -Q, --cluster, --rate, --qdisc. Environment: BUILD_DIR (default <repo>/build-bench).
# Needs root, python3-torch and python3-torchvision (installed when missing). Raw outputs
# <dir>/rep<k>/<config>.txt (+ .err); <dir>/table.md, also on stdout. Exit status 1 when a run
# failed.
set -u

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init ddp.sh
CLUSTER=2x2 RUN_LIMIT=1800 QUIET_WAIT=60 REPEATS=1
CONFIGS="gloo collectived hook:powersgd:2 hook:topk:0.01"
STEPS=60 WARM=5 BATCH=32 LR=0.02
ARGS=("$@")

while [ $# -gt 0 ]; do
    case $1 in
    --configs) CONFIGS=${2:?}; shift 2 ;;
    --steps) STEPS=$(bench_value --steps "${2:-}" "$NUM") || exit 2; shift 2 ;;
    --warmup) WARM=$(bench_value --warmup "${2:-}" "$NUM") || exit 2; shift 2 ;;
    --batch) BATCH=$(bench_value --batch "${2:-}" "$NUM") || exit 2; shift 2 ;;
    --lr) LR=$(bench_value --lr "${2:-}" "$REAL") || exit 2; shift 2 ;;
    *) bench_option "$@" || bench_usage_error "$1"; shift "$BENCH_SHIFT" ;;
    esac
done

run_config() { # dir config
    local dir=$1 cfg=$2 name
    name=$(echo "$cfg" | tr ':' '-')
    launch_cmd "$(cluster_hosts)" "$(cluster_ranks)"
    if [ "$cfg" = coll-train ]; then
        run_one "$dir/$name" env COLL_POOL_SIZE=1G "${LAUNCH_CMD[@]}" -- \
            "$TRAIN" --steps "$((STEPS + WARM))" --epochs 1 --report-steps
        return
    fi
    local comm=${cfg%%:*} spec=none
    [ "$comm" != "$cfg" ] && spec=${cfg#*:}
    run_one "$dir/$name" env PYTHONPATH="$PYLIB" GLOO_SOCKET_IFNAME="$NETNS_DEV" \
        COLL_POOL_SIZE=1G "${LAUNCH_CMD[@]}" -- "$PY" "$HERE/ddp-resnet.py" --comm "$comm" \
        --compression "$spec" --steps "$STEPS" --warmup "$WARM" --batch "$BATCH" --lr "$LR"
}

if in_cluster; then
    read -r -a list <<<"$CONFIGS"
    bench_repeat run_config "${list[@]}"
    exit $FAILED
fi
bench_resdir ddp
ensure_packages python3-torch python3-torchvision dataset-fashion-mnist iproute2
build_targets collectived coll-train collective
wait_quiet
{ describe_machine; echo "configs: $CONFIGS; steps $STEPS after $WARM; batch $BATCH per rank;" \
    "lr $LR"; } \
    >"$RESDIR/machine.txt"
say "results in $RESDIR"
cluster_run $((REPEATS * 6 * RUN_LIMIT)) "${ARGS[@]}" -o "$RESDIR" || FAILED=1
echo "load after: $(uptime | sed 's/.*load average: //')" >>"$RESDIR/machine.txt"
python3 "$HERE/ddp-summary.py" "$RESDIR" "$WARM" | tee "$RESDIR/table.md" || FAILED=1
exit $FAILED
