/*
 * The rules of compression in the engine, over the fake net layer (fake_net.h):
 *
 *   agreement: a node asking for another method or another TopK ratio fails the operation on
 *     every rank with COLL_ERR_MISMATCH (the larger messages truncated, as UCX reports them);
 *   non-finite gradients: a NaN on one rank fails that operation on every rank with
 *     COLL_ERR_INVALID, outputs untouched, every node's residual unchanged; the job goes on;
 *   resets: a bucket whose count or layout changes starts over (counted), its result then the
 *     same as a fresh job's;
 *   warm-up: the first operations of a bucket run uncompressed (exact, by the ring);
 *   fallbacks: int32, max, PowerSGD without shapes or without a matrix worth compressing run
 *     uncompressed and exact, counted per reason;
 *   layouts: a fingerprint registered again with other shapes is refused; a count that is not
 *     the layout's fails the operation on every rank;
 *   a bucket in flight twice, a residual that does not fit the pool: the job fails;
 *   accounting: the bytes each node sent and the uncompressed ring's, per operation;
 *   auto: node 0's choice, made from its own link estimate, reaches every node and runs at
 *     the bucket's next operation everywhere; a late peer does not make the link look slow.
 */
#include <time.h>

#include "codec_ref.h"

#include "kernels/cpu/topk.h"

static void expect_sum(const cbufs_t *b, uint32_t t, int is_int)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            for (uint64_t i = 0; i < b->count; i++) {
                double want = 0.0, got;
                for (uint32_t r = 0; r < w.nnodes * w.nlocal; r++) {
                    want += is_int ? (double)(int32_t)(ref_input(r, t, i) * 64)
                                   : ref_input(r, t, i);
                }
                got = is_int ? ((int32_t *)b->recv[n][l])[i] : ((float *)b->recv[n][l])[i];
                if (got != want) {
                    fail_msg("node %u local %u element %llu: %g, expected %g", n, l,
                             (unsigned long long)i, got, want);
                }
            }
        }
    }
}

static void test_mismatch(void **state)
{
    cbufs_t b;
    csub_t c = {1, COLL_FLOAT32, COLL_SUM, "topk:0.01", 0, 0};

    world_init(3, 1);
    bufs_alloc(&b, 1000, sizeof(float));
    bufs_fill(&b, 0);
    submit_all_c(&b, &c, 1, "onebit");
    expect_all(1, COLL_ERR_MISMATCH);
    fake_net_free(&w);

    world_init(3, 1);
    bufs_alloc(&b, 4000, sizeof(float));
    bufs_fill(&b, 0);
    submit_all_c(&b, &c, 2, "topk:0.02"); /* twice the pairs: truncated where they arrive */
    expect_all(1, COLL_ERR_MISMATCH);
    fake_net_free(&w);
}

static void test_nan(void **state)
{
    cbufs_t b;
    float before[3][1000];

    world_init(3, 2);
    bufs_alloc(&b, 1000, sizeof(float));
    for (uint32_t t = 0; t < 3; t++) {
        csub_t c = {10 + t, COLL_FLOAT32, COLL_AVG, "onebit", 4, 0};
        bufs_fill(&b, t);
        if (t == 1) {
            ((float *)b.send[1][1])[500] = NAN;
            for (uint32_t n = 0; n < 3; n++) {
                memcpy(before[n], residual_of(n, 4), sizeof(before[n]));
            }
        }
        submit_all_c(&b, &c, -1, NULL);
        expect_all(c.key, t == 1 ? COLL_ERR_INVALID : COLL_OK);
        for (uint32_t n = 0; t == 1 && n < 3; n++) {
            assert_memory_equal(before[n], residual_of(n, 4), sizeof(before[n]));
            assert_true(((float *)b.recv[n][0])[7] == -1000.0f); /* untouched */
            assert_int_equal(w.job[n].state, COLL_JOB_READY);
        }
        if (t == 2) {
            assert_memory_not_equal(before[0], residual_of(0, 4), sizeof(before[0]));
        }
    }
    assert_int_equal(w.job[0].engine.codec->nonfinite, 1);
    fake_net_free(&w);
}

/* Two steps on the bucket, then a changed layout: the third step equals a fresh job's. */
static void test_reset(void **state)
{
    static const uint64_t a[] = {20, 30, 30, 1}, bshape[] = {30, 20, 30, 1};
    float fresh[630];
    cbufs_t b;

    world_init(2, 2);
    bufs_alloc(&b, 630, sizeof(float));
    register_layout(21, bshape, 2);
    bufs_fill(&b, 9);
    submit_all_c(&b, &(csub_t){1, COLL_FLOAT32, COLL_SUM, "powersgd:2", 8, 21}, -1, NULL);
    expect_all(1, COLL_OK);
    memcpy(fresh, b.recv[0][0], sizeof(fresh));
    fake_net_free(&w);

    world_init(2, 2);
    bufs_alloc(&b, 630, sizeof(float));
    register_layout(20, a, 2);
    register_layout(21, bshape, 2);
    for (uint32_t t = 0; t < 3; t++) {
        csub_t c = {30 + t, COLL_FLOAT32, COLL_SUM, "powersgd:2", 8, t < 2 ? 20 : 21};
        bufs_fill(&b, t < 2 ? t : 9);
        submit_all_c(&b, &c, -1, NULL);
        expect_all(c.key, COLL_OK);
    }
    assert_memory_equal(fresh, b.recv[1][1], sizeof(fresh));
    assert_int_equal(slot_of(0, 8)->resets, 1);
    assert_int_equal(w.job[1].engine.codec->resets, 1);
    fake_net_free(&w);
}

