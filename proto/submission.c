#include "proto/submission.h"

#include <stddef.h>

/* The record carries no pointer and no padding: posts and rings copy it in whole words. */
_Static_assert(sizeof(coll_submission_t) == 96 && offsetof(coll_submission_t, key) == 0,
               "a submission is 96 bytes, the key first (proto/README.md)");

void coll_submission_to_wire(const coll_submission_t *s, Coll__Wire__Submit *m)
{
    coll__wire__submit__init(m);
    m->req_id = s->req_id;
    m->key = s->key;
    m->coll = (Coll__Wire__Collective)s->coll;
    m->dtype = s->dtype;
    m->op = s->redop;
    m->count = s->count;
    m->send_offset = s->send_offset;
    m->recv_offset = s->recv_offset;
    m->root = s->root;
    m->peer = s->peer;
    m->algo = s->algo;
    m->layout = s->layout;
    m->group = s->group;
    m->compression = s->compression;
    m->bucket = s->bucket;
    m->warmup = s->warmup;
    m->flags = s->flags;
    m->pool = s->pool;
}

void coll_submission_from_wire(const Coll__Wire__Submit *m, coll_submission_t *s)
{
    *s = (coll_submission_t){
        .key = m->key,
        .count = m->count,
        .send_offset = m->send_offset,
        .recv_offset = m->recv_offset,
        .layout = m->layout,
        .compression = m->compression,
        .req_id = m->req_id,
        .coll = (uint32_t)m->coll,
        .dtype = m->dtype,
        .redop = m->op,
        .root = m->root,
        .peer = m->peer,
        .algo = m->algo,
        .group = m->group,
        .bucket = m->bucket,
        .warmup = m->warmup,
        .flags = m->flags,
        .pool = m->pool,
    };
}
