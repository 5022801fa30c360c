/* The fake net layer of the engine's unit tests (fake_net.h). */
#include "fake_net.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/staging.h"
#include "engine/codec/codec.h"
#include "engine/dev_sync.h"
#include "net/clientlink.h"
#include "net/transport.h"

/* A posted receive or a send waiting for one. */
typedef struct {
    coll_list_t link;
    coll_xfer_t *x;
    uint64_t tag;
    void *buf;           /* receive: where to; send: a copy (EAGER) or the sender's buffer */
    size_t len;
    int owns_buf;
} pending_t;

static fake_world_t *world;

static uint32_t node_of(const coll_job_t *job)
{
    return (uint32_t)(job - world->job);
}

static void complete(coll_xfer_t *x, ucs_status_t status, size_t length)
{
    x->status = status;
    x->length = length;
    x->completed = 1;
    coll_list_push(&x->job->net.events, &x->link);
}

static void deliver(pending_t *send, pending_t *recv)
{
    int fits = send->len <= recv->len;

    if (fits && send->len > 0) {
        memcpy(recv->buf, send->buf, send->len);
    }
    complete(recv->x, fits ? UCS_OK : UCS_ERR_MESSAGE_TRUNCATED, fits ? send->len : 0);
    if (send->x != NULL) { /* RENDEZVOUS: the send completes now */
        complete(send->x, UCS_OK, 0);
    }
    if (send->owns_buf) {
        free(send->buf);
    }
    free(send);
    free(recv);
}

static pending_t *take(coll_list_t *list, uint64_t tag)
{
    pending_t *p, *tmp;
    coll_list_for_each_safe(p, tmp, list, pending_t, link)
    {
        if (p->tag == tag) {
            coll_list_remove(&p->link);
            return p;
        }
    }
    return NULL;
}

static void record_send(uint32_t from, uint32_t to, uint64_t tag, const void *buf, size_t len)
{
    fake_sent_t *s;

    if (world->nsent == world->cap_sent) {
        world->cap_sent = world->cap_sent ? 2 * world->cap_sent : 1024;
        world->sent = realloc(world->sent, world->cap_sent * sizeof(*world->sent));
        assert_non_null(world->sent);
    }
    s = &world->sent[world->nsent++];
    *s = (fake_sent_t){.from = from, .to = to, .tag = tag, .len = len};
    memcpy(s->head, buf, len < sizeof(s->head) ? len : sizeof(s->head));
}

coll_status_t coll_transport_send(coll_job_t *job, uint32_t node, uint64_t tag, const void *buf,
                                  size_t len, coll_xfer_t *x)
{
    uint32_t me = node_of(job);
    pending_t *s = calloc(1, sizeof(*s)), *r;

    assert_non_null(s);
    x->job = job;
    x->completed = 0;
    x->peer = node;
    record_send(me, node, tag, buf, len);
    if (world->fail_node == (int)me && ++world->sends_of[me] == world->fail_at_send) {
        free(s);
        complete(x, UCS_ERR_CONNECTION_RESET, 0);
        return COLL_OK;
    }
    *s = (pending_t){.tag = tag, .len = len, .buf = (void *)buf};
    if (world->mode == FAKE_EAGER) {
        s->buf = malloc(len ? len : 1);
        assert_non_null(s->buf);
        memcpy(s->buf, buf, len);
        s->owns_buf = 1;
        complete(x, UCS_OK, 0);
    } else {
        s->x = x;
    }
    if ((r = take(&world->posted[node], tag)) != NULL) {
        deliver(s, r);
    } else {
        coll_list_push(&world->arrived[node], &s->link);
    }
    return COLL_OK;
}

coll_status_t coll_transport_recv(coll_job_t *job, uint32_t from, uint64_t tag, void *buf,
                                  size_t len, coll_xfer_t *x)
{
    uint32_t me = node_of(job);
    pending_t *r = calloc(1, sizeof(*r)), *s;

    assert_non_null(r);
    x->job = job;
    x->completed = 0;
    x->suspect = 0;
    x->expect = len;
    x->peer = from;
    *r = (pending_t){.x = x, .tag = tag, .buf = buf, .len = len};
    if ((s = take(&world->arrived[me], tag)) != NULL) {
        deliver(s, r);
    } else {
        coll_list_push(&world->posted[me], &r->link);
    }
    return COLL_OK;
}

