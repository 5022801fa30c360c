/*
 * The reference models of compress_model.h. Plain loops, a sort for TopK, Gram-Schmidt in
 * double for PowerSGD: slow, obvious, and nothing shared with the engine but the seeded Q.
 */
#include "compress_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/kernels/compress_ref.h"
#include "kernels/cpu/lowrank.h"

#define CM_MAX_NODES 16
#define CM_MAX_T 64

struct cm {
    uint32_t n, l, world;
    uint64_t count;
    float w;
    int ef;
    coll_compression_t z;
    char job[129];
    uint32_t bucket;
    float *e[CM_MAX_NODES], *s[CM_MAX_NODES], *x[CM_MAX_NODES];
    size_t nt;
    uint64_t shape[2 * CM_MAX_T];
    double *q[CM_MAX_T];
    unsigned rank[CM_MAX_T];
};

/* ---- chunks, inputs ------------------------------------------------------------------------ */

static uint64_t chunk_elems(const cm_t *m)
{
    uint64_t per = m->count / m->n + (m->count % m->n != 0);
    return (per + 15) / 16 * 16;
}

static void chunk(const cm_t *m, uint32_t c, uint64_t *off, uint64_t *len)
{
    uint64_t ch = chunk_elems(m), o = (uint64_t)c * ch;
    *off = o < m->count ? o : m->count;
    *len = m->count - *off < ch ? m->count - *off : ch;
}

/* x = residual + every local rank's input, in that order. */
static void gather(cm_t *m, uint32_t t, cm_input_fn in, void *arg)
{
    for (uint32_t n = 0; n < m->n; n++) {
        for (uint64_t i = 0; i < m->count; i++) {
            float x = m->ef ? m->e[n][i] : 0.0f;
            for (uint32_t l = 0; l < m->l; l++) {
                x += in(n * m->l + l, t, i, arg);
            }
            m->x[n][i] = x;
        }
    }
}

/* ---- TopK ---------------------------------------------------------------------------------- */

static const float *sort_key;

static int by_magnitude(const void *a, const void *b)
{
    uint64_t i = *(const uint64_t *)a, j = *(const uint64_t *)b;
    float u = fabsf(sort_key[i]), v = fabsf(sort_key[j]);
    return u > v ? -1 : u < v ? 1 : (i > j) - (i < j);
}

static uint64_t topk_k(const cm_t *m)
{
    double k = ceil((double)m->count * m->z.ratio * (1.0 - 0x1p-40));
    return m->count == 0 ? 0 : k < 1 ? 1 : k > (double)m->count ? m->count : (uint64_t)k;
}

static void topk(cm_t *m, double *out)
{
    uint64_t k = topk_k(m), *idx = malloc((m->count + 1) * sizeof(uint64_t));
    float *acc = calloc(m->count + 1, sizeof(float));

    for (uint32_t n = 0; n < m->n; n++) {
        for (uint64_t i = 0; i < m->count; i++) {
            idx[i] = i;
        }
        sort_key = m->x[n];
        qsort(idx, m->count, sizeof(uint64_t), by_magnitude);
        memcpy(m->e[n], m->x[n], m->count * sizeof(float));
        for (uint64_t j = 0; j < k; j++) {
            acc[idx[j]] += (float)((double)m->w * m->x[n][idx[j]]);
            m->e[n][idx[j]] = 0.0f;
        }
    }
    for (uint64_t i = 0; i < m->count; i++) {
        out[i] = acc[i];
    }
    free(idx);
    free(acc);
}

/* ---- fp16, bf16, 1-bit ----------------------------------------------------------------------- */

typedef struct {
    double *unit; /* the 16-bit value, or +-1 */
    int p;        /* 16-bit: the scale exponent */
    float scale;  /* 1-bit */
} span_t;

static void encode_span(const cm_t *m, const float *x, uint64_t n, span_t *sp)
{
    double mx = 0.0, ss = 0.0;
    int e = 0;

    for (uint64_t i = 0; i < n; i++) {
        mx = fabs(x[i]) > mx ? fabs(x[i]) : mx;
        ss += (double)x[i] * x[i];
    }
    if (m->z.method == COLL_COMPRESS_ONEBIT) {
        sp->scale = n > 0 ? (float)sqrt(ss / (double)n) : 0.0f;
        for (uint64_t i = 0; i < n; i++) {
            sp->unit[i] = x[i] < 0.0f ? -1.0 : 1.0;
        }
        return;
    }
    frexp(mx, &e);
    sp->p = mx == 0.0 ? 0 : 15 - e;
    sp->p = sp->p < -113 ? -113 : sp->p > 126 ? 126 : sp->p;
    for (uint64_t i = 0; i < n; i++) {
        double v = ldexp(x[i], sp->p);
        sp->unit[i] = m->z.method == COLL_COMPRESS_FP16 ? ref_f16_value(ref_to_f16(v))
                                                        : ref_bf16_value(ref_to_bf16(v));
    }
}

