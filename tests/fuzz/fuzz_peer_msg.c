/*
 * libFuzzer harness: the daemon's decoder of peer envelopes, coll_wire_unpack_peer(), fed the
 * payload of one frame from another daemon's control link (rendezvous).
 *
 * Invariants: a refusal is COLL_ERR_PROTOCOL or COLL_ERR_VERSION with a reason; an accepted
 * NodeJoin names a valid job, a world size in range and no token digest or a 32-byte one, and
 * either refuses the job (a coll_status_t error and a reason below 1024 bytes) or has a worker
 * address within its limit, no kernel id or a 24-byte one and 1..world_size distinct ranks
 * below the world size; an
 * accepted successful NodeJoinReply has 1..COLL_WORLD_MAX nodes, a node rank among them, nodes
 * whose ranks together are exactly 0..n-1 (the daemon builds rank -> node tables from them) and
 * parameters in range; an accepted Challenge, Auth or AuthOk has nonces and MACs of exactly
 * COLL_WIRE_AUTH_BYTES; every accepted message re-validates after packing.
 */
#include "fuzz.h"
#include "fuzz_wire.h"


static coll_status_t decode(const uint8_t *buf, size_t len, ProtobufCMessage **m_p, char *err,
                            size_t errlen)
{
    return coll_wire_unpack_peer(buf, len, (coll_peer_msg_t **)m_p, err, errlen);
}

/* Check that @p n ranks are distinct and below @p world, with a bitmap. */
static void check_distinct(const uint32_t *ranks, size_t n, uint32_t world, const char *what)
{
    uint8_t *seen = calloc(world / 8 + 1, 1);

    FUZZ_CHECK(seen != NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(ranks[i] < world, "%s: rank %u >= %u", what, ranks[i], world);
        FUZZ_CHECK(!(seen[ranks[i] / 8] & (1u << ranks[i] % 8)), "%s: rank %u appears twice",
                   what, ranks[i]);
        seen[ranks[i] / 8] |= (uint8_t)(1u << ranks[i] % 8);
    }
    free(seen);
}

static void check_node_join(const Coll__Wire__NodeJoin *j)
{
    FUZZ_CHECK(coll_wire_job_id_valid(j->job), "node join: job id '%s'", j->job);
    FUZZ_CHECK(j->world_size >= 1 && j->world_size <= COLL_WORLD_MAX, "node join: world %u",
               j->world_size);
    FUZZ_CHECK(fuzz_cstr_len_below(j->host, 256), "node join: host name");
    FUZZ_CHECK(j->token_digest.len == 0 || j->token_digest.len == COLL_WIRE_AUTH_BYTES,
               "node join: %zu-byte token digest", j->token_digest.len);
    FUZZ_CHECK(j->refusal <= 0 && j->refusal > -2000 && fuzz_cstr_len_below(j->refusal_error, 1024),
               "node join: refusal %d", (int)j->refusal);
    if (j->refusal != 0) {
        return; /* a refusal: nothing else is read */
    }
    FUZZ_CHECK(j->worker_address.len >= 1 && j->worker_address.len <= COLL_WORKER_ADDR_MAX,
               "node join: %zu-byte worker address", j->worker_address.len);
    FUZZ_CHECK(j->kernel_id.len == 0 || j->kernel_id.len == COLL_WIRE_KERNEL_ID_BYTES,
               "node join: %zu-byte kernel id", j->kernel_id.len);
    FUZZ_CHECK(j->n_ranks >= 1 && j->n_ranks <= j->world_size, "node join: %zu ranks of %u",
               j->n_ranks, j->world_size);
    check_distinct(j->ranks, j->n_ranks, j->world_size, "node join");
}

