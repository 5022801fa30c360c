/*
 * Gradient bucketer (collective.h, "Gradient bucketing"), after the Reducer of PyTorch
 * DistributedDataParallel (torch/csrc/distributed/c10d/reducer.cpp) and its description in
 * S. Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel Training",
 * PVLDB 13(12), 2020.
 *
 * Each bucket is one buffer in the job's pool; the parameters' gradient views are slices of it,
 * so backward writes straight into what the daemon reduces (no copy). A bucket is submitted by
 * the grad_ready() that makes its last parameter ready; wait_all() submits what is left (with
 * the gradients nobody reported zeroed), waits, measures the overlap, and after the first
 * iteration rebuilds the layout from the order the gradients arrived in (bucket_plan.c).
 *
 * Lock order: the bucketer's lock, then the communicator's (taken inside the coll_* calls).
 */
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bucket_plan.h"
#include "internal.h"
#include "timeline.h"

/* Keys (coll_op_params_t): key space in bits 36-38, iteration in 16-35, bucket in 0-15. The two
 * highest bucket numbers are the rebuild's own collectives. */
#define KEY_ITER_MASK 0xFFFFFull
#define KEY_BROADCAST 0xFFFFu
#define KEY_AGREE 0xFFFEu
#define MAX_BUCKETS 0xFFFEu
/* Bound of the rebuild's collectives when wait_all() was given no bound. */
#define REBUILD_TIMEOUT_MS 60000
#define MIB 1048576.0

enum { P_PENDING, P_READY, P_MARKED, P_DETECTED };

typedef struct {
    char name[48];
    size_t count;
    coll_dtype_t dtype;
    int state;          /* P_*, this iteration */
} bparam_t;

typedef struct {
    void *mem;                /* pool buffer, >= 64 bytes */
    size_t pending;           /* parameters not reported yet this iteration */
    int submitted;
    int late;                 /* submitted by wait_all() */
    coll_request_t *req;      /* in flight, or finished and not yet freed */
    coll_status_t status;     /* COLL_INPROGRESS until it completed */
    coll_req_timing_t timing;
    uint64_t layout;          /* fingerprint of its parameters (layout_fingerprint()) */
} bbucket_t;

struct coll_bucketer {
    pthread_mutex_t lock;
    coll_comm_t *comm;
    size_t cap, first_cap;
    coll_redop_t op;
    int has_algo;
    coll_algo_t algo;
    int rebuild_pending;
    unsigned key_space;
    char name[24];
    bparam_t *params;
    size_t nparams, cap_params;
    int sealed;
    coll__bplan_t plan;
    bbucket_t *buckets;
    uint64_t iteration;
    int in_wait;              /* wait_all() started this iteration (and may be re-entered) */
    size_t *seen;             /* first iteration: parameters in the order they were reported */
    size_t nseen;
    size_t marked;            /* this iteration: mark_unused() calls */
    size_t detected;          /* this iteration: found unreported by wait_all() */
    uint64_t first_ready_ns;
    uint64_t wait_begin_ns;
    coll_status_t error;      /* first error of this iteration */
    char errmsg[512];
    coll_bucketer_stats_t stats;
};

/* ---- errors ------------------------------------------------------------------------------- */

