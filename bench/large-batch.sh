#!/bin/bash
# large-batch.sh: the large-batch study of docs/large-batch.md. coll-train on Fashion-MNIST,
# the same number of epochs for every run, through real daemons (collective-launch, NODES x
# RANKS) or as one process on the whole global batch (-n 0), from the same seed:
#   sgd-b256               batch 256, SGD with momentum 0.9 at BASE_LR: the baseline
#   sgd-b8k                batch 8192, the same SGD at the same BASE_LR (no scaling)
#   sgd-b8k-linear         batch 8192, linear scaling rule: BASE_LR x 8192/256, no warmup
#   sgd-b8k-linear-warmup  the same with a linear warmup from BASE_LR over WARMUP
#   lars-b8k               batch 8192, LARS at LARS_LR (warmup from 0 over WARMUP)
#   lamb-b8k               batch 8192, LAMB at LAMB_LR (warmup from 0 over WARMUP)
# Every run: MLP 784-HIDDEN-10, cosine decay to 0 over the run after the warmup, seed 1,
# test accuracy after every epoch, the per-tensor norms and trust ratios of the first
# LAYER_STEPS steps (--report-layers).
#
#   bench/large-batch.sh [-o DIR] [-E EPOCHS] [-H HIDDEN] [-n NODES] [-r RANKS] [-j JOBS]
#                        [-W WARMUP] [-N NICE] [-L SECONDS] [--base-lr LR] [--lars-lr LR]
#                        [--lamb-lr LR] [--only NAME] [-- TRAIN ARGS...]
#
# Options: -o results directory (default /tmp/coll-large-batch-<date>); -E epochs of every run
# (10); -H hidden layer widths as coll-train --hidden takes them (512,512); -n daemons (2; 0:
# each run is one coll-train process without daemons, which optim_train_equivalence shows ends
# where NODES x RANKS ranks do) and -r ranks per daemon (2); -j runs at a time (1); -W warmup as
# coll-train --warmup takes it (2ep, a fifth of the run); -N nice of every daemon and trainer
# (0: unchanged; 10 on a shared machine), set as the autogroup nice too, since each process runs
# in its own session (collective-launch starts them so, and so does setsid for -n 0) and with
# autogroup scheduling a process's nice only counts within its session; -L bound of one run in
# seconds (7200); --base-lr (0.1), --lars-lr (4), --lamb-lr (0.04): the learning rates
# (docs/large-batch.md says how they were chosen); --only NAME[,NAME...] runs those
# configurations only (into the same DIR, the others' outputs stay).
# TRAIN ARGS come last on every run's command line, so they override.
# Environment: BUILD_DIR (default <repo>/build-bench, configured Release when new), DATA
# (coll-train --data).
#
# Outputs: <dir>/<name>.txt (each job's output), <dir>/machine.txt (per invocation: date,
# kernel, CPUs, commit, settings; per run: its wall time and the load averages before and
# after); then bench/large-batch-report.py <dir> writes <dir>/table.md, <dir>/layers.md and
# <dir>/accuracy.png and prints the table. Exit status 1 when a run failed (a run that diverges
# still succeeds: its accuracy says so).
set -u

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init large-batch.sh
RUN_LIMIT=7200
EPOCHS=10
HIDDEN=512,512
NODES=2
RANKS=2
JOBS=1
WARMUP=2ep
BASE_LR=0.1
LARS_LR=4
LAMB_LR=0.04
ONLY=
LAYER_STEPS=14
EXTRA=()

while [ $# -gt 0 ]; do
    case $1 in
    -E) EPOCHS=$(bench_value -E "${2:-}" "$NUM") || exit 2; shift 2 ;;
    -H) HIDDEN=${2:?}; shift 2 ;;
    -n) NODES=$(bench_value -n "${2:-}" "$NUM") || exit 2; shift 2 ;;
    -r) RANKS=$(bench_value -r "${2:-}" "$NUM") || exit 2; shift 2 ;;
    -j) JOBS=$(bench_value -j "${2:-}" "$NUM") || exit 2; shift 2 ;;
    -W) WARMUP=${2:?}; shift 2 ;;
    --base-lr) BASE_LR=$(bench_value --base-lr "${2:-}" "$REAL") || exit 2; shift 2 ;;
    --lars-lr) LARS_LR=$(bench_value --lars-lr "${2:-}" "$REAL") || exit 2; shift 2 ;;
    --lamb-lr) LAMB_LR=$(bench_value --lamb-lr "${2:-}" "$REAL") || exit 2; shift 2 ;;
    --only) ONLY=${2:?}; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) bench_option "$@" || bench_usage_error "$1"; shift "$BENCH_SHIFT" ;;
    esac
