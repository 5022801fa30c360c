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
 * Words shared with the host (dev_fake_words.c): registered host memory is its own device
 * address; a stream's word write is an atomic release store, at once, or with
 * COLL_DEVICE_FAKE_COPY_DELAY_MS that long later from a thread of its own, in the stream's order
 * (the stream is behind: a reader that does not wait is seen; stream syncs wait for it). A
 * stream's wait for a word blocks no
 * one: as on a device, it holds every later piece of work of that stream until the word is
 * stored: its copies land, and its events complete, only once a query, a copy or a sync finds
 * the word there; a word write behind it lands from a thread of its own once the word is there
 * (copies between the two land at the stream's next query or sync). A sync waits for the word,
 * polling every 100 us (never spinning), at most COLL_DEVICE_FAKE_WAIT_MS, then fails with
 * COLL_ERR_TIMEDOUT; a destroy waits as long, then drops the work held. A stream's wait for
 * another stream's event holds its later work the same way until that stream did the work
 * before the event (dev_fake_events.c), whatever holds that stream.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "device/dev.h"
#include "device/dev_fake.h"

/* What a fake device says it has; a pool's budget is a fraction of it (memfds are sparse, so
 * this costs nothing until written). */
#define FAKE_MEM_BYTES (8ull << 30)
#define FAKE_GRANULARITY ((size_t)2 << 20)

static int ndevices;

/* Host memory comes aligned as the kernels' vectors want it. */
#define FAKE_HOST_ALIGN 64

/* A test knob of the environment as a number, 0 when absent. */
uint64_t coll__fake_knob(const char *name)
{
    const char *v = getenv(name);

    return v != NULL ? strtoull(v, NULL, 10) : 0;
}

/* A test knob as a number, @p dflt when absent. */
uint64_t coll__fake_knob_or(const char *name, uint64_t dflt)
{
    return getenv(name) != NULL ? coll__fake_knob(name) : dflt;
}

int coll__fake_lazy(void)
{
    return coll__fake_knob("COLL_DEVICE_FAKE_LAZY") != 0;
}

int coll__dev_fake_exec_defer(coll_dev_stream_t s, void (*run)(void *arg, int go), void *arg)
{
    return coll__dev_fake_hold(s, run, NULL, arg);
}

int coll__dev_fake_hold(coll_dev_stream_t s, void (*run)(void *arg, int go), int (*busy)(void *arg),
                        void *arg)
{
    s = coll__fake_or_default(s);
    if (!coll__fake_lazy()) {
        coll__fake_land(s, coll__fake_now_ns());
        if (s->head == s->ndue) {
            return 0; /* nothing held before it: it runs now */
        }
    }
    if (coll__fake_defer(s, (struct fake_copy){.run = run, .busy = busy, .arg = arg}) != 0) {
        return -1;
    }
    s->gates += busy != NULL; /* it holds what follows until it ended */
    s->queued++;
    s->done = s->gates > 0 ? s->done : s->queued;
    return 1;
}

/* Sleep 100 us: how often the fake looks again at what another thread will change. */
void coll__fake_nap(void)
{
    struct timespec ts = {0, 100000};

    nanosleep(&ts, NULL);
}

uint64_t coll__fake_now_ns(void)
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

    if (st != COLL_OK || (st = coll__fake_fault(dev, "create", 0)) != COLL_OK) {
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
        *can_p = dev == peer || coll__fake_knob_or("COLL_DEVICE_FAKE_PEER", 1) != 0;
    }
    return st;
}

