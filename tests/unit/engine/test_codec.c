/*
 * The compressed allreduce over the fake net layer (fake_net.h), every method against a
 * reference of its documented algorithm computed here (the files of engine/codec/ say which paper and
 * variant), over several steps so that the residuals carry over:
 *
 *   TopK: each node's x = residual + its ranks' sum; the k largest |x| (ties: lower index),
 *     summed over nodes in rank order (float32, as documented: exact here); residual = x with
 *     them zeroed. Checked exactly, outputs and residuals.
 *   fp16, bf16, 1-bit: chunks of coll_plan_init(); worker encode with its residual, the
 *     owner's sum onto its server residual in rank order, re-encoded, all-gathered. The
 *     16-bit rounding is compress_ref.h's (frexp/nearbyint), the 1-bit scale ||x||_2 / sqrt(n)
 *     in double, sign(0) = +1; float32 operations where the documented algorithm has them.
 *   PowerSGD: the layout's matrices at rank min(n, m, r) where (n + m) r 2 < n m, the rest
 *     summed exactly; P = M Q, P summed and orthonormalized (Gram-Schmidt in double), Q = M^T P
 *     averaged, result P Q^T, residual M - a P Q^T; warm-started Q. Within 1e-4 of the largest
 *     result (float32 against double). An exactly rank-2 bucket is reconstructed to 1e-5.
 *   The error-feedback identity through the engine: over 200 steps, the results + every node's
 *     residual (+ the server residuals) == the inputs, within float32 rounding of the sums.
 *
 * Counts 1, N-1, N+1, 8N+1, 1000 and 4099 on 2x1, 3x2 and 5x1 nodes x local ranks.
 */
#include "codec_ref.h"

#include "../kernels/compress_ref.h"
#include "common/compression.h"
#include "engine/plan.h"
#include "kernels/cpu/lowrank.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/topk.h"

#define STEPS 3

typedef struct {
    uint32_t n, l, world;
    uint64_t count;
    float w;             /* weight of a contribution */
    int ef;
    coll_compression_t z;
    float *e[FAKE_MAX_NODES]; /* worker residuals */
    float *s[FAKE_MAX_NODES]; /* server residuals of each node's chunk */
    float *x[FAKE_MAX_NODES]; /* this step's inputs: residual + the ranks' sum */
} ref_t;

static void ref_init(ref_t *r, uint64_t count, int avg, const char *spec)
{
    memset(r, 0, sizeof(*r));
    r->n = w.nnodes;
    r->l = w.nlocal;
    r->world = w.nnodes * w.nlocal;
    r->count = count;
    r->w = avg ? 1.0f / (float)r->world : 1.0f;
    assert_int_equal(coll_compression_parse(spec, &r->z), COLL_OK);
    r->z.ratio = coll__compress_ratio_units(r->z.ratio) / 1e6;
    r->ef = !(r->z.flags & COLL_COMPRESS_NO_EF);
    for (uint32_t n = 0; n < r->n; n++) {
        r->e[n] = calloc(count + 1, sizeof(float));
        r->s[n] = calloc(count + 1, sizeof(float));
        r->x[n] = calloc(count + 1, sizeof(float));
    }
}

static void ref_free(ref_t *r)
{
    for (uint32_t n = 0; n < r->n; n++) {
        free(r->e[n]);
        free(r->s[n]);
        free(r->x[n]);
    }
}

/* x = residual + every local rank's input of step t, in that order (as the engine's pass). */
static void ref_gather(ref_t *r, uint32_t t)
{
    for (uint32_t n = 0; n < r->n; n++) {
        for (uint64_t i = 0; i < r->count; i++) {
            float x = r->ef ? r->e[n][i] : 0.0f;
            for (uint32_t l = 0; l < r->l; l++) {
                x += ref_input(n * r->l + l, t, i);
            }
            r->x[n][i] = x;
        }
    }
}

/* ---- TopK ------------------------------------------------------------------------------------ */

