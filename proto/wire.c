#include "proto/wire.h"

#include "proto/frame.h"
#include "proto/ctl.h"
#include "proto/tag.h"
#include "proto/cspec.h"
#include "kernels/mem_kind.h"
#include "common/compression.h"
#include "device/dev.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static coll_status_t fail(char *err, size_t errlen, coll_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return st;
}

int coll_wire_job_id_valid(const char *job)
{
    size_t n = strlen(job);
    if (n == 0 || n > COLL_JOB_ID_MAX) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = job[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok) {
            return 0;
        }
    }
    return 1;
}

#define CHECK_FIELD(cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            return fail(err, errlen, COLL_ERR_PROTOCOL, __VA_ARGS__);                              \
        }                                                                                          \
    } while (0)

static coll_status_t check_join(const Coll__Wire__JoinJob *j, char *err, size_t errlen)
{
    CHECK_FIELD(coll_wire_job_id_valid(j->job), "join: invalid job id");
    CHECK_FIELD(j->world_size >= 1 && j->world_size <= COLL_WORLD_MAX,
                "join: world size %u out of range", j->world_size);
    CHECK_FIELD(j->rank < j->world_size, "join: rank %u >= world size %u", j->rank,
                j->world_size);
    CHECK_FIELD(j->local_size >= 1 && j->local_size <= j->world_size,
                "join: local size %u not in 1..world size %u", j->local_size, j->world_size);
    CHECK_FIELD(j->local_rank < j->local_size, "join: local rank %u >= local size %u",
                j->local_rank, j->local_size);
    CHECK_FIELD(j->timeout_ms == 0 ||
                    (j->timeout_ms >= COLL_TIMEOUT_MIN_MS && j->timeout_ms <= COLL_TIMEOUT_MAX_MS),
                "join: timeout %u ms not in %u..%u", j->timeout_ms, COLL_TIMEOUT_MIN_MS,
                COLL_TIMEOUT_MAX_MS);
    CHECK_FIELD(strlen(j->root) < 256, "join: root address too long");
    CHECK_FIELD(strlen(j->token) <= COLL_JOB_TOKEN_MAX, "join: job token longer than %u bytes",
                COLL_JOB_TOKEN_MAX);
    CHECK_FIELD(j->leader_address.len <= COLL_WORKER_ADDR_MAX &&
                    (j->leader_address.len == 0 || j->local_rank == 0),
                "join: leader address of %zu bytes from local rank %u", j->leader_address.len,
                j->local_rank);
    return COLL_OK;
}

/* A compression spec in its canonical 64 bits (proto/cspec.h) with valid fields. */
static coll_status_t check_compression(const coll_submission_t *s, char *err, size_t errlen)
{
    coll_compression_t c;

    CHECK_FIELD(coll_cspec_unpack(s->compression, &c), "submit: compression %016llx has bits "
                "above 51", (unsigned long long)s->compression);
    c.warmup = s->warmup;
    CHECK_FIELD(coll__compression_check(&c) == COLL_OK &&
                    coll_cspec_pack(&c, coll_cspec_ratio_units(s->compression)) ==
                        s->compression,
                "submit: invalid compression %016llx (warm-up %u)",
                (unsigned long long)s->compression, s->warmup);
    return COLL_OK;
}

static coll_status_t check_layout(const Coll__Wire__Layout *l, char *err, size_t errlen)
{
    CHECK_FIELD(l->layout != 0, "layout: fingerprint 0");
    CHECK_FIELD(l->n_shape >= 2 && l->n_shape % 2 == 0 &&
                    l->n_shape <= 2 * (size_t)COLL_LAYOUT_MAX_TENSORS,
                "layout: %zu sizes (2 per tensor, 1 .. %u tensors)", l->n_shape,
                COLL_LAYOUT_MAX_TENSORS);
    for (size_t i = 0; i < l->n_shape; i += 2) {
        CHECK_FIELD(l->shape[i] >= 1 && l->shape[i + 1] >= 1 &&
                        l->shape[i] <= UINT64_MAX / 16 / l->shape[i + 1],
                    "layout: tensor %zu of %llu x %llu", i / 2,
                    (unsigned long long)l->shape[i], (unsigned long long)l->shape[i + 1]);
    }
    return COLL_OK;
}

