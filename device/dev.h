/**
 * @file dev.h
 * @brief The device layer: what the daemon and the library ask of an accelerator's driver, as
 *        one table of functions (coll_dev_ops_t), with two implementations: CUDA's driver API,
 *        loaded at run time (device/dev_cuda.c: dlopen of libcuda.so.1, so the same binaries
 *        start on a machine without a driver), and a fake over host memory for the tests
 *        (device/dev_fake.c, chosen by COLL_DEVICE_FAKE).
 *
 * Memory follows the driver's virtual memory management: a physical allocation
 * (coll_dev_mem_t) is created on a device, exported as a file descriptor that another process
 * imports, and mapped into a range of device addresses reserved beforehand, so a pool can map
 * more physical allocations behind its range as it grows. Streams and events order work on a
 * device: a copy or a kernel runs on a stream, an event recorded on it completes when the work
 * before it did, and another stream (or the loop, polling) waits for the event.
 *
 * Errors: every function returns a coll_status_t converted once here from the driver's code
 * (out of memory COLL_ERR_NOMEM, an unsupported feature COLL_ERR_UNSUPPORTED, an invalid
 * argument COLL_ERR_INVALID, anything else COLL_ERR_IO); the failed call, its arguments and the
 * driver's text are in coll_dev_error() of the calling thread. Nothing here logs.
 *
 * Threads: every function of the table may be called from any thread; each sets the device's
 * context current on the calling thread where the driver needs one.
 */
#ifndef COLL_DEVICE_DEV_H
#define COLL_DEVICE_DEV_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

/** Devices one process serves: device indices are below this. */
#define COLL_DEV_MAX 16
/** Bytes of a device's UUID (the driver's CUuuid), which names it across processes that see
 *  different device numberings (CUDA_VISIBLE_DEVICES). */
#define COLL_DEV_UUID_BYTES 16
/** Longest text of coll_dev_error() and coll_dev_status(), NUL included. */
#define COLL_DEV_TEXT_MAX 256

/** What a device is. */
typedef struct {
    char name[96];         /**< the driver's name of it, e.g. "NVIDIA H100 80GB HBM3" */
    uint64_t mem_bytes;    /**< its memory */
    int cc_major, cc_minor; /**< compute capability (0.0 for the fake) */
    uint8_t uuid[COLL_DEV_UUID_BYTES];
    int shareable;         /**< 1 when it has virtual memory management and file-descriptor
                                handles (pools can be shared with other processes) */
} coll_dev_info_t;

/** A physical allocation on a device (the driver's handle); 0 is none. */
typedef uint64_t coll_dev_mem_t;
/** A stream of work on a device: the driver's own (CUstream), so a caller may pass one it got
 *  elsewhere (a framework's current stream). NULL is the default stream wherever an entry
 *  takes a stream (CUDA's legacy NULL stream; the fake's own default one). */
typedef struct coll_dev_stream *coll_dev_stream_t;
/** An event on a device: the driver's own (CUevent). */
typedef struct coll_dev_event *coll_dev_event_t;

