/*
 * Unit tests of the PowerSGD kernels (kernels/cpu/lowrank.h) against references computed here in
 * double: the products P = M Q, Q = M^T P, P Q^T and the residual within the float32 rounding
 * bound of their sums; P^T P = I within 1e-5 after orthonormalization (random, nearly and exactly
 * dependent columns, a zero column that must stay zero, not NaN); an exactly rank-r matrix
 * reconstructed to 1e-5 after two warm-started steps of power iteration; an all-zero matrix; the
 * seeded Q bit for bit against the documented recipe; the compression rule; every instruction set
 * against the scalar one.
 */
#include "compress_ref.h"

#include "kernels/cpu/lowrank.h"

#define LEN(a) (sizeof(a) / sizeof((a)[0]))
#define U32 0x1p-24 /* float32 unit roundoff */

static float *rand_matrix(size_t rows, size_t cols, double scale)
{
    float *m = ref_floats(rows * cols);
    ref_fill(m, rows * cols, scale);
    return m;
}

/* max over columns c, c' of |(A^T A)[c][c'] - I|, in double, for len x r column-major A. */
static double ortho_error(const float *a, size_t len, unsigned r)
{
    double worst = 0;
    for (unsigned c = 0; c < r; c++) {
        for (unsigned d = 0; d < r; d++) {
            double s = 0;
            for (size_t i = 0; i < len; i++) {
                s += (double)a[c * len + i] * a[d * len + i];
            }
            s -= c == d;
            worst = fabs(s) > worst ? fabs(s) : worst;
        }
    }
    return worst;
}

/* ---- Products against double, within the rounding bound of float32 sums ---- */

static void check_products(size_t rows, size_t cols, unsigned r)
{
    float *m = rand_matrix(rows, cols, 1.0), *q = rand_matrix(cols, r, 1.0);
    float *p = ref_floats(rows * r), *q2 = ref_floats(cols * r), *out = ref_floats(rows * cols);

    assert_int_equal(coll_lowrank_mul_q(m, rows, cols, q, r, p), COLL_OK);
    for (unsigned c = 0; c < r; c++) {
        for (size_t i = 0; i < rows; i++) {
            double s = 0, abs_sum = 0;
            for (size_t j = 0; j < cols; j++) {
                s += (double)m[i * cols + j] * q[c * cols + j];
                abs_sum += fabs((double)m[i * cols + j] * q[c * cols + j]);
            }
            /* 16 lanes of cols/16 terms each, 4 levels of pairwise sums, one product rounding */
            assert_true(fabs(p[c * rows + i] - s) <= ((double)cols / 16 + 6) * U32 * abs_sum);
        }
    }
    assert_int_equal(coll_lowrank_mul_mt(m, rows, cols, p, r, q2), COLL_OK);
    for (unsigned c = 0; c < r; c++) {
        for (size_t j = 0; j < cols; j++) {
            double s = 0, abs_sum = 0;
            for (size_t i = 0; i < rows; i++) {
                s += (double)m[i * cols + j] * p[c * rows + i];
                abs_sum += fabs((double)m[i * cols + j] * p[c * rows + i]);
            }
            assert_true(fabs(q2[c * cols + j] - s) <= ((double)rows + 1) * U32 * abs_sum);
        }
    }
    assert_int_equal(coll_lowrank_reconstruct(p, q2, rows, cols, r, out), COLL_OK);
    for (size_t i = 0; i < rows; i++) {
        for (size_t j = 0; j < cols; j++) {
            double s = 0, abs_sum = 0;
            for (unsigned c = 0; c < r; c++) {
                s += (double)p[c * rows + i] * q2[c * cols + j];
                abs_sum += fabs((double)p[c * rows + i] * q2[c * cols + j]);
            }
            assert_true(fabs(out[i * cols + j] - s) <= (r + 1.0) * U32 * abs_sum);
        }
    }
    free(m), free(q), free(p), free(q2), free(out);
}

static void test_products(void **state)
{
    static const size_t shapes[][3] = {{1, 1, 1},    {1, 37, 1},  {37, 1, 1},   {16, 16, 2},
                                       {100, 17, 3}, {33, 130, 4}, {64, 1000, 2}, {500, 70, 8},
                                       {20, 300, 32}, {70, 70, 64}};
    ref_seed(1);
    for (size_t s = 0; s < LEN(shapes); s++) {
        check_products(shapes[s][0], shapes[s][1], (unsigned)shapes[s][2]);
    }
}

