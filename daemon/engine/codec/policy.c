/*
 * What an operation that asked for compression runs, decided alike on every node from what
 * they agreed on (the descriptor) and what they all saw (their bucket's operations):
 *
 *  1. A job on one node is exact: nothing compresses (compression is only ever between nodes).
 *  2. Fallbacks, from the descriptor alone: an operation other than an allreduce with SUM or AVG
 *     or a parameter-service step (engine/stage.h: an averaged allreduce with a stage),
 *     a datatype other than float32, float16 and bfloat16, PowerSGD without registered shapes or
 *     with no matrix that compression would shrink, TopK beyond 2^32 - 1 elements. Such an
 *     operation runs uncompressed, exactly; logged once per job and reason, counted.
 *  3. Warm-up: the first `warmup` operations of the bucket (since its last reset) run
 *     uncompressed.
 *  4. Auto: what the root chose for this operation during the bucket's previous one (none for
 *     the first). The root's choice rides along every auto operation to every node (the policy
 *     message; op.c waits for it), and every node applies it when that operation completes, so
 *     all of them run the same method at the same operation of the bucket.
 *
 * Auto's rule (coll__policy_choose(), on node 0 only): for the candidates none, fp16, 1-bit,
 * TopK 1% and PowerSGD rank 2 (when the bucket has a matrix worth compressing), the estimated
 * time of the bucket's allreduce is
 *     T = cost x count + wire bytes / link + rounds x COLL_AUTO_ROUND_S
 * with the link speed and the cost per element measured on this node (estimate.c), the wire
 * bytes of each method's own formula, and for none the ring's bytes and 2 (N - 1) rounds. The
 * fastest candidate wins, but the current choice stays unless the winner is estimated more
 * than COLL_AUTO_HYSTERESIS faster (no flapping between near-equal methods). Until a link speed
 * was measured (an uncompressed operation of COLL_EST_MIN_BYTES or more) the choice stays
 * none.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "common/compression.h"
#include "engine/codec/internal.h"
#include "engine/combine.h"
#include "kernels/compress.h"
#include "proto/cspec.h"

/** PowerSGD's min_compression_rate (PyTorch's default): compress an n x m matrix only when
 *  (n + m) r x 2 < n m. */
#define POWERSGD_MIN_RATE 2.0

static const char *const fallback_names[COLL_FALLBACK_REASONS] = {
    [COLL_FALLBACK_OP] = "operation",        [COLL_FALLBACK_DTYPE] = "dtype",
    [COLL_FALLBACK_SHAPES] = "no_shapes",    [COLL_FALLBACK_NOMATRIX] = "no_matrix",
    [COLL_FALLBACK_COUNT_MAX] = "count",
};

const char *coll__fallback_name(coll_fallback_t reason)
{
    return (unsigned)reason < COLL_FALLBACK_REASONS ? fallback_names[reason] : "unknown";
}

static void fallback(coll_op_t *op, coll_fallback_t reason, const char *why)
{
    coll_codec_job_t *cj = op->job->engine.codec;
    char nm[48];

    if (cj == NULL) {
        return;
    }
    cj->fallbacks[reason]++;
    if (!(cj->logged & (1u << reason))) {
        cj->logged |= 1u << reason;
        coll_desc_name(&op->desc, nm, sizeof(nm));
        coll_info(COLL_SUB_JOB, "job %s: %s runs uncompressed: %s (said once per job)",
                  op->job->id, nm, why);
    }
}

/* Why the descriptor alone rules compression out, or COLL_FALLBACK_REASONS. */
static coll_fallback_t ruled_out(const coll_desc_t *d, const char **why)
{
    if ((d->coll != COLL_KIND_ALLREDUCE && d->coll != COLL_KIND_PS_STEP) ||
        (d->op != COLL_SUM && d->op != COLL_AVG)) {
        *why = "compression applies to allreduce with sum or avg (and the parameter service's "
               "steps) only";
        return COLL_FALLBACK_OP;
    }
    if (d->dtype != COLL_FLOAT32 && d->dtype != COLL_FLOAT16 && d->dtype != COLL_BFLOAT16) {
        *why = "compression applies to float32, float16 and bfloat16 only";
        return COLL_FALLBACK_DTYPE;
    }
    return COLL_FALLBACK_REASONS;
}

/* Whether PowerSGD at @p rank compresses some matrix of @p l. */
static int has_matrix(const coll_tensor_layout_t *l, unsigned rank)
{
    for (size_t t = 0; l != NULL && t < l->ntensors; t++) {
        uint64_t rows = l->shape[2 * t], cols = l->shape[2 * t + 1];
        if (coll_lowrank_should_compress(rows, cols, coll_lowrank_rank(rows, cols, rank),
                                         POWERSGD_MIN_RATE)) {
            return 1;
        }
    }
    return 0;
}

