/*
 * GET /status: the daemon's state as JSON, built with jansson. What an operator asks first
 * ("which rank, on which node, is everybody waiting for?") is answered per operation: the local
 * ranks that have not submitted it yet, and for one that runs, the nodes it still waits on.
 */
#include "admin/status_json.h"

#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin/admin.h"
#include "admin/devices.h"
#include "admin/report.h"
#include "core/stats.h"
#include "engine/codec/codec.h"
#include "engine/op.h"
#include "engine/shm_watch.h"
#include "net/control.h"
#include "proto/jobmsg.h"
#include "ps/ps.h"

#ifndef COLL_DAEMON_VERSION
#define COLL_DAEMON_VERSION "unknown"
#endif


static json_t *u32_array(const uint32_t *v, uint32_t n)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < n; i++) {
        json_array_append_new(a, json_integer(v[i]));
    }
    return a;
}

static const char *node_host(const coll_job_t *job, uint32_t node)
{
    return node < job->nnodes ? job->nodes[node].host : job->d->hostname;
}

/* A local rank: its global rank and, while it is connected, the process behind it. */
static json_t *rank_json(const coll_job_t *job, uint32_t l)
{
    const coll_session_t *s = job->locals[l];
    json_t *o = json_pack("{s:I, s:I, s:b}", "rank", (json_int_t)job->ranks[l], "local_rank",
                          (json_int_t)l, "joined", s != NULL);

    if (s != NULL) {
        json_object_set_new(o, "pid", json_integer(s->cred.pid));
        json_object_set_new(o, "uid", json_integer(s->cred.uid));
        json_object_set_new(o, "gid", json_integer(s->cred.gid));
        json_object_set_new(o, "session", json_integer((json_int_t)s->id));
    }
    json_object_set_new(o, "node", json_integer(job->node_rank));
    json_object_set_new(o, "host", json_string(job->d->hostname));
    return o;
}

static json_t *members_json(const coll_job_t *job)
{
    json_t *a = json_array();
    for (uint32_t l = 0; l < job->local_size; l++) {
        json_array_append_new(a, rank_json(job, l));
    }
    return a;
}

static json_t *node_ref(const coll_job_t *job, uint32_t node)
{
    return json_pack("{s:I, s:s, s:o}", "node", (json_int_t)node, "host", node_host(job, node),
                     "ranks", node < job->nnodes ? u32_array(job->nodes[node].ranks,
                                                             job->nodes[node].nranks)
                                                 : json_array());
}

/* A point-to-point operation waits on one other rank; a collective on every local rank that
 * has not submitted it. */
static void add_missing(const coll_op_t *op, json_t *submitted, json_t *missing)
{
    const coll_job_t *job = op->job;

    if (coll_kind_is_p2p(op->desc.coll)) {
        uint32_t peer = op->desc.root;
        json_array_append_new(submitted, json_integer(op->desc.first_rank));
        if (job->rank_node != NULL && peer < job->world_size &&
            job->rank_node[peer] == job->node_rank && coll_list_empty(&op->posted)) {
            json_array_append_new(missing, rank_json(job, job->rank_local[peer]));
        }
        return;
    }
    for (uint32_t i = 0; i < op->grp->nlocal; i++) {
        uint32_t l = op->grp->locals[i];
        if (op->members[i].session != NULL) {
            json_array_append_new(submitted, json_integer(job->ranks[l]));
        } else {
            json_array_append_new(missing, rank_json(job, l));
        }
    }
}

/* Nodes the operation still expects data from: its receives that have not completed. */
static json_t *waiting_on(const coll_op_t *op, uint32_t *sends_p)
{
    const coll_job_t *job = op->job;
    char *seen = calloc(job->nnodes + 1, 1);
    json_t *a = json_array();
    coll_xfer_t *x, *tmp;

    *sends_p = 0;
    coll_list_for_each_safe(x, tmp, &((coll_op_t *)op)->posted, coll_xfer_t, posted)
    {
        if (x->completed) {
            continue;
        } else if (x->is_send) {
            (*sends_p)++;
        } else if (seen != NULL && x->peer < job->nnodes && !seen[x->peer]) {
            seen[x->peer] = 1;
            json_array_append_new(a, node_ref(job, x->peer));
        }
    }
    free(seen);
    return a;
}

