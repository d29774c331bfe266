/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for the dirty-bytes bound's accounting (tier/tier_dirty.c): the
 * estimate between passes (pending + written - confirmed), holding past the
 * bound and never a lone write larger than it, the nearest directory level,
 * buckets counted apart, hastening, and forgetting buckets whose bound went.
 * The bound acting on real writers is tested against a real RGW in
 * tests/integration/tier/test_tier_dirty.py. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "tier_dirty.h"

#define B1 100
#define B2 200
#define D1 1001 /* a directory of B1 with its own bound */
#define D2 1002 /* a directory of B1 with a policy that does not set the bound */

static uint64_t dirty(struct tier_dirty *d, uint64_t bucket, uint64_t level)
{
    struct tier_dirty_stat st;
    assert_int_equal(tier_dirty_get(d, bucket, level, &st), 0);
    return st.dirty;
}

static void test_bucket_bound(void **state)
{
    (void)state;
    struct tier_dirty *d;
    assert_int_equal(tier_dirty_new(&d), 0);
    assert_false(tier_dirty_any(d));
    /* nothing bounded: every write goes, nothing is counted */
    assert_int_equal(tier_dirty_check(d, B1, NULL, 0, 1 << 20, true), 0);
    struct tier_dirty_level lv = {.dir = B1, .decides = true, .bound = 1000};
    assert_int_equal(tier_dirty_pass_begin(d, B1, 7, &lv, 1), 0);
    assert_true(tier_dirty_any(d));
    tier_dirty_pending(d, B1, B1, 300);
    tier_dirty_pass_end(d, B1);
    assert_int_equal(dirty(d, B1, B1), 300);
    /* 300 + 700 reaches the bound exactly: goes */
    assert_int_equal(tier_dirty_check(d, B1, NULL, 0, 700, true), 0);
    tier_dirty_charge(d, B1, NULL, 0, 700, 0);
    assert_int_equal(dirty(d, B1, B1), 1000);
    /* one more byte is past it: held (counted once however often it asks) */
    assert_int_equal(tier_dirty_check(d, B1, NULL, 0, 1, true), 1);
    assert_int_equal(tier_dirty_check(d, B1, NULL, 0, 1, false), 1);
    struct tier_dirty_stat st;
    assert_int_equal(tier_dirty_get(d, B1, B1, &st), 0);
    assert_int_equal(st.held_total, 1);
    assert_true(tier_dirty_hasten(d, B1));
    /* uploads confirmed: room again */
    tier_dirty_confirmed(d, B1, B1, 400);
    assert_int_equal(dirty(d, B1, B1), 600);
    assert_int_equal(tier_dirty_check(d, B1, NULL, 0, 400, false), 0);
    assert_int_equal(tier_dirty_check(d, B1, NULL, 0, 401, false), 1);
    tier_dirty_charge(d, B1, NULL, 0, 10, 5000);
    assert_int_equal(tier_dirty_get(d, B1, B1, &st), 0);
    assert_int_equal(st.held_us, 5000);
    /* passes make it exact again: writes count from the pass before the last
     * (710 written since the first began), confirmations from the last */
    assert_int_equal(tier_dirty_pass_begin(d, B1, 7, &lv, 1), 0);
    tier_dirty_pending(d, B1, B1, 50);
    tier_dirty_pass_end(d, B1);
    assert_int_equal(dirty(d, B1, B1), 50 + 710);
    assert_int_equal(tier_dirty_pass_begin(d, B1, 7, &lv, 1), 0);
    tier_dirty_pending(d, B1, B1, 50);
    tier_dirty_pass_end(d, B1);
    assert_int_equal(dirty(d, B1, B1), 50);
    assert_false(tier_dirty_hasten(d, B1));
    /* confirmations of more than was counted never go below 0 */
    tier_dirty_confirmed(d, B1, B1, 500);
    assert_int_equal(dirty(d, B1, B1), 0);
    /* nothing dirty: a lone write larger than the bound goes */
    assert_int_equal(tier_dirty_check(d, B1, NULL, 0, 5000, true), 0);
    tier_dirty_free(d);
}

static void test_between_passes(void **state)
{
    (void)state;
    struct tier_dirty *d;
    assert_int_equal(tier_dirty_new(&d), 0);
    struct tier_dirty_level lv = {.dir = B1, .decides = true, .bound = 1000};
    assert_int_equal(tier_dirty_pass_begin(d, B1, 7, &lv, 1), 0);
    /* before any pass completed, what is written counts from the pass's start */
    tier_dirty_charge(d, B1, NULL, 0, 600, 0);
    assert_int_equal(dirty(d, B1, B1), 600);
    assert_int_equal(tier_dirty_check(d, B1, NULL, 0, 500, true), 1);
    /* the pass ends having seen those 600 pending: written since it began also
     * counts (at most one pass's movement counted twice) */
    tier_dirty_pending(d, B1, B1, 600);
    tier_dirty_pass_end(d, B1);
    assert_int_equal(dirty(d, B1, B1), 1200);
    /* the next pass sees them again: writes count from the pass before it
     * (a write may not show in the first scan after it), so still 1200 */
    assert_int_equal(tier_dirty_pass_begin(d, B1, 7, &lv, 1), 0);
    tier_dirty_pending(d, B1, B1, 600);
    tier_dirty_pass_end(d, B1);
    assert_int_equal(dirty(d, B1, B1), 1200);
    /* one more: exact */
    assert_int_equal(tier_dirty_pass_begin(d, B1, 7, &lv, 1), 0);
    tier_dirty_pending(d, B1, B1, 600);
    tier_dirty_pass_end(d, B1);
    assert_int_equal(dirty(d, B1, B1), 600);
    /* a write acknowledged before a pass began that the scan did not see yet
     * still counts after it */
    tier_dirty_charge(d, B1, NULL, 0, 300, 0);
    assert_int_equal(tier_dirty_pass_begin(d, B1, 7, &lv, 1), 0);
    tier_dirty_pending(d, B1, B1, 600); /* the 300 not visible yet */
    tier_dirty_pass_end(d, B1);
    assert_int_equal(dirty(d, B1, B1), 900);
    tier_dirty_free(d);
}

