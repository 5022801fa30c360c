/*
 * Unit tests of the all-to-all with per-rank sizes (engine/algos/alltoallv.c) and its count
 * table's checks at submission (engine/submit.c) over the fake net layer (fake_net.h), every
 * result checked against values computed here from every rank's inputs:
 *
 *   counts that differ per pair (a third of them 0) at displacements in reverse rank order with
 *   gaps, on 1x3 (copies only), 2x2, 3x2 and 4x1, eager and rendezvous: every block where it
 *   belongs, the gaps and the element past each buffer untouched;
 *   no output before agreement: on 4x1 rank 2 expects another count from rank 0; every node
 *   checks the whole matrix, so every node fails with COLL_ERR_MISMATCH naming that pair, and
 *   no rank's output changes;
 *   a count table outside the rank's allocations, and a block past its send buffer, are refused
 *   (COLL_ERR_NOT_IN_POOL) and the job fails;
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
#include "proto/a2a.h"

#define SEG 1024
#define SENTINEL -1.0f
#define GUARD 42.0f /* the element after every buffer */
#define MAXR (FAKE_MAX_NODES * FAKE_MAX_LOCAL)

static fake_world_t w;

typedef struct {
    float *send[MAXR], *recv[MAXR];
    uint64_t *table[MAXR];
    size_t send_elems[MAXR], recv_elems[MAXR];
} bufs_t;

static uint32_t world(void)
{
    return w.nnodes * w.nlocal;
}

/* Elements rank @p i sends rank @p j at @p scale: 0 for a third of the pairs. */
static uint64_t pair_count(uint32_t i, uint32_t j, uint64_t scale)
{
    uint32_t h = (i * 7 + j * 5 + 1) % 6;
    return h % 3 == 0 ? 0 : h * scale + i;
}

/* Element k of the block rank @p i sends rank @p j. */
static float value(uint32_t i, uint32_t j, size_t k)
{
    return (float)(i * 1000000 + j * 10000 + (k % 9973));
}

/* Rank r's table: send blocks in reverse rank order with a gap after each, receive blocks in
 * rank order with two gap elements after each. */
static void layout(uint64_t *t, uint32_t r, uint64_t scale, size_t *se, size_t *re)
{
    uint32_t ws = world();
    uint64_t off = 0;

    for (uint32_t k = 0; k < ws; k++) {
        uint32_t j = ws - 1 - k;
        t[COLL_A2A_SCOUNTS * ws + j] = pair_count(r, j, scale);
        t[COLL_A2A_SDISPLS * ws + j] = off;
        off += t[COLL_A2A_SCOUNTS * ws + j] + 1;
    }
    *se = off;
    off = 0;
    for (uint32_t i = 0; i < ws; i++) {
        t[COLL_A2A_RCOUNTS * ws + i] = pair_count(i, r, scale);
        t[COLL_A2A_RDISPLS * ws + i] = off;
        off += t[COLL_A2A_RCOUNTS * ws + i] + 2;
    }
    *re = off;
}

static float *alloc_floats(uint32_t n, uint32_t l, size_t elems, float fillv)
{
    float *p = fake_net_alloc(&w, n, l, (elems + 1) * sizeof(float));
    for (size_t i = 0; i < elems; i++) {
        p[i] = fillv;
    }
    p[elems] = GUARD;
    return p;
}

static void alloc_bufs(bufs_t *b, uint64_t scale)
{
    uint32_t ws = world();

    for (uint32_t r = 0; r < ws; r++) {
        uint32_t n = r / w.nlocal, l = r % w.nlocal;
        b->table[r] = fake_net_alloc(&w, n, l, coll_a2a_table_bytes(ws));
        layout(b->table[r], r, scale, &b->send_elems[r], &b->recv_elems[r]);
        b->send[r] = alloc_floats(n, l, b->send_elems[r], SENTINEL);
        b->recv[r] = alloc_floats(n, l, b->recv_elems[r], SENTINEL);
        for (uint32_t j = 0; j < ws; j++) {
            for (uint64_t k = 0; k < b->table[r][COLL_A2A_SCOUNTS * ws + j]; k++) {
                b->send[r][b->table[r][COLL_A2A_SDISPLS * ws + j] + k] = value(r, j, k);
            }
        }
    }
}