/** The functions of one implementation. Device addresses are uint64_t (CUdeviceptr). */
typedef struct coll_dev_ops {
    const char *name; /**< "cuda", "fake" */
    /** @return Devices present (0 .. COLL_DEV_MAX; more are not served). */
    int (*count)(void);
    /** @brief What device @p dev is. @return COLL_OK; an error for a device the driver refuses. */
    coll_status_t (*info)(int dev, coll_dev_info_t *info);
    /** @brief The granularity of physical allocations and of mappings on @p dev, bytes (2 MiB
     *         on current GPUs): sizes and offsets of both are multiples of it. */
    coll_status_t (*granularity)(int dev, size_t *gran_p);
    /** @brief Create a physical allocation of @p bytes (a multiple of the granularity) on
     *         @p dev, exportable as a file descriptor. Release with mem_release(). */
    coll_status_t (*mem_create)(int dev, size_t bytes, coll_dev_mem_t *mem_p);
    /** @brief A new file descriptor (close-on-exec, the caller's to close) that another process
     *         imports @p mem with. */
    coll_status_t (*mem_export)(coll_dev_mem_t mem, int *fd_p);
    /** @brief Import the allocation behind @p fd (which stays the caller's) for @p dev. Release
     *         the handle with mem_release(); the memory lives while any mapping of it does. */
    coll_status_t (*mem_import)(int dev, int fd, coll_dev_mem_t *mem_p);
    /** @brief Drop a handle; mappings of the memory keep it. Safe with 0. */
    void (*mem_release)(coll_dev_mem_t mem);
    /** @brief Reserve @p bytes of device addresses aligned to @p align (multiples of the
     *         granularity) on @p dev, with nothing mapped. */
    coll_status_t (*va_reserve)(int dev, size_t bytes, size_t align, uint64_t *va_p);
    /** @brief Give a reservation back (everything in it unmapped first). */
    void (*va_free)(uint64_t va, size_t bytes);
    /** @brief Map all @p bytes of @p mem at @p va (inside a reservation) and let @p dev read and
     *         write them. */
    coll_status_t (*map)(int dev, uint64_t va, size_t bytes, coll_dev_mem_t mem);
    /** @brief Whether device @p dev can read and write memory of device @p peer directly
     *         (peer access over NVLink or PCIe; cuDeviceCanAccessPeer): *@p can_p 1 or 0.
     *  @return COLL_OK (a device with itself: 1); COLL_ERR_INVALID for a device that is none;
     *          the driver's error. */
    coll_status_t (*peer_access)(int dev, int peer, int *can_p);
    /** @brief Let device @p dev read and write [va, va + bytes) too, a range that map() mapped
     *         for another device (cuMemSetAccess with @p dev's descriptor; the access of the
     *         devices granted before is kept). Needs peer_access() from @p dev to the memory's
     *         device. Undone by unmap(). @return COLL_OK; COLL_ERR_INVALID for a device that
     *         is none; the driver's error (the fake's COLL_ERR_UNSUPPORTED without peer
     *         access). */
    coll_status_t (*grant)(int dev, uint64_t va, size_t bytes);
    /** @brief Unmap [va, va + bytes), which stays reserved. */
    void (*unmap)(uint64_t va, size_t bytes);
    /** @brief A stream on @p dev, running asynchronously to the host. */
    coll_status_t (*stream_create)(int dev, coll_dev_stream_t *s_p);
    /** @brief Destroy a stream of stream_create() once its work is done. Safe with NULL. */
    void (*stream_destroy)(coll_dev_stream_t s);
    /** @brief Queue a copy of @p bytes from @p src to @p dst on @p s; either side may be host
     *         memory (a pointer as uint64_t) or device memory. */
    coll_status_t (*copy_async)(uint64_t dst, uint64_t src, size_t bytes, coll_dev_stream_t s);
    /** @brief Page-locked host memory of @p bytes (> 0), for copies with @p dev that the
     *         device runs asynchronously (the staged path's host copies); aligned to at least
     *         64 bytes. Free with host_free(), same device. @return COLL_OK; COLL_ERR_NOMEM when
     *         the driver cannot lock that much (the caller may fall back to ordinary memory);
     *         COLL_ERR_INVALID for a device that is none or 0 bytes; the driver's error. */
    coll_status_t (*host_alloc)(int dev, size_t bytes, void **p_p);
    /** @brief Free memory of host_alloc() on @p dev. Safe with NULL. */
    void (*host_free)(int dev, void *p);
    /** @brief Wait, blocking, until all work queued on @p s is done. @return COLL_OK; the
     *         driver's error; the fake's COLL_ERR_TIMEDOUT for a wait for a word that stays
     *         below its value (COLL_DEVICE_FAKE_WAIT_MS). */
    coll_status_t (*stream_sync)(coll_dev_stream_t s);
    /** @brief An event on @p dev, for ordering only (no timing). */
    coll_status_t (*event_create)(int dev, coll_dev_event_t *e_p);
    /** @brief Destroy an event. Safe with NULL. */
    void (*event_destroy)(coll_dev_event_t e);
    /** @brief Record @p e on @p s: it completes when the work queued on @p s before it did. */
    coll_status_t (*event_record)(coll_dev_event_t e, coll_dev_stream_t s);
    /** @return COLL_OK when @p e completed (or was never recorded), COLL_INPROGRESS when not
     *          yet, an error otherwise. Does not block: the daemon's loop polls with it. */
    coll_status_t (*event_query)(coll_dev_event_t e);
    /** @brief Make work queued on @p s from now on wait for @p e (its record at this call),
     *         without blocking the host, even where @p e's stream is itself held (by a
     *         stream_wait_word(), or a wait for another event): the fake holds @p s's later work
     *         as a device does (device/dev_fake_events.c).
     *  @return COLL_OK; the driver's error; the fake's COLL_ERR_NOMEM. */
    coll_status_t (*stream_wait)(coll_dev_stream_t s, coll_dev_event_t e);
    /** @brief Make @p dev current on the calling thread (its primary context pushed) for a
     *         library that works on the current device (NCCL's communicator creation); undo
     *         with ctx_leave(), on the same thread. @return COLL_OK; COLL_ERR_INVALID for a
     *         device that is none; the driver's error. */
    coll_status_t (*ctx_enter)(int dev);
    /** @brief Undo the calling thread's last successful ctx_enter(). */
    void (*ctx_leave)(void);
    /** Page-lock @p bytes of existing host memory at @p p (page-aligned; e.g. a page of a memfd
     *  mapping shared with another process) and map it for every device: *@p dev_p is its device
     *  address, for stream_wait_word() and stream_write_word(). Undo with host_unregister().
     *  The memory stays the caller's; a range is registered once.
     *  @return COLL_OK; COLL_ERR_INVALID for NULL, 0 bytes or an unaligned @p p; the driver's
     *          error (COLL_ERR_NOMEM when it cannot lock that much; COLL_ERR_IO for a range
     *          registered already). */
    coll_status_t (*host_register)(void *p, size_t bytes, uint64_t *dev_p);
    /** Undo host_register() of @p p (the same address). Safe with NULL. */
    void (*host_unregister)(void *p);
    /** Make the work queued on @p s (NULL: the default stream, CUDA's legacy NULL stream of the
     *  calling thread's current context; the fake's one of its own) from now on wait, without
     *  blocking the host, until the 64-bit word at device address @p word (inside a
     *  host_register() range, 8-byte aligned) is >= @p value (unsigned; the driver compares
     *  as (int64_t)(word - value) >= 0, the same while the two are less than 2^63 apart).
     *  The fake holds the stream's later work (copies, events, word writes) as a device does.
     *  @return COLL_OK once queued; COLL_ERR_INVALID for a misaligned @p word; the driver's
     *          error (COLL_ERR_UNSUPPORTED where it has no 64-bit stream memory operations);
     *          the fake's COLL_ERR_NOMEM. */
    coll_status_t (*stream_wait_word)(coll_dev_stream_t s, uint64_t word, uint64_t value);
    /** Queue on @p s (NULL: the default stream, as for stream_wait_word()) the write of @p value
     *  into the 64-bit word at device address @p word, done once the work queued on @p s before
     *  it is (a write the host reading the word then sees whole, with that work's results).
     *  @return COLL_OK once queued; COLL_ERR_INVALID for a misaligned @p word; the driver's
     *          error (COLL_ERR_UNSUPPORTED as for stream_wait_word()). */
    coll_status_t (*stream_write_word)(coll_dev_stream_t s, uint64_t word, uint64_t value);
} coll_dev_ops_t;