static const float *sort_key;

static int by_magnitude(const void *a, const void *b)
{
    uint64_t i = *(const uint64_t *)a, j = *(const uint64_t *)b;
    float u = fabsf(sort_key[i]), v = fabsf(sort_key[j]);
    return u > v ? -1 : u < v ? 1 : (i > j) - (i < j);
}

static void ref_topk(ref_t *r, uint32_t t, double *out)
{
    size_t k = coll_topk_k(r->count, r->z.ratio);
    uint64_t *idx = malloc((r->count + 1) * sizeof(uint64_t));
    float *acc = calloc(r->count + 1, sizeof(float));

    ref_gather(r, t);
    for (uint32_t n = 0; n < r->n; n++) {
        for (uint64_t i = 0; i < r->count; i++) {
            idx[i] = i;
        }
        sort_key = r->x[n];
        qsort(idx, r->count, sizeof(uint64_t), by_magnitude);
        memcpy(r->e[n], r->x[n], r->count * sizeof(float));
        for (size_t j = 0; j < k; j++) {
            acc[idx[j]] += r->w * r->x[n][idx[j]];
            r->e[n][idx[j]] = 0.0f;
        }
    }
    for (uint64_t i = 0; i < r->count; i++) {
        out[i] = acc[i];
    }
    free(idx);
    free(acc);
}

/* ---- fp16, bf16, 1-bit ------------------------------------------------------------------------ */

/* One encoded span: per element its unit (16-bit value, or +-1) and the span's factor. */
typedef struct {
    double *unit;
    int p;       /* 16-bit: the scale exponent */
    float scale; /* 1-bit */
} span_t;

static void encode_span(const ref_t *r, const float *x, uint64_t n, span_t *sp)
{
    double m = 0.0, ss = 0.0;
    int e = 0;

    for (uint64_t i = 0; i < n; i++) {
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
        ss += (double)x[i] * x[i];
    }
    if (r->z.method == COLL_COMPRESS_ONEBIT) {
        sp->scale = n > 0 ? (float)sqrt(ss / (double)n) : 0.0f;
        for (uint64_t i = 0; i < n; i++) {
            sp->unit[i] = x[i] < 0.0f ? -1.0 : 1.0;
        }
        return;
    }
    frexp(m, &e);
    sp->p = m == 0.0 ? 0 : 15 - e;
    sp->p = sp->p < COLL_CAST_EXP_MIN ? COLL_CAST_EXP_MIN : sp->p > 126 ? 126 : sp->p;
    for (uint64_t i = 0; i < n; i++) {
        double v = ldexp(x[i], sp->p);
        sp->unit[i] = r->z.method == COLL_COMPRESS_FP16 ? ref_f16_value(ref_to_f16(v))
                                                        : ref_bf16_value(ref_to_bf16(v));
    }
}

/* acc[i] (+)= unit x (weight x factor), float32 as the documented accumulate; set: = decode. */
static void apply_span(const ref_t *r, const span_t *sp, uint64_t n, float weight, float *acc,
                       int set)
{
    float f = r->z.method == COLL_COMPRESS_ONEBIT ? sp->scale * weight
                                                  : (float)(weight * ldexp(1.0, -sp->p));
    for (uint64_t i = 0; i < n; i++) {
        float d = (float)(sp->unit[i] * f);
        acc[i] = set ? d : acc[i] + d;
    }
}

