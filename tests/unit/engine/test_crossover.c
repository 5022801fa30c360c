/*
 * Unit tests of the automatic choice by the cost model (engine/crossover.h) over the fake net
 * layer (fake_net.h):
 *
 *   the size ranges the root computes, against crossovers worked out here by hand from the
 *   formulas of cost.h with round constants (2, 3 and 4 nodes), and recursive doubling's limit
 *   (one segment) where the model would run it further;
 *   the choice an operation gets from them on either side of each crossover, forced
 *   algorithms unchanged;
 *   every node choosing alike from the root's parameters, through the wire form the root
 *   sends, whatever the node's own configuration: an allreduce on each side of the crossover
 *   completes on every rank of 2 nodes x 2 with the sum and the algorithm of the range;
 *   the constants file: values read over the built-in ones (decimal numbers only, one below
 *   the smallest double read as that small), every kind of bad line (a NUL byte, a key twice,
 *   hex, inf, nan, a number out of range) and an unreadable file refused with the file and
 *   line named, the daemon's start refusing it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../base/capture.h"
#include "fake_net.h"
#include "engine/algo.h"
#include "engine/crossover.h"

#define SEG (64u << 10) /* the job's segment bytes */
#define US 1e-6

static fake_world_t w;

/* alpha 10 us, beta 1 ns/B, gamma 3 ns/B; the rest plays no part in the exact algorithms'
 * crossovers (alpha_op and the daemon's local combine are the same for every candidate). */
static coll_cost_params_t hand(void)
{
    coll_cost_params_t p;
    coll_cost_params_default(&p);
    p.alpha = 10 * US;
    p.beta = 1e-9;
    p.gamma = 3e-9;
    return p;
}

static coll_job_params_t root_params(const coll_cost_params_t *cp, uint32_t nnodes,
                                     uint32_t ranks_per_node)
{
    coll_job_params_t p = {.timeout_ms = 60000, .segment_bytes = SEG, .pipeline_depth = 2,
                           .rd_max_bytes = 1024};
    assert_int_equal(coll_crossover_make(cp, nnodes, ranks_per_node, &p), COLL_OK);
    return p;
}

static void expect_choice(const coll_job_params_t *p, uint32_t i, coll_kind_t kind,
                          coll_algo_t algo, uint64_t max_bytes)
{
    assert_true(i < p->nchoices);
    assert_int_equal(p->choices[i].kind, kind);
    assert_int_equal(p->choices[i].algo, algo);
    assert_int_equal(p->choices[i].max_bytes, max_bytes);
}

/* rd - ring, both with the same alpha_op and local combine:
 *   N = 2: (a + S (b + g)) - (2 a + S b + S g / 2) < 0  <=>  S < 2a / g = 6666.67
 *   N = 4: 2 (a + S (b + g)) - (6 a + 1.5 S b + 0.75 S g) < 0  <=>  S < 4a / (0.5b + 1.25g)
 *          = 40e-6 / 4.25e-9 = 9411.76
 *   N = 3 (fold in and out): 3a + 3Sb + 2Sg - (4a + 4/3 S b + 2/3 S g) < 0
 *          <=>  S < a / (5/3 b + 4/3 g) = 1764.71 */
