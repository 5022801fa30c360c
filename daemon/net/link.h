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
 *
 * What a link may cost before it is authenticated (daemon.h's configuration):
 *  - the accepting side takes connections through an acceptor (accept.h): at most
 *    peer_max_connections open, peer_max_per_address from one address, fd_reserve descriptors
 *    left for local jobs;
 *  - before authentication a link may send peer_handshake_bytes in all, in frames no larger,
 *    and only the three handshake messages (Challenge, Auth, AuthOk); it must authenticate
 *    within peer_handshake_ms. Nothing else it sent reaches the layer above, UCX or a parser
 *    other than the handshake's;
 *  - afterwards an accepted link carries frames of at most COLL_LINK_ACCEPTED_FRAME_MAX (a
 *    NodeJoin), and is closed after peer_idle_ms without a message unless the layer above owns
 *    it (a node waiting in a rendezvous); a connecting link takes the root's answer, up to
 *    COLL_FRAME_MAX_PEER.
 * Without a node secret (allow_unauthenticated_peers) there is no handshake: an accepted link's
 * first message, a NodeJoin of at most COLL_LINK_ACCEPTED_FRAME_MAX, must come within
 * peer_handshake_ms. Each refusal is logged and counted (coll_refusal_note()).
 */
#ifndef COLL_LINK_H
#define COLL_LINK_H

#include <netdb.h>

#include "core/daemon.h"
#include "proto/frame.h"
#include "proto/wire.h"

typedef struct coll_peer_link coll_peer_link_t;

/** What the owner of a link wants called. */
typedef struct coll_link_hooks {
    /** Connecting side: connected (and authenticated): send the first message. */
    void (*on_up)(coll_peer_link_t *l);
    /** An authenticated message arrived. It is freed after return: a callback that keeps a
     *  part sets that part's pointer in @p m to NULL (and its body_case to NOT_SET). */
    void (*on_msg)(coll_peer_link_t *l, coll_peer_msg_t *m);
    /** The link failed or the peer closed it, @p why in words (a connect error names the last
     *  address tried). Called at most once, and not after coll_link_close(); the link is
     *  closed right after it returns. */
    void (*on_down)(coll_peer_link_t *l, coll_status_t status, const char *why);
} coll_link_hooks_t;

/** A control link, either direction. Owned by the loop; freed once closed. */
struct coll_peer_link {
    uv_tcp_t tcp;                  /**< first member */
    uv_timer_t timer;              /**< bounds a connection attempt, the handshake, idleness */
    coll_daemon_t *d;
    coll_list_t link;              /**< in d->peer_links */
    coll_frame_reader_t reader;
    char peer[256];                /**< remote address, for messages */
    const coll_link_hooks_t *hooks;
    void *owner;                   /**< the layer above's object (rdv.c) */
    int handles;                   /**< uv handles not yet closed */
    int closing;
    int down;                      /**< on_down was called */
    int accepted;                  /**< from the control listener */
    struct coll_acceptor *acceptor; /**< accepted: whose place it holds (accept.h) */
    int auth_state;                /**< where the handshake stands (link.c) */
    int trusted;                   /**< authenticated (no secret: its first message came) */
    size_t unauth_bytes;           /**< read before authentication */
    uint8_t nonce[32];             /**< the challenge this side sent */
    int resolving;                 /**< a name lookup for this link is pending */
    int transient;                 /**< an attempt failed in a way that may pass (retry) */
    uv_connect_t connect;
    struct sockaddr_storage addr;  /**< accepted: the remote address */
    struct addrinfo *addrs;        /**< connecting: the resolver's answer */
    struct addrinfo *next_addr;    /**< the next address to try */
    char tried[80];                /**< the address being tried, for messages */
};

/** Largest frame an accepted link carries once authenticated: a NodeJoin (a worker address of
 *  up to COLL_WORKER_ADDR_MAX and the rest). */
#define COLL_LINK_ACCEPTED_FRAME_MAX (COLL_WORKER_ADDR_MAX + 16u * 1024u)

/**
 * @brief Listen for peer daemons at d->cfg.listen (numeric host:port); fills d->control_addr.
 *        Accepted links get @p hooks and no owner until the layer above sets one.
 * @return COLL_OK; COLL_ERR_INVALID (not numeric); COLL_ERR_IO (bind or listen failed); logged.
 */
coll_status_t coll_link_listen(coll_daemon_t *d, const coll_link_hooks_t *hooks);

/**
 * @brief Connect to @p hostport ("host:port", "[v6]:port"; a name is resolved), trying each
 *        address in the resolver's order, each for at most COLL_LINK_ATTEMPT_MS. The answer
 *        comes through @p hooks: on_up, or on_down with the last address's error: status
 *        COLL_ERR_CONNREFUSED when one may pass (refused, timed out: the root may not be up
 *        yet), COLL_ERR_RENDEZVOUS when none can (every address unreachable from this host,
 *        e.g. an IPv6 address where IPv6 is off: EADDRNOTAVAIL, ENETUNREACH, EAFNOSUPPORT).
 * @return COLL_OK and the link in @p l_p; COLL_ERR_INVALID (malformed, or an IPv6 address
 *         with a port and no brackets) or COLL_ERR_NOMEM, with a message in @p err.
 */
coll_status_t coll_link_connect(coll_daemon_t *d, const char *hostport,
                                const coll_link_hooks_t *hooks, void *owner,
                                coll_peer_link_t **l_p, char *err, size_t errlen);

/** @brief Send @p msg (version filled in); a failed write closes the link through on_down. */
void coll_link_send(coll_peer_link_t *l, coll_peer_msg_t *msg);

/** @brief Close @p l (idempotent; no callback follows). */
void coll_link_close(coll_peer_link_t *l);

/** @brief Close the listener and every link (shutdown; no callbacks). */
void coll_link_close_all(coll_daemon_t *d);

/** Longest one connection attempt to one address may take, ms. */
#define COLL_LINK_ATTEMPT_MS 1000

#endif
