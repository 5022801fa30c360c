/**
 * @file dev_combine.h
 * @brief A node's ranks' device buffers combined and served on the device, through the executor
 *        of device memory (core/dev_exec.h) on one stream of the daemon's: the NCCL path's local
 *        phase and delivery (nccl_calls.c) and the whole of the one-node device algorithm
 *        (dev_local.c). Everything is queued on the lane's stream in call order; nothing waits.
 *        Loop thread only.
 *
 * Reductions keep the host's arithmetic (collective.h's coll_redop_t, kernels/reduce.h): the
 * members' inputs go into one multi-source pass, the host's local reduce's arguments
 * (coll_combine_locals_args()), never finished; the delivery finishes the result as the host's
 * algorithms do (coll_combine_finish()'s arguments): an average of float32, float64 and the
 * integers divided once, at the end, by the world size (integers truncated toward zero after a
 * sum that wraps). A sum, average or product of float16 and bfloat16 (coll_devc_wide(): the
 * host's float32 partials, coll_partial_is_f32()) goes through float32: the pass reduces the
 * 16-bit inputs into a float32 buffer (an average's scaled by 1/world first, a product's
 * multiplied in float32) and the delivery rounds to 16 bits once. Minimum and maximum of 16-bit
 * floats round nothing and stay 16-bit.
 */
#ifndef COLL_ENGINE_ALGOS_DEV_COMBINE_H
#define COLL_ENGINE_ALGOS_DEV_COMBINE_H

#include "core/dev_scratch.h"
#include "core/devices.h"
#include "engine/combine.h"
#include "engine/exec.h"
#include "engine/op.h"

/** Where the work goes: the executor, the device and stream it runs on, and the device whose
 *  budget pays for scratch and whose counters (kernel_reduces, kernel_copies) count each call.
 *  A value; the stream and the device outlive the work queued. */
typedef struct {
    const coll_dev_ops_t *dev; /**< the device layer */
    const coll_exec_t *ex;     /**< device memory's executor; never NULL here */
    coll_exec_ctx_t ctx;       /**< the device's index and the stream */
    coll_device_t *device;     /**< the daemon's record of that device */
} coll_devc_lane_t;

/** @return 1 when @p op (the wire's number) is a bitwise reduction: band, bor or bxor. */
static inline int coll_devc_bitwise_op(unsigned op)
{
    return op == COLL_BAND || op == COLL_BOR || op == COLL_BXOR;
}

/**
 * @return 1 when a @p coll operation (Collective) with dtype @p dtype and reduction @p op (the
 *         wire's numbers) is one the executor combines on the device: an allreduce, a
 *         reduce-scatter or a reduce with sum, average, product, minimum or maximum, or of an
 *         integer dtype with band, bor or bxor (the host's bits, coll_reduce_op_fits()); an
 *         all-gather; a broadcast; of float32, float64, float16, bfloat16, int8, uint8, int32
 *         or int64 (NCCL's). NCCL has no bitwise reduction: coll_nccl_fits() takes only its
 *         allreduce, whose node results nccl_calls.c gathers and reduces with
 *         coll_devc_reduce_blocks(); the one-node device path (dev_local.c, dev_peers.c) takes
 *         all three. 0 otherwise.
 *         Thread-safe.
 */
int coll_devc_fits(unsigned coll, unsigned dtype, unsigned op);

/** @return 1 when @p op is a reduction (an allreduce's, a reduce-scatter's or a reduce's). */
static inline int coll_devc_reduces(const coll_op_t *op)
{
    return op->desc.coll == COLL_KIND_ALLREDUCE || op->desc.coll == COLL_KIND_REDUCE_SCATTER ||
           op->desc.coll == COLL_KIND_REDUCE;
}

/** @return 1 when @p op is a reduction of float16 or bfloat16 kept in float32
 *          (coll_partial_is_f32(): a sum, an average or a product), rounded to 16 bits once. */
static inline int coll_devc_wide(const coll_op_t *op)
{
    return coll_devc_reduces(op) &&
           coll_partial_is_f32((coll_dtype_t)op->desc.dtype, (coll_redop_t)op->desc.op);
}

/** @return 1 when the delivery finishes @p op's result: an average (divided or rounded at the
 *          end) or a wide reduction (rounded to 16 bits). */
