/*
 * Unit tests of the staged path's point-to-point transfers and all-to-all
 * (engine/dev_staged.h, engine/algos/p2p.h) over the fake net layer (fake_net.h) and the fake
 * device layer (COLL_DEVICE_FAKE=1 in this test's environment): 2 nodes of 2 local ranks (rank
 * n * 2 + l), buffers in each job's pool on device 0, submitted as the job layer does.
 *
 *   messages 0 -> 1 (one node) and 1 -> 2 (across) device to device, 2 -> 3 device to host and
 *   3 -> 0 host to device: every receive right, every completion named "staged+p2p" where its
 *   buffer is on the device and "p2p" where it is in the host pool, each device counting its
 *   staged operations and the bytes of the sends copied in and of the receives copied back;
 *   a send whose copy in takes time (COLL_DEVICE_FAKE_COPY_DELAY_MS) to a receive on its node
 *   submitted after it: nothing completes at submission, the loop's poll starts the message
 *   and the receive gets the data;
 *   an alltoallv on device buffers whose receive blocks have gaps: every block right, named
 *   "staged+direct", the gaps as the ranks left them, the bytes counted those of the furthest
 *   send block in and of the receive blocks back;
 *   a send's copy in that the device layer refuses fails the job with the layer's words, which
 *   its rank gets, and every page-locked buffer is back in the cache.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "core/dev_pools.h"
#include "core/devices.h"
#include "engine/inflight.h"
#include "fake_dev.h"
#include "proto/a2a.h"

#define N 2
#define L 2
#define W (N * L)
#define COUNT 3000       /* floats of a message */
#define SENTINEL -7.0f   /* what the ranks leave in their receive buffers' gaps */

static fake_world_t w;
static uv_loop_t loop; /* the daemons' loop, for the poll of copies that take time */

static float value(uint32_t from, uint32_t to, size_t i)
{
    return (float)(from * 1000 + to * 100 + (i % 31));
}

static int setup(void **state)
{
    (void)state;
    return fake_dev_init(&w, &loop, N, L, 256 << 10);
}

static int teardown(void **state)
{
    (void)state;
    return fake_dev_free(&w, &loop);
}

/* A buffer of @p bytes of rank @p r, on device 0 (@p dev) or in the host pool; its offset in
 * that pool in *off_p. */
static float *buf(uint32_t r, int dev, size_t bytes, uint64_t *off_p)
{
    uint32_t n = r / L, l = r % L;
    float *p;

    if (dev) {
        return fake_dev_alloc(&w, n, l, bytes, off_p);
    }
    p = fake_net_alloc(&w, n, l, bytes);
    *off_p = (uint64_t)((uint8_t *)p - coll_pool_base(w.job[n].pool));
    return p;
}

/* Rank @p r's send (@p kind SEND) to or receive (RECV) from rank @p peer of @p key, request id
 * key * 10 + kind; its buffer at @p off on device 0 (@p dev) or in the host pool. */
static void submit_p2p(uint32_t r, int kind, uint32_t peer, uint32_t key, int dev, uint64_t off)
{
    Coll__Wire__Submit s = COLL__WIRE__SUBMIT__INIT;

    s.req_id = key * 10 + (uint32_t)kind;
    s.key = key;
    s.coll = (uint32_t)kind;
    s.dtype = COLL_FLOAT32;
    s.count = COUNT;
    s.peer = peer;
    s.pool = dev ? 1 : 0;
    s.send_offset = kind == COLL_KIND_SEND ? off : 0;
    s.recv_offset = kind == COLL_KIND_RECV ? off : 0;
    coll_op_submit(&w.job[r / L], &w.sess[r / L][r % L], &s);
}

/* The completion of rank @p r's request @p req_id: @p st, named @p algo. */
static const fake_done_t *done(uint32_t r, uint32_t req_id, coll_status_t st, const char *algo)
{
    const fake_done_t *d = fake_net_done(&w, r / L, r % L, req_id);

    assert_non_null(d);
    assert_int_equal(d->status, st);
    if (algo != NULL) {
        assert_string_equal(d->algo, algo);
    }
    return d;
}

/* The messages of the file comment: message k from rank k to rank k + 1 (mod 4), its send
 * buffer on the device unless k is 3, its receive buffer unless k is 2. */
