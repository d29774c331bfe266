/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for sigv4/srv_sigv4_auth.c and sigv4/srv_sigv4_chunked.c: the
 * Authorization header and presigned query parsers, the verifier on plain
 * byte strings (a botocore 1.29 vector, skew, expiry, tampering, missing
 * pieces), and the aws-chunked decoder on the "PUT Object" chunked example of
 * the AWS S3 API reference (whole, split, tampered, malformed). Links only
 * sigv4/ and common/. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "srv_err.h"
#include "srv_sigv4.h"
#include "sigv4_test_util.h"

static const char SECRET[] = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
static const time_t T0 = 1795253400; /* 2026-11-21T09:30:00Z */
#define EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

#define GET_AUTHZ_SHORT                                                                            \
    "AWS4-HMAC-SHA256 Credential=AK/20261121/us-east-1/s3/aws4_request,SignedHeaders=host,"        \
    "Signature=" EMPTY

static void test_parse_header(void **state)
{
    (void)state;
    struct srv_sigv4_auth a;
    assert_int_equal(srv_sigv4_parse_header(
                         "AWS4-HMAC-SHA256 Credential=AK/ID/20261121/eu-west-1/s3/aws4_request,"
                         "  SignedHeaders=Host;x-amz-date ,Signature=" EMPTY,
                         &a),
                     0);
    assert_false(a.presigned);
    assert_string_equal(a.akey, "AK/ID"); /* all before the scope's four fields */
    assert_string_equal(a.date, "20261121");
    assert_string_equal(a.region, "eu-west-1");
    assert_string_equal(a.service, "s3");
    assert_string_equal(a.signed_headers, "Host;x-amz-date"); /* as received */
    assert_int_equal(a.nsigned, 2);
    assert_string_equal(a.signed_list[0], "host");
    assert_string_equal(a.signed_list[1], "x-amz-date");
    assert_string_equal(a.signature, EMPTY);
}

static void test_malformed_header(void **state)
{
    (void)state;
    struct srv_sigv4_auth a;
    assert_int_equal(srv_sigv4_parse_header("AWS AKID:abc", &a), SRV_ENOTSUPP);
    assert_int_equal(srv_sigv4_parse_header("AWS4-HMAC-SHA256 Credential=x", &a), -EINVAL);
    assert_int_equal(srv_sigv4_parse_header("AWS4-HMAC-SHA256 Credential=A/2/r/s3/aws4_request, "
                                            "SignedHeaders=host, Signature=short",
                                            &a),
                     -EINVAL);
    assert_int_equal(srv_sigv4_parse_header("AWS4-HMAC-SHA256 Credential=A/20130524/r/s3/x, "
                                            "SignedHeaders=host, Signature=" EMPTY,
                                            &a),
                     -EINVAL);
    /* unknown field, empty signed list */
    assert_int_equal(srv_sigv4_parse_header("AWS4-HMAC-SHA256 Credential=A/20130524/r/s3/"
                                            "aws4_request, SignedHeaders=host, Signature=" EMPTY
                                            ", Extra=1",
                                            &a),
                     -EINVAL);
    assert_int_equal(srv_sigv4_parse_header("AWS4-HMAC-SHA256 Credential=A/20130524/r/s3/"
                                            "aws4_request, SignedHeaders=;;, Signature=" EMPTY,
                                            &a),
                     -EINVAL);
    assert_int_equal(srv_sigv4_parse_header("AWS4-HMAC-SHA256x Credential=A", &a), -EINVAL);
    assert_int_equal(srv_sigv4_parse_header("", &a), -EINVAL);
    assert_int_equal(srv_sigv4_parse_header(NULL, &a), -EINVAL);
}

/* clang-format off */
#define KV(n, v) {n, sizeof(n) - 1, v, sizeof(v) - 1}
/* clang-format on */

