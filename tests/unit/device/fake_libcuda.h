/*
 * What the stand-in for the CUDA driver (fake_libcuda.c) tells a test beyond the driver's own
 * API; a test finds these functions with dlsym in the libcuda.so.1 the layer loaded.
 */
#ifndef COLL_TESTS_FAKE_LIBCUDA_H
#define COLL_TESTS_FAKE_LIBCUDA_H

#include <stdint.h>

/* A registered host range's device address is its host address plus this (an address no
 * process has), so that a layer using the host address where the driver's is due is caught. */
#define FAKE_CUDA_DEVMAP_BIAS ((uint64_t)1 << 62)

/* Calls fake_cuda_calls() keeps, the first of them after a fake_cuda_calls_reset(). */
#define FAKE_CUDA_CALLS_MAX 8

/* One call to cuMemHostRegister, cuMemHostGetDevicePointer, cuMemHostUnregister,
 * cuStreamWaitValue64, cuStreamWriteValue64 or cuMemSetAccess (its flags the device granted),
 * as the driver got it. */
typedef struct {
    const char *fn;  /* the exported name it came in by, e.g. "cuStreamWaitValue64_v2" */
    void *stream;    /* its stream (the stream memory operations), else NULL */
    uint64_t addr;   /* its host pointer or device address */
    uint64_t arg;    /* its byte count or value, else 0 */
    unsigned flags;  /* its flags */
} fake_cuda_call_t;

/* How many contexts the calling thread has pushed. */
int fake_cuda_depth(void);
/* The calls recorded since the last reset (at most FAKE_CUDA_CALLS_MAX), their count in *n. */
const fake_cuda_call_t *fake_cuda_calls(int *n);
/* Forget the calls recorded so far. */
void fake_cuda_calls_reset(void);

#endif
