#include "shm_world.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/req/request.h"
#include "client/shm/shm.h"
#include "proto/frame.h"
#include "proto/wire.h"

static size_t send_off(uint32_t l)
{
    return COLL_POOL_PREFIX(MAXL) + (size_t)l * 2 * BUF;
}

/* What a daemon sets up at ready (daemon/engine/shm.c coll_shm_init()). */
static void init_area(world_t *w)
{
    coll_shm_hdr_t *h = coll_shm_hdr_of(w->pool, w->nlocal);

    h->nlocal = w->nlocal;
    h->max_bytes = 1u << 30;
    for (unsigned i = 0; i < COLL_SHM_BUCKETS; i++) {
        h->bounds[i] = 1e-6 * (i + 1);
    }
    for (uint32_t l = 0; l < w->nlocal; l++) {
        coll_shm_rank_t *r = coll_shm_rank_of(w->pool, w->nlocal, l);
        r->rank = l;
        r->pid = (uint32_t)getpid();
        atomic_store(&r->busy_key, COLL_SHM_IDLE);
    }
}

static coll_comm_t *rank_comm(world_t *w, uint32_t l)
{
    coll_comm_t *c = calloc(1, sizeof(*c));
    int sv[2];

    assert_non_null(c);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    assert_int_equal(coll_frame_reader_init(&c->reader, COLL_FRAME_MAX_CLIENT), COLL_OK);
    c->hooks = &coll__request_link_hooks;
    c->conn = c; /* the world communicator of its own connection, as coll_comm_create() makes */
    c->refs = 1;
    c->owner = pthread_self();
    c->fd = sv[0];
    w->daemon_fd[l] = sv[1];
    c->passed_fd[0] = c->passed_fd[1] = c->doorbell_fd = -1;
    c->pending.next = c->pending.prev = &c->pending;
    c->done.next = c->done.prev = &c->done;
    snprintf(c->job, sizeof(c->job), "unit");
    c->rank = c->local_rank = (int)l;
    c->world_size = (int)(w->nlocal * w->nnodes);
    c->local_size = (int)w->nlocal;
    c->node_count = w->nnodes;
    c->job_timeout_ms = WAIT_MS;
    c->pool = w->pool;
    c->pool_bytes = w->pool_bytes;
    c->ctl_job = (coll_ctl_job_t *)(void *)w->pool;
    c->ctl = coll_ctl_of(w->pool, l);
    c->ctl_bytes = COLL_CTL_BYTES;
    c->next_id = 1;
    c->allocs = malloc(sizeof(*c->allocs));
    c->allocs[0] = (coll_alloc_t){send_off(l), 2 * BUF};
    c->nallocs = c->cap_allocs = 1;
    assert_int_equal(coll__shm_open(c, COLL_SHM_TOTAL(w->nlocal), 1u << 30), COLL_OK);
    assert_non_null(c->shm);
    return c;
}

world_t *world_new(uint32_t nlocal, uint32_t nnodes)
{
    world_t *w = calloc(1, sizeof(*w));

    w->nlocal = nlocal;
    w->nnodes = nnodes;
    w->pool_bytes = COLL_POOL_PREFIX(MAXL) + MAXL * 2 * BUF + COLL_SHM_NODE_BUFS * NODE_BYTES;
    w->pool = aligned_alloc(4096, w->pool_bytes);
    memset(w->pool, 0, w->pool_bytes);
    init_area(w);
    for (uint32_t l = 0; l < nlocal; l++) {
        w->c[l] = rank_comm(w, l);
    }
    return w;
}

void world_free(world_t *w)
{
    for (uint32_t l = 0; l < w->nlocal; l++) {
        coll_comm_t *c = w->c[l];
        pthread_mutex_lock(&c->lock);
        coll__req_free_owned(c);
        coll__shm_close(c);
        pthread_mutex_unlock(&c->lock);
        close(c->fd);
        close(w->daemon_fd[l]);
        coll_frame_reader_cleanup(&c->reader);
        free(c->allocs);
        free(c);
    }
    free(w->pool);
    free(w);
}

float *sendbuf(world_t *w, uint32_t l)
{
    return (float *)(void *)(w->pool + send_off(l));
}

float *recvbuf(world_t *w, uint32_t l)
{
    return (float *)(void *)(w->pool + send_off(l) + BUF);
}

/* ---- running a function on every rank's thread ------------------------------------------- */

typedef struct {
    world_t *w;
    uint32_t l;
    void (*fn)(world_t *, uint32_t, void *);
    void *arg;
} job_arg_t;

static void *rank_main(void *p)
{
    job_arg_t *a = p;
    a->w->c[a->l]->owner = pthread_self(); /* unkeyed operations by call order */
    a->fn(a->w, a->l, a->arg);
    return NULL;
}

void on_every_rank(world_t *w, void (*fn)(world_t *, uint32_t, void *), void *arg)
{
    pthread_t t[MAXL];
    job_arg_t a[MAXL];

    for (uint32_t l = 0; l < w->nlocal; l++) {
        a[l] = (job_arg_t){w, l, fn, arg};
        assert_int_equal(pthread_create(&t[l], NULL, rank_main, &a[l]), 0);
    }
    for (uint32_t l = 0; l < w->nlocal; l++) {
        pthread_join(t[l], NULL);
    }
}

void with_daemon(uint32_t nlocal, uint32_t nnodes, void *(*daemon)(void *),
                 void (*fn)(world_t *, uint32_t, void *), void *arg)
{
    world_t *w = world_new(nlocal, nnodes);
    pthread_t d;

    pthread_create(&d, NULL, daemon, w);
    on_every_rank(w, fn, arg);
    pthread_join(d, NULL);
    world_free(w);
}


coll_status_t finish_req(coll_status_t st, coll_request_t *r, char *algo)
{
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(r, WAIT_MS);
        if (algo != NULL) {
            snprintf(algo, 32, "%s", coll_req_algo(r));
        }
        coll_req_free(r);
    }
    return st;
}


float input(uint32_t rank, size_t i)
{
    return (float)(((int)rank + 1) * 3 + (int)(i % 7) - 4);
}

void fill(world_t *w, uint32_t l, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sendbuf(w, l)[i] = input(l, i);
        recvbuf(w, l)[i] = -1e30f;
    }
}

float sum_at(const world_t *w, size_t i)
{
    float s = 0;
    for (uint32_t q = 0; q < w->nlocal; q++) {
        s += input(q, i);
    }
    return s;
}
