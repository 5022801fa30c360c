/*
 * Unit tests of the table of registered algorithms (engine/algo.h, engine/algos/table.c) over the
 * fake net layer (fake_net.h), so that an entry added for another memory kind cannot change the
 * host's choices:
 *
 *   the automatic choice on host memory, collective by collective and around rd_max_bytes and
 *   the segment (the choices written out here, as docs/architecture.md lists them);
 *   on device memory: NCCL's allreduce, reduce-scatter, all-gather, broadcast and reduce only
 *   where the job's parameter nccl is on, the host's entries otherwise and for the gather, NCCL
 *   never on host memory; what NCCL takes (coll_nccl_fits()): the reductions with every
 *   reduction NCCL has, the average included, a bitwise one of an integer dtype by allreduce
 *   only; what the executor takes on one node (coll_devc_fits()): every reduction, the bitwise
 *   ones of the integer dtypes only;
 *   forced algorithms: one that runs the operation is kept, one that cannot, or that the
 *   collective has no entry for, is refused (COLL_ALGO_REFUSED + the algorithm);
 *   the table itself: one entry per (collective, memory kind, algorithm), each with both
 *   implementations, and on host memory every collective resolvable automatically at any size;
 *   a refusal's message: the memory kind an algorithm of device memory needs (NCCL, the
 *   device's own forced on host buffers), else that the algorithm cannot run the size;
 *   the implementation an operation gets: the entry's own on several nodes, the local one on
 *   one node, the refusal's for a refused algorithm; on the device on one node "device+local"
 *   for one pool, "device+peers" for pools on several devices all granted to the first
 *   member's device (COLL_DEVICE_FAKE=4), the host's local algorithm otherwise; split across
 *   the devices (dev_peers.c) for an allreduce, reduce-scatter or all-gather of at least
 *   device_peers_split_min elements whose members' devices are all peers of each other, on
 *   the first member's device otherwise (reduce, broadcast, fewer elements, a pair not peers).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "fake_net.h"
#include "core/dev_pools.h"
#include "engine/algo.h"
#include "engine/algos/algos.h"
#include "engine/algos/dev_combine.h"
#include "engine/algos/nccl.h"
#include "engine/exec.h"

#define SEG 4096u   /* the job's segment bytes */
#define RD_MAX 1024u /* the job's rd_max_bytes */

static fake_world_t w;