/* A presigned GET of /bkt/key.bin on localhost:9000 with SECRET, valid an hour from T0. */
static const struct srv_sigv4_kv PRESIGNED[] = {
    KV("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
    KV("X-Amz-Credential", "AKIDEXAMPLE/20261121/us-east-1/s3/aws4_request"),
    KV("X-Amz-Date", "20261121T093000Z"),
    KV("X-Amz-Expires", "3600"),
    KV("X-Amz-SignedHeaders", "host"),
    KV("X-Amz-Signature", "591ed23175b460f7893947aeaf016283a6d90c9f7b453c28bf230ab24f820523"),
};

static void test_parse_query(void **state)
{
    (void)state;
    struct srv_sigv4_auth a;
    const struct srv_sigv4_kv *q = PRESIGNED;
    assert_int_equal(srv_sigv4_parse_query(q, 6, &a), 0);
    assert_true(a.presigned);
    assert_int_equal(a.expires, 3600);
    assert_int_equal((long long)a.when, (long long)T0);
    assert_string_equal(a.payload_hash, SRV_SIGV4_UNSIGNED_PAYLOAD);
    /* not presigned at all */
    assert_int_equal(srv_sigv4_parse_query(q + 2, 3, &a), -ENOENT);
    /* a piece missing, expiry out of range */
    assert_int_equal(srv_sigv4_parse_query(q, 5, &a), -EINVAL);
    struct srv_sigv4_kv bad[6];
    memcpy(bad, PRESIGNED, sizeof(bad));
    bad[3] = (struct srv_sigv4_kv)KV("X-Amz-Expires", "604801");
    assert_int_equal(srv_sigv4_parse_query(bad, 6, &a), -EINVAL);
    bad[3] = (struct srv_sigv4_kv)KV("X-Amz-Expires", "0");
    assert_int_equal(srv_sigv4_parse_query(bad, 6, &a), -EINVAL);
    /* the first of a repeated parameter counts; other parameters, X-Amz-* or
     * not, names of the same length, prefixes and case variants are not
     * the presigned ones */
    struct srv_sigv4_kv mix[13] = {
        KV("X-Amz-Foo", "1"),
        KV("x-amz-expires", "0"),
        KV("X-Amz-Expire", "0"),
        KV("X-Amz-Expiress", "0"),
        KV("X-Bmz-Expires", "0"),
        KV("versionId", "v"),
        KV("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD"),
    };
    memcpy(mix + 7, PRESIGNED + 1, 5 * sizeof(mix[0]));
    mix[12] = (struct srv_sigv4_kv)KV("X-Amz-Expires", "0");
    assert_int_equal(srv_sigv4_parse_query(mix, 13, &a), -EINVAL); /* no algorithm */
    mix[5] = PRESIGNED[0];
    assert_int_equal(srv_sigv4_parse_query(mix, 13, &a), 0);
    assert_int_equal(a.expires, 3600);
    assert_string_equal(a.payload_hash, "UNSIGNED-PAYLOAD");
    assert_string_equal(a.signed_headers, "host");
    mix[0] = (struct srv_sigv4_kv)KV("X-Amz-Expires", "60");
    assert_int_equal(srv_sigv4_parse_query(mix, 13, &a), 0);
    assert_int_equal(a.expires, 60);
}

/* A reset holder reads as a zeroed one, and a parse into a holder full of an
 * earlier request's bytes (a reused one: parsers no longer zero all 3 KiB)
 * gives what a parse into a zeroed one gives. */
static void test_reset_and_dirty_parse(void **state)
{
    (void)state;
    struct srv_sigv4_auth a, z;
    memset(&a, 0x5a, sizeof(a));
    srv_sigv4_auth_reset(&a);
    assert_false(a.presigned);
    assert_string_equal(a.akey, "");
    assert_string_equal(a.date, "");
    assert_string_equal(a.region, "");
    assert_string_equal(a.service, "");
    assert_string_equal(a.amz_date, "");
    assert_int_equal((long long)a.when, 0);
    assert_int_equal(a.expires, 0);
    assert_string_equal(a.signature, "");
    assert_string_equal(a.signed_headers, "");
    assert_int_equal(a.nsigned, 0);
    assert_string_equal(a.names, "");
    assert_string_equal(a.payload_hash, "");
    /* a long SignedHeaders first, then a short one over it */
    assert_int_equal(
        srv_sigv4_parse_header("AWS4-HMAC-SHA256 Credential=LONGERKEY/20261121/eu-west-1/s3/"
                               "aws4_request,SignedHeaders=host;x-amz-content-sha256;x-amz-date;"
                               "x-amz-meta-a,Signature=" EMPTY,
                               &a),
        0);
    assert_int_equal(srv_sigv4_parse_query(PRESIGNED, 6, &a), 0);
    memset(&z, 0, sizeof(z));
    assert_int_equal(srv_sigv4_parse_query(PRESIGNED, 6, &z), 0);
    assert_int_equal(a.presigned, z.presigned);
    assert_string_equal(a.akey, z.akey);
    assert_string_equal(a.date, z.date);
    assert_string_equal(a.region, z.region);
    assert_string_equal(a.service, z.service);
    assert_string_equal(a.amz_date, z.amz_date);
    assert_int_equal((long long)a.when, (long long)z.when);
    assert_int_equal(a.expires, z.expires);
    assert_string_equal(a.signature, z.signature);
    assert_string_equal(a.signed_headers, z.signed_headers);
    assert_int_equal(a.nsigned, z.nsigned);
    for (size_t i = 0; i < z.nsigned; i++)
        assert_string_equal(a.signed_list[i], z.signed_list[i]);
    assert_string_equal(a.payload_hash, z.payload_hash);
    /* and a header parse over a presigned one leaves no presigned mark or hash */
    assert_int_equal(srv_sigv4_parse_header(GET_AUTHZ_SHORT, &a), 0);
    assert_false(a.presigned);
    assert_string_equal(a.payload_hash, "");
    assert_int_equal(a.expires, 0);
}

/* The botocore vector of tests/unit/s3api/test_s3_sigv4.c as plain strings:
 * GET /bkt?list-type=2&prefix=a%20b%2Fc&delimiter=%2F. */
static const struct srv_sigv4_kv GET_Q[] = {
    KV("list-type", "2"),
    KV("prefix", "a b/c"),
    KV("delimiter", "/"),
};
static const struct srv_sigv4_kv GET_H[] = {
    KV("Host", "127.0.0.1:9000"),
    KV("X-Amz-Date", "20261121T093000Z"),
    KV("X-Amz-Content-SHA256", EMPTY),
};
static const char GET_AUTHZ[] =
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261121/us-east-1/s3/aws4_request, "
    "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
    "Signature=98d42edd142e3b54c8bfb92e2da07fb1cb1d5cde35ad4d691d12df493b14aa55";

static int verify_get(const char *secret, time_t now, const char *amz_date, const char *ph,
                      const char **why)
{
    struct srv_sigv4_auth a;
    uint8_t key[32];
    assert_int_equal(srv_sigv4_parse_header(GET_AUTHZ, &a), 0);
    struct srv_sigv4_req r = {
        .method = "GET", .uri = "/bkt", .query = GET_Q, .nquery = 3, .hdrs = GET_H, .nhdrs = 3};
    struct srv_sigv4_verify_in in = {
        .amz_date = amz_date, .http_date = -1, .payload_hash = ph, .secret = secret, .now = now};
    return srv_sigv4_verify(&a, &in, &r, key, why);
}

static void test_verify(void **state)
{
    (void)state;
    const char *why = NULL;
    assert_int_equal(verify_get(SECRET, T0 + 60, "20261121T093000Z", EMPTY, &why), 0);
    assert_null(why);
    assert_int_equal(verify_get("nope", T0, "20261121T093000Z", EMPTY, &why), SRV_EAUTH);
    assert_int_equal(verify_get(SECRET, T0 + 16 * 60, "20261121T093000Z", EMPTY, &why), -ETIMEDOUT);
    assert_int_equal(verify_get(SECRET, T0 - 16 * 60, "20261121T093000Z", EMPTY, &why), -ETIMEDOUT);
    assert_int_equal(verify_get(SECRET, T0, NULL, EMPTY, &why), -EINVAL);
    assert_string_equal(why, "missing or malformed X-Amz-Date / Date header");
    assert_int_equal(verify_get(SECRET, T0, "2026-11-21", EMPTY, &why), -EINVAL);
    assert_int_equal(verify_get(SECRET, T0, "20261122T093000Z", EMPTY, &why), -EINVAL);
    assert_string_equal(why, "credential scope date does not match the request date");
    assert_int_equal(verify_get(SECRET, T0, "20261121T093000Z", NULL, &why), -EINVAL);
    assert_string_equal(why, "missing required header x-amz-content-sha256");
    /* another payload hash than the one signed */
    assert_int_equal(verify_get(SECRET, T0, "20261121T093000Z", "UNSIGNED-PAYLOAD", &why),
                     SRV_EAUTH);
}

static void test_verify_needs_host_and_headers(void **state)
{
    (void)state;
    struct srv_sigv4_auth a;
    uint8_t key[32];
    const char *why = NULL;
    struct srv_sigv4_verify_in in = {.amz_date = "20261121T093000Z",
                                     .http_date = -1,
                                     .payload_hash = EMPTY,
                                     .secret = SECRET,
                                     .now = T0};
    struct srv_sigv4_req r = {
        .method = "GET", .uri = "/bkt", .query = GET_Q, .nquery = 3, .hdrs = GET_H, .nhdrs = 3};
    assert_int_equal(srv_sigv4_parse_header("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261121/"
                                            "us-east-1/s3/aws4_request, SignedHeaders=x-amz-date,"
                                            " Signature=" EMPTY,
                                            &a),
                     0);
    assert_int_equal(srv_sigv4_verify(&a, &in, &r, key, &why), -EINVAL);
    assert_string_equal(why, "the host header must be signed");
    assert_int_equal(srv_sigv4_parse_header("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261121/"
                                            "us-east-1/s3/aws4_request, SignedHeaders=host;"
                                            "x-absent, Signature=" EMPTY,
                                            &a),
                     0);
    assert_int_equal(srv_sigv4_verify(&a, &in, &r, key, &why), -EINVAL);
    assert_string_equal(why, "a signed header is missing from the request");
    /* a request that cannot be canonicalized */
    assert_int_equal(srv_sigv4_parse_header(GET_AUTHZ, &a), 0);
    r.uri = NULL;
    assert_int_equal(srv_sigv4_verify(&a, &in, &r, key, &why), -EINVAL);
}

static void test_verify_presigned(void **state)
{
    (void)state;
    const struct srv_sigv4_kv *q = PRESIGNED;
    struct srv_sigv4_kv h[] = {KV("Host", "localhost:9000")};
    struct srv_sigv4_auth a;
    uint8_t key[32];
    const char *why = NULL;
    assert_int_equal(srv_sigv4_parse_query(q, 6, &a), 0);
    /* the query of the canonical request leaves the signature out */
    struct srv_sigv4_req r = {
        .method = "GET", .uri = "/bkt/key.bin", .query = q, .nquery = 5, .hdrs = h, .nhdrs = 1};
    struct srv_sigv4_verify_in in = {.http_date = -1, .secret = SECRET, .now = T0 + 3599};
    assert_int_equal(srv_sigv4_verify(&a, &in, &r, key, &why), 0);
    in.now = T0 + 3601;
    assert_int_equal(srv_sigv4_verify(&a, &in, &r, key, &why), -EACCES);
    assert_string_equal(why, "request has expired");
    in.now = T0 - 3600;
    assert_int_equal(srv_sigv4_verify(&a, &in, &r, key, &why), -EACCES);
    assert_string_equal(why, "request is not valid yet");
    in.now = T0;
    r.uri = "/bkt/kez.bin";
    assert_int_equal(srv_sigv4_verify(&a, &in, &r, key, &why), SRV_EAUTH);
}

/* ---------------------------------------------------------------- aws-chunked */

/* The example's seed: its Authorization header, date and signing key. */
static const char EX_AUTHZ[] =
    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
    "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
    "x-amz-decoded-content-length;x-amz-storage-class,"
    "Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";

static void example_seed(struct srv_sigv4_auth *a, uint8_t key[32])
{
    assert_int_equal(srv_sigv4_parse_header(EX_AUTHZ, a), 0);
    memcpy(a->amz_date, "20130524T000000Z", 17);
    srv_sigv4_key(EX_SECRET, a->date, a->region, a->service, key);
}

static void run_chunked(int tamper, size_t step, int want_rc)
{
    struct srv_sigv4_auth a;
    uint8_t key[32];
    example_seed(&a, key);
    size_t len;
    char *body = chunk_body(&len, tamper);
    assert_int_equal(len, 66824);
    struct srv_sigv4_chunked d;
    struct sink s = {0};
    srv_sigv4_chunked_init(&d, SRV_SIGV4_CHUNK_SIGNED, key, &a, sink_cb, &s);
    int rc = 0;
    for (size_t off = 0; off < len && rc == 0; off += step)
        rc = srv_sigv4_chunked_feed(&d, body + off, len - off < step ? len - off : step);
    assert_int_equal(rc, want_rc);
    if (want_rc == 0) {
        assert_true(d.done);
        assert_int_equal(d.decoded, 66560);
        assert_int_equal(s.n, 66560);
        assert_int_equal(s.bad, 0);
    } else {
        assert_false(d.done);
        assert_non_null(d.err);
    }
    srv_sigv4_chunked_fini(&d);
    free(body);
}

static void test_chunked_example(void **state)
{
    (void)state;
    run_chunked(0, 1 << 20, 0);
    run_chunked(0, 1, 0);    /* byte by byte */
    run_chunked(0, 4097, 0); /* odd splits */
}

static void test_chunked_tampered(void **state)
{
    (void)state;
    run_chunked(1, 1 << 20, SRV_EAUTH);
    run_chunked(1, 7, SRV_EAUTH);
}

static void test_chunk_signature(void **state)
{
    (void)state;
    struct srv_sigv4_auth a;
    uint8_t key[32], sha[32];
    char sig[65];
    example_seed(&a, key);
    char *data = malloc(65536);
    memset(data, 'a', 65536);
    srv_sigv4_sha256(data, 65536, sha);
    /* the first chunk's signature chains from the seed, the request's own */
    srv_sigv4_chunk_sign(key, &a, a.signature, sha, sig);
    assert_string_equal(sig, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648");
    free(data);
}

static void test_chunked_framing(void **state)
{
    (void)state;
    struct srv_sigv4_chunked d;
    struct sink s = {0};
    static const char body[] = "5\r\naaaaa\r\n0\r\nx-amz-checksum-crc32:sOO8/Q==\r\n\r\n";
    srv_sigv4_chunked_init(&d, SRV_SIGV4_CHUNK_UNSIGNED_TRAILER, NULL, NULL, sink_cb, &s);
    assert_int_equal(srv_sigv4_chunked_feed(&d, body, strlen(body)), 0);
    assert_true(d.done);
    assert_int_equal(s.n, 5);
    assert_string_equal(d.ck_name, "x-amz-checksum-crc32");
    assert_string_equal(d.ck_value, "sOO8/Q==");
    assert_int_equal(srv_sigv4_chunked_feed(&d, "x", 1), -EINVAL);
    srv_sigv4_chunked_fini(&d);
    /* data longer than the declared size */
    srv_sigv4_chunked_init(&d, SRV_SIGV4_CHUNK_UNSIGNED_TRAILER, NULL, NULL, sink_cb, &s);
    assert_int_equal(srv_sigv4_chunked_feed(&d, "2\r\naaa\r\n", 8), -EINVAL);
    srv_sigv4_chunked_fini(&d);
    /* bad hex */
    srv_sigv4_chunked_init(&d, SRV_SIGV4_CHUNK_UNSIGNED_TRAILER, NULL, NULL, sink_cb, &s);
    assert_int_equal(srv_sigv4_chunked_feed(&d, "zz\r\n", 4), -EINVAL);
    assert_string_equal(d.err, "malformed chunk size");
    srv_sigv4_chunked_fini(&d);
    /* signed mode without a signature */
    srv_sigv4_chunked_init(&d, SRV_SIGV4_CHUNK_SIGNED,
                           (const uint8_t *)"0123456789abcdef0123456789abcdef", NULL, sink_cb, &s);
    assert_int_equal(srv_sigv4_chunked_feed(&d, "2\r\naa\r\n", 7), -EINVAL);
    srv_sigv4_chunked_fini(&d);
    /* a caller's own failure stops the decoder and keeps the first message */
    srv_sigv4_chunked_init(&d, SRV_SIGV4_CHUNK_UNSIGNED_TRAILER, NULL, NULL, sink_cb, &s);
    assert_int_equal(srv_sigv4_chunked_fail(&d, -EINVAL, "first"), -EINVAL);
    assert_int_equal(srv_sigv4_chunked_fail(&d, -EINVAL, "second"), -EINVAL);
    assert_string_equal(d.err, "first");
    assert_int_equal(srv_sigv4_chunked_feed(&d, "0\r\n\r\n", 5), -EINVAL);
    srv_sigv4_chunked_fini(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_header),
        cmocka_unit_test(test_malformed_header),
        cmocka_unit_test(test_parse_query),
        cmocka_unit_test(test_reset_and_dirty_parse),
        cmocka_unit_test(test_verify),
        cmocka_unit_test(test_verify_needs_host_and_headers),
        cmocka_unit_test(test_verify_presigned),
        cmocka_unit_test(test_chunked_example),
        cmocka_unit_test(test_chunked_tampered),
        cmocka_unit_test(test_chunk_signature),
        cmocka_unit_test(test_chunked_framing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
