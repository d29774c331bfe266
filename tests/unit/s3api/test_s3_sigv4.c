/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for s3api/s3_sigv4.c, S3 requests on sigv4/'s parser and
 * verifier: header and presigned SigV4 against vectors produced by botocore
 * 1.29 (S3SigV4Auth / S3SigV4QueryAuth at a fixed clock), the canonical form
 * of an S3 path, the scope's service, tampering, expiry, skew, and the AWS
 * aws-chunked example carried in HTTP chunks. The parser, verifier and
 * decoder alone: tests/unit/sigv4/test_srv_sigv4_auth.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "s3_internal.h"
#include "srv_err.h"
#include "../sigv4/sigv4_test_util.h"

static const char SECRET[] = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
/* 2026-11-21T09:30:00Z */
static const time_t T0 = 1795253400;

static struct s3_req *parse(struct s3_http *h, const char *raw)
{
    size_t used = 0;
    s3__http_init(h, 0, NULL, NULL);
    int ev = s3__http_feed(h, raw, strlen(raw), &used);
    assert_int_equal(ev, S3_HTTP_HEADERS);
    return h->req;
}

static void test_time_constant(void **state)
{
    (void)state;
    time_t t;
    assert_int_equal(srv_sigv4_date_parse("20261121T093000Z", &t), 0);
    assert_int_equal((long long)t, (long long)T0);
}

static void test_header_get(void **state)
{
    (void)state;
    struct s3_http h;
    struct s3_req *r = parse(
        &h,
        "GET /bkt?list-type=2&prefix=a%20b%2Fc&delimiter=%2F HTTP/1.1\r\n"
        "Host: 127.0.0.1:9000\r\n"
        "X-Amz-Date: 20261121T093000Z\r\n"
        "X-Amz-Content-SHA256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\r\n"
        "Authorization: AWS4-HMAC-SHA256 "
        "Credential=AKIDEXAMPLE/20261121/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
        "Signature=98d42edd142e3b54c8bfb92e2da07fb1cb1d5cde35ad4d691d12df493b14aa55\r\n\r\n");
    struct srv_sigv4_auth sig;
    assert_int_equal(srv_sigv4_parse_header(s3__req_header(r, "authorization"), &sig), 0);
    assert_string_equal(sig.akey, "AKIDEXAMPLE");
    assert_string_equal(sig.region, "us-east-1");
    assert_int_equal(sig.nsigned, 3);
    unsigned char key[32];
    const char *why = NULL;
    assert_int_equal(s3__sigv4_verify(&r->arena, r, &sig, SECRET, T0 + 60, key, &why), 0);
    /* wrong secret */
    assert_int_equal(s3__sigv4_verify(&r->arena, r, &sig, "nope", T0, key, &why), SRV_EAUTH);
    /* clock skew: 16 minutes off either way */
    assert_int_equal(s3__sigv4_verify(&r->arena, r, &sig, SECRET, T0 + 16 * 60, key, &why),
                     -ETIMEDOUT);
    assert_int_equal(s3__sigv4_verify(&r->arena, r, &sig, SECRET, T0 - 16 * 60, key, &why),
                     -ETIMEDOUT);
    s3__http_fini(&h);
}

static const char PUT_REQ[] =
    "PUT /bkt/dir/a%20b%2Bc~%C3%A9.txt HTTP/1.1\r\n"
    "Host: 127.0.0.1:9000\r\n"
    "Content-Type: text/plain\r\n"
    "x-amz-meta-Foo:   bar   baz \r\n"
    "X-Amz-Date: 20261121T093000Z\r\n"
    "X-Amz-Content-SHA256: a948904f2f0f479b8f8197694b30184b0d2ed1c1cd2a1ec0fb85d299a192a447\r\n"
    "Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261121/us-east-1/s3/aws4_request, "
    "SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-meta-foo, "
    "Signature=071afaea3480883b2f88353f5245b28dc65fc65365fd7f8bdc47b878bcb4d39e\r\n"
    "Content-Length: 12\r\n\r\n";

