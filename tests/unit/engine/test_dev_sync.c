/*
 * Unit tests of the stream words of operations on device buffers (engine/dev_sync.h) over the
 * fake net layer (fake_net.h) and the fake device layer (COLL_DEVICE_FAKE=1): 2 nodes of 2 local
 * ranks, submitted as the job layer does, each rank's words in its own allocation of the host
 * pool, written and read here as the ranks' streams would.
 *
 *   an allreduce whose ranks asked for the ready word does not read its inputs before every
 *   local rank's word holds its value: inputs written after the submission, before the words,
 *   are the ones summed; the done word of every rank then holds its value (ranks of one node
 *   with different values);
 *   the copies in are queued before the words, behind device waits for them on streams of the
 *   operation's own (the bytes queued and the waits counted on the device while no word is
 *   there); where the device layer refuses the waits, nothing is queued before the words (the
 *   loop polls them) and the sums are the same;
 *   a second operation behind the words takes the streams of their own that the first gave
 *   back to the pool (streams counted: none made or destroyed), its sums right;
 *   a job that fails while the copies wait for a word keeps the operation, the word untouched,
 *   until the job ends on the node, which stores the word and releases it (its streams
 *   destroyed, not kept for later operations);
 *   a failed operation (counts that differ) stores the done words too, so no stream waits
 *   forever; a done word already above the value is left as it is;
 *   a device that faults at the first copy back (COLL_DEVICE_FAKE_COPY_FAIL) keeps none of
 *   the operation's streams of its own idle: they are destroyed (streams counted);
 *   on one node (1 x 2, the fake's executor: device+local), an allreduce whose ranks' words are
 *   not there when it starts queues its kernels at once, on a stream of its own behind device
 *   waits for the words (the waits and the launches counted on the device while no word is
 *   there), and the fake's executor runs them only at the words: the inputs written after the
 *   submission, before the words, are the ones summed, and the garbage before them is never
 *   read; the stream goes back to the pool's idle ones after; where the device layer refuses the
 *   waits, the loop polls the words and nothing is launched before them; a job that fails while
 *   the kernels wait keeps the operation, the words untouched and the kernels not run, until the
 *   job ends on the node, which stores the words and releases it (its stream destroyed);
 *   refusals: unknown flags, a value of 0, host buffers, an offset not aligned to 8
 *   (COLL_ERR_INVALID), words in another rank's allocation or past the pool
 *   (COLL_ERR_NOT_IN_POOL), each failing the job with the reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "core/dev_pools.h"
#include "core/devices.h"
#include "core/pool.h"
#include "engine/dev_sync.h"
#include "fake_dev.h"
#include "proto/submission.h"

#define N 2
#define L 2
#define COUNT 2000

static fake_world_t w;
static uv_loop_t loop;

static int setup(void **state)
{
    (void)state;
    return fake_dev_init(&w, &loop, N, L, 1 << 20);
}

/* One node: the executor's algorithm (device+local) takes its allreduces. */
static int setup_one(void **state)
{
    (void)state;
    return fake_dev_init(&w, &loop, 1, L, 1 << 20);
}

static int teardown(void **state)
{
    (void)state;
    return fake_dev_free(&w, &loop);
}

/* A rank's two words (ready, done) in its own allocation of the host pool, and their offset. */
static _Atomic uint64_t *words(uint32_t n, uint32_t l, uint64_t *off_p)
{
    uint8_t *p = fake_net_alloc(&w, n, l, 64);

    *off_p = (uint64_t)(p - coll_pool_base(w.job[n].pool));
    memset(p, 0, 16);
    return (_Atomic uint64_t *)(void *)p;
}

/* Run the loop and the net until (n, l) has the completion of @p key (at most 3 s). */
static const fake_done_t *drive(uint32_t n, uint32_t l, uint32_t key)
{
    return fake_dev_drive(&w, &loop, n, l, key, 3000);
}

/* The fake device layer, but refusing every wait on a word (a driver without them). */
static coll_status_t refuse_wait(coll_dev_stream_t s, uint64_t word, uint64_t value)
{
    (void)s;
    (void)word;
    (void)value;
    return coll__dev_fail(COLL_ERR_UNSUPPORTED, "no stream memory operations (test)");
}

/* Every rank of the world submits an allreduce of key @p key in place, its inputs -1000 (a stream
 * still behind), asking for its ready word at 3 + its local index; its buffer in @p b. */
