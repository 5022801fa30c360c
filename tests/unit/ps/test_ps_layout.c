/*
 * Unit tests of the parameter service's shard layout (ps/shard.c): for many layer tables, node
 * counts and segment sizes, each node's chunk of each bucket is the ring's (coll_plan_chunk()),
 * its spans cover the chunk exactly once in position order, each inside one layer and one
 * segment, the segments' span ranges follow each other, the state offsets are the chunks'
 * prefix sums, and the nodes' shards together hold every parameter once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ps/internal.h"

static uint64_t rng = 12345;

static uint64_t next(uint64_t n)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (rng >> 33) % n;
}

/* One node's layout of @p nl random layers in random buckets. */
static void check_node(coll_ps_reg_layer_t *layers, uint32_t nl, uint32_t nb, uint32_t nodes,
                       uint32_t node, size_t seg, uint64_t *held)
{
    coll_job_t job = {.nnodes = nodes, .node_rank = node};
    coll_ps_job_t ps = {.job = &job, .layers = layers};
    uint64_t state = 0;

    job.params.segment_bytes = seg;
    ps.reg.num_layers = nl;
    ps.reg.num_buckets = nb;
    assert_int_equal(coll_ps_shard_cut(&ps), COLL_OK);
    for (uint32_t k = 0; k < nb; k++) {
        const ps_bucket_t *b = &ps.buckets[k];
        coll_range_t want = coll_plan_chunk(&b->plan, node);
        uint64_t at = b->chunk.off;
        assert_true(b->chunk.off == want.off && b->chunk.len == want.len);
        assert_int_equal(b->state_off, state);
        state += b->chunk.len;
        for (uint64_t j = 0; j < b->plan.nseg; j++) {
            coll_range_t s = coll_plan_segment(&b->plan, node, j);
            assert_true(b->seg_span[j] <= b->seg_span[j + 1]);
            for (uint32_t i = b->seg_span[j]; i < b->seg_span[j + 1]; i++) {
                const ps_span_t *sp = &b->spans[i];
                uint64_t lstart = 0;
                for (uint32_t l = 0; l < sp->layer; l++) {
                    lstart += layers[b->first_layer + l].count;
                }
                assert_int_equal(sp->off, at);
                assert_true(sp->len > 0 && sp->off >= s.off && sp->off + sp->len <= s.off + s.len);
                assert_true(sp->off >= lstart &&
                            sp->off + sp->len <= lstart + layers[b->first_layer + sp->layer].count);
                at += sp->len;
            }
        }
        assert_int_equal(b->seg_span[b->plan.nseg], b->nspans);
        assert_int_equal(at, b->chunk.off + b->chunk.len);
        held[k] += b->chunk.len;
    }
    assert_int_equal(ps.shard_elems, state);
    coll_ps_shard_free(&ps);
}

static void test_layouts(void **state)
{
    static const size_t segs[] = {64, 256, 1024, 1 << 18};
    (void)state;
    for (int round = 0; round < 300; round++) {
        uint32_t nl = 1 + (uint32_t)next(12), nb = 1, nodes = 1 + (uint32_t)next(5);
        coll_ps_reg_layer_t layers[12];
        uint64_t held[12] = {0}, counts[12] = {0};
        size_t seg = segs[next(4)];
        for (uint32_t i = 0; i < nl; i++) {
            nb += i > 0 && next(3) == 0;
            layers[i] = (coll_ps_reg_layer_t){1 + next(round % 3 ? 300 : 5000), 0, nb - 1};
            counts[nb - 1] += layers[i].count;
        }
        for (uint32_t n = 0; n < nodes; n++) {
            check_node(layers, nl, nb, nodes, n, seg, held);
        }
        for (uint32_t k = 0; k < nb; k++) {
            assert_int_equal(held[k], counts[k]);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_layouts)};
    return cmocka_run_group_tests_name("parameter service layout", tests, NULL, NULL);
}
