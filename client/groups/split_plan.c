#include "client/groups/split_plan.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    int32_t color, key;
    uint32_t rank;
} member_t;

static int by_color_key_rank(const void *pa, const void *pb)
{
    const member_t *a = pa, *b = pb;

    if (a->color != b->color) {
        return a->color < b->color ? -1 : 1;
    }
    if (a->key != b->key) {
        return a->key < b->key ? -1 : 1;
    }
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

static coll_status_t check(const coll__split_entry_t *e, uint32_t n, uint32_t nodes,
                           uint32_t *base_p, char *err, size_t errlen)
{
    uint32_t base = 1;

    for (uint32_t i = 0; i < n; i++) {
        if (e[i].node >= nodes || e[i].color < COLL_UNDEFINED) {
            snprintf(err, errlen, "split: rank %u of the parent reported node %u (of %u) and "
                     "color %d", i, e[i].node, nodes, (int)e[i].color);
            return COLL_ERR_PROTOCOL;
        }
        base = e[i].next_group > base ? e[i].next_group : base;
    }
    *base_p = base;
    return COLL_OK;
}

/* The lowest offset no earlier group sharing a node with members [from, to) took; marks it
 * taken on their nodes. -1 when all 64 are taken (a node of more than 63 ranks). */
static int take_offset(const coll__split_entry_t *e, const member_t *m, uint32_t from,
                       uint32_t to, uint64_t *used)
{
    uint64_t mask = 0;
    int off;

    for (uint32_t x = from; x < to; x++) {
        mask |= used[e[m[x].rank].node];
    }
    if (mask == UINT64_MAX) {
        return -1;
    }
    off = __builtin_ctzll(~mask);
    for (uint32_t x = from; x < to; x++) {
        used[e[m[x].rank].node] |= 1ull << off;
    }
    return off;
}

/* The caller's place in members [from, to), or -1. */
static int64_t place_of(const member_t *m, uint32_t from, uint32_t to, uint32_t me)
{
    for (uint32_t x = from; x < to; x++) {
        if (m[x].rank == me) {
            return x - from;
        }
    }
    return -1;
}

static coll_status_t plan_groups(const coll__split_entry_t *e, uint32_t n, const member_t *m,
                                 uint64_t *used, uint32_t me, uint32_t *members,
                                 coll__split_t *out)
{
    for (uint32_t i = 0, j; i < n; i = j) {
        int64_t place;
        int off;
        for (j = i + 1; j < n && m[j].color == m[i].color; j++) {
        }
        if (m[i].color == COLL_UNDEFINED) {
            continue;
        }
        if ((off = take_offset(e, m, i, j, used)) < 0) {
            return COLL_ERR_PROTOCOL;
        }
        out->ngroups++;
        if (out->first_group + (uint32_t)off > out->last_group) {
            out->last_group = out->first_group + (uint32_t)off;
        }
        if ((place = place_of(m, i, j, me)) >= 0) {
            out->group = out->first_group + (uint32_t)off;
            out->size = j - i;
            out->rank = (uint32_t)place;
            for (uint32_t x = i; x < j; x++) {
                members[x - i] = m[x].rank;
            }
        }
    }
    return COLL_OK;
}

coll_status_t coll__split_plan(const coll__split_entry_t *e, uint32_t n, uint32_t nodes,
                               uint32_t me, uint32_t *members, coll__split_t *out, char *err,
                               size_t errlen)
{
    coll__split_t p = {0};
    member_t *m = malloc(n * sizeof(*m));
    uint64_t *used = calloc(nodes, sizeof(*used));
    coll_status_t st = m == NULL || used == NULL ? COLL_ERR_NOMEM : check(e, n, nodes,
                                                                       &p.first_group, err,
                                                                       errlen);

    if (st == COLL_OK) {
        for (uint32_t i = 0; i < n; i++) {
            m[i] = (member_t){.color = e[i].color, .key = e[i].key, .rank = i};
        }
        qsort(m, n, sizeof(*m), by_color_key_rank);
        p.last_group = p.first_group - 1;
        st = plan_groups(e, n, m, used, me, members, &p);
        if (st != COLL_OK) {
            snprintf(err, errlen, "split: more than 64 groups share a node");
        }
    }
    if (st == COLL_OK && p.last_group > COLL_MAX_GROUP_ID) {
        snprintf(err, errlen, "split: its groups need ids up to %u, above %d: the job has used "
                 "up its group ids", p.last_group, COLL_MAX_GROUP_ID);
        st = COLL_ERR_NOMEM;
    } else if (st == COLL_ERR_NOMEM) {
        snprintf(err, errlen, "split: out of memory for %u ranks", n);
    }
    if (st == COLL_OK) {
        *out = p;
    }
    free(m);
    free(used);
    return st;
}