static json_t *op_json(const coll_op_t *op, uint64_t now)
{
    char name[64];
    uint32_t sends = 0;
    json_t *submitted = json_array(), *missing = json_array(), *o;
    int running = op->impl != NULL;
    const char *elsewhere =
        coll_control_blamed(op->job, coll_jobmsg_op_ident(op->grp->id, op->desc.key));

    coll_desc_name(&op->desc, name, sizeof(name));
    add_missing(op, submitted, missing);
    o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:I, s:I, s:s, s:f, s:o, s:o}", "name", name,
                  "collective", coll_stats_kind_name(op->desc.coll), "key",
                  (json_int_t)op->desc.key, "dtype", coll_dtype_name((coll_dtype_t)op->desc.dtype),
                  "op", coll_redop_name((coll_redop_t)op->desc.op), "count",
                  (json_int_t)op->desc.count, "bytes",
                  (json_int_t)coll_op_bytes(op),
                  "state", running ? "running" : "queued", "age_ms",
                  (double)(now - op->t_submit_ns) / 1e6, "submitted_ranks", submitted,
                  "missing_ranks", missing);
    if (elsewhere != NULL) {
        /* Other nodes' ranks that have not submitted it, as those nodes said (blame.h). */
        json_object_set_new(o, "missing_elsewhere", json_string(elsewhere));
    }
    json_object_set_new(o, "group", json_integer(op->grp->id));
    json_object_set_new(o, "path", json_string("daemon"));
    json_object_set_new(o, "algo", json_string(running ? op->impl->name
                                                       : coll_algo_name((coll_algo_t)op->desc.algo)));
    if (running) {
        json_object_set_new(o, "running_ms",
                            json_real((double)(now - (op->t_start_ns ? op->t_start_ns
                                                                      : op->t_submit_ns)) / 1e6));
        json_object_set_new(o, "waiting_on_nodes", waiting_on(op, &sends));
        json_object_set_new(o, "sends_pending", json_integer(sends));
    }
    return o;
}

/* A collective waiting in the local ranks' shared-memory area (engine/shm_watch.h): queued
 * while a local rank has not posted it, running once all have; an allreduce of the direct path
 * waits on the node whose leader this node's leader waits for in their rounds, as a daemon's
 * operation waits on the nodes it has receives from. */
static json_t *shm_op_json(const coll_job_t *job, const coll_shm_wait_t *w, uint64_t now)
{
    char name[64];
    json_t *submitted = json_array(), *missing = json_array(), *o;
    uint32_t node = w->wait_node - 1;

    coll_desc_name(&(coll_desc_t){.coll = (uint16_t)w->coll, .key = w->key}, name, sizeof(name));
    for (uint32_t l = 0; l < job->local_size; l++) {
        if (l < 64 && (w->posted >> l) & 1) {
            json_array_append_new(submitted, json_integer(job->ranks[l]));
        } else {
            json_array_append_new(missing, rank_json(job, l));
        }
    }
    o = json_pack("{s:s, s:s, s:I, s:s, s:I, s:s, s:f, s:s, s:o, s:o}", "name", name,
                  "collective", coll_stats_kind_name(w->coll), "key", (json_int_t)w->key, "dtype",
                  coll_dtype_name((coll_dtype_t)w->dtype), "count", (json_int_t)w->count,
                  "state", json_array_size(missing) > 0 ? "queued" : "running", "age_ms",
                  now > w->since_ns ? (double)(now - w->since_ns) / 1e6 : 0.0, "path",
                  coll_shm_runs_there(job, w) ? "shm" : "daemon", "submitted_ranks",
                  submitted, "missing_ranks", missing);
    if (json_array_size(missing) == 0 && w->wait_node != 0 && node < job->nnodes &&
        node != job->node_rank) {
        json_object_set_new(o, "waiting_on_nodes", json_pack("[o]", node_ref(job, node)));
    }
    return o;
}

