/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for common/srv_err.c: lookups from SRV_ERR_MAP, one row per
 * internal error, and every SRV_E* constant of srv_err.h has its row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "srv_err.h"

static void test_known_codes(void **state)
{
    (void)state;
    const struct srv_err_info *e = srv_err_info(-ENOENT);
    assert_string_equal(e->s3_key, "NoSuchKey");
    assert_string_equal(e->s3_bucket, "NoSuchBucket");
    assert_int_equal(e->s3_http, 404);
    assert_int_equal(e->nfs3, 2);
    assert_string_equal(e->admin, "NotFound");
    assert_int_equal(e->admin_http, 404);
    assert_string_equal(srv_err_info(-EDQUOT)->s3_key, "QuotaExceeded");
    assert_int_equal(srv_err_nfs3(-EDQUOT), 69);
    assert_int_equal(srv_err_nfs3(SRV_ETHROTTLE), 10008);
    assert_int_equal(srv_err_info(SRV_ENOBUCKET)->s3_http, 404);
    assert_string_equal(srv_err_info(SRV_ENOBUCKET)->s3_key, "NoSuchBucket");
    assert_int_equal(srv_err_nfs3(SRV_ESTALE), 70);
    assert_string_equal(srv_err_info(SRV_EBADNAME)->s3_bucket, "InvalidBucketName");
    assert_string_equal(srv_err_info(SRV_EBADNAME)->s3_key, "InvalidArgument");
    /* file/directory clashes are conflicts, however the core names them */
    assert_int_equal(srv_err_info(-EISDIR)->s3_http, 409);
    assert_int_equal(srv_err_info(-ENOTDIR)->s3_http, 409);
    assert_int_equal(srv_err_info(SRV_ECLASH)->s3_http, 409);
    assert_int_equal(srv_err_info(SRV_ETOOBIG)->s3_http, 400);
    assert_int_equal(srv_err_info(-EFBIG)->s3_http, 400);
    assert_int_equal(srv_err_info(-EBUSY)->admin_http, 409);
    assert_string_equal(srv_err_info(-EBUSY)->admin, "Conflict");
    assert_int_equal(srv_err_info(-ENOSPC)->s3_http, 507);
}

static void test_unknown_codes(void **state)
{
    (void)state;
    const struct srv_err_info *e = srv_err_info(-12345);
    assert_string_equal(e->s3_key, "InternalError");
    assert_string_equal(e->s3_bucket, "InternalError");
    assert_int_equal(e->s3_http, 500);
    assert_int_equal(srv_err_nfs3(-12345), 5);
    assert_string_equal(e->admin, "InternalError");
    assert_int_equal(e->admin_http, 500);
    assert_string_equal(srv_strerror(-12345), "internal error");
}

/* Every nfsstat3 RFC 1813 defines (section 2.6). */
static bool nfsstat3_valid(int st)
{
    static const int all[] = {0,  1,     2,     5,     6,     13,    17,    18,    19,   20,
                              21, 22,    27,    28,    30,    31,    63,    66,    69,   70,
                              71, 10001, 10002, 10003, 10004, 10005, 10006, 10007, 10008};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (all[i] == st)
            return true;
    return false;
}

/* One row per internal error, each with one complete answer per front end. */
static void test_one_row_each(void **state)
{
    (void)state;
    size_t n = 0;
    const struct srv_err_info *t = srv_err_table(&n);
    assert_true(n > 30);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++)
            if (t[i].value == t[j].value)
                fail_msg("%s and %s have the same value %d", t[i].name, t[j].name, t[i].value);
        assert_ptr_equal(srv_err_info(t[i].value), &t[i]);
        assert_true(t[i].s3_key[0] && t[i].s3_bucket[0] && t[i].admin[0] && t[i].msg[0]);
        assert_true(t[i].s3_http >= 200 && t[i].s3_http <= 599);
        assert_true(t[i].admin_http >= 200 && t[i].admin_http <= 599);
        if (!nfsstat3_valid(t[i].nfs3))
            fail_msg("%s: %d is not an nfsstat3", t[i].name, t[i].nfs3);
        /* only success answers success */
        assert_true((t[i].value == 0) == (t[i].s3_http < 300));
        assert_true((t[i].value == 0) == (t[i].admin_http < 300));
        assert_true((t[i].value == 0) == (t[i].nfs3 == 0));
    }
}

/* Every "#define SRV_Exxx (-NNNNN)" of srv_err.h is a row of the map. */
static void test_every_constant_mapped(void **state)
{
    (void)state;
    FILE *f = fopen(SRCDIR "/common/srv_err.h", "r");
    assert_non_null(f);
    char line[512];
    int seen = 0;
    while (fgets(line, sizeof(line), f)) {
        char name[64];
        int value;
        if (sscanf(line, "#define %63s (%d)", name, &value) != 2 || strncmp(name, "SRV_E", 5))
            continue;
        seen++;
        if (srv_err_info(value)->value != value)
            fail_msg("%s (%d) has no row in SRV_ERR_MAP", name, value);
    }
    fclose(f);
    assert_true(seen >= 14);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_codes),
        cmocka_unit_test(test_unknown_codes),
        cmocka_unit_test(test_one_row_each),
        cmocka_unit_test(test_every_constant_mapped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
