/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for sigv4/srv_sigv2.c: the SigV2 header parser, the string to
 * sign (AWS's documented example, x-amz-* headers, the Date position), the
 * signature and its check, the sub-resource list. (HTTP dates:
 * tests/unit/s3api/test_s3_http.c.) */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "srv_sigv2.h"

#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

static void test_parse(void **state)
{
    (void)state;
    char ak[129], sig[65];
    assert_int_equal(srv_sigv2_parse_header("AWS AKID:c2lnbmF0dXJl", ak, sig), 0);
    assert_string_equal(ak, "AKID");
    assert_string_equal(sig, "c2lnbmF0dXJl");
    assert_int_equal(srv_sigv2_parse_header("AWS4-HMAC-SHA256 Credential=x", ak, sig), -ENOENT);
    assert_int_equal(srv_sigv2_parse_header("AWS nocolon", ak, sig), -EINVAL);
    assert_int_equal(srv_sigv2_parse_header("AWS :sig", ak, sig), -EINVAL);
    assert_int_equal(srv_sigv2_parse_header("AWS AKID:", ak, sig), -EINVAL);
}

static void test_string_and_sign(void **state)
{
    (void)state;
    char out[512], sig[29];
    /* AWS's documented example (GET Object) */
    long n = srv_sigv2_string("GET", NULL, NULL, "Tue, 27 Mar 2007 19:36:42 +0000", NULL, 0,
                              "/awsexamplebucket1/photos/puppy.jpg", out, sizeof(out));
    assert_int_equal(n, (long)strlen(out));
    assert_string_equal(out, "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n"
                             "/awsexamplebucket1/photos/puppy.jpg");
    srv_sigv2_sign(SECRET, out, (size_t)n, sig);
    assert_string_equal(sig, "qgk2+6Sv9/oM7G3qLEjTH1a1l1g=");
    assert_true(srv_sigv2_check(SECRET, out, (size_t)n, "qgk2+6Sv9/oM7G3qLEjTH1a1l1g="));
    assert_false(srv_sigv2_check(SECRET, out, (size_t)n, "qgk2+6Sv9/oM7G3qLEjTH1a1l1h="));
    assert_false(srv_sigv2_check(SECRET, out, (size_t)n, "short"));
    /* x-amz-* headers: lower-cased, sorted, trimmed, a repeated one joined by ',' */
    struct srv_sigv4_kv hs[] = {
        {"X-Amz-Meta-B", 12, " two ", 5},           {"content-type", 12, "text/plain", 10},
        {"x-amz-date", 10, "Tue, 27 Mar 2007", 16}, {"X-AMZ-META-B", 12, "three", 5},
        {"x-amz-acl", 9, "public-read", 11},
    };
    n = srv_sigv2_string("PUT", "md5==", "text/plain", "", hs, 5, "/b/k?acl", out, sizeof(out));
    assert_string_equal(out, "PUT\nmd5==\ntext/plain\n\nx-amz-acl:public-read\n"
                             "x-amz-date:Tue, 27 Mar 2007\nx-amz-meta-b:two,three\n/b/k?acl");
    assert_int_equal(srv_sigv2_string("GET", NULL, NULL, "d", NULL, 0, "/x", out, 4), -ENOSPC);
}

static void test_subresources(void **state)
{
    (void)state;
    assert_true(srv_sigv2_subresource("acl"));
    assert_true(srv_sigv2_subresource("uploadId"));
    assert_true(srv_sigv2_subresource("response-content-type"));
    assert_false(srv_sigv2_subresource("prefix"));
    assert_false(srv_sigv2_subresource("Signature"));
    assert_false(srv_sigv2_subresource("uploadid"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_string_and_sign),
        cmocka_unit_test(test_subresources),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