static int setup(void **state)
{
    (void)state;
    fake_net_init(&w, 2, 1, SEG, 1 << 20, FAKE_EAGER);
    for (uint32_t n = 0; n < w.nnodes; n++) {
        w.job[n].params.rd_max_bytes = RD_MAX;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fake_net_free(&w);
    return 0;
}

static uint32_t resolve(coll_kind_t kind, uint64_t bytes, coll_algo_t forced)
{
    return coll_algo_resolve(&w.job[0], COLL_MEM_HOST, kind, w.nnodes, bytes, forced);
}

static void test_auto_on_host(void **state)
{
    const uint32_t desc = sizeof(coll_desc_t);

    (void)state;
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, 0, COLL_ALGO_AUTO), COLL_ALGO_RD);
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, 8, COLL_ALGO_AUTO), COLL_ALGO_RD);
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, RD_MAX, COLL_ALGO_AUTO), COLL_ALGO_RD);
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, RD_MAX + 1, COLL_ALGO_AUTO), COLL_ALGO_RING);
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, 1 << 20, COLL_ALGO_AUTO), COLL_ALGO_RING);
    /* rd_max_bytes beyond what fits a segment: the ring, not a refusal. */
    w.job[0].params.rd_max_bytes = SEG;
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, SEG - desc, COLL_ALGO_AUTO), COLL_ALGO_RD);
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, SEG - desc + 1, COLL_ALGO_AUTO),
                     COLL_ALGO_RING);
    w.job[0].params.rd_max_bytes = RD_MAX;
    assert_int_equal(resolve(COLL_KIND_REDUCE_SCATTER, 8, COLL_ALGO_AUTO), COLL_ALGO_RING);
    assert_int_equal(resolve(COLL_KIND_ALLGATHER, 8, COLL_ALGO_AUTO), COLL_ALGO_RING);
    assert_int_equal(resolve(COLL_KIND_PS_STEP, 8, COLL_ALGO_AUTO), COLL_ALGO_RING);
    assert_int_equal(resolve(COLL_KIND_BROADCAST, 8, COLL_ALGO_AUTO), COLL_ALGO_CHAIN);
    assert_int_equal(resolve(COLL_KIND_REDUCE, 1 << 20, COLL_ALGO_AUTO), COLL_ALGO_CHAIN);
    assert_int_equal(resolve(COLL_KIND_BARRIER, 0, COLL_ALGO_AUTO), COLL_ALGO_DISSEMINATION);
    assert_int_equal(resolve(COLL_KIND_PS_REGISTER, 64, COLL_ALGO_AUTO),
                     COLL_ALGO_DISSEMINATION);
    assert_int_equal(resolve(COLL_KIND_PS_SAVE, 64, COLL_ALGO_AUTO), COLL_ALGO_DISSEMINATION);
    assert_int_equal(resolve(COLL_KIND_PS_LOAD, 0, COLL_ALGO_AUTO), COLL_ALGO_DISSEMINATION);
    assert_int_equal(resolve(COLL_KIND_GATHER, 1 << 20, COLL_ALGO_AUTO), COLL_ALGO_DIRECT);
    assert_int_equal(resolve(COLL_KIND_SCATTER, 0, COLL_ALGO_AUTO), COLL_ALGO_DIRECT);
    assert_int_equal(resolve(COLL_KIND_ALLTOALLV, 0, COLL_ALGO_AUTO), COLL_ALGO_DIRECT);
    assert_int_equal(resolve(COLL_KIND_ALLTOALLV, 0, COLL_ALGO_RING),
                     COLL_ALGO_REFUSED + COLL_ALGO_RING);
    assert_int_equal(resolve(COLL_KIND_SEND, 0, COLL_ALGO_AUTO), COLL_ALGO_AUTO);
    assert_int_equal(resolve(COLL_KIND_RECV, 0, COLL_ALGO_RING), COLL_ALGO_AUTO);
}

/* On device memory: NCCL's collectives through NCCL where the job's parameter is on, else (and
 * every other collective) the host's entries, which the staged path runs; NCCL never on host
 * memory. */
static void test_on_device(void **state)
{
    coll_job_t *job = &w.job[0];

    (void)state;
    job->params.nccl = 1;
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_ALLREDUCE, 2, 8,
                                       COLL_ALGO_AUTO),
                     COLL_ALGO_NCCL);
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_ALLREDUCE, 2, 1 << 20,
                                       COLL_ALGO_NCCL), COLL_ALGO_NCCL);
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_ALLREDUCE, 2, 8,
                                       COLL_ALGO_RING),
                     COLL_ALGO_RING);
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_ALLGATHER, 2, 8,
                                       COLL_ALGO_AUTO), COLL_ALGO_NCCL);
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_REDUCE_SCATTER, 2, 8,
                                       COLL_ALGO_AUTO), COLL_ALGO_NCCL);
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_BROADCAST, 2, 8,
                                       COLL_ALGO_AUTO), COLL_ALGO_NCCL);
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_REDUCE, 2, 8, COLL_ALGO_AUTO),
                     COLL_ALGO_NCCL);
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_GATHER, 2, 8, COLL_ALGO_AUTO),
                     COLL_ALGO_DIRECT);
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_HOST, COLL_KIND_ALLREDUCE, 2, 8,
                                       COLL_ALGO_AUTO),
                     COLL_ALGO_RD);
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_HOST, COLL_KIND_ALLREDUCE, 2, 8,
                                       COLL_ALGO_NCCL),
                     COLL_ALGO_REFUSED + COLL_ALGO_NCCL);
    job->params.nccl = 0;
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_ALLREDUCE, 2, 8,
                                       COLL_ALGO_AUTO),
                     COLL_ALGO_RD);
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_ALLREDUCE, 2, 8,
                                       COLL_ALGO_NCCL),
                     COLL_ALGO_REFUSED + COLL_ALGO_NCCL);
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_REDUCE, 2, 8, COLL_ALGO_AUTO),
                     COLL_ALGO_CHAIN);
}

