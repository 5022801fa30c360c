/*
 * The shared-memory path's protocol (client/shm*.c) with threads as ranks: one process maps
 * nothing but a buffer laid out as a job's pool, each thread is one local rank with a
 * communicator of its own (its daemon link a socketpair whose other end the test reads), and
 * the test plays the daemon where the path needs one (the header, failures, node submissions).
 * Under ThreadSanitizer (CI) this checks the flags, seqlocks and futex hand-offs for races.
 *
 * Cases: every collective at 1..4 ranks (counts 0, 1, 5 and two chunks; in place and out of
 * place) against values computed here; keyed operations submitted in another order on every
 * rank; a mismatch (an Abort with both descriptors, then every rank fails, outputs untouched);
 * a failed job waking waiters; a departed rank; the hand-over of a multi-node job's
 * collective to the daemon in exactly one node submission; and a multi-node allreduce reduced
 * into local rank 0's node buffer, handed over once, and distributed after the daemon's word
 * (or ended with the error the word carries, outputs untouched).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/internal.h"
#include "client/shm.h"
#include "proto/frame.h"
#include "proto/wire.h"

/* Checks inside the ranks' threads (cmocka's assertions belong to the main thread): print
 * what failed, then abort the test. */
#define T_FAIL(...) (fprintf(stderr, __VA_ARGS__), abort())
#define T_CHECK(c) ((c) ? (void)0 : T_FAIL("%s:%d: check failed: %s\n", __FILE__, __LINE__, #c))
#define T_EQ(a, b)                                                                             \
    do {                                                                                       \
        long long a_ = (long long)(a), b_ = (long long)(b);                                    \
        if (a_ != b_) {                                                                        \
            T_FAIL("%s:%d: %s is %lld, expected %lld\n", __FILE__, __LINE__, #a, a_, b_);     \
        }                                                                                      \
    } while (0)
#define T_STREQ(a, b) T_CHECK(strcmp((a), (b)) == 0)

#define MAXL 4
#define BUF (512u * 1024u) /* each rank's send and receive buffers: 4 x 20000 floats */
#define WAIT_MS 10000
#define NODE_BYTES (128u * 1024u) /* node_max_bytes of the node-reduced cases */

typedef struct world {
    uint32_t nlocal, nnodes;
    uint8_t *pool;
    size_t pool_bytes;
    coll_comm_t *c[MAXL];
    int daemon_fd[MAXL]; /* the daemon's end of each rank's link */
} world_t;

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
    c->link = &coll__request_link_ops;
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

static world_t *world_new(uint32_t nlocal, uint32_t nnodes)
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

static void world_free(world_t *w)
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

static float *sendbuf(world_t *w, uint32_t l)
{
    return (float *)(void *)(w->pool + send_off(l));
}

static float *recvbuf(world_t *w, uint32_t l)
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

static void on_every_rank(world_t *w, void (*fn)(world_t *, uint32_t, void *), void *arg)
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

/* The status of submission @p expr (which sets r) after its wait; the algorithm into @p algo. */
#define DONE(expr, algo) (st = (expr), finish_req(st, r, (algo)))

static coll_status_t finish_req(coll_status_t st, coll_request_t *r, char *algo)
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

/* ---- every collective -------------------------------------------------------------------- */

static float input(uint32_t rank, size_t i)
{
    return (float)(((int)rank + 1) * 3 + (int)(i % 7) - 4);
}

static void fill(world_t *w, uint32_t l, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sendbuf(w, l)[i] = input(l, i);
        recvbuf(w, l)[i] = -1e30f;
    }
}

static float sum_at(const world_t *w, size_t i)
{
    float s = 0;
    for (uint32_t q = 0; q < w->nlocal; q++) {
        s += input(q, i);
    }
    return s;
}

typedef struct {
    size_t count;
    int inplace;
} case_t;