/* Record @p st with its message on the bucketer and the communicator; returns @p st. */
static coll_status_t fail(coll_bucketer_t *b, coll_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static coll_status_t fail(coll_bucketer_t *b, coll_status_t st, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(b->errmsg, sizeof(b->errmsg), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&b->comm->lock);
    coll__set_error(b->comm, "%s", b->errmsg);
    pthread_mutex_unlock(&b->comm->lock);
    return st;
}

/* The first error of an iteration is the one wait_all() returns. */
static void note_error(coll_bucketer_t *b, coll_status_t st, size_t bucket, const char *what)
{
    char detail[400];

    if (b->error != COLL_OK) {
        return;
    }
    b->error = st;
    snprintf(detail, sizeof(detail), "%s", coll_comm_last_error(b->comm));
    fail(b, st, "%s: bucket %zu of iteration %llu (%zu parameters, %zu elements of %s): %s "
                "failed: %s%s%s", b->name, bucket, (unsigned long long)b->iteration,
         b->plan.buckets[bucket].nparams, b->plan.buckets[bucket].count,
         coll_dtype_name(b->plan.buckets[bucket].dtype), what, coll_strerror(st),
         detail[0] ? ": " : "", detail);
}

/* ---- parameters of create ------------------------------------------------------------------ */

/* A cap in MiB from the environment; @p dflt when unset. */
static coll_status_t env_cap(coll_bucketer_t *b, const char *var, size_t dflt, size_t *out)
{
    const char *v = getenv(var);
    char *end;
    double mb;

    if (v == NULL || v[0] == '\0') {
        *out = dflt;
        return COLL_OK;
    }
    mb = strtod(v, &end);
    if (end == v || *end != '\0' || !isfinite(mb) || mb <= 0.0 || mb > 1048576.0) {
        return fail(b, COLL_ERR_INVALID, "%s=%s: a size in MiB above 0 and up to 1048576 is "
                                         "expected (fractions allowed, e.g. 0.25)", var, v);
    }
    *out = mb * MIB < 1.0 ? 1 : (size_t)(mb * MIB);
    return COLL_OK;
}

static coll_status_t check_params(coll_bucketer_t *b, const coll_bucketer_params_t *p)
{
    uint64_t m = p->field_mask;

    if (((m & COLL_BUCKETER_PARAM_CAP) && p->bucket_cap_bytes == 0) ||
        ((m & COLL_BUCKETER_PARAM_FIRST_CAP) && p->first_bucket_cap_bytes == 0)) {
        return fail(b, COLL_ERR_INVALID, "bucketer: a bucket cap of 0 bytes");
    }
    if ((m & COLL_BUCKETER_PARAM_OP) && (unsigned)p->op >= COLL_REDOP_COUNT) {
        return fail(b, COLL_ERR_INVALID, "bucketer: unknown reduction %d", (int)p->op);
    }
    if ((m & COLL_BUCKETER_PARAM_KEY_SPACE) && p->key_space >= COLL_BUCKETER_KEY_SPACES) {
        return fail(b, COLL_ERR_INVALID, "bucketer: key space %u is not below %d",
                    p->key_space, COLL_BUCKETER_KEY_SPACES);
    }
    if ((m & COLL_BUCKETER_PARAM_ALGO) && (unsigned)p->algo >= COLL_ALGO_COUNT) {
        return fail(b, COLL_ERR_INVALID, "bucketer: unknown algorithm %d", (int)p->algo);
    }
    return COLL_OK;
}

static coll_status_t apply_params(coll_bucketer_t *b, const coll_bucketer_params_t *p)
{
    static const coll_bucketer_params_t none;
    uint64_t m;
    coll_status_t st;

    p = p != NULL ? p : &none;
    m = p->field_mask;
    b->cap = p->bucket_cap_bytes;
    b->first_cap = p->first_bucket_cap_bytes;
    st = check_params(b, p);
    if (st == COLL_OK && !(m & COLL_BUCKETER_PARAM_CAP)) {
        st = env_cap(b, "COLL_BUCKET_CAP_MB", COLL_BUCKETER_DEFAULT_CAP_BYTES, &b->cap);
    }
    if (st == COLL_OK && !(m & COLL_BUCKETER_PARAM_FIRST_CAP)) {
        st = env_cap(b, "COLL_FIRST_BUCKET_CAP_MB", COLL_BUCKETER_DEFAULT_FIRST_CAP_BYTES,
                     &b->first_cap);
    }
    if (st != COLL_OK) {
        return st;
    }
    b->op = (m & COLL_BUCKETER_PARAM_OP) ? p->op : COLL_AVG;
    b->rebuild_pending = (m & COLL_BUCKETER_PARAM_REBUILD) ? p->rebuild != 0 : 1;
    b->key_space = (m & COLL_BUCKETER_PARAM_KEY_SPACE) ? p->key_space : 0;
    b->has_algo = (m & COLL_BUCKETER_PARAM_ALGO) != 0;
    b->algo = p->algo;
    snprintf(b->name, sizeof(b->name), "%s",
             (m & COLL_BUCKETER_PARAM_NAME) && p->name != NULL ? p->name : "bucketer");
    return COLL_OK;
}

coll_status_t coll_bucketer_create(coll_comm_t *comm, const coll_bucketer_params_t *params,
                                   coll_bucketer_t **bucketer_p)
{
    coll_bucketer_t *b = calloc(1, sizeof(*b));
    coll_status_t st;

    if (b == NULL || sodium_init() < 0) { /* layout fingerprints; idempotent, thread-safe */
        free(b);
        return COLL_ERR_NOMEM;
    }
    b->comm = comm;
    st = apply_params(b, params);
    if (st != COLL_OK) {
        free(b);
        return st;
    }
    pthread_mutex_init(&b->lock, NULL);
    *bucketer_p = b;
    return COLL_OK;
}

coll_status_t coll_bucketer_add_param(coll_bucketer_t *b, size_t count, coll_dtype_t dtype,
                                      const char *name, size_t *index_p)
{
    coll_status_t st = COLL_OK;

    pthread_mutex_lock(&b->lock);
    if (b->sealed || coll_dtype_size(dtype) == 0) {
        st = fail(b, COLL_ERR_INVALID, "%s: %s", b->name,
                  b->sealed ? "parameters must be added before the first param_grad, "
                              "grad_ready, mark_unused or wait_all"
                            : "unknown datatype");
    } else if (b->nparams == b->cap_params) {
        size_t cap = b->cap_params ? 2 * b->cap_params : 64;
        bparam_t *np = realloc(b->params, cap * sizeof(*np));
        st = np != NULL ? COLL_OK : COLL_ERR_NOMEM;
        if (np != NULL) {
            b->params = np;
            b->cap_params = cap;
        }
    }
    if (st == COLL_OK) {
        bparam_t *p = &b->params[b->nparams];
        memset(p, 0, sizeof(*p));
        p->count = count;
        p->dtype = dtype;
        snprintf(p->name, sizeof(p->name), "%s", name != NULL ? name : "");
        if (index_p != NULL) {
            *index_p = b->nparams;
        }
        b->nparams++;
    }
    pthread_mutex_unlock(&b->lock);
    return st;
}

/* ---- layout and pool memory ----------------------------------------------------------------- */

static size_t bucket_bytes(const coll__bp_bucket_t *bk)
{
    size_t bytes = bk->count * coll_dtype_size(bk->dtype);
    return bytes < 64 ? 64 : bytes;
}

static void free_bucket_mem(coll_bucketer_t *b, bbucket_t *bks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (bks[i].mem != NULL) {
            coll_mem_free(b->comm, bks[i].mem);
            bks[i].mem = NULL;
        }
    }
}