static json_t *ops_json(const coll_job_t *job, uint64_t now)
{
    json_t *a = json_array();
    coll_shm_wait_t w[COLL_SHM_WATCH_MAX];
    size_t n = coll_shm_waiting(job, w, COLL_SHM_WATCH_MAX);
    coll_op_t *op, *tmp;

    coll_list_for_each_safe(op, tmp, &((coll_job_t *)job)->engine.ops, coll_op_t, link)
    {
        if (coll_report_op_pending(op)) {
            json_array_append_new(a, op_json(op, now));
        }
    }
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(a, shm_op_json(job, &w[i], now));
    }
    return a;
}

/* This node's leader's UCX worker address (the direct path), as hex; null without the path. */
static json_t *leader_json(const coll_job_t *job)
{
    const uint8_t *a = job->leader_address;
    size_t n = job->leader_address_len;
    char *hex;
    json_t *s;

    if (a == NULL || n == 0 || job->nnodes < 2 || job->params.direct_max_bytes == 0 ||
        (hex = malloc(2 * n + 1)) == NULL) {
        return json_null();
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(hex + 2 * i, 3, "%02x", a[i]);
    }
    s = json_string(hex);
    free(hex);
    return s;
}

/* The shared-memory path: its crossovers and what the ranks ran there (node-reduced
 * allreduces count among the daemon's operations), and the direct path's bound (0 on one node,
 * as in the area's header) and leader. */
static json_t *shm_json(coll_job_t *job)
{
    coll_shm_harvest(job);
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:o}", "max_bytes",
                     (json_int_t)(job->nnodes == 1 ? job->d->cfg.shm_max_bytes : 0),
                     "node_max_bytes",
                     (json_int_t)(job->nnodes > 1 ? job->d->cfg.shm_node_max_bytes : 0),
                     "operations", (json_int_t)job->engine.shm_done, "posted",
                     (json_int_t)job->engine.shm_posted, "direct_max_bytes",
                     (json_int_t)(job->nnodes > 1 ? job->params.direct_max_bytes : 0),
                     "leader_address", leader_json(job));
}

static const char *peer_state(const coll_job_t *job, uint32_t n)
{
    const coll_node_t *node = &job->nodes[n];

    if (n == job->node_rank) {
        return "self";
    } else if (node->left) {
        return "left";
    }
    return node->gone == COLL_OK ? "up" : "lost";
}

