/*
 * rank_dev: what the rank programs of tests/gpu that run collectives on device buffers share
 * (staged_check, staged_p2p_check, nccl_group_check): the device layer and one stream on device
 * 0 of this process, the job's communicator, copies between host and device memory through that
 * stream, allocations in the job's device pool. One per process; not thread-safe.
 */
#ifndef TESTS_GPU_RANK_DEV_H
#define TESTS_GPU_RANK_DEV_H

#include <stddef.h>

#include <collective.h>

/** Exit status of a program skipped for want of a device layer (ctest's SKIP_RETURN_CODE). */
#define RANK_DEV_SKIP 77

/**
 * @brief Open the device layer and a stream on device 0, then join the job.
 * @param prog The program's name, for messages.
 * @param [out] status_p Where it fails: RANK_DEV_SKIP (no device layer; the reason printed on
 *        stdout) or 1 (the join failed; printed on stderr).
 * @return The job's communicator (rank_dev_close() destroys it), or NULL.
 */
coll_comm_t *rank_dev_open(const char *prog, int *status_p);

/** @brief Destroy @p comm and the stream. */
void rank_dev_close(coll_comm_t *comm);

/**
 * @brief Copy @p n bytes between host and device memory (either way) through the stream and
 *        wait for it. @return 0, or -1 with the device layer's error printed.
 */
int rank_dev_copy(void *dst, const void *src, size_t n);

/**
 * @brief Queue a copy of @p n bytes from host memory @p src to the device at @p dst on
 *        @p stream (a CUstream; NULL: the default stream) without waiting for it. @p src may
 *        be reused on return (pageable memory is taken before the call returns).
 * @return 0, or -1 with the device layer's error printed.
 */
int rank_dev_copy_on(void *dst, const void *src, size_t n, void *stream);

/** @return The stream of rank_dev_copy(), for the library's stream ordering (a CUstream). */
void *rank_dev_stream(void);

/** @brief @p bytes in the job's pool on device rank_dev_device; NULL with the library's error
 *         printed. */
void *rank_dev_alloc(size_t bytes);

/**
 * @brief Wait for request @p req of a call that returned @p st (COLL_INPROGRESS: @p req is
 *        waited for, 30 s at most, and freed) and check that it succeeded as @p want_algo
 *        (coll_req_algo()), @p what naming it in the messages.
 * @return 0, or -1 with the failure or the other algorithm printed on stderr.
 */
int rank_dev_finish(const char *what, coll_status_t st, coll_request_t *req,
                    const char *want_algo);

/** Which device rank_dev_alloc() allocates on from now on (0 at first). */
extern int rank_dev_device;

#endif
