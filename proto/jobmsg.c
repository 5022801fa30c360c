#include "proto/jobmsg.h"

#include <string.h>

#include <collective.h>

int coll_jobmsg_decode(const void *data, size_t len, uint32_t nnodes, uint64_t epoch,
                        coll_jobmsg_t *m, uint64_t *key, const char **text,
                        size_t *text_len, size_t text_max)
{
    size_t head = sizeof(*m);

    if (len < sizeof(*m)) {
        return 0;
    }
    memcpy(m, data, sizeof(*m));
    if (m->epoch != epoch || m->node >= nnodes || m->type < COLL_JOBMSG_ABORT ||
        m->type > COLL_JOBMSG_BLAME) {
        return 0;
    }
    *key = 0;
    if (m->type == COLL_JOBMSG_BLAME_QUERY || m->type == COLL_JOBMSG_BLAME) {
        if (len < head + sizeof(*key)) {
            return 0;
        }
        memcpy(key, (const char *)data + head, sizeof(*key));
        head += sizeof(*key);
    }
    *text = (const char *)data + head;
    *text_len = 0;
    if (m->type != COLL_JOBMSG_HEARTBEAT && m->type != COLL_JOBMSG_BLAME_QUERY) {
        *text_len = len - head < text_max ? len - head : text_max;
    }
    if (m->type == COLL_JOBMSG_ABORT) {
        /* Our errors are small negative numbers (collective.h); anything else is a job error. */
        if (m->status >= 0 || m->status <= -2000) {
            m->status = COLL_ERR_JOB;
        }
        if (m->lost >= nnodes) {
            m->lost = COLL_JOBMSG_NO_NODE;
        }
    }
    return 1;
}

