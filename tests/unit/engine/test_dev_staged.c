/*
 * Unit tests of the staged path (engine/dev_staged.h) over the fake net layer (fake_net.h) and the
 * fake device layer (COLL_DEVICE_FAKE=1 in this test's environment): 2 nodes of 2 local ranks
 * whose buffers are in each job's pool on device 0, submitted as the job layer does.
 *
 *   a ring allreduce on device buffers: every output right (values computed here), the inputs
 *   untouched, the completion names "staged+ring", each device counts one staged operation
 *   and the bytes copied both ways; while it waits for the other node its device buffers are
 *   in flight (a free of them is refused);
 *   an in-place allreduce whose local ranks hold it in different memory kinds (one device
 *   buffer, one host buffer) gives both the same sum;
 *   the host copies are page-locked buffers of the daemon's cache (core/dev_pinned.h): a
 *   second allreduce of the same sizes takes every one of them from it (hits, no new lock),
 *   and what it keeps idle stays within its limit;
 *   the host copies are page-locked, and where the device layer refuses that
 *   (COLL_DEVICE_FAKE_PIN_FAIL) ordinary memory serves, counted, with the same sums;
 *   copies that take time (COLL_DEVICE_FAKE_COPY_DELAY_MS): submitting returns with nothing
 *   started, the loop's poll of the copies' events starts the algorithm and, after the copies
 *   back, tells the ranks; the sums are right;
 *   the copies back go on streams of their own: node 0's copies in (device to host) on its
 *   pool's in pair, its copies back on its back pair, no stream carrying both; a pipelined
 *   allreduce (three batches, each stream copying at COLL_DEVICE_FAKE_COPY_MBPS) queues its
 *   first copy back on an idle stream while the in pair is still copying later batches in
 *   (the copy back does not wait behind them), named "staged+pipelined+ring", right;
 *   a copy back that the device layer refuses fails the job on that node with the layer's
 *   words, and its ranks get the error instead of a success; so does an event the loop's poll
 *   finds failed; after either every page-locked buffer is back in the cache, and at the end
 *   the cache unlocks every buffer it holds (the ASan build finds any leak).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <unistd.h>
#include <uv.h>

#include "core/dev_pools.h"
#include "core/devices.h"
#include "copy_probe.h"
#include "engine/inflight.h"
#include "fake_dev.h"

#define N 2
#define L 2
#define COUNT 3000 /* floats: several ring segments of 1 KiB */
#define CACHE_BYTES (256 << 10) /* each node's staged_pinned_cache_bytes */
#define CLASS (64 << 10)        /* the cache's size of a host copy of COUNT floats */

static fake_world_t w;
static uv_loop_t loop; /* the daemons' loop, for the poll of copies that take time */
static coll_dev_ops_t failing;      /* a node's device layer, but failing (the tests below) */
static const coll_dev_ops_t *real;  /* the device layer it stands for */

static float input(uint32_t r, size_t i)
{
    return (float)((r + 1) * 100 + (i % 31));
}

static float total(size_t i)
{
    float t = 0;
    for (uint32_t r = 0; r < N * L; r++) {
        t += input(r, i);
    }
    return t;
}

static int setup(void **state)
{
    (void)state;
    return fake_dev_init(&w, &loop, N, L, CACHE_BYTES);
}

static int teardown(void **state)
{
    (void)state;
    return fake_dev_free(&w, &loop);
}

static void submit(uint32_t n, uint32_t l, uint32_t key, uint32_t pool, uint64_t send,
                   uint64_t recv)
{
    Coll__Wire__Submit s = fake_dev_allreduce(key, COUNT, pool, send, recv);

    coll_op_submit(&w.job[n], &w.sess[n][l], &s);
    fake_net_run(&w);
}

