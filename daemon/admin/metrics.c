/*
 * GET /metrics: the Prometheus text exposition format 0.0.4. Counters come from stats.c; gauges
 * (jobs, pools, peers, pending operations) are read from the live tables; the devices' come
 * from admin/devices.c. A family with no
 * sample yet is left out. `promtool check metrics` accepts the output (tests/ops). A job is
 * labelled job_id, not job: Prometheus gives every series its own "job" (the scrape job).
 */
#include "admin/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/admin.h"
#include "admin/devices.h"
#include "admin/report.h"
#include "base/loopwatch.h"
#include "core/stats.h"
#include "engine/codec/codec.h"
#include "engine/op.h"
#include "engine/shm_watch.h"
#include "ps/ps.h"

#ifndef COLL_DAEMON_VERSION
#define COLL_DAEMON_VERSION "unknown"
#endif

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value with backslash, double quote and newline escaped. */
static void label_value(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"') {
            fputc('\\', f);
            fputc(*v, f);
        } else if (*v == '\n') {
            fputs("\\n", f);
        } else {
            fputc(*v, f);
        }
    }
}

void coll_metrics_family(FILE *f, const char *name, const char *type, const char *help)
{
    family(f, name, type, help);
}

void coll_metrics_label(FILE *f, const char *v)
{
    label_value(f, v);
}

static void job_sample(FILE *f, const char *name, const char *job, double v)
{
    fprintf(f, "%s{job_id=\"", name);
    label_value(f, job);
    fprintf(f, "\"} %.17g\n", v);
}

static void daemon_info(FILE *f, coll_daemon_t *d)
{
    size_t sessions = 0;
    coll_list_t *e;

    for (e = d->sessions.next; e != &d->sessions; e = e->next) {
        sessions++;
    }
    family(f, "collectived_build_info", "gauge", "Version of the running daemon (always 1).");
    fprintf(f, "collectived_build_info{version=\"%s\"} 1\n", COLL_DAEMON_VERSION);
    family(f, "collectived_start_time_seconds", "gauge", "Unix time the daemon started.");
    fprintf(f, "collectived_start_time_seconds %.3f\n", d->stats.start_wall);
    family(f, "collectived_uptime_seconds", "gauge", "Seconds since the daemon started.");
    fprintf(f, "collectived_uptime_seconds %.3f\n", coll_report_uptime(d));
    family(f, "collectived_sessions", "gauge", "Connected trainer processes.");
    fprintf(f, "collectived_sessions %zu\n", sessions);
    family(f, "collectived_loop_stalls_total", "counter",
           "Times the event loop did not turn for longer than loop_stall_ms (one callback "
           "held it, or the whole process was not run).");
    fprintf(f, "collectived_loop_stalls_total %llu\n",
            (unsigned long long)coll_loopwatch_stalls());
    family(f, "collectived_loop_stall_max_seconds", "gauge",
           "Longest time the event loop did not turn since start.");
    fprintf(f, "collectived_loop_stall_max_seconds %.3f\n", coll_loopwatch_longest_s());
}

static void jobs_by_state(FILE *f, coll_daemon_t *d)
{
    unsigned n[4] = {0, 0, 0, 0};
    coll_job_t *job, *tmp;

    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        n[job->state < 4 ? job->state : 3]++;
    }
    family(f, "collectived_jobs", "gauge", "Jobs on this node by state.");
    for (unsigned s = 0; s < 4; s++) {
        fprintf(f, "collectived_jobs{state=\"%s\"} %u\n",
                coll_report_job_state((coll_job_state_t)s), n[s]);
    }
    family(f, "collectived_jobs_created_total", "counter", "Jobs created on this node.");
    fprintf(f, "collectived_jobs_created_total %llu\n",
            (unsigned long long)d->stats.jobs_created);
}

/* Which field of a cell a family shows. */
typedef enum { CELL_OK, CELL_FAILED, CELL_BYTES } cell_field_t;

static void op_counters(FILE *f, const coll_stats_t *st, const char *name, cell_field_t which,
                        const char *help)
{
    int header = 0;

    for (unsigned k = 0; k < COLL_STATS_KINDS; k++) {
        for (unsigned t = 0; t < COLL_DTYPE_COUNT; t++) {
            for (unsigned m = 0; m < COLL_COMPRESS_COUNT; m++) {
                const coll_stats_cell_t *c = &st->ops[k][t][m];
                uint64_t v = which == CELL_OK     ? c->ok
                             : which == CELL_FAILED ? c->failed
                                                    : c->bytes;
                if (c->ok == 0 && c->failed == 0) {
                    continue;
                }
                if (!header) {
                    family(f, name, "counter", help);
                    header = 1;
                }
                fprintf(f, "%s{collective=\"%s\",dtype=\"%s\",compression=\"%s\"} %llu\n",
                        name, coll_stats_kind_name(k), coll_dtype_name((coll_dtype_t)t),
                        coll_compress_method_name((coll_compress_method_t)m),
                        (unsigned long long)v);
            }
        }
    }
}

