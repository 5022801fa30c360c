/*
 * Shared by the wire decoders' unit tests (test_wire*.c): encoding and decoding helpers, and a
 * builder of a valid message of every kind; each test then breaks one field.
 */
#ifndef WIRE_MSGS_H
#define WIRE_MSGS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/ctl.h"
#include "proto/frame.h"
#include "proto/wire.h"

#define ERRLEN 256
#define FUZZ_ROUNDS 10000

typedef enum { KIND_CLIENT, KIND_DAEMON, KIND_PEER } kind_t;

/* An encoded envelope. */
typedef struct {
    uint8_t *buf;
    size_t len;
} enc_t;

static inline enc_t encode(const ProtobufCMessage *m)
{
    enc_t e;
    e.len = protobuf_c_message_get_packed_size(m);
    e.buf = malloc(e.len ? e.len : 1);
    assert_non_null(e.buf);
    assert_int_equal(protobuf_c_message_pack(m, e.buf), e.len);
    return e;
}

/* Decode @p buf as @p kind, free the message on success, and return the status. */
static inline coll_status_t decode(kind_t kind, const uint8_t *buf, size_t len, char *err,
                                   size_t errlen)
{
    coll_client_msg_t *c;
    coll_daemon_msg_t *d;
    coll_peer_msg_t *p;
    coll_status_t st;

    if (kind == KIND_CLIENT) {
        st = coll_wire_unpack_client(buf, len, &c, err, errlen);
        if (st == COLL_OK) {
            coll__wire__client_msg__free_unpacked(c, NULL);
        }
    } else if (kind == KIND_DAEMON) {
        st = coll_wire_unpack_daemon(buf, len, &d, err, errlen);
        if (st == COLL_OK) {
            coll__wire__daemon_msg__free_unpacked(d, NULL);
        }
    } else {
        st = coll_wire_unpack_peer(buf, len, &p, err, errlen);
        if (st == COLL_OK) {
            coll__wire__peer_msg__free_unpacked(p, NULL);
        }
    }
    return st;
}

static inline coll_status_t decode_msg(kind_t kind, const ProtobufCMessage *m, char *err)
{
    enc_t e = encode(m);
    coll_status_t st;
    err[0] = '\0';
    st = decode(kind, e.buf, e.len, err, ERRLEN);
    free(e.buf);
    return st;
}

static inline void expect_ok(kind_t kind, const ProtobufCMessage *m)
{
    char err[ERRLEN];
    coll_status_t st = decode_msg(kind, m, err);
    if (st != COLL_OK) {
        fail_msg("expected COLL_OK, got %s: %s", coll_err_name(st), err);
    }
}

/* Expect @p st with an error text that contains @p field. */
static inline void expect_err(kind_t kind, const ProtobufCMessage *m, coll_status_t want,
                              const char *field)
{
    char err[ERRLEN];
    coll_status_t st = decode_msg(kind, m, err);
    if (st != want) {
        fail_msg("expected %s, got %s (%s)", coll_err_name(want), coll_err_name(st), err);
    }
    if (strstr(err, field) == NULL) {
        fail_msg("error text \"%s\" does not name \"%s\"", err, field);
    }
}

/* ---- message builders: every builder gives a valid message ---- */

typedef struct {
    Coll__Wire__ClientMsg msg;
    Coll__Wire__Hello hello;
    Coll__Wire__JoinJob join;
    Coll__Wire__MemAlloc alloc;
    Coll__Wire__MemFree free;
    Coll__Wire__Submit submit;
} client_t;

static inline void client_init(client_t *c)
{
    static const Coll__Wire__ClientMsg msg = COLL__WIRE__CLIENT_MSG__INIT;
    static const Coll__Wire__Hello hello = COLL__WIRE__HELLO__INIT;
    static const Coll__Wire__JoinJob join = COLL__WIRE__JOIN_JOB__INIT;
    static const Coll__Wire__MemAlloc alloc = COLL__WIRE__MEM_ALLOC__INIT;
    static const Coll__Wire__MemFree mfree = COLL__WIRE__MEM_FREE__INIT;
    static const Coll__Wire__Submit submit = COLL__WIRE__SUBMIT__INIT;

    c->msg = msg;
    c->msg.version = COLL_WIRE_VERSION;
    c->hello = hello;
    c->hello.client = "coll-train pid 1234";
    c->join = join;
    c->join.job = "job-1.a_b:c";
    c->join.rank = 5;
    c->join.world_size = 8;
    c->join.local_rank = 1;
    c->join.local_size = 4;
    c->join.root = "10.0.0.1:29510";
    c->alloc = alloc;
    c->alloc.req_id = 7;
    c->alloc.bytes = 1 << 20;
    c->free = mfree;
    c->free.offset = 4096;
    c->submit = submit;
    c->submit.req_id = 9;
    c->submit.coll = COLL__WIRE__COLLECTIVE__ALLREDUCE;
    c->submit.dtype = COLL_FLOAT32;
    c->submit.op = COLL_SUM;
    c->submit.count = 1000;
}

static inline const ProtobufCMessage *client_hello(client_t *c)
{
    c->msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_HELLO;
    c->msg.hello = &c->hello;
    return &c->msg.base;
}

static inline const ProtobufCMessage *client_join(client_t *c)
{
    c->msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_JOIN;
    c->msg.join = &c->join;
    return &c->msg.base;
}

