/*
 * Bytes on the wire, a feature of the operations it counts (engine/feature.h): every allreduce and
 * parameter-service step (an allreduce whose all-gather carries the updated parameters) of a job
 * on several nodes is counted under the method it ran (none when uncompressed), with the bytes
 * this node sent for it (data messages, from coll_op_send(); not the 128-byte descriptors) and
 * what the uncompressed ring would have sent, (N - 1) / N x count x (the reduce-scatter's element
 * bytes + the all-gather's): 8 per element for float32, 6 for 16-bit floats (float32 partials,
 * 16-bit results). Per job in /status and /metrics (collectived_compression_*{job_id, method}),
 * per daemon in /metrics, per operation in the completion (coll_req_wire_bytes()). The link
 * estimate of auto is fed from here too, by allreduces only (a step's time includes its
 * optimizer).
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

/* Every allreduce and step of a job on several nodes is counted; the job's compression state
 * (its counters) is the feature's state. */
static coll_status_t wire_attach(coll_op_t *op, void **state)
{
    if ((op->desc.coll == COLL_KIND_ALLREDUCE || op->desc.coll == COLL_KIND_PS_STEP) &&
        op->job->nnodes > 1) {
        *state = coll__codec_job(op->job); /* NULL when out of memory: not counted */
    }
    return COLL_OK;
}

/* Count @p op's bytes under the method it ran, fill the completion's wire and dense bytes, and
 * give the link estimate a sample. */
static void wire_done(coll_op_t *op, void *state, coll_status_t status, coll_ctl_times_t *t)
{
    coll_codec_job_t *cj = state;
    const coll_codec_op_t *c = coll__codec_op(op);
    coll_compress_method_t m = c != NULL ? c->run.method : COLL_COMPRESS_NONE;
    coll_account_t *a;
    double seconds;

    t->wire_bytes = op->sent_bytes;
    t->dense_bytes = dense_bytes(op);
    if (status != COLL_OK) {
        return;
    }
    a = &cj->acct[m];
    a->ops++;
    a->wire_bytes += t->wire_bytes;
    a->dense_bytes += t->dense_bytes;
    coll_stats_compressed(&op->job->d->stats, m, t->wire_bytes, t->dense_bytes);
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

const coll_op_feature_t coll_wire_feature = {
    .name = "wire",
    .attach = wire_attach,
    .done = wire_done,
};
