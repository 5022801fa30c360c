/*
 * Devices in /status and /metrics (devices.h), read from the daemon's devices (core/devices.h)
 * and the jobs' device pools (core/dev_pools.h).
 */
#include "admin/devices.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "core/dev_pools.h"
#include "admin/metrics.h"

/* What the jobs' pools on device @p i hold, and how many allocations they have. */
static void device_use(coll_daemon_t *d, int i, uint64_t *used_p, uint64_t *allocs_p)
{
    coll_job_t *job, *tmp;

    *used_p = *allocs_p = 0;
    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        if (job->dev_pools[i] != NULL) {
            const coll_pool_t *p = job->dev_pools[i]->pool;
            *used_p += coll_pool_size(p) - coll_pool_free_bytes(p);
            *allocs_p += coll_pool_allocations(p);
        }
    }
}

static json_t *device_json(const coll_daemon_t *d, int i)
{
    const coll_device_t *dv = &d->devices.dev[i];
    const coll_pinned_dev_t *pin = &d->devices.pinned.dev[i];
    uint64_t used, allocs;
    char cc[16];

    device_use((coll_daemon_t *)d, i, &used, &allocs);
    snprintf(cc, sizeof(cc), "%d.%d", dv->info.cc_major, dv->info.cc_minor);
    return json_pack("{s:i, s:s, s:s, s:I, s:s, s:b, s:I, s:I, s:I, s:I, s:I, "
                     "s:{s:I, s:I, s:I, s:I, s:I}}",
                     "index", i, "name", dv->info.name, "fault", dv->fault, "memory_bytes",
                     (json_int_t)dv->info.mem_bytes, "compute_capability", cc, "shareable",
                     dv->info.shareable, "pool_budget_bytes", (json_int_t)dv->budget.limit,
                     "pool_held_bytes", (json_int_t)dv->budget.used, "pool_used_bytes",
                     (json_int_t)used, "pools", (json_int_t)dv->pools, "allocations",
                     (json_int_t)allocs, "staged_pinned", "held_bytes", (json_int_t)pin->held,
                     "used_bytes", (json_int_t)pin->used,
                     "limit_bytes", (json_int_t)d->devices.pinned.limit, "hits",
                     (json_int_t)pin->hits, "misses", (json_int_t)pin->misses);
}

json_t *coll_report_devices(const coll_daemon_t *d)
{
    const coll_devices_t *ds = &d->devices;
    json_t *list = json_array();

    for (int i = 0; i < ds->n; i++) {
        json_array_append_new(list, device_json(d, i));
    }
    /* Texts are NULL (exec_status empty) until coll_devices_open() ran. */
    return json_pack("{s:s, s:s, s:{s:b, s:s, s:s}, s:{s:b, s:s}, s:o}", "layer",
                     ds->ops != NULL ? ds->ops->name : "none", "status",
                     ds->status != NULL ? ds->status : "", "executor", "loaded", ds->exec != NULL,
                     "name", ds->exec != NULL ? ds->exec->name : "", "status", ds->exec_status,
                     "nccl", "present", ds->nccl, "version",
                     ds->nccl_text != NULL ? ds->nccl_text : "", "list", list);
}

json_t *coll_report_job_devices(const coll_job_t *job)
{
    json_t *a = json_array();

    for (int i = 0; i < COLL_DEV_MAX; i++) {
        const coll_dev_pool_t *dp = job->dev_pools[i];
        coll_pool_chunk_t c;
        size_t chunks = 0;

        if (dp == NULL) {
            continue;
        }
        while (coll_pool_chunk(dp->pool, chunks, &c)) {
            chunks++;
        }
        json_array_append_new(
            a, json_pack("{s:i, s:I, s:I, s:I, s:I, s:I}", "device", i, "bytes",
                         (json_int_t)coll_pool_size(dp->pool), "held_bytes",
                         (json_int_t)coll_pool_charged(dp->pool), "used_bytes",
                         (json_int_t)(coll_pool_size(dp->pool) - coll_pool_free_bytes(dp->pool)),
                         "allocations", (json_int_t)coll_pool_allocations(dp->pool), "chunks",
                         (json_int_t)chunks));
    }
    return a;
}