/* A group on one node of device memory: the executor's device algorithm where the daemon has the
 * executor, whatever the job's nccl, for the five collectives it runs (gather the host's); the
 * host's entries (the staged path) where it has none; never on two nodes; NCCL never on one. */
static void test_device_one_node(void **state)
{
    static const coll_exec_t exec; /* only its presence is asked */
    static const coll_kind_t kinds[] = {COLL_KIND_ALLREDUCE, COLL_KIND_REDUCE_SCATTER,
                                        COLL_KIND_ALLGATHER, COLL_KIND_BROADCAST,
                                        COLL_KIND_REDUCE};
    coll_job_t *job = &w.job[0];
    uint32_t host = coll_algo_resolve(job, COLL_MEM_HOST, COLL_KIND_ALLREDUCE, 1, 8,
                                      COLL_ALGO_AUTO);

    (void)state;
    job->params.nccl = 1;
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_ALLREDUCE, 1, 8,
                                       COLL_ALGO_AUTO), host);
    job->d->devices.exec = &exec;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, kinds[i], 1, 8, COLL_ALGO_AUTO),
                         COLL_ALGO_DEVICE);
    }
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_GATHER, 1, 8,
                                       COLL_ALGO_AUTO), COLL_ALGO_DIRECT);
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_ALLREDUCE, 2, 8,
                                       COLL_ALGO_AUTO), COLL_ALGO_NCCL);
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_ALLREDUCE, 2, 8,
                                       COLL_ALGO_DEVICE), COLL_ALGO_REFUSED + COLL_ALGO_DEVICE);
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_CUDA, COLL_KIND_ALLREDUCE, 1, 8,
                                       COLL_ALGO_NCCL), COLL_ALGO_REFUSED + COLL_ALGO_NCCL);
    assert_int_equal(coll_algo_resolve(job, COLL_MEM_HOST, COLL_KIND_ALLREDUCE, 1, 8,
                                       COLL_ALGO_DEVICE), COLL_ALGO_REFUSED + COLL_ALGO_DEVICE);
    job->d->devices.exec = NULL;
}

/* What NCCL takes (coll_nccl_fits(), by which engine/submit.c asks for the device's entries):
 * the allreduce, the reduce-scatter and the reduce with every reduction NCCL has, the average
 * included; a bitwise reduction of an integer dtype by allreduce only (nccl_calls.c gathers the
 * nodes' results), never of a float; all-gather and broadcast; nothing else. */
static void test_nccl_takes(void **state)
{
    const coll_group_t *grp = w.job[0].world;
    static const unsigned reductions[] = {COLL_KIND_ALLREDUCE, COLL_KIND_REDUCE_SCATTER,
                                          COLL_KIND_REDUCE};

    (void)state;
    for (size_t k = 0; k < sizeof(reductions) / sizeof(reductions[0]); k++) {
        for (unsigned op = 0; op < COLL_REDOP_COUNT; op++) {
            int bitwise_ok = reductions[k] == COLL_KIND_ALLREDUCE;
            assert_int_equal(coll_nccl_fits(grp, reductions[k], COLL_FLOAT32, op), op <= COLL_MAX);
            assert_int_equal(coll_nccl_fits(grp, reductions[k], COLL_INT32, op),
                             op <= COLL_MAX || bitwise_ok);
        }
        assert_true(coll_nccl_fits(grp, reductions[k], COLL_BFLOAT16, COLL_AVG));
        assert_true(coll_nccl_fits(grp, reductions[k], COLL_INT8, COLL_AVG));
    }
    assert_true(coll_nccl_fits(grp, COLL_KIND_ALLGATHER, COLL_FLOAT16, COLL_SUM));
    assert_true(coll_nccl_fits(grp, COLL_KIND_BROADCAST, COLL_INT64, COLL_SUM));
    assert_false(coll_nccl_fits(grp, COLL_KIND_GATHER, COLL_FLOAT32, COLL_SUM));
    assert_false(coll_nccl_fits(grp, COLL_KIND_BARRIER, COLL_FLOAT32, COLL_SUM));
}

