/* Unit tests of the cost model (engine/cost.h): each formula against a value worked out by hand
 * here with round constants, the choice of the fastest exact algorithm, and the refusals. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "engine/cost.h"

#define US 1e-6
#define KIB 1024u
#define MIB (1024u * 1024u)

/* Round constants for the hand computations: alpha 10 us, beta 1 ns/B, gamma 0.5 ns/B,
 * alpha_op 20 us, alpha_shm 2 us, beta_mem 0.25 ns/B, alpha_direct 5 us. */
static coll_cost_params_t hand(void)
{
    return (coll_cost_params_t){
        .alpha = 10 * US,      .beta = 1e-9,          .gamma = 0.5e-9,
        .alpha_op = 20 * US,   .alpha_shm = 2 * US,   .beta_mem = 0.25e-9,
        .alpha_direct = 5 * US, .codec_cast = 1e-9,   .codec_onebit = 2e-9,
        .codec_topk = 4e-9,    .codec_flop = 0.1e-9,  .topk_ratio = 0.01,
        .powersgd_rank = 2,    .powersgd_rows = 0,    .knomial_radix = 4,
        .segment_bytes = 256 * KIB, .rd_max_bytes = 256 * KIB - 128,
    };
}

static coll_cost_result_t predict(coll_kind_t kind, uint64_t bytes, uint32_t n, uint32_t l)
{
    coll_cost_params_t p = hand();
    coll_cost_result_t r;
    assert_int_equal(coll_cost_predict(&p, kind, bytes, n, l, COLL_COST_ALL, &r), COLL_OK);
    return r;
}

/* Equal to 1e-12 relative: the formulas are a few additions and products. */
static void near(double got, double want)
{
    if (fabs(got - want) > 1e-12 * fabs(want) + 1e-15) {
        fail_msg("got %.9g s, want %.9g s", got, want);
    }
}

static void test_ring_allreduce(void **state)
{
    (void)state;
    /* 1 MiB, 4 nodes x 1: chunk 262144 B; 2*3*(10 us + 262.144 us) + 3*262144*0.5 ns
     * = 1632.864 + 393.216 us; + alpha_op 20 us. */
    near(predict(COLL_KIND_ALLREDUCE, MIB, 4, 1).time[COLL_COST_RING], 2046.08 * US);
    /* 2 nodes x 2 ranks: 2*(10 + 524.288) + 524288*0.5 ns = 1330.72 us; the daemon's combine
     * and copy (2-1)*1 MiB*(0.5 + 0.25) ns = 786.432 us; + 20 us. */
    near(predict(COLL_KIND_ALLREDUCE, MIB, 2, 2).time[COLL_COST_RING], 2137.152 * US);
}

static void test_rd(void **state)
{
    (void)state;
    /* 4 KiB, 4 nodes: 2 rounds of 10 + 4.096 + 2.048 us, + 20 us. */
    near(predict(COLL_KIND_ALLREDUCE, 4 * KIB, 4, 1).time[COLL_COST_RD], 52.288 * US);
    /* 3 nodes: 1 round (16.144 us) and the fold in and out of the third node:
     * 2*10 + 2*4.096 + 2.048 = 30.24 us; + 20 us. */
    near(predict(COLL_KIND_ALLREDUCE, 4 * KIB, 3, 1).time[COLL_COST_RD], 66.384 * US);
    /* Above one segment recursive doubling does not run: the ring is the best then. */
    coll_cost_result_t r = predict(COLL_KIND_ALLREDUCE, MIB, 4, 1);
    assert_true(r.time[COLL_COST_RD] < 0);
    assert_true(r.time[COLL_COST_NODE_RD] < 0);
}

static void test_node_and_direct(void **state)
{
    (void)state;
    coll_cost_result_t r = predict(COLL_KIND_ALLREDUCE, 4 * KIB, 4, 2);
    /* node_in 2 + 2048*0.5 ns = 3.024 us; rd 32.288 us; node_out 2 + 4096*0.25 ns = 3.024 us;
     * + alpha_op 20 us. */
    near(r.time[COLL_COST_NODE_RD], 58.336 * US);
    /* The same without alpha_op and with 5 us per round instead of 10: 3.024 + 2*(5 + 6.144)
     * + 3.024. */
    near(r.time[COLL_COST_DIRECT], 28.336 * US);
    /* node_ring: 3.024 + 2*3*(10 + 1.024) + 3*1024*0.5 ns + 3.024 + 20 = 93.728 us. */
    near(r.time[COLL_COST_NODE_RING], 93.728 * US);
}

