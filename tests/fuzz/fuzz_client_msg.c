/*
 * libFuzzer harness: the daemon's decoder of client envelopes, coll_wire_unpack_client(), fed
 * the payload of one frame from a trainer.
 *
 * Invariants: a refusal is COLL_ERR_PROTOCOL or COLL_ERR_VERSION with a reason; an accepted
 * message has the current version and a known body whose fields are within the limits wire.h
 * and collective.proto document (the daemon relies on them without checking again), and it
 * re-validates after packing (fuzz_check_roundtrip()).
 */
#include "fuzz.h"
#include "fuzz_wire.h"


static coll_status_t decode(const uint8_t *buf, size_t len, ProtobufCMessage **m_p, char *err,
                            size_t errlen)
{
    return coll_wire_unpack_client(buf, len, (coll_client_msg_t **)m_p, err, errlen);
}

static void check_join(const Coll__Wire__JoinJob *j)
{
    FUZZ_CHECK(coll_wire_job_id_valid(j->job) && strlen(j->job) <= COLL_JOB_ID_MAX,
               "join: job id '%s' accepted", j->job);
    FUZZ_CHECK(j->world_size >= 1 && j->world_size <= COLL_WORLD_MAX, "join: world size %u",
               j->world_size);
    FUZZ_CHECK(j->rank < j->world_size, "join: rank %u of %u", j->rank, j->world_size);
    FUZZ_CHECK(j->local_size >= 1 && j->local_size <= j->world_size,
               "join: local size %u of world %u", j->local_size, j->world_size);
    FUZZ_CHECK(j->local_rank < j->local_size, "join: local rank %u of %u", j->local_rank,
               j->local_size);
    FUZZ_CHECK(fuzz_cstr_len_below(j->root, 256), "join: root address too long");
    FUZZ_CHECK(fuzz_cstr_len_below(j->token, COLL_JOB_TOKEN_MAX + 1), "join: job token too long");
}

static void check_submit(const Coll__Wire__Submit *s)
{
    size_t es;

    FUZZ_CHECK((unsigned)s->coll <= COLL__WIRE__COLLECTIVE__ALLTOALLV, "submit: collective %d",
               (int)s->coll);
    FUZZ_CHECK(s->dtype < COLL_DTYPE_COUNT && s->op < COLL_REDOP_COUNT && s->algo < COLL_ALGO_COUNT,
               "submit: dtype %u op %u algo %u", s->dtype, s->op, s->algo);
    FUZZ_CHECK(s->root < COLL_WORLD_MAX && s->peer < COLL_WORLD_MAX, "submit: root %u peer %u",
               s->root, s->peer);
    es = coll_dtype_size((coll_dtype_t)s->dtype);
    FUZZ_CHECK(es >= 1 && es <= 16, "submit: dtype %u has %zu-byte elements", s->dtype, es);
    FUZZ_CHECK(s->count <= UINT64_MAX / es, "submit: %llu elements of %zu bytes overflow",
               (unsigned long long)s->count, es);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    coll_client_msg_t *m = NULL;
    char err[256] = "";
    coll_status_t st = coll_wire_unpack_client(data, size, &m, err, sizeof(err));

    if (!fuzz_check_verdict(st, err, sizeof(err), m != NULL, m != NULL ? m->version : 0)) {
        return 0;
    }
    switch (m->body_case) {
    case COLL__WIRE__CLIENT_MSG__BODY_HELLO:
        FUZZ_CHECK(m->hello != NULL && fuzz_cstr_len_below(m->hello->client, 256),
                   "hello: client name");
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_JOIN:
        FUZZ_CHECK(m->join != NULL, "join without a body");
        check_join(m->join);
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_ALLOC:
        FUZZ_CHECK(m->alloc != NULL, "alloc without a body");
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_FREE:
        FUZZ_CHECK(m->free != NULL, "free without a body");
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_SUBMIT:
        FUZZ_CHECK(m->submit != NULL, "submit without a body");
        check_submit(m->submit);
        break;
    default:
        /* A body added after this harness: the decoder must at least have required one. */
        FUZZ_CHECK(m->body_case != COLL__WIRE__CLIENT_MSG__BODY__NOT_SET,
                   "accepted a message without a body");
    }
    fuzz_check_roundtrip(&m->base, decode);
    coll__wire__client_msg__free_unpacked(m, NULL);
    return 0;
}
