/*
 * The leaders' handshake at the join (direct.h): each leader sends a hello to every node it
 * exchanges with in recursive doubling (its fold partner and its round partners; the pairing
 * is symmetric) and waits for theirs. A hello that arrived and a hello sent mean that both
 * endpoints of the pair are connected, so every connection is made while all leaders are
 * alive. UCX 1.13's TCP transport aborts the process (an assertion in tcp_iface.c) when a
 * peer goes away while a connection to it is still being made; without the handshake the
 * first allreduce made the connections, and a leader that ended early (a mismatch failed the
 * job) could take the others down with it.
 */
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "client/direct/direct_impl.h"
#include "proto/tag.h"

/* At most a fold partner and one partner per doubling round (node counts below 2^32). */
enum { MAX_PARTNERS = 33 };

typedef struct {
    uint32_t node[MAX_PARTNERS]; /* partners */
    uint32_t n;
    void *sreq[MAX_PARTNERS];    /* hellos in flight */
    void *rreq[MAX_PARTNERS];    /* receives posted, one per partner, any partner's hello */
    coll_direct_hdr_t in[MAX_PARTNERS];
    coll_direct_hdr_t out;
    uint32_t heard;              /* partners whose hello arrived */
    uint32_t sent;               /* hellos whose send completed */
} hello_t;

static uint64_t hello_tag(void)
{
    return coll_tag_make(0, 0, COLL_TAG_DESC, 0, 0);
}

/* The nodes this one exchanges with in recursive doubling over the job's nodes. */
static void partners(const coll_comm_t *c, hello_t *h)
{
    coll_rd_plan_t pl = coll_rd_plan(c->node_count, c->node_rank);

    if (coll_rd_folds(&pl)) {
        h->node[h->n++] = pl.vrank < 0 ? pl.r + 1 : pl.r - 1;
    }
    for (uint32_t k = 0; pl.vrank >= 0 && (1u << k) < pl.p; k++) {
        h->node[h->n++] = coll_rd_partner(&pl, k);
    }
}

static coll_status_t post_recv(coll_comm_t *c, hello_t *h, uint32_t i)
{
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL};
    void *req = ucp_tag_recv_nbx(c->direct->worker, &h->in[i], sizeof(h->in[i]), hello_tag(),
                                 COLL_TAG_MASK_ALL, &prm);

    if (UCS_PTR_IS_ERR(req)) {
        coll__set_error(c, "rank %d: posting the direct path's hello receive: %s", c->rank,
                        ucs_status_string(UCS_PTR_STATUS(req)));
        return COLL_ERR_TRANSPORT;
    }
    h->rreq[i] = req;
    return COLL_OK;
}

static coll_status_t post(coll_comm_t *c, hello_t *h)
{
    ucp_request_param_t prm = {.op_attr_mask = 0};

    for (uint32_t i = 0; i < h->n; i++) {
        ucs_status_t st;
        ucp_ep_h ep = coll__direct_ep(c, h->node[i], &st);
        void *req = ep != NULL ? ucp_tag_send_nbx(ep, &h->out, sizeof(h->out), hello_tag(), &prm)
                               : UCS_STATUS_PTR(st);
        if (UCS_PTR_IS_ERR(req)) {
            coll__set_error(c, "rank %d: sending the direct path's hello to node %u's leader: "
                            "%s", c->rank, h->node[i], ucs_status_string(UCS_PTR_STATUS(req)));
            return COLL_ERR_TRANSPORT;
        }
        h->sreq[i] = req;
        h->sent += req == NULL;
        if (post_recv(c, h, i) != COLL_OK) {
            return COLL_ERR_TRANSPORT;
        }
    }
    return COLL_OK;
}

/* Whether @p m is a partner's hello with the job's token. */
static int welcome(const hello_t *h, const coll_direct_hdr_t *m, size_t len, uint64_t token)
{
    if (len != sizeof(*m) || m->token != token) {
        return 0;
    }
    for (uint32_t i = 0; i < h->n; i++) {
        if (h->node[i] == m->node) {
            return 1;
        }
    }
    return 0;
}

/* Take the completed requests; a message that is no partner's hello is dropped and its
 * receive posted again. */