static void test_knomial_chain_barrier_bruck(void **state)
{
    (void)state;
    /* Radix 4, 16 nodes: 2 rounds of 10 us + 3*4096*(1 + 0.5) ns = 28.432 us; + 20 us. */
    near(predict(COLL_KIND_ALLREDUCE, 4 * KIB, 16, 1).time[COLL_COST_KNOMIAL], 76.864 * US);
    /* Broadcast 1 MiB along 4 nodes in 256 KiB segments: 4-2+4 = 6 steps of 10 + 262.144 us;
     * + 20 us. */
    near(predict(COLL_KIND_BROADCAST, MIB, 4, 1).time[COLL_COST_CHAIN], 1652.864 * US);
    /* Reduce: the same steps with 262144*0.5 ns more each: 6*403.216 + 20. */
    near(predict(COLL_KIND_REDUCE, MIB, 4, 1).time[COLL_COST_CHAIN], 2439.296 * US);
    /* Barrier of 5 nodes: ceil(log2 5) = 3 rounds of 10 us; + 20 us. */
    near(predict(COLL_KIND_BARRIER, 0, 5, 1).time[COLL_COST_DISSEMINATION], 50 * US);
    /* All-gather of 1e6 B on 5 nodes: 3*10 us + 4/5*1e6*1 ns; + 20 us. */
    near(predict(COLL_KIND_ALLGATHER, 1000000, 5, 1).time[COLL_COST_BRUCK], 850 * US);
    /* The ring's all-gather: 4*(10 + 200) us + 20 us. */
    near(predict(COLL_KIND_ALLGATHER, 1000000, 5, 1).time[COLL_COST_RING], 860 * US);
}

static void test_compressed(void **state)
{
    (void)state;
    coll_cost_result_t r = predict(COLL_KIND_ALLREDUCE, MIB, 4, 1);
    /* fp16: 262144 elements, chunks of 65536 -> messages of 160 + 131072 B; 2 rounds of
     * 10 + 3*131232 ns = 403.696 us; the server's sums 262144*3*0.5 ns = 393.216 us; the codec
     * 262144*1 ns; + 20 us. */
    near(r.time[COLL_COST_FP16], 1482.752 * US);
    /* 1-bit: messages of 160 + 65536/8 = 8352 B: 2*(10 + 3*8.352) + 393.216 + 262144*2 ns
     * + 20 us. */
    near(r.time[COLL_COST_ONEBIT], 1007.616 * US);
    /* TopK 1 %: k = ceil(2621.44) = 2622, 3-byte indices: messages of 160 + 7*2622 = 18514 B,
     * one round 10 + 3*18.514 = 65.542 us; selection 262144*4 ns = 1048.576 us; the sums
     * 4*2622*4*0.5 ns = 20.976 us; + 20 us. */
    near(r.time[COLL_COST_TOPK], 1155.094 * US);
    /* PowerSGD rank 2, square 512 x 512: P and Q 512*2*4 = 4096 B each, allreduced in chunks of
     * 1024 B: 2 factors x 2 rounds of 10 + 3*(160 + 1024) ns = 13.552 us each; their sums
     * 3/4*8192*0.5 ns = 3.072 us; 6*262144*2 flops*0.1 ns = 314.5728 us; the residual
     * 1 MiB*0.5 ns = 524.288 us; + 20 us. */
    near(r.time[COLL_COST_POWERSGD], 916.1408 * US);
    /* An empty buffer: PowerSGD's matrix has one row, not 0 (0/0 columns gave NaN). */
    assert_true(isfinite(predict(COLL_KIND_ALLREDUCE, 0, 2, 1).time[COLL_COST_POWERSGD]));
    /* Lossy ones are never the best. */
    assert_false(coll_cost_algo_lossy(r.best));
}