static void histogram(FILE *f, const char *name, const char *help, const coll_histogram_t *h)
{
    int header = 0;

    for (unsigned k = 0; k < COLL_STATS_KINDS; k++) {
        uint64_t cum = 0;
        if (h[k].count == 0) {
            continue;
        }
        if (!header) {
            family(f, name, "histogram", help);
            header = 1;
        }
        for (unsigned i = 0; i < COLL_STATS_BUCKETS; i++) {
            cum += h[k].bucket[i];
            fprintf(f, "%s_bucket{collective=\"%s\",le=\"%g\"} %llu\n", name,
                    coll_stats_kind_name(k), coll_stats_bucket_bound(i), (unsigned long long)cum);
        }
        fprintf(f, "%s_bucket{collective=\"%s\",le=\"+Inf\"} %llu\n", name,
                coll_stats_kind_name(k), (unsigned long long)h[k].count);
        fprintf(f, "%s_sum{collective=\"%s\"} %.9f\n", name, coll_stats_kind_name(k), h[k].sum);
        fprintf(f, "%s_count{collective=\"%s\"} %llu\n", name, coll_stats_kind_name(k),
                (unsigned long long)h[k].count);
    }
}

static void last_large(FILE *f, const coll_stats_t *st)
{
    static const struct {
        const char *name, *help;
    } gauges[] = {
        {"collectived_last_large_operation_busbw_bytes_per_second",
         "Bus bandwidth of the last large operation (nccl-tests convention)."},
        {"collectived_last_large_operation_algbw_bytes_per_second",
         "Algorithm bandwidth (size / time) of the last large operation."},
        {"collectived_last_large_operation_bytes", "Size of the last large operation."},
        {"collectived_last_large_operation_seconds", "Duration of the last large operation."},
    };
    const coll_stats_last_t *l = &st->last_large;
    double v[4] = {l->busbw, l->algbw, (double)l->bytes, l->seconds};

    if (!l->valid) {
        return;
    }
    for (unsigned i = 0; i < 4; i++) {
        family(f, gauges[i].name, "gauge", gauges[i].help);
        fprintf(f, "%s{collective=\"%s\",dtype=\"%s\",world_size=\"%u\"} %.17g\n",
                gauges[i].name, coll_stats_kind_name(l->kind),
                coll_dtype_name((coll_dtype_t)l->dtype), l->world, v[i]);
    }
}

/* Every known kind is shown, zeros included, so that rate() works from the first error. */
static void errors(FILE *f, const char *name, const char *help, const uint64_t *counts)
{
    family(f, name, "counter", help);
    for (unsigned i = 0; i < COLL_STATS_ERRORS; i++) {
        coll_status_t s = coll_stats_error_status(i);
        if (s < 0 || (s == COLL_OK && counts[i] > 0)) {
            fprintf(f, "%s{kind=\"%s\"} %llu\n", name, s < 0 ? coll_err_name(s) : "unknown",
                    (unsigned long long)counts[i]);
        }
    }
}

static void pools_and_pending(FILE *f, coll_daemon_t *d)
{
    static const char *const names[] = {
        "collectived_pool_bytes", "collectived_pool_used_bytes",
        "collectived_operations_pending", "collectived_oldest_pending_operation_age_seconds"};
    static const char *const helps[] = {
        "Size of the job's shared memory pool on this node.",
        "Bytes of the job's pool allocated by its ranks.",
        "Operations of the job submitted on this node and not completed.",
        "Age of the job's oldest operation not completed (0 when none)."};
    uint64_t now = coll_stats_now_ns();
    coll_job_t *job, *tmp;

    if (coll_list_empty(&d->jobs)) {
        return;
    }
    for (unsigned i = 0; i < 4; i++) {
        family(f, names[i], "gauge", helps[i]);
        coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
        {
            size_t size = job->pool != NULL ? coll_pool_size(job->pool) : 0;
            size_t used = job->pool != NULL ? size - coll_pool_free_bytes(job->pool) : 0;
            uint64_t oldest;
            uint32_t pending = coll_report_pending(job, now, &oldest);
            double v[4] = {(double)size, (double)used, (double)pending, (double)oldest / 1e9};
            job_sample(f, names[i], job->id, v[i]);
        }
    }
}