static void check_node_join_reply(const Coll__Wire__NodeJoinReply *r)
{
    uint32_t *all;
    size_t total = 0;

    FUZZ_CHECK(r->error != NULL, "join reply without an error string");
    if (r->status != COLL_OK) {
        return;
    }
    FUZZ_CHECK(r->n_nodes >= 1 && r->n_nodes <= COLL_WORLD_MAX, "join reply: %zu nodes",
               r->n_nodes);
    FUZZ_CHECK(r->node_rank < r->n_nodes, "join reply: node rank %u of %zu", r->node_rank,
               r->n_nodes);
    FUZZ_CHECK(r->params != NULL && r->params->segment_bytes >= 4096 &&
                   r->params->segment_bytes <= (64u << 20) && r->params->pipeline_depth >= 1 &&
                   r->params->pipeline_depth <= 64,
               "join reply: parameters");
    for (size_t i = 0; i < r->n_nodes; i++) {
        const Coll__Wire__NodeInfo *n = r->nodes[i];
        FUZZ_CHECK(n != NULL && n->worker_address.len >= 1 &&
                       n->worker_address.len <= COLL_WORKER_ADDR_MAX && n->host != NULL,
                   "join reply: node %zu", i);
        FUZZ_CHECK(n->n_ranks >= 1 && n->n_ranks <= COLL_WORLD_MAX, "join reply: node %zu has "
                   "%zu ranks", i, n->n_ranks);
        total += n->n_ranks;
        FUZZ_CHECK(total <= COLL_WORLD_MAX, "join reply: more than %u ranks", COLL_WORLD_MAX);
    }
    all = malloc(total * sizeof(*all));
    FUZZ_CHECK(all != NULL, "out of memory");
    for (size_t i = 0, k = 0; i < r->n_nodes; k += r->nodes[i]->n_ranks, i++) {
        memcpy(all + k, r->nodes[i]->ranks, r->nodes[i]->n_ranks * sizeof(*all));
    }
    check_distinct(all, total, (uint32_t)total, "join reply");
    free(all);
}

/* daemon/auth.c compares and copies these fields as COLL_WIRE_AUTH_BYTES bytes. */
static void check_auth(const coll_peer_msg_t *m)
{
    const ProtobufCBinaryData *a, *b = NULL;

    if (m->body_case == COLL__WIRE__PEER_MSG__BODY_CHALLENGE) {
        FUZZ_CHECK(m->challenge != NULL, "challenge without a body");
        a = &m->challenge->nonce;
    } else if (m->body_case == COLL__WIRE__PEER_MSG__BODY_AUTH) {
        FUZZ_CHECK(m->auth != NULL, "auth without a body");
        a = &m->auth->mac;
        b = &m->auth->nonce;
    } else {
        FUZZ_CHECK(m->auth_ok != NULL, "auth ok without a body");
        a = &m->auth_ok->mac;
    }
    FUZZ_CHECK(a->len == COLL_WIRE_AUTH_BYTES && (b == NULL || b->len == COLL_WIRE_AUTH_BYTES),
               "authentication message with a %zu-byte field", a->len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    coll_peer_msg_t *m = NULL;
    char err[256] = "";
    coll_status_t st = coll_wire_unpack_peer(data, size, &m, err, sizeof(err));

    if (!fuzz_check_verdict(st, err, sizeof(err), m != NULL, m != NULL ? m->version : 0)) {
        return 0;
    }
    if (m->body_case == COLL__WIRE__PEER_MSG__BODY_NODE_JOIN) {
        FUZZ_CHECK(m->node_join != NULL, "node join without a body");
        check_node_join(m->node_join);
    } else if (m->body_case == COLL__WIRE__PEER_MSG__BODY_NODE_JOIN_REPLY) {
        FUZZ_CHECK(m->node_join_reply != NULL, "join reply without a body");
        check_node_join_reply(m->node_join_reply);
    } else if (m->body_case == COLL__WIRE__PEER_MSG__BODY_CHALLENGE ||
               m->body_case == COLL__WIRE__PEER_MSG__BODY_AUTH ||
               m->body_case == COLL__WIRE__PEER_MSG__BODY_AUTH_OK) {
        check_auth(m);
    } else {
        /* A body added after this harness: the decoder must at least have required one. */
        FUZZ_CHECK(m->body_case != COLL__WIRE__PEER_MSG__BODY__NOT_SET,
                   "accepted a message without a body");
    }
    fuzz_check_roundtrip(&m->base, decode);
    coll__wire__peer_msg__free_unpacked(m, NULL);
    return 0;
}
