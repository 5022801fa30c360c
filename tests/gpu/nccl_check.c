/*
 * nccl_check: NCCL's table (device/nccl.h) on real devices, for a GPU machine (tests/gpu/run.sh,
 * label gpu). One rank per device, on threads of this process, up to two: with one GPU a
 * communicator of one rank (the loader, the non-blocking creation and polling, the collectives
 * queued on a stream and completed by an event the program polls, on a real device), with two
 * a communicator of two ranks, as two daemons on two GPUs make (NCCL refuses two ranks on one
 * GPU). Each rank's buffers are device memory of the device layer (physical allocations mapped
 * into a reservation, as the device pools are); a float32 sum allreduce, reduce-scatter,
 * all-gather, broadcast and reduce (to rank 0, checked there), each checked against the values
 * computed here. The process ends
 * with its device memory mapped: the driver gives it back.
 *
 * Exit status: 0 success, 1 a failed check (with a message), 77 skipped (no CUDA device, or no
 * usable NCCL; the last line says why).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/dev.h"
#include "device/nccl.h"

#define SKIP 77
#define N 4096

static const coll_dev_ops_t *dev;
static const coll_nccl_ops_t *nccl;
static coll_nccl_id_t id;
static int nranks;

typedef struct {
    int rank;
    coll_nccl_comm_t comm;
    coll_dev_stream_t s;
    coll_dev_event_t e;
    coll_dev_mem_t mem;
    uint64_t va; /* in: [0, 2N) floats; out: [2N, 4N) */
    size_t bytes;
    float host[2 * N];
    char err[COLL_DEV_TEXT_MAX];
} rank_t;

/* Poll until @p st's call settled, then until its work on the stream completed (bounded). */
static coll_status_t settle(rank_t *r, coll_status_t st)
{
    const struct timespec ms = {0, 1000000};

    for (int i = 0; i < 20000 && st == COLL_OK && (st = nccl->comm_poll(r->comm)) ==
                                                      COLL_INPROGRESS; i++) {
        nanosleep(&ms, NULL);
    }
    st = st == COLL_OK ? dev->event_record(r->e, r->s) : st;
    for (int i = 0; i < 20000 && st == COLL_OK && (st = dev->event_query(r->e)) ==
                                                      COLL_INPROGRESS; i++) {
        nanosleep(&ms, NULL);
    }
    return st;
}

static coll_status_t setup(rank_t *r)
{
    size_t gran;
    coll_status_t st = dev->granularity(r->rank, &gran);

    r->bytes = (4 * N * sizeof(float) + gran - 1) / gran * gran;
    st = st == COLL_OK ? dev->mem_create(r->rank, r->bytes, &r->mem) : st;
    st = st == COLL_OK ? dev->va_reserve(r->rank, r->bytes, gran, &r->va) : st;
    st = st == COLL_OK ? dev->map(r->rank, r->va, r->bytes, r->mem) : st;
    st = st == COLL_OK ? dev->stream_create(r->rank, &r->s) : st;
    st = st == COLL_OK ? dev->event_create(r->rank, &r->e) : st;
    st = st == COLL_OK ? nccl->comm_init(r->rank, nranks, r->rank, &id, &r->comm) : st;
    return settle(r, st);
}

/* Run @p call's collective from in = host values, then read out back. */
static coll_status_t round_trip(rank_t *r, int which, size_t in_floats, size_t out_floats)
{
    uint64_t in = r->va, out = r->va + 2 * N * sizeof(float);
    coll_status_t st = dev->copy_async(in, (uint64_t)(uintptr_t)r->host, in_floats * 4, r->s);

    if (st != COLL_OK) {
        return st;
    }
    switch (which) {
    case 0: st = nccl->allreduce(in, out, N, COLL_FLOAT32, COLL_SUM, r->comm, r->s); break;
    case 1: st = nccl->reduce_scatter(in, out, N, COLL_FLOAT32, COLL_SUM, r->comm, r->s); break;
    case 2: st = nccl->allgather(in, out, N, COLL_FLOAT32, r->comm, r->s); break;
    case 3: st = nccl->broadcast(in, out, N, COLL_FLOAT32, nranks - 1, r->comm, r->s); break;
    default: st = nccl->reduce(in, out, N, COLL_FLOAT32, COLL_SUM, 0, r->comm, r->s); break;
    }
    st = settle(r, st);
    st = st == COLL_OK ? dev->copy_async((uint64_t)(uintptr_t)r->host, out, out_floats * 4, r->s)
                       : st;
    return st == COLL_OK ? dev->stream_sync(r->s) : st;
}