static void submit_behind(uint32_t key, float *b[N][L], _Atomic uint64_t *wd[N][L])
{
    uint64_t off, woff;

    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            b[n][l] = fake_dev_alloc(&w, n, l, COUNT * 4, &off);
            wd[n][l] = words(n, l, &woff);
            for (size_t i = 0; i < COUNT; i++) {
                b[n][l][i] = -1000.0f;
            }
            Coll__Wire__Submit s = fake_dev_allreduce(key, COUNT, 1, off, off);
            s.sync_offset = woff;
            s.sync_value = 3 + l; /* ranks of one node at different values */
            s.sync_flags = COLL_SYNC_READY | COLL_SYNC_DONE;
            coll_op_submit(&w.job[n], &w.sess[n][l], &s);
        }
    }
}

/* The streams' work before the submission, then their words: every rank gets the sum of the
 * inputs written now, and its done word. */
static void write_and_finish(uint32_t key, float *b[N][L], _Atomic uint64_t *wd[N][L])
{
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            assert_null(fake_net_done(&w, n, l, key));
            for (size_t i = 0; i < COUNT; i++) {
                b[n][l][i] = (float)(n * L + l + 1); /* the work before the submission */
            }
            atomic_store(&wd[n][l][0], l == 0 ? 3 : 9); /* at its value, or past it */
        }
    }
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            const fake_done_t *d = drive(n, l, key);
            assert_true(d != NULL && d->status == COLL_OK);
            assert_true(b[n][l][0] == 10.0f && b[n][l][COUNT - 1] == 10.0f); /* 1 + 2 + 3 + 4 */
            assert_int_equal(atomic_load(&wd[n][l][1]), 3 + l);
        }
    }
}

/* The copies in are queued at once, behind device waits for the words: each node's two spans
 * (in place) on a pair of streams of their own, each stream waiting for both local words. */
static void test_ready_word_holds_the_inputs(void **state)
{
    float *b[N][L];
    _Atomic uint64_t *wd[N][L];
    (void)state;

    submit_behind(21, b, wd);
    assert_null(fake_dev_drive(&w, &loop, 0, 0, 21, 20)); /* nothing ends before the words */
    for (uint32_t n = 0; n < N; n++) {
        assert_int_equal(w.d[n].devices.dev[0].staged_bytes, L * COUNT * 4);
        assert_int_equal(w.d[n].devices.dev[0].stream_waits, L * 2 * L);
    }
    write_and_finish(21, b, wd);
}

/* A device layer that refuses the waits: the loop polls the words, nothing is copied before
 * them, and the results are the same. */
static void test_refused_waits_poll_the_words(void **state)
{
    coll_dev_ops_t refusing = coll_dev_fake;
    float *b[N][L];
    _Atomic uint64_t *wd[N][L];
    (void)state;

    refusing.stream_wait_word = refuse_wait;
    for (uint32_t n = 0; n < N; n++) {
        w.d[n].devices.ops = &refusing;
    }
    submit_behind(21, b, wd);
    assert_null(fake_dev_drive(&w, &loop, 0, 0, 21, 20));
    for (uint32_t n = 0; n < N; n++) {
        assert_int_equal(w.d[n].devices.dev[0].staged_bytes, 0);
        assert_int_equal(w.d[n].devices.dev[0].stream_waits, 0);
    }
    write_and_finish(21, b, wd);
    for (uint32_t n = 0; n < N; n++) {
        w.d[n].devices.ops = &coll_dev_fake;
    }
}

/* The streams of the device layer, counted (made, destroyed), by the layer `counting` (static:
 * a failed assertion leaves the daemons with it for the teardown). */
static int made, destroyed;
static coll_dev_ops_t counting;

static coll_status_t count_create(int dev, coll_dev_stream_t *s_p)
{
    made++;
    return coll_dev_fake.stream_create(dev, s_p);
}

static void count_destroy(coll_dev_stream_t s)
{
    destroyed++;
    coll_dev_fake.stream_destroy(s);
}

/* Every node's daemon on the layer `counting` (the fake's, its streams counted), the counts
 * cleared; the test puts coll_dev_fake back. */
static void use_counting(void)
{
    counting = coll_dev_fake;
    counting.stream_create = count_create;
    counting.stream_destroy = count_destroy;
    made = destroyed = 0;
    for (uint32_t n = 0; n < N; n++) {
        w.d[n].devices.ops = &counting;
    }
}

/* A second operation behind the words takes the streams of their own that the first gave back
 * to the pool: no stream made or destroyed; the sums right both times. */