static uint64_t offset(uint32_t n, const void *p)
{
    return (uint64_t)((const uint8_t *)p - coll_pool_base(w.job[n].pool));
}

static void submit_all(const bufs_t *b)
{
    for (uint32_t r = 0; r < world(); r++) {
        uint32_t n = r / w.nlocal, l = r % w.nlocal;
        Coll__Wire__Submit s = COLL__WIRE__SUBMIT__INIT;
        s.req_id = 7;
        s.key = 11;
        s.coll = COLL__WIRE__COLLECTIVE__ALLTOALLV;
        s.dtype = COLL_FLOAT32;
        s.send_offset = offset(n, b->send[r]);
        s.recv_offset = offset(n, b->recv[r]);
        s.layout = offset(n, b->table[r]);
        coll_op_submit(&w.job[n], &w.sess[n][l], &s);
    }
    fake_net_run(&w);
}

static void check_elem(uint32_t r, size_t i, float got, float want)
{
    if (got != want) {
        fail_msg("rank %u element %zu: %g, expected %g", r, i, got, want);
    }
}

/* What rank @p r's receive buffer must hold at @p i: a block's element or the sentinel. */
static float want_recv(const bufs_t *b, uint32_t r, size_t i)
{
    uint32_t ws = world();
    const uint64_t *t = b->table[r];

    for (uint32_t s = 0; s < ws; s++) {
        uint64_t d = t[COLL_A2A_RDISPLS * ws + s], n = t[COLL_A2A_RCOUNTS * ws + s];
        if (i >= d && i < d + n) {
            return value(s, r, i - d);
        }
    }
    return SENTINEL;
}

/* Each node's metrics count one alltoallv of the bytes its first local rank sends. */
static void check_bytes(uint32_t nodes, uint32_t nlocal, uint64_t scale)
{
    for (uint32_t n = 0; n < nodes; n++) {
        const coll_stats_cell_t *c = &w.d[n].stats.ops[COLL_KIND_ALLTOALLV][COLL_FLOAT32][0];
        uint64_t want = 0;
        for (uint32_t j = 0; j < world(); j++) {
            want += pair_count(n * nlocal, j, scale) * sizeof(float);
        }
        if (c->ok != 1 || c->bytes != want) {
            fail_msg("%ux%u node %u: %llu alltoallvs of %llu bytes, expected 1 of %llu", nodes,
                     nlocal, n, (unsigned long long)c->ok, (unsigned long long)c->bytes,
                     (unsigned long long)want);
        }
    }
}

static void run_values(uint32_t nodes, uint32_t nlocal, uint64_t scale, fake_mode_t mode)
{
    bufs_t b;

    fake_net_init(&w, nodes, nlocal, SEG, 4 << 20, mode);
    alloc_bufs(&b, scale);
    submit_all(&b);
    for (uint32_t r = 0; r < world(); r++) {
        const fake_done_t *d = fake_net_done(&w, r / nlocal, r % nlocal, 7);
        if (d == NULL || d->status != COLL_OK || strcmp(d->algo, "direct") != 0) {
            fail_msg("%ux%u rank %u: %s (%s)", nodes, nlocal, r,
                     d ? coll_err_name(d->status) : "no completion", d ? d->error : "");
        }
        for (size_t i = 0; i <= b.recv_elems[r]; i++) {
            check_elem(r, i, b.recv[r][i], i < b.recv_elems[r] ? want_recv(&b, r, i) : GUARD);
        }
    }
    check_bytes(nodes, nlocal, scale);
    fake_net_free(&w);
}

static void test_values(void **state)
{
    static const uint32_t shapes[][2] = {{1, 3}, {2, 2}, {3, 2}, {4, 1}};

    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        run_values(shapes[s][0], shapes[s][1], 1, FAKE_EAGER);
        run_values(shapes[s][0], shapes[s][1], 700, FAKE_RENDEZVOUS);
        run_values(shapes[s][0], shapes[s][1], 700, FAKE_EAGER);
    }
}

static void expect_untouched(const bufs_t *b)
{
    for (uint32_t r = 0; r < world(); r++) {
        for (size_t i = 0; i <= b->recv_elems[r]; i++) {
            check_elem(r, i, b->recv[r][i], i < b->recv_elems[r] ? SENTINEL : GUARD);
        }
    }
}

