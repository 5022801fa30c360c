/*
 * Registered layouts: the tensor shapes a client's layout fingerprint stands for
 * (coll_layout_register()), kept per job for PowerSGD. The descriptor carries a digest of the
 * shapes, so nodes that registered one fingerprint with different shapes fail with a mismatch
 * instead of cutting a bucket two ways.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "engine/codec/codec.h"
#include "engine/codec/internal.h"
#include "net/clientlink.h"

/* Most layouts one job may register on a node: a DDP model has one per bucket, and a rebuild
 * doubles that. */
#define LAYOUTS_MAX 4096

/* FNV-1a over the sizes (Fowler, Noll, Vo), never 0: every node computes the same digest. */
static uint64_t digest(const uint64_t *shape, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < n; i++) {
        for (int b = 0; b < 8; b++) {
            h = (h ^ ((shape[i] >> (8 * b)) & 0xffu)) * 0x100000001b3ull;
        }
    }
    return h != 0 ? h : 1;
}

const coll_tensor_layout_t *coll__layout_find(const coll_job_t *job, uint64_t layout)
{
    const coll_codec_job_t *cj = job->engine.codec;
    coll_tensor_layout_t *l, *tmp;

    if (cj == NULL || layout == 0) {
        return NULL;
    }
    coll_list_for_each_safe(l, tmp, &cj->layouts, coll_tensor_layout_t, link)
    {
        if (l->layout == layout) {
            return l;
        }
    }
    return NULL;
}

uint64_t coll_codec_shapes(const coll_job_t *job, uint64_t layout)
{
    const coll_tensor_layout_t *l = coll__layout_find(job, layout);
    return l != NULL ? l->digest : 0;
}

static size_t count_layouts(const coll_codec_job_t *cj)
{
    size_t n = 0;
    coll_tensor_layout_t *l, *tmp;

    coll_list_for_each_safe(l, tmp, &cj->layouts, coll_tensor_layout_t, link)
    {
        n++;
    }
    return n;
}

/* Add the layout, or find it registered with the same shapes. */
static coll_status_t add(coll_job_t *job, const Coll__Wire__Layout *m, char *err, size_t len)
{
    coll_codec_job_t *cj = coll__codec_job(job);
    const coll_tensor_layout_t *old = coll__layout_find(job, m->layout);
    coll_tensor_layout_t *l;

    if (old != NULL) {
        if (old->ntensors * 2 == m->n_shape &&
            memcmp(old->shape, m->shape, m->n_shape * sizeof(uint64_t)) == 0) {
            return COLL_OK;
        }
        snprintf(err, len, "layout %016llx is registered on node %u with other shapes "
                 "(%zu tensors, now %zu)", (unsigned long long)m->layout, job->node_rank,
                 old->ntensors, m->n_shape / 2);
        return COLL_ERR_INVALID;
    }
    if (cj == NULL || count_layouts(cj) >= LAYOUTS_MAX ||
        (l = calloc(1, sizeof(*l) + m->n_shape * sizeof(uint64_t))) == NULL) {
        snprintf(err, len, "no room for another layout in job %s (%u at most)", job->id,
                 LAYOUTS_MAX);
        return COLL_ERR_NOMEM;
    }
    l->layout = m->layout;
    l->ntensors = m->n_shape / 2;
    l->shape = (uint64_t *)(l + 1);
    memcpy(l->shape, m->shape, m->n_shape * sizeof(uint64_t));
    for (size_t t = 0; t < l->ntensors; t++) {
        l->total += l->shape[2 * t] * l->shape[2 * t + 1]; /* each checked by wire.c */
    }
    l->digest = digest(l->shape, m->n_shape);
    coll_list_push(&cj->layouts, &l->link);
    return COLL_OK;
}

void coll_codec_layout_register(coll_job_t *job, coll_session_t *s, const Coll__Wire__Layout *l)
{
    coll_daemon_msg_t msg = COLL__WIRE__DAEMON_MSG__INIT;
    Coll__Wire__LayoutReply r = COLL__WIRE__LAYOUT_REPLY__INIT;
    char err[400] = "";

    r.req_id = l->req_id;
    if (job->state != COLL_JOB_READY) {
        r.status = COLL_ERR_JOB;
        snprintf(err, sizeof(err), "job %s is %s", job->id,
                 job->state == COLL_JOB_FAILED ? "failed" : "not running yet");
    } else {
        r.status = add(job, l, err, sizeof(err));
    }
    if (r.status != COLL_OK) {
        coll_warn(COLL_SUB_JOB, "job %s: rank %u: %s", job->id, s->rank, err);
    }
    r.error = err;
    msg.body_case = COLL__WIRE__DAEMON_MSG__BODY_LAYOUT;
    msg.layout = &r;
    coll_session_send(s, &msg);
}
