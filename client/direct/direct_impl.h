/*
 * What the two files of client/direct/ share: the connection's direct-path state (the worker,
 * the other leaders) and the endpoint to one of them. Not seen outside client/direct/.
 */
#ifndef COLL_CLIENT_DIRECT_DIRECT_IMPL_H
#define COLL_CLIENT_DIRECT_DIRECT_IMPL_H

#include <ucp/api/ucp.h>

#include "client/direct/direct.h"

/* Another node's leader. */
typedef struct {
    void *addr;          /* its worker address (owned) */
    ucp_ep_h ep;         /* created on first use */
    ucs_status_t failed; /* UCS_OK while the endpoint works */
} coll_direct_peer_t;

/* A connection's direct path (coll_comm_t.direct, the world's): the leader's only. */
typedef struct coll_direct {
    ucp_context_h ucp;
    ucp_worker_h worker;
    int efd;                   /* the worker's event fd */
    ucp_address_t *addr;       /* its address, handed to the daemon with the join */
    size_t addr_len;
    coll_direct_peer_t *peers; /* by node rank (this node's unused) */
    uint32_t npeers;
    void **kept;               /* send buffers UCX still read when their operation ended */
    uint32_t nkept;
} coll_direct_t;

/* Keep @p buf, which a send still in flight reads, until the worker is destroyed (dropped
 * when there is no memory to remember it: it then leaks). */
void coll__direct_keep(coll_direct_t *d, void *buf);

/* The endpoint to node @p node's leader, created on first use; NULL with *st_p the reason. */
ucp_ep_h coll__direct_ep(coll_comm_t *c, uint32_t node, ucs_status_t *st_p);

#endif
