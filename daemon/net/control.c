#include "net/control.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "net/transport.h"

static void on_abort(coll_job_t *job, const coll_jobmsg_t *m, const char *text, size_t len)
{
    /* What the sender saw is news here too: /status shows the lost node on every survivor. */
    if (m->lost != COLL_JOBMSG_NO_NODE && m->lost != job->node_rank) {
        coll_node_lost(&job->nodes[m->lost], "node %u lost it", m->node);
    }
    if (job->net.pending_status != COLL_OK) {
        return;
    }
    job->net.pending_status = (coll_status_t)m->status;
    memcpy(job->net.pending_msg, text, len);
    job->net.pending_msg[len] = '\0';
}

/* A goodbye's text names the rank whose leaving ended the node's part ("" when none did). */
static void on_goodbye(coll_node_t *node, const char *text, size_t len)
{
    coll_job_t *job = node->job;
    char who[sizeof(node->gone_why)];

    if (len > 0 && !node->left && job->net.hooks != NULL && job->net.hooks->on_node_left) {
        snprintf(who, sizeof(who), "%.*s on node %u", (int)len, text, node->index);
        job->net.hooks->on_node_left(job, who);
    }
    node->left = 1;
    if (node->gone == COLL_OK) {
        node->gone = COLL_ERR_JOB;
        if (len > 0) {
            snprintf(node->gone_why, sizeof(node->gone_why), "%.*s left the job", (int)len, text);
        } else {
            snprintf(node->gone_why, sizeof(node->gone_why), "it left the job");
        }
    }
}

/* Answered from the next health tick (blame.h), outside UCX's call stack. */
static void on_blame_query(coll_job_t *job, uint32_t node, uint64_t key)
{
    if (job->net.nblame_queries < COLL_BLAME_QUERIES) {
        job->net.blame_queries[job->net.nblame_queries++] = (coll_blame_query_t){node, key};
    }
}

static void on_blame(coll_job_t *job, uint64_t key, const char *text, size_t len)
{
    coll_blame_t *b = &job->net.blames[job->net.nblames++ % COLL_BLAMES];

    b->key = key;
    snprintf(b->text, sizeof(b->text), "%.*s", (int)len, text);
}

static ucs_status_t am_cb(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param)
{
    coll_job_t *job = arg;
    coll_jobmsg_t m;
    const char *text;
    size_t text_len;
    uint64_t key;

    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        !coll_jobmsg_decode(data, length, job->nnodes, job->epoch, &m, &key, &text, &text_len,
                             sizeof(job->net.pending_msg) - 1)) {
        /* Another epoch's messages are expected after a job is re-created; short ones not. */
        COLL_LOG(length < sizeof(m) ? COLL_LOG_WARN : COLL_LOG_DEBUG, COLL_SUB_UCX,
                 "job %s: dropping a control message (%zu bytes): malformed or of another epoch",
                 job->id, length);
        return UCS_OK;
    }
    switch (m.type) {
    case COLL_JOBMSG_ABORT:
        on_abort(job, &m, text, text_len);
        break;
    case COLL_JOBMSG_GOODBYE:
        on_goodbye(&job->nodes[m.node], text, text_len);
        break;
    case COLL_JOBMSG_BLAME_QUERY:
        on_blame_query(job, m.node, key);
        break;
    case COLL_JOBMSG_BLAME:
        on_blame(job, key, text, text_len);
        break;
    default: /* COLL_JOBMSG_HEARTBEAT */
        job->nodes[m.node].last_seen_ns = uv_hrtime();
        break;
    }
    return UCS_OK;
}

coll_status_t coll_control_init(coll_job_t *job)
{
    ucp_am_handler_param_t am = {0};
    ucs_status_t st;

    am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    am.id = COLL_AM_JOBMSG;
    am.cb = am_cb;
    am.arg = job;
    st = ucp_worker_set_am_recv_handler(job->net.worker, &am);
    if (st != UCS_OK) {
        coll_error(COLL_SUB_UCX, "job %s: control handler: %s", job->id, ucs_status_string(st));
        return COLL_ERR_TRANSPORT;
    }
    return COLL_OK;
}

/* Fire and forget: the request is released at once and completes on its own. UCX may send
 * after this returns (an endpoint still connecting), so @p buf must outlive the job's
 * endpoints: it lives in the job. Only over an endpoint that exists (all are made when the job
 * becomes ready, net/transport.h): creating one can block the loop on an unreachable peer. */
static void send_to(coll_job_t *job, uint32_t node, const void *buf, size_t len)
{
    ucp_request_param_t p = {0};
    ucp_ep_h ep = job->nodes[node].ep;
    ucs_status_ptr_t r;

    if (node == job->node_rank || job->nodes[node].gone != COLL_OK || ep == NULL) {
        return;
    }
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_EAGER;
    r = ucp_am_send_nbx(ep, COLL_AM_JOBMSG, NULL, 0, buf, len, &p);
    if (UCS_PTR_IS_PTR(r)) {
        ucp_request_free(r);
    }
}