coll_status_t coll_wire_check_submission(const coll_submission_t *s, char *err, size_t errlen)
{
    CHECK_FIELD(s->coll <= COLL__WIRE__COLLECTIVE__ALLTOALLV, "submit: unknown collective %u",
                s->coll);
    CHECK_FIELD(s->algo < COLL_ALGO_COUNT, "submit: unknown algorithm %u", s->algo);
    CHECK_FIELD(s->root < COLL_WORLD_MAX && s->peer < COLL_WORLD_MAX,
                "submit: root %u or peer %u out of range", s->root, s->peer);
    CHECK_FIELD(s->dtype < COLL_DTYPE_COUNT, "submit: unknown dtype %u", s->dtype);
    CHECK_FIELD(s->redop < COLL_REDOP_COUNT, "submit: unknown op %u", s->redop);
    CHECK_FIELD(s->group <= COLL_TAG_MAX_GROUP, "submit: group %u above %u", s->group,
                COLL_TAG_MAX_GROUP);
    CHECK_FIELD(s->pool <= COLL_DEV_MAX, "submit: pool %u above %u", s->pool, COLL_DEV_MAX);
    /* Byte sizes must fit in 64 bits; the pool bound check follows in the daemon. */
    CHECK_FIELD(s->count <= UINT64_MAX / 16, "submit: count %llu too large",
                (unsigned long long)s->count);
    CHECK_FIELD((s->flags & ~(COLL_SUBMISSION_NODE | COLL_SUBMISSION_REDUCED)) == 0 &&
                    (!(s->flags & COLL_SUBMISSION_NODE) ||
                     s->coll < COLL__WIRE__COLLECTIVE__SEND) &&
                    (!(s->flags & COLL_SUBMISSION_REDUCED) ||
                     ((s->flags & COLL_SUBMISSION_NODE) &&
                      s->coll == COLL__WIRE__COLLECTIVE__ALLREDUCE)),
                "submit: flags %#x unknown, on a point-to-point transfer, or reduced on what is "
                "not a node allreduce", s->flags);
    return check_compression(s, err, errlen);
}

static coll_status_t check_alloc(const Coll__Wire__MemAlloc *a, char *err, size_t errlen)
{
    CHECK_FIELD(a->kind < COLL_MEM_KINDS, "alloc: unknown memory kind %u", a->kind);
    CHECK_FIELD(a->device < COLL_DEV_MAX, "alloc: device %u above %u", a->device,
                COLL_DEV_MAX - 1);
    CHECK_FIELD(a->device_uuid.len == 0 || a->device_uuid.len == COLL_DEV_UUID_BYTES,
                "alloc: device UUID of %zu bytes", a->device_uuid.len);
    CHECK_FIELD(strlen(a->layer) < 16, "alloc: device layer name too long");
    return COLL_OK;
}

static coll_status_t check_free(const Coll__Wire__MemFree *f, char *err, size_t errlen)
{
    CHECK_FIELD(f->pool <= COLL_DEV_MAX, "free: pool %u above %u", f->pool, COLL_DEV_MAX);
    return COLL_OK;
}

static coll_status_t check_group_create(const Coll__Wire__GroupCreate *g, char *err,
                                        size_t errlen)
{
    CHECK_FIELD(g->group >= 1 && g->group <= g->last_group && g->last_group <= COLL_TAG_MAX_GROUP,
                "group create: group %u, last %u not in 1..%u", g->group, g->last_group,
                COLL_TAG_MAX_GROUP);
    CHECK_FIELD(g->size >= 1 && g->size <= COLL_WORLD_MAX, "group create: size %u out of range",
                g->size);
    return COLL_OK;
}

/* The record of a Submit from the socket, checked as one from a control block. */
static coll_status_t check_submit(const Coll__Wire__Submit *m, char *err, size_t errlen)
{
    coll_submission_t s;

    coll_submission_from_wire(m, &s);
    return coll_wire_check_submission(&s, err, errlen);
}

