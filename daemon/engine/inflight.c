/*
 * A rank's buffers in flight: the library refuses coll_mem_free() of a buffer its pending
 * requests use (client/api/mem.c); this is the daemon's own check of the free it is sent, for a
 * client that did not (job/session.c keeps such an allocation until the job ends).
 */
#include "engine/inflight.h"

#include "core/dev_pools.h"
#include "core/pool.h"
#include "engine/dev_staged_copy.h"
#include "engine/op.h"
#include "engine/shm.h"

/* Whether [@p b, @p b + @p len) lies in @p s's allocation that starts at @p off in @p pool. */
static int in_alloc(const coll_pool_t *pool, const coll_session_t *s, uint64_t off, uint64_t b,
                    uint64_t len)
{
    return len > 0 && b >= off && coll_pool_range_owned(pool, off, b - off + len, s);
}

/* Whether member @p l of @p op (whose session is the allocation's owner) uses it, in the pool
 * of id @p pool (core/dev_pools.h). */
static int member_uses(const coll_op_t *op, uint32_t l, uint32_t pool, uint64_t off)
{
    const coll_op_member_t *m = &op->members[l];
    const coll_group_t *grp = op->grp;
    const coll_pool_t *p = coll_job_pool_by_id(op->job, pool);
    coll_dev_staged_member_t who = {(coll_kind_t)op->desc.coll, op->desc.count, op->esize,
                                    grp->size, coll_group_rank_of_local(grp, l), op->desc.root,
                                    m->table};
    uint64_t sb, rb;

    coll_dev_staged_extent(&who, &sb, &rb); /* an all-to-all's from its count table */
    return m->pool == pool && p != NULL &&
           (in_alloc(p, m->session, off, m->send_off, sb) ||
            in_alloc(p, m->session, off, m->recv_off, rb));
}

/* Whether @p op may still touch its members' buffers: running, or done with a feature's finish
 * still holding the answer (the staged path's copies back), or transfers of it in flight. */
static int op_live(const coll_op_t *op)
{
    return !op->done || op->finishing || op->inflight > 0;
}

static int op_uses(coll_job_t *job, const coll_session_t *s, uint32_t pool, uint64_t off,
                   char *what, size_t len)
{
    coll_op_t *op, *tmp;

    coll_list_for_each_safe(op, tmp, &job->engine.ops, coll_op_t, link)
    {
        for (uint32_t l = 0; l < op->grp->nlocal && op_live(op); l++) {
            if (op->members[l].session == s && member_uses(op, l, pool, off)) {
                coll_desc_name(&op->desc, what, len);
                return 1;
            }
        }
    }
    return 0;
}

/* The rank's posts that wait or run in the shared-memory area (a completed one is DONE). */
static int post_uses(coll_job_t *job, const coll_session_t *s, uint64_t off, char *what,
                     size_t len)
{
    const coll_shm_rank_t *r = coll_shm_rank(job, s->local_rank);

    for (uint32_t i = 0; i < COLL_SHM_SLOTS; i++) {
        coll_shm_rec_t d;
        const coll_submission_t *sub = &d.sub;
        uint64_t state, se, re, es;
        if (!coll_shm_read(&r->post[i], COLL_SHM_POSTED, &state, &d) ||
            (es = coll_dtype_size((coll_dtype_t)sub->dtype)) == 0 || sub->coll >= COLL_SHM_KINDS) {
            continue;
        }
        coll_kind_extent((coll_kind_t)sub->coll, sub->count, job->world_size, s->rank, sub->root,
                         &se, &re);
        if ((se <= UINT64_MAX / es && in_alloc(job->pool, s, off, sub->send_offset, se * es)) ||
            (re <= UINT64_MAX / es && in_alloc(job->pool, s, off, sub->recv_offset, re * es))) {
            coll_desc_name(&(coll_desc_t){.coll = (uint16_t)sub->coll, .key = sub->key}, what,
                           len);
            return 1;
        }
    }
    return 0;
}

int coll_inflight_uses(coll_job_t *job, const coll_session_t *s, uint32_t pool, uint64_t off,
                       char *what, size_t len)
{
    if (job->pool == NULL) {
        return 0;
    }
    /* The shared-memory area's posts are on host buffers only. */
    return op_uses(job, s, pool, off, what, len) ||
           (pool == 0 && job->state == COLL_JOB_READY && post_uses(job, s, off, what, len));
}
