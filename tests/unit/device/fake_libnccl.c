/*
 * A stand-in for NCCL, built as libnccl.so.2 into a directory of its own, which the tests put
 * first on LD_LIBRARY_PATH: the NCCL below device/nccl.c, so that the daemons' NCCL path runs
 * where there is no GPU, over the fake device layer (COLL_DEVICE_FAKE: device memory is host
 * memory). Compiled against the toolkit's nccl.h, so its names and types are NCCL's.
 *
 * Every rank of a communicator is a process (or a thread) of this machine. ncclGetUniqueId
 * creates a POSIX shared-memory segment and puts its name in the id; ncclCommInitRankConfig
 * maps it and waits for the other ranks; a collective copies this rank's input into its slot,
 * waits for every rank (a barrier on a counter in the segment), computes its output from the
 * slots exactly (in rank order, 16-bit floats through float32; a reduce on its root only; ncclAvg
 * divides by the ranks' number once, at the end) and waits again before the slots
 * are reused. Every wait is bounded (FAKE_NCCL_WAIT_MS, default 10000) and ends early when a
 * rank aborted (ncclRemoteError). A non-blocking communicator (config blocking = 0) does the
 * work on a thread of its own: the call answers ncclInProgress and ncclCommGetAsyncError says
 * when it is done, as NCCL's non-blocking communicators do; the stream is not used (the fake
 * device's streams are synchronous). FAKE_NCCL_ASYNC_ERROR=R makes every collective of rank R
 * end with ncclSystemError (the asynchronous error of a failing network), without touching the
 * segment, so its peers wait until it aborts. A rank's input is at most 1 MiB. It exports
 * collective_nccl_host_memory, by which the loader knows it for the fake layer's NCCL.
 */
#include <nccl.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 16
#define SLOT_BYTES ((size_t)1 << 20)

typedef struct {
    _Atomic int nranks;
    _Atomic int joined;
    _Atomic int aborted;
    _Atomic uint64_t arrived; /* barrier arrivals so far, of every rank */
    uint8_t slot[MAX_RANKS][SLOT_BYTES];
} seg_t;

typedef enum {
    WORK_JOIN,
    WORK_ALLREDUCE,
    WORK_REDUCE_SCATTER,
    WORK_ALLGATHER,
    WORK_BCAST,
    WORK_REDUCE
} work_t;

struct ncclComm {
    seg_t *seg;
    char name[64];
    int rank, nranks, blocking;
    uint64_t barriers;  /* barriers this rank passed */
    _Atomic int state;  /* ncclResult_t of the last call: ncclInProgress while its thread runs */
    _Atomic int aborting;
    pthread_t thread;
    int has_thread;
    /* The call its thread runs. */
    work_t work;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t dtype;
    ncclRedOp_t op;
    int root;
};

/* Says to the loader (device/nccl.c) that this NCCL works on host memory. */
int collective_nccl_host_memory = 1;

/* Process-wide, as NCCL keeps its last error. */
static char last_error[160];
static _Atomic unsigned ids;

ncclResult_t ncclGetVersion(int *version)
{
    *version = 22809;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    static const char *const text[] = {"no error", "unhandled cuda error", "unhandled system error",
                                       "internal error", "invalid argument", "invalid usage",
                                       "remote process exited or there was a network error",
                                       "operation in progress"};
    return (unsigned)r < sizeof(text) / sizeof(text[0]) ? text[r] : "unknown result code";
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return last_error;
}

static ncclResult_t fail(ncclResult_t r, const char *what)
{
    snprintf(last_error, sizeof(last_error), "stand-in NCCL: %s", what);
    return r;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    char name[64];
    int fd;

    snprintf(name, sizeof(name), "/coll-fake-nccl-%d-%u-%ld", (int)getpid(), ids++,
             (long)time(NULL));
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, sizeof(seg_t)) < 0) {
        if (fd >= 0) {
            close(fd);
            shm_unlink(name);
        }
        return fail(ncclSystemError, "shm_open of the unique id's segment failed");
    }
    close(fd);
    memset(id, 0, sizeof(*id));
    snprintf(id->internal, sizeof(id->internal), "%s", name);
    return ncclSuccess;
}

static uint64_t wait_ms(void)
{
    const char *v = getenv("FAKE_NCCL_WAIT_MS");
    return v != NULL ? strtoull(v, NULL, 10) : 10000;
}