static void test_ranges_by_hand(void **state)
{
    coll_cost_params_t cp = hand();
    coll_job_params_t p = root_params(&cp, 4, 1);

    (void)state;
    assert_int_equal(p.nchoices, 7);
    expect_choice(&p, 0, COLL_KIND_ALLREDUCE, COLL_ALGO_RD, 9411);
    expect_choice(&p, 1, COLL_KIND_ALLREDUCE, COLL_ALGO_RING, UINT64_MAX);
    expect_choice(&p, 2, COLL_KIND_REDUCE_SCATTER, COLL_ALGO_RING, UINT64_MAX);
    expect_choice(&p, 3, COLL_KIND_ALLGATHER, COLL_ALGO_RING, UINT64_MAX);
    expect_choice(&p, 4, COLL_KIND_BROADCAST, COLL_ALGO_CHAIN, UINT64_MAX);
    expect_choice(&p, 5, COLL_KIND_REDUCE, COLL_ALGO_CHAIN, UINT64_MAX);
    expect_choice(&p, 6, COLL_KIND_BARRIER, COLL_ALGO_DISSEMINATION, UINT64_MAX);
    /* The ranks per node change nothing between rd and the ring. */
    p = root_params(&cp, 2, 2);
    expect_choice(&p, 0, COLL_KIND_ALLREDUCE, COLL_ALGO_RD, 6666);
    expect_choice(&p, 1, COLL_KIND_ALLREDUCE, COLL_ALGO_RING, UINT64_MAX);
    p = root_params(&cp, 3, 1);
    expect_choice(&p, 0, COLL_KIND_ALLREDUCE, COLL_ALGO_RD, 1764);
    /* No reduction cost: rd always wins by the model, up to what one segment holds. */
    cp.gamma = 0;
    p = root_params(&cp, 2, 1);
    expect_choice(&p, 0, COLL_KIND_ALLREDUCE, COLL_ALGO_RD, SEG - sizeof(coll_desc_t));
    expect_choice(&p, 1, COLL_KIND_ALLREDUCE, COLL_ALGO_RING, UINT64_MAX);
}

static int setup(void **state)
{
    (void)state;
    fake_net_init(&w, 2, 2, SEG, 4 << 20, FAKE_EAGER);
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

static void test_choice_follows_ranges(void **state)
{
    coll_cost_params_t cp = hand();

    (void)state;
    w.job[0].params = root_params(&cp, 4, 1);
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, 8, COLL_ALGO_AUTO), COLL_ALGO_RD);
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, 9411, COLL_ALGO_AUTO), COLL_ALGO_RD);
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, 9412, COLL_ALGO_AUTO), COLL_ALGO_RING);
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, 1 << 20, COLL_ALGO_AUTO), COLL_ALGO_RING);
    /* rd_max_bytes (1024) no longer decides. */
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, 4096, COLL_ALGO_AUTO), COLL_ALGO_RD);
    assert_int_equal(resolve(COLL_KIND_BROADCAST, 4096, COLL_ALGO_AUTO), COLL_ALGO_CHAIN);
    assert_int_equal(resolve(COLL_KIND_BARRIER, 0, COLL_ALGO_AUTO), COLL_ALGO_DISSEMINATION);
    /* Collectives the model does not know keep the table's choice. */
    assert_int_equal(resolve(COLL_KIND_GATHER, 64, COLL_ALGO_AUTO), COLL_ALGO_DIRECT);
    assert_int_equal(resolve(COLL_KIND_PS_STEP, 64, COLL_ALGO_AUTO), COLL_ALGO_RING);
    /* Forced algorithms are unchanged. */
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, 8, COLL_ALGO_RING), COLL_ALGO_RING);
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, 1 << 20, COLL_ALGO_RD),
                     COLL_ALGO_REFUSED + COLL_ALGO_RD);
    /* Without ranges (a root with cost_params = none): rd_max_bytes. */
    w.job[0].params.nchoices = 0;
    assert_int_equal(resolve(COLL_KIND_ALLREDUCE, 1025, COLL_ALGO_AUTO), COLL_ALGO_RING);
}

/* The root's parameters as a node gets them: packed, unpacked, converted. */
static coll_job_params_t through_wire(const coll_job_params_t *root)
{
    Coll__Wire__JobParams out, *in;
    Coll__Wire__AlgoChoice store[COLL_JOB_CHOICES], *ptrs[COLL_JOB_CHOICES];
    uint8_t buf[1024];
    coll_job_params_t p;
    size_t len;

    coll_job_params_to_wire(root, &out, store, ptrs);
    len = coll__wire__job_params__get_packed_size(&out);
    assert_true(len <= sizeof(buf));
    coll__wire__job_params__pack(&out, buf);
    in = coll__wire__job_params__unpack(NULL, len, buf);
    assert_non_null(in);
    assert_int_equal(coll_job_params_from_wire(in, &p), COLL_OK);
    coll__wire__job_params__free_unpacked(in, NULL);
    return p;
}

