/*
 * Unit tests of operations on groups over the fake net layer (fake_net.h): 4 nodes of 2 ranks
 * (rank = 2 node + local), two groups built and registered on every node with a member as
 * job/groups.c does (core/group.c lays them out), and the world:
 *
 *   A = ranks 6, 1, 5, 2 in that order (one member on each node, group ranks not in job
 *   order) and B = ranks 0..3 (nodes 0 and 1, two members each) overlap in ranks 1 and 2;
 *   allreduces on A, B and the world at once with the same key give each its own members'
 *   sum; every message carries its group in the tag, and B's travel only between its nodes;
 *   a reduce-scatter on A hands block g to group rank g, a broadcast from A's rank 2 (job
 *   rank 5) reaches A's members only; a gather on A to its rank 1 (job rank 1) holds every
 *   member's block in group rank order, a scatter on B from its rank 3 (job rank 3, the second
 *   member of node 1) hands block g to group rank g;
 *   the layout of a group: its nodes, local members and the local index of each rank;
 *   a rank that is not a member (or has not registered) submitting on a group fails the job
 *   with a message saying so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fake_net.h"
#include "proto/tag.h"

#define SEG 1024
#define COUNT 1000 /* several segments of 256 floats */

static fake_world_t w;
static const uint32_t ranks_a[] = {6, 1, 5, 2}, ranks_b[] = {0, 1, 2, 3};

static float input(uint32_t r, size_t i, uint32_t salt)
{
    return (float)((r + 1) * 1000 + (i % 97) + 100000 * salt);
}

/* Build group @p id of @p ranks on every node with a member, registered by its members. */
static void make_group(uint32_t id, const uint32_t *ranks, uint32_t n)
{
    for (uint32_t node = 0; node < w.nnodes; node++) {
        coll_group_t *g;
        char err[128];
        coll_status_t st = coll_group_build(&w.job[node], id, ranks, n, &g, err, sizeof(err));
        if (st == COLL_ERR_INVALID) {
            continue; /* no member on this node */
        }
        assert_int_equal(st, COLL_OK);
        g->registered = (1ull << g->nlocal) - 1;
        coll_list_push(&w.job[node].groups, &g->link);
    }
}

static void setup_world(void)
{
    fake_net_init(&w, 4, 2, SEG, 4 << 20, FAKE_EAGER);
    make_group(1, ranks_a, 4);
    make_group(2, ranks_b, 4);
}

/* Submit @p coll of rank (node, l) on @p group. */
static void submit(uint32_t node, uint32_t l, uint32_t group, Coll__Wire__Collective coll,
                   uint32_t req, const float *send, const float *recv, uint64_t count,
                   uint32_t root)
{
    Coll__Wire__Submit s = COLL__WIRE__SUBMIT__INIT;
    const uint8_t *base = coll_pool_base(w.job[node].pool);

    s.req_id = req;
    s.key = req >= 20 ? req : 5; /* the allreduces share key 5; others have their own */
    s.algo = COLL_ALGO_RING;
    s.coll = coll;
    s.dtype = COLL_FLOAT32;
    s.op = COLL_SUM;
    s.count = count;
    s.send_offset = (uint64_t)((const uint8_t *)send - base);
    s.recv_offset = (uint64_t)((const uint8_t *)recv - base);
    s.root = root;
    s.group = group;
    if (coll == COLL__WIRE__COLLECTIVE__BROADCAST) {
        s.algo = COLL_ALGO_CHAIN;
    } else if (coll == COLL__WIRE__COLLECTIVE__GATHER ||
               coll == COLL__WIRE__COLLECTIVE__SCATTER) {
        s.algo = COLL_ALGO_DIRECT;
    }
    coll_op_submit(&w.job[node], &w.sess[node][l], &s);
}

static float *alloc_input(uint32_t node, uint32_t l, size_t n, uint32_t salt)
{
    float *p = fake_net_alloc(&w, node, l, n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        p[i] = input(node * 2 + l, i, salt);
    }
    return p;
}

static int member(const uint32_t *ranks, uint32_t r)
{
    for (int g = 0; g < 4; g++) {
        if (ranks[g] == r) {
            return g;
        }
    }
    return -1;
}

