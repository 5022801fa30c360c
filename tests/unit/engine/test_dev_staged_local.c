/*
 * Unit tests of the staged path on one node without the executor of device memory
 * (engine/dev_staged.h, "staged+local") over the fake net layer and the fake device layer
 * (COLL_DEVICE_FAKE=1 COLL_DEVICE_FAKE_NO_EXEC=1 in this test's environment): 1 node of 2 local
 * ranks whose buffers are in the job's pool on device 0, each stream copying at
 * COLL_DEVICE_FAKE_COPY_MBPS=100, every result against values computed here:
 *
 *   an allreduce (float32 sum, in place) of three batches of the staged copies, the last short
 *   and not a whole segment: named "staged+pipelined+local", right, and pipelined: the first
 *   copy back (of the first batch, once the local reduce ran it) is queued while a stream of the
 *   copies in is still copying a later batch (the old path copied everything in first);
 *   a bfloat16 average (in place) the same, each element the host's: every input scaled by
 *   1/world in float32, summed, rounded once (exact here);
 *   a float16 average reduced to rank 1 and a float32 broadcast from rank 1, out of place,
 *   pipelined as well, right, the other rank's buffers untouched;
 *   a reduce-scatter and an all-gather, which the local algorithm does not run by columns,
 *   named "staged+local" (their whole buffers copied in and back), right.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "copy_probe.h"
#include "core/dev_pools.h"
#include "core/devices.h"
#include "fake_dev.h"

#define L 2
#define COUNT ((3u << 20) - 123) /* float32: 3 batches of 4 MiB, the last short */
#define HALF ((5u << 20) + 7)    /* 16-bit: 3 batches, the last short */
#define SMALL 100003             /* the reduce-scatter's and all-gather's blocks */

static fake_world_t w;
static uv_loop_t loop;
static uint64_t allocs[2 * L]; /* the test's buffers, of rank owner[i] */
static uint32_t owner[2 * L];
static int nallocs;

static int setup(void **state)
{
    (void)state;
    return fake_dev_init(&w, &loop, 1, L, 64 << 20);
}

static int teardown(void **state)
{
    (void)state;
    return fake_dev_free(&w, &loop);
}

/* Watch the node's copies (copy_probe.h), each stream at 100 MB/s, until end(). */
static void begin(void)
{
    setenv("COLL_DEVICE_FAKE_COPY_MBPS", "100", 1);
    nallocs = 0;
    copy_probe_begin(&w);
}

/* The device layer as it was, the test's buffers freed: each test's teardown, also after it
 * failed. */
static int end(void **state)
{
    (void)state;
    copy_probe_end();
    unsetenv("COLL_DEVICE_FAKE_COPY_MBPS");
    for (int i = 0; i < nallocs; i++) {
        coll_pool_free(w.job[0].dev_pools[0]->pool, allocs[i], &w.sess[0][owner[i]]);
    }
    nallocs = 0;
    return 0;
}

/* @p bytes of rank @p l's device memory (freed by end()). */
static void *alloc(uint32_t l, size_t bytes, uint64_t *off)
{
    void *p = fake_dev_alloc(&w, 0, l, bytes, off);

    assert_true(nallocs < 2 * L);
    owner[nallocs] = l;
    allocs[nallocs++] = *off;
    return p;
}

/* Every rank submits @p coll (@p dtype, @p op, @p count, @p root) with its buffers at ins[l]
 * and outs[l]; the loop runs until each has its answer, which must succeed, every rank's named
 * alike. @return The name (coll_req_algo()). */
