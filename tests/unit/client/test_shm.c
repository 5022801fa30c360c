/*
 * The shared-memory path's protocol (client/shm*.c) with threads as ranks (shm_world.h); the
 * test plays the daemon where the path needs one (the header, failures). Under ThreadSanitizer
 * (CI) this checks the flags, seqlocks and futex hand-offs for races.
 *
 * Cases: every collective at 1..4 ranks (counts 0, 1, 5 and two chunks; in place and out of
 * place) against values computed here; keyed operations submitted in another order on every
 * rank; a mismatch (an Abort with both descriptors, then every rank fails, outputs untouched);
 * a failed job waking waiters; one that the last rank's refused call ended (its own code for it,
 * COLL_ERR_JOB for the others); a departed rank; a buffer past the rank's allocation.
 * Multi-node jobs: test_shm_node.c.
 */
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

#include "client/shm/shm.h"
#include "proto/frame.h"
#include "proto/wire.h"

#include "shm_world.h"

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
    with_daemon(2, 1, daemon_on_mismatch, run_mismatch, NULL);
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

/* The last rank's call was refused: the job failed with COLL_ERR_JOB and the last rank's code
 * (coll_job_fail_by()); it waits until the others wait, then fails the job as the daemon. */
static void run_refused(world_t *w, uint32_t l, void *p)
{
    coll_shm_hdr_t *h = coll_shm_hdr_of(w->pool, w->nlocal);
    coll_status_t want = l == w->nlocal - 1 ? COLL_ERR_BUSY : COLL_ERR_JOB;
    coll_comm_t *c = w->c[l];
    coll_request_t *r = NULL;
    coll_status_t st;

    if (l == w->nlocal - 1) {
        usleep(50000);
        h->culprit_status = COLL_ERR_BUSY;
        h->culprit = l;
        fail_job(w, COLL_ERR_JOB, "rank 2 (pid 42) ended job unit with COLL_ERR_BUSY: streams");
    } else {
        fill(w, l, 10);
        T_EQ(DONE(coll_allreduce_async(c, sendbuf(w, l), recvbuf(w, l), 10, COLL_FLOAT32,
                                       COLL_SUM, NULL, &r), NULL), COLL_ERR_JOB);
        T_CHECK(strstr(coll_comm_last_error(c), "rank 2 (pid 42) ended job unit"));
    }
    T_EQ(coll_allreduce_async(c, sendbuf(w, l), recvbuf(w, l), 10, COLL_FLOAT32, COLL_SUM, NULL,
                              &r), want);
    T_CHECK(strstr(coll_comm_last_error(c), "failed earlier: rank 2 (pid 42)"));
}

static void test_refusal_is_the_culprits_alone(void **state)
{
    world_t *w = world_new(3, 1);
    on_every_rank(w, run_refused, NULL);
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

/* A buffer inside the pool that reaches past this rank's allocation: refused on the
 * shared-memory path (the other local ranks would read it), the message naming the function
 * called and the buffer. */
static void test_buffer_past_allocation(void **state)
{
    world_t *w = world_new(1, 1);
    coll_comm_t *c = w->c[0];
    coll_request_t *r = NULL;

    (void)state;
    assert_int_equal(coll_allreduce_async(c, recvbuf(w, 0), recvbuf(w, 0), BUF / 4 + 1,
                                          COLL_FLOAT32, COLL_SUM, NULL, &r),
                     COLL_ERR_NOT_IN_POOL);
    assert_null(r);
    assert_string_equal(coll_comm_last_error(c), "coll_allreduce_async: rank 0: the send buffer "
                                                 "is not one of this rank's allocations in the "
                                                 "pool (it reaches past one); allocate it with "
                                                 "coll_mem_alloc()");
    world_free(w);
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
        cmocka_unit_test(test_refusal_is_the_culprits_alone),
        cmocka_unit_test(test_departed_rank),
        cmocka_unit_test(test_buffer_past_allocation),
        cmocka_unit_test(test_spin_env),
    };
    return cmocka_run_group_tests_name("client shared-memory path", tests, NULL, NULL);
}
