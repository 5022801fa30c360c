/*
 * The bucket plan (plan.h). The walk follows DDP's compute_bucket_assignment_by_size: one
 * open bucket per datatype, closed once its bytes reach the cap. A bucket gets its number when
 * it opens, i.e. when its first parameter is walked, so the numbers already follow the walk
 * order of the buckets' first parameters (DDP sorts its buckets by that afterwards).
 */
#include <stdlib.h>
#include <string.h>

#include "client/bucketer/plan.h"

/* The open bucket of one datatype during the walk. */
typedef struct {
    size_t id;      /* provisional number, SIZE_MAX while empty */
    size_t bytes;
    size_t closed;  /* buckets of this datatype closed so far */
} open_bucket_t;

/* Walk state: the bucket of each parameter; a per-bucket fill counter for the plan. */
typedef struct {
    size_t *tmp_of; /* per parameter */
    size_t *fill;   /* per bucket (at most one per parameter) */
    size_t nbuckets;
} walk_t;

static int is_permutation(const size_t *order, size_t n)
{
    unsigned char *seen = calloc(n ? n : 1, 1);
    int ok = seen != NULL;

    for (size_t i = 0; ok && i < n; i++) {
        ok = order[i] < n && !seen[order[i]];
        if (ok) {
            seen[order[i]] = 1;
        }
    }
    free(seen);
    return ok;
}

static void walk(const coll__bp_param_t *params, size_t n, const size_t *order, size_t first_cap,
                 size_t cap, walk_t *w)
{
    open_bucket_t open[COLL_DTYPE_COUNT];

    for (int d = 0; d < COLL_DTYPE_COUNT; d++) {
        open[d] = (open_bucket_t){.id = SIZE_MAX};
    }
    for (size_t pos = 0; pos < n; pos++) {
        size_t p = order[pos];
        open_bucket_t *o = &open[params[p].dtype];
        size_t limit = o->closed == 0 ? first_cap : cap;
        size_t bytes = params[p].count * coll_dtype_size(params[p].dtype);

        if (o->id == SIZE_MAX) {
            o->id = w->nbuckets++;
        }
        w->tmp_of[p] = o->id;
        o->bytes = bytes > SIZE_MAX - o->bytes ? SIZE_MAX : o->bytes + bytes;
        if (o->bytes >= limit) {
            o->id = SIZE_MAX;
            o->bytes = 0;
            o->closed++;
        }
    }
}

/* Members bucket after bucket, each in walk order; offsets are running element counts. */
static void lay_out(const coll__bp_param_t *params, size_t n, const size_t *order, walk_t *w,
                    coll__bplan_t *plan)
{
    size_t next = 0;

    for (size_t pos = 0; pos < n; pos++) {
        size_t p = order[pos];
        coll__bp_bucket_t *bk = &plan->buckets[w->tmp_of[p]];
        bk->dtype = params[p].dtype;
        bk->nparams++;
    }
    for (size_t b = 0; b < w->nbuckets; b++) {
        plan->buckets[b].first = next;
        next += plan->buckets[b].nparams;
    }
    for (size_t pos = 0; pos < n; pos++) {
        size_t p = order[pos], b = w->tmp_of[p];
        coll__bp_bucket_t *bk = &plan->buckets[b];
        plan->members[bk->first + w->fill[b]++] = p;
        plan->bucket_of[p] = b;
        plan->offset_of[p] = bk->count;
        bk->count += params[p].count;
    }
}

static coll_status_t alloc_plan(coll__bplan_t *plan, size_t n, size_t nbuckets)
{
    size_t m = n ? n : 1;

    plan->nparams = n;
    plan->nbuckets = nbuckets;
    plan->buckets = calloc(nbuckets ? nbuckets : 1, sizeof(*plan->buckets));
    plan->members = calloc(m, sizeof(size_t));
    plan->bucket_of = calloc(m, sizeof(size_t));
    plan->offset_of = calloc(m, sizeof(size_t));
    if (plan->buckets == NULL || plan->members == NULL || plan->bucket_of == NULL ||
        plan->offset_of == NULL) {
        coll__bplan_free(plan);
        return COLL_ERR_NOMEM;
    }
    return COLL_OK;
}

static int params_valid(const coll__bp_param_t *params, size_t n)
{
    for (size_t p = 0; p < n; p++) {
        if (coll_dtype_size(params[p].dtype) == 0) {
            return 0;
        }
    }
    return 1;
}

coll_status_t coll__bplan_build(const coll__bp_param_t *params, size_t n, const size_t *order,
                                size_t first_cap, size_t cap, coll__bplan_t *plan)
{
    walk_t w = {.tmp_of = calloc(n ? n : 1, sizeof(size_t)),
                .fill = calloc(n ? n : 1, sizeof(size_t))};
    coll__bplan_t out = {0};
    coll_status_t st = COLL_ERR_NOMEM;

    if (w.tmp_of == NULL || w.fill == NULL) {
        goto out;
    }
    st = COLL_ERR_INVALID;
    if (first_cap == 0 || cap == 0 || !params_valid(params, n) || !is_permutation(order, n)) {
        goto out;
    }
    walk(params, n, order, first_cap, cap, &w);
    st = alloc_plan(&out, n, w.nbuckets);
    if (st == COLL_OK) {
        lay_out(params, n, order, &w, &out);
        *plan = out;
    }
out:
    free(w.tmp_of);
    free(w.fill);
    return st;
}

void coll__bplan_free(coll__bplan_t *plan)
{
    free(plan->buckets);
    free(plan->members);
    free(plan->bucket_of);
    free(plan->offset_of);
    memset(plan, 0, sizeof(*plan));
}

int coll__bplan_equal(const coll__bplan_t *a, const coll__bplan_t *b)
{
    if (a->nparams != b->nparams || a->nbuckets != b->nbuckets) {
        return 0;
    }
    for (size_t p = 0; p < a->nparams; p++) {
        if (a->bucket_of[p] != b->bucket_of[p] || a->offset_of[p] != b->offset_of[p]) {
            return 0;
        }
    }
    return 1;
}

void coll__bplan_reverse_order(size_t *order, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        order[i] = n - 1 - i;
    }
}
