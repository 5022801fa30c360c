/**
 * @file direct.h
 * @brief The messages of a job's direct path: the nodes' leader ranks (local rank 0 of each)
 *        run the inter-node rounds of a small allreduce themselves, over UCX tagged messages
 *        between their own workers (client/direct/), instead of their daemons.
 *
 * Every message is this header, then the sender's partial result (the payload: the
 * operation's count of its dtype). The tag is the daemons' collective tag (proto/tag.h,
 * COLL_TAG_RS, group 0) with the round as its step. A receiver drops a message whose token is
 * not the job's (coll_shm_hdr_t.direct_token) without combining it; it compares the sender's
 * descriptor with its own and ANDs the agreement flags, so that after the last round every
 * leader knows whether every node's descriptor was equal, before any output is written.
 * After the join, each leader sends a hello to each node it exchanges with: this header with
 * the token, its node and a zero descriptor, no payload, tagged COLL_TAG_DESC with key, step
 * and column 0 (client/direct/connect.c).
 * Read in place by processes of one cluster (little-endian, proto/desc.h); the layout is part
 * of the wire protocol (COLL_WIRE_VERSION).
 */
#ifndef COLL_PROTO_DIRECT_H
#define COLL_PROTO_DIRECT_H

#include <stdint.h>

#include "proto/desc.h"

/** The header of a direct message. */
typedef struct {
    uint64_t token;      /**< the job's direct token */
    uint32_t node;       /**< the sender's node rank */
    uint32_t agreed;     /**< 1: every descriptor combined into the sender's partial agreed */
    coll_desc_t desc;    /**< the sender's descriptor of the operation */
    coll_desc_t seen[2]; /**< @c agreed 0: the first two descriptors found to differ */
} coll_direct_hdr_t;

#endif