static coll_status_t fake_grant(int dev, uint64_t va, size_t bytes)
{
    coll_status_t st = check_dev(dev, "grant");

    if (st != COLL_OK) {
        return st;
    }
    if (coll__fake_knob_or("COLL_DEVICE_FAKE_PEER", 1) == 0) {
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

    if (st != COLL_OK || (st = coll__fake_fault(dev, "stream", 0)) != COLL_OK) {
        return st;
    }
    if ((s = calloc(1, sizeof(*s))) == NULL) {
        return coll__dev_fail(COLL_ERR_NOMEM, "stream: out of memory");
    }
    s->dev = dev;
    coll__fake_stream_add(s);
    *s_p = s;
    return COLL_OK;
}

/* Whether the word of wait @p c is there. */
int coll__fake_passed(const struct fake_copy *c)
{
    return __atomic_load_n(c->word, __ATOMIC_ACQUIRE) >= c->value;
}

/* Land @p s's copies that would have ended by @p now_ns (COLL_DEVICE_FAKE_COPY_MBPS; UINT64_MAX:
 * all of them), in order, up to its first wait whose word is not there, or for another
 * stream's event not reached (that stream landed first), or its first stand-in NCCL collective
 * still running (started here once the waits before it passed); its work before that is done.
 * Nothing where it lands already (a wait across streams that came back to it): its done count
 * is kept up to its work landed so far, for such a wait to read. */
void coll__fake_land(struct coll_dev_stream *s, uint64_t now_ns)
{
    size_t i;

    if (s->landing) {
        return;
    }
    s->landing = 1;
    for (; s->head < s->ndue; s->head++) {
        struct fake_copy *c = &s->due[s->head];
        s->done = c->ticket - 1 > s->done ? c->ticket - 1 : s->done; /* all before c landed */
        if ((c->word != NULL && !coll__fake_passed(c)) ||
            (c->after != NULL && !coll__fake_after_passed(c))) {
            break;
        }
        if (c->word != NULL || c->after != NULL) {
            s->gates--;
        } else if (c->run != NULL || c->busy != NULL) {
            if (!c->started) {
                int go = !coll__fake_faulted(s->dev); /* a faulted device starts nothing */
                c->started = 1;
                c->run(c->arg, go);
                if (!go && c->busy != NULL) { /* dropped: nothing runs */
                    c->busy = NULL;
                    s->gates--;
                }
            }
            if (c->busy != NULL && c->busy(c->arg)) {
                break; /* the stand-in NCCL's collective still runs */
            }
            if (c->busy != NULL) {
                c->busy = NULL; /* ended: never asked again */
                s->gates--;
            }
        } else if (c->end_ns <= now_ns) {
            memmove((void *)(uintptr_t)c->dst, (const void *)(uintptr_t)c->src, c->bytes);
        } else {
            break;
        }
    }
    for (i = s->head; i < s->ndue && s->due[i].word == NULL && s->due[i].after == NULL &&
                      s->due[i].busy == NULL;
         i++) {
    }
    s->done = i < s->ndue ? s->due[i].ticket - 1 : s->queued; /* up to its first wait held */
    if (s->head == s->ndue) {
        s->head = s->ndue = 0;
    }
    s->landing = 0;
}

/* Queue on @p s the copy or wait @p c (its ticket the stream's next). @return 0, or -1 without
 * memory (the caller copies at once then, after the copies before it, where no wait holds it). */
int coll__fake_defer(struct coll_dev_stream *s, struct fake_copy c)
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
    c.ticket = s->queued + 1;
    s->due[s->ndue++] = c;
    return 0;
}

/* Wait until every delayed word write of @p s landed. */
static void wait_landed(coll_dev_stream_t s)
{
    while (atomic_load_explicit(&s->landed, memory_order_acquire) != s->late) {
        coll__fake_nap();
    }
}

/* Land all of @p s's work, waiting (polling every 100 us) for the words its waits hold it on,
 * for at most COLL_DEVICE_FAKE_WAIT_MS. @return COLL_OK; COLL_ERR_TIMEDOUT, in @p who's name. */
static coll_status_t await_gates(struct coll_dev_stream *s, const char *who)
{
    uint64_t limit_ms = coll__fake_knob_or("COLL_DEVICE_FAKE_WAIT_MS", 60000);
    uint64_t deadline = coll__fake_now_ns() + limit_ms * 1000000ull;

    for (coll__fake_land(s, UINT64_MAX); s->gates > 0; coll__fake_land(s, UINT64_MAX)) {
        if (coll__fake_now_ns() >= deadline && s->due[s->head].after != NULL) {
            return coll__dev_fail(COLL_ERR_TIMEDOUT, "%s: the stream waits for another stream's "
                                  "event, not reached after %llu ms (COLL_DEVICE_FAKE_WAIT_MS)",
                                  who, (unsigned long long)limit_ms);
        }
        if (coll__fake_now_ns() >= deadline && s->due[s->head].word == NULL) {
            return coll__dev_fail(COLL_ERR_TIMEDOUT, "%s: the stream's NCCL collective still "
                                  "runs after %llu ms (COLL_DEVICE_FAKE_WAIT_MS)", who,
                                  (unsigned long long)limit_ms);
        }
        if (coll__fake_now_ns() >= deadline) {
            const struct fake_copy *c = &s->due[s->head];
            return coll__dev_fail(COLL_ERR_TIMEDOUT, "%s: the stream waits for the word at %#llx, "
                                  "which stayed at %llu, below %llu, for %llu ms "
                                  "(COLL_DEVICE_FAKE_WAIT_MS)", who,
                                  (unsigned long long)(uintptr_t)c->word,
                                  (unsigned long long)__atomic_load_n(c->word, __ATOMIC_ACQUIRE),
                                  (unsigned long long)c->value, (unsigned long long)limit_ms);
        }
        coll__fake_nap();
    }
    return COLL_OK;
}

