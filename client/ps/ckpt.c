/*
 * Checkpoints of the parameter service (collective_ps.h, proto/ps_records.h). A save asks the daemon
 * for its shard's head (PS_SAVE) and copies the state out of the pool; a load asks for this
 * node's current shard the same way, builds the node's image from the images given (its own,
 * or, with another number of nodes, the pieces of every old shard that fall into its new
 * chunks: the state is per element, so re-sharding is copying), and hands it over (PS_LOAD).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "client/ps/ps.h"
#include "proto/ps_records.h"

/* This node's head and chunk table after the steps done, malloc()ed into @p head_p. */
static coll_status_t fetch_head(coll_ps_t *ps, void **head_p)
{
    coll_comm_t *c = ps->comm;
    size_t bytes = coll_ps_ckpt_head_bytes(ps->num_buckets);
    void *reply = NULL, *head = malloc(bytes);
    coll_status_t st = head != NULL ? coll_mem_alloc(c, bytes, &reply) : COLL_ERR_NOMEM;
    char err[256];

    if (st == COLL_OK) {
        st = coll__ps_control(ps, COLL_KIND_PS_SAVE, NULL, reply, bytes,
                              coll_ps_steps(ps),
                              coll__ps_key(ps, coll_ps_steps(ps), COLL__PS_CODE_SAVE));
    }
    if (st == COLL_OK) {
        memcpy(head, reply, bytes);
        if (coll_ps_ckpt_check(head, bytes, 1, err, sizeof(err)) != COLL_OK) {
            coll__set_error(c, "parameter service: the daemon's checkpoint head: %s", err);
            st = COLL_ERR_PROTOCOL;
        }
    }
    if (reply != NULL) {
        coll_mem_free(c, reply);
    }
    if (st != COLL_OK) {
        free(head);
        return st;
    }
    *head_p = head;
    return COLL_OK;
}

coll_status_t coll_ps_save(coll_ps_t *ps, void **image_p, size_t *bytes_p)
{
    coll_comm_t *c;
    size_t hb, state;
    coll_ps_ckpt_t *h = NULL;
    uint64_t at;
    uint8_t *image;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, ps);
    if (image_p == NULL || bytes_p == NULL) {
        return coll__refuse_null(ps->comm, __func__, image_p == NULL ? "image_p" : "bytes_p");
    }
    c = ps->comm;
    hb = coll_ps_ckpt_head_bytes(ps->num_buckets);
    if ((st = fetch_head(ps, (void **)&h)) != COLL_OK) {
        return st;
    }
    state = (size_t)h->nstate * h->shard_elems * sizeof(float);
    at = h->state_offset;
    if (state > 0 && (at > c->pool_bytes || state > c->pool_bytes - at)) {
        coll__set_error(c, "parameter service: the daemon's state lies outside the pool");
        free(h);
        return COLL_ERR_PROTOCOL;
    }
    if ((image = malloc(hb + state)) == NULL) {
        free(h);
        return COLL_ERR_NOMEM;
    }
    h->state_offset = 0;
    memcpy(image, h, hb);
    if (state > 0) {
        memcpy(image + hb, c->pool + at, state);
    }
    free(h);
    *image_p = image;
    *bytes_p = hb + state;
    return COLL_OK;
}

/* Every image is one, of this registration, of one step and one node count, each node once. */
static coll_status_t check_images(coll_ps_t *ps, const void *const *images, const size_t *bytes,
                                  size_t n, const coll_ps_ckpt_t **first_p)
{
    coll_comm_t *c = ps->comm;
    char err[256];

    for (size_t i = 0; i < n; i++) {
        const coll_ps_ckpt_t *h = images[i], *f = images[0];
        if (h == NULL) {
            coll__set_error(c, "coll_ps_load: images[%zu] must not be NULL", i);
            return COLL_ERR_INVALID;
        }
        if (coll_ps_ckpt_check(h, bytes[i], 0, err, sizeof(err)) != COLL_OK) {
            coll__set_error(c, "coll_ps_load: image %zu: %s", i, err);
            return COLL_ERR_INVALID;
        }
        if (h->fingerprint != ps->fingerprint || h->num_buckets != ps->num_buckets) {
            coll__set_error(c, "coll_ps_load: image %zu was saved by another registration "
                            "(fingerprint %016" PRIx64 ", this one %016" PRIx64 "): the layers, "
                            "buckets or optimizer differ", i, h->fingerprint, ps->fingerprint);
            return COLL_ERR_INVALID;
        }
        if (h->step != f->step || h->nodes != f->nodes) {
            coll__set_error(c, "coll_ps_load: image %zu is node %u's of %u after step %" PRIu64
                            ", image 0 of %u nodes after step %" PRIu64, i, h->node, h->nodes,
                            h->step, f->nodes, f->step);
            return COLL_ERR_INVALID;
        }
        for (size_t j = 0; j < i; j++) {
            if (((const coll_ps_ckpt_t *)images[j])->node == h->node) {
                coll__set_error(c, "coll_ps_load: images %zu and %zu are both node %u's", j, i,
                                h->node);
                return COLL_ERR_INVALID;
            }
        }
    }
    *first_p = images[0];
    return COLL_OK;
}

