/*
 * NCCL loaded at run time (nccl.h; dev.h's coll_nccl_probe): libnccl.so.2 is opened with dlopen
 * and its entries resolved by name, so nothing links against it and a machine without it runs
 * everything else. Compiled only with COLL_WITH_CUDA: the toolkit's nccl.h gives the types (the
 * unique id, the config, the enums). NCCL's ncclResult_t becomes a coll_status_t here, once.
 */
#include <nccl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/nccl.h"

_Static_assert(sizeof(ncclUniqueId) == COLL_NCCL_ID_BYTES, "a unique id is NCCL's");

/* Every NCCL entry used, by its name in nccl.h. */
#define NCCL_ENTRIES(X)                                                                            \
    X(ncclGetVersion) X(ncclGetErrorString) X(ncclGetLastError) X(ncclGetUniqueId)                \
    X(ncclCommInitRankConfig) X(ncclCommGetAsyncError) X(ncclCommAbort) X(ncclCommDestroy)        \
    X(ncclAllReduce) X(ncclReduceScatter) X(ncclAllGather) X(ncclBroadcast) X(ncclReduce)

#define NCCL_STR(x) #x

static struct {
#define NCCL_FIELD(f) __typeof__(&f) f;
    NCCL_ENTRIES(NCCL_FIELD)
#undef NCCL_FIELD
} nc;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int present;
static char text[COLL_DEV_TEXT_MAX];

/* The boundary: an ncclResult_t becomes a status, and the call with NCCL's words the calling
 * thread's coll_dev_error(). */
static coll_status_t nccl_fail(ncclResult_t r, const char *call)
{
    const char *last = nc.ncclGetLastError(NULL);

    coll__dev_fail(COLL_ERR_IO, "%s: %s%s%s", call, nc.ncclGetErrorString(r),
                   last != NULL && *last != '\0' ? ": " : "", last != NULL ? last : "");
    switch (r) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
        return COLL_ERR_INVALID;
    case ncclRemoteError:
        return COLL_ERR_PEER;
    default:
        return COLL_ERR_IO;
    }
}

/* A call's result: ncclInProgress means queued (or joining) on a non-blocking communicator. */
static coll_status_t result(ncclResult_t r, const char *call)
{
    return r == ncclSuccess || r == ncclInProgress ? COLL_OK : nccl_fail(r, call);
}

/* One collective's call, as NCCL takes it. */
typedef struct nccl_call {
    ncclResult_t (*fn)(const struct nccl_call *c); /* the NCCL entry, with these arguments */
    const char *name;                              /* its name, for errors */
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t t;
    ncclRedOp_t o;
    int root;
    ncclComm_t comm;
    cudaStream_t s;
    /* A call of the stand-in held by its fake stream (held_*()): */
    struct nccl_call *next; /* in held, while the stream holds it */
    int state;              /* HELD, STARTED, then ABORTED where its communicator was */
} nccl_call_t;

enum { HELD, STARTED, ABORTED };

/* The stand-in's calls held by their streams (below), under held_lock: the streams of several
 * threads (a unit test's ranks, each a daemon) go through one process's list. */
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static nccl_call_t *held;
static ncclResult_t held_error; /* a held call refused at once, until its comm ends */
static ncclComm_t held_error_comm;

static coll_status_t dtype_of(coll_dtype_t d, ncclDataType_t *t)
{
    static const ncclDataType_t map[COLL_DTYPE_COUNT] = {
        [COLL_FLOAT32] = ncclFloat32, [COLL_FLOAT64] = ncclFloat64,
        [COLL_FLOAT16] = ncclFloat16, [COLL_BFLOAT16] = ncclBfloat16,
        [COLL_INT8] = ncclInt8,       [COLL_UINT8] = ncclUint8,
        [COLL_INT32] = ncclInt32,     [COLL_INT64] = ncclInt64,
    };

    if ((unsigned)d >= COLL_DTYPE_COUNT) {
        return coll__dev_fail(COLL_ERR_INVALID, "nccl: dtype %d is none", (int)d);
    }
    *t = map[d];
    return COLL_OK;
}

static coll_status_t redop_of(coll_redop_t o, ncclRedOp_t *r)
{
    switch (o) {
    case COLL_SUM: *r = ncclSum; return COLL_OK;
    case COLL_AVG: *r = ncclAvg; return COLL_OK;
    case COLL_PROD: *r = ncclProd; return COLL_OK;
    case COLL_MIN: *r = ncclMin; return COLL_OK;
    case COLL_MAX: *r = ncclMax; return COLL_OK;
    default:
        return coll__dev_fail(COLL_ERR_UNSUPPORTED, "nccl: reduction %d is not NCCL's (it has "
                              "sum, avg, prod, min and max)", (int)o);
    }
}

