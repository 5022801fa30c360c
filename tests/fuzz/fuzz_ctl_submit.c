/*
 * libFuzzer harness: submissions that reach the daemon through a rank's control block
 * (proto/ctl.h), checked as daemon/doorbell.c and daemon/op.c check them: coll_ctl_take() on a
 * ring whose counters and records the (untrusted) client wrote, coll_wire_check_submission()
 * and coll_submission_to_wire() on each record taken, then coll_submit_check() against a job
 * with a real pool in which this rank and another own allocations, on the job's world group
 * (this rank its one local member).
 *
 * Input: world size and rank (2 bytes), the ring's tail and head (5 or 9 bytes), four
 * allocations (owner and size, 3 bytes each), then the COLL_CTL_SUB_SLOTS records of the ring
 * (sizeof(coll_submission_t) bytes each; missing bytes are zeros).
 *
 * Invariants: take() returns 0 on an empty ring, -1 (leaving it alone) when head - tail is
 * more than the ring holds, else exactly the record at the tail and advances the tail by one;
 * a record that passes coll_wire_check_submission() has every field within the limits wire.h
 * documents; one that also passes coll_submit_check() names send and receive buffers, as large
 * as its collective needs for this rank, that lie inside allocations of this rank (never the
 * other rank's, never the control blocks) and whose byte sizes do not overflow.
 */
#include "fuzz.h"

#include "proto/a2a.h"
#include "proto/ctl.h"
#include "core/job.h"
#include "core/pool.h"
#include "engine/submit.h"
#include "proto/wire.h"

#define POOL_BYTES (1u << 20)
#define NALLOCS 4

typedef struct {
    size_t offset, bytes;
    const void *owner;
} alloc_t;

static coll_pool_t *pool;
static coll_ctl_t ctl;

/* @return 1 when [off, off + len) lies inside one allocation of @p owner. */
static int inside(const alloc_t *a, size_t n, uint64_t off, uint64_t len, const void *owner)
{
    for (size_t i = 0; i < n; i++) {
        if (a[i].owner == owner && off >= a[i].offset && off - a[i].offset <= a[i].bytes &&
            len <= a[i].bytes - (off - a[i].offset)) {
            return 1;
        }
    }
    return 0;
}

static void check_fields(const coll_submission_t *rec, const Coll__Wire__Submit *sub)
{
    FUZZ_CHECK(sub->req_id == rec->req_id && sub->key == rec->key && sub->count == rec->count &&
                   sub->send_offset == rec->send_offset && sub->recv_offset == rec->recv_offset &&
                   (uint32_t)sub->coll == rec->coll && sub->dtype == rec->dtype &&
                   sub->op == rec->redop && sub->root == rec->root && sub->peer == rec->peer &&
                   sub->algo == rec->algo && sub->layout == rec->layout &&
                   sub->group == rec->group && sub->pool == rec->pool,
               "the Submit built from a record differs from it");
}

static void check_accepted(const Coll__Wire__Submit *sub)
{
    FUZZ_CHECK((unsigned)sub->coll <= COLL__WIRE__COLLECTIVE__ALLTOALLV && sub->dtype < COLL_DTYPE_COUNT &&
                   sub->op < COLL_REDOP_COUNT && sub->algo < COLL_ALGO_COUNT &&
                   sub->root < COLL_WORLD_MAX && sub->peer < COLL_WORLD_MAX,
               "accepted coll %d dtype %u op %u algo %u root %u peer %u", (int)sub->coll,
               sub->dtype, sub->op, sub->algo, sub->root, sub->peer);
    FUZZ_CHECK(sub->count <= UINT64_MAX / coll_dtype_size((coll_dtype_t)sub->dtype),
               "accepted a count whose byte size overflows");
}

/* An accepted submission's extents in elements: an alltoallv's from its count table (which
 * must lie in this rank's allocations and be the copy the daemon handed back), any other
 * kind's from its count. */
static void extents(const coll_job_t *job, const coll_session_t *s,
                    const Coll__Wire__Submit *sub, const uint64_t *table, const alloc_t *a,
                    size_t n, uint64_t *se, uint64_t *re)
{
    uint64_t es = coll_dtype_size((coll_dtype_t)sub->dtype);
    size_t tb = coll_a2a_table_bytes(job->world_size);
    uint32_t bad;

    if ((coll_kind_t)sub->coll != COLL_KIND_ALLTOALLV) {
        FUZZ_CHECK(table == NULL, "a table handed back for a %s",
                   coll_kind_name((coll_kind_t)sub->coll));
        coll_kind_extent((coll_kind_t)sub->coll, sub->count, job->world_size, s->rank,
                         sub->root, se, re);
        return;
    }
    FUZZ_CHECK(table != NULL && inside(a, n, sub->layout, tb, s) &&
                   memcmp(table, coll_pool_base(pool) + sub->layout, tb) == 0,
               "alltoallv count table [%llu, +%zu) outside this rank's allocations or not "
               "copied", (unsigned long long)sub->layout, tb);
    FUZZ_CHECK(coll_a2a_extent(table, job->world_size, es, se, re, &bad) == 0,
               "accepted an alltoallv whose block of rank %u overflows", bad);
}

