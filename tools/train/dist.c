/* Data-parallel context: a libcollective communicator, or none in standalone mode. */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The reference run: no communicator when the environment describes no job of several ranks. */
static int dist_env_standalone(void)
{
    const char *world = getenv("COLL_WORLD_SIZE");

    if (world == NULL || world[0] == '\0') {
        return 1;
    }
    return strcmp(world, "1") == 0 && getenv("COLL_SOCKET") == NULL;
}

static void dist_report(const dist_t *dist, const char *what, coll_status_t st)
{
    const char *detail = dist->comm != NULL ? coll_comm_last_error(dist->comm) : "";

    fprintf(stderr, "coll-train: rank %d: %s: %s (%s)%s%s\n", dist->rank, what,
            coll_strerror(st), coll_err_name(st), detail[0] != '\0' ? ": " : "", detail);
}

int dist_init(dist_t *dist)
{
    coll_comm_t *comm;
    coll_status_t st;

    memset(dist, 0, sizeof(*dist));
    if (dist_env_standalone()) {
        dist->world_size = 1;
        dist->local_size = 1;
        return 0;
    }
    st = coll_comm_create(NULL, &comm);
    if (st != COLL_OK) {
        /* coll_comm_create() has printed the details; say which call failed. */
        fprintf(stderr, "coll-train: cannot join the job: %s (%s)\n", coll_strerror(st),
                coll_err_name(st));
        return -1;
    }
    dist->comm = comm;
    dist->rank = coll_comm_rank(comm);
    dist->world_size = coll_comm_world_size(comm);
    dist->local_size = coll_comm_local_size(comm);
    return 0;
}

void dist_fini(dist_t *dist)
{
    coll_comm_destroy(dist->comm);
    dist->comm = NULL;
}

int dist_standalone(const dist_t *dist)
{
    return dist->comm == NULL;
}

float *dist_alloc(dist_t *dist, size_t n)
{
    size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
    void *p;
    coll_status_t st;

    if (dist->comm == NULL) {
        p = aligned_alloc(64, bytes);
        if (p == NULL) {
            fprintf(stderr, "coll-train: out of memory for %zu bytes\n", bytes);
            return NULL;
        }
    } else {
        st = coll_mem_alloc(dist->comm, bytes, &p);
        if (st != COLL_OK) {
            char what[64];
            snprintf(what, sizeof(what), "coll_mem_alloc of %zu bytes", bytes);
            dist_report(dist, what, st);
            return NULL;
        }
    }
    memset(p, 0, bytes);
    return p;
}

void dist_free(dist_t *dist, float *buf)
{
    if (buf == NULL) {
        return;
    }
    if (dist->comm == NULL) {
        free(buf);
    } else {
        coll_mem_free(dist->comm, buf);
    }
}

int dist_allreduce(dist_t *dist, float *buf, size_t n, coll_redop_t op)
{
    coll_request_t *req = NULL;
    coll_status_t st;

    if (dist->comm == NULL) {
        return 0;
    }
    st = coll_allreduce_async(dist->comm, buf, buf, n, COLL_FLOAT32, op, NULL, &req);
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(req, -1);
        coll_req_free(req);
    }
    if (st != COLL_OK) {
        char what[64];
        snprintf(what, sizeof(what), "allreduce of %zu floats", n);
        dist_report(dist, what, st);
        return -1;
    }
    return 0;
}
