/*
 * The automatic choice's size ranges from the cost model (crossover.h). Every candidate's time
 * is affine in the size but for the chain's segments, so the fastest changes a few times at
 * most: the walk samples every power of two and bisects, to the byte, each interval in which
 * the fastest changed.
 */
#include "engine/crossover.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "engine/algo.h"

/* Sizes sampled up to 2^62 bytes; the last range holds everything above. */
#define TOP_SHIFT 62

coll_cost_algo_t coll_crossover_cost_algo(coll_kind_t kind, coll_algo_t algo)
{
    switch (algo) {
    case COLL_ALGO_RING:
        return COLL_COST_RING;
    case COLL_ALGO_RD:
        return kind == COLL_KIND_ALLREDUCE ? COLL_COST_RD : COLL_COST_NALGOS;
    case COLL_ALGO_CHAIN:
        return COLL_COST_CHAIN;
    case COLL_ALGO_DISSEMINATION:
        return kind == COLL_KIND_BARRIER ? COLL_COST_DISSEMINATION : COLL_COST_NALGOS;
    default:
        return COLL_COST_NALGOS;
    }
}

/* One collective's walk: the constants, the shape, and a job that holds the parameters the
 * entries' predicates read. */
typedef struct {
    const coll_cost_params_t *cp;
    const coll_job_t *job;
    uint32_t nnodes, ranks_per_node;
    coll_kind_t kind;
} walk_t;

/* The candidate of the walk's collective the model predicts fastest at @p bytes, the first in
 * table order on a tie; COLL_ALGO_AUTO when none runs that size. */
static uint32_t fastest(const walk_t *w, uint64_t bytes)
{
    size_t n;
    const coll_algo_entry_t *t = coll_algo_table(&n);
    uint32_t best = COLL_ALGO_AUTO;
    double top = 0;
    coll_cost_result_t r;

    if (coll_cost_predict(w->cp, w->kind, bytes, w->nnodes, w->ranks_per_node, COLL_COST_ALL,
                          &r) != COLL_OK) {
        return COLL_ALGO_AUTO;
    }
    for (size_t i = 0; i < n; i++) {
        coll_cost_algo_t a = coll_crossover_cost_algo(t[i].kind, t[i].algo);
        if (t[i].kind != w->kind || t[i].mem != COLL_MEM_HOST || a == COLL_COST_NALGOS ||
            r.time[a] < 0 || (t[i].runs != NULL && !t[i].runs(w->job, w->nnodes, bytes))) {
            continue;
        }
        if (best == COLL_ALGO_AUTO || r.time[a] < top) {
            best = (uint32_t)t[i].algo;
            top = r.time[a];
        }
    }
    return best;
}

/* The smallest size in (lo, hi] whose fastest is not @p cur, given fastest(lo) == cur and
 * fastest(hi) != cur. */
static uint64_t first_change(const walk_t *w, uint32_t cur, uint64_t lo, uint64_t hi)
{
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (fastest(w, mid) == cur) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return hi;
}

static coll_status_t add(coll_job_params_t *p, coll_kind_t kind, uint32_t algo, uint64_t max)
{
    if (p->nchoices >= COLL_JOB_CHOICES) {
        return COLL_ERR_UNSUPPORTED;
    }
    p->choices[p->nchoices++] = (coll_job_choice_t){(uint32_t)kind, algo, max};
    return COLL_OK;
}

/* The ranges of the walk's collective appended to @p p; none when no size has a candidate. */
static coll_status_t walk(const walk_t *w, coll_job_params_t *p)
{
    uint32_t first = p->nchoices, cur = fastest(w, 0);
    uint64_t lo = 0;
    coll_status_t st = COLL_OK;

    for (unsigned k = 0; k <= TOP_SHIFT && st == COLL_OK; k++) {
        uint64_t hi = (uint64_t)1 << k;
        while (st == COLL_OK && hi > lo && fastest(w, hi) != cur) {
            uint64_t at = first_change(w, cur, lo, hi);
            st = add(p, w->kind, cur, at - 1);
            cur = fastest(w, at);
            lo = at;
        }
        lo = hi > lo ? hi : lo;
    }
    if (st == COLL_OK && (st = add(p, w->kind, cur, UINT64_MAX)) == COLL_OK &&
        p->nchoices == first + 1 && cur == COLL_ALGO_AUTO) {
        p->nchoices = first;
    }
    return st;
}