static void test_allreduce(void **state)
{
    float *in[N][L], *out[N][L];
    uint64_t ino[N][L], outo[N][L];
    char what[64];
    (void)state;

    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            in[n][l] = fake_dev_alloc(&w, n, l, COUNT * 4, &ino[n][l]);
            out[n][l] = fake_dev_alloc(&w, n, l, COUNT * 4, &outo[n][l]);
            for (size_t i = 0; i < COUNT; i++) {
                in[n][l][i] = input(n * L + l, i);
                out[n][l][i] = -1;
            }
        }
    }
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            submit(n, l, 11, 1, ino[n][l], outo[n][l]);
        }
        if (n == 0) { /* node 1 has not submitted yet */
            assert_true(coll_inflight_uses(&w.job[0], &w.sess[0][0], 1, outo[0][0], what,
                                           sizeof(what)));
            assert_false(coll_inflight_uses(&w.job[0], &w.sess[0][0], 0, outo[0][0], what,
                                            sizeof(what)));
            assert_int_equal(out[0][0][0], -1);
        }
    }
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            const fake_done_t *d = fake_net_done(&w, n, l, 11);
            assert_non_null(d);
            assert_int_equal(d->status, COLL_OK);
            assert_string_equal(d->algo, "staged+ring");
            for (size_t i = 0; i < COUNT; i++) {
                assert_true(out[n][l][i] == total(i) && in[n][l][i] == input(n * L + l, i));
            }
        }
        assert_int_equal(w.d[n].devices.dev[0].staged_ops, 1);
        assert_int_equal(w.d[n].devices.dev[0].staged_bytes, (uint64_t)L * 2 * COUNT * 4);
        assert_int_equal(w.d[n].devices.dev[0].staged_unpinned, 0);
        assert_int_equal(w.d[n].devices.pinned.dev[0].misses, L * 2); /* in and out a rank */
        assert_int_equal(w.d[n].devices.pinned.dev[0].used, 0);
    }
}

/* The same allreduce again: its host copies are the first one's buffers, none locked anew,
 * and the cache keeps at most its limit idle. */
static void test_cache_reused(void **state)
{
    float *in[N][L], *out[N][L];
    uint64_t ino[N][L], outo[N][L];
    (void)state;

    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            in[n][l] = fake_dev_alloc(&w, n, l, COUNT * 4, &ino[n][l]);
            out[n][l] = fake_dev_alloc(&w, n, l, COUNT * 4, &outo[n][l]);
            for (size_t i = 0; i < COUNT; i++) {
                in[n][l][i] = input(n * L + l, i);
            }
        }
    }
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            submit(n, l, 17, 1, ino[n][l], outo[n][l]);
        }
    }
    for (uint32_t n = 0; n < N; n++) {
        const coll_pinned_dev_t *c = &w.d[n].devices.pinned.dev[0];
        for (uint32_t l = 0; l < L; l++) {
            const fake_done_t *d = fake_net_done(&w, n, l, 17);
            assert_true(d != NULL && d->status == COLL_OK);
            for (size_t i = 0; i < COUNT; i++) {
                assert_true(out[n][l][i] == total(i));
            }
        }
        assert_int_equal(c->hits, L * 2);
        assert_int_equal(c->misses, L * 2);
        assert_int_equal(c->held, L * 2 * CLASS);
        assert_true(c->held <= CACHE_BYTES && c->used == 0);
    }
}

/* The device layer refuses page-locked memory on node 1, whose cache holds nothing idle: its
 * host copies are ordinary memory, counted, and the sums are as right. */
static void test_unpinned_fallback(void **state)
{
    float *b[N][L];
    uint64_t off[N][L];
    (void)state;

    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            b[n][l] = fake_dev_alloc(&w, n, l, COUNT * 4, &off[n][l]);
            for (size_t i = 0; i < COUNT; i++) {
                b[n][l][i] = input(n * L + l, i);
            }
        }
    }
    coll_pinned_configure(&w.d[1].devices.pinned, &loop, 0, 60000); /* nothing idle to reuse */
    for (uint32_t n = 0; n < N; n++) {
        if (n == 1) {
            setenv("COLL_DEVICE_FAKE_PIN_FAIL", "1", 1);
        }
        for (uint32_t l = 0; l < L; l++) {
            submit(n, l, 14, 1, off[n][l], off[n][l]);
        }
        unsetenv("COLL_DEVICE_FAKE_PIN_FAIL");
    }
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            const fake_done_t *d = fake_net_done(&w, n, l, 14);
            assert_true(d != NULL && d->status == COLL_OK);
            for (size_t i = 0; i < COUNT; i++) {
                assert_true(b[n][l][i] == total(i));
            }
        }
    }
    assert_int_equal(w.d[0].devices.dev[0].staged_unpinned, 0);
    assert_int_equal(w.d[1].devices.dev[0].staged_unpinned, L); /* one in-place span a rank */
    coll_pinned_configure(&w.d[1].devices.pinned, &loop, CACHE_BYTES, 60000);
}