static void ref_twosided(ref_t *r, uint32_t t, double *out)
{
    coll_plan_t pl;
    span_t sp[FAKE_MAX_NODES][FAKE_MAX_NODES];
    float *y = calloc(r->count + 1, sizeof(float)), *dec = calloc(r->count + 1, sizeof(float));

    coll_plan_init(&pl, r->count, r->n, sizeof(float), (size_t)1 << 30);
    ref_gather(r, t);
    for (uint32_t n = 0; n < r->n; n++) {
        for (uint32_t c = 0; c < r->n; c++) {
            coll_range_t ch = coll_plan_chunk(&pl, c);
            sp[n][c].unit = calloc(ch.len + 1, sizeof(double));
            encode_span(r, r->x[n] + ch.off, ch.len, &sp[n][c]);
            memcpy(r->e[n] + ch.off, r->x[n] + ch.off, ch.len * sizeof(float));
            apply_span(r, &sp[n][c], ch.len, -1.0f, r->e[n] + ch.off, 0);
        }
    }
    for (uint32_t c = 0; c < r->n; c++) { /* the server of chunk c */
        coll_range_t ch = coll_plan_chunk(&pl, c);
        span_t s = {calloc(ch.len + 1, sizeof(double)), 0, 0.0f};
        if (r->ef) {
            memcpy(y, r->s[c], ch.len * sizeof(float));
        } else {
            memset(y, 0, ch.len * sizeof(float));
        }
        for (uint32_t n = 0; n < r->n; n++) {
            apply_span(r, &sp[n][c], ch.len, r->w, y, 0);
        }
        encode_span(r, y, ch.len, &s);
        apply_span(r, &s, ch.len, 1.0f, dec, 1);
        for (uint64_t i = 0; i < ch.len; i++) {
            out[ch.off + i] = dec[i];
            r->s[c][i] = y[i] - dec[i];
        }
        free(s.unit);
    }
    for (uint32_t n = 0; n < r->n; n++) {
        for (uint32_t c = 0; c < r->n; c++) {
            free(sp[n][c].unit);
        }
    }
    free(y);
    free(dec);
}

/* ---- PowerSGD, in double ---------------------------------------------------------------------- */

#define PSGD_LAYOUT 0x77
#define MAX_T 8

typedef struct {
    size_t nt;
    uint64_t shape[2 * MAX_T];
    double *q[MAX_T];      /* cols x rank, column-major; NULL: not compressed */
    unsigned rank[MAX_T];
} psgd_ref_t;

static psgd_ref_t pr;

/* The engine's seed of tensor @p t's first Q: FNV-1a of the job id, bucket << 32, t. */
static uint64_t psgd_seed(uint32_t bucket, size_t t)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = "fake"; *p != '\0'; p++) {
        h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    }
    return h ^ ((uint64_t)bucket << 32) ^ t;
}

/* Gram-Schmidt, twice per column, columns of zeros stay zero. */
static void gs(double *a, uint64_t len, unsigned r)
{
    for (unsigned c = 0; c < r; c++) {
        double *x = a + c * len, nrm = 0.0;
        for (int pass = 0; pass < 2; pass++) {
            for (unsigned j = 0; j < c; j++) {
                double d = 0.0;
                for (uint64_t i = 0; i < len; i++) {
                    d += a[j * len + i] * x[i];
                }
                for (uint64_t i = 0; i < len; i++) {
                    x[i] -= d * a[j * len + i];
                }
            }
        }
        for (uint64_t i = 0; i < len; i++) {
            nrm += x[i] * x[i];
        }
        for (uint64_t i = 0; nrm > 0.0 && i < len; i++) {
            x[i] /= sqrt(nrm);
        }
    }
}

static void psgd_ref_init(const uint64_t *shape, size_t nt, unsigned rank, uint32_t bucket)
{
    memset(&pr, 0, sizeof(pr));
    pr.nt = nt;
    memcpy(pr.shape, shape, 2 * nt * sizeof(uint64_t));
    for (size_t t = 0; t < nt; t++) {
        uint64_t n = shape[2 * t], m = shape[2 * t + 1];
        unsigned r = n < m ? (n < rank ? (unsigned)n : rank) : (m < rank ? (unsigned)m : rank);
        float *q0;
        if ((double)(n + m) * r * 2.0 >= (double)n * m) {
            continue;
        }
        pr.rank[t] = r;
        pr.q[t] = calloc(m * r, sizeof(double));
        q0 = calloc(m * r, sizeof(float));
        coll_lowrank_init_q(q0, m, r, psgd_seed(bucket, t));
        for (uint64_t i = 0; i < m * r; i++) {
            pr.q[t][i] = q0[i];
        }
        free(q0);
    }
}

