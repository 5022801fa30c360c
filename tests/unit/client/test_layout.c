/*
 * Unit tests of the 3D-parallel grids (client/grid/grid.c) and of the split plan
 * (client/groups/split_plan.c), pure functions: the groups of hand-computed layouts up to 64 ranks in
 * several rank orders (Megatron-LM's parallel_state.py example among them), the partition
 * every layout of up to 64 ranks makes, the intra-node flags, and the groups, orders and ids
 * a split computes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "client/groups/split_plan.h"

static coll_layout_t layout(int tp, int pp, int dp, const char *order)
{
    coll_layout_t l;
    assert_int_equal(coll_layout_init(&l, tp, pp, dp, order), COLL_OK);
    return l;
}

/* The group of @p dim holding @p rank is exactly @p want (n ranks, in order). */
static void expect_group(const coll_layout_t *l, coll_dim_t dim, int rank, const int *want, int n)
{
    int got[64];

    assert_int_equal(l->size[dim], n);
    assert_int_equal(coll_layout_group(l, dim, rank, got, NULL), COLL_OK);
    for (int k = 0; k < n; k++) {
        if (got[k] != want[k]) {
            fail_msg("dim %d, rank %d: member %d is %d, expected %d", dim, rank, k, got[k],
                     want[k]);
        }
    }
}

/* megatron/core/parallel_state.py, initialize_model_parallel's docstring: 16 GPUs, tp 2, pp 4
 * (so dp 2), the default order: 8 tp groups [g0, g1], [g2, g3], ...; 4 pp groups [g0, g4, g8,
 * g12], ...; 8 dp groups [g0, g2], [g1, g3], [g4, g6], ... */
static void test_megatron_docstring(void **state)
{
    static const int tp[8][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13},
                                 {14, 15}};
    static const int pp[4][4] = {{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}};
    static const int dp[8][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14},
                                 {13, 15}};
    coll_layout_t l = layout(2, 4, 2, NULL);

    (void)state;
    for (int g = 0; g < 8; g++) {
        for (int k = 0; k < 2; k++) {
            expect_group(&l, COLL_DIM_TP, tp[g][k], tp[g], 2);
            expect_group(&l, COLL_DIM_DP, dp[g][k], dp[g], 2);
        }
    }
    for (int g = 0; g < 4; g++) {
        for (int k = 0; k < 4; k++) {
            expect_group(&l, COLL_DIM_PP, pp[g][k], pp[g], 4);
        }
    }
}

/* 64 ranks, tp 4 pp 4 dp 4, tp-dp-pp: rank = tp + 4 (dp + 4 pp). Rank 37 = 1 + 4 (1 + 4 * 2). */
static void test_64_ranks(void **state)
{
    coll_layout_t l = layout(4, 4, 4, "tp-dp-pp");
    int c[COLL_DIM_COUNT];

    (void)state;
    assert_int_equal(coll_layout_coords(&l, 37, c), COLL_OK);
    assert_int_equal(c[COLL_DIM_TP], 1);
    assert_int_equal(c[COLL_DIM_DP], 1);
    assert_int_equal(c[COLL_DIM_PP], 2);
    expect_group(&l, COLL_DIM_TP, 37, (int[]){36, 37, 38, 39}, 4);
    expect_group(&l, COLL_DIM_PP, 37, (int[]){5, 21, 37, 53}, 4);
    expect_group(&l, COLL_DIM_DP, 37, (int[]){33, 37, 41, 45}, 4);
    expect_group(&l, COLL_DIM_PP, 63, (int[]){15, 31, 47, 63}, 4);
    expect_group(&l, COLL_DIM_DP, 0, (int[]){0, 4, 8, 12}, 4);
}

/* Other orders. pp-tp-dp, tp 2 pp 2 dp 2: rank = pp + 2 (tp + 2 dp); rank 5 has pp 1, tp 0,
 * dp 1. dp-tp-pp, tp 3 pp 2 dp 2: rank = dp + 2 (tp + 3 pp); rank 7 has dp 1, tp 0, pp 1. */
