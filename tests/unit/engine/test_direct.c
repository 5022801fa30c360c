/*
 * Unit tests of the direct gather and scatter (engine/algos/direct.c) over the fake net layer
 * (fake_net.h), every result checked against values computed here from every rank's inputs:
 *
 *   gather and scatter from a root on the first, a middle and the last node, on 1x3 (the
 *   local path), 2x2, 3x2 and 4x1, for counts 0, 1 and several thousand, eager and rendezvous;
 *   only the root's output is written by a gather, every rank's by a scatter;
 *   no output before agreement: a node in the middle of the ring with another count, or other
 *   ranks naming another root, fail the job with COLL_ERR_MISMATCH on the root's node, and no
 *   rank's output changes (the root's node compares every node's descriptor, not only its
 *   neighbour's);
 *   a root outside the communicator is refused with COLL_ERR_INVALID;
 *   a send that fails (a dead peer) fails the job naming the node.
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

#define SEG 1024
#define SENTINEL -1.0f
#define GUARD 42.0f /* the element after every buffer */

static fake_world_t w;

typedef struct {
    float *send[FAKE_MAX_NODES][FAKE_MAX_LOCAL];
    float *recv[FAKE_MAX_NODES][FAKE_MAX_LOCAL];
    size_t send_elems, recv_elems;
} bufs_t;

/* Element i of rank r's send buffer. */
static float input(uint32_t r, size_t i)
{
    return (float)((r + 1) * 10000 + (i % 9973));
}

static uint32_t world(void)
{
    return w.nnodes * w.nlocal;
}

/* Every rank gets a send and a receive buffer large enough for the root's part. */
static void alloc_bufs(bufs_t *b, size_t send_elems, size_t recv_elems)
{
    b->send_elems = send_elems;
    b->recv_elems = recv_elems;
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            uint32_t r = n * w.nlocal + l;
            b->send[n][l] = fake_net_alloc(&w, n, l, (send_elems + 1) * sizeof(float));
            b->recv[n][l] = fake_net_alloc(&w, n, l, (recv_elems + 1) * sizeof(float));
            for (size_t i = 0; i < send_elems; i++) {
                b->send[n][l][i] = input(r, i);
            }
            for (size_t i = 0; i < recv_elems; i++) {
                b->recv[n][l][i] = SENTINEL;
            }
            b->send[n][l][send_elems] = GUARD;
            b->recv[n][l][recv_elems] = GUARD;
        }
    }
}

static uint64_t offset(uint32_t n, const void *p)
{
    return (uint64_t)((const uint8_t *)p - coll_pool_base(w.job[n].pool));
}

/* Rank r submits @p coll of its count and root (@p counts, @p roots by rank). */
static void submit_each(const bufs_t *b, Coll__Wire__Collective coll, const uint64_t *counts,
                        const uint32_t *roots)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            uint32_t r = n * w.nlocal + l;
            Coll__Wire__Submit s = COLL__WIRE__SUBMIT__INIT;
            s.req_id = 7;
            s.key = 11;
            s.coll = coll;
            s.dtype = COLL_FLOAT32;
            s.count = counts[r];
            s.send_offset = offset(n, b->send[n][l]);
            s.recv_offset = offset(n, b->recv[n][l]);
            s.root = roots[r];
            coll_op_submit(&w.job[n], &w.sess[n][l], &s);
        }
    }
    fake_net_run(&w);
}

static void submit_all(const bufs_t *b, Coll__Wire__Collective coll, uint64_t count,
                       uint32_t root)
{
    uint64_t counts[FAKE_MAX_NODES * FAKE_MAX_LOCAL];
    uint32_t roots[FAKE_MAX_NODES * FAKE_MAX_LOCAL];

    for (uint32_t r = 0; r < world(); r++) {
        counts[r] = count;
        roots[r] = root;
    }
    submit_each(b, coll, counts, roots);
}

static void expect_done(coll_status_t status, const char *algo)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            const fake_done_t *d = fake_net_done(&w, n, l, 7);
            if (d == NULL || d->status != status) {
                fail_msg("node %u local rank %u: %s, expected %s (%s)", n, l,
                         d ? coll_err_name(d->status) : "no completion", coll_err_name(status),
                         d ? d->error : "");
            }
            if (algo != NULL && strcmp(d->algo, algo) != 0) {
                fail_msg("node %u local rank %u ran '%s', expected '%s'", n, l, d->algo, algo);
            }
        }
    }
}

static void check_elem(uint32_t n, uint32_t l, size_t i, float got, float want)
{
    if (got != want) {
        fail_msg("node %u local %u element %zu: %g, expected %g", n, l, i, got, want);
    }
}

/* Every receive buffer still holds the sentinel, the element past each one too. */
static void expect_untouched(const bufs_t *b)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            for (size_t i = 0; i < b->recv_elems; i++) {
                check_elem(n, l, i, b->recv[n][l][i], SENTINEL);
            }
        }
    }
}

