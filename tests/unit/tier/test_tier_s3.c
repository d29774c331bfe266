/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for the tier's S3 client without a network: reading S3's XML
 * answers (tier_s3_xml.c: elements, entities, listings, uploads, errors),
 * mapping S3 codes and statuses to internal errors with their retry class,
 * dates, and what tier_s3_new()/tier_s3_start() refuse up front (the
 * callback never runs then). The client against real remotes is tested in
 * tests/integration/tier. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <event2/event.h>

#include "srv_err.h"
#include "tier_s3.h"
#include "tier_s3_int.h"

static void test_xml_find(void **state)
{
    (void)state;
    const char *x = "<?xml version=\"1.0\"?><A xmlns=\"u\"><KeyCount>2</KeyCount><Key>k1</Key>"
                    "<Empty/><Keys>no</Keys><Key >k2</Key></A>";
    const char *end = x + strlen(x), *in, *after;
    size_t n;
    assert_true(tier__xml_find(x, end, "Key", &in, &n, &after));
    assert_int_equal(n, 2);
    assert_memory_equal(in, "k1", 2);
    assert_true(tier__xml_find(after, end, "Key", &in, &n, &after));
    assert_memory_equal(in, "k2", 2); /* <Keys> is another element */
    assert_false(tier__xml_find(after, end, "Key", &in, &n, NULL));
    assert_true(tier__xml_find(x, end, "Empty", &in, &n, NULL));
    assert_int_equal(n, 0);
    assert_true(tier__xml_find(x, end, "A", &in, &n, NULL));
    assert_int_equal(in[0], '<');
    const char *open = "<A><B>unclosed</A>";
    assert_false(tier__xml_find(open, open + strlen(open), "B", &in, &n, NULL));
}

static void test_xml_text(void **state)
{
    (void)state;
    char out[64];
    const char *s = "a&amp;b&lt;c&gt;&quot;&apos;&#13;&#x41;&#233;&bogus;&";
    size_t n = tier__xml_text(s, strlen(s), out, sizeof(out));
    assert_string_equal(out, "a&b<c>\"'\rA&#233;&bogus;&"); /* non-ASCII references kept */
    assert_int_equal(n, strlen(out));
    tier__xml_text("abcdef", 6, out, 4); /* cut to fit */
    assert_string_equal(out, "abc");
    char u[] = "dir%2Fa%20b+c%zz";
    tier__url_decode(u);
    assert_string_equal(u, "dir/a b c%zz");
}

static void test_classify(void **state)
{
    (void)state;
    static const struct {
        int status;
        const char *code;
        int err;
        bool retry;
    } t[] = {
        {200, NULL, 0, false},
        {206, "", 0, false},
        {404, "NoSuchKey", -ENOENT, false},
        {404, "NoSuchUpload", -ENOENT, false},
        {404, "NoSuchBucket", SRV_ENOBUCKET, false},
        {404, NULL, -ENOENT, false},
        {403, "InvalidAccessKeyId", SRV_EAUTH, false},
        {403, "SignatureDoesNotMatch", SRV_EAUTH, false},
        {400, "AuthorizationHeaderMalformed", SRV_EAUTH, false},
        {403, "AccessDenied", -EACCES, false},
        {403, NULL, -EACCES, false},
        {412, NULL, SRV_EPRECOND, false},
        {412, "PreconditionFailed", SRV_EPRECOND, false},
        {416, "InvalidRange", -ERANGE, false},
        {400, "EntityTooSmall", -EINVAL, false},
        {400, "BadDigest", -EINVAL, true},
        {400, "RequestTimeout", -ETIMEDOUT, true},
        {400, "SomethingNew", SRV_EBADREQ, false},
        {409, NULL, SRV_EBADREQ, false},
        {429, NULL, -EAGAIN, true},
        {503, "SlowDown", -EAGAIN, true},
        {503, NULL, -EAGAIN, true},
        {500, "InternalError", -EIO, true},
        {502, NULL, -EIO, true},
        {301, "PermanentRedirect", -EINVAL, false},
        {200, "InternalError", -EIO, true}, /* an <Error> inside a 200 (complete) */
        {403, "QuotaExceeded", -EDQUOT, false},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        bool retry = !t[i].retry;
        int err = tier__s3_classify(t[i].status, t[i].code, &retry);
        if (err != t[i].err || retry != t[i].retry)
            fail_msg("%d %s: got %d/%d, want %d/%d", t[i].status, t[i].code ? t[i].code : "-",
                     err, retry, t[i].err, t[i].retry);
    }
    assert_true(tier_s3_err_retryable(-ECONNRESET));
    assert_true(tier_s3_err_retryable(-ECONNREFUSED));
    assert_true(tier_s3_err_retryable(-ETIMEDOUT));
    assert_false(tier_s3_err_retryable(SRV_ETLS));
    assert_false(tier_s3_err_retryable(SRV_EAUTH));
    assert_false(tier_s3_err_retryable(-ECANCELED));
    assert_string_equal(srv_strerror(SRV_ETLS), "TLS handshake or certificate check failed");
}