/* The residual is M - P Q^T, the approximation exactly what reconstruct gives. */
static void test_residual(void **state)
{
    const size_t rows = 45, cols = 333;
    const unsigned r = 3;
    float *m = rand_matrix(rows, cols, 1.0), *p = rand_matrix(rows, r, 1.0);
    float *q = rand_matrix(cols, r, 1.0), *res = ref_floats(rows * cols);
    float *approx = ref_floats(rows * cols), *recon = ref_floats(rows * cols);

    memcpy(res, m, rows * cols * sizeof(float));
    assert_int_equal(coll_lowrank_residual(p, q, rows, cols, r, res, approx), COLL_OK);
    assert_int_equal(coll_lowrank_reconstruct(p, q, rows, cols, r, recon), COLL_OK);
    assert_memory_equal(approx, recon, rows * cols * sizeof(float));
    for (size_t i = 0; i < rows * cols; i++) {
        assert_true(ref_bits(res[i]) == ref_bits((float)((double)m[i] - approx[i])));
    }
    memcpy(approx, m, rows * cols * sizeof(float)); /* again without the approximation */
    assert_int_equal(coll_lowrank_residual(p, q, rows, cols, r, approx, NULL), COLL_OK);
    assert_memory_equal(approx, res, rows * cols * sizeof(float));
    free(m), free(p), free(q), free(res), free(approx), free(recon);
}

/* ---- Orthonormalization ---- */

static void test_orthonormal(void **state)
{
    static const size_t shapes[][2] = {{1, 1},   {7, 3},    {1000, 1}, {1000, 2},
                                       {1000, 4}, {100003, 2}, {300, 32}, {64, 64}};
    ref_seed(2);
    for (size_t s = 0; s < LEN(shapes); s++) {
        const size_t len = shapes[s][0];
        const unsigned r = (unsigned)shapes[s][1];
        for (int e = 0; e < 2; e++) {
            float *a = rand_matrix(len, r, 1.0);
            assert_int_equal(coll_lowrank_orthonormalize(a, len, r, e ? 1e-8f : 0), COLL_OK);
            double err = ortho_error(a, len, r);
            if (err > 1e-5) {
                fail_msg("len %zu rank %u eps %d: |P^T P - I| = %g", len, r, e, err);
            }
            free(a);
        }
    }
}

/* Nearly and exactly dependent columns: one pass of Gram-Schmidt would leave rounding noise that
 * normalizes to a non-orthogonal column; the second pass must not. */
static void test_orthonormal_dependent(void **state)
{
    const size_t len = 2000;
    float *a = rand_matrix(len, 4, 1.0);

    for (size_t i = 0; i < len; i++) {
        a[1 * len + i] = 2 * a[i];                                 /* exactly dependent */
        a[3 * len + i] = a[2 * len + i] + 1e-6f * a[len * 0 + i]; /* nearly dependent */
    }
    assert_int_equal(coll_lowrank_orthonormalize(a, len, 4, 0), COLL_OK);
    assert_true(ortho_error(a, len, 4) <= 1e-5);
    free(a);
}

/* A zero column stays zero (no NaN), with epsilon 0 too; the others are orthonormal. */
static void test_zero_column(void **state)
{
    const size_t len = 500;
    for (int e = 0; e < 2; e++) {
        float *a = rand_matrix(len, 3, 1.0);
        for (size_t i = 0; i < len; i++) {
            a[len + i] = i % 2 ? 0.0f : -0.0f;
        }
        assert_int_equal(coll_lowrank_orthonormalize(a, len, 3, e ? 1e-8f : 0), COLL_OK);
        for (size_t i = 0; i < len; i++) {
            assert_true(a[len + i] == 0 && !isnan(a[i]) && !isnan(a[2 * len + i]));
        }
        memcpy(a + len, a + 2 * len, len * sizeof(float)); /* columns 0 and 2 */
        assert_true(ortho_error(a, len, 2) <= 1e-5);
        free(a);
    }
}

/* ---- Power iteration ---- */

/* One PowerSGD step without communication (one node): M is g + e, kept in @p res. */
static void step(const float *g, float *res, size_t rows, size_t cols, unsigned r, float *p,
                 float *q, float *approx, float eps)
{
    assert_int_equal(coll_lowrank_orthonormalize(q, cols, r, eps), COLL_OK);
    assert_int_equal(coll_lowrank_ef_mul_q(g, res, rows, cols, q, r, p), COLL_OK);
    assert_int_equal(coll_lowrank_orthonormalize(p, rows, r, eps), COLL_OK);
    assert_int_equal(coll_lowrank_mul_mt(res, rows, cols, p, r, q), COLL_OK);
    assert_int_equal(coll_lowrank_residual(p, q, rows, cols, r, res, approx), COLL_OK);
}