/* What the executor takes on one node (coll_devc_fits(), by which engine/submit.c asks for the
 * device's own entries, dev_local.c): the allreduce, the reduce-scatter and the reduce with
 * every reduction of the integer dtypes, the bitwise ones included, and every reduction but the
 * bitwise ones of the floats; all-gather and broadcast; nothing else. */
static void test_device_takes(void **state)
{
    static const unsigned reductions[] = {COLL_KIND_ALLREDUCE, COLL_KIND_REDUCE_SCATTER,
                                          COLL_KIND_REDUCE};
    static const unsigned ints[] = {COLL_INT8, COLL_UINT8, COLL_INT32, COLL_INT64};
    static const unsigned floats[] = {COLL_FLOAT32, COLL_FLOAT64, COLL_FLOAT16, COLL_BFLOAT16};

    (void)state;
    for (size_t k = 0; k < sizeof(reductions) / sizeof(reductions[0]); k++) {
        for (unsigned op = 0; op < COLL_REDOP_COUNT; op++) {
            for (size_t d = 0; d < 4; d++) {
                assert_true(coll_devc_fits(reductions[k], ints[d], op));
                assert_int_equal(coll_devc_fits(reductions[k], floats[d], op), op <= COLL_MAX);
            }
        }
    }
    assert_true(coll_devc_fits(COLL_KIND_ALLGATHER, COLL_UINT8, COLL_SUM));
    assert_true(coll_devc_fits(COLL_KIND_BROADCAST, COLL_INT64, COLL_SUM));
    assert_false(coll_devc_fits(COLL_KIND_GATHER, COLL_INT32, COLL_BAND));
    assert_false(coll_devc_fits(COLL_KIND_BARRIER, COLL_INT32, COLL_SUM));
}

static void test_forced(void **state)
{
    const uint32_t desc = sizeof(coll_desc_t);

    (void)state;
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, 8, COLL_ALGO_RING), COLL_ALGO_RING);
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, SEG - desc, COLL_ALGO_RD), COLL_ALGO_RD);
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, SEG - desc + 1, COLL_ALGO_RD),
                     COLL_ALGO_REFUSED + COLL_ALGO_RD);
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, 8, COLL_ALGO_CHAIN),
                     COLL_ALGO_REFUSED + COLL_ALGO_CHAIN);
    assert_int_equal(resolve(COLL_KIND_BROADCAST, 8, COLL_ALGO_RING),
                     COLL_ALGO_REFUSED + COLL_ALGO_RING);
    assert_int_equal(resolve(COLL_KIND_BARRIER, 0, COLL_ALGO_RD), COLL_ALGO_REFUSED + COLL_ALGO_RD);
    assert_int_equal(resolve(COLL_KIND_PS_STEP, 8, COLL_ALGO_DISSEMINATION),
                     COLL_ALGO_REFUSED + COLL_ALGO_DISSEMINATION);
    assert_int_equal(resolve(COLL_KIND_PS_SAVE, 8, COLL_ALGO_DISSEMINATION),
                     COLL_ALGO_DISSEMINATION);
    assert_int_equal(resolve(COLL_KIND_GATHER, 8, COLL_ALGO_CHAIN),
                     COLL_ALGO_REFUSED + COLL_ALGO_CHAIN);
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, 8, COLL_ALGO_DIRECT),
                     COLL_ALGO_REFUSED + COLL_ALGO_DIRECT);
}

