#include "control.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

int coll_control_decode(const void *data, size_t len, uint32_t nnodes, uint64_t epoch,
                        coll_control_msg_t *m, uint64_t *key, const char **text,
                        size_t *text_len, size_t text_max)
{
    size_t head = sizeof(*m);

    if (len < sizeof(*m)) {
        return 0;
    }
    memcpy(m, data, sizeof(*m));
    if (m->epoch != epoch || m->node >= nnodes || m->type < COLL_CTL_ABORT ||
        m->type > COLL_CTL_BLAME) {
        return 0;
    }
    *key = 0;
    if (m->type == COLL_CTL_BLAME_QUERY || m->type == COLL_CTL_BLAME) {
        if (len < head + sizeof(*key)) {
            return 0;
        }
        memcpy(key, (const char *)data + head, sizeof(*key));
        head += sizeof(*key);
    }
    *text = (const char *)data + head;
    *text_len = 0;
    if (m->type != COLL_CTL_HEARTBEAT && m->type != COLL_CTL_BLAME_QUERY) {
        *text_len = len - head < text_max ? len - head : text_max;
    }
    if (m->type == COLL_CTL_ABORT) {
        /* Our errors are small negative numbers (collective.h); anything else is a job error. */
        if (m->status >= 0 || m->status <= -2000) {
            m->status = COLL_ERR_JOB;
        }
        if (m->lost >= nnodes) {
            m->lost = COLL_CTL_NO_NODE;
        }
    }
    return 1;
}

static void on_abort(coll_job_t *job, const coll_control_msg_t *m, const char *text, size_t len)
{
    /* What the sender saw is news here too: /status shows the lost node on every survivor. */
    if (m->lost != COLL_CTL_NO_NODE && m->lost != job->node_rank) {
        coll_node_lost(&job->nodes[m->lost], "node %u lost it", m->node);
    }
    if (job->pending_status != COLL_OK) {
        return;
    }
    job->pending_status = (coll_status_t)m->status;
    memcpy(job->pending_msg, text, len);
    job->pending_msg[len] = '\0';
}

/* A goodbye's text names the rank whose leaving ended the node's part ("" when none did). */
static void on_goodbye(coll_node_t *node, const char *text, size_t len)
{
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
    if (job->nblame_queries < COLL_BLAME_QUERIES) {
        job->blame_queries[job->nblame_queries++] = (coll_blame_query_t){node, key};
    }
}

static void on_blame(coll_job_t *job, uint64_t key, const char *text, size_t len)
{
    coll_blame_t *b = &job->blames[job->nblames++ % COLL_BLAMES];

    b->key = key;
    snprintf(b->text, sizeof(b->text), "%.*s", (int)len, text);
}

static ucs_status_t am_cb(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param)
{
    coll_job_t *job = arg;
    coll_control_msg_t m;
    const char *text;
    size_t text_len;
    uint64_t key;

    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        !coll_control_decode(data, length, job->nnodes, job->epoch, &m, &key, &text, &text_len,
                             sizeof(job->pending_msg) - 1)) {
        /* Another epoch's messages are expected after a job is re-created; short ones not. */
        COLL_LOG(length < sizeof(m) ? COLL_LOG_WARN : COLL_LOG_DEBUG, COLL_SUB_UCX,
                 "job %s: dropping a control message (%zu bytes): malformed or of another epoch",
                 job->id, length);
        return UCS_OK;
    }
    switch (m.type) {
    case COLL_CTL_ABORT:
        on_abort(job, &m, text, text_len);
        break;
    case COLL_CTL_GOODBYE:
        on_goodbye(&job->nodes[m.node], text, text_len);
        break;
    case COLL_CTL_BLAME_QUERY:
        on_blame_query(job, m.node, key);
        break;
    case COLL_CTL_BLAME:
        on_blame(job, key, text, text_len);
        break;
    default: /* COLL_CTL_HEARTBEAT */
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
    am.id = COLL_AM_CONTROL;
    am.cb = am_cb;
    am.arg = job;
    st = ucp_worker_set_am_recv_handler(job->worker, &am);
    if (st != UCS_OK) {
        coll_error(COLL_SUB_UCX, "job %s: control handler: %s", job->id, ucs_status_string(st));
        return COLL_ERR_TRANSPORT;
    }
    return COLL_OK;
}

/* Fire and forget: the request is released at once and completes on its own. UCX may send
 * after this returns (an endpoint still connecting), so @p buf must outlive the job's
 * endpoints: it lives in the job. */
