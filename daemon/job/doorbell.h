/**
 * @file doorbell.h
 * @brief Submissions through the control blocks (proto/ctl.h): the job's doorbell eventfd, and
 *        the loop hooks that announce sleep and drain the rings.
 *
 * Before the loop blocks (uv_prepare) the daemon marks every ready job "asleep" and then drains
 * its rings; after it wakes (uv_check) it clears the mark. A rank rings the doorbell only when
 * it sees the mark, so a busy daemon receives submissions without a system call on either side,
 * and a sleeping one is woken once.
 */
#ifndef COLL_DOORBELL_H
#define COLL_DOORBELL_H

#include "core/daemon.h"
#include "job/lifecycle.h"

/** @brief Create @p job's doorbell (eventfd) and poll it. @return COLL_OK or COLL_ERR_IO. */
coll_status_t coll_doorbell_open(coll_job_t *job);

/** @brief Stop polling the doorbell (its handle closes with the job's others). */
void coll_doorbell_close(coll_job_t *job);

/** @brief Install the prepare/check hooks on the daemon's loop. */
void coll_doorbell_start(coll_daemon_t *d);

/** @brief Remove the hooks (shutdown). */
void coll_doorbell_stop(coll_daemon_t *d);

#endif
