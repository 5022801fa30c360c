/*
 * The fake device layer (dev.h), for tests: host memory stands for device memory with the
 * driver's semantics, so the code above it runs its real path. A physical allocation is a memfd
 * (its handle the fd), exported and imported as a duplicate of it, and mapped with mmap into a
 * reservation of PROT_NONE address space: as with the driver, the memory lives while a mapping
 * does, and two processes that map it share it. Streams run their work at once (a copy is a
 * memcpy); events count: one completes once its stream has done what was queued before it,
 * which a synchronous stream always has. COLL_DEVICE_FAKE_COPY_DELAY_MS holds every event back
 * for that long after its record, as a real copy takes time, so that a caller that polls events
 * is seen to wait (stream syncs and waits are not delayed: the work is done);
 * COLL_DEVICE_FAKE_COPY_MBPS gives each stream that bandwidth, in MB/s: an event completes no
 * earlier than the stream's copies before it would have ended, each after the one before, and a
 * copy's data lands only then (when a query finds it ended, or the stream is synced, waited
 * for, destroyed or writes a word), so that a reader that does not wait reads what was there.
 * Its "pinned" host memory is ordinary memory, refused when COLL_DEVICE_FAKE_PIN_FAIL is set.
 *
 * Words shared with the host: registered host memory is its own device address; a stream's
 * word write is an atomic release store, at once, or with COLL_DEVICE_FAKE_COPY_DELAY_MS that
 * long later from a thread of its own, in the stream's order (the stream is behind: a reader
 * that does not wait is seen; stream syncs wait for it); a stream's wait for a word blocks the
 * caller, polling every 100 us (never spinning), for at most COLL_DEVICE_FAKE_WAIT_MS.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "device/dev.h"

/* What a fake device says it has; a pool's budget is a fraction of it (memfds are sparse, so
 * this costs nothing until written). */
#define FAKE_MEM_BYTES (8ull << 30)
#define FAKE_GRANULARITY ((size_t)2 << 20)

static int ndevices;

struct coll_dev_stream {
    int dev;
    uint64_t queued;       /* work queued so far */
    uint64_t done;         /* work done: always all of it */
    uint64_t late;         /* delayed word writes queued (COLL_DEVICE_FAKE_COPY_DELAY_MS) */
    _Atomic uint64_t landed; /* of those, done: each in its turn, by a thread of its own */
    uint64_t busy_ns;      /* when its copies would end at COLL_DEVICE_FAKE_COPY_MBPS */
    struct fake_copy *due; /* its copies not landed yet (COLL_DEVICE_FAKE_COPY_MBPS), in order */
    size_t head, ndue, cap; /* due[head .. ndue) are waiting */
};

/* A copy that lands when it would have ended (COLL_DEVICE_FAKE_COPY_MBPS). */
struct fake_copy {
    uint64_t dst, src, end_ns;
    size_t bytes;
};

/* A delayed stream_write_word(): the @p ticket-th of its stream, due at @p due_ns. */
struct late_write {
    struct coll_dev_stream *s;
    uint64_t *word, value, due_ns, ticket;
};

struct coll_dev_event {
    int dev;
    const struct coll_dev_stream *stream; /* where it was last recorded, NULL: never */
    uint64_t target;                      /* the stream's queued work at that moment */
    uint64_t ready_ns;                    /* CLOCK_MONOTONIC time it may complete at */
};

/* Host memory comes aligned as the kernels' vectors want it. */
#define FAKE_HOST_ALIGN 64

/* A test knob of the environment as a number, 0 when absent. */
static uint64_t knob(const char *name)
{
    const char *v = getenv(name);

    return v != NULL ? strtoull(v, NULL, 10) : 0;
}

/* A test knob as a number, @p dflt when absent. */
static uint64_t knob_or(const char *name, uint64_t dflt)
{
    return getenv(name) != NULL ? knob(name) : dflt;
}

