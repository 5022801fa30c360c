/*
 * Unit tests of NCCL's table (device/nccl.c) over a stand-in for NCCL (fake_libnccl.c, built as
 * libnccl.so.2 and found first on LD_LIBRARY_PATH) and the fake device layer (COLL_DEVICE_FAKE:
 * device memory is host memory): the library is loaded and its entries found by name; a
 * communicator of two ranks (two threads) created from one unique id, non-blocking, polled until
 * ready; allreduce (float32 sum; float32 product, which the daemons' 16-bit products go
 * through; bfloat16 max, int32 avg), reduce-scatter, all-gather, broadcast and reduce (float32
 * sum, int32 avg in place, on the root only) give the values computed here; reductions NCCL has
 * not are refused; an asynchronous error of one rank reaches its poll, and its abort reaches
 * the other's. Run a second time
 * over a stand-in of an NCCL too old for the path (fake_libnccl_old.c, 2.10, without
 * ncclCommInitRankConfig: unit.nccl_old): the table is refused and the probe says why.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "device/nccl.h"

#define N 8

static const coll_nccl_ops_t *nccl;
static coll_nccl_id_t id;

/* Poll @p c until its last call is done (bounded: 2000 polls 1 ms apart). */
static coll_status_t settle(coll_nccl_comm_t c)
{
    const struct timespec ms = {0, 1000000};
    coll_status_t st = COLL_INPROGRESS;

    for (int i = 0; i < 2000 && (st = nccl->comm_poll(c)) == COLL_INPROGRESS; i++) {
        nanosleep(&ms, NULL);
    }
    return st;
}

typedef struct {
    int rank;
    coll_nccl_comm_t comm;
    coll_status_t st;
    float f32[2 * N], f32_out[2 * N];
    uint16_t bf16[N], bf16_out[N];
    int32_t i32[N], i32_out[N];
    char err[COLL_DEV_TEXT_MAX]; /* the thread's coll_dev_error() */
} rank_t;

/* Each rank's calls run on a thread of their own, so the two wait for each other. */
static void *join_thread(void *arg)
{
    rank_t *r = arg;

    r->st = nccl->comm_init(0, 2, r->rank, &id, &r->comm);
    r->st = r->st == COLL_OK ? settle(r->comm) : r->st;
    return NULL;
}

static void run_pair(void *(*fn)(void *), rank_t *r)
{
    pthread_t t[2];

    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, fn, &r[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
    }
}

static void open_pair(rank_t *r)
{
    memset(r, 0, 2 * sizeof(*r));
    r[1].rank = 1;
    assert_int_equal(nccl->unique_id(&id), COLL_OK);
    run_pair(join_thread, r);
    assert_int_equal(r[0].st, COLL_OK);
    assert_int_equal(r[1].st, COLL_OK);
}

static uint64_t a(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

static void *reductions(void *arg)
{
    rank_t *r = arg;
    coll_status_t st = nccl->allreduce(a(r->f32), a(r->f32_out), N, COLL_FLOAT32, COLL_SUM,
                                       r->comm, NULL);

    st = st == COLL_OK ? settle(r->comm) : st;
    st = st == COLL_OK ? nccl->allreduce(a(r->f32 + N), a(r->f32_out + N), N, COLL_FLOAT32,
                                         COLL_PROD, r->comm, NULL) : st;
    st = st == COLL_OK ? settle(r->comm) : st;
    st = st == COLL_OK ? nccl->allreduce(a(r->bf16), a(r->bf16_out), N, COLL_BFLOAT16, COLL_MAX,
                                         r->comm, NULL) : st;
    st = st == COLL_OK ? settle(r->comm) : st;
    st = st == COLL_OK ? nccl->allreduce(a(r->i32), a(r->i32_out), N, COLL_INT32, COLL_AVG,
                                         r->comm, NULL) : st;
    r->st = st == COLL_OK ? settle(r->comm) : st;
    return NULL;
}

static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); /* exact for the small integers used here */
}

