/*
 * Unit tests of staged operations (engine/stage.h) over the fake net layer (fake_net.h), with a
 * stage of this file's own in place of the parameter service: "parameters" out = 1000 - the
 * averaged "gradient", so every output element tells whether its piece went through the stage.
 *
 *   without a barrier (one ring pass) and with one (two passes: the reduce-scatter of every
 *   column, the release, then the all-gather), on one node and on several, with several local
 *   ranks and several segments per chunk, the release at once or from a later event;
 *   every piece of each node's chunk reaches reduced() and distribute() exactly once, and
 *   reduced() sees the average of every rank's input in local rank 0's input;
 *   every rank's output holds the stage's values; the bytes sent are an allreduce's;
 *   a stage that fails the job from reduced() ends the operation with its error on that node's
 *   ranks, none reports success, and with a barrier no output was written;
 *   compressed steps (engine/codec/staged.c) with fp16, whose encoding of these integer inputs
 *   is exact: the same pieces and values, the bytes of the compressed reduce-scatter and the
 *   float32 all-gather; a NaN in a node's input reaches the stage's nonfinite() on that node
 *   before anything of it is sent.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/stage.h"
#include "fake_net.h"
#include "kernels/compress_wire.h"
#include "proto/cspec.h"

#define SEG 1024 /* bytes: 256 floats */

static fake_world_t w;

typedef struct {
    int barrier;          /* stage_barrier */
    int defer;            /* barrier: release later, from the test, not from all_reduced() */
    int fail_node;        /* -1, or the node whose reduced() fails the job */
    uint8_t *reduced;     /* per element of the buffer: times reduced() covered it */
    uint8_t *distributed; /* times distribute() covered it */
    size_t count;
    coll_op_t *waiting[FAKE_MAX_NODES];
    int all_reduced[FAKE_MAX_NODES];
    int done_ok[FAKE_MAX_NODES];
    uint64_t cspec;       /* compression of the steps (proto/cspec.h), 0: none */
    int nan_node;         /* -1, or the node one of whose inputs is a NaN at element nan_at */
    size_t nan_at;
    int nonfinite[FAKE_MAX_NODES]; /* nonfinite() calls, with the element it named */
    uint64_t nonfinite_elem[FAKE_MAX_NODES];
} stage_test_t;

static stage_test_t T;

static float input(uint32_t r, size_t i)
{
    return (float)((r + 1) * 8 + (i % 61)); /* integer-valued: the average is exact */
}

static float average(size_t i)
{
    float s = 0;
    for (uint32_t r = 0; r < w.nnodes * w.nlocal; r++) {
        s += input(r, i);
    }
    return s / (float)(w.nnodes * w.nlocal);
}

static void st_reduced(coll_op_t *op, uint64_t off, uint64_t len)
{
    const float *g = op->in[0];

    if (T.fail_node == (int)op->job->node_rank) {
        coll_job_fail(op->job, COLL_ERR_INVALID, 1, "test stage refuses");
        return;
    }
    for (uint64_t i = off; i < off + len; i++) {
        T.reduced[i]++;
        if (g[i] != average(i)) {
            fail_msg("element %llu: reduced %g, average %g", (unsigned long long)i, g[i],
                     average(i));
        }
    }
}

static void st_all_reduced(coll_op_t *op)
{
    T.all_reduced[op->job->node_rank]++;
    if (T.defer) {
        T.waiting[op->job->node_rank] = op;
    } else {
        coll_stage_resume(op);
    }
}

static void st_distribute(coll_op_t *op, uint64_t off, uint64_t len)
{
    const float *g = op->in[0];
    float *out = op->out[0];

    for (uint64_t i = off; i < off + len; i++) {
        T.distributed[i]++;
        out[i] = 1000.0f - g[i];
    }
}

static void st_on_xfer(coll_op_t *op, coll_xfer_t *x)
{
    (void)op;
    (void)x;
    fail_msg("the test stage posts no transfers");
}

static void st_done(coll_op_t *op, coll_status_t status)
{
    T.done_ok[op->job->node_rank] += status == COLL_OK;
}

static void st_end(coll_op_t *op)
{
    (void)op;
}

static void st_nonfinite(coll_op_t *op, uint64_t elem)
{
    T.nonfinite[op->job->node_rank]++;
    T.nonfinite_elem[op->job->node_rank] = elem;
    coll_job_fail(op->job, COLL_ERR_INVALID, 1, "test stage: not finite");
}

static const coll_stage_calls_t stage = {st_reduced, st_all_reduced, st_distribute, st_on_xfer,
                                       st_done, st_end, st_nonfinite};

static coll_status_t hk_check(const coll_job_t *job, const coll_session_t *s,
                              const Coll__Wire__Submit *sub, char *err, size_t errlen)
{
    (void)job, (void)s, (void)sub, (void)err, (void)errlen;
    return COLL_OK;
}

static coll_status_t hk_start(coll_op_t *op, coll_stage_t *st, char *err, size_t errlen)
{
    (void)op, (void)err, (void)errlen;
    st->calls = &stage;
    st->barrier = T.barrier;
    return COLL_OK;
}