static coll_status_t nccl_unique_id(coll_nccl_id_t *id)
{
    ncclUniqueId u;
    ncclResult_t r = nc.ncclGetUniqueId(&u);

    if (r != ncclSuccess) {
        return nccl_fail(r, "ncclGetUniqueId");
    }
    memcpy(id->bytes, u.internal, COLL_NCCL_ID_BYTES);
    return COLL_OK;
}

static coll_status_t nccl_comm_init(int dev, int nranks, int rank, const coll_nccl_id_t *id,
                                    coll_nccl_comm_t *comm_p)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    const coll_dev_ops_t *dops;
    ncclUniqueId u;
    ncclComm_t comm = NULL;
    coll_status_t st;
    ncclResult_t r;

    if (nranks < 1 || rank < 0 || rank >= nranks) {
        return coll__dev_fail(COLL_ERR_INVALID, "nccl: rank %d of %d", rank, nranks);
    }
    if ((st = coll_dev_open(&dops)) != COLL_OK) {
        return coll__dev_fail(st, "nccl: no device layer: %s", coll_dev_status());
    }
    if ((st = dops->ctx_enter(dev)) != COLL_OK) {
        return st;
    }
    config.blocking = 0;
    memcpy(u.internal, id->bytes, COLL_NCCL_ID_BYTES);
    r = nc.ncclCommInitRankConfig(&comm, nranks, u, rank, &config);
    dops->ctx_leave();
    if (r != ncclSuccess && r != ncclInProgress) {
        st = nccl_fail(r, "ncclCommInitRankConfig");
        if (comm != NULL) {
            nc.ncclCommAbort(comm);
        }
        return st;
    }
    *comm_p = (coll_nccl_comm_t)comm;
    return COLL_OK;
}

static coll_status_t nccl_comm_poll(coll_nccl_comm_t comm)
{
    ncclResult_t async = ncclSuccess, r = nc.ncclCommGetAsyncError((ncclComm_t)comm, &async);

    pthread_mutex_lock(&held_lock);
    if (held_error_comm == (ncclComm_t)comm && held_error != ncclSuccess) {
        r = ncclSuccess;
        async = held_error; /* a held call of the stand-in refused (its words set then) */
    }
    pthread_mutex_unlock(&held_lock);

    if (r != ncclSuccess) {
        return nccl_fail(r, "ncclCommGetAsyncError");
    }
    return async == ncclSuccess      ? COLL_OK
           : async == ncclInProgress ? COLL_INPROGRESS
                                     : nccl_fail(async, "nccl communicator");
}

/* @p comm ends: its held calls (the stand-in's) are never issued, and its kept error goes. */
static void held_end(ncclComm_t comm)
{
    pthread_mutex_lock(&held_lock);
    for (nccl_call_t *c = held; c != NULL; c = c->next) {
        c->state = c->comm == comm ? ABORTED : c->state;
    }
    if (held_error_comm == comm) {
        held_error_comm = NULL;
        held_error = ncclSuccess;
    }
    pthread_mutex_unlock(&held_lock);
}

static void nccl_comm_abort(coll_nccl_comm_t comm)
{
    if (comm != NULL) {
        held_end((ncclComm_t)comm);
        nc.ncclCommAbort((ncclComm_t)comm);
    }
}

/* NCCL's dtype and reduction for @p dtype and @p op: COLL_ERR_UNSUPPORTED where it has none. */
static coll_status_t types_of(coll_dtype_t dtype, coll_redop_t op, ncclDataType_t *t,
                              ncclRedOp_t *o)
{
    coll_status_t st = dtype_of(dtype, t);

    return st != COLL_OK ? st : redop_of(op, o);
}

static void nccl_comm_destroy(coll_nccl_comm_t comm)
{
    if (comm != NULL) {
        held_end((ncclComm_t)comm);
        nc.ncclCommDestroy((ncclComm_t)comm);
    }
}


static ncclResult_t call_allreduce(const nccl_call_t *c)
{
    return nc.ncclAllReduce(c->send, c->recv, c->count, c->t, c->o, c->comm, c->s);
}

static ncclResult_t call_reduce_scatter(const nccl_call_t *c)
{
    return nc.ncclReduceScatter(c->send, c->recv, c->count, c->t, c->o, c->comm, c->s);
}

static ncclResult_t call_reduce(const nccl_call_t *c)
{
    return nc.ncclReduce(c->send, c->recv, c->count, c->t, c->o, c->root, c->comm, c->s);
}

static ncclResult_t call_allgather(const nccl_call_t *c)
{
    return nc.ncclAllGather(c->send, c->recv, c->count, c->t, c->comm, c->s);
}

static ncclResult_t call_broadcast(const nccl_call_t *c)
{
    return nc.ncclBroadcast(c->send, c->recv, c->count, c->t, c->root, c->comm, c->s);
}