static void test_error_doc(void **state)
{
    (void)state;
    struct tier_s3_result res = {0};
    const char *x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code>"
                    "<Message>The key &lt;a&gt; does not exist</Message><Resource>/b/a</Resource>"
                    "<RequestId>tx-1</RequestId></Error>";
    assert_true(tier__s3_error_parse(x, strlen(x), &res));
    assert_string_equal(res.code, "NoSuchKey");
    assert_string_equal(res.message, "The key <a> does not exist");
    assert_string_equal(res.request_id, "tx-1");
    const char *notone = "<ListBucketResult></ListBucketResult>";
    assert_false(tier__s3_error_parse(notone, strlen(notone), &res));
}

static void test_list_parse(void **state)
{
    (void)state;
    struct tier_s3_result res = {0};
    const char *x =
        "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>"
        "<Prefix>p%2F</Prefix><KeyCount>3</KeyCount><MaxKeys>3</MaxKeys>"
        "<EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>"
        "<NextContinuationToken>tok&amp;1</NextContinuationToken>"
        "<Contents><Key>p/a%20b</Key><LastModified>2026-11-24T10:00:01.000Z</LastModified>"
        "<ETag>&quot;0123&quot;</ETag><Size>42</Size><StorageClass>STANDARD</StorageClass>"
        "</Contents><Contents><Key>p/%C3%A9</Key><Size>0</Size><ETag>\"x-2\"</ETag></Contents>"
        "<CommonPrefixes><Prefix>p/d%2B/</Prefix></CommonPrefixes></ListBucketResult>";
    assert_int_equal(tier__s3_list_parse(x, strlen(x), "p/", &res), 0);
    assert_int_equal(res.nentries, 2);
    assert_string_equal(res.entries[0].key, "a b");
    assert_int_equal(res.entries[0].size, 42);
    assert_string_equal(res.entries[0].etag, "0123");
    assert_int_equal(res.entries[0].time, 1795514401);
    assert_string_equal(res.entries[1].key, "\xc3\xa9");
    assert_string_equal(res.entries[1].etag, "x-2");
    assert_int_equal(res.nprefixes, 1);
    assert_string_equal(res.prefixes[0], "d+/");
    assert_true(res.truncated);
    assert_string_equal(res.next_token, "tok&1");
    tier_s3_result_fini(&res);

    /* truncated without a token, or not a listing at all: -EPROTO */
    const char *bad = "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>";
    assert_int_equal(tier__s3_list_parse(bad, strlen(bad), "", &res), -EPROTO);
    tier_s3_result_fini(&res);
    const char *err = "<Error><Code>x</Code></Error>";
    assert_int_equal(tier__s3_list_parse(err, strlen(err), "", &res), -EPROTO);
    tier_s3_result_fini(&res);
    const char *nokey = "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>";
    assert_int_equal(tier__s3_list_parse(nokey, strlen(nokey), "", &res), -EPROTO);
    tier_s3_result_fini(&res);
}

static void test_uploads_parse(void **state)
{
    (void)state;
    struct tier_s3_result res = {0};
    const char *x = "<ListMultipartUploadsResult><Bucket>b</Bucket><KeyMarker></KeyMarker>"
                    "<NextKeyMarker>t/k2</NextKeyMarker><NextUploadIdMarker>u2"
                    "</NextUploadIdMarker><IsTruncated>true</IsTruncated>"
                    "<Upload><Key>t/k1</Key><UploadId>u1</UploadId><Initiated>"
                    "2026-11-24T10:00:00.000Z</Initiated></Upload>"
                    "<Upload><Key>t/k2</Key><UploadId>u2</UploadId></Upload>"
                    "</ListMultipartUploadsResult>";
    assert_int_equal(tier__s3_uploads_parse(x, strlen(x), "t/", &res), 0);
    assert_int_equal(res.nentries, 2);
    assert_string_equal(res.entries[0].key, "k1");
    assert_string_equal(res.entries[0].upload_id, "u1");
    assert_int_equal(res.entries[0].time, 1795514400);
    assert_string_equal(res.entries[1].upload_id, "u2");
    assert_true(res.truncated);
    assert_string_equal(res.next_key_marker, "k2");
    assert_string_equal(res.next_upload_marker, "u2");
    struct tier_s3_result moved = {0};
    tier_s3_result_take(&moved, &res);
    assert_null(res.entries);
    assert_int_equal(moved.nentries, 2);
    tier_s3_result_fini(&moved);
    const char *bad = "<ListMultipartUploadsResult><Upload><Key>k</Key></Upload>"
                      "</ListMultipartUploadsResult>";
    assert_int_equal(tier__s3_uploads_parse(bad, strlen(bad), "", &res), -EPROTO);
    tier_s3_result_fini(&res);
}