static void test_other_orders(void **state)
{
    coll_layout_t a = layout(2, 2, 2, "pp-tp-dp"), b = layout(3, 2, 2, "dp-tp-pp");
    coll_layout_t d = layout(2, 4, 8, "dp-pp-tp");

    (void)state;
    expect_group(&a, COLL_DIM_TP, 5, (int[]){5, 7}, 2);
    expect_group(&a, COLL_DIM_PP, 5, (int[]){4, 5}, 2);
    expect_group(&a, COLL_DIM_DP, 5, (int[]){1, 5}, 2);
    expect_group(&b, COLL_DIM_TP, 7, (int[]){7, 9, 11}, 3);
    expect_group(&b, COLL_DIM_PP, 7, (int[]){1, 7}, 2);
    expect_group(&b, COLL_DIM_DP, 7, (int[]){6, 7}, 2);
    /* rank = dp + 8 (pp + 4 tp): rank 45 = 5 + 8 (1 + 4 * 1). */
    expect_group(&d, COLL_DIM_TP, 45, (int[]){13, 45}, 2);
    expect_group(&d, COLL_DIM_PP, 45, (int[]){37, 45, 53, 61}, 4);
    expect_group(&d, COLL_DIM_DP, 45, (int[]){40, 41, 42, 43, 44, 45, 46, 47}, 8);
}

/* Every layout of 1..64 ranks in every order: each dimension's groups partition the ranks,
 * the colors number them 0..G-1, a member's place is its coordinate, and the coordinates
 * rebuild the rank. */
static void check_partition(const coll_layout_t *l, coll_dim_t dim)
{
    int n = coll_layout_size(l), size = l->size[dim], seen[64] = {0}, color_of[64];
    int groups = n / size;

    for (int g = 0; g < groups; g++) {
        color_of[g] = -1;
    }
    for (int r = 0; r < n; r++) {
        int ranks[64], color, c[COLL_DIM_COUNT];
        assert_int_equal(coll_layout_group(l, dim, r, ranks, &color), COLL_OK);
        assert_int_equal(coll_layout_coords(l, r, c), COLL_OK);
        assert_true(color >= 0 && color < groups);
        assert_int_equal(ranks[c[dim]], r);
        if (color_of[color] == -1) {
            color_of[color] = ranks[0];
            for (int k = 0; k < size; k++) {
                assert_int_equal(seen[ranks[k]]++, 0);
            }
        }
        assert_int_equal(color_of[color], ranks[0]);
    }
    for (int r = 0; r < n; r++) {
        assert_int_equal(seen[r], 1);
    }
}

static void test_every_layout_partitions(void **state)
{
    static const char *const orders[] = {"tp-dp-pp", "tp-pp-dp", "pp-tp-dp", "pp-dp-tp",
                                         "dp-tp-pp", "dp-pp-tp"};
    int checked = 0;

    (void)state;
    for (int n = 1; n <= 64; n++) {
        for (int tp = 1; tp <= n; tp++) {
            for (int pp = 1; pp * tp <= n; pp++) {
                if (n % (tp * pp) != 0) {
                    continue;
                }
                for (size_t o = 0; o < sizeof(orders) / sizeof(orders[0]); o++) {
                    coll_layout_t l = layout(tp, pp, n / (tp * pp), orders[o]);
                    for (int d = 0; d < COLL_DIM_COUNT; d++) {
                        check_partition(&l, (coll_dim_t)d);
                    }
                    checked++;
                }
            }
        }
    }
    assert_int_equal(checked, 6 * 796); /* ordered (tp, pp, dp) of 1..64 ranks: 796 */
}

/* tp 2 pp 2 dp 2 in Megatron's order: with 4 ranks per node tp and dp stay inside a node, pp
 * crosses; with 2 per node only tp stays; with 8 everything does. */