static void availability(FILE *f, const coll_devices_t *ds)
{
    coll_metrics_family(f, "collectived_device_layer_available", "gauge",
                        "1 when the daemon has a device layer (a CUDA driver, or the test fake); "
                        "0 when not, and device allocations are refused (/status says why).");
    fprintf(f, "collectived_device_layer_available{layer=\"%s\"} %d\n",
            ds->ops != NULL ? ds->ops->name : "none", ds->ops != NULL);
    coll_metrics_family(f, "collectived_device_executor_loaded", "gauge",
                        "1 when device memory has its executor (the CUDA module, or the fake's "
                        "host entries); 0 when not, and what needs it fails (/status says why).");
    fprintf(f, "collectived_device_executor_loaded{executor=\"%s\"} %d\n",
            ds->exec != NULL ? ds->exec->name : "none", ds->exec != NULL);
    coll_metrics_family(f, "collectived_nccl_available", "gauge",
                        "1 when NCCL (libnccl.so.2) was found, with its version.");
    fprintf(f, "collectived_nccl_available{version=\"");
    coll_metrics_label(f, ds->nccl && ds->nccl_text != NULL ? ds->nccl_text : "");
    fprintf(f, "\"} %d\n", ds->nccl);
}

/* One sample per device of family @p which (0 .. 5). */
static void per_device(FILE *f, coll_daemon_t *d, unsigned which)
{
    static const char *const names[] = {
        "collectived_device_memory_bytes", "collectived_device_pool_budget_bytes",
        "collectived_device_pool_held_bytes", "collectived_device_pool_used_bytes",
        "collectived_device_pool_allocations", "collectived_device_faulted"};
    static const char *const helps[] = {
        "The device's memory.",
        "What the jobs' device pools may hold on the device (device_pool_budget).",
        "Device memory the jobs' pools hold (their chunks, kept until the job ends).",
        "Bytes of the jobs' device pools allocated by their ranks.",
        "Allocations in the jobs' device pools.",
        "1 when work the daemon queued on the device failed (a sticky fault): the device is out "
        "of service for this daemon until it restarts (/status says why)."};

    coll_metrics_family(f, names[which], "gauge", helps[which]);
    for (int i = 0; i < d->devices.n; i++) {
        const coll_device_t *dv = &d->devices.dev[i];
        uint64_t used, allocs;
        device_use(d, i, &used, &allocs);
        uint64_t v[] = {dv->info.mem_bytes, dv->budget.limit, dv->budget.used, used, allocs,
                        dv->fault[0] != '\0'};
        fprintf(f, "%s{device=\"%d\",name=\"", names[which], i);
        coll_metrics_label(f, dv->info.name);
        fprintf(f, "\"} %" PRIu64 "\n", v[which]);
    }
}

/* The staged path's counters per device (engine/dev_staged.h): @p which 0 its operations, 1
 * the bytes it copied, 2 its host copies that are not page-locked, 3 .. 6 its page-locked
 * buffers (core/dev_pinned.h): idle bytes, bytes in use, takes the cache served, takes it did
 * not. */