/* Sleep 100 us: how often the fake looks again at what another thread will change. */
static void nap(void)
{
    struct timespec ts = {0, 100000};

    nanosleep(&ts, NULL);
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

coll_status_t coll__dev_fake_init(int ndev)
{
    if (ndev < 1 || ndev > COLL_DEV_MAX) {
        return COLL_ERR_INVALID;
    }
    ndevices = ndev;
    return COLL_OK;
}

static int fake_count(void)
{
    return ndevices;
}

static coll_status_t check_dev(int dev, const char *what)
{
    if (dev < 0 || dev >= ndevices) {
        return coll__dev_fail(COLL_ERR_INVALID, "%s: no fake device %d (%d present)", what, dev,
                              ndevices);
    }
    return COLL_OK;
}

static coll_status_t fake_info(int dev, coll_dev_info_t *info)
{
    coll_status_t st = check_dev(dev, "device info");

    if (st != COLL_OK) {
        return st;
    }
    memset(info, 0, sizeof(*info));
    snprintf(info->name, sizeof(info->name), "fake device %d (host memory)", dev);
    info->mem_bytes = FAKE_MEM_BYTES;
    memcpy(info->uuid, "coll-fake-dev", 13);
    info->uuid[COLL_DEV_UUID_BYTES - 1] = (uint8_t)dev;
    info->shareable = 1;
    return COLL_OK;
}

static coll_status_t fake_granularity(int dev, size_t *gran_p)
{
    coll_status_t st = check_dev(dev, "granularity");

    if (st == COLL_OK) {
        *gran_p = FAKE_GRANULARITY;
    }
    return st;
}

static coll_status_t fake_mem_create(int dev, size_t bytes, coll_dev_mem_t *mem_p)
{
    coll_status_t st = check_dev(dev, "create");
    int fd;

    if (st != COLL_OK) {
        return st;
    }
    if (bytes == 0 || bytes % FAKE_GRANULARITY != 0) {
        return coll__dev_fail(COLL_ERR_INVALID, "create of %zu bytes: not a multiple of the "
                              "granularity %zu", bytes, FAKE_GRANULARITY);
    }
    fd = memfd_create("coll-fake-device", MFD_CLOEXEC);
    if (fd < 0) {
        return coll__dev_fail(COLL_ERR_NOMEM, "create of %zu bytes: memfd_create: %s", bytes,
                              strerror(errno));
    }
    if (ftruncate(fd, (off_t)bytes) < 0) {
        int e = errno;
        close(fd);
        return coll__dev_fail(COLL_ERR_NOMEM, "create of %zu bytes: ftruncate: %s", bytes,
                              strerror(e));
    }
    *mem_p = (coll_dev_mem_t)fd + 1; /* 0 is no handle */
    return COLL_OK;
}

static coll_status_t fake_dup(int fd, int *fd_p, const char *what)
{
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);

    if (d < 0) {
        return coll__dev_fail(COLL_ERR_IO, "%s of fd %d: %s", what, fd, strerror(errno));
    }
    *fd_p = d;
    return COLL_OK;
}

static coll_status_t fake_mem_export(coll_dev_mem_t mem, int *fd_p)
{
    return fake_dup((int)(mem - 1), fd_p, "export");
}

static coll_status_t fake_mem_import(int dev, int fd, coll_dev_mem_t *mem_p)
{
    coll_status_t st = check_dev(dev, "import");
    int d = -1;

    if (st == COLL_OK && (st = fake_dup(fd, &d, "import")) == COLL_OK) {
        *mem_p = (coll_dev_mem_t)d + 1;
    }
    return st;
}

static void fake_mem_release(coll_dev_mem_t mem)
{
    if (mem != 0) {
        close((int)(mem - 1));
    }
}