/* One abort or goodbye per job: its payload lives in job->net.control_msg. */
static void send_all(coll_job_t *job, uint32_t type, coll_status_t status, const char *text)
{
    coll_jobmsg_t m = {.type = type, .status = (int32_t)status, .node = job->node_rank,
                            .lost = COLL_JOBMSG_NO_NODE, .epoch = job->epoch};
    size_t cap = sizeof(job->net.control_msg) - sizeof(m);
    size_t n = strlen(text) < cap ? strlen(text) : cap;

    for (uint32_t i = 0; i < job->nnodes && type == COLL_JOBMSG_ABORT; i++) {
        if (job->nodes[i].gone == COLL_ERR_PEER) {
            m.lost = i;
            break;
        }
    }
    memcpy(job->net.control_msg, &m, sizeof(m));
    memcpy(job->net.control_msg + sizeof(m), text, n);
    for (uint32_t i = 0; i < job->nnodes; i++) {
        send_to(job, i, job->net.control_msg, sizeof(m) + n);
    }
}

void coll_control_abort(coll_job_t *job, coll_status_t status, const char *msg)
{
    send_all(job, COLL_JOBMSG_ABORT, status, msg);
}

void coll_control_goodbye(coll_job_t *job)
{
    send_all(job, COLL_JOBMSG_GOODBYE, COLL_OK, job->left);
}

void coll_control_heartbeat(coll_job_t *job, uint32_t node)
{
    _Static_assert(sizeof(coll_jobmsg_t) <= sizeof(job->net.heartbeat_msg), "heartbeat fits");
    coll_jobmsg_t m = {.type = COLL_JOBMSG_HEARTBEAT, .node = job->node_rank, .epoch = job->epoch};

    memcpy(job->net.heartbeat_msg, &m, sizeof(m));
    send_to(job, node, job->net.heartbeat_msg, sizeof(m));
}

/* A message of its own buffer, in the job's owned list until the job's worker is destroyed
 * (its request is released at once, so nothing says when UCX is done with it). */
typedef struct {
    coll_list_t link; /* first: the transport frees the block by it (core/job.h) */
    uint8_t data[];
} owned_t;

/* @p len bytes in a new owned buffer (the caller fills its data), or NULL. */
static owned_t *owned_new(size_t len)
{
    owned_t *o = malloc(sizeof(*o) + len);

    if (o != NULL) {
        coll_list_init(&o->link);
    }
    return o;
}

static void send_owned(coll_job_t *job, uint32_t node, owned_t *o, size_t len)
{
    ucp_request_param_t p = {0};
    ucs_status_ptr_t r;
    ucp_ep_h ep = job->nodes[node].ep;

    if (node == job->node_rank || job->nodes[node].gone != COLL_OK || ep == NULL) {
        free(o);
        return;
    }
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_EAGER;
    r = ucp_am_send_nbx(ep, COLL_AM_JOBMSG, NULL, 0, o->data, len, &p);
    if (UCS_PTR_IS_PTR(r)) {
        /* UCX finishes the send on its own; a freed request calls nothing back, so the buffer
         * stays on job->net.owned until the job's transport closes (blame messages: a few per
         * failed job). */
        coll_list_push(&job->net.owned, &o->link);
        ucp_request_free(r);
    } else {
        free(o);
    }
}

/* A blame message: header, key, text. */
static void send_blame(coll_job_t *job, uint32_t node, uint32_t type, uint64_t key,
                       const char *text)
{
    coll_jobmsg_t m = {.type = type, .node = job->node_rank, .lost = COLL_JOBMSG_NO_NODE,
                            .epoch = job->epoch};
    size_t n = strlen(text), len = sizeof(m) + sizeof(key) + n;
    owned_t *o = owned_new(len);

    if (o == NULL) {
        return;
    }
    memcpy(o->data, &m, sizeof(m));
    memcpy(o->data + sizeof(m), &key, sizeof(key));
    memcpy(o->data + sizeof(m) + sizeof(key), text, n);
    send_owned(job, node, o, len);
}

void coll_control_blame_query(coll_job_t *job, uint64_t key)
{
    for (uint32_t i = 0; i < job->nnodes; i++) {
        send_blame(job, i, COLL_JOBMSG_BLAME_QUERY, key, "");
    }
}

void coll_control_blame(coll_job_t *job, uint32_t node, uint64_t key, const char *text)
{
    send_blame(job, node, COLL_JOBMSG_BLAME, key, text);
}

const char *coll_control_blamed(const coll_job_t *job, uint64_t key)
{
    uint32_t n = job->net.nblames < COLL_BLAMES ? job->net.nblames : COLL_BLAMES;

    for (uint32_t i = 0; i < n; i++) {
        if (job->net.blames[i].key == key) {
            return job->net.blames[i].text;
        }
    }
    return NULL;
}
