/*
 * libFuzzer harness: the client library's decoder of daemon envelopes,
 * coll_wire_unpack_daemon(), fed the payload of one frame from the daemon.
 *
 * Invariants: a refusal is COLL_ERR_PROTOCOL or COLL_ERR_VERSION with a reason; an accepted
 * message has the current version and one known, present body (the library dispatches on it
 * without looking further), its strings are terminated, and it re-validates after packing.
 */
#include "fuzz.h"
#include "fuzz_wire.h"


static coll_status_t decode(const uint8_t *buf, size_t len, ProtobufCMessage **m_p, char *err,
                            size_t errlen)
{
    return coll_wire_unpack_daemon(buf, len, (coll_daemon_msg_t **)m_p, err, errlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    coll_daemon_msg_t *m = NULL;
    char err[256] = "";
    coll_status_t st = coll_wire_unpack_daemon(data, size, &m, err, sizeof(err));

    if (!fuzz_check_verdict(st, err, sizeof(err), m != NULL, m != NULL ? m->version : 0)) {
        return 0;
    }
    switch (m->body_case) {
    case COLL__WIRE__DAEMON_MSG__BODY_HELLO:
        FUZZ_CHECK(m->hello != NULL && m->hello->daemon != NULL, "hello reply");
        break;
    case COLL__WIRE__DAEMON_MSG__BODY_JOIN:
        FUZZ_CHECK(m->join != NULL && m->join->error != NULL, "join reply");
        break;
    case COLL__WIRE__DAEMON_MSG__BODY_ALLOC:
        FUZZ_CHECK(m->alloc != NULL && m->alloc->error != NULL, "alloc reply");
        break;
    case COLL__WIRE__DAEMON_MSG__BODY_COMPLETE:
        FUZZ_CHECK(m->complete != NULL && m->complete->error != NULL &&
                       m->complete->algo != NULL, "complete");
        /* The library copies these into fixed buffers; they must at least be terminated. */
        (void)strlen(m->complete->error);
        (void)strlen(m->complete->algo);
        break;
    default:
        /* A body added after this harness: the decoder must at least have required one. */
        FUZZ_CHECK(m->body_case != COLL__WIRE__DAEMON_MSG__BODY__NOT_SET,
                   "accepted a message without a body");
    }
    fuzz_check_roundtrip(&m->base, decode);
    coll__wire__daemon_msg__free_unpacked(m, NULL);
    return 0;
}
