/* What the device-buffer rank programs of tests/gpu share (rank_dev.h). */
#include "rank_dev.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "device/dev.h"

static const coll_dev_ops_t *ops;
static coll_dev_stream_t stream;
static coll_comm_t *comm;
static int rank = -1;

coll_comm_t *rank_dev_open(const char *prog, int *status_p)
{
    coll_status_t st;

    if (coll_dev_open(&ops) != COLL_OK || ops->stream_create(0, &stream) != COLL_OK) {
        printf("skipped: no CUDA device (%s%s%s)\n", coll_dev_status(),
               coll_dev_error()[0] != '\0' ? "; " : "", coll_dev_error());
        *status_p = RANK_DEV_SKIP;
        return NULL;
    }
    if ((st = coll_comm_create(NULL, &comm)) != COLL_OK) {
        fprintf(stderr, "%s: joining the job: %s: %s\n", prog, coll_strerror(st),
                coll_comm_last_error(NULL));
        ops->stream_destroy(stream);
        *status_p = 1;
        return NULL;
    }
    rank = coll_comm_rank(comm);
    return comm;
}

void rank_dev_close(coll_comm_t *c)
{
    coll_comm_destroy(c);
    ops->stream_destroy(stream);
}

int rank_dev_copy(void *dst, const void *src, size_t n)
{
    if (ops->copy_async((uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src, n, stream) != COLL_OK ||
        ops->stream_sync(stream) != COLL_OK) {
        fprintf(stderr, "rank %d: copy of %zu bytes: %s\n", rank, n, coll_dev_error());
        return -1;
    }
    return 0;
}

int rank_dev_copy_on(void *dst, const void *src, size_t n, void *s)
{
    if (ops->copy_async((uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src, n,
                        (coll_dev_stream_t)s) != COLL_OK) {
        fprintf(stderr, "rank %d: copy of %zu bytes queued: %s\n", rank, n, coll_dev_error());
        return -1;
    }
    return 0;
}

void *rank_dev_stream(void)
{
    return stream;
}

int rank_dev_device;

void *rank_dev_alloc(size_t bytes)
{
    void *p = NULL;
    coll_status_t st = coll_mem_alloc_on(comm, bytes, COLL_MEMORY_CUDA, rank_dev_device, &p);

    if (st != COLL_OK) {
        fprintf(stderr, "rank %d: coll_mem_alloc_on(%zu): %s: %s\n", rank, bytes,
                coll_err_name(st), coll_comm_last_error(comm));
    }
    return st == COLL_OK ? p : NULL;
}

int rank_dev_finish(const char *what, coll_status_t st, coll_request_t *req,
                    const char *want_algo)
{
    char algo[32] = "";

    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(req, 30000);
        snprintf(algo, sizeof(algo), "%s", coll_req_algo(req));
        coll_req_free(req);
    }
    if (st != COLL_OK) {
        fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, coll_err_name(st),
                coll_comm_last_error(comm));
        return -1;
    }
    if (strcmp(algo, want_algo) != 0) {
        fprintf(stderr, "rank %d: %s ran as '%s', not '%s'\n", rank, what, algo, want_algo);
        return -1;
    }
    return 0;
}