/* M = U V^T of rank r exactly: after two warm-started steps P Q^T = M within 1e-5. */
static void test_rank_r_reconstructed(void **state)
{
    static const size_t shapes[][3] = {{200, 120, 4}, {64, 500, 2}, {300, 300, 1}, {90, 40, 8}};
    for (size_t s = 0; s < LEN(shapes); s++) {
        const size_t rows = shapes[s][0], cols = shapes[s][1];
        const unsigned r = (unsigned)shapes[s][2];
        float *u = rand_matrix(rows, r, 1.0), *v = rand_matrix(cols, r, 1.0);
        float *m = ref_floats(rows * cols), *zero = ref_floats(rows * cols);
        float *res = ref_floats(rows * cols), *approx = ref_floats(rows * cols);
        float *p = ref_floats(rows * r), *q = ref_floats(cols * r);
        double mmax = 0;
        assert_int_equal(coll_lowrank_reconstruct(u, v, rows, cols, r, m), COLL_OK);
        for (size_t i = 0; i < rows * cols; i++) {
            mmax = fabs(m[i]) > mmax ? fabs(m[i]) : mmax;
        }
        memset(zero, 0, rows * cols * sizeof(float));
        coll_lowrank_init_q(q, cols, r, 42 + s);
        for (int it = 0; it < 2; it++) {
            memcpy(res, m, rows * cols * sizeof(float)); /* M itself, no residual added */
            step(zero, res, rows, cols, r, p, q, approx, 0);
        }
        for (size_t i = 0; i < rows * cols; i++) {
            if (fabs(approx[i] - m[i]) > 1e-5 * mmax || fabs(res[i]) > 1e-5 * mmax) {
                fail_msg("%zux%zu rank %u: element %zu is %g, want %g", rows, cols, r, i,
                         approx[i], m[i]);
            }
        }
        assert_true(ortho_error(p, rows, r) <= 1e-5);
        free(u), free(v), free(m), free(zero), free(res), free(approx), free(p), free(q);
    }
}

/* An all-zero gradient: P, Q, the approximation and the residual are all zero, never NaN. */
static void test_zero_matrix(void **state)
{
    const size_t rows = 30, cols = 20;
    const unsigned r = 2;
    float g[30 * 20] = {0}, res[30 * 20] = {0}, approx[30 * 20], p[30 * 2], q[20 * 2];

    for (int e = 0; e < 2; e++) {
        coll_lowrank_init_q(q, cols, r, 7);
        step(g, res, rows, cols, r, p, q, approx, e ? 1e-8f : 0);
        for (size_t i = 0; i < rows * cols; i++) {
            assert_true(approx[i] == 0 && res[i] == 0);
        }
        for (size_t i = 0; i < rows * r; i++) {
            assert_true(p[i] == 0);
        }
        for (size_t i = 0; i < cols * r; i++) {
            assert_true(q[i] == 0);
        }
    }
}

/* ---- Helpers ---- */

/* The documented recipe, written again: splitmix64, four 16-bit quarters, sqrt(3) / 2^16. */
static float ref_init_q(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    double sum = 0;
    for (int k = 0; k < 4; k++) {
        sum += (double)((z >> (16 * k)) & 0xffff);
    }
    return (float)((sum - 131070) * (sqrt(3.0) / 65536));
}

static void test_init_q(void **state)
{
    enum { COLS = 5000, R = 4 };
    static float q[COLS * R], q2[COLS * R];
    uint64_t s = 1234;
    double mean = 0, var = 0;

    coll_lowrank_init_q(q, COLS, R, 1234);
    coll_lowrank_init_q(q2, COLS, R, 1234);
    assert_memory_equal(q, q2, sizeof(q));
    for (size_t i = 0; i < COLS * R; i++) {
        assert_true(ref_bits(q[i]) == ref_bits(ref_init_q(&s)));
        mean += q[i];
        var += (double)q[i] * q[i];
    }
    mean /= COLS * R;
    var = var / (COLS * R) - mean * mean;
    assert_true(fabs(mean) < 0.03 && fabs(var - 1) < 0.03);
    coll_lowrank_init_q(q2, COLS, R, 1235);
    assert_memory_not_equal(q, q2, sizeof(q));
}