/* Whether some entry of (@p kind, host) runs any size and is chosen automatically. */
static int host_has_fallback(coll_kind_t kind)
{
    size_t n;
    const coll_algo_entry_t *t = coll_algo_table(&n);

    for (size_t i = 0; i < n; i++) {
        if (t[i].kind == kind && t[i].mem == COLL_MEM_HOST && t[i].runs == NULL &&
            (t[i].score == NULL || t[i].score(&w.job[0], UINT64_MAX / 2) > 0.0)) {
            return 1;
        }
    }
    return 0;
}

static void test_table(void **state)
{
    size_t n;
    const coll_algo_entry_t *t = coll_algo_table(&n);

    (void)state;
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++) {
        assert_true((unsigned)t[i].mem < COLL_MEM_KINDS);
        assert_true(t[i].algo != COLL_ALGO_AUTO && t[i].algo < COLL_ALGO_COUNT);
        assert_false(coll_kind_is_p2p(t[i].kind));
        assert_non_null(t[i].impl);
        assert_non_null(t[i].local);
        for (size_t j = 0; j < i; j++) {
            assert_false(t[j].kind == t[i].kind && t[j].mem == t[i].mem &&
                         t[j].algo == t[i].algo);
        }
    }
    for (int k = COLL_KIND_ALLREDUCE; k <= COLL_KIND_LAST; k++) {
        if (!coll_kind_is_p2p((coll_kind_t)k)) {
            assert_true(host_has_fallback((coll_kind_t)k));
        }
    }
}

/* The implementation of an operation of @p grp whose descriptor names @p algo. */
static const char *impl_name(coll_job_t *job, coll_group_t *grp, coll_kind_t kind, uint32_t algo)
{
    coll_desc_t d = {.coll = (uint16_t)kind, .algo = algo, .count = 4, .dtype = COLL_FLOAT32};
    coll_op_t *op = coll_op_create(job, grp, &d);
    const char *name;

    assert_non_null(op);
    name = coll_algo_impl(op)->name;
    op->done = 1;
    coll_op_maybe_free(op);
    return name;
}

/* The refusal's message of an operation of @p kind whose descriptor names @p forced, refused
 * (its members' buffers in the host pool, id 0). */
static void refusal(coll_kind_t kind, uint32_t forced, char *buf, size_t len)
{
    coll_desc_t d = {.coll = (uint16_t)kind, .algo = COLL_ALGO_REFUSED + forced, .count = 4,
                     .dtype = COLL_FLOAT32};
    coll_op_t *op = coll_op_create(&w.job[0], w.job[0].world, &d);

    assert_non_null(op);
    coll_algo_refusal(op, buf, len);
    op->done = 1;
    coll_op_maybe_free(op);
}

/* NCCL or the device's own forced on host buffers: the message says the buffers are host
 * memory and the algorithm needs device (cuda) memory; one that runs on host memory but not
 * this operation says so. */
static void test_refusal_message(void **state)
{
    char msg[256];

    (void)state;
    refusal(COLL_KIND_ALLREDUCE, COLL_ALGO_NCCL, msg, sizeof(msg));
    assert_string_equal(msg, "algorithm nccl runs only on cuda memory (buffers from "
                             "coll_mem_alloc_on()), and this allreduce's buffers are host "
                             "memory: force it only for such buffers, or leave the choice to "
                             "auto");
    refusal(COLL_KIND_BROADCAST, COLL_ALGO_DEVICE, msg, sizeof(msg));
    assert_string_equal(msg, "algorithm device runs only on cuda memory (buffers from "
                             "coll_mem_alloc_on()), and this broadcast's buffers are host "
                             "memory: force it only for such buffers, or leave the choice to "
                             "auto");
    refusal(COLL_KIND_ALLREDUCE, COLL_ALGO_CHAIN, msg, sizeof(msg));
    assert_string_equal(msg, "algorithm chain cannot run this allreduce of 16 bytes per rank");
}