/* The bucket's layout as the daemons compare it across ranks (coll_op_params_t.layout): a
 * BLAKE2b digest (libsodium) of each member's index, count, dtype and name in layout order,
 * never 0 (which means "none"). */
static uint64_t layout_fingerprint(const coll_bucketer_t *b, const coll__bplan_t *plan,
                                   size_t bucket)
{
    const coll__bp_bucket_t *bk = &plan->buckets[bucket];
    crypto_generichash_state h;
    unsigned char out[crypto_generichash_BYTES_MIN];
    uint64_t fp;

    crypto_generichash_init(&h, NULL, 0, sizeof(out));
    for (size_t k = bk->first; k < bk->first + bk->nparams; k++) {
        const bparam_t *p = &b->params[plan->members[k]];
        uint64_t rec[3] = {plan->members[k], p->count, (uint64_t)p->dtype};
        crypto_generichash_update(&h, (const unsigned char *)rec, sizeof(rec));
        crypto_generichash_update(&h, (const unsigned char *)p->name, strlen(p->name) + 1);
    }
    crypto_generichash_final(&h, out, sizeof(out));
    memcpy(&fp, out, sizeof(fp));
    return fp != 0 ? fp : 1;
}

/* One zeroed pool buffer per bucket of @p plan; all or nothing. */
static coll_status_t alloc_buckets(coll_bucketer_t *b, const coll__bplan_t *plan,
                                   bbucket_t **bks_p)
{
    bbucket_t *bks = calloc(plan->nbuckets ? plan->nbuckets : 1, sizeof(*bks));
    coll_status_t st = bks != NULL ? COLL_OK : COLL_ERR_NOMEM;

    for (size_t i = 0; st == COLL_OK && i < plan->nbuckets; i++) {
        size_t bytes = bucket_bytes(&plan->buckets[i]);
        st = coll_mem_alloc(b->comm, bytes, &bks[i].mem);
        if (st != COLL_OK) {
            fail(b, st, "%s: allocating bucket %zu of %zu (%zu bytes) in the pool: %s", b->name,
                 i, plan->nbuckets, bytes, coll_comm_last_error(b->comm));
            free_bucket_mem(b, bks, i);
        } else {
            memset(bks[i].mem, 0, bytes);
            bks[i].layout = layout_fingerprint(b, plan, i);
        }
    }
    if (st != COLL_OK) {
        free(bks);
        return st;
    }
    *bks_p = bks;
    return COLL_OK;
}

