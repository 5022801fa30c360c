/*
 * Unit tests of the engine's algorithms over the fake net layer (fake_net.h): several nodes in
 * one process, each with its local ranks' buffers in a real pool, submitting through
 * coll_op_submit() as the job layer does. Every result is checked against values computed
 * here from every rank's inputs (integer-valued floats, so sums are exact in any order):
 *
 *   ring allreduce, reduce-scatter and all-gather; recursive doubling (3 and 4 nodes); the
 *   chain's broadcast and reduce from a root on a middle node; for counts 0, 1, < N, not
 *   divisible by N, several segments; eager and rendezvous delivery;
 *   the ring's schedule: at reduce-scatter step s node r sends chunk r-1-s, holding the sum of
 *   nodes r-s..r (checked by content of every reduce-scatter message);
 *   no output before agreement: a node with another count fails the job with both descriptors
 *   and no rank's output changes;
 *   a send failing in the middle of a step fails the job naming the node;
 *   a broadcast whose nodes name different roots fails before any output is written (the
 *   root's node's included); an operation's buffers count as in flight until it completes;
 *   the bitwise reductions of int32 through the ring and recursive doubling, and of a float
 *   refused by the daemon's own check (a client that skipped the library's), naming both.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_net.h"
#include "engine/inflight.h"
#include "proto/tag.h"

#define SEG 1024 /* bytes: 256 floats, so mid-sized counts span several segments */

static fake_world_t w;

/* Rank r's input element i. */
static float input(uint32_t r, size_t i)
{
    return (float)((r + 1) * 1000 + (i % 997));
}

typedef struct {
    float *send[FAKE_MAX_NODES][FAKE_MAX_LOCAL];
    float *recv[FAKE_MAX_NODES][FAKE_MAX_LOCAL];
} bufs_t;

static void alloc_bufs(bufs_t *b, size_t send_elems, size_t recv_elems)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            uint32_t r = n * w.nlocal + l;
            b->send[n][l] = fake_net_alloc(&w, n, l, send_elems * sizeof(float));
            b->recv[n][l] = fake_net_alloc(&w, n, l, recv_elems * sizeof(float));
            for (size_t i = 0; i < send_elems; i++) {
                b->send[n][l][i] = input(r, i);
            }
            for (size_t i = 0; i < recv_elems; i++) {
                b->recv[n][l][i] = -1.0f; /* a sentinel no result equals */
            }
        }
    }
}

static uint64_t offset(uint32_t n, const void *p)
{
    return (uint64_t)((const uint8_t *)p - coll_pool_base(w.job[n].pool));
}

/* Every rank submits @p coll of @p count with @p algo; rank @p odd_rank submits @p odd_count. */
static void submit_all(const bufs_t *b, Coll__Wire__Collective coll, uint64_t count,
                       coll_algo_t algo, uint32_t root, int odd_rank, uint64_t odd_count)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            Coll__Wire__Submit s = COLL__WIRE__SUBMIT__INIT;
            s.req_id = 7;
            s.key = 5;
            s.coll = coll;
            s.dtype = COLL_FLOAT32;
            s.op = COLL_SUM;
            s.count = (int)(n * w.nlocal + l) == odd_rank ? odd_count : count;
            s.send_offset = offset(n, b->send[n][l]);
            s.recv_offset = offset(n, b->recv[n][l]);
            s.root = root;
            s.algo = algo;
            coll_op_submit(&w.job[n], &w.sess[n][l], &s);
        }
    }
    fake_net_run(&w);
}

static void expect_done(coll_status_t status)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            const fake_done_t *d = fake_net_done(&w, n, l, 7);
            if (d == NULL || d->status != status) {
                fail_msg("node %u local rank %u: %s, expected %s (%s)", n, l,
                         d ? coll_err_name(d->status) : "no completion", coll_err_name(status),
                         d ? d->error : "");
            }
        }
    }
}

static float sum_of_ranks(size_t i)
{
    float s = 0;
    for (uint32_t r = 0; r < w.nnodes * w.nlocal; r++) {
        s += input(r, i);
    }
    return s;
}

static void check_elem(uint32_t n, uint32_t l, size_t i, float got, float want)
{
    if (got != want) {
        fail_msg("node %u local %u element %zu: %g, expected %g", n, l, i, got, want);
    }
}