int coll_transport_unexpected(coll_job_t *job, uint64_t tag)
{
    pending_t *p, *tmp;
    coll_list_for_each_safe(p, tmp, &world->arrived[node_of(job)], pending_t, link)
    {
        if (p->tag == tag) {
            return 1;
        }
    }
    return 0;
}

size_t coll_transport_take(coll_job_t *job, uint64_t tag, void *buf, size_t len)
{
    pending_t *s = take(&world->arrived[node_of(job)], tag);
    size_t n = 0;

    if (s == NULL) {
        return 0;
    }
    if (s->len <= len) {
        memcpy(buf, s->buf, s->len);
        n = s->len;
    }
    if (s->x != NULL) {
        complete(s->x, UCS_OK, 0);
    }
    if (s->owns_buf) {
        free(s->buf);
    }
    free(s);
    return n;
}

void coll_transport_cancel(coll_job_t *job, coll_xfer_t *x)
{
    pending_t *p, *tmp;
    coll_list_for_each_safe(p, tmp, &world->posted[node_of(job)], pending_t, link)
    {
        if (p->x == x) {
            coll_list_remove(&p->link);
            free(p);
            complete(x, UCS_ERR_CANCELED, 0);
            return;
        }
    }
}

void coll_transport_drive(coll_job_t *job)
{
    coll_list_t *e;
    while ((e = coll_list_pop(&job->net.events)) != NULL) {
        job->net.hooks->on_xfer(coll_container_of(e, coll_xfer_t, link));
    }
}

coll_status_t coll_transport_job_open(coll_job_t *job, const coll_transport_hooks_t *hooks)
{
    job->net.hooks = hooks;
    return COLL_OK;
}

void coll_transport_job_close(coll_job_t *job)
{
}

void coll_session_complete_op(coll_session_t *s, uint32_t req_id, coll_status_t status,
                              const char *error, const char *algo, const coll_ctl_times_t *t)
{
    fake_done_t *d;

    assert_true(world->ndone < FAKE_MAX_DONE);
    d = &world->done[world->ndone++];
    *d = (fake_done_t){.node = node_of(s->job), .local_rank = s->local_rank, .req_id = req_id,
                       .status = status};
    snprintf(d->error, sizeof(d->error), "%s", error);
    snprintf(d->algo, sizeof(d->algo), "%s", algo);
    d->wire_bytes = t->wire_bytes;
    d->dense_bytes = t->dense_bytes;
}

/* The only other message the engine sends a client: the answer to a layout. */
coll_status_t coll_session_send(coll_session_t *s, coll_daemon_msg_t *msg)
{
    (void)s;
    assert_int_equal(msg->body_case, COLL__WIRE__DAEMON_MSG__BODY_LAYOUT);
    world->layout_status = msg->layout->status;
    return COLL_OK;
}

void coll_session_complete(coll_session_t *s, uint32_t req_id, coll_status_t status,
                           const char *error, const char *algo)
{
    static const coll_ctl_times_t none;
    coll_session_complete_op(s, req_id, status, error, algo, &none);
}

/* ---- the world ------------------------------------------------------------------------------ */

/* The job layer's part of a failure, as job/lifecycle.c does it: the operations end on every rank. */
static void job_failed(coll_job_t *job, int was, int tell_peers)
{
    coll_op_fail_all(job);
}

static void ignore_job(coll_job_t *job)
{
}

static const coll_job_hooks_t hooks = {.failed = job_failed, .closed = ignore_job,
                                       .idle = ignore_job};