static inline const ProtobufCMessage *client_alloc(client_t *c)
{
    c->msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_ALLOC;
    c->msg.alloc = &c->alloc;
    return &c->msg.base;
}

static inline const ProtobufCMessage *client_free(client_t *c)
{
    c->msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_FREE;
    c->msg.free = &c->free;
    return &c->msg.base;
}

static inline const ProtobufCMessage *client_submit(client_t *c)
{
    c->msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_SUBMIT;
    c->msg.submit = &c->submit;
    return &c->msg.base;
}

typedef struct {
    Coll__Wire__DaemonMsg msg;
    Coll__Wire__HelloReply hello;
    Coll__Wire__JoinReply join;
    Coll__Wire__MemAllocReply alloc;
    Coll__Wire__Complete complete;
} daemon_t;

static inline void daemon_init(daemon_t *d)
{
    static const Coll__Wire__DaemonMsg msg = COLL__WIRE__DAEMON_MSG__INIT;
    static const Coll__Wire__HelloReply hello = COLL__WIRE__HELLO_REPLY__INIT;
    static const Coll__Wire__JoinReply join = COLL__WIRE__JOIN_REPLY__INIT;
    static const Coll__Wire__MemAllocReply alloc = COLL__WIRE__MEM_ALLOC_REPLY__INIT;
    static const Coll__Wire__Complete complete = COLL__WIRE__COMPLETE__INIT;

    d->msg = msg;
    d->msg.version = COLL_WIRE_VERSION;
    d->hello = hello;
    d->hello.daemon = "collectived 0.1";
    d->join = join;
    d->join.pool_bytes = 1 << 28;
    d->join.node_count = 2;
    d->alloc = alloc;
    d->alloc.req_id = 7;
    d->alloc.offset = 128;
    d->alloc.bytes = 64;
    d->complete = complete;
    d->complete.req_id = 9;
    d->complete.algo = "ring";
}

static inline const ProtobufCMessage *daemon_body(daemon_t *d, Coll__Wire__DaemonMsg__BodyCase body)
{
    d->msg.body_case = body;
    switch (body) {
    case COLL__WIRE__DAEMON_MSG__BODY_HELLO: d->msg.hello = &d->hello; break;
    case COLL__WIRE__DAEMON_MSG__BODY_JOIN: d->msg.join = &d->join; break;
    case COLL__WIRE__DAEMON_MSG__BODY_ALLOC: d->msg.alloc = &d->alloc; break;
    case COLL__WIRE__DAEMON_MSG__BODY_COMPLETE: d->msg.complete = &d->complete; break;
    default: break;
    }
    return &d->msg.base;
}

#define NODES 3

typedef struct {
    Coll__Wire__PeerMsg msg;
    Coll__Wire__NodeJoin join;
    Coll__Wire__NodeJoinReply reply;
    Coll__Wire__JobParams params;
    Coll__Wire__NodeInfo info[NODES];
    Coll__Wire__NodeInfo *infop[NODES];
    uint32_t ranks[NODES][2];
    uint8_t addr[16];
} peer_t;

static inline void peer_init(peer_t *p)
{
    static const Coll__Wire__PeerMsg msg = COLL__WIRE__PEER_MSG__INIT;
    static const Coll__Wire__NodeJoin join = COLL__WIRE__NODE_JOIN__INIT;
    static const Coll__Wire__NodeJoinReply reply = COLL__WIRE__NODE_JOIN_REPLY__INIT;
    static const Coll__Wire__NodeInfo info = COLL__WIRE__NODE_INFO__INIT;
    static const Coll__Wire__JobParams params = COLL__WIRE__JOB_PARAMS__INIT;

    memset(p->addr, 0xa5, sizeof(p->addr));
    p->params = params;
    p->params.segment_bytes = 256 * 1024;
    p->params.pipeline_depth = 4;
    p->params.rd_max_bytes = 64 * 1024;
    p->msg = msg;
    p->msg.version = COLL_WIRE_VERSION;
    p->join = join;
    p->join.job = "job-1";
    p->join.world_size = 2 * NODES;
    p->join.n_ranks = 2;
    p->join.ranks = p->ranks[1];
    p->join.worker_address.len = sizeof(p->addr);
    p->join.worker_address.data = p->addr;
    p->join.host = "node1";
    p->reply = reply;
    p->reply.node_rank = 1;
    p->reply.n_nodes = NODES;
    p->reply.nodes = p->infop;
    p->reply.params = &p->params;
    for (int i = 0; i < NODES; i++) {
        p->ranks[i][0] = (uint32_t)(2 * i);
        p->ranks[i][1] = (uint32_t)(2 * i + 1);
        p->info[i] = info;
        p->info[i].n_ranks = 2;
        p->info[i].ranks = p->ranks[i];
        p->info[i].worker_address.len = sizeof(p->addr);
        p->info[i].worker_address.data = p->addr;
        p->info[i].host = "node";
        p->infop[i] = &p->info[i];
    }
}

static inline const ProtobufCMessage *peer_join(peer_t *p)
{
    p->msg.body_case = COLL__WIRE__PEER_MSG__BODY_NODE_JOIN;
    p->msg.node_join = &p->join;
    return &p->msg.base;
}

static inline const ProtobufCMessage *peer_reply(peer_t *p)
{
    p->msg.body_case = COLL__WIRE__PEER_MSG__BODY_NODE_JOIN_REPLY;
    p->msg.node_join_reply = &p->reply;
    return &p->msg.base;
}

static inline char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

#endif
