/*
 * Counters of the daemon's work, fed with numbers by one-line hooks in the engine, the client
 * link and the job layer.
 */
#include "core/stats.h"

#include <string.h>
#include <time.h>
#include <uv.h>

#include "proto/desc.h"

/* Operations run from tens of microseconds (a small allreduce on one node) to seconds (a large
 * one over a slow network); a stalled one shows in the status, not here. */
static const double bounds[COLL_STATS_BUCKETS] = {
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
    1e-2, 2.5e-2, 5e-2, 0.1,  0.25,   0.5,  1.0,  2.5,    10.0,
};

static const char *const kind_names[COLL_STATS_KINDS] = {
    "allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "barrier", "send", "recv",
    "ps_register", "ps_step", "ps_save", "ps_load", "gather", "scatter", "alltoallv",
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
    case COLL_KIND_ALLREDUCE:
    case COLL_KIND_PS_STEP: return 2.0 * (n - 1.0) / n;
    case COLL_KIND_REDUCE_SCATTER:
    case COLL_KIND_ALLGATHER:
    case COLL_KIND_GATHER:
    case COLL_KIND_SCATTER: return (n - 1.0) / n;
    default: return 1.0;
    }
}

uint64_t coll_stats_op_bytes(unsigned kind, uint64_t count, size_t esize, uint32_t world)
{
    uint64_t bytes = count * esize;

    /* The blocked collectives count the whole buffer of every rank's blocks, as nccl-tests. */
    if (kind == COLL_KIND_REDUCE_SCATTER || kind == COLL_KIND_ALLGATHER ||
        kind == COLL_KIND_GATHER || kind == COLL_KIND_SCATTER) {
        bytes *= world;
    }
    /* The barrier and the parameter service's registration, save and load move no data. */
    return kind == COLL_KIND_BARRIER || (coll_kind_is_ps(kind) && kind != COLL_KIND_PS_STEP)
               ? 0
               : bytes;
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

void coll_stats_op_waited(coll_stats_t *st, unsigned kind, double seconds)
{
    if (kind < COLL_STATS_KINDS) {
        coll_histogram_observe(&st->wait[kind], seconds);
    }
}

static void record_last_large(coll_stats_t *st, const coll_stats_op_t *op, double s)
{
    coll_stats_last_t *l = &st->last_large;

    if (op->bytes < st->busbw_min_bytes || op->bytes == 0 || s <= 0) {
        return;
    }
    *l = (coll_stats_last_t){1, (uint16_t)op->kind, (uint16_t)op->dtype, op->world, op->bytes,
                             s, 0, 0};
    l->algbw = (double)op->bytes / s;
    l->busbw = l->algbw * coll_stats_bus_factor(op->kind, op->world);
}

void coll_stats_op_done(coll_stats_t *st, const coll_stats_op_t *op, double seconds,
                        coll_status_t status)
{
    coll_stats_cell_t *cell;

    if (op->kind >= COLL_STATS_KINDS || op->dtype >= COLL_DTYPE_COUNT ||
        op->compression >= COLL_COMPRESS_COUNT) {
        return;
    }
    cell = &st->ops[op->kind][op->dtype][op->compression];
    if (status != COLL_OK) {
        cell->failed++;
        return;
    }
    cell->ok++;
    cell->bytes += op->bytes;
    coll_histogram_observe(&st->duration[op->kind], seconds);
    record_last_large(st, op, seconds);
}

void coll_stats_shm_done(coll_stats_t *st, unsigned kind, unsigned dtype, uint64_t n,
                         uint64_t bytes)
{
    if (kind < COLL_STATS_KINDS && dtype < COLL_DTYPE_COUNT) {
        st->ops[kind][dtype][COLL_COMPRESS_NONE].ok += n; /* shared memory never compresses */
        st->ops[kind][dtype][COLL_COMPRESS_NONE].bytes += bytes;
        st->shm_ops[kind] += n;
    }
}

void coll_stats_shm_durations(coll_stats_t *st, unsigned kind, const uint64_t *hist,
                              uint64_t sum_ns)
{
    coll_histogram_t *h;

    if (kind >= COLL_STATS_KINDS) {
        return;
    }
    h = &st->duration[kind];
    for (unsigned i = 0; i <= COLL_STATS_BUCKETS; i++) {
        h->bucket[i] += hist[i];
        h->count += hist[i];
    }
    h->sum += (double)sum_ns / 1e9;
}

void coll_stats_shm_posted(coll_stats_t *st, uint64_t n)
{
    st->shm_posted += n;
}

void coll_stats_direct_refused(coll_stats_t *st, uint64_t n)
{
    st->direct_refused += n;
}

void coll_stats_request_done(coll_stats_t *st, coll_status_t status)
{
    if (status != COLL_OK) {
        st->request_errors[coll_stats_error_index(status)]++;
    }
}

void coll_stats_compressed(coll_stats_t *st, unsigned method, uint64_t wire, uint64_t dense)
{
    if (method < COLL_COMPRESS_COUNT) {
        st->compress[method].ops++;
        st->compress[method].wire_bytes += wire;
        st->compress[method].dense_bytes += dense;
    }
}

void coll_stats_job_created(coll_stats_t *st)
{
    st->jobs_created++;
}

void coll_stats_job_refused(coll_stats_t *st, coll_status_t status)
{
    st->job_refusals[coll_stats_error_index(status)]++;
}

void coll_stats_job_failed(coll_stats_t *st, coll_status_t status)
{
    st->job_failures[coll_stats_error_index(status)]++;
}

void coll_stats_refused(coll_stats_t *st, coll_listener_t listener, coll_refusal_t reason)
{
    if (listener < COLL_LISTENERS && reason < COLL_REFUSED_REASONS) {
        st->refused[listener][reason]++;
    }
}

const char *coll_stats_listener_name(unsigned listener)
{
    static const char *const names[COLL_LISTENERS] = {"client", "status", "control"};
    return listener < COLL_LISTENERS ? names[listener] : "?";
}

const char *coll_stats_refusal_name(unsigned reason)
{
    static const char *const names[COLL_REFUSED_REASONS] = {
        "max_connections", "per_address",   "fd_reserve", "fd_limit",
        "auth",            "handshake_bytes", "handshake_timeout", "idle",
        "protocol",        "worker_address"};
    return reason < COLL_REFUSED_REASONS ? names[reason] : "?";
}
