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
 * iteration rebuilds the plan from the order the gradients arrived in (plan.c).
 *
 * Lock order: the bucketer's lock, then the communicator's (taken inside the coll_* calls).
 */
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/bucketer/bucketer.h"
#include "client/trace/timeline.h"
#include "common/compression.h"
#include "kernels/reduce.h"

/* ---- errors ------------------------------------------------------------------------------- */

coll_status_t coll__bk_fail(coll_bucketer_t *b, coll_status_t st, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(b->errmsg, sizeof(b->errmsg), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&b->comm->conn->lock);
    coll__set_error(b->comm, "%s", b->errmsg);
    pthread_mutex_unlock(&b->comm->conn->lock);
    return st;
}

/* The first error of an iteration is the one wait_all() returns. */
void coll__bk_note_error(coll_bucketer_t *b, coll_status_t st, size_t bucket, const char *what)
{
    char detail[400];

    if (b->error != COLL_OK) {
        return;
    }
    b->error = st;
    snprintf(detail, sizeof(detail), "%s", coll_comm_last_error(b->comm));
    coll__bk_fail(b, st, "%s: bucket %zu of iteration %llu (%zu parameters, %zu elements of %s): %s "
                "failed%s%s", b->name, bucket, (unsigned long long)b->iteration,
         b->plan.buckets[bucket].nparams, b->plan.buckets[bucket].count,
         coll_dtype_name(b->plan.buckets[bucket].dtype), what, detail[0] ? ": " : "", detail);
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
        return coll__bk_fail(b, COLL_ERR_INVALID, "coll_bucketer_create: %s=%s: a size in MiB "
                             "above 0 and up to 1048576 is expected (fractions allowed, e.g. "
                             "0.25)", var, v);
    }
    *out = mb * MIB < 1.0 ? 1 : (size_t)(mb * MIB);
    return COLL_OK;
}

