/*
 * The CUDA compressors' element functions (kernels/cuda/elem_compress.h), compiled by the host's
 * compiler, against the host executor (kernels/cpu/cast.h, onebit.h, topk.h, lowrank.h). Each
 * kernel's work is replayed here element by element in the kernel's own order with the element
 * functions: the cast, 1-bit packing, TopK's radix select and ordered compaction, the seeded Q
 * and P Q^T must give the host's bits. Where the device adds a whole span in another order (the
 * 1-bit scale's sum, Gram-Schmidt's dots), the replay adds in the device's order (sum.cuh, one
 * block of lowrank.cu) and the result must be within the bound kernels/cuda/README.md states.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/cuda/elem_compress.h"
#include "kernels/exec.h"
#include "reduce_ref.h"

#define N 1027

static const coll_exec_t *host(void)
{
    return coll_exec_get(COLL_MEM_HOST);
}

/* @p n floats of magnitude about @p mag; @p levels > 0 quantizes them (ties for TopK). */
static void fill(float *x, size_t n, double mag, unsigned levels)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = ref_rand();
        double v = ((double)(r >> 11 & 0xfffff) / 1048576.0 - 0.5) * 2 * mag;
        if (levels > 0) {
            v = mag * (double)(int)((r >> 40) % (2 * levels) - levels) / levels;
        }
        x[i] = (float)v;
    }
}

static void assert_bits(const void *a, const void *b, size_t bytes, const char *what)
{
    if (memcmp(a, b, bytes) != 0) {
        fail_msg("%s differs from the host", what);
    }
}

/* ---- the 16-bit cast ---- */

static void cast_case(coll_cast_format_t f, double mag, int with_residual)
{
    static float g[N], e[N], eh[N], res[N], dec[N], acc[N], acch[N];
    static uint16_t out[N];
    const int fmt = f == COLL_CAST_BF16 ? COLL_HD_BF16 : COLL_HD_F16;
    float *ep = with_residual ? e : NULL;
    int32_t p_host, p;
    uint32_t maxkey = 0;

    fill(g, N, mag, 0);
    fill(e, N, mag / 100, 0);
    memcpy(eh, e, sizeof(e));
    assert_int_equal(host()->cast_encode(f, g, with_residual ? eh : NULL, N, out, &p_host),
                     COLL_OK);
    for (size_t i = 0; i < N; i++) {
        uint32_t k = coll_hd_mag_key(coll_hd_cast_x(g, ep, i));
        maxkey = k > maxkey ? k : maxkey;
    }
    assert_int_equal(coll_cast_scale_exp(f, maxkey, &p), COLL_OK);
    assert_int_equal(p, p_host);
    for (size_t i = 0; i < N; i++) {
        float x = coll_hd_cast_x(g, ep, i);
        uint16_t h = coll_hd_cast_encode(fmt, x, coll_hd_pow2(p));
        assert_int_equal(h, out[i]);
        res[i] = with_residual ? coll_hd_cast_residual(fmt, x, h, coll_hd_pow2(-p)) : e[i];
    }
    assert_bits(res, with_residual ? eh : e, sizeof(res), "the cast's residual");

    fill(acc, N, 1.0, 0);
    memcpy(acch, acc, sizeof(acc));
    assert_int_equal(host()->cast_decode(f, out, N, p, dec), COLL_OK);
    assert_int_equal(host()->cast_accumulate(f, out, N, p, 0.3f, acch), COLL_OK);
    for (size_t i = 0; i < N; i++) {
        float d = coll_hd_cast_decode(fmt, out[i], coll_hd_pow2(-p));
        float a = COLL_FADD(acc[i], coll_hd_cast_decode(fmt, out[i], 0.3f * coll_hd_pow2(-p)));
        assert_bits(&d, &dec[i], 4, "a decoded value");
        assert_bits(&a, &acch[i], 4, "an accumulated value");
    }
}

static void test_cast(void **state)
{
    static const double mags[] = {1.0, 3e-3, 7e4, 1e-41, 2e30};

    for (int f = COLL_CAST_FP16; f <= COLL_CAST_BF16; f++) {
        for (size_t m = 0; m < sizeof(mags) / sizeof(mags[0]); m++) {
            cast_case((coll_cast_format_t)f, mags[m], 1);
            cast_case((coll_cast_format_t)f, mags[m], 0);
        }
    }
}

/* ---- 1-bit ---- */

/* The sum of term(x_i) in sum.cuh's order: thread t of T = blocks * 256 adds elements t, t + T,
 * ...; each block's 256 sums in a tree; one block adds the blocks' sums the same way. */