static void init_node(fake_world_t *w, uint32_t n, size_t segment_bytes, size_t pool_bytes)
{
    coll_job_t *job = &w->job[n];

    w->d[n].cfg.rd_max_bytes = 64 << 10;
    w->d[n].job_hooks = &hooks;
    coll_list_init(&w->d[n].jobs);
    *job = (coll_job_t){.d = &w->d[n], .state = COLL_JOB_READY, .world_size = w->nnodes * w->nlocal,
                        .local_size = w->nlocal, .njoined = w->nlocal, .locals = w->locals[n],
                        .ranks = w->ranks[n], .node_rank = n, .nnodes = w->nnodes,
                        .nodes = w->nodes[n], .rank_node = w->rank_node,
                        .rank_local = w->rank_local, .epoch = 42};
    snprintf(job->id, sizeof(job->id), "fake");
    job->params = (coll_job_params_t){.timeout_ms = 60000, .segment_bytes = segment_bytes,
                                      .pipeline_depth = 2, .rd_max_bytes = 16 << 10};
    job->engine.staging_bytes = 2 * segment_bytes;
    coll_list_init(&job->engine.ops);
    coll_list_init(&job->engine.staging);
    coll_list_init(&job->net.events);
    coll_list_init(&job->groups);
    for (uint32_t m = 0; m < w->nnodes; m++) {
        w->nodes[n][m] = (coll_node_t){.job = job, .index = m, .nranks = w->nlocal,
                                       .ranks = w->ranks[m]};
    }
    assert_int_equal(coll_group_world(job), COLL_OK);
    for (uint32_t l = 0; l < w->nlocal; l++) {
        w->sess[n][l] = (coll_session_t){.d = &w->d[n], .job = job, .local_rank = l,
                                         .rank = w->ranks[n][l]};
        w->locals[n][l] = &w->sess[n][l];
    }
    assert_int_equal(coll_pool_create("fake", pool_bytes, &job->pool), COLL_OK);
    assert_int_equal(coll_engine_job_open(job), COLL_OK);
    coll_list_init(&w->posted[n]);
    coll_list_init(&w->arrived[n]);
}

void fake_net_init(fake_world_t *w, uint32_t nnodes, uint32_t nlocal, size_t segment_bytes,
                   size_t pool_bytes, fake_mode_t mode)
{
    assert_true(nnodes <= FAKE_MAX_NODES && nlocal <= FAKE_MAX_LOCAL);
    memset(w, 0, sizeof(*w));
    world = w;
    w->nnodes = nnodes;
    w->nlocal = nlocal;
    w->mode = mode;
    w->fail_node = -1;
    for (uint32_t n = 0; n < nnodes; n++) {
        for (uint32_t l = 0; l < nlocal; l++) {
            w->ranks[n][l] = n * nlocal + l;
            w->rank_node[n * nlocal + l] = n;
            w->rank_local[n * nlocal + l] = l;
        }
    }
    for (uint32_t n = 0; n < nnodes; n++) {
        init_node(w, n, segment_bytes, pool_bytes);
    }
}

void fake_net_free(fake_world_t *w)
{
    for (uint32_t n = 0; n < w->nnodes; n++) {
        coll_op_free_all(&w->job[n]);
        coll_group_free_all(&w->job[n]);
        coll_staging_release_all(&w->job[n]);
        coll_codec_job_free(&w->job[n]);
        coll_dev_sync_job_end(&w->job[n]); /* as the job's release does */
        coll_pool_destroy(w->job[n].pool);
        while (!coll_list_empty(&w->posted[n])) {
            free(coll_container_of(coll_list_pop(&w->posted[n]), pending_t, link));
        }
        while (!coll_list_empty(&w->arrived[n])) {
            pending_t *p = coll_container_of(coll_list_pop(&w->arrived[n]), pending_t, link);
            free(p->owns_buf ? p->buf : NULL);
            free(p);
        }
    }
    free(w->sent);
    world = NULL;
}

void fake_net_run(fake_world_t *w)
{
    int busy = 1;

    while (busy) {
        busy = 0;
        for (uint32_t n = 0; n < w->nnodes; n++) {
            busy |= !coll_list_empty(&w->job[n].net.events);
            coll_transport_drive(&w->job[n]);
        }
    }
}

void *fake_net_alloc(fake_world_t *w, uint32_t node, uint32_t l, size_t bytes)
{
    size_t off;

    assert_int_equal(coll_pool_alloc(w->job[node].pool, bytes ? bytes : 64, &w->sess[node][l],
                                     &off), COLL_OK);
    return coll_pool_base(w->job[node].pool) + off;
}

const fake_done_t *fake_net_done(const fake_world_t *w, uint32_t node, uint32_t l,
                                 uint32_t req_id)
{
    for (uint32_t i = 0; i < w->ndone; i++) {
        const fake_done_t *d = &w->done[i];
        if (d->node == node && d->local_rank == l && d->req_id == req_id) {
            return d;
        }
    }
    return NULL;
}
