/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for s3api/s3_error.c: the S3 <Error> document, the S3 answer
 * of an internal error in an object's or a bucket's context, the table of
 * S3-only codes, and docs/s3-compatibility.md listing every S3 code the
 * server can send with its status. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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
    s3__error_map(SRV_ESTALE, false, &code, &st);
    assert_string_equal(code, "NoSuchBucket");
    assert_int_equal(st, 404);
    s3__error_map(SRV_ENOBUCKET, true, &code, &st);
    assert_string_equal(code, "NoSuchBucket");
    s3__error_map(SRV_EBADNAME, false, &code, &st);
    assert_string_equal(code, "InvalidBucketName");
    assert_int_equal(st, 400);
    s3__error_map(SRV_EBADNAME, true, &code, &st);
    assert_string_equal(code, "InvalidArgument");
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
    /* the map and the old S3 override disagreed: a clash is 409, too large is 400 (AWS) */
    s3__error_map(-EISDIR, true, &code, &st);
    assert_string_equal(code, "InvalidRequest");
    assert_int_equal(st, 409);
    s3__error_map(-ENOTDIR, true, &code, &st);
    assert_int_equal(st, 409);
    s3__error_map(SRV_ETOOBIG, true, &code, &st);
    assert_string_equal(code, "EntityTooLarge");
    assert_int_equal(st, 400);
    s3__error_map(-12345, true, &code, &st);
    assert_string_equal(code, "InternalError");
    assert_int_equal(st, 500);
    assert_string_equal(s3__status_text(416), "Range Not Satisfiable");
    assert_string_equal(s3__status_text(431), "Request Header Fields Too Large");
}

static void test_s3_only_table(void **state)
{
    (void)state;
    const struct s3_err_info *e = s3__err_info(S3E_NO_SUCH_UPLOAD);
    assert_string_equal(e->code, "NoSuchUpload");
    assert_int_equal(e->status, 404);
    assert_string_equal(s3__err_info(S3E_BAD_DIGEST)->code, "BadDigest");
    assert_int_equal(s3__err_info(S3E_HEADERS_TOO_LARGE)->status, 431);
    /* outside the table: an internal error answer, never a crash */
    assert_string_equal(s3__err_info(S3E_NONE)->code, "InternalError");
    assert_int_equal(s3__err_info(S3E__COUNT)->status, 500);
    for (int i = 1; i < S3E__COUNT; i++) {
        e = s3__err_info((enum s3_err)i);
        assert_true(e->code[0] && e->msg[0] && e->name[0]);
        assert_true(e->status >= 400 && e->status <= 599);
        assert_string_not_equal(s3__status_text(e->status), "Unknown");
        for (int j = i + 1; j < S3E__COUNT; j++)
            if (strcmp(e->code, s3__err_info((enum s3_err)j)->code) == 0)
                fail_msg("%s appears twice in S3_ERR_MAP", e->code);
    }
    size_t n = 0;
    const struct srv_err_info *t = srv_err_table(&n);
    for (size_t i = 0; i < n; i++)
        assert_string_not_equal(s3__status_text(t[i].s3_http), "Unknown");
}

/* The doc's error table: a line "| `Code` | statuses | ..." per code. */
static char *doc;

static void doc_load(void)
{
    FILE *f = fopen(SRCDIR "/docs/s3-compatibility.md", "r");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    doc = malloc((size_t)n + 1);
    assert_non_null(doc);
    assert_int_equal(fread(doc, 1, (size_t)n, f), (size_t)n);
    doc[n] = '\0';
    fclose(f);
}

static void doc_expect(const char *code, int status)
{
    char head[160], num[8];
    snprintf(head, sizeof(head), "\n| `%s` | ", code);
    const char *row = strstr(doc, head);
    if (!row)
        fail_msg("docs/s3-compatibility.md: no row for %s in the error table", code);
    row += strlen(head);
    size_t cell = strcspn(row, "|");
    snprintf(num, sizeof(num), "%d", status);
    const char *p = row;
    while ((p = strstr(p, num)) != NULL && p < row + cell)
        return;
    fail_msg("docs/s3-compatibility.md: the row of %s does not list status %d", code, status);
}

static void test_docs_list_every_code(void **state)
{
    (void)state;
    doc_load();
    size_t n = 0;
    const struct srv_err_info *t = srv_err_table(&n);
    for (size_t i = 0; i < n; i++) {
        if (t[i].value == 0)
            continue;
        doc_expect(t[i].s3_key, t[i].s3_http);
        doc_expect(t[i].s3_bucket, t[i].s3_http);
    }
    const struct srv_err_info *u = srv_err_info(-12345);
    doc_expect(u->s3_key, u->s3_http);
    for (int i = 1; i < S3E__COUNT; i++)
        doc_expect(s3__err_info((enum s3_err)i)->code, s3__err_info((enum s3_err)i)->status);
    free(doc);
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
        cmocka_unit_test(test_s3_only_table),
        cmocka_unit_test(test_docs_list_every_code),
        cmocka_unit_test(test_document),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
