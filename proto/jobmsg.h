/**
 * @file jobmsg.h
 * @brief Job messages between the daemons of a job (daemon/net/control.c sends and receives
 *        them): abort (a failure every node must hear), goodbye (a node ended its part
 *        cleanly), heartbeat (a node is alive), blame query and blame (who has not submitted a
 *        stalled operation). UCX active messages on the job's worker, little-endian, tagged with
 *        the job's epoch: a message of another incarnation of the job is dropped.
 */
#ifndef COLL_PROTO_JOBMSG_H
#define COLL_PROTO_JOBMSG_H

#include <stddef.h>
#include <stdint.h>

/** Active-message id of job control messages. */
#define COLL_AM_JOBMSG 1u

/** Kinds of control message. A blame query carries an operation (8 bytes,
 *  coll_jobmsg_op_ident()) after the header; a blame, the operation and then the text naming
 *  the sender's ranks that have not submitted it (daemon/job/blame.h). */
enum {
    COLL_JOBMSG_ABORT = 1,
    COLL_JOBMSG_GOODBYE = 2,
    COLL_JOBMSG_HEARTBEAT = 3,
    COLL_JOBMSG_BLAME_QUERY = 4,
    COLL_JOBMSG_BLAME = 5,
};

/** Key bits of an operation's name in blame messages (coll_jobmsg_op_ident()). */
#define COLL_JOBMSG_IDENT_KEY_BITS 52

/** @return How a blame query or blame names the collective @p key of group @p group (0: the
 *          world): the group above the key's low 52 bits. */
static inline uint64_t coll_jobmsg_op_ident(uint32_t group, uint64_t key)
{
    return (uint64_t)group << COLL_JOBMSG_IDENT_KEY_BITS |
           (key & ((1ull << COLL_JOBMSG_IDENT_KEY_BITS) - 1));
}

/** "No node" in coll_jobmsg_t.lost. */
#define COLL_JOBMSG_NO_NODE UINT32_MAX

/** Fixed header of a control message (little-endian, as the data path); an abort's or a
 *  goodbye's text follows it. */
typedef struct {
    uint32_t type;   /**< COLL_JOBMSG_* */
    int32_t status;  /**< abort: the failure, a coll_status_t */
    uint32_t node;   /**< sender's node rank */
    uint32_t lost;   /**< abort: a node the sender found lost; COLL_JOBMSG_NO_NODE when none */
    uint64_t epoch;  /**< the job incarnation it belongs to */
} coll_jobmsg_t;

/**
 * @brief Decode one control message of @p len bytes at @p data, untrusted, for a job of
 *        @p nnodes nodes and epoch @p epoch.
 * @param [out] m     The header, when accepted.
 * @param [out] text  An abort's, goodbye's or blame's text (not terminated) and its length, at
 *                    most @p text_max bytes (longer text is cut); empty for other kinds.
 * @param [out] key   A blame query's or blame's operation key (0 for other kinds).
 * @return 1 when the message is for this job and well formed: a known type, a sender node below
 *         @p nnodes, an abort status that is a coll_status_t error (else COLL_ERR_JOB), a lost
 *         node below @p nnodes or COLL_JOBMSG_NO_NODE (else COLL_JOBMSG_NO_NODE); 0 for a short
 *         message, another epoch, an unknown type or sender (to be dropped).
 */
int coll_jobmsg_decode(const void *data, size_t len, uint32_t nnodes, uint64_t epoch,
                        coll_jobmsg_t *m, uint64_t *key, const char **text,
                        size_t *text_len, size_t text_max);

#endif