static void test_intra_node(void **state)
{
    coll_layout_t l = layout(2, 2, 2, NULL), p = layout(2, 2, 2, "pp-tp-dp");

    (void)state;
    assert_int_equal(coll_layout_intra_node(&l, COLL_DIM_TP, 4), 1);
    assert_int_equal(coll_layout_intra_node(&l, COLL_DIM_DP, 4), 1);
    assert_int_equal(coll_layout_intra_node(&l, COLL_DIM_PP, 4), 0);
    assert_int_equal(coll_layout_intra_node(&l, COLL_DIM_TP, 2), 1);
    assert_int_equal(coll_layout_intra_node(&l, COLL_DIM_DP, 2), 0);
    assert_int_equal(coll_layout_intra_node(&l, COLL_DIM_PP, 8), 1);
    assert_int_equal(coll_layout_intra_node(&p, COLL_DIM_PP, 2), 1);
    assert_int_equal(coll_layout_intra_node(&p, COLL_DIM_TP, 2), 0);
    assert_int_equal(coll_layout_intra_node(&l, COLL_DIM_TP, 0), 0);
}

static void test_bad_layouts(void **state)
{
    coll_layout_t l = layout(1, 1, 1, NULL);
    int c[COLL_DIM_COUNT];

    (void)state;
    assert_int_equal(coll_layout_init(&l, 0, 1, 1, NULL), COLL_ERR_INVALID);
    assert_int_equal(coll_layout_init(&l, 1, 1, -2, NULL), COLL_ERR_INVALID);
    assert_int_equal(coll_layout_init(&l, 2048, 1024, 2, NULL), COLL_ERR_INVALID);
    assert_int_equal(coll_layout_init(&l, 2, 2, 2, "tp-tp-pp"), COLL_ERR_INVALID);
    assert_int_equal(coll_layout_init(&l, 2, 2, 2, "tp-dp"), COLL_ERR_INVALID);
    assert_int_equal(coll_layout_init(&l, 2, 2, 2, "tp_dp_pp"), COLL_ERR_INVALID);
    assert_int_equal(coll_layout_init(&l, 2, 2, 2, "tp-dp-pq"), COLL_ERR_INVALID);
    assert_int_equal(coll_layout_size(&l), 1); /* unchanged by the refusals */
    assert_int_equal(coll_layout_coords(&l, 1, c), COLL_ERR_INVALID);
    assert_int_equal(coll_layout_group(&l, COLL_DIM_COUNT, 0, NULL, NULL), COLL_ERR_INVALID);
}

/* ---- split plans ---------------------------------------------------------------------------- */

typedef struct {
    coll__split_t p;
    uint32_t members[64];
} plan_t;

static plan_t plan(const coll__split_entry_t *e, uint32_t n, uint32_t nodes, uint32_t me)
{
    plan_t out;
    char err[256];

    memset(&out, 0, sizeof(out));
    assert_int_equal(coll__split_plan(e, n, nodes, me, out.members, &out.p, err, sizeof(err)),
                     COLL_OK);
    return out;
}

/* 8 ranks on 2 nodes of 4 (rank r on node r / 4), colors and keys given, next ids 1. */
static void entries(coll__split_entry_t *e, const int *colors, const int *keys)
{
    for (int r = 0; r < 8; r++) {
        e[r] = (coll__split_entry_t){colors[r], keys ? keys[r] : 0, (uint32_t)r / 4, 1};
    }
}

/* tp groups of 2: two groups on each node, none across: ids 1, 2 on node 0 and again on 1. */
static void test_split_ids_per_node(void **state)
{
    coll__split_entry_t e[8];
    uint32_t want_id[4] = {1, 2, 1, 2};

    (void)state;
    entries(e, (int[]){0, 0, 1, 1, 2, 2, 3, 3}, NULL);
    for (uint32_t r = 0; r < 8; r++) {
        plan_t p = plan(e, 8, 2, r);
        assert_int_equal(p.p.group, want_id[r / 2]);
        assert_int_equal(p.p.size, 2);
        assert_int_equal(p.p.rank, r % 2);
        assert_int_equal(p.members[0], r / 2 * 2);
        assert_int_equal(p.p.first_group, 1);
        assert_int_equal(p.p.last_group, 2);
        assert_int_equal(p.p.ngroups, 4);
    }
}