static void run_collectives(world_t *w, uint32_t l, void *p)
{
    const case_t *k = p;
    coll_comm_t *c = w->c[l];
    uint32_t L = w->nlocal, root = L - 1;
    size_t n = k->count;
    float *in = sendbuf(w, l), *out = k->inplace ? sendbuf(w, l) : recvbuf(w, l);
    coll_request_t *r = NULL;
    coll_status_t st;
    char algo[32];

    fill(w, l, n * L);
    T_EQ(DONE(coll_allreduce_async(c, in, out, n, COLL_FLOAT32, COLL_SUM, NULL,
                                                     &r), algo), COLL_OK);
    T_STREQ(algo, "shm");
    for (size_t i = 0; i < n; i++) {
        T_CHECK(out[i] == sum_at(w, i));
    }
    fill(w, l, n * L);
    T_EQ(DONE(coll_reduce_scatter_async(c, in, k->inplace ? in + l * n :
                                                          recvbuf(w, l), n, COLL_FLOAT32,
                                                          COLL_SUM, NULL, &r), NULL), COLL_OK);
    for (size_t i = 0; i < n; i++) {
        T_CHECK((k->inplace ? in + l * n : recvbuf(w, l))[i] == sum_at(w, l * n + i));
    }
    fill(w, l, n * L);
    for (size_t i = 0; i < n && k->inplace; i++) { /* in place: the input is block l */
        recvbuf(w, l)[l * n + i] = input(l, i);
    }
    T_EQ(DONE(coll_allgather_async(c, k->inplace ? recvbuf(w, l) + l * n : in,
                                               recvbuf(w, l), n, COLL_FLOAT32, NULL, &r),
                          NULL),
                     COLL_OK);
    for (size_t i = 0; i < n * L; i++) {
        T_CHECK(recvbuf(w, l)[i] == input((uint32_t)(i / n), i % n));
    }
    fill(w, l, n);
    T_EQ(DONE(coll_broadcast_async(c, in, out, n, COLL_FLOAT32, (int)root, NULL,
                                                     &r), NULL), COLL_OK);
    for (size_t i = 0; i < n; i++) {
        T_CHECK(out[i] == input(root, i));
    }
    fill(w, l, n);
    T_EQ(DONE(coll_reduce_async(c, in, out, n, COLL_FLOAT32, COLL_MAX, 0, NULL,
                                                  &r), NULL), COLL_OK);
    for (size_t i = 0; i < n && l == 0; i++) {
        if (out[i] != input(L - 1, i)) {
            T_FAIL("reduce at %u ranks, count %zu, %s: element %zu is %g, expected %g\n", L, n,
                   k->inplace ? "in place" : "out of place", i, out[i], input(L - 1, i));
        }
    }
    T_EQ(DONE(coll_barrier_async(c, NULL, &r), algo), COLL_OK);
    T_STREQ(algo, "shm");
}

static void test_every_collective(void **state)
{
    static const size_t counts[] = {0, 1, 5, 20000}; /* 20000 floats: two chunks */

    for (uint32_t L = 1; L <= MAXL; L++) {
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
            for (int inplace = 0; inplace < 2; inplace++) {
                world_t *w = world_new(L, 1);
                case_t k = {counts[i], inplace};
                on_every_rank(w, run_collectives, &k);
                world_free(w);
            }
        }
    }
}

/* ---- keyed, in another order on every rank ------------------------------------------------ */

#define NKEYED 16
#define KEYED_ROUNDS 40
#define KEYED_COUNT 300