static void test_messages(void **state)
{
    float *s[W], *r[W];
    uint64_t so[W], ro[W];
    (void)state;

    for (uint32_t k = 0; k < W; k++) {
        s[k] = buf(k, k != 3, COUNT * 4, &so[k]);
        r[k] = buf((k + 1) % W, k != 2, COUNT * 4, &ro[k]);
        for (size_t i = 0; i < COUNT; i++) {
            s[k][i] = value(k, (k + 1) % W, i);
            r[k][i] = SENTINEL;
        }
    }
    for (uint32_t k = 0; k < W; k++) {
        submit_p2p((k + 1) % W, COLL_KIND_RECV, k, 20 + k, k != 2, ro[k]);
        submit_p2p(k, COLL_KIND_SEND, (k + 1) % W, 20 + k, k != 3, so[k]);
    }
    fake_net_run(&w);
    for (uint32_t k = 0; k < W; k++) {
        done(k, (20 + k) * 10 + COLL_KIND_SEND, COLL_OK, k != 3 ? "staged+p2p" : "p2p");
        done((k + 1) % W, (20 + k) * 10 + COLL_KIND_RECV, COLL_OK,
             k != 2 ? "staged+p2p" : "p2p");
        for (size_t i = 0; i < COUNT; i++) {
            assert_true(r[k][i] == value(k, (k + 1) % W, i));
            assert_true(s[k][i] == value(k, (k + 1) % W, i));
        }
    }
    /* Node 0: the sends of ranks 0 and 1 and their receives of messages 3 and 0; node 1: rank
     * 2's send and its receive of message 1 (rank 3's are in the host pool). */
    assert_int_equal(w.d[0].devices.dev[0].staged_ops, 4);
    assert_int_equal(w.d[0].devices.dev[0].staged_bytes, 4 * COUNT * 4);
    assert_int_equal(w.d[1].devices.dev[0].staged_ops, 2);
    assert_int_equal(w.d[1].devices.dev[0].staged_bytes, 2 * COUNT * 4);
    for (uint32_t n = 0; n < N; n++) {
        assert_int_equal(w.d[n].devices.pinned.dev[0].used, 0);
    }
}

/* The loop and the fake net, until rank @p r has its answer to @p req_id (at most 5 s). */
static const fake_done_t *drive(uint32_t r, uint32_t req_id)
{
    return fake_dev_drive(&w, &loop, r / L, r % L, req_id, 5000);
}

static void test_send_copied_in_from_the_loop(void **state)
{
    uint64_t so, ro;
    float *s = buf(0, 1, COUNT * 4, &so), *r = buf(1, 1, COUNT * 4, &ro);
    (void)state;

    for (size_t i = 0; i < COUNT; i++) {
        s[i] = value(0, 1, i);
        r[i] = SENTINEL;
    }
    setenv("COLL_DEVICE_FAKE_COPY_DELAY_MS", "20", 1);
    submit_p2p(0, COLL_KIND_SEND, 1, 30, 1, so);
    submit_p2p(1, COLL_KIND_RECV, 0, 30, 1, ro);
    unsetenv("COLL_DEVICE_FAKE_COPY_DELAY_MS");
    fake_net_run(&w);
    assert_null(fake_net_done(&w, 0, 0, 30 * 10 + COLL_KIND_SEND));
    assert_null(fake_net_done(&w, 0, 1, 30 * 10 + COLL_KIND_RECV));
    assert_non_null(drive(1, 30 * 10 + COLL_KIND_RECV));
    assert_non_null(drive(0, 30 * 10 + COLL_KIND_SEND));
    done(0, 30 * 10 + COLL_KIND_SEND, COLL_OK, "staged+p2p");
    done(1, 30 * 10 + COLL_KIND_RECV, COLL_OK, "staged+p2p");
    for (size_t i = 0; i < COUNT; i++) {
        assert_true(r[i] == value(0, 1, i));
    }
}

/* Rank @p r's alltoallv table: j + r + 1 floats to each rank j, send blocks packed; receive
 * blocks in rank order after a gap of 3 floats each. Its receive buffer's floats in *nr_p. */
static void a2a_table(uint64_t *t, uint32_t r, size_t *ns_p, size_t *nr_p)
{
    uint64_t so = 0, ro = 3;

    for (uint32_t j = 0; j < W; j++) {
        t[COLL_A2A_SCOUNTS * W + j] = j + r + 1;
        t[COLL_A2A_SDISPLS * W + j] = so;
        so += j + r + 1;
        t[COLL_A2A_RCOUNTS * W + j] = r + j + 1;
        t[COLL_A2A_RDISPLS * W + j] = ro;
        ro += r + j + 1 + 3;
    }
    *ns_p = so;
    *nr_p = ro;
}

/* What rank @p r's receive buffer holds at @p i after the alltoallv of table @p t. */
static float a2a_want(const uint64_t *t, uint32_t r, size_t i)
{
    for (uint32_t j = 0; j < W; j++) {
        uint64_t d = t[COLL_A2A_RDISPLS * W + j], c = t[COLL_A2A_RCOUNTS * W + j];
        if (i >= d && i < d + c) {
            return value(j, r, i - d);
        }
    }
    return SENTINEL;
}