/* Local rank 0 of each node in place on the device, local rank 1 in place in the host pool. */
static void test_mixed_kinds(void **state)
{
    float *b[N][L];
    uint64_t off[N][L];
    (void)state;

    for (uint32_t n = 0; n < N; n++) {
        b[n][0] = fake_dev_alloc(&w, n, 0, COUNT * 4, &off[n][0]);
        b[n][1] = fake_net_alloc(&w, n, 1, COUNT * 4);
        off[n][1] = (uint64_t)((uint8_t *)b[n][1] - coll_pool_base(w.job[n].pool));
        for (uint32_t l = 0; l < L; l++) {
            for (size_t i = 0; i < COUNT; i++) {
                b[n][l][i] = input(n * L + l, i);
            }
        }
    }
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            submit(n, l, 12, l == 0 ? 1 : 0, off[n][l], off[n][l]);
        }
    }
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            const fake_done_t *d = fake_net_done(&w, n, l, 12);
            assert_true(d != NULL && d->status == COLL_OK);
            for (size_t i = 0; i < COUNT; i++) {
                assert_true(b[n][l][i] == total(i));
            }
        }
    }
}

/* The loop and the fake net, until local rank @p l of node @p n has its answer to @p key (at
 * most 5 s); *@p finishing_p: whether node 0's operation was ever seen done with its ranks not
 * told yet (its copies back in flight), its buffers then still in use for a free. */
static const fake_done_t *drive(uint32_t n, uint32_t l, uint32_t key, int *finishing_p)
{
    const fake_done_t *d = NULL;

    for (int i = 0; i < 5000 && (d = fake_net_done(&w, n, l, key)) == NULL; i++) {
        coll_op_t *op, *tmp;
        coll_list_for_each_safe(op, tmp, &w.job[0].engine.ops, coll_op_t, link)
        {
            if (op->desc.key == key && op->finishing) {
                /* Done, its copies back still writing: the daemon refuses a free of them. */
                char what[64];
                *finishing_p = 1;
                assert_true(coll_inflight_uses(&w.job[0], op->members[0].session,
                                               op->members[0].pool, op->members[0].recv_off,
                                               what, sizeof(what)));
            }
        }
        uv_run(&loop, UV_RUN_NOWAIT);
        fake_net_run(&w);
        usleep(1000);
    }
    return d;
}

/* Copies that take time (COLL_DEVICE_FAKE_COPY_DELAY_MS): submitting returns with nothing
 * started, the loop's poll starts the algorithm once the copies in are done and tells the ranks
 * once the copies back are; the sums are right. */
static void test_copies_polled_from_the_loop(void **state)
{
    float *b[N][L];
    uint64_t off[N][L];
    int finishing = 0;
    (void)state;

    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            b[n][l] = fake_dev_alloc(&w, n, l, COUNT * 4, &off[n][l]);
            for (size_t i = 0; i < COUNT; i++) {
                b[n][l][i] = input(n * L + l, i);
            }
        }
    }
    setenv("COLL_DEVICE_FAKE_COPY_DELAY_MS", "20", 1);
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            submit(n, l, 15, 1, off[n][l], off[n][l]);
        }
    }
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            assert_null(fake_net_done(&w, n, l, 15));
            assert_true(b[n][l][7] == input(n * L + l, 7)); /* not reduced yet */
        }
    }
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            const fake_done_t *d = drive(n, l, 15, &finishing);
            assert_true(d != NULL && d->status == COLL_OK);
            assert_string_equal(d->algo, "staged+ring");
            for (size_t i = 0; i < COUNT; i++) {
                assert_true(b[n][l][i] == total(i));
            }
        }
    }
    unsetenv("COLL_DEVICE_FAKE_COPY_DELAY_MS");
    assert_true(finishing);
}