/* A method that cannot run this bucket, or COLL_FALLBACK_REASONS. */
static coll_fallback_t cannot_run(const coll_op_t *op, const coll_codec_op_t *c,
                                  const coll_compression_t *m, const char **why)
{
    if (m->method == COLL_COMPRESS_POWERSGD && c->layout == NULL) {
        *why = "PowerSGD needs the bucket's tensor shapes (coll_layout_register())";
        return COLL_FALLBACK_SHAPES;
    }
    if (m->method == COLL_COMPRESS_POWERSGD && !has_matrix(c->layout, m->rank)) {
        *why = "PowerSGD finds no matrix in the bucket that compression would shrink";
        return COLL_FALLBACK_NOMATRIX;
    }
    if (m->method == COLL_COMPRESS_TOPK && op->desc.count > COLL_TOPK_MAX_COUNT) {
        *why = "TopK's indices are 32 bits";
        return COLL_FALLBACK_COUNT_MAX;
    }
    return COLL_FALLBACK_REASONS;
}

void coll__policy_resolve(coll_op_t *op, coll_codec_op_t *c)
{
    coll_compression_t m = c->asked;
    coll_fallback_t reason;
    const char *why = "";

    memset(&c->run, 0, sizeof(c->run));
    if (c->slot == NULL || c->slot->ops < c->asked.warmup) {
        return;
    }
    if (m.method == COLL_COMPRESS_AUTO) {
        coll_cspec_unpack(c->slot->auto_next, &m);
        m.flags |= c->asked.flags;
    }
    if (m.method == COLL_COMPRESS_NONE) {
        return;
    }
    if ((reason = cannot_run(op, c, &m, &why)) != COLL_FALLBACK_REASONS) {
        fallback(op, reason, why);
        return;
    }
    m.warmup = c->asked.warmup;
    m.bucket = c->asked.bucket;
    c->run = m;
}

/* The first check, before any slot is taken: 1 when @p op may compress at all. */
int coll__policy_applies(coll_op_t *op, const coll_codec_op_t *c)
{
    const char *why = "";
    coll_fallback_t reason;

    if (c->asked.method == COLL_COMPRESS_NONE || op->job->nnodes == 1) {
        return 0;
    }
    if ((reason = ruled_out(&op->desc, &why)) != COLL_FALLBACK_REASONS) {
        fallback(op, reason, why);
        return 0;
    }
    return 1;
}

/* The estimated seconds of @p m for @p op (internal.h's model). */
static double estimate(coll_op_t *op, const coll_codec_op_t *c, const coll_compression_t *m,
                       double bw)
{
    coll_codec_job_t *cj = op->job->engine.codec;
    uint32_t n = op->job->nnodes;
    uint64_t count = op->desc.count;
    const coll_cx_codec_t *codec = coll__cx_codec(m->method);

    if (codec == NULL) { /* none: the ring, float32 partials of 16-bit floats both ways */
        double es = (double)coll_partial_esize((coll_dtype_t)op->desc.dtype,
                                               (coll_redop_t)op->desc.op);
        return 2.0 * (n - 1) / n * (double)count * es / bw + 2.0 * (n - 1) * COLL_AUTO_ROUND_S;
    }
    return coll__est_cost(&cj->est, m) * (double)count +
           codec->wire_bytes(count, n, m, c->layout) / bw + codec->rounds * COLL_AUTO_ROUND_S;
}

static const coll_compression_t candidates[] = {
    {COLL_COMPRESS_NONE, 0.0, 0, 0, 0, 0},    {COLL_COMPRESS_FP16, 0.0, 0, 0, 0, 0},
    {COLL_COMPRESS_ONEBIT, 0.0, 0, 0, 0, 0},  {COLL_COMPRESS_TOPK, 0.01, 0, 0, 0, 0},
    {COLL_COMPRESS_POWERSGD, 0.0, 2, 0, 0, 0},
};

uint64_t coll__policy_choose(coll_op_t *op, const coll_codec_op_t *c, char *why, size_t len)
{
    double bw = coll__est_bandwidth(&op->job->engine.codec->est), t_cur = HUGE_VAL, t_best = 0;
    uint64_t cur = c->slot->auto_next, best = cur;
    int n = snprintf(why, len, "link %.1f MB/s:", bw / 1e6);
    const char *dummy;

    if (bw <= 0.0) {
        snprintf(why, len, "no link speed measured yet");
        return cur;
    }
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        const coll_compression_t *m = &candidates[i];
        uint64_t spec = coll_cspec_pack(m, coll__compress_ratio_units(m->ratio));
        double t;
        if (cannot_run(op, c, m, &dummy) != COLL_FALLBACK_REASONS) {
            continue;
        }
        t = estimate(op, c, m, bw);
        if (n > 0 && (size_t)n < len) {
            n += snprintf(why + n, len - (size_t)n, " %s %.2f ms",
                          coll_compress_method_name(m->method), t * 1e3);
        }
        if (spec == cur) {
            t_cur = t;
        }
        if (i == 0 || t < t_best) {
            t_best = t;
            best = spec;
        }
    }
    return best != cur && t_best < (1.0 - COLL_AUTO_HYSTERESIS) * t_cur ? best : cur;
}