/* Wait until @p reached says so, a rank aborted, or the bound passed. */
static ncclResult_t wait_for(struct ncclComm *c, int (*reached)(struct ncclComm *), const char *what)
{
    const struct timespec nap = {0, 200000};
    uint64_t naps = wait_ms() * 5;

    for (uint64_t i = 0; !reached(c); i++) {
        if (atomic_load(&c->seg->aborted) || atomic_load(&c->aborting)) {
            return fail(ncclRemoteError, "a rank aborted the communicator");
        }
        if (i == naps) {
            return fail(ncclSystemError, what);
        }
        nanosleep(&nap, NULL);
    }
    return ncclSuccess;
}

static int all_joined(struct ncclComm *c)
{
    return atomic_load(&c->seg->joined) >= c->nranks;
}

static int all_arrived(struct ncclComm *c)
{
    return atomic_load(&c->seg->arrived) >= c->barriers * (uint64_t)c->nranks;
}

static ncclResult_t barrier(struct ncclComm *c)
{
    c->barriers++;
    atomic_fetch_add(&c->seg->arrived, 1);
    return wait_for(c, all_arrived, "the other ranks did not reach the collective in time");
}

static ncclResult_t join(struct ncclComm *c)
{
    int expect = 0;
    int fd = shm_open(c->name, O_RDWR, 0);

    if (fd < 0) {
        return fail(ncclInvalidArgument, "the unique id names no segment");
    }
    c->seg = mmap(NULL, sizeof(seg_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (c->seg == MAP_FAILED) {
        c->seg = NULL;
        return fail(ncclSystemError, "mmap of the segment failed");
    }
    if (!atomic_compare_exchange_strong(&c->seg->nranks, &expect, c->nranks) &&
        expect != c->nranks) {
        return fail(ncclInvalidUsage, "ranks disagree on the communicator's size");
    }
    if (atomic_fetch_add(&c->seg->joined, 1) + 1 == c->nranks) {
        shm_unlink(c->name); /* every rank has it mapped */
    }
    return wait_for(c, all_joined, "the other ranks did not join in time");
}

static size_t esize(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

static double load(ncclDataType_t t, const uint8_t *p)
{
    union { uint32_t u; float f; } b;
    switch (t) {
    case ncclInt8: return *(const int8_t *)p;
    case ncclUint8: return *p;
    case ncclInt32: return *(const int32_t *)p;
    case ncclInt64: return (double)*(const int64_t *)p;
    case ncclFloat16: return (double)*(const _Float16 *)p;
    case ncclBfloat16: b.u = (uint32_t)*(const uint16_t *)p << 16; return b.f;
    case ncclFloat32: return *(const float *)p;
    default: return *(const double *)p;
    }
}

static void store(ncclDataType_t t, uint8_t *p, double v)
{
    union { uint32_t u; float f; } b;
    switch (t) {
    case ncclInt8: *(int8_t *)p = (int8_t)v; break;
    case ncclUint8: *p = (uint8_t)v; break;
    case ncclInt32: *(int32_t *)p = (int32_t)v; break;
    case ncclInt64: *(int64_t *)p = (int64_t)v; break;
    case ncclFloat16: *(_Float16 *)p = (_Float16)(float)v; break;
    case ncclBfloat16: /* round to nearest even */
        b.f = (float)v;
        *(uint16_t *)p = (uint16_t)((b.u + 0x7fffu + ((b.u >> 16) & 1u)) >> 16);
        break;
    case ncclFloat32: *(float *)p = (float)v; break;
    default: *(double *)p = v; break;
    }
}

static double combine(ncclRedOp_t op, double a, double b)
{
    switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return a > b ? a : b;
    case ncclMin: return a < b ? a : b;
    default: return a + b; /* sum, and avg before its division */
    }
}

/* recv[i] = the reduction over every rank's slot of element @p first + i, @p n elements. */
static void reduce_slots(struct ncclComm *c, size_t first, size_t n)
{
    size_t es = esize(c->dtype);

    for (size_t i = 0; i < n; i++) {
        double v = load(c->dtype, c->seg->slot[0] + (first + i) * es);
        for (int r = 1; r < c->nranks; r++) {
            v = combine(c->op, v, load(c->dtype, c->seg->slot[r] + (first + i) * es));
        }
        store(c->dtype, (uint8_t *)c->recv + i * es, c->op == ncclAvg ? v / c->nranks : v);
    }
}

static ncclResult_t exchange(struct ncclComm *c)
{
    size_t es = esize(c->dtype), n = c->work == WORK_REDUCE_SCATTER ? c->count * c->nranks
                                                                     : c->count;
    ncclResult_t r;

    if (c->work != WORK_BCAST || c->rank == c->root) {
        memcpy(c->seg->slot[c->rank], c->send, n * es);
    }
    if ((r = barrier(c)) != ncclSuccess) {
        return r;
    }
    /* A reduce's recv is the root's only. */
    if (c->work == WORK_ALLREDUCE || (c->work == WORK_REDUCE && c->rank == c->root)) {
        reduce_slots(c, 0, c->count);
    } else if (c->work == WORK_REDUCE_SCATTER) {
        reduce_slots(c, c->rank * c->count, c->count);
    } else if (c->work == WORK_ALLGATHER) {
        for (int k = 0; k < c->nranks; k++) {
            memcpy((uint8_t *)c->recv + k * c->count * es, c->seg->slot[k], c->count * es);
        }
    } else if (c->work == WORK_BCAST) {
        memcpy(c->recv, c->seg->slot[c->root], c->count * es);
    }
    return barrier(c);
}

static ncclResult_t run(struct ncclComm *c)
{
    const char *e = getenv("FAKE_NCCL_ASYNC_ERROR");

    if (c->work == WORK_JOIN) {
        return join(c);
    }
    if (e != NULL && atoi(e) == c->rank) {
        return fail(ncclSystemError, "injected asynchronous error (FAKE_NCCL_ASYNC_ERROR)");
    }
    return exchange(c);
}

static void *thread_main(void *arg)
{
    struct ncclComm *c = arg;
    atomic_store(&c->state, run(c));
    return NULL;
}

/* Run the call now (blocking) or on the communicator's thread (non-blocking). */
static ncclResult_t start(struct ncclComm *c)
{
    if (c->has_thread) {
        pthread_join(c->thread, NULL);
        c->has_thread = 0;
    }
    if (atomic_load(&c->state) != ncclSuccess && c->work != WORK_JOIN) {
        return fail(ncclInvalidUsage, "a call on a communicator that is not ready");
    }
    if (c->blocking) {
        atomic_store(&c->state, run(c));
        return atomic_load(&c->state);
    }
    atomic_store(&c->state, ncclInProgress);
    if (pthread_create(&c->thread, NULL, thread_main, c) != 0) {
        atomic_store(&c->state, ncclSystemError);
        return fail(ncclSystemError, "pthread_create failed");
    }
    c->has_thread = 1;
    return ncclInProgress;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    struct ncclComm *c;

    if (nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks) {
        return fail(ncclInvalidArgument, "rank or size out of range");
    }
    if ((c = calloc(1, sizeof(*c))) == NULL) {
        return fail(ncclSystemError, "out of memory");
    }
    memcpy(c->name, id.internal, sizeof(c->name) - 1);
    c->rank = rank;
    c->nranks = nranks;
    c->blocking = config == NULL || config->blocking != 0;
    c->work = WORK_JOIN;
    *comm = c;
    return start(c);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async)
{
    *async = (ncclResult_t)atomic_load(&comm->state);
    return ncclSuccess;
}

static void release(struct ncclComm *c)
{
    if (c->has_thread) {
        pthread_join(c->thread, NULL);
    }
    if (c->seg != NULL) {
        munmap(c->seg, sizeof(seg_t));
    }
    shm_unlink(c->name); /* a communicator whose ranks never all joined */
    free(c);
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    atomic_store(&comm->aborting, 1);
    if (comm->seg != NULL) {
        atomic_store(&comm->seg->aborted, 1);
    }
    release(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    release(comm);
    return ncclSuccess;
}

static ncclResult_t collective(struct ncclComm *c, work_t w, const void *send, void *recv,
                               size_t count, ncclDataType_t t, ncclRedOp_t op, int root)
{
    size_t in = w == WORK_REDUCE_SCATTER ? count * (size_t)c->nranks : count;

    if ((unsigned)t > ncclBfloat16 || (unsigned)op > ncclAvg || root < 0 || root >= c->nranks) {
        return fail(ncclInvalidArgument, "dtype, reduction or root out of range");
    }
    if (in > SLOT_BYTES / esize(t)) {
        return fail(ncclInvalidArgument, "more than 1 MiB per rank");
    }
    c->work = w;
    c->send = send;
    c->recv = recv;
    c->count = count;
    c->dtype = t;
    c->op = op;
    c->root = root;
    return start(c);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return collective(comm, WORK_ALLREDUCE, send, recv, count, t, op, 0);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return collective(comm, WORK_REDUCE_SCATTER, send, recv, count, t, op, 0);
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return collective(comm, WORK_REDUCE, send, recv, count, t, op, root);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return collective(comm, WORK_ALLGATHER, send, recv, count, t, ncclSum, 0);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root,
                           ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return collective(comm, WORK_BCAST, send, recv, count, t, ncclSum, root);
}
