/*
 * Random and mutated inputs for every decoder (proto/wire.h): whatever a decoder accepts must
 * satisfy what it promises (wire_msgs.h builds the valid seeds).
 */
#include "wire_msgs.h"

/* ---- fuzzing: every accepted message must satisfy what the decoders promise ---- */

static uint64_t rng_state;

static uint64_t rng(void)
{
    /* xorshift64*: deterministic for a fixed seed. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}

static int job_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > COLL_JOB_ID_MAX) {
        return 0;
    }
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") == n;
}

static void check_client(const coll_client_msg_t *m)
{
    assert_int_equal(m->version, COLL_WIRE_VERSION);
    switch (m->body_case) {
    case COLL__WIRE__CLIENT_MSG__BODY_HELLO:
        assert_true(strlen(m->hello->client) < 256);
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_JOIN:
        assert_true(job_ok(m->join->job));
        assert_true(m->join->world_size >= 1 && m->join->world_size <= COLL_WORLD_MAX);
        assert_true(m->join->rank < m->join->world_size);
        assert_true(m->join->local_size >= 1 && m->join->local_size <= m->join->world_size);
        assert_true(m->join->local_rank < m->join->local_size);
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_SUBMIT:
        assert_true((unsigned)m->submit->coll <= COLL__WIRE__COLLECTIVE__ALLTOALLV);
        assert_true(m->submit->dtype < COLL_DTYPE_COUNT);
        assert_true(m->submit->op < COLL_REDOP_COUNT);
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_ALLOC:
    case COLL__WIRE__CLIENT_MSG__BODY_FREE:
        assert_non_null(m->alloc);
        break;
    default:
        fail_msg("accepted client message with body %d", (int)m->body_case);
    }
}

static void check_peer(const coll_peer_msg_t *m)
{
    assert_int_equal(m->version, COLL_WIRE_VERSION);
    if (m->body_case == COLL__WIRE__PEER_MSG__BODY_NODE_JOIN) {
        const Coll__Wire__NodeJoin *j = m->node_join;
        assert_true(job_ok(j->job));
        assert_true(j->world_size >= 1 && j->world_size <= COLL_WORLD_MAX);
        assert_true(j->n_ranks >= 1 && j->n_ranks <= j->world_size);
        for (size_t i = 0; i < j->n_ranks; i++) {
            assert_true(j->ranks[i] < j->world_size);
        }
        assert_true(j->worker_address.len >= 1 && j->worker_address.len <= COLL_WORKER_ADDR_MAX);
    } else if (m->body_case == COLL__WIRE__PEER_MSG__BODY_NODE_JOIN_REPLY) {
        const Coll__Wire__NodeJoinReply *r = m->node_join_reply;
        if (r->status == COLL_OK) {
            assert_true(r->node_rank < r->n_nodes);
            for (size_t i = 0; i < r->n_nodes; i++) {
                assert_true(r->nodes[i]->worker_address.len >= 1);
                assert_true(r->nodes[i]->n_ranks >= 1);
            }
        }
    } else {
        fail_msg("accepted peer message with body %d", (int)m->body_case);
    }
}

/* Decoders that accepted / rejected a fuzz input, to show both paths ran. */
static unsigned fuzz_accepted, fuzz_rejected;

/* Decode @p buf with every decoder; check the status set, the error text and the invariants. */
static void fuzz_one(const uint8_t *buf, size_t len)
{
    coll_client_msg_t *c;
    coll_daemon_msg_t *d;
    coll_peer_msg_t *p;
    char err[ERRLEN];
    coll_status_t st;

#define FUZZ_STATUS(st)                                                                            \
    do {                                                                                           \
        fuzz_accepted += (st) == COLL_OK;                                                          \
        fuzz_rejected += (st) != COLL_OK;                                                          \
        if ((st) != COLL_OK) {                                                                     \
            assert_true((st) == COLL_ERR_PROTOCOL || (st) == COLL_ERR_VERSION);                    \
            assert_true(err[0] != '\0' && strlen(err) < sizeof(err));                              \
        }                                                                                          \
    } while (0)

    err[0] = '\0';
    st = coll_wire_unpack_client(buf, len, &c, err, sizeof(err));
    FUZZ_STATUS(st);
    if (st == COLL_OK) {
        check_client(c);
        coll__wire__client_msg__free_unpacked(c, NULL);
    }
    err[0] = '\0';
    st = coll_wire_unpack_daemon(buf, len, &d, err, sizeof(err));
    FUZZ_STATUS(st);
    if (st == COLL_OK) {
        assert_int_equal(d->version, COLL_WIRE_VERSION);
        assert_int_not_equal(d->body_case, COLL__WIRE__DAEMON_MSG__BODY__NOT_SET);
        coll__wire__daemon_msg__free_unpacked(d, NULL);
    }
    err[0] = '\0';
    st = coll_wire_unpack_peer(buf, len, &p, err, sizeof(err));
    FUZZ_STATUS(st);
    if (st == COLL_OK) {
        check_peer(p);
        coll__wire__peer_msg__free_unpacked(p, NULL);
    }
#undef FUZZ_STATUS
}

static void test_fuzz_random_bytes(void **state)
{
    uint8_t buf[96];

    rng_state = 0x9e3779b97f4a7c15ULL;
    fuzz_accepted = fuzz_rejected = 0;
    for (int round = 0; round < FUZZ_ROUNDS; round++) {
        size_t len = rng() % sizeof(buf);
        for (size_t i = 0; i < len; i++) {
            buf[i] = (uint8_t)rng();
        }
        /* Half of them start like a version-1 envelope so the bodies get exercised too. */
        if (len >= 2 && round % 2 == 0) {
            buf[0] = 0x08;
            buf[1] = COLL_WIRE_VERSION;
        }
        fuzz_one(buf, len);
    }
    print_message("random bytes: %u accepted, %u rejected\n", fuzz_accepted, fuzz_rejected);
    assert_true(fuzz_rejected > 0);
}

#define NSEEDS 9

static void mutate(uint8_t *buf, size_t *len, size_t cap)
{
    size_t pos = *len ? rng() % *len : 0;
    switch (rng() % 5) {
    case 0: /* flip a bit */
        if (*len) {
            buf[pos] ^= (uint8_t)(1u << (rng() % 8));
        }
        break;
    case 1: /* overwrite with a random or boundary byte */
        if (*len) {
            static const uint8_t special[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
            buf[pos] = rng() % 2 ? (uint8_t)rng() : special[rng() % sizeof(special)];
        }
        break;
    case 2: /* truncate */
        *len = pos;
        break;
    case 3: /* insert a byte */
        if (*len < cap) {
            memmove(buf + pos + 1, buf + pos, *len - pos);
            buf[pos] = (uint8_t)rng();
            (*len)++;
        }
        break;
    default: /* delete a byte */
        if (*len) {
            memmove(buf + pos, buf + pos + 1, *len - pos - 1);
            (*len)--;
        }
    }
}

static void test_fuzz_mutated_valid_encodings(void **state)
{
    client_t c;
    daemon_t d;
    peer_t p;
    enc_t seeds[NSEEDS];
    uint8_t buf[1024];

    client_init(&c);
    daemon_init(&d);
    peer_init(&p);
    seeds[0] = encode(client_hello(&c));
    seeds[1] = encode(client_join(&c));
    seeds[2] = encode(client_alloc(&c));
    seeds[3] = encode(client_submit(&c));
    seeds[4] = encode(daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_JOIN));
    seeds[5] = encode(daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_COMPLETE));
    seeds[6] = encode(peer_join(&p));
    seeds[7] = encode(peer_reply(&p));
    seeds[8] = encode(client_free(&c));
    rng_state = 0x243f6a8885a308d3ULL;
    fuzz_accepted = fuzz_rejected = 0;
    for (int round = 0; round < FUZZ_ROUNDS; round++) {
        const enc_t *s = &seeds[round % NSEEDS];
        size_t len = s->len;
        assert_true(len <= sizeof(buf));
        memcpy(buf, s->buf, len);
        for (int m = 1 + (int)(rng() % 4); m > 0; m--) {
            mutate(buf, &len, sizeof(buf));
        }
        fuzz_one(buf, len);
    }
    print_message("mutations: %u accepted, %u rejected\n", fuzz_accepted, fuzz_rejected);
    /* Both paths must have run, or the invariant checks above checked nothing. */
    assert_true(fuzz_accepted > FUZZ_ROUNDS / 20);
    assert_true(fuzz_rejected > FUZZ_ROUNDS / 20);
    for (int i = 0; i < NSEEDS; i++) {
        free(seeds[i].buf);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_random_bytes),
        cmocka_unit_test(test_fuzz_mutated_valid_encodings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