static void test_header_put_odd_key(void **state)
{
    (void)state;
    struct s3_http h;
    struct s3_req *r = parse(&h, PUT_REQ);
    struct srv_sigv4_auth sig;
    assert_int_equal(srv_sigv4_parse_header(s3__req_header(r, "authorization"), &sig), 0);
    char *canon = s3__sigv4_canonical(&r->arena, r, &sig);
    assert_non_null(canon);
    assert_non_null(strstr(canon, "/bkt/dir/a%20b%2Bc~%C3%A9.txt\n"));
    assert_non_null(strstr(canon, "x-amz-meta-foo:bar baz\n"));
    unsigned char key[32];
    const char *why = NULL;
    assert_int_equal(s3__sigv4_verify(&r->arena, r, &sig, SECRET, T0, key, &why), 0);
    s3__http_fini(&h);
}

static void test_tampered_header(void **state)
{
    (void)state;
    char buf[2048];
    snprintf(buf, sizeof(buf), "%s", PUT_REQ);
    char *p = strstr(buf, "text/plain");
    p[0] = 'T'; /* a signed header value changed in flight */
    struct s3_http h;
    struct s3_req *r = parse(&h, buf);
    struct srv_sigv4_auth sig;
    assert_int_equal(srv_sigv4_parse_header(s3__req_header(r, "authorization"), &sig), 0);
    unsigned char key[32];
    const char *why = NULL;
    assert_int_equal(s3__sigv4_verify(&r->arena, r, &sig, SECRET, T0, key, &why), SRV_EAUTH);
    assert_non_null(why);
    s3__http_fini(&h);
}

static void test_service_must_be_s3(void **state)
{
    (void)state;
    struct s3_http h;
    struct s3_req *r = parse(&h, PUT_REQ);
    struct srv_sigv4_auth sig;
    assert_int_equal(srv_sigv4_parse_header(s3__req_header(r, "authorization"), &sig), 0);
    memcpy(sig.service, "sts", 4);
    unsigned char key[32];
    const char *why = NULL;
    assert_int_equal(s3__sigv4_verify(&r->arena, r, &sig, SECRET, T0, key, &why), -EINVAL);
    assert_string_equal(why, "credential scope service must be s3");
    s3__http_fini(&h);
}

static const char PRESIGNED[] =
    "GET /bkt/key.bin?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20261121%2F"
    "us-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261121T093000Z&X-Amz-Expires=3600&"
    "X-Amz-SignedHeaders=host&X-Amz-Signature="
    "591ed23175b460f7893947aeaf016283a6d90c9f7b453c28bf230ab24f820523 HTTP/1.1\r\n"
    "Host: localhost:9000\r\n\r\n";

static void test_presigned(void **state)
{
    (void)state;
    struct s3_http h;
    struct s3_req *r = parse(&h, PRESIGNED);
    struct srv_sigv4_auth sig;
    assert_int_equal(s3__sigv4_parse_query(r, &sig), 0);
    assert_true(sig.presigned);
    assert_int_equal(sig.expires, 3600);
    unsigned char key[32];
    const char *why = NULL;
    assert_int_equal(s3__sigv4_verify(&r->arena, r, &sig, SECRET, T0 + 3599, key, &why), 0);
    assert_int_equal(s3__sigv4_verify(&r->arena, r, &sig, SECRET, T0 + 3601, key, &why), -EACCES);
    assert_string_equal(why, "request has expired");
    assert_int_equal(s3__sigv4_verify(&r->arena, r, &sig, SECRET, T0 - 3600, key, &why), -EACCES);
    s3__http_fini(&h);
}

static void test_presigned_tampered_query(void **state)
{
    (void)state;
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", PRESIGNED);
    memcpy(strstr(buf, "key.bin"), "kez", 3);
    struct s3_http h;
    struct s3_req *r = parse(&h, buf);
    struct srv_sigv4_auth sig;
    assert_int_equal(s3__sigv4_parse_query(r, &sig), 0);
    unsigned char key[32];
    const char *why = NULL;
    assert_int_equal(s3__sigv4_verify(&r->arena, r, &sig, SECRET, T0, key, &why), SRV_EAUTH);
    s3__http_fini(&h);
}

static int verify_raw(const char *raw, const char *secret, time_t now, unsigned char key[32],
                      const char **why)
{
    struct s3_http h;
    struct s3_req *r = parse(&h, raw);
    struct srv_sigv4_auth sig;
    int rc = s3__sigv4_parse_query(r, &sig);
    if (rc == 0)
        rc = s3__sigv4_verify(&r->arena, r, &sig, secret, now, key, why);
    s3__http_fini(&h);
    return rc;
}

