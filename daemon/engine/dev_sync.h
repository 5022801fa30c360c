/**
 * @file dev_sync.h
 * @brief The stream words of operations on device buffers (docs/gpu.md, "Streams"): a rank that
 *        orders an operation after its CUDA stream, or its stream after the operation, names
 *        two 64-bit words of its own in the job's host pool in its submission (the wire's
 *        Submit.sync_offset, sync_value, sync_flags). The rank's stream writes the first (the
 *        ready word) once the work queued before the submission is done; the daemon reads the
 *        operation's device inputs only when it holds at least the submission's value
 *        (COLL_SYNC_READY). The daemon stores the value into the second (the done word) when the
 *        operation completes, whatever its end (COLL_SYNC_DONE), and the rank's stream, waiting
 *        on it, goes on. The words are host memory the device reads and writes through the
 *        rank's registration of them (device/dev.h, host_register()); the daemon only loads and
 *        stores them. Loop thread.
 */
#ifndef COLL_ENGINE_DEV_SYNC_H
#define COLL_ENGINE_DEV_SYNC_H

#include <stddef.h>

#include "engine/op.h"

/**
 * @brief Check the stream words of @p sub, a submission of rank @p s: none (sync_flags 0), or
 *        known flags, a value above 0, buffers in a device pool, and 16 bytes at an offset
 *        aligned to 8 inside the rank's own allocations in the host pool.
 * @return COLL_OK; COLL_ERR_INVALID (unknown flags, value 0, host buffers, an unaligned
 *         offset) or COLL_ERR_NOT_IN_POOL (not the rank's memory), with @p err saying which.
 */
coll_status_t coll_dev_sync_check(const coll_job_t *job, const coll_session_t *s,
                                  const Coll__Wire__Submit *sub, char *err, size_t errlen);

/** @return 1 when every local member of @p op that asked for it (COLL_SYNC_READY) has its
 *          ready word at its value or above (its inputs may be read), else 0. */
int coll_dev_sync_ready(const coll_op_t *op);

/** @brief Append to @p buf (a string, @p len bytes in all) the local ranks of @p op whose ready
 *         word is still below its value ("rank R's stream (...)", comma-separated), for the
 *         messages of an operation that waits. @return How many it named. */
uint32_t coll_dev_sync_describe(const coll_op_t *op, char *buf, size_t len);

/** @brief Store member @p m's value into its done word (COLL_SYNC_DONE), unless the word holds
 *         a larger one already (a later operation's of the same words). */
void coll_dev_sync_done(const coll_op_t *op, const coll_op_member_t *m);

/** A ready word still below its value when the daemon queued device waits on it. */
typedef struct {
    _Atomic uint64_t *word; /**< in the job's host pool, as this daemon maps it */
    uint64_t value;
} coll_dev_sync_due_t;

/**
 * @brief Make @p streams (@p n, on device @p device: the streams @p op's device work goes on)
 *        wait on the device, without the loop, for the ready word of every local member of
 *        @p op that asked for one and whose word is below its value (device/dev.h,
 *        stream_wait_word(), >=), so that the work queued on them next reads the inputs only
 *        after the rank's stream wrote the word. The page of the job's host pool that holds a
 *        word is registered with the device layer at its first wait (host_register(), kept
 *        until coll_dev_sync_job_end()). Each wait is counted on the device.
 * @return COLL_OK (waits queued, or none needed); COLL_ERR_UNSUPPORTED where the device layer
 *         refuses a registration or a wait (logged once by the daemon; the caller polls the
 *         words instead; waits queued
 *         before the refusal stay, harmless, as the poll starts the work only after the words);
 *         another error of the device layer; each with @p err saying which word and why.
 */
coll_status_t coll_dev_sync_device_wait(const coll_op_t *op, int device,
                                        coll_dev_stream_t *streams, uint32_t n, char *err,
                                        size_t errlen);

/** @brief The ready words of @p op still below their values, into @p due (room for
 *         op->grp->nlocal). @return How many. */
uint32_t coll_dev_sync_due(const coll_op_t *op, coll_dev_sync_due_t *due);

/** @brief Store each of @p n words of @p due at its value (never lowering one): releases the
 *         daemon's streams that wait on them, once no rank can write them any more. */
void coll_dev_sync_store(const coll_dev_sync_due_t *due, uint32_t n);

/** @brief coll_dev_sync_store() of every ready word of @p op's local members (the daemon out
 *         of memory to keep them for later). */
void coll_dev_sync_store_ready(const coll_op_t *op);

/** What releases an operation's parked device work (coll_dev_sync_park()), once the words it
 *  waited for are stored: its streams may be synchronized then. */
typedef void (*coll_dev_sync_release_fn)(coll_job_t *job, void *state);

/**
 * @brief Keep @p state, the device work of @p op freed while it still waits on the device for
 *        ranks' ready words not there (its job failed first: the staged path's copies in, the
 *        executor's work on one node, NCCL's call), until the job ends on this node
 *        (coll_dev_sync_job_end()), when no rank of it can write the words any more: they are
 *        stored then, and @p release(job, @p state) runs. Syncing its streams now would block
 *        the loop until the ranks' streams wrote the words, maybe never (a rank that died, a
 *        stream that never ends); storing them now, while a rank may still write them, would
 *        let its library give the pair out again, or unmap words its stream still writes.
 * @return 1: parked; 0: no memory to park it: the words are stored now
 *         (coll_dev_sync_store_ready()), and the caller releases @p state itself.
 */
int coll_dev_sync_park(const coll_op_t *op, coll_dev_sync_release_fn release, void *state);

/** @brief The job ends on this node (its ranks here left), before its pools go: release its
 *         parked operations (coll_dev_sync_park(): their words stored first), then unregister
 *         the pages of its host pool registered for device waits. Loop thread only. */
void coll_dev_sync_job_end(coll_job_t *job);

#endif
