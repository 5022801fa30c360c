/**
 * @file pool.h
 * @brief A job's memory pool: memory of one kind (kernels/mem_kind.h) mapped by the daemon and
 *        by every local rank of the job, so buckets are reduced in place. What holds the memory
 *        is the pool's backend, a table (coll_pool_backend_t): a memfd for host memory, whose fd
 *        travels to clients with SCM_RIGHTS, or a device's memory, whose chunks' fds travel so.
 *
 * Allocations are tracked per owner (a client session) so that a client can only name its own
 * buffers in a collective, and everything an owner holds is released when it goes away.
 * A pool is charged to its daemon's budget either for its whole size (a fixed pool) or, on
 * demand, for what its allocations hold: the memfd is sparse (tmpfs takes a page when it is
 * first touched), so a large on-demand pool costs only what is allocated in it, and what is
 * freed is punched out of the file (fallocate) and given back. A device pool grows instead:
 * its backend commits physical memory behind its range as allocations reach further, and is
 * charged for that (the device's budget), until the pool is destroyed.
 * Only the loop thread touches a pool.
 */
#ifndef COLL_POOL_H
#define COLL_POOL_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

#include "kernels/mem_kind.h"

/** Alignment of every allocation, bytes (a cache line; the kernels use aligned vectors). */
#define COLL_POOL_ALIGN 64u

typedef struct coll_pool coll_pool_t;

/** What the pools of one daemon may hold together (pool_budget). Loop thread only. */
typedef struct {
    uint64_t limit; /**< bytes all pools may hold together */
    uint64_t used;  /**< bytes they are charged for now */
} coll_pool_budget_t;

/** A piece of a pool's backing that the ranks map: a memfd pool is one, the whole file; a
 *  device pool one per physical allocation behind its range, added as it grows. */
typedef struct {
    size_t offset; /**< from the start of the pool */
    size_t bytes;
    int fd;        /**< what the ranks map it with (owned by the backing; dup it to keep it) */
} coll_pool_chunk_t;

/**
 * The memory behind pools of one backing: a table of functions on the backend's state (what
 * create() made). The pool calls them on the loop thread only; each logs its own failures.
 */
typedef struct coll_pool_backend {
    const char *name;     /**< "memfd", "device" */
    coll_mem_kind_t kind; /**< the kind of its memory */
    /**
     * Create the backing of @p bytes on @p device (a device kind's; 0 for host memory), named
     * @p name where names exist.
     * @return COLL_OK and the state in *mem_p; COLL_ERR_NOMEM, or the device's error
     *         (device/dev.h), with nothing left behind.
     */
    coll_status_t (*create)(int device, const char *name, size_t bytes, void **mem_p);
    /** Map it for the daemon: *base_p, @p bytes. @return COLL_OK; COLL_ERR_NOMEM. */
    coll_status_t (*map)(void *mem, size_t bytes, uint8_t **base_p);
    /**
     * Back [0, @p end) with memory, taking at most @p room more bytes; *grown_p is what it
     * took (0 when it was backed already). NULL for a backing that takes memory when it is
     * touched (a memfd): the pool then charges its allocations instead.
     * @return COLL_OK; COLL_ERR_POOL_FULL when that needs more than @p room or more chunks than
     *         a reply carries (nothing changes); COLL_ERR_NOMEM or the device's error.
     */
    coll_status_t (*commit)(void *mem, size_t end, size_t room, size_t *grown_p);
    /** Give whole pages [offset, offset + len) back, keeping the size; touched again they
     *  read zero. A failure is logged and leaves the pages taken. NULL for a backing that
     *  keeps what it took until it is destroyed. */
    void (*punch)(void *mem, size_t offset, size_t len);
    /** @return 1 with chunk @p i (from 0, in offset order) in *c; 0 when there is none. */
    int (*chunk)(const void *mem, size_t i, coll_pool_chunk_t *c);
    /** Unmap @p base (NULL: not mapped) and free the backing and the state. */
    void (*destroy)(void *mem, uint8_t *base, size_t bytes);
    /** Let device @p peer read and write, in this process, what the pool holds and what it
     *  will hold as it grows. @return COLL_OK; COLL_ERR_INVALID for a device that is none; the
     *  device's error (@p peer not recorded). NULL for a backing of host memory. */
    coll_status_t (*grant)(void *mem, int peer);
} coll_pool_backend_t;

/** Host memory in a sealed-size memfd (core/pool_memfd.c), sparse on tmpfs. */
extern const coll_pool_backend_t coll_pool_memfd;
/** Device memory (core/pool_device.c): a reserved range of device addresses, physical
 *  allocations mapped behind it as it grows, each exported as a file descriptor. */
extern const coll_pool_backend_t coll_pool_device;

/**
 * @brief Create a pool of @p bytes backed by a sealed-size memfd named @p name (the memfd
 *        backend: host memory).
 * @param [out] pool_p The pool; destroy with coll_pool_destroy().
 * @return COLL_OK; COLL_ERR_INVALID for 0 bytes; COLL_ERR_NOMEM when memfd, ftruncate or mmap
 *         fail (logged with the reason).
 */
coll_status_t coll_pool_create(const char *name, size_t bytes, coll_pool_t **pool_p);