coll_status_t coll_wire_unpack_client(const uint8_t *buf, size_t len, coll_client_msg_t **msg_p,
                                      char *err, size_t errlen)
{
    coll_client_msg_t *m = coll__wire__client_msg__unpack(NULL, len, buf);
    coll_status_t st = COLL_OK;

    if (m == NULL) {
        return fail(err, errlen, COLL_ERR_PROTOCOL, "undecodable client message (%zu bytes)", len);
    }
    if (m->version != COLL_WIRE_VERSION) {
        st = fail(err, errlen, COLL_ERR_VERSION, "client protocol version %u, daemon speaks %u",
                  m->version, COLL_WIRE_VERSION);
    } else {
        switch (m->body_case) {
        case COLL__WIRE__CLIENT_MSG__BODY_HELLO:
            st = strlen(m->hello->client) < 256
                     ? COLL_OK
                     : fail(err, errlen, COLL_ERR_PROTOCOL, "hello: client name too long");
            break;
        case COLL__WIRE__CLIENT_MSG__BODY_JOIN:
            st = check_join(m->join, err, errlen);
            break;
        case COLL__WIRE__CLIENT_MSG__BODY_ALLOC:
            st = check_alloc(m->alloc, err, errlen);
            break;
        case COLL__WIRE__CLIENT_MSG__BODY_FREE:
            st = check_free(m->free, err, errlen);
            break;
        case COLL__WIRE__CLIENT_MSG__BODY_GROUP_QUERY:
            break;
        case COLL__WIRE__CLIENT_MSG__BODY_GROUP_CREATE:
            st = check_group_create(m->group_create, err, errlen);
            break;
        case COLL__WIRE__CLIENT_MSG__BODY_GROUP_FREE:
            st = m->group_free->group >= 1 && m->group_free->group <= COLL_TAG_MAX_GROUP
                     ? COLL_OK
                     : fail(err, errlen, COLL_ERR_PROTOCOL, "group free: group %u out of range",
                            m->group_free->group);
            break;
        case COLL__WIRE__CLIENT_MSG__BODY_SUBMIT:
            st = check_submit(m->submit, err, errlen);
            break;
        case COLL__WIRE__CLIENT_MSG__BODY_LAYOUT:
            st = check_layout(m->layout, err, errlen);
            break;
        case COLL__WIRE__CLIENT_MSG__BODY_ABORT:
            st = m->abort->status < 0 && m->abort->status > -2000 &&
                         strlen(m->abort->reason) <= COLL_WIRE_TEXT_MAX
                     ? COLL_OK
                     : fail(err, errlen, COLL_ERR_PROTOCOL, "abort: status %d or reason out of "
                            "range", (int)m->abort->status);
            break;
        default:
            st = fail(err, errlen, COLL_ERR_PROTOCOL, "client message without a known body");
        }
    }
    if (st != COLL_OK) {
        coll__wire__client_msg__free_unpacked(m, NULL);
        return st;
    }
    *msg_p = m;
    return COLL_OK;
}

/* A reply's chunks lie in order inside the pool's range, and each one has its fd. */
static coll_status_t check_alloc_reply(const Coll__Wire__MemAllocReply *r, char *err,
                                       size_t errlen)
{
    uint64_t end = 0;

    CHECK_FIELD(r->kind < COLL_MEM_KINDS && r->pool <= COLL_DEV_MAX && r->device < COLL_DEV_MAX,
                "allocation reply: kind %u, pool %u or device %u out of range", r->kind, r->pool,
                r->device);
    CHECK_FIELD(r->n_chunks <= COLL_FRAME_MAX_FDS, "allocation reply with %zu chunks",
                r->n_chunks);
    for (size_t i = 0; i < r->n_chunks; i++) {
        const Coll__Wire__PoolChunk *c = r->chunks[i];
        CHECK_FIELD(c->offset >= end && c->bytes > 0 && c->offset <= r->pool_bytes &&
                        c->bytes <= r->pool_bytes - c->offset,
                    "allocation reply: chunk %zu [%llu, +%llu) outside the pool of %llu bytes "
                    "or out of order", i, (unsigned long long)c->offset,
                    (unsigned long long)c->bytes, (unsigned long long)r->pool_bytes);
        end = c->offset + c->bytes;
    }
    return COLL_OK;
}