static void test_allreduce(void **state)
{
    rank_t r[2];

    (void)state;
    open_pair(r);
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < N; i++) {
            r[k].f32[i] = (float)(i + 10 * k);
            r[k].f32[N + i] = (float)(257 + i + 2 * k); /* products beyond 16 bits */
            r[k].bf16[i] = bf16_of((float)(k == 0 ? i : N - i));
            r[k].i32[i] = 3 * i + k * 5;
        }
    }
    run_pair(reductions, r);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(r[k].st, COLL_OK);
        for (int i = 0; i < N; i++) {
            assert_true(r[k].f32_out[i] == (float)(2 * i + 10));
            assert_true(r[k].f32_out[N + i] == (float)((257 + i) * (259 + i)));
            assert_int_equal(r[k].bf16_out[i], bf16_of((float)(i > N - i ? i : N - i)));
            assert_int_equal(r[k].i32_out[i], (3 * i + 3 * i + 5) / 2);
        }
        nccl->comm_destroy(r[k].comm);
    }
}

static void *movements(void *arg)
{
    rank_t *r = arg;
    coll_status_t st;

    /* Reduce-scatter of 2 x N into N, all-gather of N into 2 x N, broadcast from rank 1. */
    st = nccl->reduce_scatter(a(r->f32), a(r->f32_out), N, COLL_FLOAT32, COLL_SUM, r->comm, NULL);
    st = st == COLL_OK ? settle(r->comm) : st;
    st = st == COLL_OK ? nccl->allgather(a(r->i32), a(r->f32_out + N), N / 2, COLL_INT32,
                                         r->comm, NULL) : st;
    st = st == COLL_OK ? settle(r->comm) : st;
    st = st == COLL_OK ? nccl->broadcast(a(r->bf16), a(r->bf16_out), N, COLL_BFLOAT16, 1,
                                         r->comm, NULL) : st;
    r->st = st == COLL_OK ? settle(r->comm) : st;
    return NULL;
}

static void test_scatter_gather_broadcast(void **state)
{
    rank_t r[2];

    (void)state;
    open_pair(r);
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 2 * N; i++) {
            r[k].f32[i] = (float)(i * (k + 1));
        }
        for (int i = 0; i < N; i++) {
            r[k].i32[i] = 100 * k + i;
            r[k].bf16[i] = bf16_of((float)(k * 7 + i));
        }
    }
    run_pair(movements, r);
    for (int k = 0; k < 2; k++) {
        int32_t gathered[N];
        assert_int_equal(r[k].st, COLL_OK);
        for (int i = 0; i < N; i++) {
            assert_true(r[k].f32_out[i] == (float)(3 * (k * N + i)));
            assert_int_equal(r[k].bf16_out[i], bf16_of((float)(7 + i)));
        }
        memcpy(gathered, r[k].f32_out + N, sizeof(gathered));
        for (int i = 0; i < N; i++) {
            assert_int_equal(gathered[i], 100 * (i / (N / 2)) + i % (N / 2));
        }
        nccl->comm_destroy(r[k].comm);
    }
}

/* A reduce to rank 1: float32 sum out of place, int32 avg in place (truncated toward zero). */
static void *reduces(void *arg)
{
    rank_t *r = arg;
    coll_status_t st = nccl->reduce(a(r->f32), a(r->f32_out), N, COLL_FLOAT32, COLL_SUM, 1,
                                    r->comm, NULL);

    st = st == COLL_OK ? settle(r->comm) : st;
    st = st == COLL_OK ? nccl->reduce(a(r->i32), a(r->i32), N, COLL_INT32, COLL_AVG, 1, r->comm,
                                      NULL) : st;
    r->st = st == COLL_OK ? settle(r->comm) : st;
    return NULL;
}

