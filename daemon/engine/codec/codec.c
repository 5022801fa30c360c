/*
 * An operation's compression from start to end (codec.h): what it runs, its bucket's slot, the
 * auto policy message, and what its completion commits.
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
    const coll_tensor_layout_t *l = op->codec->layout;
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
    op->codec = c;
    return c;
}

const coll_impl_t *coll_codec_start(coll_op_t *op)
{
    coll_codec_op_t *c;

    if (op->desc.compression == 0) {
        return NULL;
    }
    if ((c = op_state(op)) == NULL) {
        coll_job_fail(op->job, COLL_ERR_NOMEM, 1, "job %s: no memory for compression",
                      op->job->id);
        return NULL;
    }
    if (!coll__policy_applies(op, c)) {
        return NULL;
    }
    if (c->layout != NULL && c->layout->total != op->desc.count) {
        return &wrong_layout;
    }
    if ((c->slot = coll__slot_take(op)) == NULL) {
        return NULL;
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
    return op->desc.coll == COLL_KIND_PS_STEP ? coll__cx_staged_impl(c->run.method)
                                              : coll__cx_impl(c->run.method);
}

coll_status_t coll_codec_policy_post(coll_op_t *op)
{
    coll_codec_op_t *c = op->codec;
    uint32_t n = op->job->nnodes;
    uint64_t tag = coll_tag_make(op->grp->id, op->desc.key, COLL_TAG_DESC, 1, 0);
    coll_status_t st = COLL_OK;

    if (c == NULL || !c->policy) {
        return COLL_OK;
    }
    if ((c->policy_x = calloc(n, sizeof(coll_xfer_t))) == NULL) {
        return COLL_ERR_NOMEM;
    }
    c->msg = (coll_policy_msg_t){op->desc, c->next_run, 0};
    if (op->job->node_rank != 0) {
        c->policy_wait = 1;
        c->policy_x[0] = (coll_xfer_t){.op = op, .kind = COLL_TAG_DESC};
        return coll_op_recv(op, 0, tag, &c->msg, sizeof(c->msg), &c->policy_x[0]);
    }
    for (uint32_t p = 1; p < n && st == COLL_OK; p++) {
        c->policy_x[p] = (coll_xfer_t){.op = op, .kind = COLL_TAG_DESC, .is_send = 1};
        st = coll_op_send(op, p, tag, &c->msg, sizeof(c->msg), &c->policy_x[p]);
    }
    return st;
}

int coll_codec_is_policy_xfer(const coll_op_t *op, const coll_xfer_t *x)
{
    const coll_codec_op_t *c = op->codec;
    return c != NULL && c->policy_x != NULL && x >= c->policy_x &&
           x < c->policy_x + op->job->nnodes;
}

int coll_codec_policy_waiting(const coll_op_t *op)
{
    return op->codec != NULL && op->codec->policy_wait;
}

void coll_codec_policy_xfer(coll_op_t *op, coll_xfer_t *x)
{
    coll_codec_op_t *c = op->codec;
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

void coll_codec_op_done(coll_op_t *op, coll_status_t status, coll_ctl_times_t *t)
{
    coll_codec_op_t *c = op->codec;

    if (c != NULL && c->slot != NULL) {
        slot_done(op, c, status);
        c->slot = NULL;
    }
    coll__account_op(op, status, t);
}

void coll_codec_op_free(coll_op_t *op)
{
    if (op->codec != NULL) {
        free(op->codec->policy_x);
        free(op->codec);
        op->codec = NULL;
    }
}
