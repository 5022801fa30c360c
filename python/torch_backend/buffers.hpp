/**
 * @file buffers.hpp
 * @brief Where an operation's tensors meet the pool: the tensor itself when it lies in the
 *        pool (zero copy), else a staging buffer it is copied into and, on success, out of.
 */
#pragma once

#include <ATen/ATen.h>

#include "comm.hpp"
#include "staging.hpp"
#include "work.hpp"

namespace collectived {

/** Builds one operation's Buffers on the submitting thread. */
class OpBuffers {
  public:
    /** @param device The operation's device: -1 for the CPU, else a CUDA device's index, whose
     *         pool @p staging serves (device.hpp). */
    OpBuffers(const Comm &comm, Staging &staging, int device)
        : comm_(comm), staging_(staging), device_(device) {}

    /** @return Whether @p t may be handed to the library as it is: contiguous and inside one
     *          live allocation of the group's pool on the operation's device
     *          (collective.torch_backend.empty()). */
    bool in_pool(const at::Tensor &t) const;

    /** @return A 1-D staging view of @p numel elements of @p type (uninitialized), on the
     *          operation's device. Copies into it (ATen's copy_) are queued on that device's
     *          current stream, which the daemon waits for (device.hpp). */
    at::Tensor scratch(int64_t numel, at::ScalarType type);

    /**
     * @return A 1-D pool view of @p t's elements: @p t itself when in_pool(t), else a staging
     *         view, into which @p t is copied when @p copy_in and out of which @p t is written
     *         on success when @p copy_back.
     */
    at::Tensor place(const at::Tensor &t, bool copy_in, bool copy_back);

    /** @brief On success, copy the 1-D pool view @p from into @p to (same element count). */
    void copy_back(const at::Tensor &from, const at::Tensor &to);

    /** @return Whether the bytes of @p a and @p b intersect. */
    static bool overlaps(const at::Tensor &a, const at::Tensor &b);

    /** @return The buffers built so far, for the Work. */
    Buffers take() { return std::move(buffers_); }

  private:
    const Comm &comm_;
    Staging &staging_;
    const int device_;
    Buffers buffers_;
};

}  // namespace collectived