static void test_levels_and_isolation(void **state)
{
    (void)state;
    struct tier_dirty *d;
    assert_int_equal(tier_dirty_new(&d), 0);
    struct tier_dirty_level lv[3] = {
        {.dir = B1, .decides = true, .bound = 1000},
        {.dir = D1, .decides = true, .bound = 100},
        {.dir = D2, .decides = false},
    };
    assert_int_equal(tier_dirty_pass_begin(d, B1, 7, lv, 3), 0);
    tier_dirty_pass_end(d, B1);
    struct tier_dirty_level lv2 = {.dir = B2, .decides = true, .bound = 1000};
    assert_int_equal(tier_dirty_pass_begin(d, B2, 8, &lv2, 1), 0);
    tier_dirty_pass_end(d, B2);
    bool dirs = false;
    assert_true(tier_dirty_bounded(d, B1, &dirs));
    assert_true(dirs);
    assert_int_equal(tier_dirty_level_of(d, B1, D1), D1);
    assert_int_equal(tier_dirty_level_of(d, B1, D2), B1);
    assert_int_equal(tier_dirty_level_of(d, B1, 0), B1);
    /* a write below D1 (innermost first: 5, then D1) counts at D1 */
    uint64_t path1[2] = {5, D1};
    tier_dirty_charge(d, B1, path1, 2, 100, 0);
    assert_int_equal(dirty(d, B1, D1), 100);
    assert_int_equal(dirty(d, B1, B1), 0);
    assert_int_equal(tier_dirty_check(d, B1, path1, 2, 1, true), 1);
    /* ... while the bucket's other files still go */
    assert_int_equal(tier_dirty_check(d, B1, NULL, 0, 900, true), 0);
    /* D2 has a policy that does not decide: the bucket's level */
    uint64_t path2[2] = {D2, D1}; /* D2 is nearer than D1 */
    tier_dirty_charge(d, B1, path2, 2, 300, 0);
    assert_int_equal(dirty(d, B1, B1), 300);
    assert_int_equal(dirty(d, B1, D1), 100);
    /* another bucket (another tenant's) is counted apart: fill B2 */
    tier_dirty_charge(d, B2, NULL, 0, 1000, 0);
    assert_int_equal(tier_dirty_check(d, B2, NULL, 0, 1, true), 1);
    assert_int_equal(tier_dirty_check(d, B1, NULL, 0, 700, true), 0);
    assert_true(tier_dirty_hasten(d, B2));
    /* a bound set to 0 at the bucket: only D1's remains */
    lv[0].bound = 0;
    assert_int_equal(tier_dirty_pass_begin(d, B1, 7, lv, 3), 0);
    tier_dirty_pass_end(d, B1);
    assert_int_equal(tier_dirty_check(d, B1, NULL, 0, 1 << 30, true), 0);
    /* a bucket no pass looked at is forgotten by the sweep; one without a
     * nonzero bound at once */
    tier_dirty_sweep(d); /* the end of a whole pass: both were seen */
    assert_true(tier_dirty_bounded(d, B2, NULL));
    assert_int_equal(tier_dirty_pass_begin(d, B1, 7, lv, 3), 0);
    tier_dirty_sweep(d); /* the next: only B1 was */
    assert_false(tier_dirty_bounded(d, B2, NULL));
    assert_true(tier_dirty_bounded(d, B1, NULL));
    lv[1].bound = 0;
    assert_int_equal(tier_dirty_pass_begin(d, B1, 7, lv, 3), 0);
    assert_false(tier_dirty_bounded(d, B1, NULL));
    assert_false(tier_dirty_any(d));
    tier_dirty_free(d);
}

/* Many directory levels, published in any order: each write finds its own. */
static void test_many_levels(void **state)
{
    (void)state;
    struct tier_dirty *d;
    assert_int_equal(tier_dirty_new(&d), 0);
    struct tier_dirty_level lv[256];
    for (size_t i = 0; i < 256; i++) /* descending inodes */
        lv[i] = (struct tier_dirty_level){.dir = 100000 - i * 7, .decides = true, .bound = 10 + i};
    assert_int_equal(tier_dirty_pass_begin(d, B1, 7, lv, 256), 0);
    tier_dirty_pass_end(d, B1);
    for (size_t i = 0; i < 256; i++) {
        uint64_t path[3] = {1, lv[i].dir, 2}; /* 1 and 2 have no policy */
        tier_dirty_charge(d, B1, path, 3, 10 + i, 0);
        assert_int_equal(tier_dirty_check(d, B1, path, 3, 1, true), 1);
        assert_int_equal(dirty(d, B1, lv[i].dir), 10 + i);
    }
    assert_int_equal(dirty(d, B1, B1), 0);
    tier_dirty_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_bound),
        cmocka_unit_test(test_between_passes),
        cmocka_unit_test(test_levels_and_isolation),
        cmocka_unit_test(test_many_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