static json_t *peers_json(const coll_job_t *job)
{
    json_t *a = json_array();

    for (uint32_t n = 0; n < job->nnodes; n++) {
        const coll_node_t *node = &job->nodes[n];
        json_t *o = node_ref(job, n);
        json_object_set_new(o, "state", json_string(peer_state(job, n)));
        json_object_set_new(o, "up", json_boolean(node->gone == COLL_OK));
        if (node->gone != COLL_OK) {
            json_object_set_new(o, "error", json_string(coll_err_name(node->gone)));
            json_object_set_new(o, "reason", json_string(node->gone_why));
        }
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *pool_json(const coll_job_t *job)
{
    size_t size = job->pool != NULL ? coll_pool_size(job->pool) : 0;
    size_t avail = job->pool != NULL ? coll_pool_free_bytes(job->pool) : 0;

    return json_pack("{s:I, s:I, s:I, s:b}", "bytes", (json_int_t)size, "used_bytes",
                     (json_int_t)(size - avail), "free_bytes", (json_int_t)avail, "on_demand",
                     job->pool != NULL && coll_pool_on_demand(job->pool));
}

/* Bytes sent by method: what ran, how often, and its ratio to the uncompressed ring. */
static json_t *compression_bytes(const coll_codec_job_info_t *ci)
{
    json_t *o = json_object();

    for (unsigned m = 0; m < COLL_COMPRESS_COUNT; m++) {
        if (ci->ops[m] > 0) {
            double ratio = ci->wire_bytes[m] > 0 ? (double)ci->dense_bytes[m] / ci->wire_bytes[m]
                                                 : 0.0;
            json_object_set_new(o, coll_compress_method_name((coll_compress_method_t)m),
                                json_pack("{s:I, s:I, s:I, s:f}", "operations",
                                          (json_int_t)ci->ops[m], "wire_bytes",
                                          (json_int_t)ci->wire_bytes[m], "dense_bytes",
                                          (json_int_t)ci->dense_bytes[m], "ratio", ratio));
        }
    }
    return o;
}

static json_t *compression_buckets(const coll_job_t *job)
{
    json_t *a = json_array();
    coll_codec_bucket_info_t b;

    for (size_t i = 0; coll_codec_bucket_info(job, i, &b); i++) {
        json_array_append_new(a, json_pack("{s:I, s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:I}",
                                           "bucket", (json_int_t)b.bucket, "count",
                                           (json_int_t)b.count, "asked", b.asked, "last", b.last,
                                           "next", b.next, "auto_estimate", b.why, "operations",
                                           (json_int_t)b.ops, "resets", (json_int_t)b.resets,
                                           "residual_bytes", (json_int_t)b.pool_bytes));
    }
    return a;
}

/* The job's compression on this node (absent before its first allreduce between nodes). */
static void add_compression(json_t *o, const coll_job_t *job)
{
    coll_codec_job_info_t ci;
    json_t *fb = json_object(), *c;

    if (!coll_codec_job_info(job, &ci)) {
        json_decref(fb);
        return;
    }
    for (unsigned r = 0; r < COLL_CODEC_FALLBACK_REASONS; r++) {
        json_object_set_new(fb, coll_codec_fallback_name(r),
                            json_integer((json_int_t)ci.fallbacks[r]));
    }
    c = json_pack("{s:o, s:I, s:I, s:o, s:I, s:f, s:I, s:I, s:o}", "by_method",
                  compression_bytes(&ci), "resets", (json_int_t)ci.resets, "method_resets",
                  (json_int_t)ci.method_resets, "fallbacks", fb, "nonfinite",
                  (json_int_t)ci.nonfinite, "link_bytes_per_s", ci.link_bytes_per_s,
                  "residual_bytes", (json_int_t)ci.residual_bytes, "layouts",
                  (json_int_t)ci.layouts, "buckets", compression_buckets(job));
    json_object_set_new(o, "compression", c);
}

/* "epoch" tells incarnations of a job id apart (0 before the rendezvous completed);
 * "timeout_ms" is the job's effective timeout (0 before it is known). */
/* The job's parameter service on this node (ps/ps.h), or null. */
static json_t *ps_json(const coll_job_t *job)
{
    coll_ps_info_t in;

    if (!coll_ps_job_info(job, &in)) {
        return json_null();
    }
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}", "optimizer",
                     in.optimizer, "parameters", (json_int_t)in.params, "layers",
                     (json_int_t)in.layers, "buckets", (json_int_t)in.buckets, "step",
                     (json_int_t)in.step, "shard_parameters", (json_int_t)in.shard_params,
                     "state_bytes", (json_int_t)in.state_bytes, "state_bytes_total",
                     (json_int_t)in.state_bytes_total, "bucket_steps",
                     (json_int_t)in.bucket_steps, "exchange_bytes",
                     (json_int_t)in.exchange_bytes, "lr", in.lr);
}

/* How the job's automatic choices are made: the root's cost model's size ranges (the largest
 * size of each, null for no limit), or rd_max_bytes alone. */
static json_t *algo_choice_json(const coll_job_t *job)
{
    const coll_job_params_t *p = &job->params;
    json_t *ranges = json_array();

    for (uint32_t i = 0; i < p->nchoices && i < COLL_JOB_CHOICES; i++) {
        const coll_job_choice_t *c = &p->choices[i];
        json_array_append_new(
            ranges, json_pack("{s:s, s:s, s:o}", "collective", coll_kind_name(c->kind), "algo",
                              coll_algo_name((coll_algo_t)c->algo), "max_bytes",
                              c->max_bytes == UINT64_MAX ? json_null()
                                                         : json_integer((json_int_t)c->max_bytes)));
    }
    return json_pack("{s:s, s:I, s:o}", "by", p->nchoices ? "cost_model" : "rd_max_bytes",
                     "rd_max_bytes", (json_int_t)p->rd_max_bytes, "ranges", ranges);
}