static coll_status_t check_params(coll_bucketer_t *b, const coll_bucketer_params_t *p)
{
    uint64_t m = p->field_mask;

    if (((m & COLL_BUCKETER_PARAM_CAP) && p->bucket_cap_bytes == 0) ||
        ((m & COLL_BUCKETER_PARAM_FIRST_CAP) && p->first_bucket_cap_bytes == 0)) {
        return coll__bk_fail(b, COLL_ERR_INVALID, "coll_bucketer_create: a bucket cap of 0 bytes");
    }
    if ((m & COLL_BUCKETER_PARAM_OP) && (unsigned)p->op >= COLL_REDOP_COUNT) {
        return coll__bk_fail(b, COLL_ERR_INVALID, "coll_bucketer_create: unknown reduction %d",
                             (int)p->op);
    }
    if ((m & COLL_BUCKETER_PARAM_KEY_SPACE) && p->key_space >= COLL_BUCKETER_KEY_SPACES) {
        return coll__bk_fail(b, COLL_ERR_INVALID, "coll_bucketer_create: key space %u is not "
                             "below %d", p->key_space, COLL_BUCKETER_KEY_SPACES);
    }
    if ((m & COLL_BUCKETER_PARAM_ALGO) && (unsigned)p->algo >= COLL_ALGO_COUNT) {
        return coll__bk_fail(b, COLL_ERR_INVALID, "coll_bucketer_create: unknown algorithm %d",
                             (int)p->algo);
    }
    if ((m & COLL_BUCKETER_PARAM_COMPRESSION) &&
        coll__compression_check(&p->compression) != COLL_OK) {
        return coll__bk_fail(b, COLL_ERR_INVALID, "coll_bucketer_create: invalid compression "
                             "(method %d)", (int)p->compression.method);
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
    b->redop = (m & COLL_BUCKETER_PARAM_OP) ? p->op : COLL_AVG;
    b->rebuild_pending = (m & COLL_BUCKETER_PARAM_REBUILD) ? p->rebuild != 0 : 1;
    b->key_space = (m & COLL_BUCKETER_PARAM_KEY_SPACE) ? p->key_space : 0;
    b->has_algo = (m & COLL_BUCKETER_PARAM_ALGO) != 0;
    b->algo = p->algo;
    if (m & COLL_BUCKETER_PARAM_COMPRESSION) {
        b->compression = p->compression;
    } else {
        coll_comm_compression(b->comm, &b->compression);
    }
    snprintf(b->name, sizeof(b->name), "%s",
             (m & COLL_BUCKETER_PARAM_NAME) && p->name != NULL ? p->name : "bucketer");
    return COLL_OK;
}

coll_status_t coll_bucketer_create(coll_comm_t *comm, const coll_bucketer_params_t *params,
                                   coll_bucketer_t **bucketer_p)
{
    coll_bucketer_t *b;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, comm);
    COLL_ARG_CHECK(comm, bucketer_p);
    b = calloc(1, sizeof(*b));
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

coll_status_t coll_bucketer_add_param(coll_bucketer_t *bucketer, size_t count, coll_dtype_t dtype,
                                      const char *name, size_t *index_p)
{
    coll_bucketer_t *b = bucketer;
    coll_status_t st = COLL_OK;

    COLL_ARG_CHECK(NULL, bucketer);
    pthread_mutex_lock(&b->lock);
    if (b->sealed || coll_dtype_size(dtype) == 0) {
        st = coll__bk_fail(b, COLL_ERR_INVALID, "coll_bucketer_add_param: %s: %s", b->name,
                  b->sealed ? "parameters must be added before the first param_grad, "
                              "grad_ready, mark_unused or wait_all"
                            : "unknown datatype");
    } else if (!coll_reduce_op_fits(dtype, b->redop)) {
        st = coll__bk_fail(b, COLL_ERR_INVALID, "coll_bucketer_add_param: %s: parameter %s: "
                           "reduction %s does not apply to %s (the bitwise reductions take "
                           "integer dtypes)", b->name,
                           name != NULL ? name : "", coll_redop_name(b->redop),
                           coll_dtype_name(dtype));
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

coll_status_t coll_bucketer_param_shape(coll_bucketer_t *bucketer, size_t param, uint64_t rows,
                                        uint64_t cols)
{
    coll_bucketer_t *b = bucketer;
    coll_status_t st = COLL_OK;

    COLL_ARG_CHECK(NULL, bucketer);
    pthread_mutex_lock(&b->lock);
    if (b->sealed || param >= b->nparams || rows == 0 || cols == 0 ||
        rows > UINT64_MAX / cols || rows * cols != b->params[param].count) {
        st = coll__bk_fail(b, COLL_ERR_INVALID, "coll_bucketer_param_shape: %s: shape %llu x "
                           "%llu of parameter %zu (%zu parameters, sealed %d)", b->name,
                           (unsigned long long)rows, (unsigned long long)cols, param,
                           b->nparams, b->sealed);
    } else {
        b->params[param].rows = rows;
        b->params[param].cols = cols;
    }
    pthread_mutex_unlock(&b->lock);
    return st;
}

/* ---- plan, fingerprints and pool memory ---------------------------------------------------- */

size_t coll__bk_bucket_bytes(const coll__bp_bucket_t *bk)
{
    size_t bytes = bk->count * coll_dtype_size(bk->dtype);
    return bytes < 64 ? 64 : bytes;
}

void coll__bk_free_bucket_mem(coll_bucketer_t *b, bbucket_t *bks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (bks[i].mem != NULL) {
            coll_mem_free(b->comm, bks[i].mem);
            bks[i].mem = NULL;
        }
    }
}

/* The bucket's layout as the daemons compare it across ranks (coll_op_params_t.layout): a
 * BLAKE2b digest (libsodium) of each member's index, count, dtype and name in plan order,
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

/* PowerSGD (and auto, which may choose it) cut a bucket by its tensors: tell the daemon their
 * shapes under the bucket's fingerprint. Parameters without elements are left out. */
static coll_status_t register_layout(coll_bucketer_t *b, const coll__bplan_t *plan, size_t i,
                                     uint64_t layout)
{
    const coll__bp_bucket_t *bk = &plan->buckets[i];
    uint64_t *shape = malloc(2 * (bk->nparams + 1) * sizeof(uint64_t));
    size_t n = 0;
    coll_status_t st = COLL_OK;

    if (shape == NULL) {
        return COLL_ERR_NOMEM;
    }
    for (size_t k = bk->first; k < bk->first + bk->nparams; k++) {
        const bparam_t *p = &b->params[plan->members[k]];
        if (p->count > 0) {
            shape[2 * n] = p->rows != 0 ? p->rows : p->count;
            shape[2 * n + 1] = p->rows != 0 ? p->cols : 1;
            n++;
        }
    }
    if (n > 0) {
        st = coll_layout_register(b->comm, layout, n, shape);
    }
    free(shape);
    if (st != COLL_OK) {
        coll__bk_fail(b, st, "%s: registering the shapes of bucket %zu: %s", b->name, i,
                      coll_comm_last_error(b->comm));
    }
    return st;
}

static int needs_shapes(const coll_bucketer_t *b)
{
    return b->compression.method == COLL_COMPRESS_POWERSGD ||
           b->compression.method == COLL_COMPRESS_AUTO;
}

/* One zeroed pool buffer per bucket of @p plan; all or nothing. */
coll_status_t coll__bk_alloc_buckets(coll_bucketer_t *b, const coll__bplan_t *plan,
                                   bbucket_t **bks_p)
{
    bbucket_t *bks = calloc(plan->nbuckets ? plan->nbuckets : 1, sizeof(*bks));
    coll_status_t st = bks != NULL ? COLL_OK : COLL_ERR_NOMEM;

    for (size_t i = 0; st == COLL_OK && i < plan->nbuckets; i++) {
        size_t bytes = coll__bk_bucket_bytes(&plan->buckets[i]);
        st = coll_mem_alloc(b->comm, bytes, &bks[i].mem);
        if (st != COLL_OK) {
            coll__bk_fail(b, st, "%s: allocating bucket %zu of %zu (%zu bytes) in the pool: %s", b->name,
                 i, plan->nbuckets, bytes, coll_comm_last_error(b->comm));
            coll__bk_free_bucket_mem(b, bks, i);
        } else {
            memset(bks[i].mem, 0, bytes);
            bks[i].layout = layout_fingerprint(b, plan, i);
            st = needs_shapes(b) ? register_layout(b, plan, i, bks[i].layout) : COLL_OK;
            if (st != COLL_OK) {
                coll__bk_free_bucket_mem(b, bks, i + 1);
            }
        }
    }
    if (st != COLL_OK) {
        free(bks);
        return st;
    }
    *bks_p = bks;
    return COLL_OK;
}

coll_status_t coll__bk_build_plan(coll_bucketer_t *b, const size_t *order, coll__bplan_t *plan)
{
    coll__bp_param_t *pp = malloc((b->nparams ? b->nparams : 1) * sizeof(*pp));
    coll_status_t st;

    if (pp == NULL) {
        return COLL_ERR_NOMEM;
    }
    for (size_t p = 0; p < b->nparams; p++) {
        pp[p] = (coll__bp_param_t){.count = b->params[p].count, .dtype = b->params[p].dtype};
    }
    st = coll__bplan_build(pp, b->nparams, order, b->first_cap, b->cap, plan);
    free(pp);
    if (st == COLL_OK && plan->nbuckets > MAX_BUCKETS) {
        coll__bplan_free(plan);
        return coll__bk_fail(b, COLL_ERR_INVALID, "%s: more than %u buckets; raise the bucket cap",
                    b->name, MAX_BUCKETS);
    }
    return st == COLL_ERR_INVALID ? coll__bk_fail(b, st, "%s: invalid parameter order", b->name) : st;
}

void coll__bk_reset_iteration(coll_bucketer_t *b)
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
coll_status_t coll__bk_seal(coll_bucketer_t *b)
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
    st = coll__bk_build_plan(b, order, &plan);
    free(order);
    if (st == COLL_OK && (st = coll__bk_alloc_buckets(b, &plan, &b->buckets)) != COLL_OK) {
        coll__bplan_free(&plan);
    }
    if (st != COLL_OK) {
        return st;
    }
    b->plan = plan;
    b->sealed = 1;
    coll__bk_reset_iteration(b);
    return COLL_OK;
}

void *coll__bk_view_of(const coll_bucketer_t *b, const coll__bplan_t *plan, const bbucket_t *bks,
                     size_t p)
{
    size_t es = coll_dtype_size(b->params[p].dtype);
    return (uint8_t *)bks[plan->bucket_of[p]].mem + plan->offset_of[p] * es;
}

/* ---- submission ---------------------------------------------------------------------------- */

static uint64_t make_key(const coll_bucketer_t *b, uint64_t iteration, unsigned bucket)
{
    return coll__space_key(b->key_space, iteration, bucket);
}

coll_op_params_t coll__bk_op_params(const coll_bucketer_t *b, uint64_t iteration, unsigned bucket)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_KEY | COLL_OP_PARAM_COMPRESSION,
                          .key = make_key(b, iteration, bucket), .algo = b->algo};

    p.field_mask |= b->has_algo ? COLL_OP_PARAM_ALGO : 0;
    return p;
}