/* 4x1: rank 2 expects one element more from rank 0 than rank 0 sends it. */
static void test_count_mismatch_no_output(void **state)
{
    uint32_t ws;
    char want[96];
    bufs_t b;

    fake_net_init(&w, 4, 1, SEG, 4 << 20, FAKE_RENDEZVOUS);
    alloc_bufs(&b, 300);
    ws = world();
    b.table[2][COLL_A2A_RCOUNTS * ws + 0] += 1;
    submit_all(&b);
    expect_untouched(&b);
    snprintf(want, sizeof(want), "rank 0 sends %llu elements to rank 2, which expects %llu",
             (unsigned long long)pair_count(0, 2, 300),
             (unsigned long long)pair_count(0, 2, 300) + 1);
    for (uint32_t n = 0; n < 4; n++) {
        const fake_done_t *d = fake_net_done(&w, n, 0, 7);
        assert_int_equal(w.job[n].state, COLL_JOB_FAILED);
        assert_int_equal(w.job[n].error, COLL_ERR_MISMATCH);
        if (strstr(w.job[n].errmsg, want) == NULL) {
            fail_msg("node %u: '%s' lacks '%s'", n, w.job[n].errmsg, want);
        }
        assert_true(d == NULL || d->status != COLL_OK);
    }
    fake_net_free(&w);
}

/* Local rank @p l's request ended with @p st and a message holding @p text. */
static void expect_status(uint32_t l, coll_status_t st, const char *text)
{
    const fake_done_t *d = fake_net_done(&w, 0, l, 7);

    assert_non_null(d);
    assert_int_equal(d->status, st);
    assert_non_null(strstr(d->error, text));
}

/* Rank 1's table lies in an allocation of rank 0's; then rank 1's first send block lies past its send
 * buffer and the pool. Both refused before any byte moves: rank 1 gets COLL_ERR_NOT_IN_POOL,
 * rank 0 COLL_ERR_JOB naming it. */
static void test_table_refusals(void **state)
{
    for (int c = 0; c < 2; c++) {
        bufs_t b;
        fake_net_init(&w, 1, 2, SEG, 4 << 20, FAKE_EAGER);
        alloc_bufs(&b, 5);
        if (c == 0) {
            uint64_t *theirs = fake_net_alloc(&w, 0, 0, coll_a2a_table_bytes(2));
            memcpy(theirs, b.table[1], coll_a2a_table_bytes(2));
            b.table[1] = theirs;
        } else {
            b.table[1][COLL_A2A_SDISPLS * 2 + 0] = b.send_elems[1] + (1u << 22); /* 16 MiB on */
        }
        submit_all(&b);
        assert_int_equal(w.job[0].state, COLL_JOB_FAILED);
        assert_int_equal(w.job[0].error, COLL_ERR_JOB);
        assert_non_null(strstr(w.job[0].errmsg, c == 0 ? "count table" : "buffers"));
        expect_status(0, COLL_ERR_JOB, "rank 1's submission was refused");
        expect_status(1, COLL_ERR_NOT_IN_POOL, "rank 1's submission was refused");
        expect_untouched(&b);
        fake_net_free(&w);
    }
}

/* Node 2's first block send fails (its peer died): the job fails with COLL_ERR_PEER. */
static void test_dead_peer(void **state)
{
    bufs_t b;

    fake_net_init(&w, 3, 1, SEG, 4 << 20, FAKE_RENDEZVOUS);
    w.fail_node = 2;
    w.fail_at_send = 4; /* the ring's descriptor and both headers go out, its first block not */
    alloc_bufs(&b, 500);
    submit_all(&b);
    assert_int_equal(w.job[2].state, COLL_JOB_FAILED);
    assert_int_equal(w.job[2].error, COLL_ERR_PEER);
    assert_non_null(strstr(w.job[2].errmsg, "send to node"));
    const fake_done_t *d = fake_net_done(&w, 2, 0, 7);
    assert_non_null(d);
    assert_int_equal(d->status, COLL_ERR_PEER);
    fake_net_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_count_mismatch_no_output),
        cmocka_unit_test(test_table_refusals),
        cmocka_unit_test(test_dead_peer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