static coll_status_t build_plan(coll_bucketer_t *b, const size_t *order, coll__bplan_t *plan)
{
    coll__bp_param_t *pp = malloc((b->nparams ? b->nparams : 1) * sizeof(*pp));
    coll_status_t st;

    if (pp == NULL) {
        return COLL_ERR_NOMEM;
    }
    for (size_t p = 0; p < b->nparams; p++) {
        pp[p] = (coll__bp_param_t){b->params[p].count, b->params[p].dtype};
    }
    st = coll__bplan_build(pp, b->nparams, order, b->first_cap, b->cap, plan);
    free(pp);
    if (st == COLL_OK && plan->nbuckets > MAX_BUCKETS) {
        coll__bplan_free(plan);
        return fail(b, COLL_ERR_INVALID, "%s: more than %u buckets; raise the bucket cap",
                    b->name, MAX_BUCKETS);
    }
    return st == COLL_ERR_INVALID ? fail(b, st, "%s: invalid parameter order", b->name) : st;
}

static void reset_iteration(coll_bucketer_t *b)
{
    for (size_t p = 0; p < b->nparams; p++) {
        b->params[p].state = P_PENDING;
    }
    for (size_t i = 0; i < b->plan.nbuckets; i++) {
        bbucket_t *bk = &b->buckets[i];
        bk->pending = b->plan.buckets[i].nparams;
        bk->submitted = bk->late = 0;
        bk->req = NULL;
        bk->status = COLL_INPROGRESS;
    }
    b->in_wait = 0;
    b->marked = b->detected = 0;
    b->first_ready_ns = b->wait_begin_ns = 0;
    b->error = COLL_OK;
}

/* Lay out the registered parameters in reverse order and allocate the buckets. */
static coll_status_t seal(coll_bucketer_t *b)
{
    size_t n = b->nparams ? b->nparams : 1;
    size_t *order;
    coll__bplan_t plan = {0};
    coll_status_t st;

    if (b->sealed) {
        return COLL_OK;
    }
    if (b->seen == NULL) { /* kept when a seal fails and is tried again */
        b->seen = malloc(n * sizeof(*b->seen));
    }
    if (b->seen == NULL || (order = malloc(n * sizeof(*order))) == NULL) {
        return COLL_ERR_NOMEM;
    }
    coll__bplan_reverse_order(order, b->nparams);
    st = build_plan(b, order, &plan);
    free(order);
    if (st == COLL_OK && (st = alloc_buckets(b, &plan, &b->buckets)) != COLL_OK) {
        coll__bplan_free(&plan);
    }
    if (st != COLL_OK) {
        return st;
    }
    b->plan = plan;
    b->sealed = 1;
    reset_iteration(b);
    return COLL_OK;
}

static void *view_of(const coll_bucketer_t *b, const coll__bplan_t *plan, const bbucket_t *bks,
                     size_t p)
{
    size_t es = coll_dtype_size(b->params[p].dtype);
    return (uint8_t *)bks[plan->bucket_of[p]].mem + plan->offset_of[p] * es;
}

/* ---- submission ---------------------------------------------------------------------------- */

static uint64_t make_key(const coll_bucketer_t *b, uint64_t iteration, unsigned bucket)
{
    return ((uint64_t)b->key_space << 36) | ((iteration & KEY_ITER_MASK) << 16) | bucket;
}

static coll_op_params_t op_params(const coll_bucketer_t *b, uint64_t iteration, unsigned bucket)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_KEY, .key = make_key(b, iteration, bucket),
                          .algo = b->algo};

    p.field_mask |= b->has_algo ? COLL_OP_PARAM_ALGO : 0;
    return p;
}

static coll_status_t submit_bucket(coll_bucketer_t *b, size_t i)
{
    const coll__bp_bucket_t *pl = &b->plan.buckets[i];
    bbucket_t *bk = &b->buckets[i];
    coll_op_params_t op = op_params(b, b->iteration, (unsigned)i);
    char track[32], name[48];
    coll_status_t st;

    op.field_mask |= COLL_OP_PARAM_LAYOUT;
    op.layout = bk->layout;
    bk->submitted = 1;
    st = coll_allreduce_async(b->comm, bk->mem, bk->mem, pl->count, pl->dtype, b->op, &op,
                              &bk->req);
    if (st == COLL_INPROGRESS) {
        snprintf(track, sizeof(track), "%.16s bucket %zu", b->name, i);
        snprintf(name, sizeof(name), "bucket %zu", i);
        coll__req_label(bk->req, track, name, b->iteration, (long)i);
        return COLL_OK;
    }
    bk->req = NULL;
    bk->status = st;
    if (st != COLL_OK) {
        note_error(b, st, i, "submitting its allreduce");
    }
    return st;
}