static void test_impl(void **state)
{
    coll_job_t *job = &w.job[0];

    (void)state;
    assert_string_equal(impl_name(job, job->world, COLL_KIND_ALLREDUCE, COLL_ALGO_RING), "ring");
    assert_string_equal(impl_name(job, job->world, COLL_KIND_ALLREDUCE, COLL_ALGO_RD), "rd");
    assert_string_equal(impl_name(job, job->world, COLL_KIND_ALLREDUCE,
                                  COLL_ALGO_REFUSED + COLL_ALGO_CHAIN),
                        "none");
    fake_net_free(&w);
    fake_net_init(&w, 1, 2, SEG, 1 << 20, FAKE_EAGER);
    job = &w.job[0];
    assert_string_equal(impl_name(job, job->world, COLL_KIND_ALLREDUCE, COLL_ALGO_RING), "local");
    assert_string_equal(impl_name(job, job->world, COLL_KIND_BROADCAST, COLL_ALGO_CHAIN),
                        "local");
}

/* Device pools of @p job on devices 0 .. 3 (the fake layer's), none of them peers yet. */
static void device_pools(coll_job_t *job)
{
    for (int d = 0; d < 4; d++) {
        coll_dev_pool_t *dp = calloc(1, sizeof(*dp));
        assert_non_null(dp);
        dp->device = d;
        assert_int_equal(coll_pool_create_on(&coll_pool_device, d, "unit-algo", 4 << 20,
                                             &dp->pool),
                         COLL_OK);
        job->dev_pools[d] = dp;
    }
}

/* The implementation of a one-node allreduce on the device whose 4 members' buffers are in
 * pools @p pools (ids: 0 the host's, 1 + d device d's). */
static const char *device_impl(coll_job_t *job, const uint32_t pools[4])
{
    coll_desc_t d = {.coll = COLL_KIND_ALLREDUCE, .algo = COLL_ALGO_DEVICE, .count = 4,
                     .dtype = COLL_FLOAT32};
    coll_op_t *op = coll_op_create(job, job->world, &d);
    const char *name;

    assert_non_null(op);
    assert_int_equal(op->nbufs, 4);
    for (uint32_t l = 0; l < 4; l++) {
        op->members[l].pool = pools[l];
    }
    name = coll_algo_impl(op)->name;
    op->done = 1;
    coll_op_maybe_free(op);
    return name;
}

/* A one node's members on several devices (COLL_DEVICE_FAKE=4): "device+peers" once every
 * member's pool was granted to the first member's device (the others need not reach it),
 * "device+local" in one pool; the host's local algorithm (the staged path) where a pool is not
 * granted to it or a member is in host memory. */
static void test_impl_device_peers(void **state)
{
    static const uint32_t one[4] = {2, 2, 2, 2}, each[4] = {1, 2, 3, 4}, pairs[4] = {2, 1, 2, 1},
                          host[4] = {1, 2, 0, 3};
    coll_job_t *job;

    (void)state;
    fake_net_free(&w);
    fake_net_init(&w, 1, 4, SEG, 1 << 20, FAKE_EAGER);
    job = &w.job[0];
    device_pools(job);
    assert_string_equal(device_impl(job, one), "device+local");
    assert_string_equal(device_impl(job, each), "local"); /* nothing granted */
    job->dev_pools[1]->peers = 1u << 0;
    job->dev_pools[2]->peers = 1u << 0;
    assert_string_equal(device_impl(job, each), "local"); /* device 3's pool not granted */
    job->dev_pools[3]->peers = (1u << 0) | (1u << 2);
    assert_string_equal(device_impl(job, each), "device+peers");
    assert_string_equal(device_impl(job, host), "local");
    assert_string_equal(device_impl(job, pairs), "local"); /* device 0's pool not granted to 1 */
    job->dev_pools[0]->peers = 1u << 1;
    assert_string_equal(device_impl(job, pairs), "device+peers");
    job->dev_pools[3]->peers = 1u << 2;
    assert_string_equal(device_impl(job, each), "local");
    coll_dev_pools_destroy(job);
}