static void allreduce(uint32_t count, uint32_t req_id, float **bufs)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            Coll__Wire__Submit s = COLL__WIRE__SUBMIT__INIT;
            float *b = bufs[n * w.nlocal + l];
            for (uint32_t i = 0; i < count; i++) {
                b[i] = (float)((n * w.nlocal + l + 1) * 100 + i % 7);
            }
            s.req_id = req_id;
            s.key = req_id;
            s.coll = COLL__WIRE__COLLECTIVE__ALLREDUCE;
            s.dtype = COLL_FLOAT32;
            s.op = COLL_SUM;
            s.count = count;
            s.send_offset = s.recv_offset =
                (uint64_t)((uint8_t *)b - coll_pool_base(w.job[n].pool));
            coll_op_submit(&w.job[n], &w.sess[n][l], &s);
        }
    }
    fake_net_run(&w);
}

static void expect_allreduce(uint32_t count, uint32_t req_id, float **bufs, const char *algo)
{
    for (uint32_t n = 0; n < w.nnodes; n++) {
        for (uint32_t l = 0; l < w.nlocal; l++) {
            const fake_done_t *d = fake_net_done(&w, n, l, req_id);
            const float *b = bufs[n * w.nlocal + l];
            assert_non_null(d);
            if (d->status != COLL_OK || strcmp(d->algo, algo) != 0) {
                fail_msg("node %u local %u: %s by %s, want %s (%s)", n, l,
                         coll_err_name(d->status), d->algo, algo, d->error);
            }
            for (uint32_t i = 0; i < count; i++) {
                /* Ranks 0..3 hold (r + 1) 100 + i % 7: the sum is 1000 + 4 (i % 7). */
                assert_true(b[i] == (float)(1000 + 4 * (i % 7)));
            }
        }
    }
}

static void test_nodes_choose_alike(void **state)
{
    coll_cost_params_t cp = hand();
    coll_job_params_t root = root_params(&cp, 2, 2);
    float *bufs[4];

    (void)state;
    /* Node 0 is the root; node 1 gets the wire form, over a configuration of its own that
     * alone would choose otherwise (rd_max_bytes 0: always the ring). */
    w.job[0].params = root;
    w.job[1].params.rd_max_bytes = 0;
    w.job[1].params = through_wire(&root);
    assert_int_equal(w.job[1].params.rd_max_bytes, root.rd_max_bytes);
    assert_int_equal(w.job[1].params.nchoices, root.nchoices);
    assert_memory_equal(w.job[1].params.choices, root.choices,
                        root.nchoices * sizeof(root.choices[0]));
    for (uint32_t r = 0; r < 4; r++) {
        bufs[r] = fake_net_alloc(&w, r / 2, r % 2, 8192);
    }
    /* 6666 bytes per rank and below by rd, above by the ring: 1666 floats and 1667. */
    allreduce(1666, 1, bufs);
    expect_allreduce(1666, 1, bufs, "rd");
    allreduce(1667, 2, bufs);
    expect_allreduce(1667, 2, bufs, "ring");
}

