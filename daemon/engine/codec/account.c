/*
 * Bytes on the wire: every allreduce and parameter-service step (an allreduce whose all-gather
 * carries the updated parameters) of a job on several nodes is counted under the method it
 * ran (none when uncompressed), with the bytes this node sent for it (data messages, from
 * coll_op_send(); not the 128-byte descriptors) and what the uncompressed ring would have sent,
 * (N - 1) / N x count x (the reduce-scatter's element bytes + the all-gather's): 8 per element
 * for float32, 6 for 16-bit floats (float32 partials, 16-bit results). Per job in /status and
 * /metrics (collectived_compression_*{job_id, method}), per daemon in /metrics, per operation in
 * the completion (coll_req_wire_bytes()). The link estimate of auto is fed from here too, by
 * allreduces only (a step's time includes its optimizer).
 */
#include "core/stats.h"
#include "engine/codec/internal.h"
#include "engine/combine.h"

/* What the uncompressed ring sends per node for @p op. */
static uint64_t dense_bytes(const coll_op_t *op)
{
    uint32_t n = op->job->nnodes;
    double per = (double)coll_partial_esize((coll_dtype_t)op->desc.dtype,
                                            (coll_redop_t)op->desc.op) +
                 (double)op->esize;

    return (uint64_t)((double)(n - 1) / n * (double)op->desc.count * per + 0.5);
}

void coll__account_op(coll_op_t *op, coll_status_t status, coll_ctl_times_t *t)
{
    coll_job_t *job = op->job;
    coll_codec_op_t *c = op->codec;
    coll_compress_method_t m = c != NULL ? c->run.method : COLL_COMPRESS_NONE;
    coll_codec_job_t *cj;
    coll_account_t *a;
    double seconds;

    if ((op->desc.coll != COLL_KIND_ALLREDUCE && op->desc.coll != COLL_KIND_PS_STEP) ||
        job->nnodes < 2 || (cj = coll__codec_job(job)) == NULL) {
        return;
    }
    t->wire_bytes = op->sent_bytes;
    t->dense_bytes = dense_bytes(op);
    if (status != COLL_OK) {
        return;
    }
    a = &cj->acct[m];
    a->ops++;
    a->wire_bytes += t->wire_bytes;
    a->dense_bytes += t->dense_bytes;
    coll_stats_compressed(&job->d->stats, m, t->wire_bytes, t->dense_bytes);
    if (op->desc.coll != COLL_KIND_ALLREDUCE) {
        return;
    }
    /* From when the previous node was known to be there (estimate.c). */
    seconds = (double)(coll_stats_now_ns() - (op->t_peers_ns > op->t_start_ns ? op->t_peers_ns
                                                                             : op->t_start_ns)) *
              1e-9;
    coll__est_record(&cj->est, m, op->desc.count, op->sent_bytes, seconds,
                     c != NULL ? c->codec_s : 0.0);
}
