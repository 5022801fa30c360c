/*
 * The devices a daemon serves (devices.h): found once at start, each with its budget.
 */
#include "core/devices.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "core/dev_exec.h"
#include "kernels/cuda/module.h"

void coll_device_fault(coll_device_t *dv, int index, const char *why)
{
    if (dv->fault[0] != '\0') {
        return;
    }
    snprintf(dv->fault, sizeof(dv->fault), "%s", why[0] != '\0' ? why : "unknown error");
    coll_error(COLL_SUB_CORE, "device %d (%s): the work queued on it failed: %s; its error is "
               "sticky, so its allocations are refused until the daemon restarts", index,
               dv->info.name, dv->fault);
}

void coll_devices_budget(coll_devices_t *ds, uint64_t budget)
{
    for (int i = 0; i < ds->n; i++) {
        ds->dev[i].budget.limit = budget ? budget : ds->dev[i].info.mem_bytes / 4;
    }
}

/* Read every device; one the driver will not describe is left out, and so are those after it
 * (indices must stay the driver's). */
static void read_devices(coll_devices_t *ds)
{
    int n = ds->ops->count();

    for (ds->n = 0; ds->n < n; ds->n++) {
        coll_device_t *dv = &ds->dev[ds->n];
        if (ds->ops->info(ds->n, &dv->info) != COLL_OK) {
            coll_error(COLL_SUB_CORE, "device %d: %s; it and those after it are not served",
                       ds->n, coll_dev_error());
            break;
        }
        if (!dv->info.shareable) {
            coll_warn(COLL_SUB_CORE, "device %d (%s) has no virtual memory management with "
                      "file-descriptor handles: its pools cannot be shared, allocations on it "
                      "are refused", ds->n, dv->info.name);
        }
    }
}

void coll_devices_open(coll_devices_t *ds, uint64_t budget)
{
    memset(ds, 0, sizeof(*ds));
    if (coll_dev_open(&ds->ops) != COLL_OK) {
        ds->ops = NULL;
    }
    ds->status = coll_dev_status();
    ds->pinned.ops = ds->ops;
    ds->nccl = coll_nccl_probe(&ds->nccl_text);
    if (ds->ops == NULL) {
        coll_info(COLL_SUB_CORE, "devices: none (%s): host jobs only, device allocations are "
                  "refused", ds->status);
    } else {
        read_devices(ds);
        coll_devices_budget(ds, budget);
        coll_info(COLL_SUB_CORE, "devices: %s", ds->status);
    }
    ds->exec = coll_dev_exec_open(ds->ops, COLL_CUDA_MODULE_FILE, ds->exec_status,
                                  sizeof(ds->exec_status));
    coll_info(COLL_SUB_CORE, "device executor: %s", ds->exec_status);
    for (int i = 0; i < ds->n; i++) {
        const coll_device_t *dv = &ds->dev[i];
        coll_info(COLL_SUB_CORE, "device %d: %s, %llu MiB, compute capability %d.%d, pools up "
                  "to %llu MiB (device_pool_budget)", i, dv->info.name,
                  (unsigned long long)(dv->info.mem_bytes >> 20), dv->info.cc_major,
                  dv->info.cc_minor, (unsigned long long)(dv->budget.limit >> 20));
    }
    coll_info(COLL_SUB_CORE, "nccl: %s", ds->nccl_text);
}

const char *coll_devices_layer(const coll_devices_t *ds)
{
    return ds->ops != NULL ? ds->ops->name : coll_dev_layer();
}

int coll_devices_find(const coll_devices_t *ds, const uint8_t *uuid, size_t uuid_len,
                      uint32_t index)
{
    if (uuid_len == 0) {
        return index < (uint32_t)ds->n ? (int)index : -1;
    }
    for (int i = 0; uuid_len == COLL_DEV_UUID_BYTES && i < ds->n; i++) {
        if (memcmp(ds->dev[i].info.uuid, uuid, COLL_DEV_UUID_BYTES) == 0) {
            return i;
        }
    }
    return -1;
}