/**
 * @brief Create a pool of @p bytes on backend @p be (which must outlive the pool), on
 *        @p device for a device kind (0 for host memory).
 * @param [out] pool_p The pool; destroy with coll_pool_destroy().
 * @return COLL_OK; COLL_ERR_INVALID for 0 bytes; COLL_ERR_NOMEM when the bookkeeping or the
 *         backend's create or map fail, or the device's error (the backend logged why;
 *         nothing is left behind).
 */
coll_status_t coll_pool_create_on(const coll_pool_backend_t *be, int device, const char *name,
                                  size_t bytes, coll_pool_t **pool_p);

/**
 * @brief Keep the first @p bytes of a fresh pool out of the allocator (the ranks' control
 *        blocks, proto/ctl.h). @return COLL_OK; COLL_ERR_POOL_FULL when the pool is smaller.
 */
coll_status_t coll_pool_reserve(coll_pool_t *pool, size_t bytes);

/**
 * @brief Charge @p budget for @p pool from now on: a fixed pool for its size, at once (the caller
 *        checked that it fits); an on-demand pool (@p on_demand) for each allocation (rounded
 *        to COLL_POOL_ALIGN) while it lives, refusing one that the budget has no room for; an
 *        on-demand pool whose backend commits memory (a device pool) for what the backend
 *        took, refusing growth beyond the budget. Call once, right after
 *        coll_pool_create(); destroying the pool gives the charge back. @p budget must outlive
 *        the pool.
 */
void coll_pool_set_budget(coll_pool_t *pool, coll_pool_budget_t *budget, int on_demand);

/** @return 1 when @p pool is charged for its allocations (coll_pool_set_budget()), else 0. */
int coll_pool_on_demand(const coll_pool_t *pool);

/** @brief Unmap the pool, destroy its backing and give its budget back. Safe with NULL. */
void coll_pool_destroy(coll_pool_t *pool);

/** @return The fd the ranks map the pool's first chunk with (a memfd pool's whole file), owned
 *          by the pool (dup it to keep it); -1 when it has no chunk yet. */
int coll_pool_fd(const coll_pool_t *pool);
/** @return 1 with chunk @p i of the pool's backing in *c (coll_pool_chunk_t), 0 past the last. */
int coll_pool_chunk(const coll_pool_t *pool, size_t i, coll_pool_chunk_t *c);
/** @brief Let device @p peer read and write the daemon's mapping of @p pool, a device pool,
 *         now and as it grows (its backend's grant: peer access between two devices); a later
 *         growth whose grant the device refuses fails (the allocation gets the device's error).
 *  @return COLL_OK; COLL_ERR_UNSUPPORTED for a pool of host memory; COLL_ERR_INVALID for a
 *          device that is none; the device's error (coll_dev_error() says it; @p peer is not
 *          recorded, so no growth grants it and no operation relies on it). */
coll_status_t coll_pool_grant(coll_pool_t *pool, int peer);
/** @return Bytes the pool is charged to its budget for now: its size (fixed), its allocations
 *          (on demand), or what its backend took (a device pool). */
size_t coll_pool_charged(const coll_pool_t *pool);
/** @return Allocations in the pool (coll_pool_reserve()'s prefix not counted). */
size_t coll_pool_allocations(const coll_pool_t *pool);
/** @return The kind of the pool's memory, its backend's: every buffer in it has this kind. */
coll_mem_kind_t coll_pool_kind(const coll_pool_t *pool);
/** @return The daemon's mapping of the pool. */
uint8_t *coll_pool_base(const coll_pool_t *pool);
/** @return The pool size in bytes. */
size_t coll_pool_size(const coll_pool_t *pool);
/** @return Bytes not allocated (possibly fragmented). */
size_t coll_pool_free_bytes(const coll_pool_t *pool);

/**
 * @brief Allocate @p bytes (rounded up to COLL_POOL_ALIGN) for @p owner, first fit.
 * @param [out] offset_p Offset of the allocation from the start of the pool.
 * @return COLL_OK; COLL_ERR_INVALID for 0 bytes; COLL_ERR_POOL_FULL when no gap is large enough
 *         or, on demand, when the budget has no room left; COLL_ERR_NOMEM when the bookkeeping
 *         cannot grow; a committing backend's error when it could not take the memory (the
 *         backend logged why; coll_dev_error() says it on this thread).
 */
coll_status_t coll_pool_alloc(coll_pool_t *pool, size_t bytes, const void *owner,
                              size_t *offset_p);

/**
 * @brief Free the allocation of @p owner starting at @p offset (on demand: the whole pages of
 *        the free gap it leaves are given back to the backend, punched out of the memfd).
 * @return COLL_OK; COLL_ERR_NOT_IN_POOL when @p owner has no allocation starting there.
 */
coll_status_t coll_pool_free(coll_pool_t *pool, size_t offset, const void *owner);

/** @brief Free every allocation of @p owner. */
void coll_pool_free_owner(coll_pool_t *pool, const void *owner);

/**
 * @brief Check that [offset, offset + len) lies inside one allocation of @p owner.
 * @return 1 when it does (len 0 needs only offset inside or at the end of one), 0 otherwise.
 */
int coll_pool_range_owned(const coll_pool_t *pool, uint64_t offset, uint64_t len,
                          const void *owner);

#endif