static coll_status_t fake_va_reserve(int dev, size_t bytes, size_t align, uint64_t *va_p)
{
    coll_status_t st = check_dev(dev, "reserve");
    uint8_t *p, *start;

    if (st != COLL_OK) {
        return st;
    }
    if (bytes == 0 || align == 0 || bytes % align != 0 || bytes > SIZE_MAX - align) {
        return coll__dev_fail(COLL_ERR_INVALID, "reserve of %zu bytes aligned to %zu", bytes,
                              align);
    }
    /* Over-reserve by the alignment and trim both ends, as the driver aligns a reservation. */
    p = mmap(NULL, bytes + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        return coll__dev_fail(COLL_ERR_NOMEM, "reserve of %zu bytes: %s", bytes, strerror(errno));
    }
    start = p + (align - (uintptr_t)p % align) % align;
    if (start > p) {
        munmap(p, (size_t)(start - p));
    }
    if (start + bytes < p + bytes + align) {
        munmap(start + bytes, (size_t)(p + bytes + align - (start + bytes)));
    }
    *va_p = (uint64_t)(uintptr_t)start;
    return COLL_OK;
}

static void fake_va_free(uint64_t va, size_t bytes)
{
    munmap((void *)(uintptr_t)va, bytes);
}

static coll_status_t fake_map(int dev, uint64_t va, size_t bytes, coll_dev_mem_t mem)
{
    coll_status_t st = check_dev(dev, "map");
    struct stat sb;
    void *p;

    if (st != COLL_OK) {
        return st;
    }
    /* The driver maps a whole allocation; beyond the file, a touch would be SIGBUS. */
    if (fstat((int)(mem - 1), &sb) < 0 || (uint64_t)sb.st_size != bytes) {
        return coll__dev_fail(COLL_ERR_INVALID, "map of %zu bytes at %#llx: the allocation "
                              "has another size", bytes, (unsigned long long)va);
    }
    p = mmap((void *)(uintptr_t)va, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
             (int)(mem - 1), 0);
    if (p == MAP_FAILED) {
        return coll__dev_fail(COLL_ERR_NOMEM, "map of %zu bytes at %#llx: %s", bytes,
                              (unsigned long long)va, strerror(errno));
    }
    return COLL_OK;
}

/* Bytes grant() gave each device access to (coll__dev_fake_granted()). */
static _Atomic uint64_t granted[COLL_DEV_MAX];

uint64_t coll__dev_fake_granted(int dev)
{
    return dev >= 0 && dev < COLL_DEV_MAX ? atomic_load(&granted[dev]) : 0;
}

static coll_status_t fake_peer_access(int dev, int peer, int *can_p)
{
    coll_status_t st = check_dev(dev, "peer access");

    if (st == COLL_OK && (st = check_dev(peer, "peer access")) == COLL_OK) {
        *can_p = dev == peer || knob_or("COLL_DEVICE_FAKE_PEER", 1) != 0;
    }
    return st;
}

static coll_status_t fake_grant(int dev, uint64_t va, size_t bytes)
{
    coll_status_t st = check_dev(dev, "grant");

    if (st != COLL_OK) {
        return st;
    }
    if (knob_or("COLL_DEVICE_FAKE_PEER", 1) == 0) {
        return coll__dev_fail(COLL_ERR_UNSUPPORTED, "grant of %zu bytes at %#llx to device %d: "
                              "no peer access (COLL_DEVICE_FAKE_PEER=0)", bytes,
                              (unsigned long long)va, dev);
    }
    atomic_fetch_add(&granted[dev], bytes);
    return COLL_OK;
}