static void test_best(void **state)
{
    (void)state;
    coll_cost_params_t p = hand();
    coll_cost_result_t r;
    /* 4 KiB on 4 nodes: direct 27.312 us beats knomial (one round: 48.432 us), rd 52.288,
     * node_rd 57.312 and the ring 87.68. */
    assert_int_equal(coll_cost_predict(&p, COLL_KIND_ALLREDUCE, 4 * KIB, 4, 1, COLL_COST_ALL,
                                       &r), COLL_OK);
    assert_int_equal(r.best, COLL_COST_DIRECT);
    near(r.time[COLL_COST_KNOMIAL], 48.432 * US);
    near(r.time[COLL_COST_RING], 87.68 * US);
    /* Among what the daemon runs today. */
    assert_int_equal(coll_cost_predict(&p, COLL_KIND_ALLREDUCE, 4 * KIB, 4, 1,
                                       1u << COLL_COST_RING | 1u << COLL_COST_RD, &r), COLL_OK);
    assert_int_equal(r.best, COLL_COST_RD);
    assert_true(r.time[COLL_COST_DIRECT] < 0);
    /* 64 MiB on 8 nodes: the ring. */
    assert_int_equal(coll_cost_predict(&p, COLL_KIND_ALLREDUCE, 64 * MIB, 8, 1,
                                       1u << COLL_COST_RING | 1u << COLL_COST_RD, &r), COLL_OK);
    assert_int_equal(r.best, COLL_COST_RING);
}

/* The CPU bound (cost.h): the round constants with cpu_msg 10 us, cpu_byte 1 ns/B, cpu_op 5 us
 * on 2 CPUs every node shares, from the file's KEY = VALUE lines as bench/calibrate.sh writes
 * them. */
static coll_cost_params_t hand_cpu(uint32_t cpus, uint32_t shared)
{
    coll_cost_params_t p = hand();
    char err[200], line[64];
    const char *keys[] = {"cpu_msg = 10e-6", "cpu_byte=1e-9", " cpu_op = 5e-6 "};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        assert_int_equal(coll_cost_params_set(&p, keys[i], err, sizeof(err)), COLL_OK);
    }
    snprintf(line, sizeof(line), "cpus = %u", cpus);
    assert_int_equal(coll_cost_params_set(&p, line, err, sizeof(err)), COLL_OK);
    snprintf(line, sizeof(line), "cpus_shared = %u", shared);
    assert_int_equal(coll_cost_params_set(&p, line, err, sizeof(err)), COLL_OK);
    return p;
}

static double predict_cpu(uint32_t cpus, uint32_t shared, coll_kind_t kind, uint64_t bytes,
                          uint32_t n, uint32_t l, coll_cost_algo_t algo)
{
    coll_cost_params_t p = hand_cpu(cpus, shared);
    coll_cost_result_t r;
    assert_int_equal(coll_cost_predict(&p, kind, bytes, n, l, COLL_COST_ALL, &r), COLL_OK);
    return r.time[algo];
}

static void test_cpu_bound(void **state)
{
    (void)state;
    /* rd, 4 KiB, 4 x 1: a node sends 2 messages of 4096 B and reduces 8192 B, one hand-off:
     * 2*10 + 8.192 + 4.096 + 5 = 37.288 us of CPU; 4 nodes on 2 CPUs: 74.576 us, above the
     * path's 52.288. Each node on its own 2 CPUs: 18.644 us, so the path. */
    near(predict_cpu(2, 1, COLL_KIND_ALLREDUCE, 4 * KIB, 4, 1, COLL_COST_RD), 74.576 * US);
    near(predict_cpu(2, 0, COLL_KIND_ALLREDUCE, 4 * KIB, 4, 1, COLL_COST_RD), 52.288 * US);
    /* 3 nodes: 4 messages (2 in the round, 2 for the fold) and 3 x 4096 B reduced over 3
     * nodes: 13.333 + 5.461 + 2.048 + 5 = 25.843 us a node; on 1 shared CPU 77.528 us, above
     * the path's 66.384. */
    near(predict_cpu(1, 1, COLL_KIND_ALLREDUCE, 4 * KIB, 3, 1, COLL_COST_RD), 77.528 * US);
    /* The ring, 1 MiB, 4 x 1: 6 one-segment messages of 262144 B, 3 x 262144 B reduced:
     * 60 + 1572.864 + 393.216 + 5 = 2031.08 us; x 4 / 2. */
    near(predict_cpu(2, 1, COLL_KIND_ALLREDUCE, MIB, 4, 1, COLL_COST_RING), 4062.16 * US);
    /* 64 MiB on 2 x 1: chunks of 32 MiB in 128 segments, 2 steps: 256 messages; 64 MiB sent,
     * 32 MiB reduced: 2560 + 67108.864 + 16777.216 + 5 = 86451.08 us, above the path's
     * 83926.08. */
    near(predict_cpu(2, 1, COLL_KIND_ALLREDUCE, 64 * MIB, 2, 1, COLL_COST_RING), 86451.08 * US);
    /* node_rd, 4 KiB, 4 x 2: rd's 2 messages and sums (32.288 us), the ranks' slice
     * (2.048 us) and copies out (2 x 4096 x 0.25 ns), both ranks' hand-offs (10 us):
     * 46.384 us, x 4 / 2; the direct path the same (its leader still waits and is counted). */
    near(predict_cpu(2, 1, COLL_KIND_ALLREDUCE, 4 * KIB, 4, 2, COLL_COST_NODE_RD), 92.768 * US);
    near(predict_cpu(2, 1, COLL_KIND_ALLREDUCE, 4 * KIB, 4, 2, COLL_COST_DIRECT), 92.768 * US);
    /* A barrier of 4 x 2: 2 messages and 2 hand-offs a node: 30 us, x 4 / 2; the path 40 us. */
    near(predict_cpu(2, 1, COLL_KIND_BARRIER, 0, 4, 2, COLL_COST_DISSEMINATION), 60 * US);

    coll_cost_params_t p = hand_cpu(2, 2);
    coll_cost_result_t r;
    char err[200];
    assert_int_equal(coll_cost_predict(&p, COLL_KIND_ALLREDUCE, 4096, 2, 1, COLL_COST_ALL, &r),
                     COLL_ERR_INVALID);
    p = hand_cpu(2, 1);
    assert_int_equal(coll_cost_params_set(&p, "cpu_byte = -1e-9", err, sizeof(err)),
                     COLL_ERR_INVALID);
    assert_int_equal(coll_cost_params_set(&p, "cpus = 1.5", err, sizeof(err)),
                     COLL_ERR_INVALID);
}