static void test_dates(void **state)
{
    (void)state;
    assert_int_equal(tier__s3_date_parse("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
    assert_int_equal(tier__s3_date_parse("1994-11-06T08:49:37.000Z"), 784111777);
    assert_int_equal(tier__s3_date_parse("Sun, 06 Nox 1994 08:49:37 GMT"), 0);
    assert_int_equal(tier__s3_date_parse("yesterday"), 0);
    assert_int_equal(tier__s3_date_parse(NULL), 0);
}

static int called;

static void never(void *arg, struct tier_s3_result *res)
{
    (void)arg;
    (void)res;
    called++;
}

static void test_new_refuses(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    struct tier_s3 *s3 = NULL;
    char why[256];
    struct tier_s3_config c = {.endpoint = "http://127.0.0.1:9", .bucket = "bkt",
                               .access_key = "a", .secret_key = "s"};
    static const char *bad_ep[] = {"ftp://x", "http://", "http://h:0", "http://h:99999",
                                   "http://h/path", "https://[::1", "127.0.0.1:80"};
    for (size_t i = 0; i < sizeof(bad_ep) / sizeof(bad_ep[0]); i++) {
        c.endpoint = bad_ep[i];
        assert_int_equal(tier_s3_new(&c, base, &s3, why, sizeof(why)), -EINVAL);
        assert_null(s3);
        assert_true(why[0] != '\0');
    }
    c.endpoint = "http://127.0.0.1:9";
    c.bucket = "bad bucket";
    assert_int_equal(tier_s3_new(&c, base, &s3, why, sizeof(why)), -EINVAL);
    c.bucket = "bkt";
    c.secret_key = "";
    assert_int_equal(tier_s3_new(&c, base, &s3, why, sizeof(why)), -EINVAL);
    c.secret_key = "s";
    c.endpoint = "http://no-such-host.invalid";
    assert_int_equal(tier_s3_new(&c, base, &s3, why, sizeof(why)), -EHOSTUNREACH);
    assert_non_null(strstr(why, "resolve"));
    c.endpoint = "https://127.0.0.1:9";
    c.ca_file = "/nonexistent/ca.pem";
    assert_int_equal(tier_s3_new(&c, base, &s3, why, sizeof(why)), SRV_ETLS);
    c.ca_file = NULL;
    assert_int_equal(tier_s3_new(&c, base, &s3, why, sizeof(why)), 0);
    tier_s3_free(s3);
    event_base_free(base);
}

static void test_start_refuses(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    struct tier_s3 *s3;
    struct tier_s3_config c = {.endpoint = "http://127.0.0.1:9", .bucket = "bkt",
                               .access_key = "a", .secret_key = "s"};
    assert_int_equal(tier_s3_new(&c, base, &s3, NULL, 0), 0);
    struct tier_s3_kv bad_meta = {"na me", "v"}, crlf_meta = {"n", "a\r\nb"};
    struct tier_s3_part out_of_order[] = {{2, "a"}, {1, "b"}};
    char longkey[TIER_S3_KEY_MAX + 2];
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    const struct tier_s3_op bad[] = {
        {.code = TIER_S3_GET_OBJECT, .done = never}, /* no key */
        {.code = TIER_S3_GET_OBJECT, .key = "", .done = never},
        {.code = TIER_S3_GET_OBJECT, .key = longkey, .done = never},
        {.code = TIER_S3_GET_OBJECT, .key = "k"}, /* no done */
        {.code = 99, .key = "k", .done = never},
        {.code = TIER_S3_MPU_PART, .key = "k", .upload_id = "u", .part_number = 0, .done = never},
        {.code = TIER_S3_MPU_PART,
         .key = "k",
         .upload_id = "u",
         .part_number = 10001,
         .done = never},
        {.code = TIER_S3_MPU_PART, .key = "k", .part_number = 1, .done = never},
        {.code = TIER_S3_MPU_COMPLETE, .key = "k", .upload_id = "u", .done = never},
        {.code = TIER_S3_MPU_COMPLETE,
         .key = "k",
         .upload_id = "u",
         .parts = out_of_order,
         .nparts = 2,
         .done = never},
        {.code = TIER_S3_PUT_OBJECT, .key = "k", .size = 5, .done = never}, /* no body */
        {.code = TIER_S3_PUT_OBJECT,
         .key = "k",
         .size = 5,
         .source = (tier_s3_source_cb)1,
         .done = never}, /* a source over http needs sha256_hex */
        {.code = TIER_S3_PUT_OBJECT,
         .key = "k",
         .data = "x",
         .size = 1,
         .content_type = "a\nb",
         .done = never},
        {.code = TIER_S3_PUT_OBJECT,
         .key = "k",
         .data = "x",
         .size = 1,
         .meta = &bad_meta,
         .nmeta = 1,
         .done = never},
        {.code = TIER_S3_PUT_OBJECT,
         .key = "k",
         .data = "x",
         .size = 1,
         .meta = &crlf_meta,
         .nmeta = 1,
         .done = never},
        {.code = TIER_S3_PUT_OBJECT,
         .key = "k",
         .data = "x",
         .size = 1,
         .sha256_hex = "ab",
         .done = never},
        {.code = TIER_S3_COPY_OBJECT, .key = "k", .done = never}, /* no source */
        {.code = TIER_S3_COPY_OBJECT, .key = "k", .copy_from = longkey, .done = never},
        {.code = TIER_S3_COPY_OBJECT,
         .key = "k",
         .copy_from = "o",
         .copy_if_match = "a\r\nb",
         .done = never},
        {.code = TIER_S3_MPU_PART_COPY,
         .key = "k",
         .upload_id = "u",
         .part_number = 1,
         .copy_from = "o",
         .done = never}, /* no range */
        {.code = TIER_S3_MPU_PART_COPY,
         .key = "k",
         .part_number = 1,
         .copy_from = "o",
         .len = 5,
         .done = never}, /* no upload */
        {.code = TIER_S3_MPU_PART_COPY,
         .key = "k",
         .upload_id = "u",
         .part_number = 10001,
         .copy_from = "o",
         .len = 5,
         .done = never},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct tier_s3_req *req = (struct tier_s3_req *)1;
        if (tier_s3_start(s3, &bad[i], &req) != -EINVAL)
            fail_msg("op %zu was not refused", i);
        assert_null(req);
    }
    event_base_loop(base, EVLOOP_NONBLOCK);
    assert_int_equal(called, 0);
    tier_s3_free(s3);
    event_base_free(base);
}

/* A refused connection ends the request through done, once, never inside
 * start; freeing the client with a request in flight cancels it. */
static int done_err, done_calls;

static void record(void *arg, struct tier_s3_result *res)
{
    (void)arg;
    done_err = res->err;
    done_calls++;
}

static void test_done_runs_once_later(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    struct tier_s3 *s3;
    struct tier_s3_config c = {.endpoint = "http://127.0.0.1:1", .bucket = "bkt",
                               .access_key = "a", .secret_key = "s"};
    assert_int_equal(tier_s3_new(&c, base, &s3, NULL, 0), 0);
    struct tier_s3_op op = {.code = TIER_S3_HEAD_OBJECT, .key = "k", .done = record};
    assert_int_equal(tier_s3_start(s3, &op, NULL), 0);
    assert_int_equal(done_calls, 0);
    event_base_dispatch(base);
    assert_int_equal(done_calls, 1);
    assert_int_equal(done_err, -ECONNREFUSED);

    assert_int_equal(tier_s3_start(s3, &op, NULL), 0);
    tier_s3_free(s3); /* cancels it: done runs before free returns */
    assert_int_equal(done_calls, 2);
    assert_int_equal(done_err, -ECANCELED);
    event_base_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xml_find),      cmocka_unit_test(test_xml_text),
        cmocka_unit_test(test_classify),      cmocka_unit_test(test_error_doc),
        cmocka_unit_test(test_list_parse),    cmocka_unit_test(test_uploads_parse),
        cmocka_unit_test(test_dates),         cmocka_unit_test(test_new_refuses),
        cmocka_unit_test(test_start_refuses), cmocka_unit_test(test_done_runs_once_later),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