static coll_status_t submit_bucket(coll_bucketer_t *b, size_t i)
{
    const coll__bp_bucket_t *pl = &b->plan.buckets[i];
    bbucket_t *bk = &b->buckets[i];
    coll_op_params_t op = coll__bk_op_params(b, b->iteration, (unsigned)i);
    char track[32], name[48];
    coll_status_t st;

    op.field_mask |= COLL_OP_PARAM_LAYOUT | COLL_OP_PARAM_COMPRESSION;
    op.layout = bk->layout;
    op.compression = b->compression;
    op.compression.bucket = (uint32_t)b->key_space << 16 | (uint32_t)i;
    bk->submitted = 1;
    st = coll_allreduce_async(b->comm, bk->mem, bk->mem, pl->count, pl->dtype, b->redop, &op,
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
        coll__bk_note_error(b, st, i, "submitting its allreduce");
    }
    return st;
}

/* Seal, then check that @p param is registered (for public function @p func). Lock held. */
static coll_status_t sealed_param(coll_bucketer_t *b, const char *func, size_t param)
{
    coll_status_t st = coll__bk_seal(b);
    if (st == COLL_OK && param >= b->nparams) {
        st = coll__bk_fail(b, COLL_ERR_INVALID, "%s: %s: parameter %zu is not registered (%zu "
                           "parameters)", func, b->name, param, b->nparams);
    }
    return st;
}