/* Groups that span both nodes all share them: distinct ids. Keys reverse the order; ties go by
 * parent rank; the largest reported next id is the base. */
static void test_split_ids_across_nodes(void **state)
{
    coll__split_entry_t e[8];
    plan_t p;

    (void)state;
    entries(e, (int[]){0, 1, 2, 3, 0, 1, 2, 3}, (int[]){5, 5, 5, 5, 1, 1, 1, 1});
    e[6].next_group = 40;
    p = plan(e, 8, 2, 4);
    assert_int_equal(p.p.first_group, 40);
    assert_int_equal(p.p.group, 40);
    assert_int_equal(p.p.last_group, 43);
    assert_int_equal(p.p.rank, 0); /* key 1 before rank 0's key 5 */
    assert_int_equal(p.members[0], 4);
    assert_int_equal(p.members[1], 0);
    p = plan(e, 8, 2, 3);
    assert_int_equal(p.p.group, 43);
    entries(e, (int[]){0, 0, 0, 0, 0, 0, 0, 0}, (int[]){1, 0, 1, 0, 1, 0, 1, 0});
    p = plan(e, 8, 2, 0);
    assert_int_equal(p.p.size, 8);
    assert_int_equal(p.p.rank, 4); /* keys 0 of ranks 1, 3, 5, 7 first, then 0 */
    for (int k = 0; k < 8; k++) {
        assert_int_equal(p.members[k], k < 4 ? 2 * k + 1 : 2 * (k - 4));
    }
}

/* A group on node 0, one across both nodes, one on node 1: the third reuses the first's id. */
static void test_split_ids_greedy(void **state)
{
    coll__split_entry_t e[8];

    (void)state;
    entries(e, (int[]){7, 7, 8, COLL_UNDEFINED, 8, 9, 9, COLL_UNDEFINED}, NULL);
    assert_int_equal(plan(e, 8, 2, 0).p.group, 1);
    assert_int_equal(plan(e, 8, 2, 2).p.group, 2);
    assert_int_equal(plan(e, 8, 2, 5).p.group, 1);
    assert_int_equal(plan(e, 8, 2, 3).p.group, 0);
    assert_int_equal(plan(e, 8, 2, 3).p.size, 0);
    assert_int_equal(plan(e, 8, 2, 3).p.ngroups, 3);
    assert_int_equal(plan(e, 8, 2, 3).p.last_group, 2);
}

static void test_split_refusals(void **state)
{
    coll__split_entry_t e[8];
    uint32_t members[8];
    coll__split_t p;
    char err[256] = "";

    (void)state;
    entries(e, (int[]){0, 1, 2, 3, 4, 5, 6, 7}, NULL);
    e[0].next_group = COLL_MAX_GROUP_ID - 2; /* 4 groups per node need 4 ids: 4093 .. 4096 */
    assert_int_equal(coll__split_plan(e, 8, 2, 0, members, &p, err, sizeof(err)),
                     COLL_ERR_NOMEM);
    assert_non_null(strstr(err, "used up"));
    e[0].next_group = 1;
    e[5].node = 2;
    assert_int_equal(coll__split_plan(e, 8, 2, 0, members, &p, err, sizeof(err)),
                     COLL_ERR_PROTOCOL);
    e[5].node = 1;
    e[5].color = -2;
    assert_int_equal(coll__split_plan(e, 8, 2, 0, members, &p, err, sizeof(err)),
                     COLL_ERR_PROTOCOL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_megatron_docstring),
        cmocka_unit_test(test_64_ranks),
        cmocka_unit_test(test_other_orders),
        cmocka_unit_test(test_every_layout_partitions),
        cmocka_unit_test(test_intra_node),
        cmocka_unit_test(test_bad_layouts),
        cmocka_unit_test(test_split_ids_per_node),
        cmocka_unit_test(test_split_ids_across_nodes),
        cmocka_unit_test(test_split_ids_greedy),
        cmocka_unit_test(test_split_refusals),
    };
    return cmocka_run_group_tests_name("layout", tests, NULL, NULL);
}