static void fake_unmap(uint64_t va, size_t bytes)
{
    /* Back to reserved, as cuMemUnmap leaves it. */
    mmap((void *)(uintptr_t)va, bytes, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

static coll_status_t fake_stream_create(int dev, coll_dev_stream_t *s_p)
{
    coll_status_t st = check_dev(dev, "stream");
    struct coll_dev_stream *s;

    if (st != COLL_OK) {
        return st;
    }
    if ((s = calloc(1, sizeof(*s))) == NULL) {
        return coll__dev_fail(COLL_ERR_NOMEM, "stream: out of memory");
    }
    s->dev = dev;
    *s_p = s;
    return COLL_OK;
}

/* Land @p s's copies that would have ended by @p now_ns (COLL_DEVICE_FAKE_COPY_MBPS), in order;
 * UINT64_MAX: all of them. */
static void land(struct coll_dev_stream *s, uint64_t now_ns)
{
    while (s->head < s->ndue && s->due[s->head].end_ns <= now_ns) {
        const struct fake_copy *c = &s->due[s->head++];
        memmove((void *)(uintptr_t)c->dst, (const void *)(uintptr_t)c->src, c->bytes);
    }
    if (s->head == s->ndue) {
        s->head = s->ndue = 0;
    }
}

/* Queue a copy on @p s that lands at @p end_ns. @return 0, or -1 without memory (the caller
 * copies at once then, after the copies before it). */
static int defer(struct coll_dev_stream *s, uint64_t dst, uint64_t src, size_t bytes,
                 uint64_t end_ns)
{
    if (s->ndue == s->cap) {
        size_t cap = s->cap > 0 ? 2 * s->cap : 16;
        struct fake_copy *d = realloc(s->due, cap * sizeof(*d));
        if (d == NULL) {
            return -1;
        }
        s->due = d;
        s->cap = cap;
    }
    s->due[s->ndue++] = (struct fake_copy){dst, src, end_ns, bytes};
    return 0;
}

/* Wait until every delayed word write of @p s landed. */
static void wait_landed(coll_dev_stream_t s)
{
    while (atomic_load_explicit(&s->landed, memory_order_acquire) != s->late) {
        nap();
    }
}

static void fake_stream_destroy(coll_dev_stream_t s)
{
    if (s != NULL) {
        land(s, UINT64_MAX);
        wait_landed(s);
        free(s->due);
        free(s);
    }
}

/* The stream NULL names (CUDA's default stream): one of the process's own, on device 0. */
static struct coll_dev_stream default_stream;

static coll_dev_stream_t or_default(coll_dev_stream_t s)
{
    return s != NULL ? s : &default_stream;
}

static coll_status_t fake_copy_async(uint64_t dst, uint64_t src, size_t bytes,
                                     coll_dev_stream_t s)
{
    uint64_t mbps = knob("COLL_DEVICE_FAKE_COPY_MBPS"), now = now_ns();

    s = or_default(s);
    if (mbps > 0) { /* after the stream's earlier copies, at mbps bytes a microsecond */
        s->busy_ns = (s->busy_ns > now ? s->busy_ns : now) + (uint64_t)bytes * 1000u / mbps;
    }
    if (mbps == 0 || defer(s, dst, src, bytes, s->busy_ns) != 0) {
        land(s, UINT64_MAX);
        memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
    }
    s->queued++;
    s->done = s->queued;
    return COLL_OK;
}

static coll_status_t fake_host_alloc(int dev, size_t bytes, void **p_p)
{
    coll_status_t st = check_dev(dev, "host alloc");
    void *p;

    if (st != COLL_OK) {
        return st;
    }
    if (bytes == 0) {
        return coll__dev_fail(COLL_ERR_INVALID, "host alloc: 0 bytes");
    }
    if (knob("COLL_DEVICE_FAKE_PIN_FAIL") != 0) {
        return coll__dev_fail(COLL_ERR_NOMEM, "host alloc of %zu bytes: refused "
                              "(COLL_DEVICE_FAKE_PIN_FAIL, test only)", bytes);
    }
    p = aligned_alloc(FAKE_HOST_ALIGN, (bytes + FAKE_HOST_ALIGN - 1) / FAKE_HOST_ALIGN *
                                           FAKE_HOST_ALIGN);
    if (p == NULL) {
        return coll__dev_fail(COLL_ERR_NOMEM, "host alloc of %zu bytes: out of memory", bytes);
    }
    *p_p = p;
    return COLL_OK;
}

static void fake_host_free(int dev, void *p)
{
    (void)dev;
    free(p);
}

static coll_status_t fake_stream_sync(coll_dev_stream_t s)
{
    s = or_default(s);
    land(s, UINT64_MAX);
    wait_landed(s);
    return s->done == s->queued ? COLL_OK
                                : coll__dev_fail(COLL_ERR_IO, "stream sync: work left behind");
}

static coll_status_t fake_event_create(int dev, coll_dev_event_t *e_p)
{
    coll_status_t st = check_dev(dev, "event");
    struct coll_dev_event *e;

    if (st != COLL_OK) {
        return st;
    }
    if ((e = calloc(1, sizeof(*e))) == NULL) {
        return coll__dev_fail(COLL_ERR_NOMEM, "event: out of memory");
    }
    e->dev = dev;
    *e_p = e;
    return COLL_OK;
}

static void fake_event_destroy(coll_dev_event_t e)
{
    free(e);
}

static coll_status_t fake_event_record(coll_dev_event_t e, coll_dev_stream_t s)
{
    s = or_default(s);
    if (e->dev != s->dev) {
        return coll__dev_fail(COLL_ERR_INVALID, "event of device %d recorded on a stream of "
                              "device %d", e->dev, s->dev);
    }
    e->stream = s;
    e->target = s->queued;
    e->ready_ns = now_ns() + knob("COLL_DEVICE_FAKE_COPY_DELAY_MS") * 1000000ull;
    e->ready_ns = e->ready_ns > s->busy_ns ? e->ready_ns : s->busy_ns;
    return COLL_OK;
}

/* Whether the work before @p e is done, delay or not. */
static int event_reached(coll_dev_event_t e)
{
    return e->stream == NULL || e->stream->done >= e->target;
}

static coll_status_t fake_event_query(coll_dev_event_t e)
{
    uint64_t now = now_ns();

    if (e->stream != NULL) {
        land((struct coll_dev_stream *)e->stream, now);
    }
    return event_reached(e) && (e->stream == NULL || now >= e->ready_ns) ? COLL_OK
                                                                          : COLL_INPROGRESS;
}

static coll_status_t fake_stream_wait(coll_dev_stream_t s, coll_dev_event_t e)
{
    /* Work already queued elsewhere is done (its copies land now): a synchronous stream has
     * nothing to wait for. */
    if (e->stream != NULL) {
        land((struct coll_dev_stream *)e->stream, UINT64_MAX);
    }
    return event_reached(e)
               ? COLL_OK
               : coll__dev_fail(COLL_ERR_IO, "stream wait: the event never completes");
}

/* Host memory needs no current device: only the device is checked. */
static coll_status_t fake_ctx_enter(int dev)
{
    return check_dev(dev, "make current");
}

static void fake_ctx_leave(void)
{
}

/* The device address of host memory is its host address. */
static coll_status_t fake_host_register(void *p, size_t bytes, uint64_t *dev_p)
{
    coll_status_t st = coll__dev_check_register(p, bytes, dev_p, "host register");

    if (st == COLL_OK) {
        *dev_p = (uint64_t)(uintptr_t)p;
    }
    return st;
}

static void fake_host_unregister(void *p)
{
    (void)p;
}

/* Blocks: the fake's stream runs its work at once, so the work after the wait may start only
 * once the word is there. */
static coll_status_t fake_stream_wait_word(coll_dev_stream_t s, uint64_t word, uint64_t value)
{
    uint64_t limit_ms = knob_or("COLL_DEVICE_FAKE_WAIT_MS", 60000), deadline, v;
    coll_status_t st = coll__dev_check_word(word, "stream wait");

    (void)s;
    if (st != COLL_OK) {
        return st;
    }
    deadline = now_ns() + limit_ms * 1000000ull;
    while ((v = __atomic_load_n((const uint64_t *)(uintptr_t)word, __ATOMIC_ACQUIRE)) < value) {
        if (now_ns() >= deadline) {
            return coll__dev_fail(COLL_ERR_TIMEDOUT, "stream wait: the word at %#llx stayed at "
                                  "%llu, below %llu, for %llu ms (COLL_DEVICE_FAKE_WAIT_MS)",
                                  (unsigned long long)word, (unsigned long long)v,
                                  (unsigned long long)value, (unsigned long long)limit_ms);
        }
        nap();
    }
    return COLL_OK;
}

static void *late_write_main(void *arg)
{
    struct late_write w = *(struct late_write *)arg;
    struct timespec due = {(time_t)(w.due_ns / 1000000000ull), (long)(w.due_ns % 1000000000ull)};

    free(arg);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL) == EINTR) {
        continue; /* the due time is absolute: sleep on */
    }
    /* In the stream's order: after the delayed writes queued before this one. */
    while (atomic_load_explicit(&w.s->landed, memory_order_acquire) != w.ticket) {
        nap();
    }
    __atomic_store_n(w.word, w.value, __ATOMIC_RELEASE);
    atomic_fetch_add_explicit(&w.s->landed, 1, memory_order_release);
    return NULL;
}