/* Node 0's copies watched (copy_probe.h) until the test's end, also after it failed. */
static int copies_sorted_stop(void **state)
{
    (void)state;
    copy_probe_end();
    return 0;
}

/* Node 0's copies in went on its pool's in pair, its copies back on its back pair. */
static void copies_sorted_end(void)
{
    coll_dev_stream_t(*pairs)[2] = w.job[0].dev_pools[0]->streams;

    const copy_probe_t *p = &copy_probe;

    copy_probe_end();
    assert_true(p->n_in > 0 && p->n_back > 0);
    for (int i = 0; i < p->n_in; i++) {
        assert_true(p->in[i] == pairs[COLL_DEV_POOL_IN][0] ||
                    p->in[i] == pairs[COLL_DEV_POOL_IN][1]);
    }
    for (int i = 0; i < p->n_back; i++) {
        assert_true(p->back[i] == pairs[COLL_DEV_POOL_BACK][0] ||
                    p->back[i] == pairs[COLL_DEV_POOL_BACK][1]);
        for (int j = 0; j < p->n_in; j++) {
            assert_ptr_not_equal(p->back[i], p->in[j]);
        }
    }
}

/* An allreduce of @p count floats in place, key @p key, on every rank's device buffer (node 0's
 * copies sorted): the loop driven until every rank has its answer, each checked. */
static void allreduce_sorted(uint64_t count, uint32_t key, const char *algo)
{
    float *b[N][L];
    uint64_t off[N][L];
    int finishing = 0;

    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            b[n][l] = fake_dev_alloc(&w, n, l, count * 4, &off[n][l]);
            for (size_t i = 0; i < count; i++) {
                b[n][l][i] = input(n * L + l, i);
            }
        }
    }
    copy_probe_begin(&w);
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            Coll__Wire__Submit sub = fake_dev_allreduce(key, count, 1, off[n][l], off[n][l]);
            coll_op_submit(&w.job[n], &w.sess[n][l], &sub);
            fake_net_run(&w);
        }
    }
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            const fake_done_t *d = drive(n, l, key, &finishing);
            assert_true(d != NULL && d->status == COLL_OK);
            assert_string_equal(d->algo, algo);
            for (size_t i = 0; i < count; i++) {
                assert_true(b[n][l][i] == total(i));
            }
        }
    }
    copies_sorted_end();
}

/* The whole copies: in on the in pair, back on the back pair. */
static void test_copies_back_on_their_own_streams(void **state)
{
    (void)state;
    allreduce_sorted(COUNT, 18, "staged+ring");
}

/* 3 Mi floats (12 MiB a rank): three batches of 2048 columns of the ring's 1 KiB segments, each
 * stream copying at 20 MB/s (about 200 ms a batch): the first batch's copies back start at once
 * on the back pair while the in pair still copies the later batches. */
static void test_pipelined_back_beside_in(void **state)
{
    (void)state;
    setenv("COLL_DEVICE_FAKE_COPY_MBPS", "20", 1);
    allreduce_sorted((uint64_t)3 << 20, 19, "staged+pipelined+ring");
    unsetenv("COLL_DEVICE_FAKE_COPY_MBPS");
    assert_true(copy_probe.back_idle);
    assert_true(copy_probe.in_busy);
}

/* Node 1's events fail once the loop polls them (after test_copy_back_refused failed node 0's
 * job). */
static int queries;

