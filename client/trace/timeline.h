/**
 * @file timeline.h
 * @brief The per-rank trace of COLL_TIMELINE (collective.h, "Timeline"): internal hooks called
 *        by the communicator and the requests. Every function is called with the
 *        communicator's lock held. Not installed.
 */
#ifndef COLL_CLIENT_TIMELINE_H
#define COLL_CLIENT_TIMELINE_H

#include <stdint.h>

#include <collective.h>

typedef struct coll_timeline coll_timeline_t;

/**
 * @brief Open the rank's timeline file when COLL_TIMELINE is set.
 * @return The timeline; NULL when it is not set, or after reporting on stderr why the file
 *         could not be created (the job goes on without a timeline).
 */
coll_timeline_t *coll__timeline_open(int rank, int world_size);

/** @brief Write what is buffered, complete the file and free the timeline. Safe with NULL. */
void coll__timeline_close(coll_timeline_t *tl);

/**
 * @brief Record a finished collective request (its track and name from coll__req_label(), its
 *        phases from its timing). Requests that failed or are not collectives are skipped.
 */
void coll__timeline_request(coll_timeline_t *tl, const coll_request_t *r);

/** @brief Record one span [begin_ns, end_ns] on @p track. */
void coll__timeline_span(coll_timeline_t *tl, const char *track, const char *name,
                         uint64_t begin_ns, uint64_t end_ns);

/** @brief Write the buffer. @return COLL_OK; COLL_ERR_IO (reported once; timeline off). */
coll_status_t coll__timeline_flush(coll_timeline_t *tl);

/**
 * @brief Give a request a timeline track and name (a bucketer's bucket); by default a request
 *        is on track "collectives" named after its collective. Takes the communicator's lock.
 */
void coll__req_label(coll_request_t *r, const char *track, const char *name, uint64_t iteration,
                     long bucket);

#endif