/**
 * @brief The device layer of this process, opened on the first call (thread-safe; later calls
 *        return the same): the fake when COLL_DEVICE_FAKE is set (test only: 1 .. COLL_DEV_MAX
 *        fake devices), else CUDA's driver.
 * @param [out] ops_p The table, valid until the process ends.
 * @return COLL_OK; COLL_ERR_UNSUPPORTED when there is none: coll_dev_status() says why (no CUDA
 *         driver and the loader's reason, cuInit failed and the driver's text, built without
 *         CUDA, a malformed COLL_DEVICE_FAKE).
 */
coll_status_t coll_dev_open(const coll_dev_ops_t **ops_p);

/**
 * @brief What coll_dev_open() found, in words for logs and status: "cuda driver 13.0, 1
 *        device", "fake (COLL_DEVICE_FAKE, test only), 1 device", or why there is no device
 *        layer ("no CUDA driver: libcuda.so.1: cannot open shared object file: ...").
 *        Opens the layer if nothing did yet. Thread-safe.
 * @return A string valid until the process ends.
 */
const char *coll_dev_status(void);

/**
 * @brief The device layer this process's environment selects, whether or not it opened:
 *        "fake" when COLL_DEVICE_FAKE is a count above 0 or malformed (the process asked for
 *        the fake), else "cuda"; the name of the table coll_dev_open() gives, when it gives
 *        one. A daemon and its ranks must select the same. Thread-safe.
 * @return A static string.
 */
const char *coll_dev_layer(void);