static const coll_stage_hooks_t hooks = {hk_check, hk_start};

static float *bufs[2][FAKE_MAX_NODES][FAKE_MAX_LOCAL];

static void submit(size_t count)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        w.d[n].stage_hooks = &hooks;
        for (uint32_t l = 0; l < w.nlocal; l++) {
            Coll__Wire__Submit s = COLL__WIRE__SUBMIT__INIT;
            uint8_t *base = coll_pool_base(w.job[n].pool);
            float *g = bufs[0][n][l] = fake_net_alloc(&w, n, l, count * sizeof(float) + 64);
            float *p = bufs[1][n][l] = fake_net_alloc(&w, n, l, count * sizeof(float) + 64);
            for (size_t i = 0; i < count; i++) {
                g[i] = input(n * w.nlocal + l, i);
                p[i] = -1.0f;
            }
            if ((int)n == T.nan_node && l == 0) {
                g[T.nan_at] = NAN;
            }
            s.compression = T.cspec;
            s.bucket = T.cspec != 0 ? 5 : 0;
            s.req_id = 9;
            s.key = 77;
            s.coll = COLL__WIRE__COLLECTIVE__PS_STEP;
            s.dtype = COLL_FLOAT32;
            s.op = COLL_AVG;
            s.count = count;
            s.send_offset = (uint64_t)((uint8_t *)g - base);
            s.recv_offset = (uint64_t)((uint8_t *)p - base);
            coll_op_submit(&w.job[n], &w.sess[n][l], &s);
        }
    }
    fake_net_run(&w);
}

static void release_waiting(void)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        if (T.waiting[n] != NULL) {
            coll_op_t *op = T.waiting[n];
            T.waiting[n] = NULL;
            coll_stage_resume(op);
        }
    }
    fake_net_run(&w);
}

static size_t bytes_sent(void)
{
    size_t b = 0;
    for (size_t k = 0; k < w.nsent; k++) {
        b += w.sent[k].len;
    }
    return b;
}

/* Every rank completed; each element went once through reduced() and distribute() (every
 * node's chunk together covers the buffer once), and every output holds the stage's value. */
static void check_outputs(size_t count)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            const fake_done_t *d = fake_net_done(&w, n, l, 9);
            assert_non_null(d);
            if (d->status != COLL_OK) {
                fail_msg("node %u rank %u: %s (%s)", n, l, coll_err_name(d->status), d->error);
            }
            for (size_t i = 0; i < count; i++) {
                if (bufs[1][n][l][i] != 1000.0f - average(i)) {
                    fail_msg("node %u rank %u element %zu: %g", n, l, i, bufs[1][n][l][i]);
                }
            }
        }
        assert_int_equal(T.done_ok[n], 1);
        assert_int_equal(T.all_reduced[n], T.barrier ? 1 : 0);
    }
    for (size_t i = 0; i < count; i++) {
        assert_int_equal(T.reduced[i], 1);
        assert_int_equal(T.distributed[i], 1);
    }
}

/* What the nodes send for a compressed fp16 step: per node every other node's chunk in 16 bits
 * and its own in float32 to every other node, each behind the 144-byte prefix, and the
 * descriptor. */
static size_t fp16_step_bytes(uint32_t nodes, size_t count)
{
    coll_plan_t plan;
    size_t b = 0;

    coll_plan_init(&plan, count, nodes, sizeof(float), (size_t)1 << 30);
    for (uint32_t n = 0; n < nodes; n++) {
        for (uint32_t p = 0; p < nodes; p++) {
            if (p != n) {
                b += 144 + coll_cast_wire_bytes(coll_plan_chunk(&plan, p).len);
                b += 144 + coll_f32_wire_bytes(coll_plan_chunk(&plan, n).len);
            }
        }
        b += sizeof(coll_desc_t);
    }
    return b;
}

static void run_spec(uint32_t nodes, uint32_t nlocal, size_t count, int barrier, int defer,
                     uint64_t cspec)
{
    size_t allreduce_bytes = 0;

    fake_net_init(&w, nodes, nlocal, SEG, 4 << 20, FAKE_RENDEZVOUS);
    T = (stage_test_t){.barrier = barrier, .defer = defer, .fail_node = -1, .count = count,
                       .cspec = cspec, .nan_node = -1};
    T.reduced = calloc(count + 1, 1);
    T.distributed = calloc(count + 1, 1);
    submit(count);
    if (defer) {
        for (uint32_t n = 0; n < nodes; n++) {
            assert_non_null(T.waiting[n]); /* nothing distributed before the release */
            assert_null(fake_net_done(&w, n, 0, 9));
        }
        release_waiting();
    }
    check_outputs(count);
    /* Per node a ring allreduce sends every chunk but one twice, and a descriptor. */
    for (uint32_t n = 0; nodes > 1 && cspec == 0 && n < nodes; n++) {
        coll_plan_t plan;
        coll_plan_init(&plan, count, nodes, sizeof(float), SEG);
        allreduce_bytes += 2 * count * sizeof(float) + sizeof(coll_desc_t) -
                           (coll_plan_chunk(&plan, n).len +
                            coll_plan_chunk(&plan, (n + 1) % nodes).len) * sizeof(float);
    }
    assert_int_equal(bytes_sent(), cspec == 0 ? allreduce_bytes : fp16_step_bytes(nodes, count));
    free(T.reduced);
    free(T.distributed);
    fake_net_free(&w);
}

