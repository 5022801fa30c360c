/**
 * @file wire.h
 * @brief Decoding and validation of wire envelopes (proto/collective.proto).
 *
 * Every decoder checks the version and the fields that make sense on their own (ranges, string
 * lengths, known enum values) so the code behind it can trust them. Offsets into a pool are
 * checked by the daemon, which knows the pool.
 */
#ifndef COLL_WIRE_H
#define COLL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>
#include "proto/collective.pb-c.h"
#include "proto/submission.h"

/** Longest job id in bytes. */
#define COLL_JOB_ID_MAX 128u
/** Largest world size the protocol accepts. */
#define COLL_WORLD_MAX (1u << 20)
/** Longest job token in bytes. */
#define COLL_JOB_TOKEN_MAX 256u
/** Shortest and longest job timeout a join may ask for, ms (JoinJob.timeout_ms; 0 asks for the
 *  daemon's own, whose key has the same bounds). */
#define COLL_TIMEOUT_MIN_MS 100u
#define COLL_TIMEOUT_MAX_MS 86400000u
/** Longest text of a JoinWait note, an abort reason or a refusal, bytes. */
#define COLL_WIRE_TEXT_MAX 1023u
/** Bytes of a challenge, a MAC and a token digest on the wire. */
#define COLL_WIRE_AUTH_BYTES 32u
/** Largest UCX worker address accepted from a peer. */
#define COLL_WORKER_ADDR_MAX (64u * 1024u)
/** Largest sum of the nodes' leader addresses a job's direct path hands each leader in its
 *  join reply (below a client frame's maximum); a job whose leaders' addresses exceed it runs
 *  without the direct path. */
#define COLL_DIRECT_ADDRS_MAX (48u * 1024u)
/** Bytes of a daemon's kernel identity (NodeJoin.kernel_id): boot id (16) and the inode of its
 *  pid namespace (8); two daemons with the same one share a kernel and process ids. */
#define COLL_WIRE_KERNEL_ID_BYTES 24u

typedef Coll__Wire__ClientMsg coll_client_msg_t;
typedef Coll__Wire__DaemonMsg coll_daemon_msg_t;
typedef Coll__Wire__PeerMsg coll_peer_msg_t;

/**
 * @brief Decode and validate a client envelope.
 * @param [out] msg_p Message; free with coll__wire__client_msg__free_unpacked(msg, NULL).
 * @param [out] err   Reason on failure (NUL-terminated, at most @p errlen bytes).
 * @return COLL_OK; COLL_ERR_PROTOCOL (undecodable or invalid field); COLL_ERR_VERSION;
 *         COLL_ERR_NOMEM (no memory to check a rank list: peer envelopes only).
 */
coll_status_t coll_wire_unpack_client(const uint8_t *buf, size_t len, coll_client_msg_t **msg_p,
                                      char *err, size_t errlen);

/** @brief As coll_wire_unpack_client() for daemon-to-client envelopes. */
coll_status_t coll_wire_unpack_daemon(const uint8_t *buf, size_t len, coll_daemon_msg_t **msg_p,
                                      char *err, size_t errlen);

/**
 * @brief As coll_wire_unpack_client() for daemon-to-daemon envelopes. The ranks of a NodeJoin
 *        are distinct and below its world size; those of a successful NodeJoinReply are, over
 *        all its nodes, exactly 0..n-1 (the receiver still checks n against its world size).
 */
coll_status_t coll_wire_unpack_peer(const uint8_t *buf, size_t len, coll_peer_msg_t **msg_p,
                                    char *err, size_t errlen);

/**
 * @brief Validate the fields of a submission record on their own (collective, dtype, op,
 *        algorithm, memory kind, flags, ranges, compression), wherever it came from: a Submit
 *        on the socket (coll_wire_unpack_client() checks its record so), a control block's
 *        ring, a post of the shared-memory area.
 * @return COLL_OK or COLL_ERR_PROTOCOL with the reason in @p err.
 */
coll_status_t coll_wire_check_submission(const coll_submission_t *s, char *err, size_t errlen);

/**
 * @brief Check that a job id is 1..COLL_JOB_ID_MAX bytes of [A-Za-z0-9._:-].
 * @return 1 when valid, 0 otherwise.
 */
int coll_wire_job_id_valid(const char *job);

#endif