static void run_gather(uint32_t nodes, uint32_t nlocal, uint64_t count, uint32_t root,
                       fake_mode_t mode)
{
    bufs_t b;

    fake_net_init(&w, nodes, nlocal, SEG, 4 << 20, mode);
    alloc_bufs(&b, count, count * world());
    submit_all(&b, COLL__WIRE__COLLECTIVE__GATHER, count, root);
    expect_done(COLL_OK, nodes > 1 ? "direct" : "local");
    for (uint32_t n = 0; n < nodes; n++) {
        for (uint32_t l = 0; l < nlocal; l++) {
            int at_root = n * nlocal + l == root;
            for (size_t i = 0; i < count * world(); i++) {
                check_elem(n, l, i, b.recv[n][l][i],
                           at_root ? input((uint32_t)(i / count), i % count) : SENTINEL);
            }
            check_elem(n, l, count * world(), b.recv[n][l][count * world()], GUARD);
        }
    }
    fake_net_free(&w);
}

static void run_scatter(uint32_t nodes, uint32_t nlocal, uint64_t count, uint32_t root,
                        fake_mode_t mode)
{
    bufs_t b;

    fake_net_init(&w, nodes, nlocal, SEG, 4 << 20, mode);
    alloc_bufs(&b, count * world(), count);
    submit_all(&b, COLL__WIRE__COLLECTIVE__SCATTER, count, root);
    expect_done(COLL_OK, nodes > 1 ? "direct" : "local");
    for (uint32_t n = 0; n < nodes; n++) {
        for (uint32_t l = 0; l < nlocal; l++) {
            uint32_t r = n * nlocal + l;
            for (size_t i = 0; i < count; i++) {
                check_elem(n, l, i, b.recv[n][l][i], input(root, r * count + i));
            }
            check_elem(n, l, count, b.recv[n][l][count], GUARD);
        }
    }
    fake_net_free(&w);
}

static const uint32_t shapes[][2] = {{1, 3}, {2, 2}, {3, 2}, {4, 1}};
static const uint64_t counts[] = {0, 1, 3001};

static void test_gather(void **state)
{
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        uint32_t n = shapes[s][0], l = shapes[s][1], last = n * l - 1;
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            run_gather(n, l, counts[c], 0, FAKE_EAGER);
            run_gather(n, l, counts[c], last / 2, FAKE_RENDEZVOUS);
            run_gather(n, l, counts[c], last, FAKE_EAGER);
        }
    }
}

static void test_scatter(void **state)
{
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        uint32_t n = shapes[s][0], l = shapes[s][1], last = n * l - 1;
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            run_scatter(n, l, counts[c], 0, FAKE_RENDEZVOUS);
            run_scatter(n, l, counts[c], last / 2, FAKE_EAGER);
            run_scatter(n, l, counts[c], last, FAKE_RENDEZVOUS);
        }
    }
}

/* The root's node and every node that failed, failed with COLL_ERR_MISMATCH; one message
 * names @p a and @p b (the real daemons then tell the others: core/job.c). No rank completed
 * with success: the nodes that agreed with their neighbours wait for the root's verdict. */
static void expect_mismatch(uint32_t root_node, const char *a, const char *b)
{
    int named = 0;

    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            const fake_done_t *d = fake_net_done(&w, n, l, 7);
            if (d != NULL && d->status == COLL_OK) {
                fail_msg("node %u local rank %u completed with success", n, l);
            }
        }
    }

    assert_int_equal(w.job[root_node].state, COLL_JOB_FAILED);
    for (uint32_t n = 0; n < w.nnodes; n++) {
        if (w.job[n].state == COLL_JOB_FAILED) {
            assert_int_equal(w.job[n].error, COLL_ERR_MISMATCH);
            named |= strstr(w.job[n].errmsg, a) != NULL && strstr(w.job[n].errmsg, b) != NULL;
        }
    }
    assert_true(named);
}

/* On 4x1 with the root on node 0, nodes 1 and 2 submit another count (@p other): node 0's
 * neighbour in the ring (node 3) agrees with it, so only the comparison of every node's
 * descriptor at the root's node keeps its output unwritten. Node 2's blocks arrive (a gather's
 * other nodes send at once) but are never received; node 2, which agrees with its neighbour,
 * must not complete with success (with @p other 0 it has nothing to send but its descriptor). */
static void run_count_mismatch(Coll__Wire__Collective coll, fake_mode_t mode, uint64_t other)
{
    uint64_t cnt[4] = {500, other, other, 500};
    char want[32];
    uint32_t roots[4] = {0, 0, 0, 0};
    int gather = coll == COLL__WIRE__COLLECTIVE__GATHER;
    bufs_t b;

    fake_net_init(&w, 4, 1, SEG, 4 << 20, mode);
    alloc_bufs(&b, gather ? 700 : 700 * 4, gather ? 700 * 4 : 700);
    submit_each(&b, coll, cnt, roots);
    expect_untouched(&b);
    snprintf(want, sizeof(want), "count=%llu ", (unsigned long long)other);
    expect_mismatch(0, "count=500 ", want);
    fake_net_free(&w);
}