coll_status_t coll_crossover_make(const coll_cost_params_t *cp, uint32_t nnodes,
                                  uint32_t ranks_per_node, coll_job_params_t *p)
{
    coll_cost_params_t c = *cp;
    coll_job_params_t q = *p;
    coll_job_t *job;
    coll_status_t st = COLL_OK;
    coll_cost_result_t r;

    c.segment_bytes = p->segment_bytes;
    c.rd_max_bytes = p->segment_bytes > sizeof(coll_desc_t) ? p->segment_bytes -
                                                                  sizeof(coll_desc_t) : 0;
    if (coll_cost_predict(&c, COLL_KIND_BARRIER, 0, nnodes, ranks_per_node, COLL_COST_ALL,
                          &r) != COLL_OK) {
        return COLL_ERR_INVALID;
    }
    if ((job = calloc(1, sizeof(*job))) == NULL) {
        return COLL_ERR_NOMEM;
    }
    job->params = *p;
    job->nnodes = nnodes;
    q.nchoices = 0;
    for (int k = COLL_KIND_ALLREDUCE; k <= COLL_KIND_BARRIER && st == COLL_OK; k++) {
        walk_t w = {&c, job, nnodes, ranks_per_node, (coll_kind_t)k};
        st = walk(&w, &q);
    }
    free(job);
    if (st == COLL_OK) {
        *p = q;
    }
    return st;
}

uint32_t coll_crossover_algo(const coll_job_params_t *p, coll_kind_t kind, uint64_t bytes)
{
    for (uint32_t i = 0; i < p->nchoices && i < COLL_JOB_CHOICES; i++) {
        if (p->choices[i].kind == (uint32_t)kind && bytes <= p->choices[i].max_bytes) {
            return p->choices[i].algo;
        }
    }
    return COLL_ALGO_AUTO;
}

coll_status_t coll_crossover_start(coll_daemon_t *d)
{
    const char *path = d->cfg.cost_params;
    coll_cost_params_t *cp;
    coll_status_t st = COLL_OK;
    char err[400];

    if (strcmp(path, "none") == 0) {
        coll_info(COLL_SUB_CORE, "cost_params = none: automatic choices by rd_max_bytes");
        return COLL_OK;
    }
    if ((cp = malloc(sizeof(*cp))) == NULL) {
        return COLL_ERR_NOMEM;
    }
    coll_cost_params_default(cp);
    if (path[0] != '\0' && (st = coll_cost_params_load(cp, path, err, sizeof(err))) != COLL_OK) {
        coll_error(COLL_SUB_CORE, "cost_params: %s", err);
        free(cp);
        return st;
    }
    d->cost = cp;
    return COLL_OK;
}

void coll_crossover_stop(coll_daemon_t *d)
{
    free(d->cost);
    d->cost = NULL;
}

void coll_crossover_fill(const coll_daemon_t *d, uint32_t nnodes, uint32_t ranks_per_node,
                         coll_job_params_t *p)
{
    coll_status_t st;

    if (d->cost == NULL) {
        return;
    }
    if ((st = coll_crossover_make(d->cost, nnodes, ranks_per_node, p)) != COLL_OK) {
        coll_warn(COLL_SUB_ENGINE, "the cost model gives no algorithm choice for %u nodes of %u "
                  "ranks (%s): rd_max_bytes decides", nnodes, ranks_per_node,
                  coll_strerror(st));
    }
}
