/**
 * @file link.h
 * @brief TCP control links between daemons: framed PeerMsg protobufs, the mutual HMAC
 *        handshake (auth.h) before anything else, and connecting by name to every address the
 *        resolver gives, in order.
 *
 * What a link is for belongs to the layer above (the rendezvous, rdv.h): it gives a table of
 * callbacks and an owner, and hears through them that the link is up (connecting side, after
 * authentication), that a message arrived, or that the link went down; the link never calls
 * upward by name. Every callback runs on the loop thread.
 */
#ifndef COLL_LINK_H
#define COLL_LINK_H

#include <netdb.h>

#include "core/daemon.h"
#include "proto/frame.h"
#include "proto/wire.h"

typedef struct coll_peer_link coll_peer_link_t;

/** What the owner of a link wants called. */
typedef struct coll_link_ops {
    /** Connecting side: connected (and authenticated): send the first message. */
    void (*on_up)(coll_peer_link_t *l);
    /** An authenticated message arrived. It is freed after return: a callback that keeps a
     *  part sets that part's pointer in @p m to NULL (and its body_case to NOT_SET). */
    void (*on_msg)(coll_peer_link_t *l, coll_peer_msg_t *m);
    /** The link failed or the peer closed it, @p why in words (a connect error names the last
     *  address tried). Called at most once, and not after coll_link_close(); the link is
     *  closed right after it returns. */
    void (*on_down)(coll_peer_link_t *l, coll_status_t status, const char *why);
} coll_link_ops_t;

/** A control link, either direction. Owned by the loop; freed once closed. */
struct coll_peer_link {
    uv_tcp_t tcp;                  /**< first member */
    uv_timer_t attempt_timer;      /**< bounds one connection attempt */
    coll_daemon_t *d;
    coll_list_t link;              /**< in d->peer_links */
    coll_frame_reader_t reader;
    char peer[256];                /**< remote address, for messages */
    const coll_link_ops_t *ops;
    void *owner;                   /**< the layer above's object (rdv.c) */
    int handles;                   /**< uv handles not yet closed */
    int closing;
    int down;                      /**< on_down was called */
    int auth_state;                /**< where the handshake stands (link.c) */
    uint8_t nonce[32];             /**< the challenge this side sent */
    int resolving;                 /**< a name lookup for this link is pending */
    uv_connect_t connect;
    struct addrinfo *addrs;        /**< connecting: the resolver's answer */
    struct addrinfo *next_addr;    /**< the next address to try */
    char tried[80];                /**< the address being tried, for messages */
};

/**
 * @brief Listen for peer daemons at d->cfg.listen (numeric host:port); fills d->control_addr.
 *        Accepted links get @p ops and no owner until the layer above sets one.
 * @return COLL_OK; COLL_ERR_INVALID (not numeric); COLL_ERR_IO (bind or listen failed); logged.
 */
coll_status_t coll_link_listen(coll_daemon_t *d, const coll_link_ops_t *ops);

/**
 * @brief Connect to @p hostport ("host:port", "[v6]:port"; a name is resolved), trying each
 *        address in the resolver's order, each for at most COLL_LINK_ATTEMPT_MS. The answer
 *        comes through @p ops: on_up, or on_down with the last address's error.
 * @return COLL_OK and the link in @p l_p; COLL_ERR_INVALID (malformed, or an IPv6 address
 *         with a port and no brackets) or COLL_ERR_NOMEM, with a message in @p err.
 */
coll_status_t coll_link_connect(coll_daemon_t *d, const char *hostport, const coll_link_ops_t *ops,
                                void *owner, coll_peer_link_t **l_p, char *err, size_t errlen);

/** @brief Send @p msg (version filled in); a failed write closes the link through on_down. */
void coll_link_send(coll_peer_link_t *l, coll_peer_msg_t *msg);

/** @brief Close @p l (idempotent; no callback follows). */
void coll_link_close(coll_peer_link_t *l);

/** @brief Close the listener and every link (shutdown; no callbacks). */
void coll_link_close_all(coll_daemon_t *d);

/** Longest one connection attempt to one address may take, ms. */
#define COLL_LINK_ATTEMPT_MS 1000

#endif
