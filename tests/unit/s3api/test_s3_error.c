/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for s3api/s3_error.c: the S3 <Error> document and the
 * context-dependent mapping of internal errors to S3 codes and statuses. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <event2/buffer.h>

#include "s3_internal.h"
#include "srv_err.h"

static void test_map(void **state)
{
    (void)state;
    const char *code;
    int st;
    s3__error_map(-ENOENT, true, &code, &st);
    assert_string_equal(code, "NoSuchKey");
    assert_int_equal(st, 404);
    s3__error_map(-ENOENT, false, &code, &st);
    assert_string_equal(code, "NoSuchBucket");
    s3__error_map(SRV_ENOBUCKET, true, &code, &st);
    assert_string_equal(code, "NoSuchBucket");
    s3__error_map(SRV_EBADNAME, false, &code, &st);
    assert_string_equal(code, "InvalidBucketName");
    assert_int_equal(st, 400);
    s3__error_map(-EDQUOT, true, &code, &st);
    assert_string_equal(code, "QuotaExceeded");
    assert_int_equal(st, 403);
    s3__error_map(SRV_ETHROTTLE, true, &code, &st);
    assert_string_equal(code, "SlowDown");
    assert_int_equal(st, 503);
    /* a full store: 507, which SDKs do not retry (a 503 made them resend the body) */
    s3__error_map(-ENOSPC, true, &code, &st);
    assert_string_equal(code, "InsufficientStorage");
    assert_int_equal(st, 507);
    assert_string_equal(s3__status_text(507), "Insufficient Storage");
    s3__error_map(SRV_ENOTSUPP, true, &code, &st);
    assert_string_equal(code, "NotImplemented");
    assert_int_equal(st, 501);
    s3__error_map(-12345, true, &code, &st);
    assert_string_equal(code, "InternalError");
    assert_int_equal(st, 500);
    assert_string_equal(s3__status_text(416), "Range Not Satisfiable");
    assert_string_equal(s3__status_text(431), "Request Header Fields Too Large");
}

static void test_document(void **state)
{
    (void)state;
    struct evbuffer *b = evbuffer_new();
    s3__error_xml(b, "NoSuchKey", "the <key> & co", "/bkt/k", "REQ1");
    size_t n = evbuffer_get_length(b);
    char out[512];
    evbuffer_remove(b, out, n);
    out[n] = '\0';
    assert_non_null(strstr(out, "<Error><Code>NoSuchKey</Code>"));
    assert_non_null(strstr(out, "<Message>the &lt;key&gt; &amp; co</Message>"));
    assert_non_null(strstr(out, "<Resource>/bkt/k</Resource><RequestId>REQ1</RequestId></Error>"));
    evbuffer_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map),
        cmocka_unit_test(test_document),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