static void expect_status(uint32_t node, uint32_t l, uint32_t req, coll_status_t st)
{
    const fake_done_t *d = fake_net_done(&w, node, l, req);
    if (d == NULL || d->status != st) {
        fail_msg("rank %u request %u: %s, expected %s (%s)", node * 2 + l, req,
                 d ? coll_err_name(d->status) : "not completed", coll_err_name(st),
                 d ? d->error : "");
    }
}

/* Rank r's output of the allreduce on the group of @p ranks (NULL: the world). */
static void check_sum(uint32_t r, const float *out, const uint32_t *ranks, uint32_t salt)
{
    for (size_t i = 0; i < COUNT; i++) {
        float want = 0;
        for (uint32_t m = 0; m < 8; m++) {
            want += ranks == NULL || member(ranks, m) >= 0 ? input(m, i, salt) : 0.0f;
        }
        if (out[i] != want) {
            fail_msg("rank %u salt %u element %zu: %g, expected %g", r, salt, i, (double)out[i],
                     (double)want);
        }
    }
}

static void test_same_key_three_communicators(void **state)
{
    float *in[8][3], *out[8][3];
    const uint32_t *groups[3] = {NULL, ranks_a, ranks_b};

    (void)state;
    setup_world();
    for (uint32_t r = 0; r < 8; r++) {
        for (uint32_t g = 0; g < 3; g++) {
            in[r][g] = alloc_input(r / 2, r % 2, COUNT, g);
            out[r][g] = fake_net_alloc(&w, r / 2, r % 2, COUNT * sizeof(float));
        }
    }
    for (uint32_t g = 3; g-- > 0;) { /* groups first, the world last */
        for (uint32_t r = 0; r < 8; r++) {
            if (groups[g] == NULL || member(groups[g], r) >= 0) {
                submit(r / 2, r % 2, g, COLL__WIRE__COLLECTIVE__ALLREDUCE, 10 + g, in[r][g],
                       out[r][g], COUNT, 0);
            }
        }
    }
    fake_net_run(&w);
    for (uint32_t r = 0; r < 8; r++) {
        for (uint32_t g = 0; g < 3; g++) {
            if (groups[g] == NULL || member(groups[g], r) >= 0) {
                expect_status(r / 2, r % 2, 10 + g, COLL_OK);
                check_sum(r, out[r][g], groups[g], g);
            }
        }
    }
    for (size_t k = 0; k < w.nsent; k++) {
        const fake_sent_t *s = &w.sent[k];
        assert_true(coll_tag_group(s->tag) <= 2);
        if (coll_tag_group(s->tag) == 2) {
            assert_true(s->from <= 1 && s->to <= 1); /* B lives on nodes 0 and 1 */
        }
    }
    fake_net_free(&w);
}

/* A's reduce-scatter gives group rank g block g; its broadcast from group rank 2 (job rank 5)
 * reaches only its members. */
static void test_group_ranks_in_blocked_and_rooted(void **state)
{
    float *in[4], *out[4], *bin[4], *bout[4];

    (void)state;
    setup_world();
    for (uint32_t g = 0; g < 4; g++) {
        uint32_t r = ranks_a[g];
        in[g] = alloc_input(r / 2, r % 2, 4 * COUNT, 7);
        out[g] = fake_net_alloc(&w, r / 2, r % 2, COUNT * sizeof(float));
        bin[g] = alloc_input(r / 2, r % 2, COUNT, 8);
        bout[g] = fake_net_alloc(&w, r / 2, r % 2, COUNT * sizeof(float));
        submit(r / 2, r % 2, 1, COLL__WIRE__COLLECTIVE__REDUCE_SCATTER, 20, in[g], out[g], COUNT,
               0);
        submit(r / 2, r % 2, 1, COLL__WIRE__COLLECTIVE__BROADCAST, 21, bin[g], bout[g], COUNT,
               2);
    }
    fake_net_run(&w);
    for (uint32_t g = 0; g < 4; g++) {
        uint32_t r = ranks_a[g];
        expect_status(r / 2, r % 2, 20, COLL_OK);
        expect_status(r / 2, r % 2, 21, COLL_OK);
        for (size_t i = 0; i < COUNT; i++) {
            float want = 0;
            for (uint32_t m = 0; m < 4; m++) {
                want += input(ranks_a[m], g * COUNT + i, 7);
            }
            assert_true(out[g][i] == want);
            assert_true(bout[g][i] == input(5, i, 8));
        }
    }
    fake_net_free(&w);
}