static void peers(FILE *f, coll_daemon_t *d)
{
    int header = 0;
    coll_job_t *job, *tmp;

    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        for (uint32_t n = 0; n < job->nnodes; n++) {
            if (n == job->node_rank) {
                continue;
            }
            if (!header) {
                family(f, "collectived_peer_up", "gauge",
                       "1 while the peer node of the job is reachable, 0 once it left or was lost.");
                header = 1;
            }
            fprintf(f, "collectived_peer_up{job_id=\"");
            label_value(f, job->id);
            fprintf(f, "\",node=\"%u\",host=\"", n);
            label_value(f, job->nodes[n].host);
            fprintf(f, "\"} %d\n", job->nodes[n].gone == COLL_OK);
        }
    }
}

/* How this daemon meets peers, and the connections its listeners refused (net/accept.h). */
static void refusals(FILE *f, const coll_daemon_t *d)
{
    static const char *const modes[] = COLL_PEER_MODE_NAMES;

    family(f, "collectived_peer_auth_mode", "gauge",
           "1 for how this daemon meets peer daemons: authenticated (a node secret), "
           "unauthenticated (allow_unauthenticated_peers), off (no control listener).");
    for (unsigned m = 0; m < 3; m++) {
        fprintf(f, "collectived_peer_auth_mode{mode=\"%s\"} %d\n", modes[m],
                (unsigned)d->auth.mode == m);
    }
    family(f, "collectived_connections_refused_total", "counter",
           "Connections a listener closed before serving them, or times it filled up "
           "(max_connections), by listener and reason.");
    for (unsigned l = 0; l < COLL_LISTENERS; l++) {
        for (unsigned r = 0; r < COLL_REFUSED_REASONS; r++) {
            fprintf(f, "collectived_connections_refused_total{listener=\"%s\",reason=\"%s\"} "
                    "%llu\n", coll_stats_listener_name(l), coll_stats_refusal_name(r),
                    (unsigned long long)d->stats.refused[l][r]);
        }
    }
}

/* Every job's wire bytes, and the parameter service's gauges of the jobs that have one. */
static void wire_and_service(FILE *f, coll_daemon_t *d)
{
    static const char *const names[] = {
        "collectived_ps_state_bytes", "collectived_ps_state_total_bytes",
        "collectived_ps_shard_parameters", "collectived_ps_step",
        "collectived_ps_exchange_bytes_total"};
    static const char *const helps[] = {
        "Optimizer state of this node's shard of the job's parameter service.",
        "Optimizer state of the whole model, every node's shard together.",
        "Parameters of this node's shard of the job's parameter service.",
        "Steps every bucket of the job's parameter service has done.",
        "Bytes this node sent in the parameter service's exchanges of sums of squares."};
    coll_job_t *job, *tmp;
    coll_ps_info_t in;

    if (coll_list_empty(&d->jobs)) {
        return;
    }
    family(f, "collectived_job_wire_bytes_total", "counter",
           "Data-path bytes this node sent to the job's other nodes.");
    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        job_sample(f, "collectived_job_wire_bytes_total", job->id, (double)job->net.bytes_sent);
    }
    for (unsigned i = 0; i < 5; i++) {
        int header = 0;
        coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
        {
            double v[5];
            if (!coll_ps_job_info(job, &in)) {
                continue;
            }
            if (!header) {
                family(f, names[i], i == 4 ? "counter" : "gauge", helps[i]);
                header = 1;
            }
            v[0] = (double)in.state_bytes;
            v[1] = (double)in.state_bytes_total;
            v[2] = (double)in.shard_params;
            v[3] = (double)in.step;
            v[4] = (double)in.exchange_bytes;
            job_sample(f, names[i], job->id, v[i]);
        }
    }
}

/* Bytes between nodes since start, by the method that ran: what was sent, and what the
 * uncompressed ring would have sent. */
