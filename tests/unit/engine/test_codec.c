/*
 * The compressed allreduce over the fake net layer (fake_net.h), every method against the
 * reference model of its documented algorithm (tests/model/compress_model.h, shared with the
 * integration test compress_check), over several steps so that the residuals carry over:
 * outputs, worker residuals and the two-sided codecs' server residuals. TopK exactly, fp16,
 * bf16 and 1-bit within 1e-6 of the largest result, PowerSGD within 1e-4 (float32 against the
 * model's double). Also: an exactly rank-2 bucket reconstructed to 1e-5 after two warm-started
 * steps, and the error-feedback identity through the engine: over 200 steps, the results +
 * every node's residual (+ the server residuals) == the inputs, within float32 rounding.
 *
 * Counts 1, N-1, N+1, 8N+1, 1000 and 4099 on 2x1, 3x2 and 5x1 nodes x local ranks.
 */
#include "codec_ref.h"

#include "../../model/compress_model.h"
#include "engine/plan.h"

#define STEPS 3
#define PSGD_LAYOUT 0x77

static float model_input(uint32_t rank, uint32_t step, uint64_t i, void *arg)
{
    (void)arg;
    return ref_input(rank, step, i);
}

/* ---- running the engine against the model ---------------------------------------------------- */

static void check_outputs(const cbufs_t *b, const double *want, double tol, const char *what)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            expect_close(what, n, b->recv[n][l], want, b->count, tol);
        }
    }
}

/* Every node's worker and server residual against the model's. */
static void check_residuals(const cm_t *m, uint64_t count, uint32_t bucket, double tol)
{
    double *want = malloc((count + 1) * sizeof(double));

    for (uint32_t n = 0; n < w.nnodes && count > 0; n++) {
        coll_slot_t *s = slot_of(n, bucket);
        uint64_t len;
        const float *e = cm_residual(m, n), *srv = cm_server_residual(m, n, &len);
        for (uint64_t i = 0; s->ef && i < count; i++) {
            want[i] = e[i];
        }
        if (s->ef) {
            expect_close("worker residual", n, residual_of(n, bucket), want, count, tol);
        }
        for (uint64_t i = 0; s->ef && i < len; i++) {
            want[i] = srv[i];
        }
        if (s->ef && len > 0) {
            expect_close("server residual", n, s->srv[s->cur], want, len, tol);
        }
    }
    free(want);
}

/* STEPS operations of @p spec on @p count elements, each checked against the model. */
static void run_case(uint32_t nodes, uint32_t nlocal, uint64_t count, int avg, const char *spec,
                     const uint64_t *shape, size_t nt, const char *algo)
{
    cm_t *m = cm_new(nodes, nlocal, count, avg, spec, "fake", 3, shape, nt);
    double *want = malloc((count + 1) * sizeof(double));
    char what[128];
    cbufs_t b;

    assert_non_null(m);
    world_init(nodes, nlocal);
    bufs_alloc(&b, count, sizeof(float));
    if (nt > 0) {
        register_layout(PSGD_LAYOUT, shape, nt);
    }
    for (uint32_t t = 0; t < STEPS; t++) {
        csub_t c = {100 + t, COLL_FLOAT32, avg ? COLL_AVG : COLL_SUM, spec, 3,
                    nt > 0 ? PSGD_LAYOUT : 0};
        double tol;
        bufs_fill(&b, t);
        submit_all_c(&b, &c, -1, NULL);
        assert_string_equal(expect_all(c.key, COLL_OK), algo);
        cm_step(m, t, model_input, NULL, want);
        tol = cm_rel_tolerance(m) * (max_abs(want, count) + 1e-30);
        snprintf(what, sizeof(what), "%s %ux%u count %llu step %u", spec, nodes, nlocal,
                 (unsigned long long)count, t);
        check_outputs(&b, want, tol, what);
        check_residuals(m, count, 3, tol + 1e-30);
    }
    cm_free(m);
    free(want);
    fake_net_free(&w);
}

static void run_counts(const char *spec, const char *algo)
{
    static const uint32_t cfg[][2] = {{2, 1}, {3, 2}, {5, 1}};
    for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
        uint32_t n = cfg[c][0];
        uint64_t counts[] = {1, n - 1, n + 1, 8 * n + 1, 1000, 4099};
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
            run_case(n, cfg[c][1], counts[k], k % 2, spec, NULL, 0, algo);
        }
    }
}

static void test_topk(void **state)
{
    run_counts("topk:0.01", "topk");
    run_counts("topk:0.25", "topk");
    run_case(3, 2, 1000, 0, "topk:0.05,noef", NULL, 0, "topk");
}

static void test_onebit(void **state)
{
    run_counts("onebit", "onebit");
}

static void test_fp16_bf16(void **state)
{
    run_counts("fp16", "fp16");
    run_counts("bf16", "bf16");
    run_case(2, 2, 1000, 1, "fp16,noef", NULL, 0, "fp16");
    run_case(2, 2, 1, 0, "bf16", NULL, 0, "bf16");
}

/* Matrices (compressed), a vector, a matrix too small to compress (2 x 40: min(n, m) <= r), a
 * scalar. */