/* A file of the @p len bytes at @p text in a fresh temporary path (the caller unlinks it). */
static void write_bytes(char *path, const char *text, size_t len)
{
    int fd;
    strcpy(path, "/tmp/coll-cost-XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
}

static void write_file(char *path, const char *text)
{
    write_bytes(path, text, strlen(text));
}

static coll_status_t load_bytes(const char *text, size_t n, coll_cost_params_t *p, char *err,
                                size_t len)
{
    char path[64];
    coll_status_t st;
    write_bytes(path, text, n);
    st = coll_cost_params_load(p, path, err, len);
    unlink(path);
    return st;
}

static coll_status_t load(const char *text, coll_cost_params_t *p, char *err, size_t len)
{
    return load_bytes(text, strlen(text), p, err, len);
}

/* The file of the @p n bytes at @p text refused with an error that says @p why. */
static void expect_refused_bytes(const char *text, size_t n, const char *why)
{
    coll_cost_params_t p, before;
    char err[400] = "";

    coll_cost_params_default(&p);
    before = p;
    assert_int_equal(load_bytes(text, n, &p, err, sizeof(err)), COLL_ERR_INVALID);
    if (strstr(err, why) == NULL) {
        fail_msg("\"%s\": the error \"%s\" does not say \"%s\"", text, err, why);
    }
    /* Nothing kept of the lines before the bad one. */
    assert_true(p.alpha == before.alpha && p.knomial_radix == before.knomial_radix &&
                p.topk_ratio == before.topk_ratio);
}

static void expect_refused(const char *text, const char *why)
{
    expect_refused_bytes(text, strlen(text), why);
}

static void test_constants_file(void **state)
{
    coll_cost_params_t p, def;
    char err[400];

    (void)state;
    coll_cost_params_default(&p);
    def = p;
    assert_int_equal(load("# bench/calibrate.sh\nalpha = 5e-05  # a comment\n\n"
                          "beta=2e-9\nknomial_radix = 8\n",
                          &p, err, sizeof(err)),
                     COLL_OK);
    assert_true(p.alpha == 5e-05 && p.beta == 2e-9 && p.knomial_radix == 8);
    assert_true(p.gamma == def.gamma && p.alpha_op == def.alpha_op);
    expect_refused("alpha = 1e-5\nbogus = 3\n", ":2: unknown constant \"bogus\"");
    expect_refused("alpha = -1e-5\n", ":1: alpha: \"-1e-5\" is not a finite number >= 0");
    expect_refused("alpha = fast\n", "alpha: \"fast\" is not a finite number");
    expect_refused("alpha = 1e-5 us\n", "alpha: \"1e-5 us\"");
    expect_refused("alpha = inf\n", "not a finite number");
    expect_refused("alpha 1e-5\n", ":1: want KEY = VALUE");
    expect_refused("knomial_radix = 2.5\n", "knomial_radix: \"2.5\" is not a whole number");
    expect_refused("knomial_radix = 1\n", "not usable together: knomial_radix below 2");
    expect_refused("topk_ratio = 2\n", "not usable together: topk_ratio outside (0, 1]");
    expect_refused("cpus_shared = 2\n", "not usable together: cpus_shared neither 0 nor 1");
    assert_int_equal(coll_cost_params_load(&p, "/nonexistent/params.txt", err, sizeof(err)),
                     -ENOENT);
    assert_non_null(strstr(err, "/nonexistent/params.txt: "));
}

/* A line holds text: a file of NUL bytes, or one in a line, refused with its line; a line of
 * 255 characters and a '\r' read, one character more refused. */
static void test_constants_file_bytes(void **state)
{
    static const char zeros[64], inline_nul[] = "alpha = 1e-5\nbeta = 2e-9\0 junk\n";
    coll_cost_params_t p;
    char line[300] = "alpha =", err[400];

    (void)state;
    expect_refused_bytes(zeros, sizeof(zeros), ":1: a NUL byte");
    expect_refused_bytes(inline_nul, sizeof(inline_nul) - 1, ":2: a NUL byte");
    expect_refused_bytes("\n\0", 2, ":2: a NUL byte");
    memset(line + 7, ' ', sizeof(line) - 7);
    memcpy(line + 251, "1e-5\r\n", 7);
    coll_cost_params_default(&p);
    assert_int_equal(load(line, &p, err, sizeof(err)), COLL_OK);
    assert_true(p.alpha == 1e-5);
    memcpy(line + 252, "1e-5\r\n", 7);
    expect_refused(line, ":1: line longer than 255 characters");
}

/* A key twice is refused, naming both lines, even with the same value. */
static void test_constants_file_twice(void **state)
{
    (void)state;
    expect_refused("alpha = 1e-5\n# x\nbeta = 1e-9\nalpha = 2e-5\n",
                   ":4: key alpha given twice, first on line 1");
    expect_refused("knomial_radix = 4\n\n knomial_radix=4\n",
                   ":3: key knomial_radix given twice, first on line 1");
}

/* Decimal numbers only: hex, inf, nan and half a number refused; every decimal form read. */
static void test_constants_file_decimal(void **state)
{
    coll_cost_params_t p;
    char err[400];

    (void)state;
    expect_refused("alpha = 0x10\n", ":1: alpha: \"0x10\" is not a finite number >= 0");
    expect_refused("alpha = 0x1p-20\n", ":1: alpha: \"0x1p-20\" is not a finite number");
    expect_refused("knomial_radix = 0x10\n", "knomial_radix: \"0x10\" is not a whole number");
    expect_refused("alpha = nan\n", "alpha: \"nan\" is not a finite number");
    expect_refused("alpha = infinity\n", "alpha: \"infinity\" is not a finite number");
    expect_refused("alpha = 1e\n", "alpha: \"1e\" is not a finite number");
    expect_refused("alpha = .\n", "alpha: \".\" is not a finite number");
    expect_refused("alpha = 1.5.2\n", "alpha: \"1.5.2\" is not a finite number");
    coll_cost_params_default(&p);
    assert_int_equal(load("alpha = +5e-05\nbeta = .5E-9\ngamma = 3.\nknomial_radix = 8e0\r\n"
                          "alpha_op = -0\n",
                          &p, err, sizeof(err)),
                     COLL_OK);
    assert_true(p.alpha == 5e-05 && p.beta == 0.5e-9 && p.gamma == 3 && p.knomial_radix == 8 &&
                p.alpha_op == 0);
}

/* A value below the smallest double is that small a number; one above the largest is refused. */
static void test_constants_file_range(void **state)
{
    coll_cost_params_t p;
    char err[400];

    (void)state;
    coll_cost_params_default(&p);
    assert_int_equal(load("alpha = 1e-400\nbeta = 4e-320\n", &p, err, sizeof(err)), COLL_OK);
    assert_true(p.alpha == 0 && p.beta == 4e-320 && p.beta > 0);
    expect_refused("alpha = 1e400\n", ":1: alpha: \"1e400\" is out of range");
    expect_refused("segment_bytes = 1e400\n", ":1: segment_bytes: \"1e400\" is out of range");
    expect_refused("alpha = -1e-400\n", ":1: alpha: \"-1e-400\" is not a finite number >= 0");
}

/* The daemon's start: a bad file refused (nothing kept), "none" no model, "" the built-in. */
static void test_daemon_constants(void **state)
{
    coll_daemon_t *d = &w.d[0];
    coll_cost_params_t def;
    char path[64];

    (void)state;
    coll_cost_params_default(&def);
    write_file(path, "alpha = 1e-5\ngamma = much\n");
    d->cfg.cost_params = path;
    capture_start(STDERR_FILENO);
    assert_int_equal(coll_crossover_start(d), COLL_ERR_INVALID);
    assert_contains(capture_end(), ":2: gamma: \"much\" is not a finite number >= 0");
    assert_contains(capture_text(), "error core: cost_params: /tmp/coll-cost-");
    assert_null(d->cost);
    unlink(path);
    d->cfg.cost_params = "none";
    capture_start(STDERR_FILENO);
    assert_int_equal(coll_crossover_start(d), COLL_OK);
    assert_contains(capture_end(), "cost_params = none");
    assert_null(d->cost);
    d->cfg.cost_params = "";
    assert_int_equal(coll_crossover_start(d), COLL_OK);
    assert_non_null(d->cost);
    assert_true(d->cost->alpha == def.alpha && d->cost->gamma == def.gamma &&
                d->cost->knomial_radix == def.knomial_radix);
    coll_crossover_stop(d);
    assert_null(d->cost);
    d->cfg.cost_params = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranges_by_hand),
        cmocka_unit_test_setup_teardown(test_choice_follows_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nodes_choose_alike, setup, teardown),
        cmocka_unit_test(test_constants_file),
        cmocka_unit_test(test_constants_file_bytes),
        cmocka_unit_test(test_constants_file_twice),
        cmocka_unit_test(test_constants_file_decimal),
        cmocka_unit_test(test_constants_file_range),
        cmocka_unit_test_setup_teardown(test_daemon_constants, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