static void test_refusals(void **state)
{
    (void)state;
    coll_cost_params_t p = hand();
    coll_cost_result_t r = {.best = COLL_COST_RING};
    assert_int_equal(coll_cost_predict(&p, COLL_KIND_ALLREDUCE, 4096, 0, 1, COLL_COST_ALL, &r),
                     COLL_ERR_INVALID);
    assert_int_equal(coll_cost_predict(&p, COLL_KIND_ALLREDUCE, 4096, 2, 0, COLL_COST_ALL, &r),
                     COLL_ERR_INVALID);
    assert_int_equal(coll_cost_predict(&p, COLL_KIND_SEND, 4096, 2, 1, COLL_COST_ALL, &r),
                     COLL_ERR_INVALID);
    /* Nothing allowed, or only lossy algorithms: no exact one to name. */
    assert_int_equal(coll_cost_predict(&p, COLL_KIND_ALLREDUCE, 4096, 2, 1, 0, &r),
                     COLL_ERR_UNSUPPORTED);
    assert_int_equal(coll_cost_predict(&p, COLL_KIND_ALLREDUCE, 4096, 2, 1,
                                       1u << COLL_COST_TOPK, &r), COLL_ERR_UNSUPPORTED);
    p.alpha = NAN;
    assert_int_equal(coll_cost_predict(&p, COLL_KIND_ALLREDUCE, 4096, 2, 1, COLL_COST_ALL, &r),
                     COLL_ERR_INVALID);
    p = hand();
    p.knomial_radix = 1;
    assert_int_equal(coll_cost_predict(&p, COLL_KIND_ALLREDUCE, 4096, 2, 1, COLL_COST_ALL, &r),
                     COLL_ERR_INVALID);
    p = hand();
    p.topk_ratio = 1.5;
    assert_int_equal(coll_cost_predict(&p, COLL_KIND_ALLREDUCE, 4096, 2, 1, COLL_COST_ALL, &r),
                     COLL_ERR_INVALID);
    /* The output is untouched by a refusal. */
    assert_int_equal(r.best, COLL_COST_RING);
    assert_string_equal(coll_cost_algo_name(COLL_COST_NODE_RD), "node_rd");
    assert_string_equal(coll_cost_algo_name(COLL_COST_NALGOS), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_allreduce),
        cmocka_unit_test(test_rd),
        cmocka_unit_test(test_node_and_direct),
        cmocka_unit_test(test_knomial_chain_barrier_bruck),
        cmocka_unit_test(test_compressed),
        cmocka_unit_test(test_best),
        cmocka_unit_test(test_cpu_bound),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests_name("cost", tests, NULL, NULL);
}