static coll_status_t reap(coll_comm_t *c, hello_t *h, uint64_t token)
{
    for (uint32_t i = 0; i < h->n; i++) {
        ucp_tag_recv_info_t info = {0};
        ucs_status_t st;
        if (h->sreq[i] != NULL && (st = ucp_request_check_status(h->sreq[i])) != UCS_INPROGRESS) {
            ucp_request_free(h->sreq[i]);
            h->sreq[i] = NULL;
            if (st != UCS_OK) {
                coll__set_error(c, "rank %d: the direct path's hello to node %u's leader "
                                "failed: %s", c->rank, h->node[i], ucs_status_string(st));
                return COLL_ERR_TRANSPORT;
            }
            h->sent++;
        }
        if (h->rreq[i] == NULL ||
            (st = ucp_tag_recv_request_test(h->rreq[i], &info)) == UCS_INPROGRESS) {
            continue;
        }
        ucp_request_free(h->rreq[i]);
        h->rreq[i] = NULL;
        if (st == UCS_OK && welcome(h, &h->in[i], info.length, token)) {
            h->heard++;
        } else if (post_recv(c, h, i) != COLL_OK) {
            return COLL_ERR_TRANSPORT;
        }
    }
    return COLL_OK;
}

/* Cancel and free what is still in flight (the handshake failed; the worker goes next). A
 * hello still being sent keeps the record until the worker is destroyed. */
static void drop(coll_comm_t *c, hello_t *h)
{
    int sending = 0;

    for (uint32_t i = 0; i < h->n; i++) {
        if (h->rreq[i] != NULL) {
            ucp_request_cancel(c->direct->worker, h->rreq[i]);
            ucp_request_free(h->rreq[i]);
        }
        if (h->sreq[i] != NULL) {
            sending |= ucp_request_check_status(h->sreq[i]) == UCS_INPROGRESS;
            ucp_request_free(h->sreq[i]);
        }
    }
    if (sending) {
        coll__direct_keep(c->direct, h);
    } else {
        free(h);
    }
}

/* The job's failure, its error and message, when the header has it. */
static coll_status_t job_failed(coll_comm_t *c, const coll_shm_hdr_t *hdr)
{
    if (!atomic_load_explicit(&hdr->failed, memory_order_acquire)) {
        return COLL_OK;
    }
    coll__set_error(c, "%.*s", COLL_SHM_MSG_BYTES - 1, hdr->msg);
    return coll_shm_failed_status(hdr, (uint32_t)c->conn->rank);
}

/* A hello UCX failed: a partner leader went away, most likely because the job failed, whose
 * cause (from its daemon, within 1 s) is the one to give. */
static coll_status_t transport_failed(coll_comm_t *c, const coll_shm_hdr_t *hdr)
{
    coll_status_t st = COLL_OK;

    for (int ms = 0; ms < 1000 && (st = job_failed(c, hdr)) == COLL_OK; ms++) {
        poll(NULL, 0, 1);
    }
    return st != COLL_OK ? st : COLL_ERR_TRANSPORT;
}

/* Wait for the handshake: the worker's event fd, 10 ms at a time. A job that fails meanwhile
 * does not end the wait at once: the partners are still making their connections to this
 * leader, and UCX 1.13 aborts a process whose peer goes away in the middle of that (above), so
 * the handshake goes on for up to 1 s more before the job's error is given. */
static coll_status_t wait_all(coll_comm_t *c, hello_t *h, const coll_shm_hdr_t *hdr,
                              uint64_t deadline_ns)
{
    uint64_t failed_ns = 0;

    while (h->sent < h->n || h->heard < h->n) {
        int fd = coll__direct_arm(c);
        uint64_t now;
        if (fd >= 0) {
            poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, 10);
        }
        if (reap(c, h, hdr->direct_token) != COLL_OK) {
            return transport_failed(c, hdr);
        }
        now = coll__now_ns();
        if (failed_ns == 0 && atomic_load_explicit(&hdr->failed, memory_order_acquire)) {
            failed_ns = now;
        }
        if (failed_ns != 0 && now - failed_ns >= 1000000000ull) {
            break;
        }
        if (failed_ns == 0 && now >= deadline_ns) {
            coll__set_error(c, "rank %d: %u of the %u leaders this node exchanges with did not "
                            "answer the direct path's hello in time", c->rank, h->n - h->heard,
                            h->n);
            return COLL_ERR_TIMEDOUT;
        }
    }
    return job_failed(c, hdr);
}

coll_status_t coll__direct_connect(coll_comm_t *c, const coll_shm_hdr_t *hdr, uint64_t timeout_ms)
{
    hello_t *h = calloc(1, sizeof(*h)); /* UCX reads and writes it until the requests end */
    coll_status_t st;

    if (h == NULL) {
        return COLL_ERR_NOMEM;
    }
    h->out = (coll_direct_hdr_t){.token = hdr->direct_token, .node = c->node_rank, .agreed = 1};
    partners(c, h);
    st = post(c, h);
    if (st == COLL_ERR_TRANSPORT) {
        st = transport_failed(c, hdr);
    } else if (st == COLL_OK) {
        st = wait_all(c, h, hdr, coll__now_ns() + timeout_ms * 1000000u);
    }
    if (st != COLL_OK) {
        drop(c, h);
    } else {
        free(h);
    }
    return st;
}