/* A presigned request verified once is remembered (s3_sigv4.c, the memo):
 * the same request verifies again, with the same signing key, and only the
 * same request with the same secret: another secret (a rotated key), method,
 * query, path or header value with the remembered signature is refused, and
 * the time checks are made every time. */
static void test_presigned_memo(void **state)
{
    (void)state;
    unsigned char k1[32], k2[32];
    const char *why = NULL;
    char buf[1400];
    assert_int_equal(verify_raw(PRESIGNED, SECRET, T0, k1, &why), 0);
    for (int i = 0; i < 3; i++) {
        memset(k2, 0, sizeof(k2));
        assert_int_equal(verify_raw(PRESIGNED, SECRET, T0 + i, k2, &why), 0);
        assert_memory_equal(k1, k2, 32);
    }
    /* the key's secret changed (rotated): refused, then the old one still verifies */
    assert_int_equal(
        verify_raw(PRESIGNED, "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEZ", T0, k2, &why), SRV_EAUTH);
    assert_int_equal(verify_raw(PRESIGNED, "", T0, k2, &why), SRV_EAUTH);
    assert_int_equal(verify_raw(PRESIGNED, SECRET, T0, k2, &why), 0);
    /* expired, not valid yet: checked on every request */
    assert_int_equal(verify_raw(PRESIGNED, SECRET, T0 + 3601, k2, &why), -EACCES);
    assert_string_equal(why, "request has expired");
    assert_int_equal(verify_raw(PRESIGNED, SECRET, T0 - 3600, k2, &why), -EACCES);
    assert_string_equal(why, "request is not valid yet");
    /* another method */
    snprintf(buf, sizeof(buf), "HEAD%s", PRESIGNED + 3);
    assert_int_equal(verify_raw(buf, SECRET, T0, k2, &why), SRV_EAUTH);
    /* another signed header value (Host), or the Host header twice */
    snprintf(buf, sizeof(buf), "%s", PRESIGNED);
    memcpy(strstr(buf, "localhost:9000"), "localhost:9001", 14);
    assert_int_equal(verify_raw(buf, SECRET, T0, k2, &why), SRV_EAUTH);
    snprintf(buf, sizeof(buf), "%.*sHost: localhost:9000\r\n\r\n", (int)(strlen(PRESIGNED) - 2),
             PRESIGNED);
    assert_int_equal(verify_raw(buf, SECRET, T0, k2, &why), SRV_EAUTH);
    /* an unsigned header more: not remembered, verified anew (and valid) */
    snprintf(buf, sizeof(buf), "%.*sX-Other: 1\r\n\r\n", (int)(strlen(PRESIGNED) - 2), PRESIGNED);
    assert_int_equal(verify_raw(buf, SECRET, T0, k2, &why), 0);
    /* another path, a parameter changed or added, with the remembered signature */
    snprintf(buf, sizeof(buf), "%s", PRESIGNED);
    memcpy(strstr(buf, "key.bin"), "kez", 3);
    assert_int_equal(verify_raw(buf, SECRET, T0, k2, &why), SRV_EAUTH);
    snprintf(buf, sizeof(buf), "%s", PRESIGNED);
    memcpy(strstr(buf, "X-Amz-Expires=3600"), "X-Amz-Expires=7200", 18);
    assert_int_equal(verify_raw(buf, SECRET, T0 + 5000, k2, &why), SRV_EAUTH);
    snprintf(buf, sizeof(buf), "%s", PRESIGNED);
    char *sp = strstr(buf, " HTTP/1.1");
    memmove(sp + 4, sp, strlen(sp) + 1);
    memcpy(sp, "&a=b", 4);
    assert_int_equal(verify_raw(buf, SECRET, T0, k2, &why), SRV_EAUTH);
    /* and the remembered request still verifies */
    assert_int_equal(verify_raw(PRESIGNED, SECRET, T0, k2, &why), 0);
    assert_memory_equal(k1, k2, 32);
}

/* The "PUT Object" chunked example of the AWS S3 API reference (sigv4-streaming). */
static const char CHUNK_REQ[] =
    "PUT /examplebucket/chunkObject.txt HTTP/1.1\r\n"
    "Host: s3.amazonaws.com\r\n"
    "x-amz-date: 20130524T000000Z\r\n"
    "x-amz-storage-class: REDUCED_REDUNDANCY\r\n"
    "Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
    "aws4_request,SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;"
    "x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,"
    "Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9\r\n"
    "x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD\r\n"
    "Content-Encoding: aws-chunked\r\n"
    "x-amz-decoded-content-length: 66560\r\n"
    "Content-Length: 66824\r\n\r\n";