static json_t *job_json(const coll_job_t *job, uint64_t now)
{
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:I}", "id", job->id,
                          "state", coll_report_job_state(job->state), "world_size",
                          (json_int_t)job->world_size, "local_size", (json_int_t)job->local_size,
                          "joined", (json_int_t)job->njoined, "node_rank",
                          (json_int_t)job->node_rank, "nodes", (json_int_t)job->nnodes, "root",
                          job->root, "epoch", (json_int_t)job->epoch, "timeout_ms",
                          (json_int_t)job->params.timeout_ms);

    if (job->state == COLL_JOB_FAILED) {
        json_object_set_new(o, "error", json_pack("{s:s, s:s}", "status",
                                                  coll_err_name(job->error), "message",
                                                  job->errmsg));
    }
    json_object_set_new(o, "members", members_json(job));
    json_object_set_new(o, "algo_choice", algo_choice_json(job));
    json_object_set_new(o, "operations", ops_json(job, now));
    json_object_set_new(o, "peers", peers_json(job));
    json_object_set_new(o, "pool", pool_json(job));
    json_object_set_new(o, "device_pools", coll_report_job_devices(job));
    json_object_set_new(o, "nccl", json_boolean(job->params.nccl));
    json_object_set_new(o, "wire_bytes_sent", json_integer((json_int_t)job->net.bytes_sent));
    json_object_set_new(o, "parameter_service", ps_json(job));
    add_compression(o, job);
    json_object_set_new(o, "shm", shm_json((coll_job_t *)job));
    return o;
}

/* How this daemon meets peers: its mode, why (without a secret), its control links, and the
 * connections its listeners refused, by reason (the metric's counts, summed). */
static json_t *peers_mode_json(const coll_daemon_t *d)
{
    static const char *const modes[] = COLL_PEER_MODE_NAMES;
    json_t *refused = json_object();
    size_t links = 0;
    coll_list_t *e;

    for (e = d->peer_links.next; e != &d->peer_links; e = e->next) {
        links++;
    }
    for (unsigned r = 0; r < COLL_REFUSED_REASONS; r++) {
        uint64_t n = 0;
        for (unsigned l = 0; l < COLL_LISTENERS; l++) {
            n += d->stats.refused[l][r];
        }
        json_object_set_new(refused, coll_stats_refusal_name(r), json_integer((json_int_t)n));
    }
    return json_pack("{s:s, s:s, s:s, s:I, s:o}", "mode", modes[d->auth.mode], "why",
                     d->auth.why, "secret_file", d->cfg.peer_secret_file, "control_links",
                     (json_int_t)links, "refused", refused);
}

static json_t *node_json(const coll_daemon_t *d)
{
    const coll_admin_t *svc = d->admin;
    json_t *o = json_pack("{s:s, s:I, s:s, s:s, s:b}", "hostname", d->hostname, "pid",
                          (json_int_t)getpid(), "control_addr", d->control_addr, "socket",
                          d->cfg.socket, "stopping", d->stopping != 0);
    size_t sessions = 0;
    coll_list_t *e;

    for (e = d->sessions.next; e != &d->sessions; e = e->next) {
        sessions++;
    }
    json_object_set_new(o, "sessions", json_integer((json_int_t)sessions));
    json_object_set_new(o, "status_socket", json_string(d->cfg.status_socket));
    json_object_set_new(o, "status_listen",
                        json_string(svc != NULL ? coll_admin_tcp_addr(svc) : ""));
    json_object_set_new(o, "config_file", json_string(d->cfg.config_file));
    json_object_set_new(o, "peers", peers_mode_json(d));
    /* Bytes malloc has handed out and not taken back (glibc; 0 under sanitizers, whose
     * allocators keep their own books): what a leak makes grow, unlike RSS, which also counts
     * pool pages first touched and memory the allocator keeps for reuse. */
    json_object_set_new(o, "heap_bytes", json_integer((json_int_t)mallinfo2().uordblks));
    return o;
}

char *coll_report_status(coll_daemon_t *d, size_t *len_p)
{
    uint64_t now = coll_stats_now_ns();
    json_t *jobs = json_array(), *root;
    coll_job_t *job, *tmp;
    char *text;

    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        json_array_append_new(jobs, job_json(job, now));
    }
    root = json_pack("{s:s, s:f, s:f, s:o, s:o, s:o}", "version", COLL_DAEMON_VERSION,
                     "uptime_s", coll_report_uptime(d), "started_at", d->stats.start_wall,
                     "node", node_json(d), "devices", coll_report_devices(d), "jobs", jobs);
    text = root != NULL ? json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (text != NULL) {
        *len_p = strlen(text);
    }
    return text;
}