/* Seal, then check that @p param is registered. Lock held. */
static coll_status_t sealed_param(coll_bucketer_t *b, size_t param)
{
    coll_status_t st = seal(b);
    if (st == COLL_OK && param >= b->nparams) {
        st = fail(b, COLL_ERR_INVALID, "%s: parameter %zu is not registered (%zu parameters)",
                  b->name, param, b->nparams);
    }
    return st;
}

/* @p p (registered) is reported (ready, or marked unused) for this iteration. */
static coll_status_t take(coll_bucketer_t *b, size_t p, int state)
{
    bbucket_t *bk;

    if (b->params[p].state != P_PENDING) {
        return fail(b, COLL_ERR_INVALID, "%s: parameter %zu (%s) was already reported in "
                    "iteration %llu", b->name, p, b->params[p].name,
                    (unsigned long long)b->iteration);
    }
    b->params[p].state = state;
    if (b->first_ready_ns == 0) {
        b->first_ready_ns = coll__now_ns();
    }
    if (b->rebuild_pending && b->iteration == 0) {
        b->seen[b->nseen++] = p;
    }
    bk = &b->buckets[b->plan.bucket_of[p]];
    return --bk->pending == 0 ? submit_bucket(b, b->plan.bucket_of[p]) : COLL_OK;
}

static coll_status_t report(coll_bucketer_t *b, size_t param, int state)
{
    coll_status_t st;

    pthread_mutex_lock(&b->lock);
    st = sealed_param(b, param);
    if (st == COLL_OK && state == P_MARKED && b->params[param].state == P_PENDING) {
        memset(view_of(b, &b->plan, b->buckets, param), 0,
               b->params[param].count * coll_dtype_size(b->params[param].dtype));
        b->marked++;
    }
    if (st == COLL_OK) {
        st = take(b, param, state);
    }
    pthread_mutex_unlock(&b->lock);
    return st;
}

coll_status_t coll_bucketer_grad_ready(coll_bucketer_t *b, size_t param)
{
    return report(b, param, P_READY);
}

coll_status_t coll_bucketer_mark_unused(coll_bucketer_t *b, size_t param)
{
    return report(b, param, P_MARKED);
}

/* wait_all(): the buckets nobody completed; their unreported parameters are zeroed. */
static void submit_rest(coll_bucketer_t *b)
{
    for (size_t i = 0; i < b->plan.nbuckets; i++) {
        const coll__bp_bucket_t *pl = &b->plan.buckets[i];
        if (b->buckets[i].submitted) {
            continue;
        }
        for (size_t k = 0; k < pl->nparams; k++) {
            size_t p = b->plan.members[pl->first + k];
            if (b->params[p].state == P_PENDING) {
                memset(view_of(b, &b->plan, b->buckets, p), 0,
                       b->params[p].count * coll_dtype_size(b->params[p].dtype));
                b->detected++;
                take(b, p, P_DETECTED);
            }
        }
        b->buckets[i].late = 1;
    }
}

/* ---- waiting and measuring ----------------------------------------------------------------- */

static int ms_left(uint64_t deadline_ns)
{
    uint64_t now = coll__now_ns();
    if (deadline_ns == UINT64_MAX) {
        return -1;
    }
    return now >= deadline_ns ? 0 : (int)((deadline_ns - now + 999999) / 1000000);
}

static size_t count_pending(const coll_bucketer_t *b, size_t *first)
{
    size_t n = 0;

    for (size_t i = 0; i < b->plan.nbuckets; i++) {
        if (b->buckets[i].req != NULL && b->buckets[i].status == COLL_INPROGRESS) {
            *first = n++ == 0 ? i : *first;
        }
    }
    return n;
}