static void run_keyed(world_t *w, uint32_t l, void *p)
{
    coll_comm_t *c = w->c[l];
    coll_request_t *r[NKEYED];

    for (int round = 0; round < KEYED_ROUNDS; round++) {
        for (int j = 0; j < NKEYED * KEYED_COUNT; j++) {
            sendbuf(w, l)[j] = (float)(l + 1 + j % 5);
        }
        for (int j = 0; j < NKEYED; j++) {
            int k = (int)((j * (2 * l + 1) + l * 5) % NKEYED); /* a permutation per rank */
            coll_op_params_t prm = {.field_mask = COLL_OP_PARAM_KEY,
                                    .key = (uint64_t)(round * NKEYED + k)};
            T_EQ(coll_allreduce_async(c, sendbuf(w, l) + k * KEYED_COUNT,
                                                  recvbuf(w, l) + k * KEYED_COUNT, KEYED_COUNT,
                                                  COLL_FLOAT32, COLL_SUM, &prm, &r[k]),
                             COLL_INPROGRESS);
        }
        for (int k = 0; k < NKEYED; k++) {
            T_EQ(finish_req(COLL_INPROGRESS, r[k], NULL), COLL_OK);
        }
        for (int j = 0; j < NKEYED * KEYED_COUNT; j++) {
            float want = 0;
            for (uint32_t q = 0; q < w->nlocal; q++) {
                want += (float)(q + 1 + j % 5);
            }
            T_CHECK(recvbuf(w, l)[j] == want);
        }
    }
}

static void test_keyed_in_any_order(void **state)
{
    world_t *w = world_new(3, 1);
    on_every_rank(w, run_keyed, NULL);
    world_free(w);
}

/* ---- the test as the daemon --------------------------------------------------------------- */

/* The daemon fails the job (engine/shm.c coll_shm_fail()). */
static void fail_job(world_t *w, coll_status_t st, const char *msg)
{
    coll_shm_hdr_t *h = coll_shm_hdr_of(w->pool, w->nlocal);

    h->status = st;
    snprintf(h->msg, sizeof(h->msg), "%s", msg);
    atomic_store_explicit(&h->failed, 1, memory_order_release);
    for (uint32_t l = 0; l < w->nlocal; l++) {
        coll_ctl_notify(coll_ctl_of(w->pool, l));
    }
}