static void test_alltoallv(void **state)
{
    uint64_t *t[W], so[W], ro[W];
    uint64_t bytes[N] = {w.d[0].devices.dev[0].staged_bytes, w.d[1].devices.dev[0].staged_bytes};
    float *s[W], *r[W];
    size_t ns[W], nr[W];
    (void)state;

    for (uint32_t k = 0; k < W; k++) {
        t[k] = fake_net_alloc(&w, k / L, k % L, coll_a2a_table_bytes(W));
        a2a_table(t[k], k, &ns[k], &nr[k]);
        s[k] = buf(k, 1, ns[k] * 4, &so[k]);
        r[k] = buf(k, 1, nr[k] * 4, &ro[k]);
        for (uint32_t j = 0; j < W; j++) {
            for (uint64_t i = 0; i < j + k + 1; i++) {
                s[k][t[k][COLL_A2A_SDISPLS * W + j] + i] = value(k, j, i);
            }
        }
        for (size_t i = 0; i < nr[k]; i++) {
            r[k][i] = SENTINEL;
        }
        /* In: the whole send buffer; back: the blocks (the receive extent but its 3-float gaps
         * before each block; the last gap is beyond the extent). */
        bytes[k / L] += (ns[k] + nr[k] - 3 * W - 3) * 4;
    }
    for (uint32_t k = 0; k < W; k++) {
        Coll__Wire__Submit sub = COLL__WIRE__SUBMIT__INIT;
        sub.req_id = sub.key = 40;
        sub.coll = COLL__WIRE__COLLECTIVE__ALLTOALLV;
        sub.dtype = COLL_FLOAT32;
        sub.pool = 1;
        sub.send_offset = so[k];
        sub.recv_offset = ro[k];
        sub.layout = (uint64_t)((uint8_t *)t[k] - coll_pool_base(w.job[k / L].pool));
        coll_op_submit(&w.job[k / L], &w.sess[k / L][k % L], &sub);
        if (k == L - 1) { /* node 0's operation waits for node 1: its buffers are in use */
            char what[64];
            assert_true(coll_inflight_uses(&w.job[0], &w.sess[0][0], 1, ro[0], what,
                                           sizeof(what)));
            assert_true(coll_inflight_uses(&w.job[0], &w.sess[0][0], 1, so[0], what,
                                           sizeof(what)));
        }
    }
    fake_net_run(&w);
    for (uint32_t k = 0; k < W; k++) {
        done(k, 40, COLL_OK, "staged+direct");
        for (size_t i = 0; i < nr[k]; i++) {
            assert_true(r[k][i] == a2a_want(t[k], k, i));
        }
    }
    for (uint32_t n = 0; n < N; n++) {
        assert_int_equal(w.d[n].devices.dev[0].staged_bytes, bytes[n]);
    }
}

/* Node 1's device layer, but refusing every copy. */
static const coll_dev_ops_t *real;
static coll_dev_ops_t failing;

static coll_status_t failing_copy(uint64_t dst, uint64_t src, size_t bytes, coll_dev_stream_t s)
{
    (void)dst, (void)src, (void)bytes, (void)s;
    return coll__dev_fail(COLL_ERR_IO, "cuMemcpyAsync: CUDA_ERROR_ILLEGAL_ADDRESS (test)");
}

/* Rank 2 sends from the device to rank 0 (whose receive waits on node 0): the copy in refused
 * fails node 1's job with the layer's words, which the send's rank gets, and its host copy goes
 * back to the cache. */
static void test_send_copy_refused(void **state)
{
    uint64_t so, ro;
    const fake_done_t *d;
    (void)state;

    buf(2, 1, COUNT * 4, &so);
    buf(0, 1, COUNT * 4, &ro);
    real = w.d[1].devices.ops;
    failing = *real;
    failing.copy_async = failing_copy;
    w.d[1].devices.ops = &failing;
    submit_p2p(0, COLL_KIND_RECV, 2, 50, 1, ro);
    submit_p2p(2, COLL_KIND_SEND, 0, 50, 1, so);
    w.d[1].devices.ops = real;
    fake_net_run(&w);
    d = done(2, 50 * 10 + COLL_KIND_SEND, COLL_ERR_IO, NULL);
    assert_non_null(strstr(d->error, "could not copy the device buffers in"));
    assert_non_null(strstr(d->error, "CUDA_ERROR_ILLEGAL_ADDRESS"));
    assert_int_equal(w.job[1].state, COLL_JOB_FAILED);
    assert_int_equal(w.d[1].devices.pinned.dev[0].used, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_send_copied_in_from_the_loop),
        cmocka_unit_test(test_alltoallv),
        cmocka_unit_test(test_send_copy_refused),
    };
    return cmocka_run_group_tests_name("dev_staged_p2p", tests, setup, teardown);
}
