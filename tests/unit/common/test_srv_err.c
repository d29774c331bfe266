/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for common/srv_err.c: the three mappings agree with the map. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "srv_err.h"

static void test_known_codes(void **state)
{
    (void)state;
    assert_string_equal(srv_err_s3code(-ENOENT), "NoSuchKey");
    assert_int_equal(srv_err_http(-ENOENT), 404);
    assert_int_equal(srv_err_nfs3(-ENOENT), 2);
    assert_string_equal(srv_err_s3code(-EDQUOT), "QuotaExceeded");
    assert_int_equal(srv_err_nfs3(-EDQUOT), 69);
    assert_int_equal(srv_err_nfs3(SRV_ETHROTTLE), 10008);
    assert_int_equal(srv_err_http(SRV_ENOBUCKET), 404);
    assert_string_equal(srv_err_s3code(SRV_ENOBUCKET), "NoSuchBucket");
    assert_int_equal(srv_err_nfs3(SRV_ESTALE), 70);
}

static void test_unknown_codes(void **state)
{
    (void)state;
    assert_string_equal(srv_err_s3code(-12345), "InternalError");
    assert_int_equal(srv_err_http(-12345), 500);
    assert_int_equal(srv_err_nfs3(-12345), 5);
    assert_non_null(srv_strerror(-12345));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_codes),
        cmocka_unit_test(test_unknown_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