static void run(uint32_t nodes, uint32_t nlocal, size_t count, int barrier, int defer)
{
    run_spec(nodes, nlocal, count, barrier, defer, 0);
}

static uint64_t fp16_spec(void)
{
    coll_compression_t z = {.method = COLL_COMPRESS_FP16};
    return coll_cspec_pack(&z, 0);
}

/* Compressed steps: without a barrier, with one released at once and later; 1 / world is a
 * power of two, so the average of the exactly encoded sums is exact too. */
static void test_staged_compressed(void **state)
{
    (void)state;
    run_spec(2, 2, 5000, 0, 0, fp16_spec());
    run_spec(4, 1, 4099, 0, 0, fp16_spec());
    run_spec(2, 2, 5000, 1, 0, fp16_spec());
    run_spec(4, 2, 3001, 1, 1, fp16_spec());
}

/* A NaN in node 1's input: its stage's nonfinite() names the element, no rank succeeds, and
 * no output was written anywhere. */
static void test_staged_compressed_nan(void **state)
{
    (void)state;
    fake_net_init(&w, 2, 2, SEG, 4 << 20, FAKE_RENDEZVOUS);
    T = (stage_test_t){.fail_node = -1, .count = 3000, .cspec = fp16_spec(), .nan_node = 1,
                       .nan_at = 2345};
    T.reduced = calloc(3001, 1);
    T.distributed = calloc(3001, 1);
    submit(3000);
    assert_int_equal(T.nonfinite[1], 1);
    assert_int_equal(T.nonfinite_elem[1], 2345);
    assert_int_equal(T.nonfinite[0], 0);
    for (uint32_t n = 0; n < 2; n++) {
        for (uint32_t l = 0; l < 2; l++) {
            const fake_done_t *d = fake_net_done(&w, n, l, 9);
            assert_true(d == NULL || d->status != COLL_OK);
            for (size_t i = 0; i < 3000; i++) {
                assert_true(bufs[1][n][l][i] == -1.0f);
            }
        }
        assert_int_equal(T.done_ok[n], 0);
    }
    free(T.reduced);
    free(T.distributed);
    fake_net_free(&w);
}

static void test_staged_one_pass(void **state)
{
    (void)state;
    run(1, 3, 1000, 0, 0);
    run(2, 2, 5000, 0, 0);
    run(3, 1, 1001, 0, 0);
}

static void test_staged_barrier(void **state)
{
    (void)state;
    run(1, 2, 1000, 1, 0);
    run(2, 2, 5000, 1, 0);
    run(3, 2, 3001, 1, 0);
}

static void test_staged_barrier_released_later(void **state)
{
    (void)state;
    run(1, 2, 700, 1, 1);
    run(2, 1, 5000, 1, 1);
    run(4, 2, 4099, 1, 1);
}

/* A stage that fails the job: every rank's request fails; outputs the stage did not write stay
 * as they were. */
static void test_stage_failure(void **state)
{
    (void)state;
    for (int barrier = 0; barrier < 2; barrier++) {
        fake_net_init(&w, 2, 2, SEG, 4 << 20, FAKE_RENDEZVOUS);
        T = (stage_test_t){.barrier = barrier, .fail_node = 1, .count = 3000, .nan_node = -1};
        T.reduced = calloc(3001, 1);
        T.distributed = calloc(3001, 1);
        submit(3000);
        /* The failing node's ranks get its error; the fake layer tells no other node, whose
         * ranks must not see success (the real one's abort message fails them too). */
        for (uint32_t n = 0; n < 2; n++) {
            for (uint32_t l = 0; l < 2; l++) {
                const fake_done_t *d = fake_net_done(&w, n, l, 9);
                if (n == 1) {
                    assert_non_null(d);
                    assert_int_equal(d->status, COLL_ERR_INVALID);
                } else {
                    assert_true(d == NULL || d->status != COLL_OK);
                }
            }
            assert_int_equal(T.done_ok[n], 0);
        }
        for (size_t i = 0; barrier && i < 3000; i++) {
            assert_true(bufs[1][0][1][i] == -1.0f); /* nothing distributed before the release */
        }
        free(T.reduced);
        free(T.distributed);
        fake_net_free(&w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_staged_one_pass),
        cmocka_unit_test(test_staged_barrier),
        cmocka_unit_test(test_staged_barrier_released_later),
        cmocka_unit_test(test_stage_failure),
        cmocka_unit_test(test_staged_compressed),
        cmocka_unit_test(test_staged_compressed_nan),
    };
    return cmocka_run_group_tests_name("engine stages", tests, NULL, NULL);
}
