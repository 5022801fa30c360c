/**
 * @file device.hpp
 * @brief Where an operation's tensors live (the CPU, or one CUDA device), and the stream order
 *        of an operation on CUDA tensors: ProcessGroupNCCL's semantics over the library's
 *        streams (collective.h, coll_op_params_t.stream and coll_req_stream_wait()).
 *
 * An operation on CUDA device d:
 *  - reads its inputs after the work queued on d's current stream before the call: staged
 *    inputs are copied into the job's pool on d on that stream (OpBuffers), and the daemon
 *    starts once the stream reached the call (the library's ready word);
 *  - writes its outputs on the group's side stream of d: the side stream waits until the
 *    request completes (the library's done word), copies the staged results back into the
 *    caller's tensors, and records the operation's end event (StreamOrder::after());
 *  - Work::wait() makes the caller's current stream wait on that event, without blocking the
 *    CPU; Work::synchronize() and the Work's future wait on the CPU until it completed, and
 *    only then do the staging buffers go back to their free lists, so no buffer is reused
 *    while a stream may still copy out of it.
 * On failure the library still stores the done word (no stream waits forever), so the side
 * stream goes on and the outputs are undefined, as ProcessGroupNCCL's are; the Work carries
 * the error.
 */
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <collective.h>

#include <memory>
#include <utility>
#include <vector>

namespace collectived {

/** @return -1 for a CPU tensor, else the index of @p t's CUDA device (checks.hpp refuses the
 *          other device types before this is asked). */
int op_device(const at::Tensor &t);

/** @return Whether this backend was built against a torch with CUDA (COLL_TORCH_CUDA). */
bool cuda_built();

/**
 * @return The CUDA stream (cudaStream_t) behind @p s, as the library's stream parameters take
 *         it. @throws c10::Error when the backend was built against a torch without CUDA.
 */
void *raw_stream(const c10::Stream &s);

/** The stream order of one operation on CUDA device tensors (see the file comment). Used by
 *  the submitting thread only. */
class StreamOrder {
  public:
    /** @brief Capture the current stream of CUDA device @p device; @p side is the group's side
     *         stream of that device. */
    StreamOrder(int device, c10::Stream side);

    /** @return The current stream's handle, for coll_op_params_t.stream. */
    void *current() const { return raw_stream(current_); }

    /**
     * @brief After the operation's submission: queue on the side stream the wait for @p req
     *        (nullptr: it completed at submission), the copies (pool view, caller's tensor) of
     *        @p copies, and the end event, which @p end_p receives. The caller's tensors are
     *        recorded as used on the side stream (torch's caching allocator keeps them until
     *        it passed them).
     * @return COLL_OK, or coll_req_stream_wait()'s error (nothing queued then).
     */
    coll_status_t after(coll_request_t *req,
                        const std::vector<std::pair<at::Tensor, at::Tensor>> &copies,
                        std::unique_ptr<c10::Event> *end_p);

  private:
    c10::Stream current_;
    c10::Stream side_;
};

/** @return A stream of CUDA device @p device from torch's pool, for a group's side stream. */
c10::Stream side_stream_for(int device);

/** @brief Make the current stream of @p end's device wait until @p end completed (no CPU
 *         wait). */
void stream_wait_event(const c10::Event &end);

}  // namespace collectived