static void run_allreduce(uint32_t nodes, uint32_t nlocal, uint64_t count, coll_algo_t algo,
                          fake_mode_t mode)
{
    bufs_t b;

    fake_net_init(&w, nodes, nlocal, SEG, 4 << 20, mode);
    alloc_bufs(&b, count, count);
    submit_all(&b, COLL__WIRE__COLLECTIVE__ALLREDUCE, count, algo, 0, -1, 0);
    expect_done(COLL_OK);
    for (uint32_t n = 0; n < nodes; n++) {
        for (uint32_t l = 0; l < nlocal; l++) {
            for (size_t i = 0; i < count; i++) {
                check_elem(n, l, i, b.recv[n][l][i], sum_of_ranks(i));
            }
        }
    }
    fake_net_free(&w);
}

static void test_ring_allreduce(void **state)
{
    static const uint64_t counts[] = {0, 1, 2, 4, 1000, 4099};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        run_allreduce(3, 1, counts[c], COLL_ALGO_RING, FAKE_EAGER);
        run_allreduce(3, 2, counts[c], COLL_ALGO_RING, FAKE_RENDEZVOUS);
        run_allreduce(4, 1, counts[c], COLL_ALGO_RING, FAKE_RENDEZVOUS);
        run_allreduce(2, 2, counts[c], COLL_ALGO_RING, FAKE_EAGER);
    }
}

static void test_recursive_doubling(void **state)
{
    static const uint64_t counts[] = {0, 1, 5, 200}; /* the whole buffer fits one segment */
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        run_allreduce(3, 1, counts[c], COLL_ALGO_RD, FAKE_RENDEZVOUS); /* a fold and unfold */
        run_allreduce(4, 2, counts[c], COLL_ALGO_RD, FAKE_EAGER);
        run_allreduce(5, 1, counts[c], COLL_ALGO_RD, FAKE_EAGER);
    }
}

/* Reduce-scatter: rank r gets block r of the sum; all-gather: everyone gets every block. */
static void run_blocked(uint32_t nodes, uint32_t nlocal, uint64_t block)
{
    uint32_t world = nodes * nlocal;
    bufs_t b;

    fake_net_init(&w, nodes, nlocal, SEG, 4 << 20, FAKE_RENDEZVOUS);
    alloc_bufs(&b, block * world, block);
    submit_all(&b, COLL__WIRE__COLLECTIVE__REDUCE_SCATTER, block, COLL_ALGO_RING, 0, -1, 0);
    expect_done(COLL_OK);
    for (uint32_t n = 0; n < nodes; n++) {
        for (uint32_t l = 0; l < nlocal; l++) {
            for (size_t i = 0; i < block; i++) {
                check_elem(n, l, i, b.recv[n][l][i], sum_of_ranks((n * nlocal + l) * block + i));
            }
        }
    }
    fake_net_free(&w);
    fake_net_init(&w, nodes, nlocal, SEG, 4 << 20, FAKE_EAGER);
    alloc_bufs(&b, block, block * world);
    submit_all(&b, COLL__WIRE__COLLECTIVE__ALLGATHER, block, COLL_ALGO_RING, 0, -1, 0);
    expect_done(COLL_OK);
    for (uint32_t n = 0; n < nodes; n++) {
        for (size_t i = 0; i < block * world; i++) {
            check_elem(n, 0, i, b.recv[n][nlocal - 1][i], input((uint32_t)(i / block), i % block));
        }
    }
    fake_net_free(&w);
}

static void test_ring_reduce_scatter_allgather(void **state)
{
    static const uint64_t blocks[] = {0, 1, 3, 300, 1025};
    for (size_t c = 0; c < sizeof(blocks) / sizeof(blocks[0]); c++) {
        run_blocked(3, 1, blocks[c]);
        run_blocked(2, 2, blocks[c]);
        run_blocked(4, 1, blocks[c]);
    }
}

