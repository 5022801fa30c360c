/**
 * @file fuzz_wire.h
 * @brief Helpers of the envelope harnesses (fuzz_client_msg.c, fuzz_daemon_msg.c,
 *        fuzz_peer_msg.c).
 */
#ifndef COLL_FUZZ_WIRE_H
#define COLL_FUZZ_WIRE_H

#include <collective.h>
#include "proto/wire.h"

/** A decoder under test, with its message type erased. */
typedef coll_status_t (*fuzz_decode_t)(const uint8_t *buf, size_t len, ProtobufCMessage **msg_p,
                                       char *err, size_t errlen);

/**
 * @brief Re-validation: drop the unknown fields of @p m (accepted by @p decode), pack it,
 *        decode the bytes again, and check that the decoder accepts them and that packing the
 *        result gives the same bytes.
 */
void fuzz_check_roundtrip(ProtobufCMessage *m, fuzz_decode_t decode);

/**
 * @brief The verdict every envelope decoder owes: a refusal (@p st not COLL_OK) is
 *        COLL_ERR_PROTOCOL, COLL_ERR_VERSION or COLL_ERR_NOMEM with a terminated reason in
 *        @p err (@p errlen bytes); an accepted message (@p version of it, @p have_msg nonzero)
 *        has the current wire version.
 * @return 1 when the message was accepted (the harness checks its body next), 0 when refused.
 */
int fuzz_check_verdict(coll_status_t st, const char *err, size_t errlen, int have_msg,
                       uint32_t version);

/** @return 1 when @p s is a string shorter than @p limit bytes. */
int fuzz_cstr_len_below(const char *s, size_t limit);

#endif
