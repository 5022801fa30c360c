#include "core/staging.h"

#include <stdlib.h>

/* A free block holds its own list link in its first bytes. */
uint8_t *coll_staging_get(coll_job_t *job)
{
    coll_list_t *e = coll_list_pop(&job->engine.staging);
    if (e != NULL) {
        return (uint8_t *)e;
    }
    return aligned_alloc(64, job->engine.staging_bytes);
}

void coll_staging_put(coll_job_t *job, uint8_t *block)
{
    if (block != NULL) {
        coll_list_t *link = (coll_list_t *)(void *)block; /* over data: no link yet */
        coll_list_init(link);
        coll_list_push(&job->engine.staging, link);
    }
}

void coll_staging_release_all(coll_job_t *job)
{
    coll_list_t *e;
    while ((e = coll_list_pop(&job->engine.staging)) != NULL) {
        free(e);
    }
}
