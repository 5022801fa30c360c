/*
 * Node side of a refusal (net/rdv.h, coll_rdv_refuse()): a node that refuses a job (its pool
 * budget, no memory for the pool) connects to the job's root and sends a NodeJoin that carries
 * the refusal, so that the root fails the rendezvous on every node at once with this node's
 * reason; fire and forget.
 */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "net/link.h"
#include "net/rdv.h"

/* What a refusing node tells the root (coll_rdv_refuse()). */
typedef struct {
    char job[COLL_JOB_ID_MAX + 1];
    uint32_t world_size;
    uint32_t timeout_ms;
    int32_t status;
    char error[512];
    uint8_t token_digest[COLL_AUTH_BYTES];
} rdv_refusal_t;

static void refusal_on_up(coll_peer_link_t *l)
{
    rdv_refusal_t *r = l->owner;
    Coll__Wire__PeerMsg out = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__NodeJoin j = COLL__WIRE__NODE_JOIN__INIT;

    j.job = r->job;
    j.world_size = r->world_size;
    j.timeout_ms = r->timeout_ms;
    j.host = l->d->hostname;
    j.refusal = r->status;
    j.refusal_error = r->error;
    j.token_digest = (ProtobufCBinaryData){sizeof(r->token_digest), r->token_digest};
    out.body_case = COLL__WIRE__PEER_MSG__BODY_NODE_JOIN;
    out.node_join = &j;
    coll_link_send(l, &out);
}

/* The root's answer: the refusal reached it. */
static void refusal_on_msg(coll_peer_link_t *l, coll_peer_msg_t *m)
{
    rdv_refusal_t *r = l->owner;

    coll_debug(COLL_SUB_RDV, "root %s knows that job %s is refused here", l->peer, r->job);
    free(r);
    l->owner = NULL;
    coll_link_close(l);
}

static void refusal_on_down(coll_peer_link_t *l, coll_status_t st, const char *why)
{
    rdv_refusal_t *r = l->owner;

    coll_warn(COLL_SUB_RDV, "could not tell root %s that job %s is refused here: %s", l->peer,
              r->job, why);
    free(r);
}

static const coll_link_hooks_t refusal_hooks = {refusal_on_up, refusal_on_msg, refusal_on_down};

void coll_rdv_refuse(coll_daemon_t *d, const Coll__Wire__JoinJob *j, const uint8_t *digest,
                     coll_status_t status, const char *why)
{
    rdv_refusal_t *r;
    coll_peer_link_t *l;
    char err[320];

    if (d->auth.mode == COLL_PEERS_OFF || (r = calloc(1, sizeof(*r))) == NULL) {
        return;
    }
    snprintf(r->job, sizeof(r->job), "%s", j->job);
    r->world_size = j->world_size;
    r->timeout_ms = j->timeout_ms;
    r->status = status;
    snprintf(r->error, sizeof(r->error), "%s", why);
    memcpy(r->token_digest, digest, sizeof(r->token_digest));
    if (coll_link_connect(d, j->root, &refusal_hooks, r, &l, err, sizeof(err)) != COLL_OK) {
        coll_warn(COLL_SUB_RDV, "could not tell root %s that job %s is refused here: %s", j->root,
                  j->job, err);
        free(r);
    }
}