/* The example request's signature and signing key (h holds the request). */
static void example_key(struct s3_http *h, struct srv_sigv4_auth *sig, unsigned char key[32])
{
    struct s3_req *r = parse(h, CHUNK_REQ);
    assert_int_equal(srv_sigv4_parse_header(s3__req_header(r, "authorization"), sig), 0);
    const char *why = NULL;
    time_t t;
    srv_sigv4_date_parse("20130524T000000Z", &t);
    assert_int_equal(s3__sigv4_verify(&r->arena, r, sig, EX_SECRET, t, key, &why), 0);
}

/* aws-chunked behind Transfer-Encoding: chunked, driven as the connection
 * does: the request leaves the parser at its headers, then body bytes and
 * framing events go to s3__chunked_http_*. */
struct framed {
    struct s3_chunked *d;
    int rc;
};

static int framed_body(void *arg, const char *data, size_t len)
{
    struct framed *f = arg;
    if (f->rc == 0)
        f->rc = s3__chunked_http_data(f->d, data, len);
    return f->rc != 0;
}

static int framed_frame(void *arg, const struct s3_http_frame *fr)
{
    struct framed *f = arg;
    if (f->rc == 0)
        f->rc = s3__chunked_http_frame(f->d, fr);
    return f->rc != 0;
}

/* @return the decoder's error, 0 once the message completed. */
static int run_framed(struct s3_chunked *d, const char *body, size_t len, size_t step)
{
    static const char head[] = "PUT /b/k HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    struct framed f = {.d = d};
    struct s3_http h;
    size_t used = 0;
    s3__http_init(&h, 0, framed_body, &f);
    s3__http_set_frame_cb(&h, framed_frame);
    assert_int_equal(s3__http_feed(&h, head, strlen(head), &used), S3_HTTP_HEADERS);
    struct s3_req *r = s3__http_take_req(&h);
    s3__http_resume(&h);
    int ev = S3_HTTP_MORE;
    for (size_t off = 0; off < len && ev == S3_HTTP_MORE; off += used) {
        size_t n = len - off < step ? len - off : step;
        ev = s3__http_feed(&h, body + off, n, &used);
    }
    if (f.rc == 0)
        assert_int_equal(ev, S3_HTTP_DONE);
    else
        assert_int_equal(ev, S3_HTTP_EBODY);
    s3__req_free(r);
    s3__http_fini(&h);
    return f.rc;
}

/* @p inner wrapped in HTTP chunks of @p size bytes (the nested way). */
static char *nest(const char *inner, size_t len, size_t size, size_t *outlen)
{
    char *b = malloc(len * 2 + 64), *p = b;
    for (size_t off = 0; off < len; off += size) {
        size_t n = len - off < size ? len - off : size;
        p += sprintf(p, "%zx\r\n", n);
        memcpy(p, inner + off, n);
        p += n;
        p += sprintf(p, "\r\n");
    }
    p += sprintf(p, "0\r\nx-proxy: 1\r\n\r\n");
    *outlen = (size_t)(p - b);
    return b;
}

static void test_chunked_in_http_signed(void **state)
{
    (void)state;
    struct s3_http h;
    struct srv_sigv4_auth sig;
    unsigned char key[32];
    example_key(&h, &sig, key);
    size_t steps[] = {1, 4097, 1 << 20};
    for (int tamper = 0; tamper < 2; tamper++) {
        size_t len, nlen;
        char *body = chunk_body(&len, tamper);
        /* the example's aws chunks are valid HTTP chunks: sent as they are, the
         * chunk signatures arrive as chunk extensions */
        for (size_t i = 0; i < 3; i++) {
            struct s3_chunked d;
            struct sink s = {0};
            s3__chunked_init(&d, SRV_SIGV4_CHUNK_SIGNED, key, &sig, sink_cb, &s);
            assert_int_equal(run_framed(&d, body, len, steps[i]), tamper ? SRV_EAUTH : 0);
            assert_int_equal(d.d.done, !tamper);
            if (!tamper) {
                assert_int_equal(s.bad, 0);
                assert_int_equal(s.n, 66560);
            }
            s3__chunked_fini(&d);
        }
        /* ... or inside HTTP chunks of their own */
        char *nested = nest(body, len, 1000, &nlen);
        struct s3_chunked d;
        struct sink s = {0};
        s3__chunked_init(&d, SRV_SIGV4_CHUNK_SIGNED, key, &sig, sink_cb, &s);
        assert_int_equal(run_framed(&d, nested, nlen, 333), tamper ? SRV_EAUTH : 0);
        assert_int_equal(d.d.done, !tamper);
        s3__chunked_fini(&d);
        free(nested);
        free(body);
    }
    s3__http_fini(&h);
}

