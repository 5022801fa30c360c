/**
 * @file frame.h
 * @brief Length-prefixed frames carrying protobuf envelopes (proto/collective.proto).
 *
 * A frame is a 4-byte little-endian payload length followed by the payload. Readers refuse a
 * frame longer than their maximum before buffering it, so a peer cannot make us allocate more
 * than that. Used by the daemon (libuv streams) and the client library (blocking sockets).
 */
#ifndef COLL_FRAME_H
#define COLL_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>
#include <protobuf-c/protobuf-c.h>

/** Wire protocol version carried in every envelope (2: completions carry algorithm steps;
 *  3: node joins carry the daemon's pid and kernel id, and refusals; 4: compression in
 *  submissions, descriptors and completions, registered layouts; 5: groups (communicator
 *  split), the parameter service's operations, join waits, the local ranks'
 *  shared-memory area after the control blocks, node submissions; 6: node-reduced
 *  allreduces, the reduced node submission and the posts' node buffers; 7: their inter-node
 *  steps in the shared-memory area; 8: one submission record (proto/submission.h) in the
 *  control blocks' rings and the posts, with the pool of its buffers, also in Submit; device
 *  pools: allocations and frees of a memory kind and device, replies with the chunks' fds; 9:
 *  all-to-all with a count table in the pool, the job parameters' algorithm choice (the root's
 *  crossovers) and NCCL decision, the nodes' NCCL offers). */
#define COLL_WIRE_VERSION 10u
/** Bytes of the frame header (payload length). */
#define COLL_FRAME_HDR 4u
/** Largest frame on a client link. */
#define COLL_FRAME_MAX_CLIENT (64u * 1024u)
/** Largest frame on a daemon control link (a job table of many nodes). */
#define COLL_FRAME_MAX_PEER (16u * 1024u * 1024u)
/** Most file descriptors one frame to a client carries (SCM_RIGHTS): the chunks of a device
 *  pool a rank has not mapped yet (MemAllocReply), so also the most chunks a device pool has. */
#define COLL_FRAME_MAX_FDS 128u

/**
 * Incremental frame reassembly. Not thread-safe; one per link.
 * Usage: coll_frame_reader_space() gives room to read into, coll_frame_reader_commit() records
 * what was read, coll_frame_reader_next() returns complete frames one at a time.
 */
typedef struct {
    uint8_t *buf;     /**< owned */
    size_t cap;       /**< bytes allocated */
    size_t start;     /**< first unconsumed byte */
    size_t end;       /**< one past the last byte read */
    size_t max_frame; /**< largest accepted payload in bytes */
} coll_frame_reader_t;

/**
 * @brief Initialise a reader accepting payloads up to @p max_frame bytes.
 * @return COLL_OK or COLL_ERR_NOMEM.
 */
coll_status_t coll_frame_reader_init(coll_frame_reader_t *r, size_t max_frame);

/** @brief Free the reader's buffer. Safe on a zeroed or already cleaned reader. */
void coll_frame_reader_cleanup(coll_frame_reader_t *r);

/**
 * @brief Free space to read into, at least @p want bytes when possible.
 * @param [out] ptr_p Where to write; valid until the next call on @p r.
 * @param [out] len_p Bytes available there (> 0 on COLL_OK).
 * @return COLL_OK or COLL_ERR_NOMEM.
 */
coll_status_t coll_frame_reader_space(coll_frame_reader_t *r, size_t want, uint8_t **ptr_p,
                                      size_t *len_p);

/** @brief Record that @p n bytes were written at the pointer from coll_frame_reader_space(). */
void coll_frame_reader_commit(coll_frame_reader_t *r, size_t n);

/**
 * @brief Take the next complete frame.
 * @param [out] payload_p Payload; valid until the next call on @p r.
 * @param [out] len_p     Payload length in bytes.
 * @return COLL_OK with a frame; COLL_INPROGRESS when more bytes are needed;
 *         COLL_ERR_PROTOCOL when the announced length exceeds the maximum.
 */
coll_status_t coll_frame_reader_next(coll_frame_reader_t *r, const uint8_t **payload_p,
                                     size_t *len_p);

/**
 * @brief Serialise @p msg into a new frame (header + payload).
 * @param [out] frame_p Frame, malloc'ed; the caller frees it.
 * @param [out] len_p   Frame length in bytes including the header.
 * @return COLL_OK or COLL_ERR_NOMEM.
 */
coll_status_t coll_frame_pack(const ProtobufCMessage *msg, uint8_t **frame_p, size_t *len_p);

#endif
