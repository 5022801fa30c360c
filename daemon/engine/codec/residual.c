/*
 * Residual slots: one per (job, bucket) on each node, in the job's pool, so that they count
 * against its budget and UCX sends from registered memory. A slot holds the error-feedback
 * residual (double buffered: internal.h), the server residual of the two-sided codecs, PowerSGD's
 * warm-started Q, and the wire buffers of one operation, laid out for the method that runs.
 *
 * The reset rule: a bucket whose kind of operation (allreduce or parameter-service step), count,
 * datatype, layout (fingerprint or shapes; a step's layout field is its step number and does
 * not count) or asked-for compression differs from its slot's last operation starts over:
 * residual zero, Q drawn anew, warm-up counted from 0 (DDP rebuilds its buckets after the first
 * iteration; the bucketer does too). Counted in collectived_compression_resets_total{reason="bucket"}. A change of the
 * method that runs (auto's choice, the end of the warm-up) keeps the warm-up count but zeroes
 * the residual when the method's memory differs (reason="method").
 */
#include <inttypes.h>
#include <stdlib.h>

#include "base/log.h"
#include "engine/codec/codec.h"
#include "engine/codec/internal.h"

coll_codec_job_t *coll__codec_job(coll_job_t *job)
{
    coll_codec_job_t *cj = job->engine.codec;

    if (cj == NULL && (cj = calloc(1, sizeof(*cj))) != NULL) {
        coll_list_init(&cj->layouts);
        coll_list_init(&cj->slots);
        job->engine.codec = cj;
    }
    return cj;
}

static void slot_release_memory(coll_job_t *job, coll_slot_t *s)
{
    if (s->pool_bytes > 0 && job->pool != NULL) {
        coll_pool_free(job->pool, s->pool_off, job->engine.codec);
    }
    s->pool_bytes = 0;
    s->mem_run = 0;
}

void coll_codec_job_free(coll_job_t *job)
{
    coll_codec_job_t *cj = job->engine.codec;
    coll_tensor_layout_t *l, *ltmp;
    coll_slot_t *s, *stmp;

    if (cj == NULL) {
        return;
    }
    coll_list_for_each_safe(l, ltmp, &cj->layouts, coll_tensor_layout_t, link)
    {
        coll_list_remove(&l->link);
        free(l);
    }
    coll_list_for_each_safe(s, stmp, &cj->slots, coll_slot_t, link)
    {
        slot_release_memory(job, s);
        coll_list_remove(&s->link);
        free(s);
    }
    free(cj);
    job->engine.codec = NULL;
}

static coll_slot_t *slot_find(coll_codec_job_t *cj, uint32_t bucket)
{
    coll_slot_t *s, *tmp;

    coll_list_for_each_safe(s, tmp, &cj->slots, coll_slot_t, link)
    {
        if (s->bucket == bucket) {
            return s;
        }
    }
    return NULL;
}

/* The bucket as this operation describes it differs from the slot's: start over. */
static void slot_reset_if_changed(coll_job_t *job, coll_codec_job_t *cj, coll_slot_t *s,
                                  const coll_desc_t *d)
{
    int same_layout = d->coll == COLL_KIND_PS_STEP || s->layout == d->layout;

    if (s->kind == d->coll && s->count == d->count && s->dtype == d->dtype && same_layout &&
        s->shapes == d->shapes && s->asked == d->compression && s->warmup == d->warmup) {
        return;
    }
    if (s->ops > 0 || s->pool_bytes > 0) {
        s->resets++;
        cj->resets++;
        coll_debug(COLL_SUB_JOB, "job %s: bucket %u changed (count %" PRIu64 " -> %" PRIu64
                   "): its residual starts over", job->id, s->bucket, s->count, d->count);
    }
    slot_release_memory(job, s);
    s->kind = d->coll;
    s->count = d->count;
    s->dtype = d->dtype;
    s->layout = d->layout;
    s->shapes = d->shapes;
    s->asked = d->compression;
    s->warmup = d->warmup;
    s->ops = 0;
    s->auto_next = 0;
    s->last_run = 0;
    s->auto_why[0] = '\0';
}