/* 2x2: node 1's ranks name root 3 (on their node), node 0's root 0. */
static void run_root_mismatch(Coll__Wire__Collective coll)
{
    uint64_t cnt[4] = {300, 300, 300, 300};
    uint32_t roots[4] = {0, 0, 3, 3};
    bufs_t b;

    fake_net_init(&w, 2, 2, SEG, 4 << 20, FAKE_EAGER);
    alloc_bufs(&b, 300 * 4, 300 * 4);
    submit_each(&b, coll, cnt, roots);
    expect_untouched(&b);
    expect_mismatch(0, "root=0", "root=3");
    assert_int_equal(w.job[1].state, COLL_JOB_FAILED);
    fake_net_free(&w);
}

static void test_mismatch_no_output(void **state)
{
    run_count_mismatch(COLL__WIRE__COLLECTIVE__GATHER, FAKE_EAGER, 700);
    run_count_mismatch(COLL__WIRE__COLLECTIVE__GATHER, FAKE_RENDEZVOUS, 700);
    run_count_mismatch(COLL__WIRE__COLLECTIVE__GATHER, FAKE_EAGER, 0);
    run_count_mismatch(COLL__WIRE__COLLECTIVE__SCATTER, FAKE_EAGER, 700);
    run_count_mismatch(COLL__WIRE__COLLECTIVE__SCATTER, FAKE_RENDEZVOUS, 700);
    run_count_mismatch(COLL__WIRE__COLLECTIVE__SCATTER, FAKE_RENDEZVOUS, 0);
    run_root_mismatch(COLL__WIRE__COLLECTIVE__GATHER);
    run_root_mismatch(COLL__WIRE__COLLECTIVE__SCATTER);
}

/* Root 4 of a world of 4: the first submission of each node is refused, and the job fails on
 * every node with COLL_ERR_JOB; every rank, each refused for its own root, gets
 * COLL_ERR_INVALID. */
static void test_root_out_of_range(void **state)
{
    bufs_t b;

    fake_net_init(&w, 2, 2, SEG, 4 << 20, FAKE_EAGER);
    alloc_bufs(&b, 400, 400);
    submit_all(&b, COLL__WIRE__COLLECTIVE__GATHER, 100, 4);
    for (uint32_t n = 0; n < 2; n++) {
        const fake_done_t *first = fake_net_done(&w, n, 0, 7);
        const fake_done_t *second = fake_net_done(&w, n, 1, 7);

        assert_int_equal(w.job[n].state, COLL_JOB_FAILED);
        assert_int_equal(w.job[n].error, COLL_ERR_JOB);
        assert_non_null(strstr(w.job[n].errmsg, "root 4 is not a rank"));
        assert_non_null(first);
        assert_non_null(second);
        /* Its first local rank's submission ended the job; the second, refused too after the
         * job failed, gets its own refusal as well, not the job's COLL_ERR_JOB. */
        assert_int_equal(first->status, COLL_ERR_INVALID);
        assert_non_null(strstr(first->error, n == 0 ? "rank 0's submission was refused"
                                                    : "rank 2's submission was refused"));
        assert_int_equal(second->status, COLL_ERR_INVALID);
        assert_non_null(strstr(second->error, n == 0 ? "rank 1: root 4 is not a rank"
                                                     : "rank 3: root 4 is not a rank"));
    }
    expect_untouched(&b);
    fake_net_free(&w);
}

/* Node 2's first data send of a gather to the root's node fails (its peer died): the job fails
 * with COLL_ERR_PEER naming node 0. */
static void test_dead_peer(void **state)
{
    bufs_t b;

    fake_net_init(&w, 3, 1, SEG, 4 << 20, FAKE_RENDEZVOUS);
    w.fail_node = 2;
    w.fail_at_send = 3; /* both descriptors go out (the ring's, the root's), its block not */
    alloc_bufs(&b, 1000, 3000);
    submit_all(&b, COLL__WIRE__COLLECTIVE__GATHER, 1000, 0);
    assert_int_equal(w.job[2].state, COLL_JOB_FAILED);
    assert_int_equal(w.job[2].error, COLL_ERR_PEER);
    assert_non_null(strstr(w.job[2].errmsg, "send to node 0"));
    const fake_done_t *d = fake_net_done(&w, 2, 0, 7);
    assert_non_null(d);
    assert_int_equal(d->status, COLL_ERR_PEER);
    fake_net_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_scatter),
        cmocka_unit_test(test_mismatch_no_output),
        cmocka_unit_test(test_root_out_of_range),
        cmocka_unit_test(test_dead_peer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