static void wire_totals(FILE *f, const coll_stats_t *st)
{
    static const char *const names[] = {"collectived_wire_bytes_total",
                                        "collectived_wire_dense_bytes_total"};
    static const char *const helps[] = {
        "Bytes this node sent to other nodes for allreduces, by compression method.",
        "Bytes the uncompressed ring would have sent for the same allreduces."};

    for (int i = 0; i < 2; i++) {
        int header = 0;
        for (unsigned m = 0; m < COLL_COMPRESS_COUNT; m++) {
            const coll_stats_compress_t *c = &st->compress[m];
            if (c->ops == 0) {
                continue;
            }
            if (!header) {
                family(f, names[i], "counter", helps[i]);
                header = 1;
            }
            fprintf(f, "%s{method=\"%s\"} %llu\n", names[i],
                    coll_compress_method_name((coll_compress_method_t)m),
                    (unsigned long long)(i == 0 ? c->wire_bytes : c->dense_bytes));
        }
    }
}

/* Fallbacks by reason, non-finite gradients, residual memory, the link estimate, and what
 * auto chose per bucket. */
static void compression_gauges(FILE *f, coll_daemon_t *d);

/* "name{job_id="...",label="value"} v" */
static void job_labelled(FILE *f, const char *name, const char *job, const char *label,
                         const char *value, double v)
{
    fprintf(f, "%s{job_id=\"", name);
    label_value(f, job);
    fprintf(f, "\",%s=\"%s\"} %.17g\n", label, value, v);
}

/* Per job and method: operations, bytes sent, the uncompressed ring's bytes. */
static void compression_bytes(FILE *f, coll_daemon_t *d)
{
    static const char *const names[] = {"collectived_compression_operations_total",
                                        "collectived_compression_wire_bytes_total",
                                        "collectived_compression_dense_bytes_total"};
    static const char *const helps[] = {
        "Allreduces and parameter-service steps of the job between nodes, by the compression "
        "method that ran.",
        "Bytes this node sent for them.", "Bytes the uncompressed ring would have sent."};
    coll_codec_job_info_t ci;
    coll_job_t *job, *tmp;

    for (int i = 0; i < 3; i++) {
        int header = 0;
        coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
        {
            for (unsigned m = 0; coll_codec_job_info(job, &ci) && m < COLL_COMPRESS_COUNT; m++) {
                uint64_t v[3] = {ci.ops[m], ci.wire_bytes[m], ci.dense_bytes[m]};
                if (ci.ops[m] == 0) {
                    continue;
                }
                if (!header) {
                    family(f, names[i], "counter", helps[i]);
                    header = 1;
                }
                job_labelled(f, names[i], job->id, "method",
                             coll_compress_method_name((coll_compress_method_t)m), (double)v[i]);
            }
        }
    }
}

/* Per job: resets, fallbacks, non-finite gradients, the residuals' memory, the link. */
static void compression_state(FILE *f, coll_daemon_t *d)
{
    coll_codec_job_info_t ci;
    coll_job_t *job, *tmp;
    int header = 0;

    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        if (!coll_codec_job_info(job, &ci)) {
            continue;
        }
        if (!header) {
            family(f, "collectived_compression_resets_total", "counter",
                   "Residuals reset: the bucket changed (count, dtype, layout, spec) or the "
                   "method that runs did.");
            header = 1;
        }
        job_labelled(f, "collectived_compression_resets_total", job->id, "reason", "bucket",
                     (double)ci.resets);
        job_labelled(f, "collectived_compression_resets_total", job->id, "reason", "method",
                     (double)ci.method_resets);
    }
    compression_gauges(f, d);
}

/* The shared-memory path (engine/shm_watch.h): what the ranks ran without the daemon. */
static void shm_counters(FILE *f, coll_daemon_t *d)
{
    const coll_stats_t *st = &d->stats;

    family(f, "collectived_shm_operations_total", "counter",
           "Operations the local ranks ran among themselves in shared memory, without the daemon "
           "on the data path (counted in collectived_operations_total too).");
    for (unsigned k = 0; k < COLL_STATS_KINDS; k++) {
        if (st->shm_ops[k] > 0) {
            fprintf(f, "collectived_shm_operations_total{collective=\"%s\"} %llu\n",
                    coll_stats_kind_name(k), (unsigned long long)st->shm_ops[k]);
        }
    }
    family(f, "collectived_shm_posted_total", "counter",
           "Collectives the local ranks posted in shared memory (where they meet before running "
           "there or going to the daemon).");
    fprintf(f, "collectived_shm_posted_total %llu\n", (unsigned long long)st->shm_posted);
    family(f, "collectived_direct_refused_total", "counter",
           "Messages the nodes' leader ranks dropped on the direct path between nodes because "
           "they did not carry the job's direct token (never combined; logged).");
    fprintf(f, "collectived_direct_refused_total %llu\n",
            (unsigned long long)st->direct_refused);
}