static coll_status_t wait_buckets(coll_bucketer_t *b, uint64_t deadline_ns, int timeout_ms)
{
    for (size_t i = 0; i < b->plan.nbuckets; i++) {
        bbucket_t *bk = &b->buckets[i];
        coll_status_t st;
        size_t first = 0, n;

        if (bk->req == NULL || bk->status != COLL_INPROGRESS) {
            continue;
        }
        st = coll_req_wait(bk->req, ms_left(deadline_ns));
        /* Our own bound ran out only when the request still runs and the deadline passed; a
         * COLL_ERR_TIMEDOUT before that is the daemon's verdict (or the library's on a silent
         * daemon), whose message names what was missing: report it as the bucket's error. */
        if (st == COLL_ERR_TIMEDOUT && coll_req_test(bk->req) == COLL_INPROGRESS &&
            ms_left(deadline_ns) == 0) {
            n = count_pending(b, &first);
            return fail(b, st, "%s: iteration %llu: bucket %zu (%zu bytes) and %zu more of %zu "
                        "not complete after %d ms (did every rank reach wait_all?)", b->name,
                        (unsigned long long)b->iteration, first,
                        bucket_bytes(&b->plan.buckets[first]), n - 1, b->plan.nbuckets,
                        timeout_ms);
        }
        bk->status = st;
        if (st == COLL_OK) {
            coll_req_timing(bk->req, &bk->timing);
        } else {
            note_error(b, st, i, "its allreduce");
        }
    }
    return COLL_OK;
}

typedef struct {
    uint64_t begin, end;
} interval_t;

static int interval_cmp(const void *a, const void *b)
{
    const interval_t *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Union and sum of the buckets' [submit, done] (done as the daemon reported it). */
static void comm_time(const coll_bucketer_t *b, uint64_t *union_ns, uint64_t *sum_ns)
{
    interval_t *iv = malloc((b->plan.nbuckets ? b->plan.nbuckets : 1) * sizeof(*iv));
    uint64_t cover = 0, sum = 0, cur_b = 0, cur_e = 0;
    size_t n = 0;

    for (size_t i = 0; iv != NULL && i < b->plan.nbuckets; i++) {
        const coll_req_timing_t *t = &b->buckets[i].timing;
        uint64_t done = t->done_ns ? t->done_ns : t->complete_ns;
        if (b->buckets[i].status == COLL_OK && t->submit_ns != 0 && done >= t->submit_ns) {
            iv[n++] = (interval_t){t->submit_ns, done};
            sum += done - t->submit_ns;
        }
    }
    if (n > 0) {
        qsort(iv, n, sizeof(*iv), interval_cmp);
        cur_b = iv[0].begin;
        cur_e = iv[0].end;
    }
    for (size_t i = 1; i < n; i++) {
        if (iv[i].begin > cur_e) {
            cover += cur_e - cur_b;
            cur_b = iv[i].begin;
        }
        cur_e = iv[i].end > cur_e ? iv[i].end : cur_e;
    }
    *union_ns = cover + (cur_e - cur_b);
    *sum_ns = sum;
    free(iv);
}

static void record_stats(coll_bucketer_t *b, uint64_t wait_end_ns)
{
    coll_bucketer_stats_t *s = &b->stats;
    size_t late = 0;

    for (size_t i = 0; i < b->plan.nbuckets; i++) {
        late += b->buckets[i].late;
    }
    s->unused_marked = b->marked;
    s->unused_detected = b->detected;
    s->unused_detected_total += b->detected;
    s->buckets_late = late;
    s->first_ready_ns = b->first_ready_ns;
    s->wait_begin_ns = b->wait_begin_ns;
    s->wait_end_ns = wait_end_ns;
    comm_time(b, &s->comm_ns, &s->comm_sum_ns);
    s->exposed_ns = wait_end_ns - b->wait_begin_ns;
    s->overlap_efficiency = s->comm_ns == 0 ? 1.0 : 1.0 - (double)s->exposed_ns / (double)s->comm_ns;
    s->overlap_efficiency = s->overlap_efficiency < 0.0 ? 0.0 : s->overlap_efficiency;
}

/* Close the iteration: statistics, requests freed (into the timeline), state reset. */
static void finish_iteration(coll_bucketer_t *b)
{
    uint64_t end = coll__now_ns();
    char name[48];

    record_stats(b, end);
    for (size_t i = 0; i < b->plan.nbuckets; i++) {
        coll_req_free(b->buckets[i].req);
        b->buckets[i].req = NULL;
    }
    snprintf(name, sizeof(name), "%.24s wait_all", b->name);
    coll_timeline_span(b->comm, "step", name, b->wait_begin_ns, end);
    if (b->error == COLL_OK) {
        b->stats.iterations++;
    }
    b->iteration++;
    reset_iteration(b);
}

/* ---- rebuild ------------------------------------------------------------------------------- */

/* Submit a small collective of the rebuild and wait for it until @p deadline_ns. */
static coll_status_t small_collective(coll_bucketer_t *b, int broadcast, void *buf, size_t count,
                                      uint64_t deadline_ns)
{
    coll_op_params_t op = op_params(b, 0, broadcast ? KEY_BROADCAST : KEY_AGREE);
    coll_request_t *r = NULL;
    coll_status_t st;

    st = broadcast ? coll_broadcast_async(b->comm, buf, buf, count, COLL_INT32, 0, &op, &r)
                   : coll_allreduce_async(b->comm, buf, buf, count, COLL_INT32, COLL_MIN, &op, &r);
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(r, ms_left(deadline_ns));
        coll_req_free(r);
    }
    if (st != COLL_OK) {
        fail(b, st, "%s: rebuilding the buckets: %s of %s failed: %s (%s); the layout stays",
             b->name, broadcast ? "the broadcast" : "the agreement",
             broadcast ? "rank 0's ready order" : "all ranks", coll_strerror(st),
             coll_comm_last_error(b->comm));
    }
    return st;
}

