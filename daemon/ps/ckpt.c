/*
 * Checkpoints on this node (proto/ps_records.h). A save writes the head of this node's image (step,
 * layout, where the state lies in the pool) into every local rank's reply; the ranks copy the
 * state out of the pool themselves (the client library, collective_ps.h coll_ps_save_node()), as no
 * step can change it before they all submit again. A load takes local rank 0's image, checks it
 * against this node's own shard field by field (the client library re-shards images of another
 * node count before they come here) and copies the state in. Both run between steps only.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/pool.h"
#include "engine/exec.h"
#include "ps/internal.h"

uint64_t coll_ps_quiet_step(const coll_ps_job_t *ps)
{
    uint64_t step = ps->buckets[0].step;

    for (uint32_t k = 0; k < ps->reg.num_buckets; k++) {
        if (ps->buckets[k].busy != NULL || ps->buckets[k].step != step) {
            return UINT64_MAX;
        }
    }
    return step;
}

static coll_status_t check_quiet(const coll_op_t *op, const coll_ps_job_t *ps, char *err,
                                 size_t errlen)
{
    if (coll_ps_quiet_step(ps) == UINT64_MAX) {
        snprintf(err, errlen, "%s between steps only: a bucket's step is in flight or not every "
                 "bucket has done the same steps", op->desc.coll == COLL_KIND_PS_SAVE
                     ? "save" : "load");
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

static void head_of(const coll_ps_job_t *ps, coll_ps_ckpt_t *h)
{
    *h = (coll_ps_ckpt_t){.magic = COLL_PS_CKPT_MAGIC,
                          .version = COLL_PS_RECORD_VERSION,
                          .fingerprint = ps->fingerprint,
                          .step = coll_ps_quiet_step(ps),
                          .count = ps->reg.count,
                          .shard_elems = ps->shard_elems,
                          .nodes = ps->job->nnodes,
                          .node = ps->job->node_rank,
                          .nstate = ps->nstate,
                          .num_buckets = ps->reg.num_buckets,
                          .optimizer = ps->reg.optim.kind};
}

coll_status_t coll_ps_save_node(coll_op_t *op, char *err, size_t errlen)
{
    const coll_ps_job_t *ps = op->job->ps;
    coll_status_t st = check_quiet(op, ps, err, errlen);
    coll_ps_ckpt_t h;

    if (st != COLL_OK) {
        return st;
    }
    head_of(ps, &h);
    if (h.step != op->desc.layout) {
        snprintf(err, errlen, "save after step %" PRIu64 " asked, the service has done %" PRIu64,
                 op->desc.layout, h.step);
        return COLL_ERR_INVALID;
    }
    h.state_offset = ps->state_pool_off;
    for (uint32_t l = 0; l < op->job->local_size; l++) {
        coll_ps_ckpt_chunk_t *c = (coll_ps_ckpt_chunk_t *)(void *)((uint8_t *)op->out[l] +
                                                                  sizeof(h));
        memcpy(op->out[l], &h, sizeof(h));
        for (uint32_t k = 0; k < ps->reg.num_buckets; k++) {
            c[k] = (coll_ps_ckpt_chunk_t){ps->buckets[k].chunk.off, ps->buckets[k].chunk.len};
        }
    }
    return COLL_OK;
}

/* The image's head and chunk table against this node's own. */
static coll_status_t check_image(const coll_op_t *op, const coll_ps_job_t *ps,
                                 const coll_ps_ckpt_t *h, const coll_ps_ckpt_chunk_t *c,
                                 char *err, size_t errlen)
{
    coll_ps_ckpt_t mine;

    head_of(ps, &mine);
    if (h->magic != mine.magic || h->version != mine.version) {
        snprintf(err, errlen, "not a checkpoint image of version %u", mine.version);
    } else if (h->fingerprint != mine.fingerprint || h->count != mine.count ||
               h->optimizer != mine.optimizer || h->nstate != mine.nstate) {
        snprintf(err, errlen, "the checkpoint image is of another registration (fingerprint "
                 "%016" PRIx64 ", this service's %016" PRIx64 ")", h->fingerprint,
                 mine.fingerprint);
    } else if (h->nodes != mine.nodes || h->node != mine.node ||
               h->shard_elems != mine.shard_elems) {
        snprintf(err, errlen, "the checkpoint image is node %u's of %u, this is node %u of %u",
                 h->node, h->nodes, mine.node, mine.nodes);
    } else if (h->step != op->desc.layout) {
        snprintf(err, errlen, "the checkpoint image is of step %" PRIu64 ", the load says %"
                 PRIu64, h->step, op->desc.layout);
    } else {
        for (uint32_t k = 0; k < ps->reg.num_buckets; k++) {
            if (c[k].off != ps->buckets[k].chunk.off || c[k].len != ps->buckets[k].chunk.len) {
                snprintf(err, errlen, "the checkpoint image's chunk of bucket %u differs from "
                         "this node's", k);
                return COLL_ERR_INVALID;
            }
        }
        return COLL_OK;
    }
    return COLL_ERR_INVALID;
}

coll_status_t coll_ps_load_node(coll_op_t *op, char *err, size_t errlen)
{
    coll_ps_job_t *ps = op->job->ps;
    const coll_op_member_t *m = &op->members[0];
    size_t head = coll_ps_ckpt_head_bytes(ps->reg.num_buckets);
    size_t state = (size_t)ps->nstate * ps->shard_elems * sizeof(float);
    const uint8_t *image = coll_pool_base(op->job->pool) + m->send_off;
    coll_ps_ckpt_chunk_t chunks[COLL_PS_MAX_BUCKETS];
    coll_ps_ckpt_t h;
    coll_status_t st = check_quiet(op, ps, err, errlen);

    if (st != COLL_OK) {
        return st;
    }
    /* Copied before it is checked, so that the rank cannot change it meanwhile. */
    if (!coll_pool_range_owned(op->job->pool, m->send_off, head + state, m->session)) {
        snprintf(err, errlen, "rank %u: the checkpoint image at pool offset %" PRIu64 " is not "
                 "%zu bytes inside its allocations", op->job->ranks[0], m->send_off,
                 head + state);
        return COLL_ERR_NOT_IN_POOL;
    }
    memcpy(&h, image, sizeof(h));
    memcpy(chunks, image + sizeof(h), ps->reg.num_buckets * sizeof(chunks[0]));
    if ((st = check_image(op, ps, &h, chunks, err, errlen)) != COLL_OK) {
        return st;
    }
    if (state > 0) {
        coll_op_exec(op)->copy(ps->state[0], image + head, state);
    }
    for (uint32_t k = 0; k < ps->reg.num_buckets; k++) {
        ps->buckets[k].step = h.step;
    }
    return COLL_OK;
}