/*
 * The stand-in (host memory: the fake device layer's) runs its collective on a thread of its
 * own at the call; a GPU's NCCL kernel runs in its stream's order. So on a fake stream that
 * holds work back (a wait for a ready word not passed) the call is held by the stream
 * (coll__dev_fake_hold()): issued when the stream gets there, and the stream's later work (the
 * delivery's copies, the event) waits until its thread ended (the communicator's async state
 * no longer in progress). Its error then is the communicator's, which comm_poll() reports; a
 * call refused at once (an argument) is kept as that error. A communicator aborted before its
 * held call started never issues it (a GPU would start the kernel on freed memory: the fake
 * device faults, as a GPU would, so a caller that aborts too early is seen); one aborted
 * while its call runs ends it (its thread saw the abort). The loop thread only, as the
 * streams. Where the fake device faulted the collective is not issued, as a faulted GPU runs
 * no NCCL kernel: the peers wait for this rank until their communicators are aborted (the
 * job's failure), as NCCL's do; the fault itself is reported by the next event query.
 */
static coll_nccl_ops_t nccl_ops;

static void held_unlink(nccl_call_t *c)
{
    nccl_call_t **p = &held;

    pthread_mutex_lock(&held_lock);
    while (*p != c) {
        p = &(*p)->next;
    }
    *p = c->next;
    pthread_mutex_unlock(&held_lock);
    free(c);
}

static void held_run(void *arg, int go)
{
    nccl_call_t *c = arg;
    ncclResult_t r;
    int aborted;

    if (!go) { /* dropped: never asked whether it runs */
        held_unlink(c);
        return;
    }
    pthread_mutex_lock(&held_lock);
    aborted = c->state == ABORTED;
    c->state = aborted ? ABORTED : STARTED;
    pthread_mutex_unlock(&held_lock);
    if (aborted) { /* held_busy() says it ended, and frees it */
        coll__dev_fake_fault_now((coll_dev_stream_t)c->s,
                                 "an NCCL collective started on an aborted communicator");
        return;
    }
    if ((r = c->fn(c)) != ncclSuccess && r != ncclInProgress) {
        (void)nccl_fail(r, c->name);
        pthread_mutex_lock(&held_lock);
        held_error = r;
        held_error_comm = c->comm;
        pthread_mutex_unlock(&held_lock);
    }
}

static int held_busy(void *arg)
{
    nccl_call_t *c = arg;
    ncclResult_t async = ncclSuccess;
    int aborted;

    pthread_mutex_lock(&held_lock);
    aborted = c->state == ABORTED;
    pthread_mutex_unlock(&held_lock);
    if (!aborted && nc.ncclCommGetAsyncError(c->comm, &async) == ncclSuccess &&
        async == ncclInProgress) {
        return 1;
    }
    held_unlink(c);
    return 0;
}

/* Issue @p c: now, or held by its fake stream (the stand-in's, above). */
static coll_status_t issue(const nccl_call_t *c)
{
    nccl_call_t *h;
    int r;

    if (nccl_ops.host_memory && coll__dev_fake_stream_faulted((coll_dev_stream_t)c->s)) {
        return COLL_OK; /* not issued on a faulted device */
    }
    if (nccl_ops.host_memory) {
        if ((h = malloc(sizeof(*h))) == NULL) {
            return coll__dev_fail(COLL_ERR_NOMEM, "%s: out of memory", c->name);
        }
        *h = *c;
        h->state = HELD;
        pthread_mutex_lock(&held_lock);
        h->next = held;
        held = h;
        pthread_mutex_unlock(&held_lock);
        if ((r = coll__dev_fake_hold((coll_dev_stream_t)c->s, held_run, held_busy, h)) == 1) {
            return COLL_OK;
        }
        held_unlink(h);
        if (r < 0) {
            return coll__dev_fail(COLL_ERR_NOMEM, "%s: out of memory", c->name);
        }
    }
    return result(c->fn(c), c->name);
}

static coll_status_t nccl_allreduce(uint64_t send, uint64_t recv, size_t count,
                                    coll_dtype_t dtype, coll_redop_t op, coll_nccl_comm_t comm,
                                    coll_dev_stream_t s)
{
    nccl_call_t c = {call_allreduce, "ncclAllReduce", (const void *)(uintptr_t)send,
                     (void *)(uintptr_t)recv, count, ncclFloat32, ncclSum, 0,
                     (ncclComm_t)comm, (cudaStream_t)s, NULL, HELD};
    coll_status_t st = types_of(dtype, op, &c.t, &c.o);

    return st != COLL_OK ? st : issue(&c);
}

