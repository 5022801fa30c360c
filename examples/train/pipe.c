/* A pipeline stage and its 1F1B schedule (pipe.h). */
#include "pipe.h"

#include <stdio.h>
#include <string.h>

static int first_width(const pipe_t *p)
{
    return p->shard->lay.in[0];
}

static int last_width(const pipe_t *p)
{
    return p->shard->lay.out[p->shard->lay.count - 1];
}

static int alloc_or_fail(dist_t *d, float **buf, size_t n)
{
    *buf = dist_alloc(d, n);
    return *buf == NULL ? -1 : 0;
}

int pipe_init(pipe_t *p, dist_t *d, shard_t *s, coll_comm_t *pp, int stage, int nstages,
              int micro, int rows, int timeout_ms)
{
    const shard_layout_t *lay = &s->lay;
    size_t r = (size_t)rows;
    int rc = 0;

    *p = (pipe_t){.shard = s, .pp = pp, .stage = stage, .nstages = nstages, .micro = micro,
                  .rows = rows, .timeout_ms = timeout_ms};
    p->slots = nstages - stage < micro ? nstages - stage : micro;
    if (p->slots > PIPE_MAX_SLOTS) {
        fprintf(stderr, "coll-train: %d micro-batches in flight on stage %d, at most %d\n",
                p->slots, stage, PIPE_MAX_SLOTS);
        return -1;
    }
    for (int k = 0; k < lay->count && rc == 0; k++) {
        rc = alloc_or_fail(d, &p->delta[k], r * (size_t)lay->out[k]);
    }
    for (int i = 0; i < p->slots && rc == 0; i++) {
        rc = alloc_or_fail(d, &p->in[i], r * (size_t)first_width(p));
        for (int k = 0; k < lay->count && rc == 0; k++) {
            rc = alloc_or_fail(d, &p->act[i][k], r * (size_t)lay->out[k]);
        }
        if (rc == 0 && stage > 0) {
            rc = alloc_or_fail(d, &p->grad_in[i], r * (size_t)first_width(p));
        }
    }
    if (rc == 0 && stage == 0 && lay->role[0] == SHARD_COLUMN) {
        rc = alloc_or_fail(d, &p->scratch, r * (size_t)first_width(p));
    }
    return rc;
}

void pipe_fini(pipe_t *p, dist_t *d)
{
    for (int i = 0; i < p->slots; i++) {
        dist_free(d, p->in[i]);
        dist_free(d, p->grad_in[i]);
        for (int k = 0; k < p->shard->lay.count; k++) {
            dist_free(d, p->act[i][k]);
        }
    }
    for (int k = 0; p->shard != NULL && k < p->shard->lay.count; k++) {
        dist_free(d, p->delta[k]);
    }
    dist_free(d, p->scratch);
    memset(p, 0, sizeof(*p));
}

static int failed(const pipe_t *p, const char *what, int peer, coll_status_t st)
{
    fprintf(stderr, "coll-train: stage %d: %s stage %d: %s (%s): %s\n", p->stage, what, peer,
            coll_strerror(st), coll_err_name(st), coll_comm_last_error(p->pp));
    return -1;
}

/* Wait for @p *req (when any) and free it; the time counts as idle. */
static int wait_peer(pipe_t *p, coll_request_t **req, const char *what, int peer)
{
    uint64_t t0 = dist_now_ns();
    coll_status_t st;

    if (*req == NULL) {
        return 0;
    }
    st = coll_req_wait(*req, p->timeout_ms);
    coll_req_free(*req);
    *req = NULL;
    p->idle_ns += dist_now_ns() - t0;
    return st == COLL_OK ? 0 : failed(p, what, peer, st);
}

/* Post a message to or from stage @p peer (@p req NULL: wait for it at once). */
static int post(pipe_t *p, int send, float *buf, int n, int peer, coll_request_t **req)
{
    coll_request_t *r = NULL;
    coll_status_t st = send ? coll_send_async(p->pp, buf, (size_t)n, COLL_FLOAT32, peer, NULL, &r)
                            : coll_recv_async(p->pp, buf, (size_t)n, COLL_FLOAT32, peer, NULL, &r);

    if (st != COLL_INPROGRESS && st != COLL_OK) {
        return failed(p, send ? "sending to" : "receiving from", peer, st);
    }
    if (req != NULL) {
        *req = r;
        return 0;
    }
    return wait_peer(p, &r, send ? "sending to" : "receiving from", peer);
}