/** @return The text of the last failed device call on the calling thread ("" when none). */
const char *coll_dev_error(void);

/** @brief Set the calling thread's coll_dev_error() text (printf format); for the
 *         implementations. @return @p st. */
coll_status_t coll__dev_fail(coll_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/** @brief For the implementations: host_register()'s refusals (NULL @p p or @p dev_p, 0
 *         @p bytes, @p p not page-aligned), said in coll_dev_error() after @p who.
 *  @return COLL_OK; COLL_ERR_INVALID. */
coll_status_t coll__dev_check_register(const void *p, size_t bytes, const uint64_t *dev_p,
                                       const char *who);

/** @brief For the implementations: a 64-bit word's address for stream_wait_word() and
 *         stream_write_word() (not 0, 8-byte aligned), said in coll_dev_error() after @p who.
 *  @return COLL_OK; COLL_ERR_INVALID. */
coll_status_t coll__dev_check_word(uint64_t word, const char *who);

/** The fake: devices of host memory (memfds mapped with mmap), streams that run their work at
 *  once but what a wait for a word holds, events as counters, "pinned" memory that is
 *  ordinary. Test only; coll_dev_open() returns it when COLL_DEVICE_FAKE is set. COLL_DEVICE_FAKE_COPY_DELAY_MS=N (test only) makes an event
 *  recorded after a copy complete only N ms after the record, as a real device's copy takes
 *  time, so the callers' polling is exercised, and a stream_write_word() land N ms after it was
 *  queued (stream_sync() and stream_destroy() wait for it); COLL_DEVICE_FAKE_COPY_MBPS=N
 *  (test only) gives each stream N MB/s: an event completes no earlier than the copies queued
 *  on its stream before it would have, one after the other; COLL_DEVICE_FAKE_LAZY=1 (test
 *  only) runs a stream's copies and executor launches only when something looks at the stream:
 *  a query of an event recorded on it, a stream_wait() for one (so a stream that reads what
 *  another device's stream writes, without waiting for its event, reads stale data), a sync,
 *  its destroy, a word write; COLL_DEVICE_FAKE_PIN_FAIL=1 makes
 *  host_alloc() refuse with COLL_ERR_NOMEM;
 *  COLL_DEVICE_FAKE_EXEC_FAIL=N (test only) faults a device at the executor's N-th launch
 *  (coll__dev_fake_exec_launch()), COLL_DEVICE_FAKE_COPY_FAIL=N at the process's N-th
 *  copy_async(). A host_register() range's device address is its
 *  host address; a stream_wait_word() holds the stream's later work until the word is there
 *  (its copies land, its events complete, when a query, copy or sync finds it there, a write
 *  behind it lands from a thread); a stream_wait() for an event not reached holds the stream's
 *  later work likewise, until the event's stream did the work before the event (a word write
 *  behind such a wait is refused: COLL_ERR_UNSUPPORTED); stream_sync() waits for the word, polling every 100 us, for
 *  at most COLL_DEVICE_FAKE_WAIT_MS ms (default 60000), then fails with COLL_ERR_TIMEDOUT. Every
 *  pair of fake devices has peer access (peer_access(), as the GPUs of an NVLink box) unless
 *  COLL_DEVICE_FAKE_PEER=0 (test only: none has, as GPUs without P2P), read at each call;
 *  grant() then refuses with COLL_ERR_UNSUPPORTED, and otherwise only counts what it granted
 *  (coll__dev_fake_granted()): the memory is the host's, which every device reads. */
extern const coll_dev_ops_t coll_dev_fake;

/**
 * @brief Open the fake with @p ndev devices (1 .. COLL_DEV_MAX), for a test that picks it
 *        without the environment. @return COLL_OK; COLL_ERR_INVALID for another count.
 */
coll_status_t coll__dev_fake_init(int ndev);

/** @return Bytes the fake's grant() gave device @p dev access to since the process started
 *          (test only: what a pool granted a peer). Thread-safe. */
uint64_t coll__dev_fake_granted(int dev);

/**
 * @brief For the fake's executor (daemon/core/dev_exec.c), before each of its asynchronous
 *        launches on fake device @p dev: counts the launch, and the COLL_DEVICE_FAKE_EXEC_FAIL-th
 *        of the process (test only) faults the device as a kernel's illegal address does on a
 *        GPU: the launch succeeds, the device runs no more work, the next event_query(),
 *        stream_sync() or coll__dev_fake_exec_sync() on it fails with COLL_ERR_IO and
 *        CUDA_ERROR_ILLEGAL_ADDRESS's text, and from then every call on it that creates or
 *        queues something fails so (sticky, as a CUDA context's error). Thread-safe.
 * @param [out] run_p 1: run the launch's work; 0: do not (the device faulted).
 * @return COLL_OK; COLL_ERR_IO once the fault was reported (coll_dev_error() says it).
 */
coll_status_t coll__dev_fake_exec_launch(int dev, int *run_p);

/**
 * @brief For the fake's executor (daemon/core/dev_exec.c), after coll__dev_fake_exec_launch()
 *        said to run a launch on fake stream @p s (NULL: the default one): queue it in the
 *        stream's order where the stream holds work back (COLL_DEVICE_FAKE_LAZY; copies not
 *        landed, COLL_DEVICE_FAKE_COPY_MBPS; a wait for a word): @p run(@p arg, 1) when it
 *        lands, or @p run(@p arg, 0) when it is dropped (its device faulted, or the stream
 *        destroyed behind a wait that never passed), exactly once, on the thread that lands it.
 *        The stream's user's thread only, as its other entries.
 * @return 1 queued; 0 nothing held: the caller runs it now, @p run not called; -1 out of
 *         memory (@p run not called).
 */
int coll__dev_fake_exec_defer(coll_dev_stream_t s, void (*run)(void *arg, int go), void *arg);

/**
 * @brief For the stand-in NCCL (device/nccl.c): as coll__dev_fake_exec_defer(), and once
 *        @p run(@p arg, 1) started the collective (on the stand-in's thread), it stays the
 *        stream's work until @p busy(@p arg) returns 0: the stream's later work (copies, the
 *        executor's launches, events) waits for it, as a GPU's stream waits for an NCCL kernel.
 *        @p busy is polled whenever the stream is looked at (a query, a copy, a sync) and is
 *        not called after it returned 0, nor after @p run(@p arg, 0). The stream's user's
 *        thread only.
 * @return As coll__dev_fake_exec_defer(): 1 held; 0 nothing held (the caller runs it now,
 *         neither called); -1 out of memory.
 */
int coll__dev_fake_hold(coll_dev_stream_t s, void (*run)(void *arg, int go), int (*busy)(void *arg),
                        void *arg);

/** @return 1 when the device of fake stream @p s (NULL: the default stream) faulted (reported
 *          or not: coll__dev_fake_exec_launch()), so it runs no more work: the stand-in NCCL's
 *          collectives are not issued on it (device/nccl.c), as a faulted GPU runs no NCCL
 *          kernel. Thread-safe. */
int coll__dev_fake_stream_faulted(coll_dev_stream_t s);

/** @brief Fault the device of fake stream @p s (NULL: the default stream) now, as an injected
 *         fault does (coll__dev_fake_exec_launch()), @p why (a static string) named in the
 *         error it reports: device/nccl.c's for a stand-in collective that would start on an
 *         aborted communicator. Thread-safe. */
void coll__dev_fake_fault_now(coll_dev_stream_t s, const char *why);

/** @brief For the fake's executor's sync on fake device @p dev: reports its fault as
 *         event_query() does. @return COLL_OK; COLL_ERR_IO (coll_dev_error() says it). */
coll_status_t coll__dev_fake_exec_sync(int dev);

/**
 * @brief Open CUDA's driver: dlopen libcuda.so.1, resolve its entries, cuInit.
 * @param [out] ops_p The table on success.
 * @param [out] why   On failure, why, for coll_dev_status().
 * @return COLL_OK; COLL_ERR_UNSUPPORTED (no driver, an entry missing, cuInit failed, built
 *         without CUDA).
 */
coll_status_t coll__dev_cuda_open(const coll_dev_ops_t **ops_p, char *why, size_t whylen);

/** @brief The CUDA driver's version as "13.0" into @p buf (after coll__dev_cuda_open()). */
void coll__dev_cuda_version(char *buf, size_t len);

/**
 * @brief Look for NCCL (dlopen libnccl.so.2, its entries, ncclGetVersion), once per process;
 *        device/nccl.h gives its functions.
 * @param [out] text Its version ("2.28.9") or why it is absent; valid until the process ends.
 * @return 1 when present, 0 when not.
 */
int coll_nccl_probe(const char **text);

#endif
