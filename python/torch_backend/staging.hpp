/**
 * @file staging.hpp
 * @brief Pool buffers for tensors that do not live in the pool: reused from call to call.
 *
 * A collective reads and writes only pool memory. A tensor outside the pool (any tensor torch
 * allocated: DDP's buckets, a model's parameters, a slice of anything) is copied into a staging
 * buffer before the submission and back after the completion. Buffers come in size classes
 * (four per power of two, at least 4 KiB, so a class wastes at most a quarter) and return to a
 * free list of their class when the operation is done: once every size a program uses has been
 * seen, nothing is allocated any more. CUDA tensors stage through a Staging of the job's pool
 * on their device (device.hpp for when its buffers return). When the pool is full, the free
 * buffers of every class are given back to it and the allocation is tried once more.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "comm.hpp"

namespace collectived {

class Staging;

/** One staging buffer lent to one operation; goes back to its free list when destroyed. */
class Lease {
  public:
    Lease() = default;
    Lease(std::shared_ptr<Staging> owner, void *ptr, size_t capacity)
        : owner_(std::move(owner)), ptr_(ptr), capacity_(capacity) {}
    Lease(Lease &&other) noexcept { *this = std::move(other); }
    Lease &operator=(Lease &&other) noexcept;
    ~Lease();

    void *get() const { return ptr_; }

    /** @brief Keep the buffer out of every free list for good: for an operation abandoned
     *         while the daemon may still write into it (freed with the communicator). */
    void abandon() { ptr_ = nullptr; }

  private:
    std::shared_ptr<Staging> owner_;
    void *ptr_ = nullptr;
    size_t capacity_ = 0;
};

class Staging : public std::enable_shared_from_this<Staging> {
  public:
    /** Counters for tests and reports. */
    struct Stats {
        uint64_t allocations = 0; /**< buffers taken from the pool so far */
        uint64_t reuses = 0;      /**< leases served from a free list */
        size_t bytes = 0;         /**< bytes of the buffers held now (lent or free) */
    };

    /** @brief Staging buffers in the job's pool on CUDA device @p device as this process
     *         numbers it, or in host memory for -1. */
    Staging(std::shared_ptr<Comm> comm, int device) : comm_(std::move(comm)), device_(device) {}
    ~Staging();

    /**
     * @brief A buffer of at least @p bytes (0 allowed: a valid pool address) in the pool.
     * @throws c10::Error when the pool has no room even without the free buffers.
     * Thread-safe.
     */
    Lease acquire(size_t bytes);

    /** @return The counters. Thread-safe. */
    Stats stats() const;

    /** @return The size class of a request of @p bytes. */
    static size_t size_class(size_t bytes);

  private:
    friend class Lease;
    void give_back(void *ptr, size_t capacity);
    void release_free_locked();

    std::shared_ptr<Comm> comm_;
    const int device_;
    mutable std::mutex mu_;
    std::multimap<size_t, void *> free_; /* capacity -> buffer */
    Stats stats_;
};

}  // namespace collectived