/* Broadcast from and reduce to rank 1 of node 1 (a middle link of the chain). */
static void test_chain(void **state)
{
    static const uint64_t counts[] = {0, 1, 999};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        uint64_t count = counts[c];
        uint32_t root = 3; /* node 1, local rank 1 */
        bufs_t b;

        fake_net_init(&w, 3, 2, SEG, 4 << 20, FAKE_RENDEZVOUS);
        alloc_bufs(&b, count, count);
        submit_all(&b, COLL__WIRE__COLLECTIVE__BROADCAST, count, COLL_ALGO_CHAIN, root, -1, 0);
        expect_done(COLL_OK);
        for (uint32_t r = 0; r < 6; r++) {
            for (size_t i = 0; i < count; i++) {
                check_elem(r / 2, r % 2, i, b.recv[r / 2][r % 2][i], input(root, i));
            }
        }
        submit_all(&b, COLL__WIRE__COLLECTIVE__REDUCE, count, COLL_ALGO_CHAIN, root, -1, 0);
        for (size_t i = 0; i < count; i++) {
            check_elem(1, 1, i, b.recv[1][1][i], sum_of_ranks(i));
        }
        fake_net_free(&w);
        }
}

/* Every reduce-scatter message of a 4-node ring (one rank each): node r at step s sends chunk
 * (r - 1 - s) mod 4, whose first element is the sum of nodes r-s .. r there. */
static void test_ring_schedule(void **state)
{
    const uint32_t n = 4;
    const uint64_t count = 4 * 64; /* one segment per chunk: chunk c starts at c * 64 */
    bufs_t b;

    fake_net_init(&w, n, 1, SEG, 4 << 20, FAKE_RENDEZVOUS);
    alloc_bufs(&b, count, count);
    submit_all(&b, COLL__WIRE__COLLECTIVE__ALLREDUCE, count, COLL_ALGO_RING, 0, -1, 0);
    expect_done(COLL_OK);
    uint32_t seen = 0;
    for (size_t k = 0; k < w.nsent; k++) {
        const fake_sent_t *s = &w.sent[k];
        uint32_t step = coll_tag_step(s->tag);
        if (coll_tag_kind(s->tag) != COLL_TAG_RS) {
            continue;
        }
        uint32_t chunk = (s->from + 2 * n - 1 - step) % n;
        float want = 0;
        for (uint32_t m = 0; m <= step; m++) {
            want += input((s->from + n - m) % n, chunk * 64);
        }
        assert_int_equal(s->to, (s->from + 1) % n);
        check_elem(s->from, 0, chunk * 64, s->head[0], want);
        seen++;
    }
    assert_int_equal(seen, n * (n - 1)); /* N-1 steps from every node */
    fake_net_free(&w);
}

/* Rank 2 (node 2) submits another count: the job fails with both descriptors, no output was
 * written on any rank. */
static void test_no_output_before_agreement(void **state)
{
    const uint64_t count = 3000;
    bufs_t b;

    fake_net_init(&w, 3, 1, SEG, 4 << 20, FAKE_EAGER);
    alloc_bufs(&b, count + 100, count + 100);
    submit_all(&b, COLL__WIRE__COLLECTIVE__ALLREDUCE, count, COLL_ALGO_RING, 0, 2, count + 100);
    for (uint32_t n = 0; n < 3; n++) {
        for (size_t i = 0; i < count; i++) {
            check_elem(n, 0, i, b.recv[n][0][i], -1.0f);
        }
    }
    int failed = 0;
    for (uint32_t n = 0; n < 3; n++) {
        if (w.job[n].state == COLL_JOB_FAILED) {
            failed++;
            assert_int_equal(w.job[n].error, COLL_ERR_MISMATCH);
            assert_non_null(strstr(w.job[n].errmsg, "3000"));
            assert_non_null(strstr(w.job[n].errmsg, "3100"));
        }
    }
    assert_true(failed >= 1);
    fake_net_free(&w);
}

/* A broadcast whose ranks name different roots (node 0's ranks rank 0, node 1's rank 2):
 * each node takes itself for the root's, and sends at once; the descriptor check fails the
 * job before any output is written, on the root's node too. */
