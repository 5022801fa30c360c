/*
 * The stage as a feature (stage.h, feature.h): the parameter service's operations are handed to
 * the layer above when they start, and a step keeps the stage it was given until it is freed.
 */
#include "engine/stage.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/assert.h"
#include "engine/op.h"

/* The layer above prepares the parameter service's operations; a refusal fails the job
 * everywhere, as a refused submission does. */
static coll_status_t stage_attach(coll_op_t *op, void **state)
{
    coll_job_t *job = op->job;
    coll_stage_t *stage;
    char err[512], nm[48];
    coll_status_t st;

    if (!coll_kind_is_ps(op->desc.coll)) {
        return COLL_OK;
    }
    COLL_ASSERT(job->d->stage_hooks != NULL); /* the submissions were refused otherwise */
    if ((stage = calloc(1, sizeof(*stage))) == NULL) {
        snprintf(err, sizeof(err), "daemon out of memory");
        st = COLL_ERR_NOMEM;
    } else {
        st = job->d->stage_hooks->start(op, stage, err, sizeof(err));
    }
    if (st != COLL_OK) {
        free(stage);
        coll_desc_name(&op->desc, nm, sizeof(nm));
        coll_job_fail(job, st, 1, "job %s: %s: %s", job->id, nm, err);
        return st;
    }
    if (stage->calls == NULL) {
        free(stage); /* registration, save, load: nothing between the phases */
        return COLL_OK;
    }
    *state = stage;
    return COLL_OK;
}

/* A send, or a receive of the length it expected, goes to the stage. */
static void stage_on_xfer(coll_op_t *op, void *state, coll_xfer_t *x)
{
    const coll_stage_t *stage = state;

    if (x->is_send || x->length == x->expect) {
        stage->calls->on_xfer(op, x);
    } else {
        coll_op_wrong_length(op, x);
    }
}

static void stage_done(coll_op_t *op, void *state, coll_status_t status, coll_ctl_times_t *t)
{
    const coll_stage_t *stage = state;

    (void)t;
    stage->calls->done(op, status);
}

static void stage_free(coll_op_t *op, void *state)
{
    const coll_stage_t *stage = state;

    stage->calls->end(op);
    free(state);
}

const coll_op_feature_t coll_stage_feature = {
    .name = "stage",
    .attach = stage_attach,
    .on_xfer = stage_on_xfer,
    .done = stage_done,
    .free = stage_free,
};

const coll_stage_t *coll_op_stage(const coll_op_t *op)
{
    return coll_op_feature_state(op, &coll_stage_feature);
}

void *coll_stage_state(const coll_op_t *op)
{
    const coll_stage_t *stage = coll_op_stage(op);

    COLL_ASSERT(stage != NULL);
    return stage->state;
}

void coll_stage_resume(coll_op_t *op)
{
    COLL_ASSERT(coll_op_stage(op)->barrier && op->impl->resume != NULL);
    /* Held, so that a failure on the way (which completes it) cannot free it under us. */
    coll_op_hold(op);
    if (!op->done) {
        op->impl->resume(op);
    }
    coll_op_release(op);
}

coll_status_t coll_stage_post(coll_op_t *op, int send, uint32_t node, uint64_t tag, void *buf,
                              size_t len, coll_xfer_t *x)
{
    return coll_op_feature_post(op, &coll_stage_feature, send, node, tag, buf, len, x);
}