char *coll_report_metrics(coll_daemon_t *d, size_t *len_p)
{
    const coll_stats_t *st = &d->stats;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    coll_job_t *job, *tmp;

    if (f == NULL) {
        return NULL;
    }
    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        coll_shm_harvest(job); /* the ranks' counts since the last health tick */
    }
    daemon_info(f, d);
    jobs_by_state(f, d);
    op_counters(f, st, "collectived_operations_total", CELL_OK,
                "Operations completed successfully on this node.");
    op_counters(f, st, "collectived_operation_failures_total", CELL_FAILED,
                "Operations completed with an error on this node.");
    op_counters(f, st, "collectived_operation_bytes_total", CELL_BYTES,
                "Bytes of the successful operations (nccl-tests' size: one rank's buffer, the "
                "world-sized one for reduce_scatter and allgather).");
    histogram(f, "collectived_operation_duration_seconds",
              "Time from the start of an operation (every local rank submitted) to completion.",
              st->duration);
    histogram(f, "collectived_operation_wait_seconds",
              "Time from the first local submission of an operation to the last one.", st->wait);
    shm_counters(f, d);
    last_large(f, st);
    errors(f, "collectived_errors_total", "Requests completed with an error, by kind.",
           st->request_errors);
    errors(f, "collectived_job_failures_total", "Jobs that failed on this node, by kind.",
           st->job_failures);
    errors(f, "collectived_job_refusals_total",
           "Jobs this node refused (pool budget, pool, a job token, no node secret), by kind.",
           st->job_refusals);
    pools_and_pending(f, d);
    coll_metrics_devices(f, d);
    wire_and_service(f, d);
    peers(f, d);
    refusals(f, d);
    coll_metrics_process(f);
    wire_totals(f, st);
    compression_bytes(f, d);
    compression_state(f, d);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    *len_p = len;
    return text;
}

static void fallbacks(FILE *f, coll_daemon_t *d)
{
    coll_codec_job_info_t ci;
    coll_job_t *job, *tmp;
    int header = 0;

    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        for (unsigned r = 0; coll_codec_job_info(job, &ci) && r < COLL_CODEC_FALLBACK_REASONS;
             r++) {
            if (!header) {
                family(f, "collectived_compression_fallbacks_total", "counter",
                       "Operations that asked for compression and ran uncompressed, by reason.");
                header = 1;
            }
            job_labelled(f, "collectived_compression_fallbacks_total", job->id, "reason",
                         coll_codec_fallback_name(r), (double)ci.fallbacks[r]);
        }
    }
}

/* auto: 1 for the method each bucket's next operation runs. */
static void auto_choices(FILE *f, coll_daemon_t *d)
{
    coll_codec_bucket_info_t b;
    coll_job_t *job, *tmp;
    int header = 0;

    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        for (size_t i = 0; coll_codec_bucket_info(job, i, &b); i++) {
            if (strncmp(b.asked, "auto", 4) != 0) {
                continue;
            }
            if (!header) {
                family(f, "collectived_compression_auto_choice", "gauge",
                       "1 for what auto chose for the bucket's next operation.");
                header = 1;
            }
            fprintf(f, "collectived_compression_auto_choice{job_id=\"");
            label_value(f, job->id);
            fprintf(f, "\",bucket=\"%u\",method=\"", b.bucket);
            label_value(f, b.next);
            fprintf(f, "\"} 1\n");
        }
    }
}

static void compression_gauges(FILE *f, coll_daemon_t *d)
{
    static const char *const names[] = {"collectived_compression_nonfinite_total",
                                        "collectived_compression_residual_bytes",
                                        "collectived_compression_link_bytes_per_second"};
    static const char *const types[] = {"counter", "gauge", "gauge"};
    static const char *const helps[] = {
        "Compressed operations failed by a NaN or infinity in a gradient.",
        "Pool bytes of the job's compression state (residuals, Q, wire buffers).",
        "The link speed auto estimates from this node's transfers (0: none yet)."};
    coll_codec_job_info_t ci;
    coll_job_t *job, *tmp;

    fallbacks(f, d);
    for (int i = 0; i < 3; i++) {
        int header = 0;
        coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
        {
            double v[3];
            if (!coll_codec_job_info(job, &ci)) {
                continue;
            }
            v[0] = (double)ci.nonfinite;
            v[1] = (double)ci.residual_bytes;
            v[2] = ci.link_bytes_per_s;
            if (!header) {
                family(f, names[i], types[i], helps[i]);
                header = 1;
            }
            job_sample(f, names[i], job->id, v[i]);
        }
    }
    auto_choices(f, d);
}
