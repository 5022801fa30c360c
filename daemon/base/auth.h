/**
 * @file auth.h
 * @brief Who may take part: daemons prove to each other that they hold the node secret before
 *        anything else on a control link (mutual HMAC challenge-response), and ranks prove that
 *        they belong to a job with its job token.
 *
 * Peer authentication (libsodium): the key is BLAKE2b of the secret file's contents. The
 * accepting daemon sends a random 32-byte challenge; the connecting one answers
 * HMAC-SHA-256(key, "collectived node" || challenge) with a challenge of its own; the accepting
 * one checks it and answers HMAC-SHA-256(key, "collectived root" || that challenge), which the
 * connecting one checks before it sends anything about its job. A replayed answer fails (fresh
 * challenges), and neither side reveals the key.
 *
 * The secret is on by default: peer_secret_file names /etc/collectived/peer.secret unless set
 * otherwise (`collectived --make-secret` creates it; the systemd unit does so before the first
 * start, collective-launch makes one per run). A daemon without one runs single-node jobs only:
 * it opens no control listener and connects to no peer, unless allow_unauthenticated_peers = 1
 * says that any process reaching its control port may join jobs (coll_peer_mode_t).
 *
 * Job tokens: a job's ranks present a token (COLL_JOB_TOKEN), compared as a keyed BLAKE2b digest
 * (constant time). A job without a token is bound to the uid of its ranks instead: its digest
 * is keyed by the job id over the uid, which no token can produce (job/formation.c).
 */
#ifndef COLL_AUTH_H
#define COLL_AUTH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <collective.h>

/** Bytes of a challenge, a MAC and a token digest. */
#define COLL_AUTH_BYTES 32u

/** The node secret's default file (the key peer_secret_file). */
#define COLL_AUTH_DEFAULT_SECRET "/etc/collectived/peer.secret"

/** How this daemon talks to peer daemons. */
typedef enum {
    COLL_PEERS_OFF,             /**< no secret: no control listener, no link; single-node jobs */
    COLL_PEERS_AUTHENTICATED,   /**< a secret: every control link authenticates first */
    COLL_PEERS_UNAUTHENTICATED, /**< no secret, and allow_unauthenticated_peers = 1 */
} coll_peer_mode_t;

/** The names of coll_peer_mode_t's values, for /status and /metrics ("off", ...). */
#define COLL_PEER_MODE_NAMES {"off", "authenticated", "unauthenticated"}

/** The daemon's peer key and mode. */
typedef struct {
    int enabled;                 /**< mode == COLL_PEERS_AUTHENTICATED */
    coll_peer_mode_t mode;
    uint8_t key[COLL_AUTH_BYTES];
    char why[400];               /**< mode OFF or UNAUTHENTICATED: why there is no secret */
} coll_auth_t;

/**
 * @brief Load the node secret from @p path. The file must hold 16..4096 bytes and must not be
 *        readable by others (mode & 0077 == 0).
 * @param required       1: @p path was configured (file, environment or flag): any failure
 *                       is an error. 0: the default path, which may be missing or unreadable
 *                       (a workstation, a daemon of another user): the daemon then runs
 *                       without a secret (mode OFF or UNAUTHENTICATED, the reason in why).
 *                       "" never loads a secret.
 * @param allow_unauth   allow_unauthenticated_peers: without a secret, mode UNAUTHENTICATED
 *                       instead of OFF.
 * @return COLL_OK; COLL_ERR_INVALID (logged with the path and the reason: unreadable, mode,
 *         size, or libsodium failed to initialise).
 */
coll_status_t coll_auth_load(coll_auth_t *auth, const char *path, int required,
                             int allow_unauth);

/**
 * @brief Create a node secret at @p path (32 random bytes written as 64 hex digits and a newline,
 *        mode 0600) unless one is there already, which is kept; `collectived --make-secret`.
 *        With @p path "" (no secret on purpose) there is nothing to make.
 * @param owner A user to give the file to ("" keeps the caller's): the systemd unit runs this
 *              as root for the daemon's own user.
 * @return COLL_OK (created, one was there, or none is wanted: said on stdout);
 *         COLL_ERR_INVALID (no such user, libsodium failed); COLL_ERR_IO (the file could not be
 *         written; printed on stderr with the reason).
 */
coll_status_t coll_auth_make_secret(const char *path, const char *owner);

/** @brief Fill @p nonce with COLL_AUTH_BYTES random bytes. */
void coll_auth_nonce(uint8_t *nonce);

/** @brief mac = HMAC-SHA-256(key, "collectived " role || nonce). */
void coll_auth_mac(const coll_auth_t *auth, const char *role, const uint8_t *nonce,
                   uint8_t *mac);

/** @return 1 when @p mac answers @p nonce for @p role (constant-time compare), 0 otherwise. */
int coll_auth_check(const coll_auth_t *auth, const char *role, const uint8_t *nonce,
                    const uint8_t *mac, size_t mac_len);

/**
 * @brief The job digest that names one job among those with the id @p job: BLAKE2b-256 keyed by
 *        the job id of @p token; for a job without a token (""), of a NUL byte, "uid" and
 *        @p uid (4 bytes, little endian), which no token (a C string) can equal.
 */
void coll_auth_job_digest(const char *job, const char *token, uid_t uid, uint8_t *digest);

#endif