static double device_sum(const float *g, const float *e, size_t n, int l1)
{
    size_t nb = (n + 2047) / 2048;
    nb = nb < 1 ? 1 : nb > 1024 ? 1024 : nb;
    double part[1024], t[256];

    for (size_t b = 0; b < nb; b++) {
        for (size_t th = 0; th < 256; th++) {
            t[th] = 0;
            for (size_t i = b * 256 + th; i < n; i += nb * 256) {
                t[th] += coll_hd_onebit_term(e ? coll_hd_ef_add(g[i], e[i]) : g[i], l1);
            }
        }
        for (size_t half = 128; half > 0; half /= 2) {
            for (size_t th = 0; th < half; th++) {
                t[th] += t[th + half];
            }
        }
        part[b] = t[0];
    }
    for (size_t th = 0; th < 256; th++) {
        t[th] = 0;
        for (size_t b = th; b < nb; b += 256) {
            t[th] += part[b];
        }
    }
    for (size_t half = 128; half > 0; half /= 2) {
        for (size_t th = 0; th < half; th++) {
            t[th] += t[th + half];
        }
    }
    return t[0];
}

static void onebit_case(coll_onebit_scale_t rule, size_t n, int with_residual)
{
    static float g[N], e[N], eh[N], out[N], acc[N], acch[N];
    static uint8_t signs[N / 8 + 1], bytes[N / 8 + 1];
    float scale_host, scale;

    fill(g, n, 2.0, 0);
    fill(e, n, 0.1, 0);
    memcpy(eh, e, sizeof(e));
    assert_int_equal(host()->onebit_encode(rule, g, with_residual ? eh : NULL, n, signs,
                                           &scale_host), COLL_OK);
    double sum = device_sum(g, with_residual ? e : NULL, n, rule == COLL_ONEBIT_SCALE_L1);
    assert_int_equal(coll_onebit_scale(rule, sum, n, &scale), COLL_OK);
    /* Another order of the same exact squares: at most one float32 rounding step apart. */
    assert_true(fabsf(scale - scale_host) <= nextafterf(scale_host, INFINITY) - scale_host);
    for (size_t b = 0; 8 * b < n; b++) {
        size_t len = n - 8 * b < 8 ? n - 8 * b : 8;
        bytes[b] = coll_hd_onebit_pack(g + 8 * b, with_residual ? e + 8 * b : NULL, len,
                                       scale_host);
    }
    assert_bits(bytes, signs, (n + 7) / 8, "the signs");
    assert_bits(e, eh, n * sizeof(float), "the 1-bit residual");

    fill(acc, n, 1.0, 0);
    memcpy(acch, acc, sizeof(acc));
    assert_int_equal(host()->onebit_decode(signs, n, scale_host, 0.5f, out), COLL_OK);
    assert_int_equal(host()->onebit_accumulate(signs, n, scale_host, 0.5f, acch), COLL_OK);
    for (size_t i = 0; i < n; i++) {
        float v = coll_hd_onebit_value(signs[i / 8], (unsigned)(i % 8), scale_host * 0.5f);
        float a = COLL_FADD(acc[i], v);
        assert_bits(&v, &out[i], 4, "a 1-bit value");
        assert_bits(&a, &acch[i], 4, "a 1-bit sum");
    }
}

static void test_onebit(void **state)
{
    static const size_t ns[] = {1, 7, 8, 9, 1000, N};

    for (size_t j = 0; j < sizeof(ns) / sizeof(ns[0]); j++) {
        for (int rule = COLL_ONEBIT_SCALE_L2; rule <= COLL_ONEBIT_SCALE_L1; rule++) {
            onebit_case((coll_onebit_scale_t)rule, ns[j], 1);
            onebit_case((coll_onebit_scale_t)rule, ns[j], 0);
        }
    }
}

/* ---- TopK ---- */

/* The host's walk (kernels/cpu/topk.c, cut_level()): from the top bin down to the bin of the
 * need-th largest key. */
static void host_walk(const uint32_t *hist, unsigned width, uint32_t *prefix, uint64_t *need)
{
    uint32_t b = (1u << width) - 1;
    uint64_t above = 0;

    while (b > 0 && above + hist[b] < *need) {
        above += hist[b--];
    }
    *prefix = (*prefix << width) | b;
    *need -= above;
}

/* topk.cu's cut: the keys at and above each bin, from the top, and the one bin where they reach
 * need. */
static void device_cut(const uint32_t *hist, unsigned width, uint32_t *prefix, uint64_t *need)
{
    uint64_t incl = 0, n = *need;
    int found = 0;

    for (uint32_t b = COLL_HD_TOPK_BINS; b-- > 0;) {
        uint64_t above = incl;
        incl += hist[b];
        if (coll_hd_topk_cut_at(incl, above, n)) {
            assert_false(found);
            found = 1;
            *prefix = (*prefix << width) | b;
            *need = n - above;
        }
    }
    assert_true(found);
}

