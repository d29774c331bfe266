/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for qos/qos_bucket.c with an injected clock: refill, burst cap,
 * debt for requests larger than the burst, wait computation, rate changes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "qos_bucket.h"

#define S 1000000ull

static void test_unlimited(void **state)
{
    (void)state;
    struct qos_bucket b;
    qos_bucket_init(&b, 0, 0, 0);
    for (int i = 0; i < 1000; i++)
        assert_true(qos_bucket_take(&b, 1e12, 0));
    assert_int_equal(qos_bucket_wait_us(&b, 1e12, 0), 0);
}

static void test_rate_and_burst(void **state)
{
    (void)state;
    struct qos_bucket b;
    qos_bucket_init(&b, 100, 0, 10 * S); /* 100 tokens/s, burst = 100 */
    assert_true(qos_bucket_take(&b, 60, 10 * S));
    assert_true(qos_bucket_take(&b, 40, 10 * S));
    assert_false(qos_bucket_take(&b, 1, 10 * S));
    /* 1 token every 10 ms. */
    assert_int_equal(qos_bucket_wait_us(&b, 1, 10 * S), 10000);
    assert_int_equal(qos_bucket_wait_us(&b, 50, 10 * S), 500000);
    assert_false(qos_bucket_take(&b, 1, 10 * S + 9999));
    assert_true(qos_bucket_take(&b, 1, 10 * S + 10000));
    /* Long idle: capped at the burst. */
    assert_true(qos_bucket_level(&b, 100 * S) == 100.0);
    assert_true(qos_bucket_take(&b, 100, 100 * S));
    assert_false(qos_bucket_take(&b, 1, 100 * S));
}

static void test_debt(void **state)
{
    (void)state;
    struct qos_bucket b;
    qos_bucket_init(&b, 1000, 1000, 0); /* burst 1000 */
    /* A 5000-token request passes when the bucket is full, leaving debt. */
    assert_true(qos_bucket_take(&b, 5000, 0));
    assert_true(qos_bucket_level(&b, 0) == -4000.0);
    assert_false(qos_bucket_take(&b, 1, 0));
    /* 4 s to repay, plus 1 ms for the next token. */
    assert_int_equal(qos_bucket_wait_us(&b, 1, 0), 4001000);
    /* A request larger than the burst needs only a full bucket. */
    assert_int_equal(qos_bucket_wait_us(&b, 1e9, 0), 5000000);
    assert_true(qos_bucket_take(&b, 1e9, 5 * S));
}

static void test_set_and_clock_backwards(void **state)
{
    (void)state;
    struct qos_bucket b;
    qos_bucket_init(&b, 10, 10, 5 * S);
    assert_true(qos_bucket_take(&b, 10, 5 * S));
    /* Time going backwards adds nothing and takes nothing. */
    assert_false(qos_bucket_take(&b, 1, 4 * S));
    assert_true(qos_bucket_level(&b, 4 * S) == 0.0);
    /* Faster rate: keeps the level, refills faster. */
    qos_bucket_set(&b, 1000, 1000, 5 * S);
    assert_int_equal(qos_bucket_wait_us(&b, 1, 5 * S), 1000);
    /* Smaller burst clamps a full bucket. */
    assert_true(qos_bucket_level(&b, 100 * S) == 1000.0);
    qos_bucket_set(&b, 1000, 10, 100 * S);
    assert_true(qos_bucket_level(&b, 100 * S) == 10.0);
    /* From limited to unlimited and back: starts full. */
    qos_bucket_set(&b, 0, 0, 100 * S);
    assert_true(qos_bucket_take(&b, 1e9, 100 * S));
    qos_bucket_set(&b, 5, 5, 100 * S);
    assert_true(qos_bucket_level(&b, 100 * S) == 5.0);
}

static void test_charge(void **state)
{
    (void)state;
    struct qos_bucket b;
    qos_bucket_init(&b, 10, 10, 0);
    qos_bucket_charge(&b, 25, 0); /* always taken, into debt */
    assert_true(qos_bucket_level(&b, 0) == -15.0);
    assert_int_equal(qos_bucket_wait_us(&b, 1, 0), 1600000);
    qos_bucket_init(&b, 0, 0, 0);
    qos_bucket_charge(&b, 25, 0); /* unlimited: nothing to charge */
    assert_true(qos_bucket_take(&b, 1e9, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unlimited),
        cmocka_unit_test(test_rate_and_burst),
        cmocka_unit_test(test_debt),
        cmocka_unit_test(test_set_and_clock_backwards),
        cmocka_unit_test(test_charge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
