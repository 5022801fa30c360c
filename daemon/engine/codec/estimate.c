/*
 * What auto decides from (policy.c), measured by this node:
 *
 * - The link: every allreduce of a job on several nodes that sent at least COLL_EST_MIN_BYTES
 *   gives a sample, bytes sent / (seconds from the later of its start and the previous node's
 *   descriptor to completion - seconds of codec work): a peer still in its backward pass is
 *   not a slow link (counted from the start alone, loopback looked like 1 Gbit/s on a busy
 *   2-core machine, and auto compressed where it only cost). The estimate is the fastest of
 *   the last COLL_EST_SAMPLES samples: waiting for a late node only ever makes a sample slower,
 *   so the fastest is the closest to the link. Compressed
 *   operations of smaller messages give no sample (their time is latency, not bandwidth); the
 *   estimate then keeps the samples of the last large transfers.
 * - A compressor's cost: seconds of codec work per element of the bucket on this node (the
 *   local sum with the residual, encoding, the server's sum, decoding), an exponential moving
 *   average (weight 1/4) over the operations that ran it. Before the first one it is
 *   calibrated once per job by running that method's kernels on CALIBRATE_ELEMS synthetic
 *   elements (a few milliseconds on the loop thread).
 */
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "engine/codec/internal.h"
#include "kernels/compress.h"
#include "kernels/exec.h"

#define CALIBRATE_ROWS 512
#define CALIBRATE_ELEMS (CALIBRATE_ROWS * CALIBRATE_ROWS)
#define COST_EWMA 0.25

double coll__est_bandwidth(const coll_estimate_t *e)
{
    uint32_t n = e->nbw < COLL_EST_SAMPLES ? e->nbw : COLL_EST_SAMPLES;
    double best = 0.0;

    for (uint32_t i = 0; i < n; i++) {
        best = e->bw[i] > best ? e->bw[i] : best;
    }
    return best;
}

void coll__est_record(coll_estimate_t *e, coll_compress_method_t method, uint64_t count,
                      uint64_t bytes, double seconds, double codec_s)
{
    double transfer_s = seconds - codec_s;

    if (bytes >= COLL_EST_MIN_BYTES && transfer_s > 0.0) {
        e->bw[e->nbw++ % COLL_EST_SAMPLES] = (double)bytes / transfer_s;
    }
    if (method != COLL_COMPRESS_NONE && count > 0 && (unsigned)method < COLL_COMPRESS_COUNT) {
        double c = codec_s / (double)count;
        e->cost[method] = e->cost[method] > 0.0 ? (1 - COST_EWMA) * e->cost[method] + COST_EWMA * c
                                                : c;
    }
}

/* The kernels of one operation of @p m on @p n elements of @p x (scratch in @p w), with the
 * host's executor (the buffers are malloc's). */
static void calibrate_run(const coll_compression_t *m, float *x, float *e, float *acc,
                          uint8_t *w, size_t wbytes, size_t n)
{
    const coll_exec_t *ex = coll_exec_get(COLL_MEM_HOST);
    uint16_t *h = (uint16_t *)(void *)w;
    int32_t p;
    float scale;

    switch (m->method) {
    case COLL_COMPRESS_FP16:
    case COLL_COMPRESS_BF16: {
        coll_cast_format_t f = m->method == COLL_COMPRESS_FP16 ? COLL_CAST_FP16 : COLL_CAST_BF16;
        ex->cast_encode(f, x, e, n, h, &p);
        ex->cast_accumulate(f, h, n, p, 1.0f, acc);
        ex->cast_decode(f, h, n, p, acc);
        break;
    }
    case COLL_COMPRESS_ONEBIT:
        ex->onebit_encode(COLL_ONEBIT_SCALE_L2, x, e, n, w, &scale);
        ex->onebit_accumulate(w, n, scale, 1.0f, acc);
        ex->onebit_decode(w, n, scale, 1.0f, acc);
        break;
    case COLL_COMPRESS_TOPK: {
        size_t k = coll_topk_k(n, m->ratio);
        coll_topk_args_t a = {x, e, n, k, COLL_TOPK_SELECT_AUTO, w + 8 * k, wbytes - 8 * k,
                              (uint32_t *)(void *)w, (float *)(void *)(w + 4 * k), NULL};
        ex->topk_compress(&a);
        ex->zero(acc, n * sizeof(float));
        ex->topk_accumulate(a.indices, a.values, k, 1.0f, acc, n);
        break;
    }
    default: { /* PowerSGD on a square matrix */
        unsigned r = m->rank < CALIBRATE_ROWS ? m->rank : CALIBRATE_ROWS;
        float *pq = (float *)(void *)w;
        ex->lowrank_ef_mul_q(x, e, CALIBRATE_ROWS, CALIBRATE_ROWS, acc, r, pq);
        ex->lowrank_mul_mt(e, CALIBRATE_ROWS, CALIBRATE_ROWS, pq, r, acc);
        ex->lowrank_residual(pq, acc, CALIBRATE_ROWS, CALIBRATE_ROWS, r, e, NULL);
        break;
    }
    }
}

/* Seconds per element of @p m's kernels on synthetic data; 0 when out of memory. */
static double calibrate(const coll_compression_t *m)
{
    const coll_exec_t *ex = coll_exec_get(COLL_MEM_HOST);
    size_t n = CALIBRATE_ELEMS, wbytes = 8 * n + ex->topk_scratch_bytes(n, n / 100 + 1);
    float *x = malloc(3 * n * sizeof(float));
    uint8_t *w = malloc(wbytes);
    uint64_t t0;
    double s = 0.0;

    if (x != NULL && w != NULL) {
        for (size_t i = 0; i < n; i++) {
            x[i] = (float)((int64_t)((i * 2654435761u) % 2001) - 1000) * 1e-3f;
        }
        memset(x + n, 0, 2 * n * sizeof(float));
        t0 = coll_stats_now_ns();
        calibrate_run(m, x, x + n, x + 2 * n, w, wbytes, n);
        s = (double)(coll_stats_now_ns() - t0) * 1e-9 / (double)n;
    }
    free(x);
    free(w);
    return s;
}

double coll__est_cost(coll_estimate_t *e, const coll_compression_t *run)
{
    unsigned m = (unsigned)run->method;

    if (m >= COLL_COMPRESS_COUNT) {
        return 0.0;
    }
    if (e->cost[m] <= 0.0) {
        e->cost[m] = calibrate(run);
    }
    return e->cost[m];
}