/* The leaders' addresses a join reply hands local rank 0 (the daemon checked them). */
static coll_status_t check_join_reply(const Coll__Wire__JoinReply *r, char *err, size_t errlen)
{
    CHECK_FIELD(r->n_leader_addresses <= COLL_TAG_MAX_NODES &&
                    (r->n_leader_addresses == 0 || r->n_leader_addresses == r->node_count),
                "join reply: %zu leader addresses for %u nodes", r->n_leader_addresses,
                r->node_count);
    for (size_t i = 0; i < r->n_leader_addresses; i++) {
        CHECK_FIELD(r->leader_addresses[i].len > 0 &&
                        r->leader_addresses[i].len <= COLL_WORKER_ADDR_MAX,
                    "join reply: leader address %zu of %zu bytes", i,
                    r->leader_addresses[i].len);
    }
    return COLL_OK;
}

coll_status_t coll_wire_unpack_daemon(const uint8_t *buf, size_t len, coll_daemon_msg_t **msg_p,
                                      char *err, size_t errlen)
{
    coll_daemon_msg_t *m = coll__wire__daemon_msg__unpack(NULL, len, buf);
    coll_status_t st = COLL_OK;

    if (m == NULL) {
        return fail(err, errlen, COLL_ERR_PROTOCOL, "undecodable daemon message (%zu bytes)", len);
    }
    if (m->version != COLL_WIRE_VERSION) {
        st = fail(err, errlen, COLL_ERR_VERSION, "daemon protocol version %u, library speaks %u",
                  m->version, COLL_WIRE_VERSION);
    } else if (m->body_case == COLL__WIRE__DAEMON_MSG__BODY__NOT_SET) {
        st = fail(err, errlen, COLL_ERR_PROTOCOL, "daemon message without a known body");
    } else if (m->body_case == COLL__WIRE__DAEMON_MSG__BODY_JOIN_WAIT &&
               strlen(m->join_wait->waiting_for) > COLL_WIRE_TEXT_MAX) {
        st = fail(err, errlen, COLL_ERR_PROTOCOL, "join note above %u bytes", COLL_WIRE_TEXT_MAX);
    } else if (m->body_case == COLL__WIRE__DAEMON_MSG__BODY_COMPLETE &&
               !coll_ctl_steps_valid(m->complete->steps, m->complete->n_steps)) {
        st = fail(err, errlen, COLL_ERR_PROTOCOL, "completion with %zu malformed step records",
                  m->complete->n_steps);
    } else if (m->body_case == COLL__WIRE__DAEMON_MSG__BODY_ALLOC) {
        st = check_alloc_reply(m->alloc, err, errlen);
    } else if (m->body_case == COLL__WIRE__DAEMON_MSG__BODY_JOIN) {
        st = check_join_reply(m->join, err, errlen);
    }
    if (st != COLL_OK) {
        coll__wire__daemon_msg__free_unpacked(m, NULL);
        return st;
    }
    *msg_p = m;
    return COLL_OK;
}

/* Ranks index the daemons' rank tables: each must be below @p world and appear once in all the
 * lists of a message (@p seen: a bitmap of @p world bits shared by those lists). */
static coll_status_t check_rank_list(const uint32_t *ranks, size_t n, uint32_t world,
                                     uint8_t *seen, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t r = ranks[i];
        CHECK_FIELD(r < world, "rank %u >= world size %u", r, world);
        CHECK_FIELD(!(seen[r / 8] & (1u << r % 8)), "rank %u listed twice", r);
        seen[r / 8] |= (uint8_t)(1u << r % 8);
    }
    return COLL_OK;
}