/* Rank 0's ready order, on every rank: a permutation of the parameters. */
static coll_status_t agree_order(coll_bucketer_t *b, uint64_t deadline_ns, size_t *order)
{
    size_t n = b->nparams;
    int32_t *buf = NULL;
    coll_status_t st;

    st = coll_mem_alloc(b->comm, (n + 16) * sizeof(int32_t), (void **)&buf);
    if (st != COLL_OK) {
        return fail(b, st, "%s: rebuilding: no pool room for the ready order: %s", b->name,
                    coll_comm_last_error(b->comm));
    }
    for (size_t i = 0; i < n; i++) {
        buf[i] = (int32_t)b->seen[i];
    }
    if (b->comm->world_size > 1) {
        st = small_collective(b, 1, buf, n, deadline_ns);
    }
    for (size_t i = 0; st == COLL_OK && i < n; i++) {
        order[i] = (size_t)buf[i];
    }
    coll_mem_free(b->comm, buf);
    return st;
}

/* Every rank could allocate its new buckets (one int32 MIN allreduce); *all_ok set. */
static coll_status_t agree_ok(coll_bucketer_t *b, int ok, uint64_t deadline_ns, int *all_ok)
{
    int32_t *buf = NULL;
    coll_status_t st = coll_mem_alloc(b->comm, 64, (void **)&buf);

    if (st != COLL_OK) {
        return fail(b, st, "%s: rebuilding: no pool room for the agreement: %s", b->name,
                    coll_comm_last_error(b->comm));
    }
    buf[0] = ok;
    st = b->comm->world_size > 1 ? small_collective(b, 0, buf, 1, deadline_ns) : COLL_OK;
    *all_ok = buf[0] != 0;
    coll_mem_free(b->comm, buf);
    return st;
}

/* Copy every reduced gradient into the new layout, then let the old buckets go. */
static void move_grads(coll_bucketer_t *b, coll__bplan_t *plan, bbucket_t *bks)
{
    for (size_t p = 0; p < b->nparams; p++) {
        memcpy(view_of(b, plan, bks, p), view_of(b, &b->plan, b->buckets, p),
               b->params[p].count * coll_dtype_size(b->params[p].dtype));
    }
    free_bucket_mem(b, b->buckets, b->plan.nbuckets);
    free(b->buckets);
    coll__bplan_free(&b->plan);
    b->plan = *plan;
    b->buckets = bks;
    b->stats.layout_changed = 1;
    reset_iteration(b);
}

static coll_status_t rebuild(coll_bucketer_t *b, uint64_t deadline_ns)
{
    size_t *order = malloc((b->nparams ? b->nparams : 1) * sizeof(*order));
    coll__bplan_t plan = {0};
    bbucket_t *bks = NULL;
    coll_status_t st, alloc_st = COLL_OK;
    int all_ok = 0;

    b->rebuild_pending = 0;
    st = order != NULL ? agree_order(b, deadline_ns, order) : COLL_ERR_NOMEM;
    if (st == COLL_OK) {
        st = build_plan(b, order, &plan);
    }
    free(order);
    if (st != COLL_OK || coll__bplan_equal(&plan, &b->plan)) {
        b->stats.rebuilt = st == COLL_OK;
        coll__bplan_free(&plan);
        return st;
    }
    alloc_st = alloc_buckets(b, &plan, &bks);
    st = agree_ok(b, alloc_st == COLL_OK, deadline_ns, &all_ok);
    if (st != COLL_OK || !all_ok) {
        if (bks != NULL) {
            free_bucket_mem(b, bks, plan.nbuckets);
            free(bks);
        }
        coll__bplan_free(&plan);
        return st != COLL_OK ? st : alloc_st;
    }
    move_grads(b, &plan, bks);
    b->stats.rebuilt = 1;
    return COLL_OK;
}