static void test_warmup(void **state)
{
    cbufs_t b;

    world_init(2, 2);
    bufs_alloc(&b, 8192, sizeof(float));
    for (uint32_t t = 0; t < 3; t++) {
        csub_t c = {40 + t, COLL_FLOAT32, COLL_SUM, "topk:0.01,warmup=2", 1, 0};
        bufs_fill(&b, t);
        submit_all_c(&b, &c, -1, NULL);
        assert_string_equal(expect_all(c.key, COLL_OK), t < 2 ? "ring" : "topk");
        if (t < 2) {
            expect_sum(&b, t, 0);
        }
    }
    fake_net_free(&w);
}

static void fallback_case(uint32_t dtype, uint32_t op, const char *spec, uint64_t layout,
                          coll_fallback_t reason)
{
    static const uint64_t vectors[] = {8000, 1, 192, 1}, wide[] = {3, 100, 7892, 1};
    csub_t c = {50, dtype, op, spec, 2, layout};
    cbufs_t b;

    world_init(3, 1);
    bufs_alloc(&b, 8192, 4); /* above the fake's recursive-doubling limit: the ring */
    register_layout(61, vectors, 2);
    register_layout(62, wide, 2);
    bufs_fill(&b, 0);
    for (uint32_t n = 0; dtype == COLL_INT32 && n < 3; n++) {
        for (uint64_t i = 0; i < 8192; i++) {
            ((int32_t *)b.send[n][0])[i] = (int32_t)(ref_input(n, 0, i) * 64);
        }
    }
    submit_all_c(&b, &c, -1, NULL);
    assert_string_equal(expect_all(50, COLL_OK), "ring");
    if (op == COLL_SUM) {
        expect_sum(&b, 0, dtype == COLL_INT32);
    }
    assert_int_equal(w.job[2].engine.codec->fallbacks[reason], 1);
    fake_net_free(&w);
}

static void test_fallbacks(void **state)
{
    fallback_case(COLL_INT32, COLL_SUM, "topk:0.01", 0, COLL_FALLBACK_DTYPE);
    fallback_case(COLL_FLOAT32, COLL_MAX, "onebit", 0, COLL_FALLBACK_OP);
    fallback_case(COLL_INT32, COLL_BXOR, "topk:0.01", 0, COLL_FALLBACK_OP);
    fallback_case(COLL_FLOAT32, COLL_SUM, "powersgd:2", 0, COLL_FALLBACK_SHAPES);
    fallback_case(COLL_FLOAT32, COLL_SUM, "powersgd:2", 61, COLL_FALLBACK_NOMATRIX);
    fallback_case(COLL_FLOAT32, COLL_SUM, "powersgd:4", 62, COLL_FALLBACK_NOMATRIX);
}

static void test_layouts(void **state)
{
    static const uint64_t a[] = {10, 10}, other[] = {5, 20};
    Coll__Wire__Layout l = COLL__WIRE__LAYOUT__INIT;
    cbufs_t b;

    world_init(2, 1);
    register_layout(5, a, 1);
    register_layout(5, a, 1); /* again, the same: fine */
    l.layout = 5;
    l.n_shape = 2;
    l.shape = (uint64_t *)other;
    coll_codec_layout_register(&w.job[0], &w.sess[0][0], &l);
    assert_int_equal(w.layout_status, COLL_ERR_INVALID);
    bufs_alloc(&b, 99, sizeof(float));
    bufs_fill(&b, 0);
    submit_all_c(&b, &(csub_t){3, COLL_FLOAT32, COLL_SUM, "powersgd:1", 0, 5}, -1, NULL);
    expect_all(3, COLL_ERR_INVALID);
    assert_int_equal(w.job[0].state, COLL_JOB_READY);
    fake_net_free(&w);
}