static void psgd_ref_free(void)
{
    for (size_t t = 0; t < pr.nt; t++) {
        free(pr.q[t]);
    }
}

/* One compressed matrix at @p off: P summed, Q averaged, out = P Q^T, e = M - a out. */
static void psgd_matrix(ref_t *r, size_t t, uint64_t off, double a, double *out)
{
    uint64_t n = pr.shape[2 * t], m = pr.shape[2 * t + 1];
    unsigned k = pr.rank[t];
    double *p = calloc(n * k, sizeof(double)), *q = pr.q[t];

    gs(q, m, k);
    for (uint32_t v = 0; v < r->n; v++) {
        for (unsigned c = 0; c < k; c++) {
            for (uint64_t i = 0; i < n; i++) {
                for (uint64_t j = 0; j < m; j++) {
                    p[c * n + i] += (double)r->x[v][off + i * m + j] * q[c * m + j];
                }
            }
        }
    }
    gs(p, n, k);
    memset(q, 0, m * k * sizeof(double));
    for (uint32_t v = 0; v < r->n; v++) {
        for (unsigned c = 0; c < k; c++) {
            for (uint64_t i = 0; i < n; i++) {
                for (uint64_t j = 0; j < m; j++) {
                    q[c * m + j] += r->w * (double)r->x[v][off + i * m + j] * p[c * n + i];
                }
            }
        }
    }
    for (uint64_t i = 0; i < n * m; i++) {
        double o = 0.0;
        for (unsigned c = 0; c < k; c++) {
            o += p[c * n + i / m] * q[c * m + i % m];
        }
        out[off + i] = o;
        for (uint32_t v = 0; v < r->n; v++) {
            r->e[v][off + i] = (float)(r->x[v][off + i] - a * o);
        }
    }
    free(p);
}

static void ref_powersgd(ref_t *r, uint32_t t, double *out)
{
    double a = r->w != 1.0f ? (double)r->l : (double)r->l / r->world;
    uint64_t off = 0;

    ref_gather(r, t);
    for (size_t k = 0; k < pr.nt; k++) {
        uint64_t len = pr.shape[2 * k] * pr.shape[2 * k + 1];
        if (pr.q[k] != NULL) {
            psgd_matrix(r, k, off, a, out);
        }
        for (uint64_t i = 0; pr.q[k] == NULL && i < len; i++) {
            out[off + i] = 0.0;
            for (uint32_t v = 0; v < r->n; v++) {
                out[off + i] += r->w * (double)r->x[v][off + i];
                r->e[v][off + i] = 0.0f;
            }
        }
        off += len;
    }
}

/* ---- running the engine against a reference -------------------------------------------------- */

typedef void (*ref_step_fn)(ref_t *r, uint32_t t, double *out);

static void check_outputs(const cbufs_t *b, const double *want, double tol, const char *what)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            expect_close(what, n, b->recv[n][l], want, b->count, tol);
        }
    }
}

static int twosided(const ref_t *r)
{
    return r->z.method == COLL_COMPRESS_FP16 || r->z.method == COLL_COMPRESS_BF16 ||
           r->z.method == COLL_COMPRESS_ONEBIT;
}

static void check_residuals(const ref_t *r, uint32_t bucket, double tol)
{
    coll_plan_t pl;

    coll_plan_init(&pl, r->count, r->n, sizeof(float), (size_t)1 << 30);
    for (uint32_t n = 0; n < r->n && r->ef && r->count > 0; n++) {
        coll_slot_t *s = slot_of(n, bucket);
        uint64_t mine = coll_plan_chunk(&pl, n).len;
        double *want = malloc(r->count * sizeof(double));
        for (uint64_t i = 0; i < r->count; i++) {
            want[i] = r->e[n][i];
        }
        expect_close("worker residual", n, residual_of(n, bucket), want, r->count, tol);
        for (uint64_t i = 0; twosided(r) && i < mine; i++) {
            want[i] = r->s[n][i];
        }
        if (twosided(r)) {
            expect_close("server residual", n, s->srv[s->cur], want, mine, tol);
        }
        free(want);
    }
}