static inline int coll_devc_finishes(const coll_op_t *op)
{
    return (coll_devc_reduces(op) && op->desc.op == COLL_AVG) || coll_devc_wide(op);
}

/** @return Bytes of an element of @p op's unfinished reduction: float32's for a wide one. */
size_t coll_devc_acc_esize(const coll_op_t *op);

/** @return The id of the one device pool that holds every local member's buffers of @p op, or
 *          0 when they are in several pools or any is in host memory. */
uint32_t coll_devc_one_pool(const coll_op_t *op);

/** @return The id of the device pool whose device combines @p op on one node
 *          (algos/dev_local.c): the one pool that holds every local member's buffers, or,
 *          where they are in pools of several devices, the first member's pool when its
 *          device was granted access to each of the others (coll_dev_pool_join_peers(): peers);
 *          0 when any is in host memory or a pool its device cannot reach (the staged path
 *          then copies the operation). */
uint32_t coll_devc_lane_pool(const coll_op_t *op);

/**
 * @brief @p elems unfinished elements (coll_devc_acc_esize()) of device memory of @p op's own
 *        on the lane's device, charged to its budget; free with coll_dev_scratch_free() once
 *        the stream's work on it completed.
 * @param [out] s The allocation (all zero on failure); @p acc_p its address.
 * @return COLL_OK; COLL_ERR_NOMEM beyond the device's budget; the device layer's error
 *         (coll_dev_error() says both).
 */
coll_status_t coll_devc_scratch(const coll_devc_lane_t *ln, const coll_op_t *op, uint64_t elems,
                                coll_dev_scratch_t *s, uint8_t **acc_p);

/** @brief Queue a copy of @p len bytes from @p src to @p dst (device buffers), unless they are
 *         one. @return COLL_OK; the executor's error. */
coll_status_t coll_devc_copy(const coll_devc_lane_t *ln, void *dst, const void *src, size_t len);

/** @brief Queue the reduction of every local member's input of @p op (elements [0, @p len))
 *         into @p dst, in one pass, never finished: an average's sum only (16-bit inputs
 *         scaled), a wide one's into float32. @return COLL_OK; the executor's error. */
coll_status_t coll_devc_reduce_locals(const coll_devc_lane_t *ln, coll_op_t *op, uint64_t len,
                                      void *dst);

/** @brief The same for elements [@p off, @p off + @p len) of every input into @p dst (@p len
 *         elements: one member's block, dev_peers.c). @return COLL_OK; the executor's error. */
coll_status_t coll_devc_reduce_span(const coll_devc_lane_t *ln, coll_op_t *op, uint64_t off,
                                    uint64_t len, void *dst);

/**
 * @brief Queue the reduction (@p op's, exact in any order: a bitwise one) of @p nblocks
 *        consecutive blocks of @p op's count elements at @p blocks into @p dst (count elements,
 *        not among the blocks), in passes of up to COLL_REDUCE_MAX_SRCS sources, each after the
 *        first reducing the one before in place.
 * @return COLL_OK; the executor's error (COLL_ERR_INVALID for a reduction it has not).
 */
coll_status_t coll_devc_reduce_blocks(const coll_devc_lane_t *ln, coll_op_t *op,
                                      const uint8_t *blocks, uint32_t nblocks, void *dst);

/** @brief Queue the delivery of @p len elements of @p op's result from @p src (its unfinished
 *         reduction, or the finished data of a collective that does not reduce) to the output
 *         @p dst (which may be @p src): finished where coll_devc_finishes(), copied otherwise
 *         unless they are one. @return COLL_OK; the executor's error. */
coll_status_t coll_devc_deliver(const coll_devc_lane_t *ln, coll_op_t *op, void *dst,
                                const void *src, uint64_t len);

/** @brief Queue a reduce-scatter's delivery: each local member's block (its group rank's) of
 *         @p acc, the unfinished reduction of the whole, to its output; @p acc NULL: the one
 *         member's reduction is its output already (finished there where it must be).
 *         @return COLL_OK; the executor's error. */
coll_status_t coll_devc_deliver_blocks(const coll_devc_lane_t *ln, coll_op_t *op,
                                       const uint8_t *acc);

#endif
