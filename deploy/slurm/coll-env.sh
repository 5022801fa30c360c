#!/bin/sh
# coll-env.sh: run a trainer under srun with the COLL_* environment of its Slurm task, then exec
# the command:  srun ... coll-env.sh python3 train.py
#   COLL_RANK        = SLURM_PROCID          COLL_WORLD_SIZE = SLURM_NTASKS
#   COLL_LOCAL_RANK  = SLURM_LOCALID         COLL_LOCAL_SIZE = SLURM_NTASKS_PER_NODE (else the
#                                            first count of SLURM_TASKS_PER_NODE, "4(x2)" -> 4)
#   COLL_JOB         = slurm-$SLURM_JOB_ID (unless set)
#   COLL_ROOT        = the first node of SLURM_JOB_NODELIST, port $COLL_ROOT_PORT (29510), as an
#                      address (getent), unless COLL_ROOT is set
#   COLL_SOCKET      = $COLL_SOCKET, else /run/collectived/collectived.sock
set -eu

die() {
    echo "coll-env.sh: $*" >&2
    exit 2
}

[ $# -gt 0 ] || die "usage: coll-env.sh COMMAND [ARGS...] (under srun)"
: "${SLURM_PROCID:?not under srun: SLURM_PROCID is not set}"
: "${SLURM_NTASKS:?SLURM_NTASKS is not set}"
: "${SLURM_LOCALID:?SLURM_LOCALID is not set}"

if [ -n "${SLURM_NTASKS_PER_NODE:-}" ]; then
    local_size=${SLURM_NTASKS_PER_NODE%%(*}
    local_size=${local_size%%,*}
elif [ -n "${SLURM_TASKS_PER_NODE:-}" ]; then
    local_size=${SLURM_TASKS_PER_NODE%%(*}
    local_size=${local_size%%,*}
else
    die "neither SLURM_NTASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set (use --ntasks-per-node)"
fi

if [ -z "${COLL_ROOT:-}" ]; then
    : "${SLURM_JOB_NODELIST:?SLURM_JOB_NODELIST is not set}"
    if command -v scontrol >/dev/null 2>&1; then
        root_host=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
    else
        root_host=${SLURM_JOB_NODELIST%%,*}
    fi
    root_addr=$(getent ahostsv4 "$root_host" 2>/dev/null | awk 'NR == 1 { print $1 }')
    COLL_ROOT="${root_addr:-$root_host}:${COLL_ROOT_PORT:-29510}"
fi

export COLL_RANK="$SLURM_PROCID"
export COLL_WORLD_SIZE="$SLURM_NTASKS"
export COLL_LOCAL_RANK="$SLURM_LOCALID"
export COLL_LOCAL_SIZE="$local_size"
export COLL_JOB="${COLL_JOB:-slurm-${SLURM_JOB_ID:-0}}"
export COLL_ROOT
export COLL_SOCKET="${COLL_SOCKET:-/run/collectived/collectived.sock}"
exec "$@"