static void test_wait_streams_are_reused(void **state)
{
    float *b[N][L];
    _Atomic uint64_t *wd[N][L];
    (void)state;

    use_counting();
    submit_behind(21, b, wd);
    assert_null(fake_dev_drive(&w, &loop, 0, 0, 21, 20));
    write_and_finish(21, b, wd);
    assert_int_equal(made, N * (4 + L * 2)); /* each pool's four, each span's pair */
    assert_int_equal(destroyed, 0);
    submit_behind(23, b, wd);
    assert_null(fake_dev_drive(&w, &loop, 0, 0, 23, 20));
    for (uint32_t n = 0; n < N; n++) {
        assert_int_equal(w.d[n].devices.dev[0].stream_waits, 2 * L * 2 * L); /* both waited */
        assert_int_equal(w.job[n].dev_pools[0]->nwaits, 0); /* every idle one taken */
    }
    write_and_finish(23, b, wd);
    assert_int_equal(made, N * (4 + L * 2));
    assert_int_equal(destroyed, 0);
    for (uint32_t n = 0; n < N; n++) {
        assert_int_equal(w.job[n].dev_pools[0]->nwaits, L * 2);
        w.d[n].devices.ops = &coll_dev_fake;
    }
}

/* The job fails while the copies wait for a rank's word: the operation is kept (its copies
 * would block the loop in a stream sync), the word untouched while the rank may still write
 * it; the job's end on the node stores it and gives everything back. */
static void test_job_failed_while_copies_wait(void **state)
{
    float *b[N][L];
    _Atomic uint64_t *wd[N][L];
    (void)state;

    submit_behind(21, b, wd);
    assert_null(fake_dev_drive(&w, &loop, 0, 0, 21, 20));
    coll_job_fail(&w.job[0], COLL_ERR_TIMEDOUT, 1, "test: the job times out");
    fake_net_run(&w);
    assert_true(fake_net_done(&w, 0, 0, 21) != NULL &&
                fake_net_done(&w, 0, 0, 21)->status != COLL_OK);
    assert_non_null(w.job[0].dev_parked);
    assert_int_equal(atomic_load(&wd[0][0][0]), 0);
    assert_true(w.d[0].devices.pinned.dev[0].used > 0);
    coll_dev_sync_job_end(&w.job[0]);
    assert_null(w.job[0].dev_parked);
    assert_int_equal(w.job[0].dev_pools[0]->nwaits, 0); /* its streams waited: destroyed */
    assert_int_equal(atomic_load(&wd[0][0][0]), 3);
    assert_int_equal(atomic_load(&wd[0][1][0]), 4);
    assert_int_equal(w.d[0].devices.pinned.dev[0].used, 0);
}

/* The device faults at the first copy back (COLL_DEVICE_FAKE_COPY_FAIL: the copies in, one per
 * rank, come first) of an operation whose copies in waited on streams of its own: every word
 * was there, so its streams would go back to the pool, but the device is out of service
 * (nothing takes them again): they are destroyed, with none kept idle (streams counted). Last
 * in the file: the fake's fault is sticky for the process. */
static void test_faulted_device_keeps_no_wait_streams(void **state)
{
    float *b[N][L];
    _Atomic uint64_t *wd[N][L];
    char copies[16];
    int faulted = 0;
    (void)state;

    use_counting();
    snprintf(copies, sizeof(copies), "%d", N * L + 1);
    setenv("COLL_DEVICE_FAKE_COPY_FAIL", copies, 1);
    submit_behind(31, b, wd);
    assert_null(fake_dev_drive(&w, &loop, 0, 0, 31, 20));
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            atomic_store(&wd[n][l][0], 3 + l);
        }
    }
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t l = 0; l < L; l++) {
            const fake_done_t *d = drive(n, l, 31);
            assert_true(d != NULL && d->status != COLL_OK);
        }
    }
    unsetenv("COLL_DEVICE_FAKE_COPY_FAIL");
    for (uint32_t n = 0; n < N; n++) {
        if (w.d[n].devices.dev[0].fault[0] != '\0') {
            faulted++;
            assert_int_equal(w.job[n].dev_pools[0]->nwaits, 0);
        }
        w.d[n].devices.ops = &coll_dev_fake;
    }
    assert_true(faulted > 0);
    assert_int_equal(destroyed, faulted * L * 2); /* each span's pair on a faulted node */
}

/* Counts that differ fail the operation: every done word is stored all the same, but one
 * above the value stays. */