static void test_busy_and_pool(void **state)
{
    cbufs_t b;

    world_init(2, 1);
    bufs_alloc(&b, 1000, sizeof(float));
    submit_one(&b, &(csub_t){1, COLL_FLOAT32, COLL_SUM, "fp16", 6, 0}, 0, 0, "fp16");
    submit_one(&b, &(csub_t){2, COLL_FLOAT32, COLL_SUM, "fp16", 6, 0}, 0, 0, "fp16");
    fake_net_run(&w);
    assert_int_equal(fake_net_done(&w, 0, 0, 2)->status, COLL_ERR_INVALID);
    assert_int_equal(w.job[0].state, COLL_JOB_FAILED);
    fake_net_free(&w);

    world_init(2, 1);
    bufs_alloc(&b, (POOL - (1u << 20)) / 8, sizeof(float)); /* the residual cannot fit too */
    submit_all_c(&b, &(csub_t){1, COLL_FLOAT32, COLL_SUM, "topk:0.01", 0, 0}, -1, NULL);
    expect_all(1, COLL_ERR_POOL_FULL);
    fake_net_free(&w);
}

static void test_accounting(void **state)
{
    size_t k = coll_topk_k(3000, 0.01);
    cbufs_t b;
    const fake_done_t *d;

    world_init(3, 2);
    bufs_alloc(&b, 3000, sizeof(float));
    bufs_fill(&b, 0);
    submit_all_c(&b, &(csub_t){7, COLL_FLOAT32, COLL_AVG, "topk:0.01", 0, 0}, -1, NULL);
    expect_all(7, COLL_OK);
    d = fake_net_done(&w, 1, 1, 7);
    assert_int_equal(d->wire_bytes, 2 * (COLL_CX_PREFIX + 16 + 6 * k)); /* 2-byte indices */
    assert_int_equal(d->dense_bytes, 2 * 3000 * 8 / 3);
    assert_int_equal(w.job[1].engine.codec->acct[COLL_COMPRESS_TOPK].ops, 1);
    fake_net_free(&w);
}

/* The name of the method a cspec runs ("ring" for none: these buckets are ring-sized). */
static const char *run_name(uint64_t spec)
{
    coll_compression_t z;
    coll_cspec_unpack(spec, &z);
    return spec == 0 ? "ring" : coll_compress_method_name(z.method);
}

static void test_auto(void **state)
{
    uint64_t chosen = 0;
    cbufs_t b;

    world_init(3, 1);
    bufs_alloc(&b, 65536, sizeof(float));
    for (uint32_t t = 0; t < 4; t++) {
        csub_t c = {70 + t, COLL_FLOAT32, COLL_AVG, "auto", 1, 0};
        bufs_fill(&b, t);
        submit_all_c(&b, &c, -1, NULL);
        expect_all(c.key, COLL_OK);
        /* What node 0 chose during the last step runs now, on every node. */
        for (uint32_t n = 0; n < 3; n++) {
            assert_string_equal(fake_net_done(&w, n, 0, c.key)->algo, run_name(chosen));
            assert_int_equal(slot_of(n, 1)->auto_next, slot_of(0, 1)->auto_next);
        }
        chosen = slot_of(0, 1)->auto_next;
        assert_true(t == 0 || slot_of(0, 1)->auto_why[0] != '\0');
        if (t == 1) { /* a slow link, on node 0 only: it alone decides */
            coll_codec_job_t *cj = w.job[0].engine.codec;
            for (int i = 0; i < COLL_EST_SAMPLES; i++) {
                cj->est.bw[i] = 1e6;
            }
            cj->est.nbw = COLL_EST_SAMPLES;
            w.job[1].engine.codec->est.bw[0] = 1e12;
        }
        if (t == 2) {
            assert_true(chosen != 0); /* at 1 MB/s, 256 KiB buckets are compressed */
        }
    }
    fake_net_free(&w);
}

/* A link sample is timed from the other node's descriptor: node 1 arriving 200 ms late is not a
 * 1.3 MB/s link (262,144 bytes sent, and the fake net moves them at once). */
static void test_auto_late_peer(void **state)
{
    const struct timespec late = {0, 200 * 1000 * 1000};
    csub_t c = {80, COLL_FLOAT32, COLL_AVG, "auto", 1, 0};
    cbufs_t b;

    world_init(2, 1);
    bufs_alloc(&b, 65536, sizeof(float)); /* the ring sends 4 bytes per element: 256 KiB */
    bufs_fill(&b, 0);
    submit_one(&b, &c, 0, 0, c.spec);
    nanosleep(&late, NULL);
    submit_one(&b, &c, 1, 0, c.spec);
    fake_net_run(&w);
    expect_all(c.key, COLL_OK);
    assert_int_equal(fake_net_done(&w, 0, 0, 80)->wire_bytes, 262144);
    assert_true(coll__est_bandwidth(&w.job[0].engine.codec->est) > 262144 / 0.05);
    fake_net_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mismatch),    cmocka_unit_test(test_nan),
        cmocka_unit_test(test_reset),       cmocka_unit_test(test_warmup),
        cmocka_unit_test(test_fallbacks),   cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_busy_and_pool), cmocka_unit_test(test_accounting),
        cmocka_unit_test(test_auto),        cmocka_unit_test(test_auto_late_peer),
    };
    return cmocka_run_group_tests_name("codec_rules", tests, NULL, NULL);
}