static void test_rules(void **state)
{
    assert_int_equal(coll_lowrank_rank(3, 100, 4), 3);
    assert_int_equal(coll_lowrank_rank(100, 2, 4), 2);
    assert_int_equal(coll_lowrank_rank(100, 200, 4), 4);
    assert_true(coll_lowrank_should_compress(10, 10, 2, 2));   /* 80 < 100 */
    assert_false(coll_lowrank_should_compress(10, 10, 3, 2));  /* 120 >= 100 */
    assert_false(coll_lowrank_should_compress(10, 10, 5, 1));  /* 100 is not < 100 */
    assert_true(coll_lowrank_should_compress(1024, 1024, 4, 2));
    assert_false(coll_lowrank_should_compress(1, 1000, 1, 2)); /* a vector */
}

static void test_arguments(void **state)
{
    float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8];

    assert_int_equal(coll_lowrank_mul_q(a, 2, 2, a, 0, b), COLL_ERR_INVALID);
    assert_int_equal(coll_lowrank_mul_q(a, 2, 2, a, COLL_LOWRANK_MAX_RANK + 1, b),
                     COLL_ERR_INVALID);
    assert_int_equal(coll_lowrank_mul_mt(NULL, 2, 2, a, 1, b), COLL_ERR_INVALID);
    assert_int_equal(coll_lowrank_ef_mul_q(a, NULL, 2, 2, a, 1, b), COLL_ERR_INVALID);
    assert_int_equal(coll_lowrank_orthonormalize(a, 2, 3, 0), COLL_ERR_INVALID);
    assert_int_equal(coll_lowrank_orthonormalize(a, 4, 2, -1), COLL_ERR_INVALID);
    assert_int_equal(coll_lowrank_orthonormalize(a, 4, 2, NAN), COLL_ERR_INVALID);
    assert_int_equal(coll_lowrank_orthonormalize(NULL, 4, 2, 0), COLL_ERR_INVALID);
    assert_int_equal(coll_lowrank_reconstruct(a, a, 2, 2, 1, NULL), COLL_ERR_INVALID);
    assert_int_equal(coll_lowrank_residual(a, a, 2, 2, 1, NULL, b), COLL_ERR_INVALID);
    assert_int_equal(coll_lowrank_mul_q(NULL, 0, 5, NULL, 1, NULL), COLL_OK);
}

/* ---- Instruction sets ---- */

static void check_isa_matches_scalar(const char *isa)
{
    static const size_t shapes[][3] = {{33, 37, 2}, {100, 130, 4}, {17, 1000, 3}, {64, 64, 32}};
    ref_isa_force_or_skip(isa);
    for (size_t s = 0; s < LEN(shapes); s++) {
        const size_t rows = shapes[s][0], cols = shapes[s][1];
        const unsigned r = (unsigned)shapes[s][2];
        float *g = rand_matrix(rows, cols, 1.0), *e0 = rand_matrix(rows, cols, 0.1);
        float *res[2], *approx[2], *p[2], *q[2];
        for (int run = 0; run < 2; run++) {
            res[run] = ref_floats(rows * cols);
            approx[run] = ref_floats(rows * cols);
            p[run] = ref_floats(rows * r);
            q[run] = ref_floats(cols * r);
            memcpy(res[run], e0, rows * cols * sizeof(float));
            coll_lowrank_init_q(q[run], cols, r, 99);
            assert_int_equal(coll_cpu_force_isa(run ? isa : "scalar"), 0);
            step(g, res[run], rows, cols, r, p[run], q[run], approx[run], 1e-8f);
        }
        assert_memory_equal(p[0], p[1], rows * r * sizeof(float));
        assert_memory_equal(q[0], q[1], cols * r * sizeof(float));
        assert_memory_equal(res[0], res[1], rows * cols * sizeof(float));
        assert_memory_equal(approx[0], approx[1], rows * cols * sizeof(float));
        for (int run = 0; run < 2; run++) {
            free(res[run]), free(approx[run]), free(p[run]), free(q[run]);
        }
        free(g), free(e0);
    }
    ref_isa_restore();
}

static void test_isa_avx2(void **state)
{
    check_isa_matches_scalar("avx2");
}

static void test_isa_avx512(void **state)
{
    check_isa_matches_scalar("avx512");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_products),
        cmocka_unit_test(test_residual),
        cmocka_unit_test(test_orthonormal),
        cmocka_unit_test(test_orthonormal_dependent),
        cmocka_unit_test(test_zero_column),
        cmocka_unit_test(test_rank_r_reconstructed),
        cmocka_unit_test(test_zero_matrix),
        cmocka_unit_test(test_init_q),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_isa_avx2),
        cmocka_unit_test(test_isa_avx512),
    };
    print_message("compression kernels: %s\n", coll_cpu_isa());
    return cmocka_run_group_tests_name("lowrank", tests, NULL, NULL);
}