static void test_done_word_on_failure(void **state)
{
    uint64_t off, woff[L];
    _Atomic uint64_t *wd[L];
    (void)state;

    fake_dev_alloc(&w, 0, 0, COUNT * 4, &off);
    for (uint32_t l = 0; l < L; l++) {
        wd[l] = words(0, l, &woff[l]);
        atomic_store(&wd[l][1], l == 1 ? 50 : 0);
        Coll__Wire__Submit s = fake_dev_allreduce(22, COUNT - l, 1, off, off);
        s.sync_offset = woff[l];
        s.sync_value = 7;
        s.sync_flags = COLL_SYNC_DONE;
        coll_op_submit(&w.job[0], &w.sess[0][l], &s);
        fake_net_run(&w);
    }
    for (uint32_t l = 0; l < L; l++) {
        const fake_done_t *d = drive(0, l, 22);
        assert_true(d != NULL && d->status != COLL_OK);
    }
    assert_int_equal(atomic_load(&wd[0][1]), 7);
    assert_int_equal(atomic_load(&wd[1][1]), 50);
}

/* One refused submission per case, each in a world of its own (a refusal fails the job). */
typedef struct {
    uint32_t flags;
    uint64_t value;
    int64_t at;         /* the words' offset from this rank's words */
    int others;         /* 1: the other local rank's words */
    uint32_t pool;
    coll_status_t want;
    const char *says;
} refusal_t;

static void refused(const refusal_t *c)
{
    uint64_t off, woff, other;
    const fake_done_t *d;
    Coll__Wire__Submit s;

    assert_int_equal(setup(NULL), 0);
    fake_dev_alloc(&w, 0, 0, 4096, &off);
    words(0, 0, &woff);
    words(0, 1, &other);
    s = fake_dev_allreduce(31, 16, c->pool, c->pool ? off : woff, c->pool ? off : woff);
    s.sync_offset = (c->others ? other : woff) + (uint64_t)c->at;
    s.sync_value = c->value;
    s.sync_flags = c->flags;
    coll_op_submit(&w.job[0], &w.sess[0][0], &s);
    fake_net_run(&w);
    d = fake_net_done(&w, 0, 0, 31);
    assert_non_null(d);
    assert_int_equal(d->status, c->want);
    assert_non_null(strstr(d->error, c->says));
    assert_int_equal(teardown(NULL), 0);
}

static void test_refusals(void **state)
{
    static const refusal_t cases[] = {
        {4, 1, 0, 0, 1, COLL_ERR_INVALID, "flags 0x4"},
        {COLL_SYNC_DONE, 0, 0, 0, 1, COLL_ERR_INVALID, "value 0"},
        {COLL_SYNC_READY, 1, 4, 0, 1, COLL_ERR_INVALID, "aligned to 8"},
        {COLL_SYNC_DONE, 1, 0, 0, 0, COLL_ERR_INVALID, "pool 0"},
        {COLL_SYNC_DONE, 1, 0, 1, 1, COLL_ERR_NOT_IN_POOL, "are not inside this rank's"},
        {COLL_SYNC_DONE, 1, 64 << 20, 0, 1, COLL_ERR_NOT_IN_POOL, "are not inside this rank's"},
    };
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        refused(&cases[i]);
    }
}

/* Every local rank submits an allreduce of key @p key in place, the algorithm left to the
 * daemon (the executor's, on one node), its input garbage (its stream still behind), asking
 * for its ready word at 3 + its index; its buffer in @p b, its words in @p wd. */
static void exec_submit_behind(uint32_t key, float *b[L], _Atomic uint64_t *wd[L])
{
    uint64_t off, woff;

    for (uint32_t l = 0; l < L; l++) {
        b[l] = fake_dev_alloc(&w, 0, l, COUNT * 4, &off);
        wd[l] = words(0, l, &woff);
        for (size_t i = 0; i < COUNT; i++) {
            b[l][i] = -1000.0f;
        }
        Coll__Wire__Submit s = fake_dev_allreduce(key, COUNT, 1, off, off);
        s.algo = COLL_ALGO_AUTO;
        s.sync_offset = woff;
        s.sync_value = 3 + l; /* ranks at different values */
        s.sync_flags = COLL_SYNC_READY | COLL_SYNC_DONE;
        coll_op_submit(&w.job[0], &w.sess[0][l], &s);
    }
    assert_null(fake_dev_drive(&w, &loop, 0, 0, key, 20)); /* nothing ends before the words */
    for (uint32_t l = 0; l < L; l++) {
        assert_true(b[l][0] == -1000.0f && b[l][COUNT - 1] == -1000.0f); /* nothing ran */
    }
}