static coll_status_t nccl_reduce_scatter(uint64_t send, uint64_t recv, size_t count,
                                         coll_dtype_t dtype, coll_redop_t op,
                                         coll_nccl_comm_t comm, coll_dev_stream_t s)
{
    nccl_call_t c = {call_reduce_scatter, "ncclReduceScatter", (const void *)(uintptr_t)send,
                     (void *)(uintptr_t)recv, count, ncclFloat32, ncclSum, 0,
                     (ncclComm_t)comm, (cudaStream_t)s, NULL, HELD};
    coll_status_t st = types_of(dtype, op, &c.t, &c.o);

    return st != COLL_OK ? st : issue(&c);
}

static coll_status_t nccl_reduce(uint64_t send, uint64_t recv, size_t count, coll_dtype_t dtype,
                                 coll_redop_t op, int root, coll_nccl_comm_t comm,
                                 coll_dev_stream_t s)
{
    nccl_call_t c = {call_reduce, "ncclReduce", (const void *)(uintptr_t)send,
                     (void *)(uintptr_t)recv, count, ncclFloat32, ncclSum, root,
                     (ncclComm_t)comm, (cudaStream_t)s, NULL, HELD};
    coll_status_t st = types_of(dtype, op, &c.t, &c.o);

    return st != COLL_OK ? st : issue(&c);
}

static coll_status_t nccl_allgather(uint64_t send, uint64_t recv, size_t count,
                                    coll_dtype_t dtype, coll_nccl_comm_t comm,
                                    coll_dev_stream_t s)
{
    nccl_call_t c = {call_allgather, "ncclAllGather", (const void *)(uintptr_t)send,
                     (void *)(uintptr_t)recv, count, ncclFloat32, ncclSum, 0,
                     (ncclComm_t)comm, (cudaStream_t)s, NULL, HELD};
    coll_status_t st = dtype_of(dtype, &c.t);

    return st != COLL_OK ? st : issue(&c);
}

static coll_status_t nccl_broadcast(uint64_t send, uint64_t recv, size_t count,
                                    coll_dtype_t dtype, int root, coll_nccl_comm_t comm,
                                    coll_dev_stream_t s)
{
    nccl_call_t c = {call_broadcast, "ncclBroadcast", (const void *)(uintptr_t)send,
                     (void *)(uintptr_t)recv, count, ncclFloat32, ncclSum, root,
                     (ncclComm_t)comm, (cudaStream_t)s, NULL, HELD};
    coll_status_t st = dtype_of(dtype, &c.t);

    return st != COLL_OK ? st : issue(&c);
}

static coll_nccl_ops_t nccl_ops = {
    .unique_id = nccl_unique_id,
    .comm_init = nccl_comm_init,
    .comm_poll = nccl_comm_poll,
    .comm_abort = nccl_comm_abort,
    .comm_destroy = nccl_comm_destroy,
    .allreduce = nccl_allreduce,
    .reduce_scatter = nccl_reduce_scatter,
    .reduce = nccl_reduce,
    .allgather = nccl_allgather,
    .broadcast = nccl_broadcast,
};

/* Every entry by name; @return the first one missing, or NULL. */
static const char *resolve(void *lib)
{
#define NCCL_RESOLVE(f)                                                                            \
    if ((*(void **)&nc.f = dlsym(lib, NCCL_STR(f))) == NULL) {                                     \
        return NCCL_STR(f);                                                                        \
    }
    NCCL_ENTRIES(NCCL_RESOLVE)
#undef NCCL_RESOLVE
    return NULL;
}

/* NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z since 2.9, X * 1000 + Y * 100 + Z before. */
static void version_text(int v)
{
    if (v >= 20900) {
        snprintf(text, sizeof(text), "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    } else {
        snprintf(text, sizeof(text), "%d.%d.%d", v / 1000, v / 100 % 10, v % 100);
    }
}

static void probe(void)
{
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    const char *missing;
    int v = 0;

    if (lib == NULL) {
        snprintf(text, sizeof(text), "absent: %s", dlerror());
        return;
    }
    if ((missing = resolve(lib)) != NULL) {
        snprintf(text, sizeof(text), "absent: libnccl.so.2 has no %s (NCCL before 2.14)",
                 missing);
        dlclose(lib);
        return;
    }
    if (nc.ncclGetVersion(&v) != ncclSuccess) {
        snprintf(text, sizeof(text), "absent: libnccl.so.2 does not answer ncclGetVersion");
        dlclose(lib);
        return;
    }
    version_text(v); /* the library stays loaded for the NCCL path */
    nccl_ops.host_memory = dlsym(lib, "collective_nccl_host_memory") != NULL;
    present = 1;
}

int coll_nccl_probe(const char **text_p)
{
    pthread_once(&once, probe);
    *text_p = text;
    return present;
}

coll_status_t coll_nccl_open(const coll_nccl_ops_t **ops_p)
{
    pthread_once(&once, probe);
    if (!present) {
        return COLL_ERR_UNSUPPORTED;
    }
    *ops_p = &nccl_ops;
    return COLL_OK;
}