/* A gather on A to group rank 1 and a scatter on B from group rank 3, at once: blocks by
 * group rank, whatever the job ranks and nodes. */
static void test_group_gather_scatter(void **state)
{
    float *gin[4], *gout[4], *sin[4], *sout[4];

    (void)state;
    setup_world();
    for (uint32_t g = 0; g < 4; g++) {
        uint32_t a = ranks_a[g], b = ranks_b[g];
        gin[g] = alloc_input(a / 2, a % 2, COUNT, 9);
        gout[g] = fake_net_alloc(&w, a / 2, a % 2, 4 * COUNT * sizeof(float));
        sin[g] = alloc_input(b / 2, b % 2, 4 * COUNT, 10);
        sout[g] = fake_net_alloc(&w, b / 2, b % 2, COUNT * sizeof(float));
        submit(a / 2, a % 2, 1, COLL__WIRE__COLLECTIVE__GATHER, 22, gin[g], gout[g], COUNT, 1);
        submit(b / 2, b % 2, 2, COLL__WIRE__COLLECTIVE__SCATTER, 23, sin[g], sout[g], COUNT, 3);
    }
    fake_net_run(&w);
    for (uint32_t g = 0; g < 4; g++) {
        expect_status(ranks_a[g] / 2, ranks_a[g] % 2, 22, COLL_OK);
        expect_status(ranks_b[g] / 2, ranks_b[g] % 2, 23, COLL_OK);
        for (size_t i = 0; i < COUNT; i++) {
            for (uint32_t m = 0; m < 4; m++) {
                assert_true(gout[1][m * COUNT + i] == input(ranks_a[m], i, 9));
            }
            assert_true(sout[g][i] == input(ranks_b[3], g * COUNT + i, 10));
        }
    }
    fake_net_free(&w);
}

/* B on node 1: its members are ranks 2 and 3, group ranks 2 and 3; A has rank 2 only, its
 * group rank 3. */
static void test_layout(void **state)
{
    const coll_group_t *a, *b;

    (void)state;
    setup_world();
    a = coll_group_find(&w.job[1], 1);
    b = coll_group_find(&w.job[1], 2);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(b->nnodes, 2);
    assert_int_equal(b->node_rank, 1);
    assert_int_equal(b->nlocal, 2);
    assert_int_equal(coll_group_rank_of_local(b, 1), 3);
    assert_int_equal(b->rank_node[0], 0);
    assert_int_equal(b->rank_local[3], 1);
    assert_int_equal(a->nnodes, 4);
    assert_int_equal(a->nlocal, 1);
    assert_int_equal(a->locals[0], 0);
    assert_int_equal(a->local_of[1], COLL_GROUP_NONE);
    assert_int_equal(coll_group_rank_of_local(a, 0), 3);
    assert_int_equal(a->nodes[a->rank_node[0]], 3); /* group rank 0 is job rank 6 */
    assert_null(coll_group_find(&w.job[0], 3));
    fake_net_free(&w);
}

static void test_non_member_refused(void **state)
{
    float *buf;
    const fake_done_t *d;

    (void)state;
    setup_world();
    buf = alloc_input(0, 0, 4, 0);
    submit(0, 0, 1, COLL__WIRE__COLLECTIVE__ALLREDUCE, 30, buf, buf, 4, 0); /* rank 0: not in A */
    d = fake_net_done(&w, 0, 0, 30);
    assert_non_null(d);
    assert_int_equal(d->status, COLL_ERR_INVALID);
    assert_non_null(strstr(d->error, "rank 0 is not a member of group 1"));
    assert_int_equal(w.job[0].state, COLL_JOB_FAILED);
    fake_net_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_key_three_communicators),
        cmocka_unit_test(test_group_ranks_in_blocked_and_rooted),
        cmocka_unit_test(test_group_gather_scatter),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_non_member_refused),
    };
    return cmocka_run_group_tests_name("groups", tests, NULL, NULL);
}