/* ---- wait_all ------------------------------------------------------------------------------ */

coll_status_t coll_bucketer_wait_all(coll_bucketer_t *b, int timeout_ms)
{
    uint64_t start = coll__now_ns();
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000000;
    coll_status_t st;

    pthread_mutex_lock(&b->lock);
    st = seal(b);
    if (st == COLL_OK && !b->in_wait) {
        b->in_wait = 1;
        b->wait_begin_ns = start;
        submit_rest(b);
    }
    if (st == COLL_OK) {
        st = wait_buckets(b, deadline, timeout_ms);
    }
    if (st == COLL_OK) {
        int first = b->iteration == 0;
        st = b->error;
        finish_iteration(b);
        if (st == COLL_OK && first && b->rebuild_pending) {
            uint64_t bound = start + (uint64_t)REBUILD_TIMEOUT_MS * 1000000;
            st = rebuild(b, deadline < bound ? deadline : bound);
        }
    }
    pthread_mutex_unlock(&b->lock);
    return st;
}

/* ---- queries and destroy ------------------------------------------------------------------- */

coll_status_t coll_bucketer_param_grad(coll_bucketer_t *b, size_t param, void **grad_p)
{
    coll_status_t st;

    pthread_mutex_lock(&b->lock);
    if ((st = sealed_param(b, param)) == COLL_OK) {
        *grad_p = view_of(b, &b->plan, b->buckets, param);
    }
    pthread_mutex_unlock(&b->lock);
    return st;
}

coll_status_t coll_bucketer_param_info(coll_bucketer_t *b, size_t param,
                                       coll_bucketer_param_info_t *info)
{
    coll_status_t st;

    pthread_mutex_lock(&b->lock);
    if ((st = sealed_param(b, param)) == COLL_OK) {
        const bparam_t *p = &b->params[param];
        *info = (coll_bucketer_param_info_t){b->plan.bucket_of[param], b->plan.offset_of[param],
                                             p->count, p->dtype, p->name};
    }
    pthread_mutex_unlock(&b->lock);
    return st;
}

coll_status_t coll_bucketer_bucket_info(coll_bucketer_t *b, size_t bucket,
                                        coll_bucketer_bucket_info_t *info)
{
    coll_status_t st;

    pthread_mutex_lock(&b->lock);
    st = seal(b);
    if (st == COLL_OK && bucket >= b->plan.nbuckets) {
        st = fail(b, COLL_ERR_INVALID, "%s: bucket %zu does not exist (%zu buckets)", b->name,
                  bucket, b->plan.nbuckets);
    }
    if (st == COLL_OK) {
        const coll__bp_bucket_t *bk = &b->plan.buckets[bucket];
        *info = (coll_bucketer_bucket_info_t){bk->count, bk->dtype, bk->nparams,
                                              b->plan.members + bk->first};
    }
    pthread_mutex_unlock(&b->lock);
    return st;
}

coll_status_t coll_bucketer_stats(coll_bucketer_t *b, coll_bucketer_stats_t *stats)
{
    pthread_mutex_lock(&b->lock);
    *stats = b->stats;
    stats->num_params = b->nparams;
    stats->num_buckets = b->sealed ? b->plan.nbuckets : 0;
    stats->bucket_bytes = 0;
    for (size_t i = 0; b->sealed && i < b->plan.nbuckets; i++) {
        stats->bucket_bytes += b->plan.buckets[i].count * coll_dtype_size(b->plan.buckets[i].dtype);
    }
    pthread_mutex_unlock(&b->lock);
    return COLL_OK;
}

const char *coll_bucketer_last_error(const coll_bucketer_t *b)
{
    return b->errmsg;
}

void coll_bucketer_destroy(coll_bucketer_t *b)
{
    if (b == NULL) {
        return;
    }
    for (size_t i = 0; b->sealed && i < b->plan.nbuckets; i++) {
        bbucket_t *bk = &b->buckets[i];
        /* A bucket the daemon may still write keeps its memory until coll_comm_destroy(). */
        int busy = bk->req != NULL && coll_req_test(bk->req) == COLL_INPROGRESS;
        coll_req_free(bk->req);
        if (!busy && bk->mem != NULL) {
            coll_mem_free(b->comm, bk->mem);
        }
    }
    free(b->buckets);
    coll__bplan_free(&b->plan);
    free(b->params);
    free(b->seen);
    pthread_mutex_destroy(&b->lock);
    free(b);
}