/* acc (+)= unit x float32(weight x factor), one float32 product per element; set: =. */
static void apply_span(const cm_t *m, const span_t *sp, uint64_t n, float weight, float *acc,
                       int set)
{
    float f = m->z.method == COLL_COMPRESS_ONEBIT ? (float)((double)sp->scale * weight)
                                                  : (float)(weight * ldexp(1.0, -sp->p));
    for (uint64_t i = 0; i < n; i++) {
        float d = (float)(sp->unit[i] * f);
        acc[i] = set ? d : acc[i] + d;
    }
}

/* The server of chunk c: y = s + contributions, re-encoded; out = decode(y). @p reduced: the
 * parameter service's owner instead, out = 0 + the contributions, no server residual. */
static void server(cm_t *m, span_t sp[][CM_MAX_NODES], uint32_t c, double *out, int reduced)
{
    uint64_t off, len;
    float *y, *dec;
    span_t s;

    chunk(m, c, &off, &len);
    y = calloc(len + 1, sizeof(float));
    dec = calloc(len + 1, sizeof(float));
    s.unit = calloc(len + 1, sizeof(double));
    if (m->ef && !reduced) {
        memcpy(y, m->s[c], len * sizeof(float));
    }
    for (uint32_t n = 0; n < m->n; n++) {
        apply_span(m, &sp[n][c], len, m->w, y, 0);
    }
    if (reduced) {
        for (uint64_t i = 0; i < len; i++) {
            out[off + i] = y[i];
        }
    } else {
        encode_span(m, y, len, &s);
        apply_span(m, &s, len, 1.0f, dec, 1);
        for (uint64_t i = 0; i < len; i++) {
            out[off + i] = dec[i];
            m->s[c][i] = y[i] - dec[i];
        }
    }
    free(s.unit);
    free(y);
    free(dec);
}

static void twosided(cm_t *m, double *out, int reduced)
{
    static span_t sp[CM_MAX_NODES][CM_MAX_NODES];

    for (uint32_t n = 0; n < m->n; n++) {
        for (uint32_t c = 0; c < m->n; c++) {
            uint64_t off, len;
            chunk(m, c, &off, &len);
            sp[n][c].unit = calloc(len + 1, sizeof(double));
            encode_span(m, m->x[n] + off, len, &sp[n][c]);
            memcpy(m->e[n] + off, m->x[n] + off, len * sizeof(float));
            apply_span(m, &sp[n][c], len, -1.0f, m->e[n] + off, 0);
        }
    }
    for (uint32_t c = 0; c < m->n; c++) {
        server(m, sp, c, out, reduced);
    }
    for (uint32_t n = 0; n < m->n; n++) {
        for (uint32_t c = 0; c < m->n; c++) {
            free(sp[n][c].unit);
        }
    }
}

/* ---- PowerSGD -------------------------------------------------------------------------------- */

/* The engine's documented seed of tensor @p t's first Q (engine/codec/powersgd.c). */
static uint64_t psgd_seed(const cm_t *m, size_t t)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = m->job; *p != '\0'; p++) {
        h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    }
    return h ^ ((uint64_t)m->bucket << 32) ^ t;
}

/* Gram-Schmidt, twice per column; a column of zeros stays zero. */
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

static void psgd_init(cm_t *m)
{
    for (size_t t = 0; t < m->nt; t++) {
        uint64_t n = m->shape[2 * t], c = m->shape[2 * t + 1], mn = n < c ? n : c;
        unsigned r = mn < m->z.rank ? (unsigned)mn : m->z.rank;
        float *q0;
        if ((double)(n + c) * r * 2.0 >= (double)n * c) {
            continue;
        }
        m->rank[t] = r;
        m->q[t] = calloc(c * r, sizeof(double));
        q0 = calloc(c * r, sizeof(float));
        coll_lowrank_init_q(q0, c, r, psgd_seed(m, t));
        for (uint64_t i = 0; i < c * r; i++) {
            m->q[t][i] = q0[i];
        }
        free(q0);
    }
}