static void fake_stream_destroy(coll_dev_stream_t s)
{
    if (s != NULL) {
        (void)await_gates(s, "stream destroy"); /* then the work it holds is dropped */
        wait_landed(s);
        for (size_t i = s->head; i < s->ndue; i++) {
            if (s->due[i].run != NULL && !s->due[i].started) {
                s->due[i].run(s->due[i].arg, 0);
            }
        }
        coll__fake_stream_remove(s); /* the waits for its events settled */
        free(s->due);
        free(s);
    }
}

/* The stream NULL names (CUDA's default stream): one of the process's own, on device 0. */
static struct coll_dev_stream default_stream;

coll_dev_stream_t coll__fake_or_default(coll_dev_stream_t s)
{
    return s != NULL ? s : &default_stream;
}

static coll_status_t fake_copy_async(uint64_t dst, uint64_t src, size_t bytes,
                                     coll_dev_stream_t s)
{
    uint64_t mbps = coll__fake_knob("COLL_DEVICE_FAKE_COPY_MBPS"), now = coll__fake_now_ns();
    int deferred;

    s = coll__fake_or_default(s);
    if (coll__fake_fault(s->dev, "copy", 0) != COLL_OK) {
        return COLL_ERR_IO;
    }
    coll__dev_fake_copy_count(s->dev);
    if (!coll__fake_lazy()) {
        coll__fake_land(s, now);
    }
    if (mbps > 0) { /* after the stream's earlier copies, at mbps bytes a microsecond */
        s->busy_ns = (s->busy_ns > now ? s->busy_ns : now) + (uint64_t)bytes * 1000u / mbps;
    }
    deferred = (mbps > 0 || s->gates > 0 || coll__fake_lazy()) &&
               coll__fake_defer(s, (struct fake_copy){.dst = dst, .src = src, .bytes = bytes,
                                           .end_ns = mbps > 0 ? s->busy_ns : 0}) == 0;
    if (!deferred && s->gates > 0) {
        return coll__dev_fail(COLL_ERR_NOMEM, "copy of %zu bytes: out of memory", bytes);
    }
    if (!deferred) {
        coll__fake_land(s, UINT64_MAX);
    }
    if (!deferred && !coll__fake_faulted(s->dev)) { /* a faulted device copies nothing */
        memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
    }
    s->queued++;
    s->done = s->gates > 0 ? s->done : s->queued;
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
    if (coll__fake_knob("COLL_DEVICE_FAKE_PIN_FAIL") != 0) {
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
    coll_status_t st = coll__fake_fault(coll__fake_or_default(s)->dev, "stream sync", 1);

    if (st == COLL_OK) {
        st = await_gates(coll__fake_or_default(s), "stream sync");
    }

    if (st == COLL_OK) {
        wait_landed(coll__fake_or_default(s));
    }
    return st;
}

static coll_status_t fake_event_create(int dev, coll_dev_event_t *e_p)
{
    coll_status_t st = check_dev(dev, "event");
    struct coll_dev_event *e;

    if (st != COLL_OK || (st = coll__fake_fault(dev, "event", 0)) != COLL_OK) {
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
    s = coll__fake_or_default(s);
    if (coll__fake_fault(s->dev, "event record", 0) != COLL_OK) {
        return COLL_ERR_IO;
    }
    if (e->dev != s->dev) {
        return coll__dev_fail(COLL_ERR_INVALID, "event of device %d recorded on a stream of "
                              "device %d", e->dev, s->dev);
    }
    e->stream = s;
    e->target = s->queued;
    e->ready_ns = coll__fake_now_ns() + coll__fake_knob("COLL_DEVICE_FAKE_COPY_DELAY_MS") * 1000000ull;
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
    uint64_t now = coll__fake_now_ns();

    if (coll__fake_fault(e->dev, "event query", 1) != COLL_OK) {
        return COLL_ERR_IO;
    }
    if (e->stream != NULL) {
        coll__fake_land((struct coll_dev_stream *)e->stream, now);
    }
    return event_reached(e) && (e->stream == NULL || now >= e->ready_ns) ? COLL_OK
                                                                          : COLL_INPROGRESS;
}

/* Host memory needs no current device: only the device is checked. */
static coll_status_t fake_ctx_enter(int dev)
{
    return check_dev(dev, "make current");
}

static void fake_ctx_leave(void)
{
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
    .stream_wait = coll__fake_stream_wait,
    .ctx_enter = fake_ctx_enter,
    .ctx_leave = fake_ctx_leave,
    .host_register = coll__fake_host_register,
    .host_unregister = coll__fake_host_unregister,
    .stream_wait_word = coll__fake_stream_wait_word,
    .stream_write_word = coll__fake_stream_write_word,
};