/* The streams' work before the submission (the inputs), then their words: every rank gets the
 * sum of the inputs written now, named device+local, and its done word. */
static void exec_write_and_finish(uint32_t key, float *b[L], _Atomic uint64_t *wd[L])
{
    for (uint32_t l = 0; l < L; l++) {
        for (size_t i = 0; i < COUNT; i++) {
            b[l][i] = (float)(l + 1);
        }
        atomic_store(&wd[l][0], l == 0 ? 3 : 9); /* at its value, or past it */
    }
    for (uint32_t l = 0; l < L; l++) {
        const fake_done_t *d = fake_dev_drive(&w, &loop, 0, l, key, 3000);
        assert_true(d != NULL && d->status == COLL_OK);
        assert_string_equal(d->algo, "device+local");
        assert_true(b[l][0] == 3.0f && b[l][COUNT - 1] == 3.0f); /* 1 + 2 */
        assert_int_equal(atomic_load(&wd[l][1]), 3 + l);
    }
}

/* One node (the executor's algorithm, device+local): the kernels are queued at once on a
 * stream of the operation's own, behind a device wait for each local word, and run at the
 * words. */
static void test_kernels_wait_on_the_device(void **state)
{
    const coll_device_t *dv = &w.d[0].devices.dev[0];
    float *b[L];
    _Atomic uint64_t *wd[L];
    (void)state;

    exec_submit_behind(31, b, wd);
    assert_int_equal(dv->stream_waits, L);
    assert_true(dv->kernel_reduces > 0); /* launched, held by the stream */
    exec_write_and_finish(31, b, wd);
    assert_int_equal(w.job[0].dev_pools[0]->nwaits, 1); /* its stream back for the next */
}

/* One node, a device layer that refuses the waits: the loop polls the words, no kernel is
 * launched before them, and the sums are the same. */
static void test_refused_waits_poll_before_the_kernels(void **state)
{
    const coll_device_t *dv = &w.d[0].devices.dev[0];
    coll_dev_ops_t refusing = coll_dev_fake;
    float *b[L];
    _Atomic uint64_t *wd[L];
    (void)state;

    refusing.stream_wait_word = refuse_wait;
    w.d[0].devices.ops = &refusing;
    exec_submit_behind(31, b, wd);
    assert_int_equal(dv->stream_waits, 0);
    assert_int_equal(dv->kernel_reduces, 0);
    exec_write_and_finish(31, b, wd);
    w.d[0].devices.ops = &coll_dev_fake;
}

/* The job fails while the kernels wait for a rank's word: the operation is kept (a sync of its
 * stream would block the loop), the words untouched while the ranks may still write them and
 * the kernels not run; the job's end on the node stores the words and gives everything back. */
static void test_job_failed_while_kernels_wait(void **state)
{
    float *b[L];
    _Atomic uint64_t *wd[L];
    (void)state;

    exec_submit_behind(31, b, wd);
    coll_job_fail(&w.job[0], COLL_ERR_TIMEDOUT, 1, "test: the job times out");
    fake_net_run(&w);
    for (uint32_t l = 0; l < L; l++) {
        assert_true(fake_net_done(&w, 0, l, 31) != NULL &&
                    fake_net_done(&w, 0, l, 31)->status != COLL_OK);
        assert_int_equal(atomic_load(&wd[l][0]), 0);
        assert_true(b[l][0] == -1000.0f);
    }
    assert_non_null(w.job[0].dev_parked);
    coll_dev_sync_job_end(&w.job[0]);
    assert_null(w.job[0].dev_parked);
    assert_int_equal(w.job[0].dev_pools[0]->nwaits, 0); /* its stream waited: destroyed */
    assert_int_equal(atomic_load(&wd[0][0]), 3);
    assert_int_equal(atomic_load(&wd[1][0]), 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ready_word_holds_the_inputs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_waits_poll_the_words, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_streams_are_reused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_job_failed_while_copies_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(test_done_word_on_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kernels_wait_on_the_device, setup_one, teardown),
        cmocka_unit_test_setup_teardown(test_refused_waits_poll_before_the_kernels, setup_one,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_job_failed_while_kernels_wait, setup_one, teardown),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test_setup_teardown(test_faulted_device_keeps_no_wait_streams, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