static void send_to(coll_job_t *job, uint32_t node, const void *buf, size_t len, int connect)
{
    ucp_request_param_t p = {0};
    ucp_ep_h ep;
    ucs_status_ptr_t r;

    if (node == job->node_rank || job->nodes[node].gone != COLL_OK ||
        (!connect && job->nodes[node].ep == NULL) || (ep = coll_job_ep(job, node)) == NULL) {
        return;
    }
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_EAGER;
    r = ucp_am_send_nbx(ep, COLL_AM_CONTROL, NULL, 0, buf, len, &p);
    if (UCS_PTR_IS_PTR(r)) {
        ucp_request_free(r);
    }
}

/* One abort or goodbye per job: its payload lives in job->control_msg. */
static void send_all(coll_job_t *job, uint32_t type, coll_status_t status, const char *text,
                     int connect)
{
    coll_control_msg_t m = {.type = type, .status = (int32_t)status, .node = job->node_rank,
                            .lost = COLL_CTL_NO_NODE, .epoch = job->epoch};
    size_t cap = sizeof(job->control_msg) - sizeof(m);
    size_t n = strlen(text) < cap ? strlen(text) : cap;

    for (uint32_t i = 0; i < job->nnodes && type == COLL_CTL_ABORT; i++) {
        if (job->nodes[i].gone == COLL_ERR_PEER) {
            m.lost = i;
            break;
        }
    }
    memcpy(job->control_msg, &m, sizeof(m));
    memcpy(job->control_msg + sizeof(m), text, n);
    for (uint32_t i = 0; i < job->nnodes; i++) {
        send_to(job, i, job->control_msg, sizeof(m) + n, connect);
    }
}

void coll_control_abort(coll_job_t *job, coll_status_t status, const char *msg)
{
    send_all(job, COLL_CTL_ABORT, status, msg, 1);
}

void coll_control_goodbye(coll_job_t *job)
{
    send_all(job, COLL_CTL_GOODBYE, COLL_OK, job->left, 0);
}

void coll_control_heartbeat(coll_job_t *job, uint32_t node)
{
    _Static_assert(sizeof(coll_control_msg_t) <= sizeof(job->heartbeat_msg), "heartbeat fits");
    coll_control_msg_t m = {.type = COLL_CTL_HEARTBEAT, .node = job->node_rank, .epoch = job->epoch};

    memcpy(job->heartbeat_msg, &m, sizeof(m));
    send_to(job, node, job->heartbeat_msg, sizeof(m), 1);
}

/* A message of its own buffer, freed once UCX is done with it. */
static void owned_sent(void *request, ucs_status_t status, void *user_data)
{
    free(user_data);
}

static void send_owned(coll_job_t *job, uint32_t node, void *buf, size_t len)
{
    ucp_request_param_t p = {0};
    ucs_status_ptr_t r;
    ucp_ep_h ep;

    if (node == job->node_rank || job->nodes[node].gone != COLL_OK ||
        (ep = coll_job_ep(job, node)) == NULL) {
        free(buf);
        return;
    }
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                     UCP_OP_ATTR_FIELD_USER_DATA;
    p.flags = UCP_AM_SEND_FLAG_EAGER;
    p.cb.send = owned_sent;
    p.user_data = buf;
    r = ucp_am_send_nbx(ep, COLL_AM_CONTROL, NULL, 0, buf, len, &p);
    if (UCS_PTR_IS_PTR(r)) {
        ucp_request_free(r); /* owned_sent still runs */
    } else {
        free(buf);
    }
}

/* A blame message: header, key, text. */
static void send_blame(coll_job_t *job, uint32_t node, uint32_t type, uint64_t key,
                       const char *text)
{
    coll_control_msg_t m = {.type = type, .node = job->node_rank, .lost = COLL_CTL_NO_NODE,
                            .epoch = job->epoch};
    size_t n = strlen(text), len = sizeof(m) + sizeof(key) + n;
    char *buf = malloc(len);

    if (buf == NULL) {
        return;
    }
    memcpy(buf, &m, sizeof(m));
    memcpy(buf + sizeof(m), &key, sizeof(key));
    memcpy(buf + sizeof(m) + sizeof(key), text, n);
    send_owned(job, node, buf, len);
}

void coll_control_blame_query(coll_job_t *job, uint64_t key)
{
    for (uint32_t i = 0; i < job->nnodes; i++) {
        send_blame(job, i, COLL_CTL_BLAME_QUERY, key, "");
    }
}

void coll_control_blame(coll_job_t *job, uint32_t node, uint64_t key, const char *text)
{
    send_blame(job, node, COLL_CTL_BLAME, key, text);
}