coll_slot_t *coll__slot_take(coll_op_t *op)
{
    coll_job_t *job = op->job;
    coll_codec_job_t *cj = coll__codec_job(job);
    coll_slot_t *s = cj != NULL ? slot_find(cj, op->desc.bucket) : NULL;

    if (cj != NULL && s == NULL && (s = calloc(1, sizeof(*s))) != NULL) {
        s->bucket = op->desc.bucket;
        s->count = UINT64_MAX; /* so that the first operation sets it */
        coll_list_push(&cj->slots, &s->link);
    }
    if (s == NULL) {
        coll_job_fail(job, COLL_ERR_NOMEM, 1, "job %s: no memory for the compression state of "
                      "bucket %u", job->id, op->desc.bucket);
        return NULL;
    }
    if (s->busy) {
        coll_job_fail(job, COLL_ERR_INVALID, 1, "job %s: two operations of compression bucket %u "
                      "in flight at once on node %u; give concurrent compressed operations "
                      "distinct buckets (coll_compression_t.bucket)", job->id, s->bucket,
                      job->node_rank);
        return NULL;
    }
    slot_reset_if_changed(job, cj, s, &op->desc);
    s->busy = 1;
    return s;
}

static size_t floats(size_t n)
{
    return coll__cx_align(n * sizeof(float));
}

/* Offsets of every region in one allocation; its size. */
static size_t carve(coll_slot_t *s, uint8_t *base, int ef)
{
    const coll_slot_sizes_t *z = &s->sz;
    size_t off = 0;
    uint8_t *p[8];
    size_t len[8] = {floats(z->res_elems), ef ? floats(z->res_elems) : 0,
                     floats(z->srv_elems), ef ? floats(z->srv_elems) : 0, floats(z->q_elems),
                     floats(z->work_elems), coll__cx_align(z->send_bytes),
                     coll__cx_align(z->recv_bytes) + coll__cx_align(z->scratch_bytes)};

    for (int i = 0; i < 8; i++) {
        p[i] = base != NULL ? base + off : NULL;
        off += len[i];
    }
    s->res[0] = (float *)(void *)p[0];
    s->res[1] = (float *)(void *)(ef ? p[1] : p[0]);
    s->srv[0] = (float *)(void *)p[2];
    s->srv[1] = (float *)(void *)(ef ? p[3] : p[2]);
    s->q = (float *)(void *)p[4];
    s->work = (float *)(void *)p[5];
    s->send = p[6];
    s->recv = p[7];
    s->scratch = p[7] != NULL ? p[7] + coll__cx_align(z->recv_bytes) : NULL;
    return off > 0 ? off : 64;
}

static void slot_zero(const coll_exec_t *ex, coll_slot_t *s)
{
    ex->zero(s->res[0], s->sz.res_elems * sizeof(float));
    ex->zero(s->res[1], s->sz.res_elems * sizeof(float));
    ex->zero(s->srv[0], s->sz.srv_elems * sizeof(float));
    ex->zero(s->srv[1], s->sz.srv_elems * sizeof(float));
    s->cur = 0;
    s->fresh = 1;
}

void coll__slot_drop(coll_job_t *job, coll_slot_t *s)
{
    if (s->pool_bytes > 0) {
        s->method_resets++;
        job->engine.codec->method_resets++;
        slot_release_memory(job, s);
    }
}

coll_status_t coll__slot_memory(coll_op_t *op, coll_slot_t *s, uint64_t run,
                                const coll_slot_sizes_t *sz)
{
    coll_job_t *job = op->job;
    int ef = !((run >> 8) & COLL_COMPRESS_NO_EF);
    size_t bytes, off;
    coll_status_t st;

    if (s->mem_run == run && s->mem_nodes == job->nnodes && s->pool_bytes > 0) {
        return COLL_OK;
    }
    if (s->pool_bytes > 0) {
        s->method_resets++;
        job->engine.codec->method_resets++;
    }
    slot_release_memory(job, s);
    s->sz = *sz;
    bytes = carve(s, NULL, ef);
    st = coll_pool_alloc(job->pool, bytes, job->engine.codec, &off);
    if (st != COLL_OK) {
        coll_job_fail(job, st, 1, "job %s: the compression state of bucket %u (%zu bytes: "
                      "residual, wire buffers) does not fit the pool of node %u (%zu of %zu "
                      "bytes free); raise COLL_POOL_SIZE", job->id, s->bucket, bytes,
                      job->node_rank, coll_pool_free_bytes(job->pool),
                      coll_pool_size(job->pool));
        return st;
    }
    s->pool_off = off;
    s->pool_bytes = bytes;
    s->mem_run = run;
    s->mem_nodes = job->nnodes;
    s->ef = ef;
    carve(s, coll_pool_base(job->pool) + off, ef);
    slot_zero(coll_op_exec(op), s);
    return COLL_OK;
}