static const char *run(Coll__Wire__Collective coll, uint32_t dtype, uint32_t op, uint64_t count,
                       uint32_t root, const uint64_t *ins, const uint64_t *outs)
{
    static char algo[32];

    static uint32_t key = 100;

    key++;
    for (uint32_t l = 0; l < L; l++) {
        Coll__Wire__Submit s = fake_dev_allreduce(key, count, 1, ins[l], outs[l]);
        s.coll = coll;
        s.dtype = dtype;
        s.op = op;
        s.root = root;
        s.algo = coll == COLL__WIRE__COLLECTIVE__ALLREDUCE ? s.algo : 0;
        coll_op_submit(&w.job[0], &w.sess[0][l], &s);
        fake_net_run(&w);
    }
    for (uint32_t l = 0; l < L; l++) {
        const fake_done_t *d = fake_dev_drive(&w, &loop, 0, l, key, 20000);
        assert_non_null(d);
        assert_int_equal(d->status, COLL_OK);
        if (l == 0) {
            snprintf(algo, sizeof(algo), "%s", d->algo);
        }
        assert_string_equal(d->algo, algo);
    }
    return algo;
}

static float input(uint32_t r, size_t i)
{
    return (float)((r + 1) * 100 + (i % 31));
}

/* Rank @p r's 16-bit input element @p i: 0 to 60, so that the average of two (halves) is exact
 * in float16 and bfloat16. */
static float half_input(uint32_t r, size_t i)
{
    return (float)((i + 7 * r) % 61);
}

/* The host's 16-bit average (collective.h): each input scaled by 1/world, summed in float32. */
static float half_avg(size_t i)
{
    float acc = 0;

    for (uint32_t r = 0; r < L; r++) {
        acc += half_input(r, i) * (1.0f / L);
    }
    return acc;
}

/* @p f, exact in bfloat16, as bfloat16. */
static uint16_t bf16(float f)
{
    uint32_t u;

    memcpy(&u, &f, 4);
    assert_true((u & 0xffffu) == 0);
    return (uint16_t)(u >> 16);
}

/* @p f, zero or a normal float16 value (exact), as float16. */
static uint16_t f16(float f)
{
    uint32_t u;

    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) == 0) {
        return (uint16_t)(u >> 16);
    }
    assert_true((u & 0x1fffu) == 0);
    return (uint16_t)(((u >> 16) & 0x8000u) | ((((u >> 23) & 0xffu) - 112u) << 10) |
                      ((u >> 13) & 0x3ffu));
}

static void test_allreduce_pipelined(void **state)
{
    float *b[L];
    uint64_t off[L];
    const char *algo;
    (void)state;

    begin();
    for (uint32_t l = 0; l < L; l++) {
        b[l] = alloc(l, COUNT * 4, &off[l]);
        for (size_t i = 0; i < COUNT; i++) {
            b[l][i] = input(l, i);
        }
    }
    algo = run(COLL__WIRE__COLLECTIVE__ALLREDUCE, COLL_FLOAT32, COLL_SUM, COUNT, 0, off, off);
    for (uint32_t l = 0; l < L; l++) {
        for (size_t i = 0; i < COUNT; i++) {
            assert_true(b[l][i] == input(0, i) + input(1, i));
        }
    }
    assert_true(copy_probe.backs > 0 && copy_probe.n_in > 0);
    assert_true(copy_probe.in_busy); /* the first batch went back while later ones still came in */
    assert_string_equal(algo, "staged+pipelined+local");
}

static void test_bf16_average(void **state)
{
    uint16_t *b[L];
    uint64_t off[L];
    const char *algo;
    (void)state;

    begin();
    for (uint32_t l = 0; l < L; l++) {
        b[l] = alloc(l, HALF * 2, &off[l]);
        for (size_t i = 0; i < HALF; i++) {
            b[l][i] = bf16(half_input(l, i));
        }
    }
    algo = run(COLL__WIRE__COLLECTIVE__ALLREDUCE, COLL_BFLOAT16, COLL_AVG, HALF, 0, off, off);
    for (uint32_t l = 0; l < L; l++) {
        for (size_t i = 0; i < HALF; i++) {
            assert_true(b[l][i] == bf16(half_avg(i)));
        }
    }
    assert_true(copy_probe.in_busy);
    assert_string_equal(algo, "staged+pipelined+local");
}