/* Random histograms of a level (bins past its width empty) and every need from 1 to the keys:
 * the device's cut is where the host's walk stops. */
static void test_topk_cut_is_the_walk(void **state)
{
    static uint32_t hist[COLL_HD_TOPK_BINS];

    for (int round = 0; round < 40; round++) {
        const unsigned width = round % 2 ? 10 : 11;
        uint64_t total = 0;
        memset(hist, 0, sizeof(hist));
        for (uint32_t b = 0; b < (1u << width); b++) {
            uint64_t r = ref_rand();
            hist[b] = r % 4 == 0 ? (uint32_t)(r >> 60) : 0; /* sparse, with gaps */
            total += hist[b];
        }
        hist[round % 3] += 1; /* at least one key */
        total += 1;
        for (uint64_t need = 1; need <= total; need++) {
            uint32_t p1 = 5, p2 = 5;
            uint64_t n1 = need, n2 = need;
            host_walk(hist, width, &p1, &n1);
            device_cut(hist, width, &p2, &n2);
            assert_int_equal(p1, p2);
            assert_int_equal(n1, n2);
        }
    }
}

/* topk.cu's selection on v (in place of e when @p e): the three levels, then the compaction in
 * index order. */
static void device_topk(const float *g, float *e, size_t n, size_t k, uint32_t *idx, float *val)
{
    uint32_t hist[COLL_HD_TOPK_BINS], prefix = 0, bin;
    uint64_t need = k, gt = 0, eq = 0;
    const float *v = e != NULL ? e : g;

    for (size_t i = 0; e != NULL && i < n; i++) {
        e[i] = coll_hd_ef_add(g[i], e[i]);
    }
    for (unsigned lvl = 0; lvl < COLL_HD_TOPK_LEVELS; lvl++) {
        memset(hist, 0, sizeof(hist));
        for (size_t i = 0; i < n; i++) {
            if (coll_hd_topk_bin(coll_hd_mag_key(v[i]), lvl, prefix, &bin)) {
                hist[bin]++;
            }
        }
        unsigned width;
        (void)coll_hd_topk_level(lvl, &width);
        device_cut(hist, width, &prefix, &need);
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t key = coll_hd_mag_key(v[i]);
        if (coll_hd_topk_taken(key, prefix, eq, need)) {
            uint64_t pos = coll_hd_topk_pos(gt, eq, need);
            assert_true(pos < k);
            idx[pos] = (uint32_t)i;
            val[pos] = v[i];
            if (e != NULL) {
                e[i] = 0.0f;
            }
        }
        gt += key > prefix;
        eq += key == prefix;
    }
}

static void topk_case(size_t k, unsigned levels, int with_residual, coll_topk_select_t sel)
{
    static float g[N], e[N], eh[N], val[N], valh[N];
    static uint32_t idx[N], idxh[N];
    static uint8_t scratch[16 * N];

    fill(g, N, 3.0, levels);
    fill(e, N, levels ? 0 : 0.5, 0);
    g[5] = NAN;
    memcpy(eh, e, sizeof(e));
    coll_topk_args_t a = {.grad = g, .residual = with_residual ? eh : NULL, .count = N, .k = k,
                          .select = sel, .scratch = scratch, .scratch_bytes = sizeof(scratch),
                          .indices = idxh, .values = valh};
    assert_int_equal(host()->topk_compress(&a), COLL_OK);
    device_topk(g, with_residual ? e : NULL, N, k, idx, val);
    assert_bits(idx, idxh, k * sizeof(uint32_t), "the TopK indices");
    assert_bits(val, valh, k * sizeof(float), "the TopK values");
    if (with_residual) {
        assert_bits(e, eh, sizeof(e), "the TopK residual");
    }
}

static void test_topk(void **state)
{
    static const size_t ks[] = {1, 2, 7, 100, N / 2, N - 1};

    for (size_t j = 0; j < sizeof(ks) / sizeof(ks[0]); j++) {
        for (int sel = COLL_TOPK_SELECT_AUTO; sel <= COLL_TOPK_SELECT_SAMPLED; sel++) {
            topk_case(ks[j], 0, 1, (coll_topk_select_t)sel);
            topk_case(ks[j], 5, 1, (coll_topk_select_t)sel); /* many ties */
            topk_case(ks[j], 3, 0, (coll_topk_select_t)sel);
        }
    }
}

static void test_topk_accumulate(void **state)
{
    static float acc[N], acch[N];
    const uint32_t idx[4] = {0, 3, 500, N - 1};
    const float val[4] = {1.5f, -2.25f, 1e-30f, 3e30f};

    fill(acc, N, 1.0, 0);
    memcpy(acch, acc, sizeof(acc));
    assert_int_equal(host()->topk_accumulate(idx, val, 4, 0.1f, acch, N), COLL_OK);
    for (size_t j = 0; j < 4; j++) {
        acc[idx[j]] = coll_hd_topk_acc(acc[idx[j]], 0.1f, val[j]);
    }
    assert_bits(acc, acch, sizeof(acc), "the accumulated pairs");
}

