/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for a bucket's cache mode record (tier/tier_cache.c): validation
 * and stored form (version, flags, ttl; longer values of later versions read,
 * newer versions refused). Cache mode itself is tested against a real RGW in
 * tests/integration/tier/test_tier_cache.py. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "srv_err.h"
#include "tier_cache.h"

static void test_roundtrip(void **state)
{
    (void)state;
    uint8_t buf[TIER_CACHE_LEN + 8];
    struct tier_cache in = {.ttl_s = 30, .read_only = true}, out;
    assert_int_equal(tier_cache_encode(&in, buf), TIER_CACHE_LEN);
    assert_int_equal(buf[0], 1);
    assert_int_equal(buf[1], TIER_CACHE_F_RO);
    assert_int_equal(tier_cache_decode(buf, TIER_CACHE_LEN, &out), 0);
    assert_int_equal(out.ttl_s, 30);
    assert_true(out.read_only);
    in = (struct tier_cache){.ttl_s = 0, .read_only = false};
    tier_cache_encode(&in, buf);
    memset(buf + TIER_CACHE_LEN, 0xab, 8); /* a later version's appended fields */
    assert_int_equal(tier_cache_decode(buf, sizeof(buf), &out), 0);
    assert_int_equal(out.ttl_s, 0);
    assert_false(out.read_only);
}

static void test_refused(void **state)
{
    (void)state;
    uint8_t buf[TIER_CACHE_LEN];
    struct tier_cache in = {.ttl_s = TIER_CACHE_TTL_MAX}, out;
    char why[100] = "";
    assert_int_equal(tier_cache_validate(&in, why, sizeof(why)), 0);
    in.ttl_s = TIER_CACHE_TTL_MAX + 1;
    assert_int_equal(tier_cache_validate(&in, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "ttl_s"));
    tier_cache_encode(&in, buf);
    assert_int_equal(tier_cache_decode(buf, sizeof(buf), &out), -EINVAL);
    in.ttl_s = 5;
    tier_cache_encode(&in, buf);
    assert_int_equal(tier_cache_decode(buf, TIER_CACHE_LEN - 1, &out), -EINVAL);
    buf[0] = 0;
    assert_int_equal(tier_cache_decode(buf, sizeof(buf), &out), -EINVAL);
    buf[0] = TIER_CACHE_VERSION + 1;
    assert_int_equal(tier_cache_decode(buf, sizeof(buf), &out), SRV_EBADVERSION);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
