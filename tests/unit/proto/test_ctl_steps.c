/*
 * Step records of the control block and the wire (proto/ctl.h): packing, and which steps of a
 * phase end a record when a ring has more steps than a phase may have records. Expected
 * groupings are written out by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <collective.h>
#include "proto/ctl.h"

static void test_pack_round_trip(void **state)
{
    uint64_t rec = coll_ctl_step_pack(COLL_STEP_ALLGATHER, 0xabcdef, 123456789);

    assert_int_equal(coll_ctl_step_phase(rec), COLL_STEP_ALLGATHER);
    assert_int_equal(coll_ctl_step_last(rec), 0xabcdef);
    assert_int_equal(coll_ctl_step_end_us(rec), 123456789);
    /* An end beyond 32 bits of microseconds (71 minutes) saturates instead of wrapping. */
    rec = coll_ctl_step_pack(COLL_STEP_RD_ROUND, 3, (uint64_t)1 << 33);
    assert_int_equal(coll_ctl_step_end_us(rec), UINT32_MAX);
    assert_int_equal(coll_ctl_step_last(rec), 3);
}

/* The steps that end a record, as a string of 0/1 per step. */
static void ends(uint32_t nsteps, uint32_t budget, char *out)
{
    for (uint32_t s = 0; s < nsteps; s++) {
        out[s] = (char)('0' + coll_ctl_step_ends_record(s, nsteps, budget));
    }
    out[nsteps] = '\0';
}

static void test_grouping(void **state)
{
    char got[64];

    ends(4, 16, got); /* fewer steps than records: every step is one */
    assert_string_equal(got, "1111");
    ends(16, 16, got);
    assert_string_equal(got, "1111111111111111");
    ends(6, 4, got); /* groups {0,1}, {2}, {3,4}, {5}: group of step s is s * 4 / 6 */
    assert_string_equal(got, "011011");
    ends(8, 2, got); /* two halves */
    assert_string_equal(got, "00010001");
    ends(1, 1, got);
    assert_string_equal(got, "1");
}

/* Whatever the ring's size, a phase gets at most its budget of records, the last step always
 * ends one, and the groups' sizes differ by at most one. */
static void test_grouping_bounds(void **state)
{
    for (uint32_t n = 1; n < 300; n++) {
        uint32_t records = 0, size = 0, min = UINT32_MAX, max = 0;
        for (uint32_t s = 0; s < n; s++) {
            size++;
            if (coll_ctl_step_ends_record(s, n, COLL_CTL_RING_PHASE_STEPS)) {
                records++;
                min = size < min ? size : min;
                max = size > max ? size : max;
                size = 0;
            }
        }
        assert_int_equal(size, 0);
        assert_int_equal(records, n < COLL_CTL_RING_PHASE_STEPS ? n : COLL_CTL_RING_PHASE_STEPS);
        assert_true(max - min <= 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_round_trip),
        cmocka_unit_test(test_grouping),
        cmocka_unit_test(test_grouping_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