/* ---- PowerSGD ---- */

static void test_lowrank_seeded_q(void **state)
{
    static float q[300 * 7];

    host()->lowrank_init_q(q, 300, 7, 0x1234abcdull);
    for (size_t l = 0; l < 300 * 7; l++) {
        float v = coll_hd_lowrank_q(0x1234abcdull, l);
        assert_bits(&v, &q[l], 4, "an element of the seeded Q");
    }
}

static void test_lowrank_reconstruct_and_residual(void **state)
{
    enum { R = 37, C = 53, K = 5 };
    static float p[R * K], q[C * K], out[R * C], res[R * C], resh[R * C], approx[R * C];

    fill(p, R * K, 2.0, 0);
    fill(q, C * K, 0.5, 0);
    fill(res, R * C, 1.0, 0);
    memcpy(resh, res, sizeof(res));
    assert_int_equal(host()->lowrank_reconstruct(p, q, R, C, K, out), COLL_OK);
    assert_int_equal(host()->lowrank_residual(p, q, R, C, K, resh, approx), COLL_OK);
    for (size_t i = 0; i < R; i++) {
        for (size_t j = 0; j < C; j++) {
            float a = coll_hd_lr_recon(p + i, R, q + j, C, K);
            float r = COLL_FSUB(res[i * C + j], a);
            assert_bits(&a, &out[i * C + j], 4, "an element of P Q^T");
            assert_bits(&a, &approx[i * C + j], 4, "an element of the approximation");
            assert_bits(&r, &resh[i * C + j], 4, "an element of the residual");
        }
    }
}

/* lowrank.cu's Gram-Schmidt: one block of 1024 threads, thread t adding elements t, t + 1024,
 * ... in double, then a tree over the threads. */
static double block_dot(const float *a, const float *b, size_t len)
{
    static double t[1024];

    for (size_t th = 0; th < 1024; th++) {
        t[th] = 0;
        for (size_t i = th; i < len; i += 1024) {
            t[th] += coll_hd_lr_prod(a[i], b[i]);
        }
    }
    for (size_t half = 512; half > 0; half /= 2) {
        for (size_t th = 0; th < half; th++) {
            t[th] += t[th + half];
        }
    }
    return t[0];
}

static void device_orthonormalize(float *a, size_t len, unsigned rank, float eps)
{
    for (unsigned c = 0; c < rank; c++) {
        float *col = a + c * len;
        for (int pass = 0; pass < 2; pass++) {
            for (unsigned j = 0; j < c; j++) {
                double d = block_dot(a + j * len, col, len);
                for (size_t i = 0; i < len; i++) {
                    col[i] = coll_hd_lr_sub_scaled(col[i], d, a[j * len + i]);
                }
            }
        }
        double d = sqrt(block_dot(col, col, len)) + (double)eps;
        for (size_t i = 0; i < len; i++) {
            col[i] = d > 0 ? coll_hd_lr_div(col[i], d) : 0.0f;
        }
    }
}

/* Unit columns, so an absolute bound: a few float32 roundings of each projection. */
static void test_lowrank_orthonormalize(void **state)
{
    enum { LEN = 3000, K = 6 };
    static float a[LEN * K], ah[LEN * K];

    fill(a, LEN * K, 1.0, 0);
    for (size_t i = 0; i < LEN; i++) {
        a[3 * LEN + i] = a[LEN + i] * 0.5f; /* a dependent column becomes zero, or noise */
    }
    memcpy(ah, a, sizeof(a));
    assert_int_equal(host()->lowrank_orthonormalize(ah, LEN, K, 1e-8f), COLL_OK);
    device_orthonormalize(a, LEN, K, 1e-8f);
    for (size_t c = 0; c < K; c++) {
        if (c == 3) {
            continue; /* rounding noise normalized: the host's and this one's differ */
        }
        for (size_t i = 0; i < LEN; i++) {
            if (fabsf(a[c * LEN + i] - ah[c * LEN + i]) > 1e-6f) {
                fail_msg("column %zu element %zu: %g, host %g", c, i, a[c * LEN + i],
                         ah[c * LEN + i]);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cast),
        cmocka_unit_test(test_onebit),
        cmocka_unit_test(test_topk_cut_is_the_walk),
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_topk_accumulate),
        cmocka_unit_test(test_lowrank_seeded_q),
        cmocka_unit_test(test_lowrank_reconstruct_and_residual),
        cmocka_unit_test(test_lowrank_orthonormalize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
