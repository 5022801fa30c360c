/*
 * Counters of the daemon's work, fed by one-line hooks in the engine (op.c, job.c, session.c).
 */
#include "stats.h"

#include <string.h>
#include <time.h>
#include <uv.h>

#include "job.h"
#include "op.h"
#include "service.h"
#include "session.h"

/* Operations run from tens of microseconds (a small allreduce on one node) to seconds (a large
 * one over a slow network); a stalled one shows in the status, not here. */
static const double bounds[COLL_STATS_BUCKETS] = {
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
    1e-2, 2.5e-2, 5e-2, 0.1,  0.25,   0.5,  1.0,  2.5,    10.0,
};

static const char *const kind_names[COLL_STATS_KINDS] = {
    "allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "barrier", "send", "recv",
};

static const coll_status_t errors[] = {
#define COLL_STATS_STATUS(name, value, text) COLL_##name,
    COLL_STATUS_MAP(COLL_STATS_STATUS)
#undef COLL_STATS_STATUS
};
#define NERRORS (sizeof(errors) / sizeof(errors[0]))
_Static_assert(NERRORS < COLL_STATS_ERRORS, "raise COLL_STATS_ERRORS");

void coll_stats_init(coll_stats_t *st, uint64_t busbw_min_bytes)
{
    struct timespec ts;

    memset(st, 0, sizeof(*st));
    clock_gettime(CLOCK_REALTIME, &ts);
    st->start_ns = uv_hrtime();
    st->start_wall = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    st->busbw_min_bytes = busbw_min_bytes;
}

double coll_stats_bucket_bound(unsigned i)
{
    return bounds[i];
}

void coll_histogram_observe(coll_histogram_t *h, double seconds)
{
    unsigned i = 0;

    while (i < COLL_STATS_BUCKETS && seconds > bounds[i]) {
        i++;
    }
    h->bucket[i]++;
    h->count++;
    h->sum += seconds;
}

const char *coll_stats_kind_name(unsigned kind)
{
    return kind < COLL_STATS_KINDS ? kind_names[kind] : "unknown";
}

double coll_stats_bus_factor(unsigned kind, uint32_t world)
{
    double n = world > 0 ? (double)world : 1.0;

    switch (kind) {
    case COLL_KIND_ALLREDUCE: return 2.0 * (n - 1.0) / n;
    case COLL_KIND_REDUCE_SCATTER:
    case COLL_KIND_ALLGATHER: return (n - 1.0) / n;
    default: return 1.0;
    }
}

uint64_t coll_stats_op_bytes(unsigned kind, uint64_t count, size_t esize, uint32_t world)
{
    uint64_t bytes = count * esize;

    if (kind == COLL_KIND_REDUCE_SCATTER || kind == COLL_KIND_ALLGATHER) {
        bytes *= world;
    }
    return kind == COLL_KIND_BARRIER ? 0 : bytes;
}

unsigned coll_stats_error_index(coll_status_t status)
{
    for (unsigned i = 0; i < NERRORS; i++) {
        if (errors[i] == status) {
            return i;
        }
    }
    return NERRORS;
}

coll_status_t coll_stats_error_status(unsigned i)
{
    return i < NERRORS ? errors[i] : COLL_OK;
}

uint64_t coll_stats_now_ns(void)
{
    return uv_hrtime();
}

static coll_stats_t *stats_of(const coll_daemon_t *d)
{
    return d != NULL && d->service != NULL ? &d->service->stats : NULL;
}

void coll_stats_op_created(coll_op_t *op)
{
    op->t_submit_ns = uv_hrtime();
}

void coll_stats_op_started(coll_op_t *op)
{
    coll_stats_t *st = stats_of(op->job->d);

    op->t_start_ns = uv_hrtime();
    if (st != NULL && op->desc.coll < COLL_STATS_KINDS) {
        coll_histogram_observe(&st->wait[op->desc.coll],
                               (double)(op->t_start_ns - op->t_submit_ns) / 1e9);
    }
}

static void record_last_large(coll_stats_t *st, const coll_op_t *op, uint64_t bytes, double s)
{
    coll_stats_last_t *l = &st->last_large;

    if (bytes < st->busbw_min_bytes || bytes == 0 || s <= 0) {
        return;
    }
    *l = (coll_stats_last_t){1, op->desc.coll, (uint16_t)op->desc.dtype, op->job->world_size,
                             bytes, s, 0, 0};
    l->algbw = (double)bytes / s;
    l->busbw = l->algbw * coll_stats_bus_factor(op->desc.coll, op->job->world_size);
}

void coll_stats_op_done(coll_op_t *op, coll_status_t status)
{
    coll_stats_t *st = stats_of(op->job->d);
    unsigned kind = op->desc.coll;
    uint64_t start = op->t_start_ns ? op->t_start_ns : op->t_submit_ns, bytes;
    double s = (double)(uv_hrtime() - start) / 1e9;
    coll_stats_cell_t *cell;

    if (st == NULL || kind >= COLL_STATS_KINDS || op->desc.dtype >= COLL_DTYPE_COUNT) {
        return;
    }
    cell = &st->ops[kind][op->desc.dtype];
    if (status != COLL_OK) {
        cell->failed++;
        return;
    }
    bytes = coll_stats_op_bytes(kind, op->desc.count, op->esize, op->job->world_size);
    cell->ok++;
    cell->bytes += bytes;
    coll_histogram_observe(&st->duration[kind], s);
    record_last_large(st, op, bytes, s);
}

void coll_stats_request_done(coll_session_t *s, coll_status_t status)
{
    coll_stats_t *st = stats_of(s->d);

    if (st != NULL && status != COLL_OK) {
        st->request_errors[coll_stats_error_index(status)]++;
    }
}

void coll_stats_job_created(coll_job_t *job)
{
    coll_stats_t *st = stats_of(job->d);

    if (st != NULL) {
        st->jobs_created++;
    }
}

void coll_stats_job_refused(coll_daemon_t *d, coll_status_t status)
{
    coll_stats_t *st = stats_of(d);

    if (st != NULL) {
        st->job_refusals[coll_stats_error_index(status)]++;
    }
}

void coll_stats_job_failed(coll_job_t *job, coll_status_t status)
{
    coll_stats_t *st = stats_of(job->d);

    if (st != NULL) {
        st->job_failures[coll_stats_error_index(status)]++;
    }
}