static uint8_t *rank_bitmap(uint32_t world)
{
    return calloc(world / 8 + 1, 1);
}

static coll_status_t check_ranks(const uint32_t *ranks, size_t n, uint32_t world_size,
                                 char *err, size_t errlen)
{
    uint8_t *seen;
    coll_status_t st;

    CHECK_FIELD(n >= 1 && n <= world_size, "node lists %zu ranks, world size %u", n, world_size);
    if ((seen = rank_bitmap(world_size)) == NULL) {
        return fail(err, errlen, COLL_ERR_NOMEM, "out of memory checking %zu ranks", n);
    }
    st = check_rank_list(ranks, n, world_size, seen, err, errlen);
    free(seen);
    return st;
}

/* The nodes of a reply together list the ranks 0..total-1, each once. */
static coll_status_t check_reply_ranks(const Coll__Wire__NodeJoinReply *r, size_t total,
                                       char *err, size_t errlen)
{
    uint8_t *seen;
    coll_status_t st = COLL_OK;

    CHECK_FIELD(total <= COLL_WORLD_MAX, "join reply lists %zu ranks", total);
    if ((seen = rank_bitmap((uint32_t)total)) == NULL) {
        return fail(err, errlen, COLL_ERR_NOMEM, "out of memory checking %zu ranks", total);
    }
    for (size_t i = 0; i < r->n_nodes && st == COLL_OK; i++) {
        st = check_rank_list(r->nodes[i]->ranks, r->nodes[i]->n_ranks, (uint32_t)total, seen, err,
                             errlen);
    }
    free(seen);
    return st;
}

static coll_status_t check_node_join(const Coll__Wire__NodeJoin *j, char *err, size_t errlen)
{
    CHECK_FIELD(coll_wire_job_id_valid(j->job), "node join: invalid job id");
    CHECK_FIELD(j->world_size >= 1 && j->world_size <= COLL_WORLD_MAX,
                "node join: world size %u out of range", j->world_size);
    CHECK_FIELD(strlen(j->host) < 256, "node join: host name too long");
    CHECK_FIELD(j->token_digest.len == 0 || j->token_digest.len == COLL_WIRE_AUTH_BYTES,
                "node join: token digest of %zu bytes", j->token_digest.len);
    CHECK_FIELD(j->refusal <= 0 && j->refusal > -2000 &&
                    strlen(j->refusal_error) <= COLL_WIRE_TEXT_MAX,
                "node join: refusal %d or its text out of range", (int)j->refusal);
    if (j->refusal != 0) {
        return COLL_OK; /* a refusal carries only the job, its host, token and the reason */
    }
    CHECK_FIELD(j->worker_address.len > 0 && j->worker_address.len <= COLL_WORKER_ADDR_MAX &&
                    j->leader_address.len <= COLL_WORKER_ADDR_MAX,
                "node join: worker address of %zu bytes, leader address of %zu",
                j->worker_address.len, j->leader_address.len);
    CHECK_FIELD(j->kernel_id.len == 0 || j->kernel_id.len == COLL_WIRE_KERNEL_ID_BYTES,
                "node join: kernel id of %zu bytes", j->kernel_id.len);
    CHECK_FIELD(j->n_device_uuids <= COLL_DEV_MAX && strlen(j->nccl_why) <=
                    COLL_WIRE_TEXT_MAX, "node join: %zu device UUIDs or its NCCL text too long",
                j->n_device_uuids);
    for (size_t i = 0; i < j->n_device_uuids; i++) {
        CHECK_FIELD(j->device_uuids[i].len == COLL_DEV_UUID_BYTES,
                    "node join: a device UUID of %zu bytes", j->device_uuids[i].len);
    }
    return check_ranks(j->ranks, j->n_ranks, j->world_size, err, errlen);
}

