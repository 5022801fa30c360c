/*
 * The parameter service's records (ps_records.h): checks of a registration and of a checkpoint image,
 * field by field, before anything in them is used.
 */
#include "proto/ps_records.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static coll_status_t bad(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static coll_status_t bad(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return COLL_ERR_INVALID;
}

uint64_t coll_ps_fingerprint(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h != 0 ? h : 1;
}

uint32_t coll_ps_state_arrays(uint32_t kind, double momentum)
{
    switch (kind) {
    case COLL_PS_SGD: return momentum != 0 ? 1 : 0;
    case COLL_PS_LARS: return 1;
    default: return 2;
    }
}

static coll_status_t check_enums(const coll_ps_reg_t *r, char *err, size_t errlen)
{
    if (r->optim.kind >= COLL_PS_OPTIMIZER_COUNT) {
        return bad(err, errlen, "unknown optimizer %u", r->optim.kind);
    }
    if (r->optim.lamb_bias > COLL_PS_LAMB_BIAS_STEPSIZE) {
        return bad(err, errlen, "unknown LAMB bias correction %u", r->optim.lamb_bias);
    }
    if (r->sched.decay > COLL_PS_DECAY_COSINE) {
        return bad(err, errlen, "unknown learning-rate decay %u", r->sched.decay);
    }
    if (r->sched.num_milestones > COLL_PS_MAX_MILESTONES) {
        return bad(err, errlen, "%u milestones, at most %u", r->sched.num_milestones,
                   COLL_PS_MAX_MILESTONES);
    }
    return COLL_OK;
}

static coll_status_t check_layers(const coll_ps_reg_t *r, char *err, size_t errlen)
{
    const coll_ps_reg_layer_t *l = (const coll_ps_reg_layer_t *)(const void *)(r + 1);
    uint64_t total = 0;
    uint32_t bucket = 0;

    for (uint32_t i = 0; i < r->num_layers; i++) {
        if (l[i].count == 0 || l[i].count > UINT64_MAX / 16 - total) {
            return bad(err, errlen, "layer %u: count %" PRIu64 " is 0 or too large", i,
                       l[i].count);
        }
        if (l[i].flags & ~(uint32_t)COLL_PS_EXCLUDE) {
            return bad(err, errlen, "layer %u: unknown flags 0x%x", i, l[i].flags);
        }
        if (i == 0 ? l[i].bucket != 0 : l[i].bucket != bucket && l[i].bucket != bucket + 1) {
            return bad(err, errlen, "layer %u: bucket %u after bucket %u (buckets are runs of "
                       "consecutive layers numbered from 0)", i, l[i].bucket, bucket);
        }
        bucket = l[i].bucket;
        total += l[i].count;
    }
    if (bucket + 1 != r->num_buckets) {
        return bad(err, errlen, "the layers name %u buckets, the head says %u", bucket + 1,
                   r->num_buckets);
    }
    if (total != r->count) {
        return bad(err, errlen, "the layers hold %" PRIu64 " elements, the head says %" PRIu64,
                   total, r->count);
    }
    return COLL_OK;
}

coll_status_t coll_ps_reg_check(const void *reg, size_t len, char *err, size_t errlen)
{
    const coll_ps_reg_t *r = reg;

    if (len < sizeof(*r)) {
        return bad(err, errlen, "registration of %zu bytes, at least %zu", len, sizeof(*r));
    }
    if (r->magic != COLL_PS_REG_MAGIC || r->version != COLL_PS_RECORD_VERSION) {
        return bad(err, errlen, "not a registration of version %u (magic 0x%08x, version %u)",
                   COLL_PS_RECORD_VERSION, r->magic, r->version);
    }
    if (r->num_layers == 0 || r->num_layers > COLL_PS_MAX_LAYERS || r->num_buckets == 0 ||
        r->num_buckets > COLL_PS_MAX_BUCKETS || r->num_buckets > r->num_layers) {
        return bad(err, errlen, "%u layers in %u buckets (1..%u layers, 1..%u buckets)",
                   r->num_layers, r->num_buckets, COLL_PS_MAX_LAYERS, COLL_PS_MAX_BUCKETS);
    }
    if (len != coll_ps_reg_bytes(r->num_layers)) {
        return bad(err, errlen, "registration of %zu bytes, %zu for %u layers", len,
                   coll_ps_reg_bytes(r->num_layers), r->num_layers);
    }
    coll_status_t st = check_enums(r, err, errlen);
    return st == COLL_OK ? check_layers(r, err, errlen) : st;
}

static coll_status_t check_chunks(const coll_ps_ckpt_t *h, char *err, size_t errlen)
{
    const coll_ps_ckpt_chunk_t *c = coll_ps_ckpt_chunks(h);
    uint64_t total = 0;

    for (uint32_t b = 0; b < h->num_buckets; b++) {
        if (c[b].off > h->count || c[b].len > h->count - c[b].off || c[b].len > h->count - total) {
            return bad(err, errlen, "bucket %u: chunk [%" PRIu64 ", +%" PRIu64 ") outside the "
                       "%" PRIu64 " elements", b, c[b].off, c[b].len, h->count);
        }
        total += c[b].len;
    }
    if (total != h->shard_elems) {
        return bad(err, errlen, "the chunks hold %" PRIu64 " elements, the head says %" PRIu64,
                   total, h->shard_elems);
    }
    return COLL_OK;
}

coll_status_t coll_ps_ckpt_check(const void *image, size_t len, int head_only, char *err,
                                 size_t errlen)
{
    const coll_ps_ckpt_t *h = image;
    uint64_t state;

    if (len < sizeof(*h)) {
        return bad(err, errlen, "checkpoint image of %zu bytes, at least %zu", len, sizeof(*h));
    }
    if (h->magic != COLL_PS_CKPT_MAGIC || h->version != COLL_PS_RECORD_VERSION) {
        return bad(err, errlen, "not a checkpoint image of version %u (magic 0x%08x, "
                   "version %u)", COLL_PS_RECORD_VERSION, h->magic, h->version);
    }
    if (h->nodes == 0 || h->node >= h->nodes || h->nstate > 2 || h->reserved != 0 ||
        h->num_buckets == 0 || h->num_buckets > COLL_PS_MAX_BUCKETS ||
        h->optimizer >= COLL_PS_OPTIMIZER_COUNT || h->shard_elems > h->count ||
        h->count > UINT64_MAX / 16) {
        return bad(err, errlen, "checkpoint head out of range (node %u of %u, %u state "
                   "arrays, %u buckets, optimizer %u)", h->node, h->nodes, h->nstate,
                   h->num_buckets, h->optimizer);
    }
    if (len < coll_ps_ckpt_head_bytes(h->num_buckets)) {
        return bad(err, errlen, "checkpoint image of %zu bytes cut inside its chunk table", len);
    }
    state = head_only ? 0 : (uint64_t)h->nstate * h->shard_elems * sizeof(float);
    if ((uint64_t)len - coll_ps_ckpt_head_bytes(h->num_buckets) != state) {
        return bad(err, errlen, "checkpoint image of %zu bytes, %" PRIu64 " expected", len,
                   (uint64_t)coll_ps_ckpt_head_bytes(h->num_buckets) + state);
    }
    return check_chunks(h, err, errlen);
}
