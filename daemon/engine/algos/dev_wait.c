/* The executor's work on one node behind device waits for the ready words (dev_wait.h). */
#include <stdio.h>

#include "engine/algos/dev_wait.h"

coll_status_t coll_devw_gate(coll_op_t *op, coll_dev_pool_t *dp, int device,
                             coll_dev_stream_t *own_p, const char **what_p, char *err,
                             size_t errlen)
{
    coll_status_t st = coll_dev_pool_wait_get(op->job->d->devices.ops, dp, own_p);

    if (st != COLL_OK) {
        *own_p = NULL;
        *what_p = "no stream to wait for the ranks' streams on";
        snprintf(err, errlen, "%s", coll_dev_error());
        return st;
    }
    st = coll_dev_sync_device_wait(op, device, own_p, 1, err, errlen);
    *what_p = "could not wait for the ranks' streams";
    return st;
}

void coll_devw_release(coll_job_t *job, coll_dev_pool_t *dp, coll_dev_stream_t stream,
                       int pending, coll_dev_scratch_t *scratch, coll_dev_stream_t own,
                       int keep)
{
    if (pending) {
        job->d->devices.ops->stream_sync(stream);
    }
    coll_dev_scratch_free(scratch);
    if (own != NULL && keep) {
        coll_dev_pool_wait_put(&job->d->devices, dp, own);
    } else if (own != NULL) {
        job->d->devices.ops->stream_destroy(own);
    }
}

int coll_devw_park(coll_op_t *op, int waits, coll_dev_sync_release_fn release, void *state,
                   int *keep_p)
{
    int due = waits && !coll_dev_sync_ready(op);

    *keep_p = !due;
    return due && coll_dev_sync_park(op, release, state);
}