static void test_reduce(void **state)
{
    rank_t r[2];

    (void)state;
    open_pair(r);
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < N; i++) {
            r[k].f32[i] = (float)(i + 10 * k);
            r[k].f32[N + i] = (float)(257 + i + 2 * k); /* products beyond 16 bits */
            r[k].f32_out[i] = -1.0f; /* a non-root's stays */
            r[k].i32[i] = k == 0 ? -i : 2 * i - 3;
        }
    }
    run_pair(reduces, r);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(r[k].st, COLL_OK);
        nccl->comm_destroy(r[k].comm);
    }
    for (int i = 0; i < N; i++) {
        assert_true(r[1].f32_out[i] == (float)(2 * i + 10));
        assert_true(r[0].f32_out[i] == -1.0f);
        assert_int_equal(r[1].i32[i], (i - 3) / 2); /* C's division truncates, as NCCL's */
        assert_int_equal(r[0].i32[i], -i);           /* a non-root's input untouched */
    }
}

static void test_refusals(void **state)
{
    rank_t r[2];
    coll_nccl_comm_t c = NULL;

    (void)state;
    assert_int_equal(nccl->comm_init(0, 2, 2, &id, &c), COLL_ERR_INVALID);
    assert_int_equal(nccl->comm_init(5, 2, 0, &id, &c), COLL_ERR_INVALID); /* no fake device 5 */
    open_pair(r);
    assert_int_equal(nccl->allreduce(a(r[0].i32), a(r[0].i32_out), N, COLL_INT32, COLL_BXOR,
                                     r[0].comm, NULL), COLL_ERR_UNSUPPORTED);
    assert_non_null(strstr(coll_dev_error(), "not NCCL's"));
    for (int k = 0; k < 2; k++) {
        nccl->comm_destroy(r[k].comm);
    }
}

static void *one_reduction(void *arg)
{
    rank_t *r = arg;
    coll_status_t st = nccl->allreduce(a(r->f32), a(r->f32_out), N, COLL_FLOAT32, COLL_SUM,
                                       r->comm, NULL);

    r->st = st == COLL_OK ? settle(r->comm) : st;
    strcpy(r->err, coll_dev_error());
    if (r->rank == 1) { /* the failed rank aborts, as a daemon does on the job's failure */
        nccl->comm_abort(r->comm);
    }
    return NULL;
}

static void test_async_error_and_abort(void **state)
{
    rank_t r[2];

    (void)state;
    open_pair(r);
    setenv("FAKE_NCCL_ASYNC_ERROR", "1", 1);
    run_pair(one_reduction, r);
    unsetenv("FAKE_NCCL_ASYNC_ERROR");
    assert_int_equal(r[1].st, COLL_ERR_IO);
    assert_non_null(strstr(r[1].err, "nccl communicator: unhandled system error: stand-in "
                                     "NCCL: injected asynchronous error"));
    assert_int_equal(r[0].st, COLL_ERR_PEER); /* its peer's abort, well before the bound */
    assert_non_null(strstr(r[0].err, "a rank aborted the communicator"));
    nccl->comm_abort(r[0].comm);
}

static void test_too_old(void **state)
{
    const char *text;

    (void)state;
    assert_int_equal(coll_nccl_open(&nccl), COLL_ERR_UNSUPPORTED);
    assert_int_equal(coll_nccl_probe(&text), 0);
    assert_string_equal(text, "absent: libnccl.so.2 has no ncclGetLastError (NCCL before 2.14)");
}

int main(void)
{
    const char *text;
    const struct CMUnitTest old[] = {
        cmocka_unit_test(test_too_old),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce),
        cmocka_unit_test(test_scatter_gather_broadcast),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_async_error_and_abort),
    };

    if (getenv("TEST_NCCL_OLD") != NULL) {
        return cmocka_run_group_tests(old, NULL, NULL);
    }
    if (coll_nccl_open(&nccl) != COLL_OK) {
        coll_nccl_probe(&text);
        print_error("opening the stand-in NCCL: %s\n", text);
        return 1;
    }
    assert_int_equal(coll_nccl_probe(&text), 1);
    assert_string_equal(text, "2.28.9");
    assert_int_equal(nccl->host_memory, 1); /* the stand-in said so */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
