/*
 * Unit tests of the parameter service's records (proto/ps_records.h): a registration and a checkpoint
 * image are accepted when well formed and refused, with a message naming the field, when any
 * one field is wrong; fingerprints tell registrations apart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/ps_records.h"

#define NL 5

typedef struct {
    coll_ps_reg_t h;
    coll_ps_reg_layer_t l[NL];
} reg_t;

static void reg_init(reg_t *r)
{
    static const uint64_t counts[NL] = {100, 10, 5000, 20, 7};
    static const uint32_t buckets[NL] = {0, 0, 1, 1, 2};

    memset(r, 0, sizeof(*r));
    r->h.magic = COLL_PS_REG_MAGIC;
    r->h.version = COLL_PS_RECORD_VERSION;
    r->h.num_layers = NL;
    r->h.num_buckets = 3;
    r->h.optim.kind = COLL_PS_LAMB;
    for (int i = 0; i < NL; i++) {
        r->l[i] = (coll_ps_reg_layer_t){counts[i], i % 2 ? COLL_PS_EXCLUDE : 0, buckets[i]};
        r->h.count += counts[i];
    }
}

static void expect_bad(const reg_t *r, const char *word)
{
    char err[256] = "";
    assert_int_equal(coll_ps_reg_check(r, sizeof(*r), err, sizeof(err)), COLL_ERR_INVALID);
    if (strstr(err, word) == NULL) {
        fail_msg("message '%s' does not say '%s'", err, word);
    }
}

static void test_reg_valid(void **state)
{
    reg_t r;
    char err[256];
    (void)state;
    reg_init(&r);
    assert_int_equal(sizeof(r), coll_ps_reg_bytes(NL));
    assert_int_equal(coll_ps_reg_check(&r, sizeof(r), err, sizeof(err)), COLL_OK);
}

static void test_reg_each_field(void **state)
{
    reg_t r;
    char err[256];
    (void)state;
    reg_init(&r), r.h.magic ^= 1, expect_bad(&r, "magic");
    reg_init(&r), r.h.version = 2, expect_bad(&r, "version");
    reg_init(&r), r.h.num_buckets = 0, expect_bad(&r, "buckets");
    reg_init(&r), r.h.num_buckets = 4, expect_bad(&r, "buckets");
    reg_init(&r), r.l[2].count = 0, expect_bad(&r, "layer 2");
    reg_init(&r), r.l[0].bucket = 1, expect_bad(&r, "layer 0");
    reg_init(&r), r.l[4].bucket = 3, expect_bad(&r, "layer 4");
    reg_init(&r), r.l[3].bucket = 0, expect_bad(&r, "layer 3");
    reg_init(&r), r.l[1].flags = 4, expect_bad(&r, "flags");
    reg_init(&r), r.h.count += 1, expect_bad(&r, "elements");
    reg_init(&r), r.h.optim.kind = COLL_PS_OPTIMIZER_COUNT, expect_bad(&r, "optimizer");
    reg_init(&r), r.h.optim.lamb_bias = 3, expect_bad(&r, "bias");
    reg_init(&r), r.h.sched.decay = 3, expect_bad(&r, "decay");
    reg_init(&r), r.h.sched.num_milestones = COLL_PS_MAX_MILESTONES + 1,
        expect_bad(&r, "milestones");
    reg_init(&r);
    assert_int_equal(coll_ps_reg_check(&r, sizeof(r) - 1, err, sizeof(err)), COLL_ERR_INVALID);
    assert_int_equal(coll_ps_reg_check(&r, 8, err, sizeof(err)), COLL_ERR_INVALID);
}

static void test_fingerprint(void **state)
{
    reg_t a, b;
    (void)state;
    reg_init(&a);
    reg_init(&b);
    assert_int_equal(coll_ps_fingerprint(&a, sizeof(a)), coll_ps_fingerprint(&b, sizeof(b)));
    b.l[2].flags = COLL_PS_NO_TRUST;
    assert_int_not_equal(coll_ps_fingerprint(&a, sizeof(a)), coll_ps_fingerprint(&b, sizeof(b)));
    b = a;
    b.h.optim.weight_decay = 1e-4;
    assert_int_not_equal(coll_ps_fingerprint(&a, sizeof(a)), coll_ps_fingerprint(&b, sizeof(b)));
    assert_int_not_equal(coll_ps_fingerprint("", 0), 0);
}

static void test_state_arrays(void **state)
{
    (void)state;
    assert_int_equal(coll_ps_state_arrays(COLL_PS_SGD, 0.0), 0);
    assert_int_equal(coll_ps_state_arrays(COLL_PS_SGD, 0.9), 1);
    assert_int_equal(coll_ps_state_arrays(COLL_PS_LARS, 0.0), 1);
    assert_int_equal(coll_ps_state_arrays(COLL_PS_ADAMW, 0.0), 2);
    assert_int_equal(coll_ps_state_arrays(COLL_PS_LAMB, 0.0), 2);
}

/* A 2-bucket image of node 1 of 2 with two state arrays of 7 elements. */
typedef struct {
    coll_ps_ckpt_t h;
    coll_ps_ckpt_chunk_t c[2];
    float state[2][7];
} image_t;