/* A float16 average reduced to rank 1, then a float32 broadcast from rank 1, out of place. */
static void test_reduce_broadcast(void **state)
{
    uint16_t *in[L], *out[L];
    float *fin;
    uint64_t ino[L], outo[L];
    const char *algo;
    (void)state;

    begin();
    for (uint32_t l = 0; l < L; l++) {
        in[l] = alloc(l, HALF * 2, &ino[l]);
        out[l] = alloc(l, HALF * 2, &outo[l]);
        for (size_t i = 0; i < HALF; i++) {
            in[l][i] = f16(half_input(l, i));
            out[l][i] = 0xffff;
        }
    }
    algo = run(COLL__WIRE__COLLECTIVE__REDUCE, COLL_FLOAT16, COLL_AVG, HALF, 1, ino, outo);
    for (size_t i = 0; i < HALF; i++) {
        assert_true(out[1][i] == f16(half_avg(i)) && out[0][i] == 0xffff);
        assert_true(in[0][i] == f16(half_input(0, i)));
    }
    assert_true(copy_probe.in_busy);
    assert_string_equal(algo, "staged+pipelined+local");
    /* The broadcast's buffers: rank 1's input is the reduce's input, each output float32. */
    copy_probe.backs = copy_probe.in_busy = 0;
    fin = (float *)(void *)in[1];
    for (size_t i = 0; i < HALF / 2; i++) {
        fin[i] = input(1, i);
    }
    algo = run(COLL__WIRE__COLLECTIVE__BROADCAST, COLL_FLOAT32, COLL_SUM, HALF / 2, 1, ino, outo);
    for (uint32_t l = 0; l < L; l++) {
        const float *o = (const float *)(const void *)out[l];
        for (size_t i = 0; i < HALF / 2; i++) {
            assert_true(o[i] == input(1, i));
        }
    }
    assert_true(copy_probe.in_busy);
    assert_string_equal(algo, "staged+pipelined+local");
}

/* The collectives the local algorithm runs whole: a reduce-scatter of SMALL-element blocks
 * (float32 sum), then an all-gather of them. */
static void test_whole_collectives(void **state)
{
    float *in[L], *out[L];
    uint64_t ino[L], outo[L];
    (void)state;

    begin();
    for (uint32_t l = 0; l < L; l++) {
        in[l] = alloc(l, (size_t)SMALL * L * 4, &ino[l]);
        out[l] = alloc(l, (size_t)SMALL * L * 4, &outo[l]);
        for (size_t i = 0; i < (size_t)SMALL * L; i++) {
            in[l][i] = input(l, i);
        }
    }
    assert_string_equal(
        run(COLL__WIRE__COLLECTIVE__REDUCE_SCATTER, COLL_FLOAT32, COLL_SUM, SMALL, 0, ino, outo),
        "staged+local");
    for (uint32_t l = 0; l < L; l++) {
        for (size_t i = 0; i < SMALL; i++) {
            size_t j = (size_t)l * SMALL + i;
            assert_true(out[l][i] == input(0, j) + input(1, j));
        }
    }
    assert_string_equal(
        run(COLL__WIRE__COLLECTIVE__ALLGATHER, COLL_FLOAT32, COLL_SUM, SMALL, 0, outo, ino),
        "staged+local");
    for (uint32_t l = 0; l < L; l++) {
        for (size_t i = 0; i < (size_t)SMALL * L; i++) {
            assert_true(in[l][i] == input(0, i) + input(1, i));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_allreduce_pipelined, end),
        cmocka_unit_test_teardown(test_bf16_average, end),
        cmocka_unit_test_teardown(test_reduce_broadcast, end),
        cmocka_unit_test_teardown(test_whole_collectives, end),
    };
    return cmocka_run_group_tests_name("dev_staged_local", tests, setup, teardown);
}
