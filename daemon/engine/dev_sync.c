/* The stream words of operations on device buffers (dev_sync.h). */
#include "engine/dev_sync.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/dev_pools.h"
#include "core/pool.h"
#include "proto/submission.h"

/* Bytes of a submission's two words: the ready word, then the done word. */
#define SYNC_BYTES 16

coll_status_t coll_dev_sync_check(const coll_job_t *job, const coll_session_t *s,
                                  const Coll__Wire__Submit *sub, char *err, size_t errlen)
{
    if (sub->sync_flags == 0) {
        return COLL_OK;
    }
    if ((sub->sync_flags & ~(COLL_SYNC_READY | COLL_SYNC_DONE)) != 0 || sub->sync_value == 0 ||
        sub->pool == 0 || sub->sync_offset % 8 != 0) {
        snprintf(err, errlen, "rank %u: stream words with flags %#x, value %" PRIu64 " at offset "
                 "%" PRIu64 " of a submission in pool %u: they take flags ready (1) and done (2), "
                 "a value above 0, an offset aligned to 8, and buffers in a device pool",
                 s->rank, sub->sync_flags, sub->sync_value, sub->sync_offset, sub->pool);
        return COLL_ERR_INVALID;
    }
    if (!coll_pool_range_owned(coll_job_pool_by_id(job, 0), sub->sync_offset, SYNC_BYTES, s)) {
        snprintf(err, errlen, "rank %u: stream words [%" PRIu64 ", +%d) are not inside this "
                 "rank's allocations in the pool of job %s", s->rank, sub->sync_offset,
                 SYNC_BYTES, job->id);
        return COLL_ERR_NOT_IN_POOL;
    }
    return COLL_OK;
}

/* Word @p k (0 ready, 1 done) of member @p m, in the host pool. */
static _Atomic uint64_t *word(const coll_op_t *op, const coll_op_member_t *m, int k)
{
    uint8_t *base = coll_pool_base(coll_job_pool_by_id(op->job, 0));

    return (_Atomic uint64_t *)(void *)(base + m->sync_off + 8u * (unsigned)k);
}

int coll_dev_sync_ready(const coll_op_t *op)
{
    for (uint32_t l = 0; l < op->grp->nlocal; l++) {
        const coll_op_member_t *m = &op->members[l];
        if ((m->sync_flags & COLL_SYNC_READY) &&
            atomic_load_explicit(word(op, m, 0), memory_order_acquire) < m->sync_value) {
            return 0;
        }
    }
    return 1;
}

uint32_t coll_dev_sync_describe(const coll_op_t *op, char *buf, size_t len)
{
    size_t n = strlen(buf);
    uint32_t named = 0;

    for (uint32_t l = 0; l < op->grp->nlocal && n < len; l++) {
        const coll_op_member_t *m = &op->members[l];
        uint64_t at;
        if (!(m->sync_flags & COLL_SYNC_READY) ||
            (at = atomic_load_explicit(word(op, m, 0), memory_order_acquire)) >= m->sync_value) {
            continue;
        }
        n += (size_t)snprintf(buf + n, len - n, "%srank %u's stream (its ready word at %" PRIu64
                              ", below %" PRIu64 ": the work queued before the call has not "
                              "ended)", n ? ", " : "", op->job->ranks[op->grp->locals[l]],
                              at, m->sync_value);
        named++;
    }
    return named;
}

void coll_dev_sync_done(const coll_op_t *op, const coll_op_member_t *m)
{
    _Atomic uint64_t *w;
    uint64_t cur;

    if (!(m->sync_flags & COLL_SYNC_DONE)) {
        return;
    }
    w = word(op, m, 1);
    cur = atomic_load_explicit(w, memory_order_relaxed);
    while (cur < m->sync_value &&
           !atomic_compare_exchange_weak_explicit(w, &cur, m->sync_value, memory_order_release,
                                                  memory_order_relaxed)) {
    }
}