/* Whether a one-node @p kind of @p count elements on the device, its 4 members' buffers in
 * pools @p pools, is split across the devices (coll_impl_dev_peers_split). */
static int splits(coll_job_t *job, const uint32_t pools[4], coll_kind_t kind, uint64_t count)
{
    coll_desc_t d = {.coll = (uint16_t)kind, .algo = COLL_ALGO_DEVICE, .count = count,
                     .dtype = COLL_FLOAT32};
    coll_op_t *op = coll_op_create(job, job->world, &d);
    const coll_impl_t *impl;

    assert_non_null(op);
    for (uint32_t l = 0; l < 4; l++) {
        op->members[l].pool = pools[l];
    }
    impl = coll_algo_impl(op);
    assert_string_equal(impl->name, "device+peers");
    op->done = 1;
    coll_op_maybe_free(op);
    return impl == &coll_impl_dev_peers_split;
}

/* device+peers split across the devices from device_peers_split_min elements (100 here: an
 * allreduce's count, the others' count times the 4 ranks), for the allreduce, reduce-scatter
 * and all-gather, where every pair of the members' devices are
 * peers both ways; on the first member's device otherwise. */
static void test_impl_device_peers_split(void **state)
{
    static const uint32_t each[4] = {1, 2, 3, 4}, pairs[4] = {2, 1, 2, 1};
    coll_job_t *job;

    (void)state;
    fake_net_free(&w);
    fake_net_init(&w, 1, 4, SEG, 1 << 20, FAKE_EAGER);
    job = &w.job[0];
    job->d->cfg.device_peers_split_min = 100;
    device_pools(job);
    for (int d = 1; d < 4; d++) { /* granted to device 0 only */
        job->dev_pools[d]->peers = 1u << 0;
    }
    assert_false(splits(job, each, COLL_KIND_ALLREDUCE, 1000));
    for (int d = 0; d < 4; d++) {
        job->dev_pools[d]->peers = 0xfu & ~(1u << d);
    }
    assert_true(splits(job, each, COLL_KIND_ALLREDUCE, 100));
    assert_false(splits(job, each, COLL_KIND_ALLREDUCE, 99));
    assert_true(splits(job, each, COLL_KIND_REDUCE_SCATTER, 25)); /* 100 in all */
    assert_false(splits(job, each, COLL_KIND_REDUCE_SCATTER, 24));
    assert_true(splits(job, each, COLL_KIND_ALLGATHER, 25));
    assert_false(splits(job, each, COLL_KIND_ALLGATHER, 24));
    assert_false(splits(job, each, COLL_KIND_REDUCE, 1000));
    assert_false(splits(job, each, COLL_KIND_BROADCAST, 1000));
    assert_true(splits(job, pairs, COLL_KIND_ALLREDUCE, 1000));
    job->dev_pools[2]->peers &= ~(1u << 3); /* device 3 no longer reaches device 2's pool */
    assert_false(splits(job, each, COLL_KIND_ALLREDUCE, 1000));
    assert_true(splits(job, pairs, COLL_KIND_ALLREDUCE, 1000)); /* devices 0 and 1 only */
    coll_dev_pools_destroy(job);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_auto_on_host, setup, teardown),
        cmocka_unit_test_setup_teardown(test_on_device, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_one_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nccl_takes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_takes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusal_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_impl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_impl_device_peers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_impl_device_peers_split, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