static coll_status_t failing_query(coll_dev_event_t e)
{
    /* The first poll, at the queueing, sees the 2 * L spans' events in flight. */
    if (++queries > 2 * 2 * L) {
        return coll__dev_fail(COLL_ERR_IO, "cuEventQuery: CUDA_ERROR_LAUNCH_FAILED (test)");
    }
    return real->event_query(e);
}

static void test_copy_in_fails_in_the_poll(void **state)
{
    uint64_t ino, outo;
    int finishing = 0;
    (void)state;

    real = w.d[1].devices.ops;
    failing = *real;
    failing.event_query = failing_query;
    w.d[1].devices.ops = &failing;
    queries = 0;
    setenv("COLL_DEVICE_FAKE_COPY_DELAY_MS", "1000", 1);
    for (uint32_t l = 0; l < L; l++) {
        fake_dev_alloc(&w, 1, l, COUNT * 4, &ino);
        fake_dev_alloc(&w, 1, l, COUNT * 4, &outo);
        submit(1, l, 16, 1, ino, outo);
    }
    unsetenv("COLL_DEVICE_FAKE_COPY_DELAY_MS");
    assert_null(fake_net_done(&w, 1, 0, 16));
    for (uint32_t l = 0; l < L; l++) {
        const fake_done_t *d = drive(1, l, 16, &finishing);
        assert_non_null(d);
        assert_int_equal(d->status, COLL_ERR_IO);
        assert_non_null(strstr(d->error, "could not copy the device buffers in"));
        assert_non_null(strstr(d->error, "CUDA_ERROR_LAUNCH_FAILED"));
    }
    w.d[1].devices.ops = real;
    assert_int_equal(w.job[1].state, COLL_JOB_FAILED);
    assert_int_equal(w.d[1].devices.pinned.dev[0].used, 0);
}

/* The device layer of node 0, but its copies fail from the @c fail_from-th on. */
static int copies, fail_from;

static coll_status_t failing_copy(uint64_t dst, uint64_t src, size_t bytes, coll_dev_stream_t s)
{
    if (++copies >= fail_from) {
        return coll__dev_fail(COLL_ERR_IO, "cuMemcpyAsync: CUDA_ERROR_ILLEGAL_ADDRESS (test)");
    }
    return real->copy_async(dst, src, bytes, s);
}

static void test_copy_back_refused(void **state)
{
    uint64_t ino, outo;
    (void)state;

    real = w.d[0].devices.ops;
    failing = *real;
    failing.copy_async = failing_copy;
    w.d[0].devices.ops = &failing;
    copies = 0;
    fail_from = L + 1; /* the copies in (one chunk per rank) pass, the first copy back fails */
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            fake_dev_alloc(&w, n, l, COUNT * 4, &ino);
            fake_dev_alloc(&w, n, l, COUNT * 4, &outo);
            submit(n, l, 13, 1, ino, outo);
        }
    }
    w.d[0].devices.ops = real;
    for (uint32_t l = 0; l < L; l++) {
        const fake_done_t *d = fake_net_done(&w, 0, l, 13);
        assert_non_null(d);
        assert_int_equal(d->status, COLL_ERR_IO);
        assert_non_null(strstr(d->error, "could not copy the results back"));
        assert_non_null(strstr(d->error, "CUDA_ERROR_ILLEGAL_ADDRESS"));
    }
    assert_int_equal(w.job[0].state, COLL_JOB_FAILED);
    assert_int_equal(w.d[0].devices.pinned.dev[0].used, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce),
        cmocka_unit_test(test_cache_reused),
        cmocka_unit_test(test_mixed_kinds),
        cmocka_unit_test(test_unpinned_fallback),
        cmocka_unit_test(test_copies_polled_from_the_loop),
        cmocka_unit_test_teardown(test_copies_back_on_their_own_streams, copies_sorted_stop),
        cmocka_unit_test_teardown(test_pipelined_back_beside_in, copies_sorted_stop),
        cmocka_unit_test(test_copy_back_refused),
        cmocka_unit_test(test_copy_in_fails_in_the_poll),
    };
    return cmocka_run_group_tests_name("dev_staged", tests, setup, teardown);
}
