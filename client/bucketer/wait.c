/*
 * The gradient bucketer's wait_all(): submit what is left, wait for every bucket within the
 * bound, measure communication and overlap, and after the first iteration rebuild the plan
 * from the order the gradients arrived in, agreed by every rank (bucketer.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/bucketer/bucketer.h"
#include "client/trace/timeline.h"

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
            return coll__bk_fail(b, st, "%s: iteration %llu: bucket %zu (%zu bytes) and %zu more of %zu "
                        "not complete after %d ms (did every rank reach wait_all?)", b->name,
                        (unsigned long long)b->iteration, first,
                        coll__bk_bucket_bytes(&b->plan.buckets[first]), n - 1, b->plan.nbuckets,
                        timeout_ms);
        }
        bk->status = st;
        if (st == COLL_OK) {
            coll_req_timing(bk->req, &bk->timing);
            coll_req_wire_bytes(bk->req, &bk->wire_bytes, &bk->dense_bytes);
        } else {
            coll__bk_note_error(b, st, i, "its allreduce");
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

/* The measure of the buckets' intervals [submit, seen] (seen: this rank's library saw the
 * completion, timing.complete_ns, on the rank's clock: the daemon's work, the completion's
 * message and the rank's wake-up), of their sum, and of the part of their union inside
 * [wait_begin, wait_end] (the caller waited while some bucket was in flight). */
typedef struct {
    uint64_t union_ns, sum_ns, waited_ns;
} comm_measure_t;

/* Add the merged interval [b, e] to @p m. */
static void add_merged(comm_measure_t *m, uint64_t b, uint64_t e, uint64_t wb, uint64_t we)
{
    uint64_t lo = b > wb ? b : wb, hi = e < we ? e : we;

    m->union_ns += e - b;
    m->waited_ns += hi > lo ? hi - lo : 0;
}

static comm_measure_t comm_time(const coll_bucketer_t *b, uint64_t wait_end_ns)
{
    interval_t *iv = malloc((b->plan.nbuckets ? b->plan.nbuckets : 1) * sizeof(*iv));
    comm_measure_t m = {0, 0, 0};
    uint64_t cur_b = 0, cur_e = 0;
    size_t n = 0;

    for (size_t i = 0; iv != NULL && i < b->plan.nbuckets; i++) {
        const coll_req_timing_t *t = &b->buckets[i].timing;
        if (b->buckets[i].status == COLL_OK && t->submit_ns != 0 &&
            t->complete_ns >= t->submit_ns) {
            iv[n++] = (interval_t){.begin = t->submit_ns, .end = t->complete_ns};
            m.sum_ns += t->complete_ns - t->submit_ns;
        }
    }
    if (n > 0) {
        qsort(iv, n, sizeof(*iv), interval_cmp);
        cur_b = iv[0].begin;
        cur_e = iv[0].end;
    }
    for (size_t i = 1; i < n; i++) {
        if (iv[i].begin > cur_e) {
            add_merged(&m, cur_b, cur_e, b->wait_begin_ns, wait_end_ns);
            cur_b = iv[i].begin;
        }
        cur_e = iv[i].end > cur_e ? iv[i].end : cur_e;
    }
    add_merged(&m, cur_b, cur_e, b->wait_begin_ns, wait_end_ns);
    free(iv);
    return m;
}

static void record_stats(coll_bucketer_t *b, uint64_t wait_end_ns)
{
    coll_bucketer_stats_t *s = &b->stats;
    comm_measure_t cm;
    size_t late = 0;

    s->wire_bytes = s->dense_bytes = 0;
    for (size_t i = 0; i < b->plan.nbuckets; i++) {
        late += b->buckets[i].late;
        s->wire_bytes += b->buckets[i].status == COLL_OK ? b->buckets[i].wire_bytes : 0;
        s->dense_bytes += b->buckets[i].status == COLL_OK ? b->buckets[i].dense_bytes : 0;
    }
    s->wire_bytes_total += s->wire_bytes;
    s->dense_bytes_total += s->dense_bytes;
    s->unused_marked = b->marked;
    s->unused_detected = b->detected;
    s->unused_detected_total += b->detected;
    s->buckets_late = late;
    s->first_ready_ns = b->first_ready_ns;
    s->wait_begin_ns = b->wait_begin_ns;
    s->wait_end_ns = wait_end_ns;
    cm = comm_time(b, wait_end_ns);
    s->comm_ns = cm.union_ns;
    s->comm_sum_ns = cm.sum_ns;
    s->exposed_ns = cm.waited_ns; /* <= comm_ns: a part of the same union */
    s->overlap_efficiency = s->comm_ns == 0 ? 1.0 : 1.0 - (double)s->exposed_ns / (double)s->comm_ns;
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
    coll__bk_reset_iteration(b);
}

