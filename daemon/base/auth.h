/**
 * @file auth.h
 * @brief Who may take part: daemons prove to each other that they hold the cluster's shared
 *        secret before a rendezvous (mutual HMAC challenge-response), and ranks prove that they
 *        belong to a job with its job token.
 *
 * Peer authentication (libsodium): the key is BLAKE2b of the secret file's contents. The
 * accepting daemon sends a random 32-byte challenge; the connecting one answers
 * HMAC-SHA-256(key, "collectived node" || challenge) with a challenge of its own; the accepting
 * one checks it and answers HMAC-SHA-256(key, "collectived root" || that challenge), which the
 * connecting one checks before it sends anything about its job. A replayed answer fails (fresh
 * challenges), and neither side reveals the key.
 *
 * Job tokens: a job's token is fixed by its first rank on a node; later ranks must present the
 * same one (compared in constant time), and the nodes must agree at the root (they compare a
 * keyed BLAKE2b digest, never the token itself).
 */
#ifndef COLL_AUTH_H
#define COLL_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

/** Bytes of a challenge, a MAC and a token digest. */
#define COLL_AUTH_BYTES 32u

/** The daemon's peer key; @c enabled is 0 when no secret file is configured. */
typedef struct {
    int enabled;
    uint8_t key[COLL_AUTH_BYTES];
} coll_auth_t;

/**
 * @brief Load the shared secret from @p path ("" disables peer authentication). The file must
 *        hold at least 16 bytes and must not be readable by others (mode & 0077 == 0).
 * @return COLL_OK; COLL_ERR_INVALID (logged with the path and the reason).
 */
coll_status_t coll_auth_load(coll_auth_t *auth, const char *path);

/** @brief Fill @p nonce with COLL_AUTH_BYTES random bytes. */
void coll_auth_nonce(uint8_t *nonce);

/** @brief mac = HMAC-SHA-256(key, "collectived " role || nonce). */
void coll_auth_mac(const coll_auth_t *auth, const char *role, const uint8_t *nonce,
                   uint8_t *mac);

/** @return 1 when @p mac answers @p nonce for @p role (constant-time compare), 0 otherwise. */
int coll_auth_check(const coll_auth_t *auth, const char *role, const uint8_t *nonce,
                    const uint8_t *mac, size_t mac_len);

/** @brief digest = BLAKE2b-256 keyed by the job id of @p token ("" gives the digest of ""). */
void coll_auth_token_digest(const char *job, const char *token, uint8_t *digest);

#endif