/* One compressed matrix at @p off. */
static void psgd_matrix(cm_t *m, size_t t, uint64_t off, double a, double *out)
{
    uint64_t n = m->shape[2 * t], c = m->shape[2 * t + 1];
    unsigned k = m->rank[t];
    double *p = calloc(n * k, sizeof(double)), *q = m->q[t];

    gs(q, c, k);
    for (uint32_t v = 0; v < m->n; v++) {
        for (unsigned j = 0; j < k; j++) {
            for (uint64_t i = 0; i < n * c; i++) {
                p[j * n + i / c] += (double)m->x[v][off + i] * q[j * c + i % c];
            }
        }
    }
    gs(p, n, k);
    memset(q, 0, c * k * sizeof(double));
    for (uint32_t v = 0; v < m->n; v++) {
        for (unsigned j = 0; j < k; j++) {
            for (uint64_t i = 0; i < n * c; i++) {
                q[j * c + i % c] += m->w * (double)m->x[v][off + i] * p[j * n + i / c];
            }
        }
    }
    for (uint64_t i = 0; i < n * c; i++) {
        double o = 0.0;
        for (unsigned j = 0; j < k; j++) {
            o += p[j * n + i / c] * q[j * c + i % c];
        }
        out[off + i] = o;
        for (uint32_t v = 0; v < m->n; v++) {
            m->e[v][off + i] = (float)(m->x[v][off + i] - a * o);
        }
    }
    free(p);
}

static void powersgd(cm_t *m, double *out)
{
    double a = m->w != 1.0f ? (double)m->l : (double)m->l / m->world;
    uint64_t off = 0;

    for (size_t t = 0; t < m->nt; t++) {
        uint64_t len = m->shape[2 * t] * m->shape[2 * t + 1];
        if (m->q[t] != NULL) {
            psgd_matrix(m, t, off, a, out);
        }
        for (uint64_t i = 0; m->q[t] == NULL && i < len; i++) {
            out[off + i] = 0.0;
            for (uint32_t v = 0; v < m->n; v++) {
                out[off + i] += m->w * (double)m->x[v][off + i];
                m->e[v][off + i] = 0.0f;
            }
        }
        off += len;
    }
}

/* ---- the model ------------------------------------------------------------------------------- */

cm_t *cm_new(uint32_t nodes, uint32_t local, uint64_t count, int avg, const char *spec,
             const char *job, uint32_t bucket, const uint64_t *shape, size_t nt)
{
    cm_t *m = calloc(1, sizeof(*m));

    if (m == NULL || nodes > CM_MAX_NODES || nt > CM_MAX_T ||
        coll_compression_parse(spec, &m->z) != COLL_OK) {
        free(m);
        return NULL;
    }
    m->n = nodes;
    m->l = local;
    m->world = nodes * local;
    m->count = count;
    m->w = avg ? 1.0f / (float)m->world : 1.0f;
    m->z.ratio = nearbyint(m->z.ratio * 1e6) / 1e6; /* what travels: millionths */
    m->ef = !(m->z.flags & COLL_COMPRESS_NO_EF);
    snprintf(m->job, sizeof(m->job), "%s", job);
    m->bucket = bucket;
    m->nt = nt;
    if (nt > 0) {
        memcpy(m->shape, shape, 2 * nt * sizeof(uint64_t));
    }
    for (uint32_t n = 0; n < nodes; n++) {
        m->e[n] = calloc(count + 1, sizeof(float));
        m->s[n] = calloc(count + 1, sizeof(float));
        m->x[n] = calloc(count + 1, sizeof(float));
    }
    if (m->z.method == COLL_COMPRESS_POWERSGD) {
        psgd_init(m);
    }
    return m;
}

void cm_step(cm_t *m, uint32_t step, cm_input_fn in, void *arg, double *out)
{
    gather(m, step, in, arg);
    switch (m->z.method) {
    case COLL_COMPRESS_TOPK: topk(m, out); break;
    case COLL_COMPRESS_POWERSGD: powersgd(m, out); break;
    default: twosided(m, out, 0); break;
    }
}

void cm_step_reduced(cm_t *m, uint32_t step, cm_input_fn in, void *arg, double *out)
{
    if (m->z.method == COLL_COMPRESS_POWERSGD) {
        return;
    }
    gather(m, step, in, arg);
    if (m->z.method == COLL_COMPRESS_TOPK) {
        topk(m, out);
    } else {
        twosided(m, out, 1);
    }
}

const float *cm_residual(const cm_t *m, uint32_t node)
{
    return m->e[node];
}

const float *cm_server_residual(const cm_t *m, uint32_t node, uint64_t *len)
{
    uint64_t off;
    int two = m->z.method == COLL_COMPRESS_FP16 || m->z.method == COLL_COMPRESS_BF16 ||
              m->z.method == COLL_COMPRESS_ONEBIT;

    chunk(m, node, &off, len);
    *len = two ? *len : 0;
    return m->s[node];
}

double cm_rel_tolerance(const cm_t *m)
{
    return m->z.method == COLL_COMPRESS_TOPK ? 1e-7
           : m->z.method == COLL_COMPRESS_POWERSGD ? 1e-4 : 1e-6;
}

void cm_free(cm_t *m)
{
    if (m == NULL) {
        return;
    }
    for (uint32_t n = 0; n < m->n; n++) {
        free(m->e[n]);
        free(m->s[n]);
        free(m->x[n]);
    }
    for (size_t t = 0; t < m->nt; t++) {
        free(m->q[t]);
    }
    free(m);
}