static void staged(FILE *f, const coll_devices_t *ds, int which)
{
    static const char *const names[] = {"collectived_device_staged_operations_total",
                                        "collectived_device_staged_bytes_total",
                                        "collectived_device_staged_unpinned_total",
                                        "collectived_device_staged_pinned_held_bytes",
                                        "collectived_device_staged_pinned_used_bytes",
                                        "collectived_device_staged_pinned_hits_total",
                                        "collectived_device_staged_pinned_misses_total"};
    static const char *const helps[] = {
        "Collectives on the device's pools that the staged path ran on host copies of their "
        "buffers.",
        "Bytes the staged path copied between the device's pools and host memory, both ways.",
        "Host copies of the staged path in ordinary memory, as the driver refused page-locked "
        "memory.",
        "Page-locked host memory kept idle for the staged path's next host copies "
        "(at most staged_pinned_cache_bytes).",
        "Page-locked host memory the staged path's operations in flight hold.",
        "Host copies of the staged path served by an idle page-locked buffer.",
        "Host copies of the staged path that asked the driver to lock memory."};

    coll_metrics_family(f, names[which], which == 3 || which == 4 ? "gauge" : "counter",
                        helps[which]);
    for (int i = 0; i < ds->n; i++) {
        const coll_device_t *dv = &ds->dev[i];
        const coll_pinned_dev_t *pin = &ds->pinned.dev[i];
        uint64_t v[] = {dv->staged_ops, dv->staged_bytes, dv->staged_unpinned, pin->held,
                        pin->used,      pin->hits,        pin->misses};
        fprintf(f, "%s{device=\"%d\",name=\"", names[which], i);
        coll_metrics_label(f, dv->info.name);
        fprintf(f, "\"} %" PRIu64 "\n", v[which]);
    }
}

/* Counter family @p name (@p help) of one sample per device: the uint64_t at byte @p off of
 * each coll_device_t (the collectives NCCL ran, engine/algos/nccl.h; the device waits for the
 * ranks' ready words, engine/dev_sync.h). */
static void per_device_counter(FILE *f, const coll_devices_t *ds, const char *name,
                               const char *help, size_t off)
{
    coll_metrics_family(f, name, "counter", help);
    for (int i = 0; i < ds->n; i++) {
        uint64_t v;
        memcpy(&v, (const char *)&ds->dev[i] + off, sizeof(v));
        fprintf(f, "%s{device=\"%d\",name=\"", name, i);
        coll_metrics_label(f, ds->dev[i].info.name);
        fprintf(f, "\"} %" PRIu64 "\n", v);
    }
}

/* The reductions and copies the daemon queued on each device through the executor (the NCCL
 * path's local phases, a one-node group's collectives on the device), one sample per kind. */
static void kernel_launches(FILE *f, const coll_devices_t *ds)
{
    const char *name = "collectived_device_kernel_launches_total";

    coll_metrics_family(f, name, "counter",
                        "Reductions (kind reduce) and copies (kind copy) the daemon queued on the "
                        "device through the executor of device memory.");
    for (int i = 0; i < ds->n; i++) {
        for (int copy = 0; copy < 2; copy++) {
            fprintf(f, "%s{device=\"%d\",kind=\"%s\",name=\"", name, i,
                    copy ? "copy" : "reduce");
            coll_metrics_label(f, ds->dev[i].info.name);
            fprintf(f, "\"} %" PRIu64 "\n",
                    copy ? ds->dev[i].kernel_copies : ds->dev[i].kernel_reduces);
        }
    }
}

void coll_metrics_devices(FILE *f, coll_daemon_t *d)
{
    availability(f, &d->devices);
    for (unsigned which = 0; d->devices.n > 0 && which < 6; which++) {
        per_device(f, d, which);
    }
    for (int which = 0; d->devices.n > 0 && which < 7; which++) {
        staged(f, &d->devices, which);
    }
    if (d->devices.n > 0) {
        per_device_counter(f, &d->devices, "collectived_device_nccl_operations_total",
                           "Collectives on the device's pools that NCCL ran between the daemons.",
                           offsetof(coll_device_t, nccl_ops));
        per_device_counter(f, &d->devices, "collectived_device_stream_waits_total",
                           "Waits the daemon queued on the device's streams for a rank's ready "
                           "word, the copies, kernels or NCCL's work after them queued before the "
                           "word was there.",
                           offsetof(coll_device_t, stream_waits));
        kernel_launches(f, &d->devices);
    }
}