/* @p steps operations of @p spec on @p count elements, each checked against @p step. */
static void run_case(uint32_t nodes, uint32_t nlocal, uint64_t count, int avg, const char *spec,
                     ref_step_fn step, double rel_tol, const char *algo)
{
    ref_t r;
    cbufs_t b;
    double *want = malloc((count + 1) * sizeof(double));
    char what[128];

    world_init(nodes, nlocal);
    bufs_alloc(&b, count, sizeof(float));
    ref_init(&r, count, avg, spec);
    if (step == ref_powersgd) {
        register_layout(PSGD_LAYOUT, pr.shape, pr.nt);
    }
    for (uint32_t t = 0; t < STEPS; t++) {
        csub_t c = {100 + t, COLL_FLOAT32, avg ? COLL_AVG : COLL_SUM, spec, 3,
                    step == ref_powersgd ? PSGD_LAYOUT : 0};
        double tol;
        bufs_fill(&b, t);
        submit_all_c(&b, &c, -1, NULL);
        assert_string_equal(expect_all(c.key, COLL_OK), algo);
        step(&r, t, want);
        tol = rel_tol * (max_abs(want, count) + 1e-30);
        snprintf(what, sizeof(what), "%s %ux%u count %llu step %u", spec, nodes, nlocal,
                 (unsigned long long)count, t);
        check_outputs(&b, want, tol, what);
        check_residuals(&r, 3, tol + 1e-30);
    }
    ref_free(&r);
    free(want);
    fake_net_free(&w);
}

static void run_counts(const char *spec, ref_step_fn step, double rel_tol, const char *algo)
{
    static const uint32_t cfg[][2] = {{2, 1}, {3, 2}, {5, 1}};
    for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
        uint32_t n = cfg[c][0];
        uint64_t counts[] = {1, n - 1, n + 1, 8 * n + 1, 1000, 4099};
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
            run_case(n, cfg[c][1], counts[k], k % 2, spec, step, rel_tol, algo);
        }
    }
}

static void test_topk(void **state)
{
    run_counts("topk:0.01", ref_topk, 1e-7, "topk");
    run_counts("topk:0.25", ref_topk, 1e-7, "topk");
    run_case(3, 2, 1000, 0, "topk:0.05,noef", ref_topk, 0.0, "topk");
}

static void test_onebit(void **state)
{
    run_counts("onebit", ref_twosided, 1e-6, "onebit");
}

static void test_fp16_bf16(void **state)
{
    run_counts("fp16", ref_twosided, 1e-6, "fp16");
    run_counts("bf16", ref_twosided, 1e-6, "bf16");
    run_case(2, 2, 1000, 1, "fp16,noef", ref_twosided, 1e-6, "fp16");
}

/* Matrices (compressed), a vector, a matrix too small to compress, a scalar. */
static void test_powersgd(void **state)
{
    static const uint64_t shape[] = {16, 24, 7, 1, 33, 5, 2, 40, 10, 10, 1, 1};
    static const uint32_t cfg[][3] = {{2, 1, 2}, {3, 2, 2}, {5, 1, 2}, {2, 2, 4}, {3, 1, 1}};
    char spec[32];

    for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
        snprintf(spec, sizeof(spec), "powersgd:%u", cfg[c][2]);
        for (int avg = 0; avg < 2; avg++) {
            psgd_ref_init(shape, 6, cfg[c][2], 3);
            run_case(cfg[c][0], cfg[c][1], 737, avg, spec, ref_powersgd, 1e-4, "powersgd");
            psgd_ref_free();
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