static coll_status_t check_node_join_reply(const Coll__Wire__NodeJoinReply *r, char *err,
                                           size_t errlen)
{
    size_t total = 0;

    if (r->status != COLL_OK) {
        return COLL_OK; /* an error reply carries only status and text */
    }
    CHECK_FIELD(r->n_nodes >= 1 && r->n_nodes <= COLL_WORLD_MAX, "join reply with %zu nodes",
                r->n_nodes);
    CHECK_FIELD(r->node_rank < r->n_nodes, "join reply: node rank %u >= %zu nodes", r->node_rank,
                r->n_nodes);
    for (size_t i = 0; i < r->n_nodes; i++) {
        const Coll__Wire__NodeInfo *n = r->nodes[i];
        CHECK_FIELD(n->worker_address.len > 0 && n->worker_address.len <= COLL_WORKER_ADDR_MAX &&
                        n->leader_address.len <= COLL_WORKER_ADDR_MAX,
                    "join reply: node %zu has a worker address of %zu bytes, a leader address "
                    "of %zu", i, n->worker_address.len, n->leader_address.len);
        CHECK_FIELD(n->n_ranks >= 1 && n->n_ranks <= COLL_WORLD_MAX,
                    "join reply: node %zu has %zu ranks", i, n->n_ranks);
        CHECK_FIELD(n->kernel_id.len == 0 || n->kernel_id.len == COLL_WIRE_KERNEL_ID_BYTES,
                    "join reply: node %zu has a kernel id of %zu bytes", i, n->kernel_id.len);
        total += n->n_ranks;
    }
    CHECK_FIELD(r->params != NULL && r->params->segment_bytes >= 4096 &&
                    r->params->segment_bytes <= (64u << 20) && r->params->pipeline_depth >= 1 &&
                    r->params->pipeline_depth <= 64,
                "join reply: job parameters missing or out of range");
    return check_reply_ranks(r, total, err, errlen);
}

static coll_status_t check_auth(const coll_peer_msg_t *m, char *err, size_t errlen)
{
    const ProtobufCBinaryData *a = NULL, *b = NULL;

    switch (m->body_case) {
    case COLL__WIRE__PEER_MSG__BODY_CHALLENGE: a = &m->challenge->nonce; break;
    case COLL__WIRE__PEER_MSG__BODY_AUTH: a = &m->auth->mac; b = &m->auth->nonce; break;
    default: a = &m->auth_ok->mac; break;
    }
    CHECK_FIELD(a->len == COLL_WIRE_AUTH_BYTES && (b == NULL || b->len == COLL_WIRE_AUTH_BYTES),
                "authentication message with a field of the wrong size");
    return COLL_OK;
}

coll_status_t coll_wire_unpack_peer(const uint8_t *buf, size_t len, coll_peer_msg_t **msg_p,
                                    char *err, size_t errlen)
{
    coll_peer_msg_t *m = coll__wire__peer_msg__unpack(NULL, len, buf);
    coll_status_t st;

    if (m == NULL) {
        return fail(err, errlen, COLL_ERR_PROTOCOL, "undecodable peer message (%zu bytes)", len);
    }
    if (m->version != COLL_WIRE_VERSION) {
        st = fail(err, errlen, COLL_ERR_VERSION, "peer protocol version %u, we speak %u",
                  m->version, COLL_WIRE_VERSION);
    } else if (m->body_case == COLL__WIRE__PEER_MSG__BODY_NODE_JOIN) {
        st = check_node_join(m->node_join, err, errlen);
    } else if (m->body_case == COLL__WIRE__PEER_MSG__BODY_NODE_JOIN_REPLY) {
        st = check_node_join_reply(m->node_join_reply, err, errlen);
    } else if (m->body_case == COLL__WIRE__PEER_MSG__BODY_CHALLENGE ||
               m->body_case == COLL__WIRE__PEER_MSG__BODY_AUTH ||
               m->body_case == COLL__WIRE__PEER_MSG__BODY_AUTH_OK) {
        st = check_auth(m, err, errlen);
    } else {
        st = fail(err, errlen, COLL_ERR_PROTOCOL, "peer message without a known body");
    }
    if (st != COLL_OK) {
        coll__wire__peer_msg__free_unpacked(m, NULL);
        return st;
    }
    *msg_p = m;
    return COLL_OK;
}