done
# The study records diverging runs to their end (--on-divergence continue).
COMMON=(--hidden "$HIDDEN" --epochs "$EPOCHS" --seed 1 --decay cosine --on-divergence continue
        --report-layers "$LAYER_STEPS" ${DATA:+--data "$DATA"})

# train NAME [coll-train args]: one job, its output in $RESDIR/NAME.txt; status 1 when it failed.
train() {
    local name=$1 out=$RESDIR/$1.txt before start rc
    shift
    before=$(cut -d' ' -f1-3 /proc/loadavg)
    start=$(date +%s)
    if [ "$NODES" = 0 ]; then
        say "$name: one process, $* -> $out"
        setsid -w timeout -k 10 "$RUN_LIMIT" "$TRAIN" "${COMMON[@]}" "$@" "${EXTRA[@]}" \
            >"$out" 2>&1
    else
        say "$name: $NODES x $RANKS, $* -> $out"
        timeout -k 10 "$RUN_LIMIT" "$LAUNCH" --nodes "$NODES" --ranks-per-node "$RANKS" \
            --daemon "$DAEMON" --timeout $((RUN_LIMIT - 30)) -- \
            "$TRAIN" "${COMMON[@]}" "$@" "${EXTRA[@]}" >"$out" 2>&1
    fi
    rc=$?
    echo "$name: $(($(date +%s) - start)) s, exit $rc, load average before $before, after" \
         "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESDIR/machine.txt"
    # Rank 0's lines carry "[r0] " through the launcher, none standalone.
    if [ $rc -ne 0 ] || ! grep -Eq "^(\[r0\] )?final: " "$out"; then
        say "$name failed (exit $rc); see $out"
        return 1
    fi
}

# run NAME [coll-train args]: train NAME in the background once fewer than JOBS runs are going.
run() {
    [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]] || return 0
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 1; done
    train "$@" &
    PIDS+=($!)
}

bench_resdir large-batch
build_targets collectived coll-train
if [ "$NICE" != 0 ]; then
    DAEMON=$(bench_nice_wrapper collectived "$DAEMON") || exit 1
    TRAIN=$(bench_nice_wrapper coll-train "$TRAIN") || exit 1
fi
{ describe_machine
  echo "shape: $NODES nodes x $RANKS ranks (0: one process); $JOBS at a time; epochs $EPOCHS;" \
       "hidden $HIDDEN; warmup $WARMUP; nice $NICE"
  echo "lr: base $BASE_LR, lars $LARS_LR, lamb $LAMB_LR; extra: ${EXTRA[*]}"
  echo "runs: ${ONLY:-all}"; } >>"$RESDIR/machine.txt"
PIDS=()
SCALED=(--lr-scaling linear --base-lr "$BASE_LR" --base-batch 256)
run sgd-b256 --batch 256 --lr "$BASE_LR"
run sgd-b8k --batch 8192 --lr "$BASE_LR"
run sgd-b8k-linear --batch 8192 "${SCALED[@]}"
run sgd-b8k-linear-warmup --batch 8192 "${SCALED[@]}" --warmup "$WARMUP"
run lars-b8k --batch 8192 --optimizer lars --lr "$LARS_LR" --warmup "$WARMUP"
run lamb-b8k --batch 8192 --optimizer lamb --lr "$LAMB_LR" --warmup "$WARMUP"
for pid in "${PIDS[@]}"; do wait "$pid" || FAILED=1; done
/usr/bin/python3 "$HERE/large-batch-report.py" "$RESDIR" || FAILED=1
say "results in $RESDIR"
exit $FAILED