static void test_bcast_roots_differ(void **state)
{
    const uint64_t count = 3000;
    bufs_t b;

    fake_net_init(&w, 2, 2, SEG, 4 << 20, FAKE_EAGER);
    alloc_bufs(&b, count, count);
    for (uint32_t n = 0; n < 2; n++) {
        for (uint32_t l = 0; l < 2; l++) {
            Coll__Wire__Submit s = COLL__WIRE__SUBMIT__INIT;
            s.req_id = 7;
            s.key = 5;
            s.coll = COLL__WIRE__COLLECTIVE__BROADCAST;
            s.dtype = COLL_FLOAT32;
            s.count = count;
            s.send_offset = offset(n, b.send[n][l]);
            s.recv_offset = offset(n, b.recv[n][l]);
            s.root = 2 * n;
            coll_op_submit(&w.job[n], &w.sess[n][l], &s);
        }
    }
    fake_net_run(&w);
    for (uint32_t n = 0; n < 2; n++) {
        assert_int_equal(w.job[n].state, COLL_JOB_FAILED);
        assert_int_equal(w.job[n].error, COLL_ERR_MISMATCH);
        for (uint32_t l = 0; l < 2; l++) {
            for (size_t i = 0; i < count; i++) {
                check_elem(n, l, i, b.recv[n][l][i], -1.0f);
            }
        }
    }
    fake_net_free(&w);
}

/* The buffers of an operation that waits for another node are in flight until it completes:
 * a free of them is refused (engine/inflight.h), of another allocation not. */
static void test_buffers_in_flight(void **state)
{
    const uint64_t count = 1000;
    float *other;
    bufs_t b;
    char what[48];

    fake_net_init(&w, 2, 1, SEG, 4 << 20, FAKE_EAGER);
    alloc_bufs(&b, count, count);
    other = fake_net_alloc(&w, 0, 0, 256);
    for (uint32_t n = 0; n < 2; n++) {
        Coll__Wire__Submit s = COLL__WIRE__SUBMIT__INIT;
        s.req_id = 7;
        s.key = 5;
        s.coll = COLL__WIRE__COLLECTIVE__ALLREDUCE;
        s.dtype = COLL_FLOAT32;
        s.count = count;
        s.algo = COLL_ALGO_RING;
        s.send_offset = offset(n, b.send[n][0]);
        s.recv_offset = offset(n, b.recv[n][0]);
        coll_op_submit(&w.job[n], &w.sess[n][0], &s);
        fake_net_run(&w);
        if (n == 0) { /* node 1 has not submitted yet */
            assert_true(coll_inflight_uses(&w.job[0], &w.sess[0][0], 0, offset(0, b.send[0][0]),
                                           what, sizeof(what)));
            assert_string_equal(what, "allreduce key 5");
            assert_true(coll_inflight_uses(&w.job[0], &w.sess[0][0], 0, offset(0, b.recv[0][0]),
                                           what, sizeof(what)));
            assert_false(coll_inflight_uses(&w.job[0], &w.sess[0][0], 0, offset(0, other), what,
                                            sizeof(what)));
        }
    }
    expect_done(COLL_OK);
    assert_false(coll_inflight_uses(&w.job[0], &w.sess[0][0], 0, offset(0, b.send[0][0]), what,
                                    sizeof(what)));
    fake_net_free(&w);
}

/* Node 1's third send fails (its peer died mid-step): the job fails naming the node. */
static void test_failure_mid_step(void **state)
{
    const uint64_t count = 4000;
    bufs_t b;

    fake_net_init(&w, 3, 1, SEG, 4 << 20, FAKE_RENDEZVOUS);
    w.fail_node = 1;
    w.fail_at_send = 3;
    alloc_bufs(&b, count, count);
    submit_all(&b, COLL__WIRE__COLLECTIVE__ALLREDUCE, count, COLL_ALGO_RING, 0, -1, 0);
    assert_int_equal(w.job[1].state, COLL_JOB_FAILED);
    assert_int_equal(w.job[1].error, COLL_ERR_PEER);
    assert_non_null(strstr(w.job[1].errmsg, "send to node 2"));
    assert_int_equal(w.nodes[1][2].gone, COLL_ERR_PEER);
    const fake_done_t *d = fake_net_done(&w, 1, 0, 7);
    assert_non_null(d);
    assert_int_equal(d->status, COLL_ERR_PEER);
    assert_non_null(strstr(d->error, "node 2"));
    fake_net_free(&w);
}

/* Rank r's int32 element i for @p op: bits set 3 times in 4 for AND, 1 in 4 for OR. */
static int32_t int_input(uint32_t r, size_t i, coll_redop_t op)
{
    uint32_t h = (r + 1) * 0x9e3779b9u ^ (uint32_t)i * 0x85ebca6bu;
    uint32_t g = h * 0xc2b2ae35u ^ (h >> 13);

    return (int32_t)(op == COLL_BAND ? h | g : op == COLL_BOR ? h & g : h);
}