static int last_stage(const pipe_t *p)
{
    return p->stage == p->nstages - 1;
}

static int forward(pipe_t *p, const pipe_io_t *io, int m)
{
    int slot = m % p->slots, count = p->shard->lay.count;
    float *x = p->in[slot];

    if (p->stage == 0) {
        io->input(io->arg, m, x);
    } else if (post(p, 0, x, p->rows * first_width(p), p->stage - 1, NULL) != 0) {
        return -1;
    }
    if (shard_forward(p->shard, x, p->rows, p->act[slot]) != 0) {
        return -1;
    }
    return last_stage(p) ? 0 : post(p, 1, p->act[slot][count - 1], p->rows * last_width(p),
                                     p->stage + 1, &p->fwd[slot]);
}

static int backward(pipe_t *p, const pipe_io_t *io, int m, mlp_grad_ready_fn ready, void *arg)
{
    int slot = m % p->slots, count = p->shard->lay.count, n = p->rows * last_width(p);
    float *d = p->delta[count - 1];

    if (last_stage(p)) {
        p->loss_sum += io->loss(io->arg, m, p->act[slot][count - 1], d);
    } else if (post(p, 0, d, n, p->stage + 1, NULL) != 0) {
        return -1;
    } else {
        shard_relu_mask(d, p->act[slot][count - 1], (size_t)n); /* the stage's last ReLU */
    }
    if (wait_peer(p, &p->fwd[slot], "sending to", p->stage + 1) != 0 ||
        wait_peer(p, &p->bwd[slot], "sending to", p->stage - 1) != 0 ||
        shard_backward(p->shard, p->in[slot], p->rows, p->act[slot], p->delta, p->grad_in[slot],
                       p->scratch, m > 0, m == p->micro - 1 ? ready : NULL, arg) != 0) {
        return -1;
    }
    return p->stage == 0 ? 0 : post(p, 1, p->grad_in[slot], p->rows * first_width(p),
                                     p->stage - 1, &p->bwd[slot]);
}

int pipe_step(pipe_t *p, const pipe_io_t *io, mlp_grad_ready_fn ready, void *arg)
{
    int w = p->nstages - p->stage - 1 < p->micro ? p->nstages - p->stage - 1 : p->micro, rc = 0;
    uint64_t t0 = dist_now_ns();

    p->idle_ns = 0;
    for (int m = 0; m < w && rc == 0; m++) {
        rc = forward(p, io, m);
    }
    for (int i = 0; i < p->micro - w && rc == 0; i++) {
        rc = forward(p, io, w + i);
        rc = rc == 0 ? backward(p, io, i, ready, arg) : rc;
    }
    for (int i = p->micro - w; i < p->micro && rc == 0; i++) {
        rc = backward(p, io, i, ready, arg);
    }
    for (int i = 0; i < p->slots && rc == 0; i++) {
        rc = wait_peer(p, &p->fwd[i], "sending to", p->stage + 1);
        rc = rc == 0 ? wait_peer(p, &p->bwd[i], "sending to", p->stage - 1) : rc;
    }
    p->busy_ns = dist_now_ns() - t0 - p->idle_ns;
    return rc;
}

int pipe_infer(pipe_t *p, int n, const float *x, float **logits_p)
{
    int count = p->shard->lay.count;

    if (p->stage > 0) {
        if (post(p, 0, p->in[0], n * first_width(p), p->stage - 1, NULL) != 0) {
            return -1;
        }
        x = p->in[0];
    }
    if (shard_forward(p->shard, x, n, p->act[0]) != 0) {
        return -1;
    }
    if (!last_stage(p)) {
        return post(p, 1, p->act[0][count - 1], n * last_width(p), p->stage + 1, NULL);
    }
    *logits_p = p->act[0][count - 1];
    return 0;
}