/* ---- rebuild ------------------------------------------------------------------------------- */

/* Submit a small collective of the rebuild and wait for it until @p deadline_ns. */
static coll_status_t small_collective(coll_bucketer_t *b, int broadcast, void *buf, size_t count,
                                      uint64_t deadline_ns)
{
    coll_op_params_t op = coll__bk_op_params(b, 0, broadcast ? KEY_BROADCAST : KEY_AGREE);
    coll_request_t *r = NULL;
    coll_status_t st;

    st = broadcast ? coll_broadcast_async(b->comm, buf, buf, count, COLL_INT32, 0, &op, &r)
                   : coll_allreduce_async(b->comm, buf, buf, count, COLL_INT32, COLL_MIN, &op, &r);
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(r, ms_left(deadline_ns));
        coll_req_free(r);
    }
    if (st != COLL_OK) {
        coll__bk_fail(b, st, "%s: rebuilding the buckets: %s of %s failed (%s); the plan stays",
             b->name, broadcast ? "the broadcast" : "the agreement",
             broadcast ? "rank 0's ready order" : "all ranks", coll_comm_last_error(b->comm));
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
        return coll__bk_fail(b, st, "%s: rebuilding: no pool room for the ready order: %s", b->name,
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
        return coll__bk_fail(b, st, "%s: rebuilding: no pool room for the agreement: %s", b->name,
                    coll_comm_last_error(b->comm));
    }
    buf[0] = ok;
    st = b->comm->world_size > 1 ? small_collective(b, 0, buf, 1, deadline_ns) : COLL_OK;
    *all_ok = buf[0] != 0;
    coll_mem_free(b->comm, buf);
    return st;
}

/* Copy every reduced gradient into the new plan's buckets, then let the old buckets go. */
static void move_grads(coll_bucketer_t *b, coll__bplan_t *plan, bbucket_t *bks)
{
    for (size_t p = 0; p < b->nparams; p++) {
        memcpy(coll__bk_view_of(b, plan, bks, p), coll__bk_view_of(b, &b->plan, b->buckets, p),
               b->params[p].count * coll_dtype_size(b->params[p].dtype));
    }
    coll__bk_free_bucket_mem(b, b->buckets, b->plan.nbuckets);
    free(b->buckets);
    coll__bplan_free(&b->plan);
    b->plan = *plan;
    b->buckets = bks;
    b->stats.layout_changed = 1;
    coll__bk_reset_iteration(b);
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
        st = coll__bk_build_plan(b, order, &plan);
    }
    free(order);
    if (st != COLL_OK || coll__bplan_equal(&plan, &b->plan)) {
        b->stats.rebuilt = st == COLL_OK;
        coll__bplan_free(&plan);
        return st;
    }
    alloc_st = coll__bk_alloc_buckets(b, &plan, &bks);
    st = agree_ok(b, alloc_st == COLL_OK, deadline_ns, &all_ok);
    if (st != COLL_OK || !all_ok) {
        if (bks != NULL) {
            coll__bk_free_bucket_mem(b, bks, plan.nbuckets);
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

coll_status_t coll_bucketer_wait_all(coll_bucketer_t *bucketer, int timeout_ms)
{
    coll_bucketer_t *b = bucketer;
    uint64_t start = coll__now_ns();
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000000;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, bucketer);
    pthread_mutex_lock(&b->lock);
    st = coll__bk_seal(b);
    if (st == COLL_OK && !b->in_wait) {
        b->in_wait = 1;
        b->wait_begin_ns = start;
        coll__bk_submit_rest(b);
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