static float value(int rank, size_t i)
{
    return (float)(rank * 1000 + (int)(i % 997));
}

/* @return The index of the first wrong value of collective @p which, or -1 (the reduce's
 * non-root has none). */
static long check(const rank_t *r, int which)
{
    for (size_t i = 0; i < (which == 2 ? (size_t)nranks * N : N) && (which != 4 || r->rank == 0);
         i++) {
        float want = 0;
        for (int k = 0; k < nranks; k++) {
            want += which == 0 || which == 4 ? value(k, i)
                    : which == 1             ? value(k, r->rank * N + i)
                                             : 0;
        }
        want = which == 2 ? value((int)(i / N), i % N) : which == 3 ? value(nranks - 1, i) : want;
        if (r->host[i] != want) {
            return (long)i;
        }
    }
    return -1;
}

static void *rank_main(void *arg)
{
    static const char *const names[] = {"allreduce", "reduce-scatter", "all-gather", "broadcast",
                                        "reduce"};
    rank_t *r = arg;
    coll_status_t st = setup(r);

    for (int which = 0; which < 5 && st == COLL_OK; which++) {
        size_t in = which == 1 ? (size_t)nranks * N : N, out = which == 2 ? (size_t)nranks * N : N;
        for (size_t i = 0; i < in; i++) {
            r->host[i] = value(r->rank, i);
        }
        st = round_trip(r, which, in, out);
        if (st == COLL_OK && check(r, which) >= 0) {
            snprintf(r->err, sizeof(r->err), "rank %d: %s: element %ld wrong", r->rank,
                     names[which], check(r, which));
            return NULL;
        }
    }
    if (st != COLL_OK) {
        snprintf(r->err, sizeof(r->err), "rank %d: %s: %s", r->rank, coll_strerror(st),
                 coll_dev_error());
    }
    return NULL;
}

int main(void)
{
    static rank_t r[2];
    pthread_t t[2];
    const char *text;
    int bad = 0;

    if (coll_dev_open(&dev) != COLL_OK || dev->count() < 1) {
        printf("no CUDA device: %s\n", coll_dev_status());
        return SKIP;
    }
    if (coll_nccl_open(&nccl) != COLL_OK) {
        coll_nccl_probe(&text);
        printf("no usable NCCL: %s\n", text);
        return SKIP;
    }
    coll_nccl_probe(&text);
    nranks = dev->count() >= 2 ? 2 : 1;
    printf("nccl %s, %s: a communicator of %d rank%s%s\n", text, coll_dev_status(), nranks,
           nranks == 1 ? "" : "s", nranks == 1 ? " (NCCL between daemons needs two GPUs)" : "");
    if (nccl->unique_id(&id) != COLL_OK) {
        printf("FAIL ncclGetUniqueId: %s\n", coll_dev_error());
        return 1;
    }
    for (int k = 0; k < nranks; k++) {
        r[k].rank = k;
        pthread_create(&t[k], NULL, rank_main, &r[k]);
    }
    for (int k = 0; k < nranks; k++) {
        pthread_join(t[k], NULL);
        bad |= r[k].err[0] != '\0';
        printf("%s\n", r[k].err[0] != '\0' ? r[k].err : "rank ok: every collective checked");
        nccl->comm_destroy(r[k].comm);
    }
    return bad;
}