static void submit_typed(uint32_t n, uint32_t l, coll_dtype_t dtype, coll_redop_t op,
                         uint64_t count, coll_algo_t algo, const void *send, const void *recv)
{
    Coll__Wire__Submit s = COLL__WIRE__SUBMIT__INIT;

    s.req_id = 7;
    s.key = 5;
    s.coll = COLL__WIRE__COLLECTIVE__ALLREDUCE;
    s.dtype = dtype;
    s.op = op;
    s.count = count;
    s.send_offset = offset(n, send);
    s.recv_offset = offset(n, recv);
    s.algo = algo;
    coll_op_submit(&w.job[n], &w.sess[n][l], &s);
}

static void run_bitwise(uint32_t nodes, uint32_t nlocal, uint64_t count, coll_algo_t algo,
                        coll_redop_t op)
{
    int32_t *send[FAKE_MAX_NODES][FAKE_MAX_LOCAL], *recv[FAKE_MAX_NODES][FAKE_MAX_LOCAL];

    fake_net_init(&w, nodes, nlocal, SEG, 4 << 20, FAKE_EAGER);
    for (uint32_t n = 0; n < nodes; n++) {
        for (uint32_t l = 0; l < nlocal; l++) {
            send[n][l] = fake_net_alloc(&w, n, l, count * sizeof(int32_t));
            recv[n][l] = fake_net_alloc(&w, n, l, count * sizeof(int32_t));
            for (size_t i = 0; i < count; i++) {
                send[n][l][i] = int_input(n * nlocal + l, i, op);
            }
            submit_typed(n, l, COLL_INT32, op, count, algo, send[n][l], recv[n][l]);
        }
    }
    fake_net_run(&w);
    expect_done(COLL_OK);
    for (size_t i = 0; i < count; i++) {
        int32_t want = int_input(0, i, op);
        for (uint32_t r = 1; r < nodes * nlocal; r++) {
            int32_t x = int_input(r, i, op);
            want = op == COLL_BAND ? want & x : op == COLL_BOR ? want | x : want ^ x;
        }
        for (uint32_t n = 0; n < nodes; n++) {
            for (uint32_t l = 0; l < nlocal; l++) {
                if (recv[n][l][i] != want) {
                    fail_msg("%s node %u local %u element %zu: %d, expected %d",
                             coll_redop_name(op), n, l, i, recv[n][l][i], want);
                }
            }
        }
    }
    fake_net_free(&w);
}

static void test_bitwise(void **state)
{
    for (coll_redop_t op = COLL_BAND; op <= COLL_BXOR; op++) {
        run_bitwise(3, 2, 1000, COLL_ALGO_RING, op); /* several segments of 256 */
        run_bitwise(4, 1, 37, COLL_ALGO_RD, op);
    }
}

static void test_bitwise_of_float_refused(void **state)
{
    bufs_t b;
    const fake_done_t *d;

    fake_net_init(&w, 2, 1, SEG, 4 << 20, FAKE_EAGER);
    alloc_bufs(&b, 10, 10);
    submit_typed(0, 0, COLL_FLOAT32, COLL_BOR, 10, COLL_ALGO_AUTO, b.send[0][0], b.recv[0][0]);
    fake_net_run(&w);
    d = fake_net_done(&w, 0, 0, 7);
    assert_non_null(d);
    assert_int_equal(d->status, COLL_ERR_INVALID);
    if (strstr(d->error, "reduction bor does not apply to float32") == NULL) {
        fail_msg("the refusal does not name the reduction and dtype: '%s'", d->error);
    }
    assert_true(b.recv[0][0][0] == -1.0f && b.recv[0][0][9] == -1.0f);
    fake_net_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_allreduce),
        cmocka_unit_test(test_recursive_doubling),
        cmocka_unit_test(test_ring_reduce_scatter_allgather),
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_ring_schedule),
        cmocka_unit_test(test_no_output_before_agreement),
        cmocka_unit_test(test_failure_mid_step),
        cmocka_unit_test(test_bcast_roots_differ),
        cmocka_unit_test(test_buffers_in_flight),
        cmocka_unit_test(test_bitwise),
        cmocka_unit_test(test_bitwise_of_float_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