/* Write @p value into @p word @p delay_ms from now, from a thread of its own. */
static coll_status_t write_late(coll_dev_stream_t s, uint64_t word, uint64_t value,
                                uint64_t delay_ms)
{
    struct late_write *w = malloc(sizeof(*w));
    pthread_attr_t attr;
    pthread_t t;
    int e;

    if (w == NULL) {
        return coll__dev_fail(COLL_ERR_NOMEM, "stream write: out of memory");
    }
    *w = (struct late_write){s, (uint64_t *)(uintptr_t)word, value,
                             now_ns() + delay_ms * 1000000ull, s->late};
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    e = pthread_create(&t, &attr, late_write_main, w);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        free(w);
        return coll__dev_fail(COLL_ERR_NOMEM, "stream write: no thread for a delayed write: %s",
                              strerror(e));
    }
    s->late++;
    return COLL_OK;
}

/* At once, or late with COLL_DEVICE_FAKE_COPY_DELAY_MS (and after the stream's late writes). */
static coll_status_t fake_stream_write_word(coll_dev_stream_t s, uint64_t word, uint64_t value)
{
    uint64_t delay_ms = knob("COLL_DEVICE_FAKE_COPY_DELAY_MS");
    coll_status_t st = coll__dev_check_word(word, "stream write");

    if (st != COLL_OK) {
        return st;
    }
    s = or_default(s);
    land(s, UINT64_MAX); /* the copies before the word */
    if (delay_ms > 0 || atomic_load_explicit(&s->landed, memory_order_acquire) != s->late) {
        return write_late(s, word, value, delay_ms);
    }
    __atomic_store_n((uint64_t *)(uintptr_t)word, value, __ATOMIC_RELEASE);
    return COLL_OK;
}

const coll_dev_ops_t coll_dev_fake = {
    .name = "fake",
    .count = fake_count,
    .info = fake_info,
    .granularity = fake_granularity,
    .mem_create = fake_mem_create,
    .mem_export = fake_mem_export,
    .mem_import = fake_mem_import,
    .mem_release = fake_mem_release,
    .va_reserve = fake_va_reserve,
    .va_free = fake_va_free,
    .map = fake_map,
    .peer_access = fake_peer_access,
    .grant = fake_grant,
    .unmap = fake_unmap,
    .stream_create = fake_stream_create,
    .stream_destroy = fake_stream_destroy,
    .copy_async = fake_copy_async,
    .host_alloc = fake_host_alloc,
    .host_free = fake_host_free,
    .stream_sync = fake_stream_sync,
    .event_create = fake_event_create,
    .event_destroy = fake_event_destroy,
    .event_record = fake_event_record,
    .event_query = fake_event_query,
    .stream_wait = fake_stream_wait,
    .ctx_enter = fake_ctx_enter,
    .ctx_leave = fake_ctx_leave,
    .host_register = fake_host_register,
    .host_unregister = fake_host_unregister,
    .stream_wait_word = fake_stream_wait_word,
    .stream_write_word = fake_stream_write_word,
};
