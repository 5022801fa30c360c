/*
 * Test-side helpers of the compression tests over the fake net layer (test_codec.c,
 * test_codec_rules.c): a world of nodes with every rank's buffers, submissions that ask for
 * compression, layouts, and the inputs. Inputs are multiples of 1/64 in [-16, 16], so that sums
 * of a few of them are exact in float32 in any order, and TopK's selection is exact.
 */
#ifndef TEST_CODEC_REF_H
#define TEST_CODEC_REF_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/codec/codec.h"
#include "engine/codec/internal.h"
#include "fake_net.h"
#include "proto/cspec.h"

#define SEG 4096
#define POOL (16u << 20)

static fake_world_t w;

/* Every rank's send and receive buffers (float32, in place unless said otherwise). */
typedef struct {
    void *send[FAKE_MAX_NODES][FAKE_MAX_LOCAL];
    void *recv[FAKE_MAX_NODES][FAKE_MAX_LOCAL];
    uint64_t count;
} cbufs_t;

static uint64_t ref_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Rank r's input element i at step t: a multiple of 1/64 in [-16, 16]. */
static inline float ref_input(uint32_t r, uint32_t t, uint64_t i)
{
    uint64_t h = ref_mix((uint64_t)r << 48 ^ (uint64_t)t << 40 ^ i);
    return (float)((int64_t)(h % 2049) - 1024) / 64.0f;
}

static inline void world_init(uint32_t nodes, uint32_t nlocal)
{
    fake_net_init(&w, nodes, nlocal, SEG, POOL, FAKE_RENDEZVOUS);
}

static inline void bufs_alloc(cbufs_t *b, uint64_t count, size_t esize)
{
    b->count = count;
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            b->send[n][l] = fake_net_alloc(&w, n, l, count * esize + 64);
            b->recv[n][l] = fake_net_alloc(&w, n, l, count * esize + 64);
        }
    }
}

/* Step @p t's inputs into every rank's send buffer; receive buffers to -1000 (no result). */
static inline void bufs_fill(cbufs_t *b, uint32_t t)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            float *s = b->send[n][l], *r = b->recv[n][l];
            for (uint64_t i = 0; i < b->count; i++) {
                s[i] = ref_input(n * w.nlocal + l, t, i);
                r[i] = -1000.0f;
            }
        }
    }
}

static uint64_t off_in(uint32_t n, const void *p)
{
    return (uint64_t)((const uint8_t *)p - coll_pool_base(w.job[n].pool));
}

/* What one submission asks for. */
typedef struct {
    uint64_t key;
    uint32_t dtype, op;
    const char *spec;   /* coll_compression_parse() text */
    uint32_t bucket;
    uint64_t layout;
} csub_t;

static void submit_one(const cbufs_t *b, const csub_t *c, uint32_t n, uint32_t l,
                       const char *spec)
{
    Coll__Wire__Submit s = COLL__WIRE__SUBMIT__INIT;
    coll_compression_t z;

    assert_int_equal(coll_compression_parse(spec, &z), COLL_OK);
    s.req_id = (uint32_t)c->key;
    s.key = c->key;
    s.coll = COLL__WIRE__COLLECTIVE__ALLREDUCE;
    s.dtype = c->dtype;
    s.op = c->op;
    s.count = b->count;
    s.send_offset = off_in(n, b->send[n][l]);
    s.recv_offset = off_in(n, b->recv[n][l]);
    s.layout = c->layout;
    s.compression = coll_cspec_pack(&z, (uint32_t)nearbyint(z.ratio * 1e6));
    s.bucket = c->bucket;
    s.warmup = z.warmup;
    coll_op_submit(&w.job[n], &w.sess[n][l], &s);
}

/* Every rank submits @p c; rank @p odd (global, or -1) asks for @p odd_spec instead. */
static inline void submit_all_c(const cbufs_t *b, const csub_t *c, int odd, const char *odd_spec)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            int me = (int)(n * w.nlocal + l) == odd;
            submit_one(b, c, n, l, me ? odd_spec : c->spec);
        }
    }
    fake_net_run(&w);
}

/* Every rank's completion of @p key has @p status; returns node 0's algorithm name. */
static inline const char *expect_all(uint64_t key, coll_status_t status)
{
    const fake_done_t *d0 = NULL;
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            const fake_done_t *d = fake_net_done(&w, n, l, (uint32_t)key);
            if (d == NULL || d->status != status) {
                fail_msg("key %llu node %u local %u: %s, expected %s (%s)",
                         (unsigned long long)key, n, l, d ? coll_err_name(d->status) : "nothing",
                         coll_err_name(status), d ? d->error : "");
            }
            d0 = d0 != NULL ? d0 : d;
        }
    }
    return d0->algo;
}

/* Register a layout of @p nt tensors (rows, cols pairs) on every node. */
static inline void register_layout(uint64_t layout, const uint64_t *shape, size_t nt)
{
    Coll__Wire__Layout l = COLL__WIRE__LAYOUT__INIT;

    l.layout = layout;
    l.n_shape = 2 * nt;
    l.shape = (uint64_t *)shape;
    for (uint32_t n = 0; n < w.nnodes; n++) {
        w.layout_status = COLL_ERR_IO;
        coll_codec_layout_register(&w.job[n], &w.sess[n][0], &l);
        assert_int_equal(w.layout_status, COLL_OK);
    }
}

/* Node @p n's slot of @p bucket (the engine's own state, to check residuals). */
static inline coll_slot_t *slot_of(uint32_t n, uint32_t bucket)
{
    coll_codec_job_t *cj = w.job[n].engine.codec;
    coll_slot_t *s, *tmp;

    assert_non_null(cj);
    coll_list_for_each_safe(s, tmp, &cj->slots, coll_slot_t, link)
    {
        if (s->bucket == bucket) {
            return s;
        }
    }
    fail_msg("node %u has no slot for bucket %u", n, bucket);
    return NULL;
}

/* The node's current residual (NULL before its first compressed operation). */
static inline const float *residual_of(uint32_t n, uint32_t bucket)
{
    coll_slot_t *s = slot_of(n, bucket);
    return s->pool_bytes > 0 ? s->res[s->cur] : NULL;
}

/* Elements of @p got against @p want within @p tol (absolute); names the first difference. */
static inline void expect_close(const char *what, uint32_t n, const float *got, const double *want,
                         uint64_t count, double tol)
{
    for (uint64_t i = 0; i < count; i++) {
        if (!(fabs((double)got[i] - want[i]) <= tol)) {
            fail_msg("%s: node %u element %llu of %llu: %.9g, expected %.9g (tolerance %g)",
                     what, n, (unsigned long long)i, (unsigned long long)count, got[i], want[i],
                     tol);
        }
    }
}

/* The largest magnitude of @p x. */
static inline double max_abs(const double *x, uint64_t n)
{
    double m = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    }
    return m;
}

#endif
