/*
 * The fake device layer's kernel fault (dev.h, COLL_DEVICE_FAKE_EXEC_FAIL=N, test only): the
 * N-th launch of the fake's executor in the process faults its device, as a kernel reading an
 * illegal address does on a GPU; COLL_DEVICE_FAKE_COPY_FAIL=N the same at the process's N-th
 * copy (an asynchronous copy's fault, as the copy engine's on a bad address). Modelled on the driver: the launch itself succeeds (a launch
 * is asynchronous), the device then runs no more work (the faulting kernel's and later copies
 * and kernels do nothing) while the calls that queue work still succeed, and the next event
 * query or stream sync on the device reports CUDA_ERROR_ILLEGAL_ADDRESS; from then on the error
 * is sticky (a CUDA context's is): every call on the device that creates or queues something
 * fails with it. Per process, as a context is: the ranks' own fake devices stay sound. The
 * stand-in NCCL's collective started on an aborted communicator faults its device the same way
 * (coll__dev_fake_fault_now(): a GPU's kernel would run on freed memory).
 */
#include <stdatomic.h>

#include "device/dev_fake.h"

enum { SOUND, FAULTED, REPORTED };

static _Atomic uint64_t launches;        /* the executor's, all devices */
static _Atomic uint64_t copies;          /* copy_async's, all devices */
static _Atomic int state[COLL_DEV_MAX];  /* SOUND, FAULTED (not yet reported), REPORTED */

static const char *_Atomic cause[COLL_DEV_MAX]; /* coll__dev_fake_fault_now()'s; else injected */

#define FAULT_TEXT "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered " \
                   "(a fault, sticky; %s)"

coll_status_t coll__fake_fault(int dev, const char *who, int report)
{
    int was;

    if (dev < 0 || dev >= COLL_DEV_MAX || (was = atomic_load(&state[dev])) == SOUND ||
        (was == FAULTED && !report)) {
        return COLL_OK;
    }
    atomic_store(&state[dev], REPORTED);
    return coll__dev_fail(COLL_ERR_IO, "%s on fake device %d: " FAULT_TEXT, who, dev,
                          atomic_load(&cause[dev]) != NULL
                              ? atomic_load(&cause[dev])
                              : "injected: COLL_DEVICE_FAKE_EXEC_FAIL or _COPY_FAIL");
}

void coll__dev_fake_fault_now(coll_dev_stream_t s, const char *why)
{
    int dev = coll__fake_or_default(s)->dev, sound = SOUND;

    if (dev >= 0 && dev < COLL_DEV_MAX) {
        atomic_store(&cause[dev], why);
        atomic_compare_exchange_strong(&state[dev], &sound, FAULTED);
    }
}

int coll__fake_faulted(int dev)
{
    return dev >= 0 && dev < COLL_DEV_MAX && atomic_load(&state[dev]) != SOUND;
}

coll_status_t coll__dev_fake_exec_launch(int dev, int *run_p)
{
    uint64_t n = coll__fake_knob("COLL_DEVICE_FAKE_EXEC_FAIL");
    coll_status_t st = coll__fake_fault(dev, "kernel launch", 0);

    *run_p = 0;
    if (st != COLL_OK || coll__fake_faulted(dev)) {
        return st;
    }
    if (n != 0 && atomic_fetch_add(&launches, 1) + 1 == n && dev >= 0 && dev < COLL_DEV_MAX) {
        atomic_store(&state[dev], FAULTED);
        return COLL_OK;
    }
    *run_p = 1;
    return COLL_OK;
}

int coll__dev_fake_stream_faulted(coll_dev_stream_t s)
{
    return coll__fake_faulted(coll__fake_or_default(s)->dev);
}

coll_status_t coll__dev_fake_exec_sync(int dev)
{
    return coll__fake_fault(dev, "executor sync", 1);
}

void coll__dev_fake_copy_count(int dev)
{
    uint64_t n = coll__fake_knob("COLL_DEVICE_FAKE_COPY_FAIL");

    if (n != 0 && atomic_fetch_add(&copies, 1) + 1 == n && dev >= 0 && dev < COLL_DEV_MAX) {
        atomic_store(&state[dev], FAULTED);
    }
}