/* Offsets of each bucket's chunk in the state arrays of image @p h, into @p pre. */
static void prefixes(const coll_ps_ckpt_t *h, uint64_t *pre)
{
    const coll_ps_ckpt_chunk_t *ch = coll_ps_ckpt_chunks(h);
    uint64_t at = 0;

    for (uint32_t b = 0; b < h->num_buckets; b++) {
        pre[b] = at;
        at += ch[b].len;
    }
}

/* Copy what @p old holds of this node's chunks (@p mine) into @p dst; @return elements. */
static uint64_t take_from(const coll_ps_ckpt_t *mine, float *dst, const coll_ps_ckpt_t *old,
                          uint64_t *pre_mine, uint64_t *pre_old)
{
    const coll_ps_ckpt_chunk_t *a = coll_ps_ckpt_chunks(mine), *o = coll_ps_ckpt_chunks(old);
    uint64_t got = 0;

    prefixes(mine, pre_mine);
    prefixes(old, pre_old);
    for (uint32_t b = 0; b < mine->num_buckets; b++) {
        uint64_t x = a[b].off > o[b].off ? a[b].off : o[b].off;
        uint64_t y = a[b].off + a[b].len < o[b].off + o[b].len ? a[b].off + a[b].len
                                                               : o[b].off + o[b].len;
        for (uint32_t k = 0; x < y && k < mine->nstate; k++) {
            memcpy(dst + (size_t)k * mine->shard_elems + pre_mine[b] + (x - a[b].off),
                   coll_ps_ckpt_state(old, k) + pre_old[b] + (x - o[b].off),
                   (size_t)(y - x) * sizeof(float));
        }
        got += x < y ? y - x : 0;
    }
    return got;
}

/* This node's state from the images; every element of its chunks must be found. */
static coll_status_t fill(coll_ps_t *ps, const coll_ps_ckpt_t *mine, float *dst,
                          const void *const *images, size_t n)
{
    uint64_t *pre = malloc(2 * ps->num_buckets * sizeof(uint64_t)), got = 0;
    const coll_ps_ckpt_t *f = images[0];

    if (pre == NULL) {
        return COLL_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        got += take_from(mine, dst, images[i], pre, pre + ps->num_buckets);
    }
    free(pre);
    if (got != mine->shard_elems) {
        coll__set_error(ps->comm, "coll_ps_load: the %zu images given (of a checkpoint of %u "
                        "nodes) hold %" PRIu64 " of the %" PRIu64 " elements of node %u's new "
                        "shard (%u nodes now): pass every node's image, nodes 0..%u, to "
                        "re-shard", n, f->nodes, got, mine->shard_elems, mine->node,
                        mine->nodes, f->nodes - 1);
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

/* This node's image in the pool from @p images (its shard's head fetched from the daemon). */
static coll_status_t build(coll_ps_t *ps, const void *const *images, size_t n, uint8_t **buf_p)
{
    const coll_ps_ckpt_t *first = images[0];
    size_t hb = coll_ps_ckpt_head_bytes(ps->num_buckets);
    coll_ps_ckpt_t *mine = NULL;
    coll_status_t st = fetch_head(ps, (void **)&mine);
    uint8_t *buf = NULL;

    if (st != COLL_OK) {
        return st;
    }
    st = coll_mem_alloc(ps->comm, hb + (size_t)mine->nstate * mine->shard_elems * sizeof(float),
                        (void **)&buf);
    if (st == COLL_OK) {
        mine->step = first->step;
        mine->state_offset = 0;
        memcpy(buf, mine, hb);
        st = fill(ps, mine, (float *)(void *)(buf + hb), images, n);
    }
    free(mine);
    if (st != COLL_OK) {
        if (buf != NULL) {
            coll_mem_free(ps->comm, buf);
        }
        /* The other ranks go on to the load and would wait for this one: end the job. */
        coll_comm_abort(ps->comm, coll_comm_last_error(ps->comm));
        return st;
    }
    *buf_p = buf;
    return COLL_OK;
}

coll_status_t coll_ps_load(coll_ps_t *ps, const void *const *images, const size_t *bytes,
                           size_t n)
{
    coll_comm_t *c;
    const coll_ps_ckpt_t *first = NULL;
    uint8_t *buf = NULL;
    coll_status_t st = COLL_OK;

    COLL_ARG_CHECK(NULL, ps);
    c = ps->comm;
    if (n == 0 || images == NULL || bytes == NULL) {
        coll__set_error(c, "coll_ps_load: %s", n == 0 ? "no images" : images == NULL
                        ? "images must not be NULL" : "bytes must not be NULL");
        st = COLL_ERR_INVALID;
    }
    st = st == COLL_OK ? check_images(ps, images, bytes, n, &first) : st;
    if (st != COLL_OK) {
        /* The others wait for this rank in the collective steps of the load. */
        coll_comm_abort(c, coll_comm_last_error(c));
        return st;
    }
    if ((st = build(ps, images, n, &buf)) != COLL_OK) {
        return st;
    }
    st = coll__ps_control(ps, COLL_KIND_PS_LOAD, buf, NULL, 0, first->step,
                          coll__ps_key(ps, first->step, COLL__PS_CODE_LOAD));
    for (size_t b = 0; st == COLL_OK && b < ps->num_buckets; b++) {
        ps->bucket_steps[b] = first->step;
    }
    coll_mem_free(c, buf);
    return st;
}
