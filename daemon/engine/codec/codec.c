/*
 * An operation's compression from start to end, as a feature of the operation (codec.h,
 * engine/feature.h): what it runs, its bucket's slot, the auto policy message, and what its
 * completion commits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "common/compression.h"
#include "engine/codec/codec.h"
#include "engine/codec/internal.h"
#include "proto/cspec.h"
#include "proto/tag.h"

uint64_t coll__cspec_of(const coll_compression_t *c)
{
    return c->method == COLL_COMPRESS_NONE
               ? 0
               : coll_cspec_pack(c, coll__compress_ratio_units(c->ratio));
}

/* An operation whose count is not the sum of its layout's tensors: it fails on every rank. */
static coll_status_t wrong_layout_start(coll_op_t *op)
{
    const coll_tensor_layout_t *l = coll__codec_op(op)->layout;
    char msg[160];

    snprintf(msg, sizeof(msg), "count %llu is not the %llu elements of layout %016llx's %zu "
             "tensors", (unsigned long long)op->desc.count, (unsigned long long)l->total,
             (unsigned long long)l->layout, l->ntensors);
    coll_op_algo_failed(op, COLL_ERR_INVALID, msg);
    return COLL_OK;
}

static const coll_impl_t wrong_layout = {.name = "none", .start = wrong_layout_start};

static coll_codec_op_t *op_state(coll_op_t *op)
{
    coll_codec_op_t *c = calloc(1, sizeof(*c));

    if (c != NULL) {
        coll_cspec_unpack(op->desc.compression, &c->asked);
        c->asked.warmup = op->desc.warmup;
        c->asked.bucket = op->desc.bucket;
        /* A parameter-service step's layout field is its step number, not a fingerprint. */
        c->layout = op->desc.coll == COLL_KIND_PS_STEP
                        ? NULL
                        : coll__layout_find(op->job, op->desc.layout);
    }
    return c;
}

/* What an operation that asked for compression runs (op->desc.run, op->impl), from its bucket's
 * slot; an operation that may not compress at all carries no compression state. */
static coll_status_t codec_attach(coll_op_t *op, void **state)
{
    coll_codec_op_t *c;

    if (op->desc.compression == 0) {
        return COLL_OK;
    }
    if ((c = op_state(op)) == NULL) {
        coll_job_fail(op->job, COLL_ERR_NOMEM, 1, "job %s: no memory for compression",
                      op->job->id);
        return COLL_ERR_NOMEM;
    }
    if (!coll__policy_applies(op, c)) {
        free(c);
        return COLL_OK;
    }
    *state = c;
    if (c->layout != NULL && c->layout->total != op->desc.count) {
        op->impl = &wrong_layout;
        return COLL_OK;
    }
    if ((c->slot = coll__slot_take(op)) == NULL) {
        return op->job->error;
    }
    coll__policy_resolve(op, c);
    op->desc.run = coll__cspec_of(&c->run);
    if (c->asked.method == COLL_COMPRESS_AUTO) {
        c->policy = 1;
        c->next_run = c->slot->auto_next;
        if (op->job->node_rank == 0) {
            c->next_run = coll__policy_choose(op, c, c->slot->auto_why,
                                              sizeof(c->slot->auto_why));
        }
    }
    op->impl = op->desc.coll == COLL_KIND_PS_STEP ? coll__cx_staged_impl(c->run.method)
                                                  : coll__cx_impl(c->run.method);
    return COLL_OK;
}

/* The auto policy message: the root's choice for the bucket's next operation, to every other
 * node; a receive on the others. */
static coll_status_t codec_start(coll_op_t *op, void *state)
{
    coll_codec_op_t *c = state;
    uint32_t n = op->job->nnodes;
    uint64_t tag = coll_tag_make(op->grp->id, op->desc.key, COLL_TAG_DESC, 1, 0);
    coll_status_t st = COLL_OK;

    if (!c->policy) {
        return COLL_OK;
    }
    if ((c->policy_x = calloc(n, sizeof(coll_xfer_t))) == NULL) {
        return COLL_ERR_NOMEM;
    }
    c->msg = (coll_policy_msg_t){op->desc, c->next_run, 0};
    if (op->job->node_rank != 0) {
        c->policy_wait = 1;
        c->policy_x[0] = (coll_xfer_t){.op = op, .kind = COLL_TAG_DESC};
        return coll_op_feature_post(op, &coll_codec_feature, 0, 0, tag, &c->msg,
                                    sizeof(c->msg), &c->policy_x[0]);
    }
    for (uint32_t p = 1; p < n && st == COLL_OK; p++) {
        c->policy_x[p] = (coll_xfer_t){.op = op, .kind = COLL_TAG_DESC, .is_send = 1};
        st = coll_op_feature_post(op, &coll_codec_feature, 1, p, tag, &c->msg, sizeof(c->msg),
                                  &c->policy_x[p]);
    }
    return st;
}

static int codec_waiting(const coll_op_t *op, const void *state)
{
    const coll_codec_op_t *c = state;

    (void)op;
    return c->policy_wait;
}

/* A policy message arrived (checks the sender's descriptor), or one went out. */
static void codec_on_xfer(coll_op_t *op, void *state, coll_xfer_t *x)
{
    coll_codec_op_t *c = state;
    coll_compression_t next;
    char nm[48];

    if (x->is_send) {
        return;
    }
    coll_desc_name(&op->desc, nm, sizeof(nm));
    if (x->length != sizeof(c->msg) || !coll_cspec_unpack(c->msg.next_run, &next) ||
        (c->msg.next_run != 0 && (coll__compression_check(&next) != COLL_OK ||
                                  coll__cspec_of(&next) != c->msg.next_run))) {
        coll_job_fail(op->job, COLL_ERR_PROTOCOL, 1, "%s: a malformed policy message from "
                      "node 0", nm);
        return;
    }
    if (coll_op_check_desc(op, &c->msg.desc, 0)) {
        c->next_run = c->msg.next_run;
        c->policy_wait = 0;
    }
}

/* The operation's bucket after it ended with @p status. */
static void slot_done(coll_op_t *op, coll_codec_op_t *c, coll_status_t status)
{
    coll_slot_t *s = c->slot;

    if (status == COLL_OK) {
        if (c->commit && s->ef) {
            s->cur ^= 1;
        }
        if (c->run.method == COLL_COMPRESS_NONE) {
            coll__slot_drop(op->job, s); /* no residual outlives an uncompressed step */
        }
        s->ops++;
        s->last_run = op->desc.run;
        if (c->policy) {
            s->auto_next = c->next_run;
        }
    } else if (status == COLL_ERR_INVALID && c->run.method != COLL_COMPRESS_NONE) {
        op->job->engine.codec->nonfinite++;
    }
    s->busy = 0;
}

/* Commit or drop the residual, release the slot, apply the root's choice for the bucket's next
 * operation. */
static void codec_done(coll_op_t *op, void *state, coll_status_t status, coll_ctl_times_t *t)
{
    coll_codec_op_t *c = state;

    (void)t;
    if (c->slot != NULL) {
        slot_done(op, c, status);
        c->slot = NULL;
    }
}

static void codec_free(coll_op_t *op, void *state)
{
    coll_codec_op_t *c = state;

    (void)op;
    free(c->policy_x);
    free(c);
}

const coll_op_feature_t coll_codec_feature = {
    .name = "compression",
    .attach = codec_attach,
    .start = codec_start,
    .on_xfer = codec_on_xfer,
    .waiting = codec_waiting,
    .done = codec_done,
    .free = codec_free,
};