static void image_init(image_t *m)
{
    memset(m, 0, sizeof(*m));
    m->h = (coll_ps_ckpt_t){.magic = COLL_PS_CKPT_MAGIC, .version = COLL_PS_RECORD_VERSION,
                            .fingerprint = 42, .step = 20, .count = 14, .shard_elems = 7,
                            .nodes = 2, .node = 1, .nstate = 2, .num_buckets = 2,
                            .optimizer = COLL_PS_ADAMW};
    m->c[0] = (coll_ps_ckpt_chunk_t){4, 4};
    m->c[1] = (coll_ps_ckpt_chunk_t){3, 3};
    m->state[1][6] = 5.0f;
}

static void expect_bad_image(const image_t *m, size_t len, const char *word)
{
    char err[256] = "";
    assert_int_equal(coll_ps_ckpt_check(m, len, 0, err, sizeof(err)), COLL_ERR_INVALID);
    if (strstr(err, word) == NULL) {
        fail_msg("message '%s' does not say '%s'", err, word);
    }
}

static void test_ckpt(void **state)
{
    image_t m;
    char err[256];
    (void)state;
    image_init(&m);
    assert_int_equal(coll_ps_ckpt_check(&m, sizeof(m), 0, err, sizeof(err)), COLL_OK);
    assert_int_equal(coll_ps_ckpt_check(&m, coll_ps_ckpt_head_bytes(2), 1, err, sizeof(err)),
                     COLL_OK);
    assert_true(coll_ps_ckpt_state(&m, 1)[6] == 5.0f);
    assert_ptr_equal(coll_ps_ckpt_chunks(&m), m.c);
    expect_bad_image(&m, sizeof(m) - 4, "bytes");
    image_init(&m), m.h.magic = 0, expect_bad_image(&m, sizeof(m), "not a checkpoint");
    image_init(&m), m.h.node = 2, expect_bad_image(&m, sizeof(m), "out of range");
    image_init(&m), m.h.nstate = 3, expect_bad_image(&m, sizeof(m), "out of range");
    image_init(&m), m.c[1].off = 12, expect_bad_image(&m, sizeof(m), "bucket 1");
    image_init(&m), m.c[1].len = 2, expect_bad_image(&m, sizeof(m), "elements");
    image_init(&m), m.h.num_buckets = 5000, expect_bad_image(&m, sizeof(m), "out of range");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reg_valid),   cmocka_unit_test(test_reg_each_field),
        cmocka_unit_test(test_fingerprint), cmocka_unit_test(test_state_arrays),
        cmocka_unit_test(test_ckpt),
    };
    return cmocka_run_group_tests_name("parameter service records", tests, NULL, NULL);
}