/* The next ClientMsg on rank @p l's link, or NULL after @p ms without one. */
static coll_client_msg_t *read_msg(world_t *w, uint32_t l, int ms)
{
    coll_frame_reader_t rd;
    const uint8_t *p;
    uint8_t *space;
    size_t n, len;
    coll_client_msg_t *m = NULL;
    char err[256];

    coll_frame_reader_init(&rd, COLL_FRAME_MAX_CLIENT);
    while (coll_frame_reader_next(&rd, &p, &n) != COLL_OK) {
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        setsockopt(w->daemon_fd[l], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        coll_frame_reader_space(&rd, 4096, &space, &len);
        ssize_t got = recv(w->daemon_fd[l], space, 1, 0); /* byte by byte: one frame only */
        if (got <= 0) {
            coll_frame_reader_cleanup(&rd);
            return NULL;
        }
        coll_frame_reader_commit(&rd, (size_t)got);
    }
    T_EQ(coll_wire_unpack_client(p, n, &m, err, sizeof(err)), COLL_OK);
    coll_frame_reader_cleanup(&rd);
    return m;
}

/* ---- a mismatch --------------------------------------------------------------------------- */

static void run_mismatch(world_t *w, uint32_t l, void *p)
{
    coll_comm_t *c = w->c[l];
    coll_request_t *r;
    size_t n = l == 1 ? 6 : 5;

    fill(w, l, n);
    T_EQ(coll_allreduce_async(c, sendbuf(w, l), recvbuf(w, l), n, COLL_FLOAT32,
                                          COLL_SUM, NULL, &r), COLL_INPROGRESS);
    T_EQ(finish_req(COLL_INPROGRESS, r, NULL), COLL_ERR_MISMATCH);
    T_CHECK(strstr(coll_comm_last_error(c), "the daemon's verdict"));
    for (size_t i = 0; i < n; i++) {
        T_CHECK(recvbuf(w, l)[i] == -1e30f); /* no output before the agreement */
    }
}

static void *daemon_on_mismatch(void *p)
{
    world_t *w = p;
    coll_client_msg_t *m = NULL;

    for (uint32_t l = 0; m == NULL; l = (l + 1) % w->nlocal) {
        m = read_msg(w, l, 50);
    }
    T_EQ(m->body_case, COLL__WIRE__CLIENT_MSG__BODY_ABORT);
    T_EQ(m->abort->status, COLL_ERR_MISMATCH);
    T_CHECK(strstr(m->abort->reason, "count=5"));
    T_CHECK(strstr(m->abort->reason, "count=6"));
    coll__wire__client_msg__free_unpacked(m, NULL);
    fail_job(w, COLL_ERR_MISMATCH, "the daemon's verdict");
    return NULL;
}

static void test_mismatch_reported_nothing_written(void **state)
{
    world_t *w = world_new(2, 1);
    pthread_t d;

    pthread_create(&d, NULL, daemon_on_mismatch, w);
    on_every_rank(w, run_mismatch, NULL);
    pthread_join(d, NULL);
    world_free(w);
}

/* ---- a failed job wakes the ranks that wait, and later posts fail at once ----------------- */

static void run_waiting(world_t *w, uint32_t l, void *p)
{
    coll_comm_t *c = w->c[l];
    coll_request_t *r = NULL;
    coll_status_t st;

    if (l == w->nlocal - 1) {
        usleep(50000); /* never submits: the others sleep in shared memory */
        fail_job(w, COLL_ERR_TIMEDOUT, "allreduce #0 timed out waiting for rank 2");
        return;
    }
    fill(w, l, 10);
    T_EQ(DONE(coll_allreduce_async(c, sendbuf(w, l), recvbuf(w, l), 10,
                                                     COLL_FLOAT32, COLL_SUM, NULL, &r), NULL),
                     COLL_ERR_TIMEDOUT);
    T_CHECK(strstr(coll_comm_last_error(c), "waiting for rank 2"));
    T_EQ(coll_allreduce_async(c, sendbuf(w, l), recvbuf(w, l), 10, COLL_FLOAT32,
                                          COLL_SUM, NULL, &r), COLL_ERR_TIMEDOUT);
    T_CHECK(strstr(coll_comm_last_error(c), "failed earlier"));
}

static void test_failure_wakes_waiters(void **state)
{
    world_t *w = world_new(3, 1);
    on_every_rank(w, run_waiting, NULL);
    world_free(w);
}

static void test_departed_rank(void **state)
{
    world_t *w = world_new(2, 1);
    coll_shm_hdr_t *h = coll_shm_hdr_of(w->pool, 2);
    coll_request_t *r;

    snprintf(h->left_msg, sizeof(h->left_msg), "rank 1 (pid 42)");
    atomic_store(&h->left, 1);
    w->c[0]->owner = pthread_self();
    assert_int_equal(coll_barrier_async(w->c[0], NULL, &r), COLL_ERR_JOB);
    assert_non_null(strstr(coll_comm_last_error(w->c[0]), "rank 1 (pid 42) left job unit"));
    world_free(w);
}

/* ---- a multi-node job: one node submission, the daemon completes every rank -------------- */

static void run_node(world_t *w, uint32_t l, void *p)
{
    coll_request_t *r = NULL;
    coll_status_t st;
    char algo[32];

    fill(w, l, 100);
    T_EQ(DONE(coll_allreduce_async(w->c[l], sendbuf(w, l), recvbuf(w, l), 100,
                                                     COLL_FLOAT32, COLL_SUM, NULL, &r), algo),
                     COLL_OK);
    T_STREQ(algo, "rd");
}

/* Takes the one node submission and completes every rank's request as the daemon does. */
static void *daemon_for_node(void *p)
{
    world_t *w = p;
    coll_ctl_sub_t rec;
    uint32_t found = 0, slot;
    uint64_t state;
    coll_shm_desc_t d;

    while (found == 0) {
        for (uint32_t l = 0; l < w->nlocal; l++) {
            while (coll_ctl_take(coll_ctl_of(w->pool, l), &rec) == 1) {
                T_EQ(rec.flags, COLL_CTL_SUB_NODE);
                found++;
            }
        }
        usleep(1000);
    }
    usleep(20000);
    for (uint32_t l = 0; l < w->nlocal; l++) {
        coll_ctl_t *ctl = coll_ctl_of(w->pool, l);
        T_EQ(coll_ctl_take(ctl, &rec), 0); /* exactly one submission in all */
        T_CHECK(coll_shm_find(coll_shm_rank_of(w->pool, w->nlocal, l), rec.key,
                                  COLL_SHM_POSTED, &slot, &state, &d));
        coll_shm_move(&coll_shm_rank_of(w->pool, w->nlocal, l)->post[slot], state,
                      COLL_SHM_TAKEN);
        uint32_t head = atomic_load(&ctl->comp_head);
        ctl->comp[head % COLL_CTL_SLOTS] = (coll_ctl_comp_t){.req_id = d.req_id, .algo = "rd"};
        atomic_store(&ctl->comp_head, head + 1);
        coll_ctl_notify(ctl);
    }
    T_EQ(found, 1);
    return NULL;
}

static void test_node_submission(void **state)
{
    world_t *w = world_new(2, 2);
    pthread_t d;

    pthread_create(&d, NULL, daemon_for_node, w);
    on_every_rank(w, run_node, NULL);
    pthread_join(d, NULL);
    world_free(w);
}

/* ---- a multi-node allreduce reduced in shared memory around the daemon's phase ------------ */

#define NODE_COUNT 20000 /* two chunks of the reduce, two of the distribution */
#define OTHER_NODE 1000.0f /* what the fake daemon adds: the other node's sum, everywhere */

/* Local rank 0's node buffers, after every rank's (the library allocates them; here given). */
#define NODE_REGION (COLL_POOL_PREFIX(MAXL) + MAXL * 2 * BUF)

static void run_reduced(world_t *w, uint32_t l, void *p)
{
    coll_status_t want = *(const coll_status_t *)p, st;
    float *out = l % 2 ? sendbuf(w, l) : recvbuf(w, l); /* odd ranks in place */
    coll_request_t *r = NULL;
    char algo[32];

    fill(w, l, NODE_COUNT);
    T_EQ(DONE(coll_allreduce_async(w->c[l], sendbuf(w, l), out, NODE_COUNT, COLL_FLOAT32,
                                   COLL_SUM, NULL, &r), algo), want);
    for (size_t i = 0; i < NODE_COUNT; i++) {
        T_CHECK(out[i] == (want == COLL_OK ? sum_at(w, i) + OTHER_NODE
                                           : l % 2 ? input(l, i) : -1e30f));
    }
    T_CHECK(want == COLL_OK ? strcmp(algo, "shm+rd") == 0
                            : strstr(coll_comm_last_error(w->c[l]), "inter-node phase") != NULL);
}

/* The one node submission of the reduced allreduce: no output written, the node sum in local
 * rank 0's node buffer; then the other node's part is added and the node word written. */
static void play_inter_node(world_t *w, const coll_ctl_sub_t *rec, coll_status_t status)
{
    coll_shm_rank_t *home = coll_shm_rank_of(w->pool, w->nlocal, 0);
    uint32_t slot;
    uint64_t state;
    coll_shm_desc_t d;
    float *node;

    T_CHECK(coll_shm_find(home, rec->key, COLL_SHM_POSTED, &slot, &state, &d));
    T_EQ(d.node_off, NODE_REGION);
    node = (float *)(void *)(w->pool + d.node_off);
    for (size_t i = 0; i < NODE_COUNT; i++) {
        T_CHECK(node[i] == sum_at(w, i));
        for (uint32_t l = 0; l < w->nlocal; l++) {
            T_CHECK(l % 2 ? sendbuf(w, l)[i] == input(l, i) : recvbuf(w, l)[i] == -1e30f);
        }
        node[i] += OTHER_NODE;
    }
    atomic_store_explicit(&home->post[slot].node,
                          coll_shm_node_word(coll_shm_gen(state), status, COLL_ALGO_RD),
                          memory_order_release);
    for (uint32_t l = 0; l < w->nlocal; l++) {
        coll_ctl_notify(coll_ctl_of(w->pool, l));
    }
}

static coll_status_t g_node_status; /* what the fake daemon's node word says */

static void *daemon_for_reduced(void *p)
{
    world_t *w = p;
    coll_ctl_sub_t rec;
    uint32_t found = 0;

    for (int tries = 0; found == 0 && tries < WAIT_MS; tries++) {
        for (uint32_t l = 0; l < w->nlocal; l++) {
            while (coll_ctl_take(coll_ctl_of(w->pool, l), &rec) == 1) {
                T_EQ(rec.flags, COLL_CTL_SUB_NODE | COLL_CTL_SUB_REDUCED);
                found++;
            }
        }
        usleep(found == 0 ? 1000 : 0);
    }
    T_EQ(found, 1);
    play_inter_node(w, &rec, g_node_status);
    usleep(20000);
    for (uint32_t l = 0; l < w->nlocal; l++) {
        T_EQ(coll_ctl_take(coll_ctl_of(w->pool, l), &rec), 0); /* exactly one in all */
    }
    return NULL;
}

static void reduced_case(uint32_t nlocal, coll_status_t status)
{
    world_t *w = world_new(nlocal, 2);
    pthread_t d;

    coll_shm_hdr_of(w->pool, nlocal)->node_max_bytes = NODE_BYTES;
    w->c[0]->shm->node_off = NODE_REGION;
    w->c[0]->shm->node_bytes = NODE_BYTES;
    g_node_status = status;
    pthread_create(&d, NULL, daemon_for_reduced, w);
    on_every_rank(w, run_reduced, &status);
    pthread_join(d, NULL);
    T_EQ(w->c[0]->shm->node_busy, 0); /* the node buffer is free again */
    world_free(w);
}

static void test_node_reduced(void **state)
{
    reduced_case(2, COLL_OK);
    reduced_case(3, COLL_OK);
    reduced_case(4, COLL_OK);
    reduced_case(3, COLL_ERR_UNSUPPORTED);
}

/* COLL_SPIN_US: microseconds from 0 to 10000; anything else fails the opening of the area with
 * a message naming the variable, and leaves no area. */
static void test_spin_env(void **state)
{
    static const char *bad[] = {"abc", "-1", "10001", "5x", "99999999999999999999999"};
    static const struct {
        const char *v;
        uint64_t ns;
    } good[] = {{"0", 0}, {"10000", 10000000u}, {"", 20000u}};
    world_t *w = world_new(1, 1);
    coll_comm_t *c = w->c[0];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        coll__shm_close(c);
        setenv("COLL_SPIN_US", bad[i], 1);
        assert_int_equal(coll__shm_open(c, COLL_SHM_TOTAL(1), 1u << 30), COLL_ERR_INVALID);
        assert_null(c->shm);
        T_CHECK(strstr(coll_comm_last_error(c), "COLL_SPIN_US"));
    }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        setenv("COLL_SPIN_US", good[i].v, 1);
        assert_int_equal(coll__shm_open(c, COLL_SHM_TOTAL(1), 1u << 30), COLL_OK);
        assert_non_null(c->shm);
        assert_int_equal(c->shm->spin_ns, good[i].ns);
        coll__shm_close(c);
    }
    unsetenv("COLL_SPIN_US");
    world_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_collective),
        cmocka_unit_test(test_keyed_in_any_order),
        cmocka_unit_test(test_mismatch_reported_nothing_written),
        cmocka_unit_test(test_failure_wakes_waiters),
        cmocka_unit_test(test_departed_rank),
        cmocka_unit_test(test_node_submission),
        cmocka_unit_test(test_node_reduced),
        cmocka_unit_test(test_spin_env),
    };
    return cmocka_run_group_tests_name("client shared-memory path", tests, NULL, NULL);
}