/* @p p (registered) is reported (ready, or marked unused; by public function @p func) for
 * this iteration. */
static coll_status_t take(coll_bucketer_t *b, const char *func, size_t p, int state)
{
    bbucket_t *bk;

    if (b->params[p].state != P_PENDING) {
        return coll__bk_fail(b, COLL_ERR_INVALID, "%s: %s: parameter %zu (%s) was already "
                             "reported in iteration %llu", func, b->name, p, b->params[p].name,
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

static coll_status_t report(coll_bucketer_t *b, const char *func, size_t param, int state)
{
    coll_status_t st;

    pthread_mutex_lock(&b->lock);
    st = sealed_param(b, func, param);
    if (st == COLL_OK && state == P_MARKED && b->params[param].state == P_PENDING) {
        memset(coll__bk_view_of(b, &b->plan, b->buckets, param), 0,
               b->params[param].count * coll_dtype_size(b->params[param].dtype));
        b->marked++;
    }
    if (st == COLL_OK) {
        st = take(b, func, param, state);
    }
    pthread_mutex_unlock(&b->lock);
    return st;
}

coll_status_t coll_bucketer_grad_ready(coll_bucketer_t *bucketer, size_t param)
{
    COLL_ARG_CHECK(NULL, bucketer);
    return report(bucketer, __func__, param, P_READY);
}

coll_status_t coll_bucketer_mark_unused(coll_bucketer_t *bucketer, size_t param)
{
    COLL_ARG_CHECK(NULL, bucketer);
    return report(bucketer, __func__, param, P_MARKED);
}

/* wait_all(): the buckets nobody completed; their unreported parameters are zeroed. */
void coll__bk_submit_rest(coll_bucketer_t *b)
{
    for (size_t i = 0; i < b->plan.nbuckets; i++) {
        const coll__bp_bucket_t *pl = &b->plan.buckets[i];
        if (b->buckets[i].submitted) {
            continue;
        }
        for (size_t k = 0; k < pl->nparams; k++) {
            size_t p = b->plan.members[pl->first + k];
            if (b->params[p].state == P_PENDING) {
                memset(coll__bk_view_of(b, &b->plan, b->buckets, p), 0,
                       b->params[p].count * coll_dtype_size(b->params[p].dtype));
                b->detected++;
                take(b, "coll_bucketer_wait_all", p, P_DETECTED);
            }
        }
        b->buckets[i].late = 1;
    }
}

/* ---- queries and destroy ------------------------------------------------------------------- */

coll_status_t coll_bucketer_param_grad(coll_bucketer_t *bucketer, size_t param, void **grad_p)
{
    coll_bucketer_t *b = bucketer;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, bucketer);
    COLL_ARG_CHECK(b->comm, grad_p);
    pthread_mutex_lock(&b->lock);
    if ((st = sealed_param(b, __func__, param)) == COLL_OK) {
        *grad_p = coll__bk_view_of(b, &b->plan, b->buckets, param);
    }
    pthread_mutex_unlock(&b->lock);
    return st;
}

coll_status_t coll_bucketer_param_info(coll_bucketer_t *bucketer, size_t param,
                                       coll_bucketer_param_info_t *info)
{
    coll_bucketer_t *b = bucketer;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, bucketer);
    COLL_ARG_CHECK(b->comm, info);
    pthread_mutex_lock(&b->lock);
    if ((st = sealed_param(b, __func__, param)) == COLL_OK) {
        const bparam_t *p = &b->params[param];
        *info = (coll_bucketer_param_info_t){.bucket = b->plan.bucket_of[param],
                                             .offset = b->plan.offset_of[param],
                                             .count = p->count, .dtype = p->dtype,
                                             .name = p->name};
    }
    pthread_mutex_unlock(&b->lock);
    return st;
}

coll_status_t coll_bucketer_bucket_info(coll_bucketer_t *bucketer, size_t bucket,
                                        coll_bucketer_bucket_info_t *info)
{
    coll_bucketer_t *b = bucketer;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, bucketer);
    COLL_ARG_CHECK(b->comm, info);
    pthread_mutex_lock(&b->lock);
    st = coll__bk_seal(b);
    if (st == COLL_OK && bucket >= b->plan.nbuckets) {
        st = coll__bk_fail(b, COLL_ERR_INVALID, "%s: %s: bucket %zu does not exist (%zu buckets)",
                           __func__, b->name,
                  bucket, b->plan.nbuckets);
    }
    if (st == COLL_OK) {
        const coll__bp_bucket_t *bk = &b->plan.buckets[bucket];
        *info = (coll_bucketer_bucket_info_t){.count = bk->count, .dtype = bk->dtype,
                                              .num_params = bk->nparams,
                                              .params = b->plan.members + bk->first};
    }
    pthread_mutex_unlock(&b->lock);
    return st;
}

coll_status_t coll_bucketer_stats(coll_bucketer_t *bucketer, coll_bucketer_stats_t *stats)
{
    coll_bucketer_t *b = bucketer;

    COLL_ARG_CHECK(NULL, bucketer);
    COLL_ARG_CHECK(b->comm, stats);
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
    return b != NULL ? b->errmsg : coll__thread_error();
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