static void test_powersgd(void **state)
{
    static const uint64_t shape[] = {16, 24, 7, 1, 33, 5, 2, 40, 10, 10, 1, 1};
    static const uint32_t cfg[][3] = {{2, 1, 2}, {3, 2, 2}, {5, 1, 2}, {2, 2, 4}, {3, 1, 1}};
    char spec[32];

    for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
        snprintf(spec, sizeof(spec), "powersgd:%u", cfg[c][2]);
        for (int avg = 0; avg < 2; avg++) {
            run_case(cfg[c][0], cfg[c][1], 737, avg, spec, shape, 6, "powersgd");
        }
    }
}

/* Rank r's gradient of the rank-2 test: (r + 1) (u1 v1^T + 2 u2 v2^T), 20 x 30. */
static float rank2(uint32_t r, uint64_t i)
{
    uint64_t row = i / 30, col = i % 30;
    double u1 = sin(0.3 * row + 1), v1 = cos(0.7 * col), u2 = cos(0.2 * row * row), v2 = 0.1 * col;
    return (float)((r + 1) * (u1 * v1 + 2 * u2 * v2));
}

/* An exactly rank-2 bucket is reconstructed to 1e-5 after two warm-started steps. */
static void test_powersgd_rank_exact(void **state)
{
    static const uint64_t shape[] = {20, 30};
    double want[600], scale = 0.0;
    cbufs_t b;

    world_init(3, 2);
    bufs_alloc(&b, 600, sizeof(float));
    register_layout(9, shape, 1);
    for (uint64_t i = 0; i < 600; i++) {
        want[i] = 0.0;
        for (uint32_t r = 0; r < 6; r++) {
            want[i] += rank2(r, i);
        }
        scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
    }
    for (uint32_t t = 0; t < 2; t++) {
        csub_t c = {10 + t, COLL_FLOAT32, COLL_SUM, "powersgd:2,noef", 1, 9};
        for (uint32_t n = 0; n < 3; n++) {
            for (uint32_t l = 0; l < 2; l++) {
                for (uint64_t i = 0; i < 600; i++) {
                    ((float *)b.send[n][l])[i] = rank2(n * 2 + l, i);
                }
            }
        }
        submit_all_c(&b, &c, -1, NULL);
        assert_string_equal(expect_all(c.key, COLL_OK), "powersgd");
        check_outputs(&b, want, 1e-5 * scale, "rank 2 reconstructed");
    }
    fake_net_free(&w);
}

/* Over 200 steps: the results + every residual (worker and server) == the inputs. */
static void ef_identity(const char *spec, uint64_t layout)
{
    enum { STEPS_EF = 200, COUNT = 257 };
    static const uint64_t shape[] = {16, 16, 1, 1};
    double sum_in[COUNT] = {0}, sum_out[COUNT] = {0}, tol = STEPS_EF * 16.0 * 0x1p-20;
    const float *res;
    cbufs_t b;

    world_init(3, 1);
    bufs_alloc(&b, COUNT, sizeof(float));
    if (layout != 0) {
        register_layout(layout, shape, 2);
    }
    for (uint32_t t = 0; t < STEPS_EF; t++) {
        csub_t c = {1000 + t, COLL_FLOAT32, COLL_SUM, spec, 5, layout};
        bufs_fill(&b, t);
        submit_all_c(&b, &c, -1, NULL);
        expect_all(c.key, COLL_OK);
        w.ndone = 0; /* the completions of 200 steps do not fit the fake's table */
        for (uint64_t i = 0; i < COUNT; i++) {
            sum_out[i] += ((float *)b.recv[0][0])[i];
            for (uint32_t n = 0; n < 3; n++) {
                sum_in[i] += ((float *)b.send[n][0])[i];
            }
        }
    }
    for (uint32_t n = 0; n < 3; n++) {
        coll_slot_t *s = slot_of(n, 5);
        coll_plan_t pl;
        res = residual_of(n, 5);
        coll_plan_init(&pl, COUNT, 3, sizeof(float), (size_t)1 << 30);
        for (uint64_t i = 0; i < COUNT; i++) {
            sum_out[i] += res[i];
        }
        for (uint64_t i = 0; s->sz.srv_elems > 0 && i < coll_plan_chunk(&pl, n).len; i++) {
            sum_out[coll_plan_chunk(&pl, n).off + i] += s->srv[s->cur][i];
        }
    }
    for (uint64_t i = 0; i < COUNT; i++) {
        if (fabs(sum_out[i] - sum_in[i]) > tol) {
            fail_msg("%s: element %llu: results + residuals %.9g, inputs %.9g", spec,
                     (unsigned long long)i, sum_out[i], sum_in[i]);
        }
    }
    fake_net_free(&w);
}

static void test_ef_identity(void **state)
{
    ef_identity("topk:0.01", 0);
    ef_identity("onebit", 0);
    ef_identity("fp16", 0);
    ef_identity("bf16", 0);
    ef_identity("powersgd:2", 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_onebit),
        cmocka_unit_test(test_fp16_bf16),
        cmocka_unit_test(test_powersgd),
        cmocka_unit_test(test_powersgd_rank_exact),
        cmocka_unit_test(test_ef_identity),
    };
    return cmocka_run_group_tests_name("codec", tests, NULL, NULL);
}
