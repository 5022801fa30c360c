/**
 * @file comm.hpp
 * @brief One rank's communicator of a process group: the coll_comm_t, the pool memory handed
 *        out through it, and the text of its errors.
 *
 * A Comm is shared (std::shared_ptr) by its process group, the group's staging buffers, every
 * Work in flight and every pool tensor: the communicator is destroyed, and the pool unmapped,
 * only when the last of them is gone, so no request or tensor ever outlives the memory it uses.
 */
#pragma once

#include <collective.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace collectived {

/** What Comm::create() passes to coll_comm_create(); the socket, the root daemon and the pool
 *  size still come from COLL_SOCKET, COLL_ROOT and COLL_POOL_SIZE. */
struct CommOptions {
    std::string job;     /**< job id, the same on every rank of the group */
    int rank = 0;        /**< rank in the group */
    int world_size = 1;  /**< ranks in the group */
    int local_rank = 0;  /**< rank among the group's ranks on this node */
    int local_size = 1;  /**< the group's ranks on this node */
    int timeout_ms = 0;  /**< the job's timeout: rendezvous and each operation (0: daemon's) */
    std::string token;   /**< job token; "" takes COLL_JOB_TOKEN */
    std::string root;    /**< host:port of the root daemon; "" takes COLL_ROOT (or MASTER_ADDR) */
};

class Comm {
  public:
    /**
     * @brief Join the job (coll_comm_create()); blocks until every rank joined or the timeout.
     * @throws c10::Error carrying the library's message when it fails.
     */
    static std::shared_ptr<Comm> create(const CommOptions &options);

    ~Comm();
    Comm(const Comm &) = delete;
    Comm &operator=(const Comm &) = delete;

    /** @return The communicator, for the coll_* calls (thread-safe, see collective.h). */
    coll_comm_t *get() const { return comm_; }

    /**
     * @brief @p bytes (> 0) of the job's pool on CUDA device @p device as this process numbers
     *        it, or in host memory for -1 (coll_mem_alloc_on()), remembered for contains().
     * @throws c10::Error on failure (COLL_ERR_POOL_FULL names the pool's size and free bytes;
     *         COLL_ERR_UNSUPPORTED says why the daemon has no pool on that device).
     */
    void *alloc(size_t bytes, int device = -1);

    /** @brief Try alloc(): COLL_OK and @p ptr_p, or the failure's status (nothing thrown). */
    coll_status_t try_alloc(size_t bytes, int device, void **ptr_p);

    /** @brief Return an allocation of alloc() to the pool. Thread-safe. */
    void free(void *ptr);

    /** @return Whether [@p ptr, @p ptr + @p bytes) lies inside one live allocation of alloc()
     *          on @p device (-1: host memory), i.e. may be handed to a collective as it is.
     *          Thread-safe. */
    bool contains(const void *ptr, size_t bytes, int device) const;

    /** @return "<what>: <COLL_ERR_...>: <coll_strerror>: <coll_comm_last_error>" for @p st;
     *          a timeout says that the group's timeout passed (the words torch's tests and
     *          users look for, as gloo's "Timed out"). */
    std::string message(coll_status_t st, const std::string &what) const;

    /** @brief Throw c10::Error with message(@p st, @p what). */
    [[noreturn]] void fail(coll_status_t st, const std::string &what) const;

  private:
    explicit Comm(coll_comm_t *comm) : comm_(comm) {}

    coll_comm_t *const comm_;
    mutable std::mutex mu_;
    struct Alloc {
        size_t bytes;
        int device; /* -1: host memory */
    };
    std::map<uintptr_t, Alloc> allocs_; /* start -> allocation, under mu_ */
};

}  // namespace collectived