static void test_chunked_in_http_unsigned(void **state)
{
    (void)state;
    static const char same[] = "5\r\naaaaa\r\n3\r\naaa\r\n0\r\nX-Amz-Checksum-Crc32:  sOO8/Q== \r\n"
                               "X-Other: 1\r\n\r\n";
    static const char empty[] = "0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n";
    static const char inner[] = "8\r\naaaaaaaa\r\n0\r\nx-amz-checksum-crc32:sOO8/Q==\r\n\r\n";
    size_t steps[] = {1, 3, 100};
    for (size_t i = 0; i < 3; i++) {
        struct s3_chunked d;
        struct sink s = {0};
        /* the HTTP chunks are the aws chunks, the checksum an HTTP trailer field */
        s3__chunked_init(&d, SRV_SIGV4_CHUNK_UNSIGNED_TRAILER, NULL, NULL, sink_cb, &s);
        assert_int_equal(run_framed(&d, same, strlen(same), steps[i]), 0);
        assert_true(d.d.done);
        assert_int_equal(s.n, 8);
        assert_string_equal(d.d.ck_name, "x-amz-checksum-crc32");
        assert_string_equal(d.d.ck_value, "sOO8/Q==");
        s3__chunked_fini(&d);
        /* an empty payload: the first chunk is the last */
        s3__chunked_init(&d, SRV_SIGV4_CHUNK_UNSIGNED_TRAILER, NULL, NULL, sink_cb, &s);
        assert_int_equal(run_framed(&d, empty, strlen(empty), steps[i]), 0);
        assert_true(d.d.done);
        assert_string_equal(d.d.ck_value, "AAAAAA==");
        s3__chunked_fini(&d);
        /* nested in HTTP chunks of 4 bytes: the first begins with a size line */
        size_t nlen;
        char *nested = nest(inner, strlen(inner), 4, &nlen);
        s.n = 0;
        s3__chunked_init(&d, SRV_SIGV4_CHUNK_UNSIGNED_TRAILER, NULL, NULL, sink_cb, &s);
        assert_int_equal(run_framed(&d, nested, nlen, steps[i]), 0);
        assert_true(d.d.done);
        assert_int_equal(s.n, 8);
        assert_string_equal(d.d.ck_value, "sOO8/Q==");
        s3__chunked_fini(&d);
        free(nested);
    }
    /* a payload shorter than a size line, in chunks that end early */
    static const char tiny[] = "1\r\na\r\n2\r\naa\r\n0\r\n\r\n";
    struct s3_chunked d;
    struct sink s = {0};
    s3__chunked_init(&d, SRV_SIGV4_CHUNK_UNSIGNED_TRAILER, NULL, NULL, sink_cb, &s);
    assert_int_equal(run_framed(&d, tiny, strlen(tiny), 1), 0);
    assert_true(d.d.done);
    assert_int_equal(s.n, 3);
    s3__chunked_fini(&d);
    /* signed, same chunks, but a chunk without its signature */
    static const char nosig[] = "1;chunk-signature=00\r\na\r\n2\r\naa\r\n0\r\n\r\n";
    s3__chunked_init(&d, SRV_SIGV4_CHUNK_SIGNED,
                     (const unsigned char *)"0123456789abcdef0123456789abcdef", NULL, sink_cb, &s);
    assert_int_equal(run_framed(&d, nosig, strlen(nosig), 64), -EINVAL);
    s3__chunked_fini(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_time_constant),
        cmocka_unit_test(test_header_get),
        cmocka_unit_test(test_header_put_odd_key),
        cmocka_unit_test(test_tampered_header),
        cmocka_unit_test(test_presigned),
        cmocka_unit_test(test_presigned_tampered_query),
        cmocka_unit_test(test_presigned_memo),
        cmocka_unit_test(test_service_must_be_s3),
        cmocka_unit_test(test_chunked_in_http_signed),
        cmocka_unit_test(test_chunked_in_http_unsigned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