static void check_buffers(const coll_job_t *job, const coll_session_t *s,
                          const Coll__Wire__Submit *sub, const uint64_t *table,
                          const alloc_t *a, size_t n)
{
    uint64_t es = coll_dtype_size((coll_dtype_t)sub->dtype), se, re;

    FUZZ_CHECK(sub->root < job->world_size && sub->peer < job->world_size,
               "root %u or peer %u outside world %u", sub->root, sub->peer, job->world_size);
    extents(job, s, sub, table, a, n, &se, &re);
    FUZZ_CHECK(se <= UINT64_MAX / es && re <= UINT64_MAX / es, "buffer sizes overflow");
    FUZZ_CHECK(se == 0 || inside(a, n, sub->send_offset, se * es, s),
               "send buffer [%llu, +%llu) is not inside this rank's allocations",
               (unsigned long long)sub->send_offset, (unsigned long long)(se * es));
    FUZZ_CHECK(re == 0 || inside(a, n, sub->recv_offset, re * es, s),
               "receive buffer [%llu, +%llu) is not inside this rank's allocations",
               (unsigned long long)sub->recv_offset, (unsigned long long)(re * es));
}

static void submit(const coll_job_t *job, const coll_group_t *grp, const coll_session_t *s,
                   const coll_submission_t *rec, const alloc_t *a, size_t n)
{
    Coll__Wire__Submit sub;
    uint64_t *table = NULL;
    char err[640] = "";

    coll_submission_to_wire(rec, &sub);
    check_fields(rec, &sub);
    if (coll_wire_check_submission(rec, err, sizeof(err)) != COLL_OK) {
        FUZZ_CHECK(err[0] != '\0', "refused without a reason");
        return;
    }
    check_accepted(&sub);
    if (coll_submit_check(job, grp, s, &sub, &table, err, sizeof(err)) != COLL_OK) {
        FUZZ_CHECK(err[0] != '\0' && table == NULL, "refused without a reason or kept a table");
        return;
    }
    check_buffers(job, s, &sub, table, a, n);
    free(table);
}

/* Take everything the ring holds, checking take() against the counters. */
static void drain(const coll_job_t *job, const coll_group_t *grp, const coll_session_t *s,
                  const alloc_t *a, size_t n)
{
    uint32_t head = atomic_load(&ctl.sub_head), tail = atomic_load(&ctl.sub_tail);

    for (uint32_t i = 0; i <= COLL_CTL_SUB_SLOTS; i++) {
        coll_submission_t rec;
        int got = coll_ctl_take(&ctl, &rec);
        uint32_t pending = head - tail;

        if (pending == 0) {
            FUZZ_CHECK(got == 0, "take() on an empty ring gave %d", got);
            return;
        }
        if (pending > COLL_CTL_SUB_SLOTS) {
            FUZZ_CHECK(got == -1 && atomic_load(&ctl.sub_tail) == tail,
                       "take() with head %u tail %u gave %d", head, tail, got);
            return;
        }
        FUZZ_CHECK(got == 1 && atomic_load(&ctl.sub_tail) == tail + 1 &&
                       memcmp(&rec, &ctl.sub[tail % COLL_CTL_SUB_SLOTS], sizeof(rec)) == 0,
                   "take() with head %u tail %u gave %d, tail %u", head, tail, got,
                   atomic_load(&ctl.sub_tail));
        tail++;
        submit(job, grp, s, &rec, a, n);
    }
    FUZZ_CHECK(0, "took more records than the ring holds");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    static coll_job_t job;
    static coll_daemon_t daemon;
    coll_session_t self = {0}, other = {0};
    const uint32_t *node_ranks[1] = {&self.rank};
    uint32_t local_of[1] = {0};
    coll_group_t grp = {.nlocal = 1, .node_ranks = node_ranks, .local_of = local_of};
    alloc_t a[NALLOCS];
    size_t n = 0;
    uint32_t tail;
    uint64_t d;

    if (pool == NULL) {
        FUZZ_CHECK(coll_pool_create("fuzz", POOL_BYTES, &pool) == COLL_OK &&
                       coll_pool_reserve(pool, COLL_CTL_TOTAL(2)) == COLL_OK,
                   "pool");
    }
    memset(&job, 0, sizeof(job));
    job.d = &daemon; /* no parameter service: its operations are refused */
    snprintf(job.id, sizeof(job.id), "fuzz");
    job.world_size = 1 + (uint32_t)fuzz_take(&in, 1) % 8;
    job.pool = pool;
    self.rank = (uint32_t)fuzz_take(&in, 1) % job.world_size;
    grp.size = job.world_size;
    other.rank = (self.rank + 1) % job.world_size;
    self.job = other.job = &job;

    tail = (uint32_t)fuzz_take(&in, 4);
    d = fuzz_take(&in, 1);
    atomic_store(&ctl.sub_tail, tail);
    atomic_store(&ctl.sub_head, d == 0xff ? (uint32_t)fuzz_take(&in, 4) : tail + (uint32_t)d);

    for (int i = 0; i < NALLOCS; i++) {
        const void *owner = fuzz_take(&in, 1) & 1 ? (const void *)&other : (const void *)&self;
        size_t bytes = 1 + (size_t)fuzz_take(&in, 2) * 4, off;
        if (coll_pool_alloc(pool, bytes, owner, &off) == COLL_OK) {
            /* The pool rounds every allocation up: the rest is the owner's too. */
            a[n++] = (alloc_t){off, (bytes + COLL_POOL_ALIGN - 1) / COLL_POOL_ALIGN * COLL_POOL_ALIGN,
                               owner};
        }
    }
    memset(ctl.sub, 0, sizeof(ctl.sub));
    memcpy(ctl.sub, in.p, in.left < sizeof(ctl.sub) ? in.left : sizeof(ctl.sub));

    drain(&job, &grp, &self, a, n);

    coll_pool_free_owner(pool, &self);
    coll_pool_free_owner(pool, &other);
    return 0;
}
