/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for sigv4/srv_sigv4.c against published vectors: HMAC-SHA256
 * (RFC 4231), the signing key example of the AWS documentation, and cases of
 * the AWS Signature Version 4 test suite (credentials AKIDEXAMPLE, 2015-08-30,
 * us-east-1, service "service"); plus encoding, canonical-request edge cases
 * (and the caller-buffer form), the x-amz-date format, the per-thread
 * signing-key cache and the MAC under a remembered key. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "srv_sigv4.h"

#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SUITE_SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define SUITE_DATE "20150830T123600Z"
#define SUITE_SCOPE "20150830/us-east-1/service/aws4_request"

static void test_hmac_rfc4231(void **state)
{
    (void)state;
    uint8_t mac[32], key[131];
    char hex[65];
    srv_sigv4_hmac("Jefe", 4, "what do ya want for nothing?", 28, mac);
    srv_sigv4_hex(mac, 32, hex);
    assert_string_equal(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    /* A key longer than the block is hashed first. */
    memset(key, 0xaa, sizeof(key));
    const char *m = "Test Using Larger Than Block-Size Key - Hash Key First";
    srv_sigv4_hmac(key, sizeof(key), m, strlen(m), mac);
    srv_sigv4_hex(mac, 32, hex);
    assert_string_equal(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    srv_sigv4_sha256_hex("", 0, hex);
    assert_string_equal(hex, EMPTY_SHA);
}

static void test_signing_key(void **state)
{
    (void)state;
    uint8_t k[32];
    char hex[65];
    srv_sigv4_key(SUITE_SECRET, "20120215", "us-east-1", "iam", k);
    srv_sigv4_hex(k, 32, hex);
    assert_string_equal(hex, "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
}

/* Canonicalize and sign one test-suite request; @return the signature (static). */
static const char *suite_sign(const char *method, const struct srv_sigv4_kv *query, size_t nq,
                              const struct srv_sigv4_kv *hdrs, size_t nh, const char *signed_hdrs,
                              char **canon_out)
{
    static char sig[65];
    struct srv_sigv4_req r = {
        .method = method,
        .uri = "/",
        .query = query,
        .nquery = nq,
        .hdrs = hdrs,
        .nhdrs = nh,
        .signed_headers = signed_hdrs,
        .payload_hash = EMPTY_SHA,
    };
    char *canon = NULL;
    uint8_t k[32];
    assert_int_equal(srv_sigv4_canonical(&r, &canon), 0);
    srv_sigv4_key(SUITE_SECRET, "20150830", "us-east-1", "service", k);
    assert_int_equal(srv_sigv4_sign(k, SUITE_DATE, SUITE_SCOPE, canon, sig), 0);
    if (canon_out)
        *canon_out = canon;
    else
        free(canon);
    return sig;
}

#define KV(n, v) {(n), sizeof(n) - 1, (v), sizeof(v) - 1}

static void test_suite_vanilla(void **state)
{
    (void)state;
    const struct srv_sigv4_kv hdrs[] = {KV("Host", "example.amazonaws.com"),
                                        KV("X-Amz-Date", SUITE_DATE)};
    char *canon;
    const char *sig = suite_sign("GET", NULL, 0, hdrs, 2, "host;x-amz-date", &canon);
    assert_string_equal(canon, "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:" SUITE_DATE
                               "\n\nhost;x-amz-date\n" EMPTY_SHA);
    free(canon);
    assert_string_equal(sig, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
    sig = suite_sign("POST", NULL, 0, hdrs, 2, "host;x-amz-date", NULL);
    assert_string_equal(sig, "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
}

static void test_suite_query_order(void **state)
{
    (void)state;
    const struct srv_sigv4_kv hdrs[] = {KV("host", "example.amazonaws.com"),
                                        KV("x-amz-date", SUITE_DATE)};
    const struct srv_sigv4_kv q[] = {KV("Param2", "value2"), KV("Param1", "value1")};
    char *canon;
    const char *sig = suite_sign("GET", q, 2, hdrs, 2, "host;x-amz-date", &canon);
    assert_non_null(strstr(canon, "\nParam1=value1&Param2=value2\n"));
    free(canon);
    assert_string_equal(sig, "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
}

static void test_suite_header_values(void **state)
{
    (void)state;
    /* Values trimmed, inner blank runs made one space. */
    const struct srv_sigv4_kv trim[] = {KV("Host", "example.amazonaws.com"),
                                        KV("My-Header1", " value1"),
                                        KV("My-Header2", "\"a   b   c\""),
                                        KV("X-Amz-Date", SUITE_DATE)};
    const char *sig = suite_sign("GET", NULL, 0, trim, 4, "host;my-header1;my-header2;x-amz-date",
                                 NULL);
    assert_string_equal(sig, "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736");
    /* A repeated header: its values joined with ',' in the order sent. */
    const struct srv_sigv4_kv dup[] = {KV("Host", "example.amazonaws.com"),
                                       KV("My-Header1", "value2"), KV("My-Header1", "value2"),
                                       KV("My-Header1", "value1"), KV("X-Amz-Date", SUITE_DATE)};
    char *canon;
    sig = suite_sign("GET", NULL, 0, dup, 5, "host;my-header1;x-amz-date", &canon);
    assert_non_null(strstr(canon, "\nmy-header1:value2,value2,value1\n"));
    free(canon);
    assert_string_equal(sig, "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea");
}

static void test_canonical_errors_and_encoding(void **state)
{
    (void)state;
    const struct srv_sigv4_kv hdrs[] = {KV("host", "h")};
    const struct srv_sigv4_kv q[] = {KV("a b", "x/y~z"), {"k\0z", 3, "", 0}};
    struct srv_sigv4_req r = {.method = "PUT", .uri = "/b/k", .query = q, .nquery = 2,
                              .hdrs = hdrs, .nhdrs = 1, .signed_headers = "host",
                              .payload_hash = "UNSIGNED-PAYLOAD"};
    char *canon = NULL;
    assert_int_equal(srv_sigv4_canonical(&r, &canon), 0);
    assert_string_equal(canon, "PUT\n/b/k\na%20b=x%2Fy~z&k%00z=\nhost:h\n\nhost\nUNSIGNED-PAYLOAD");
    free(canon);
    r.signed_headers = "host;x-amz-date";
    assert_int_equal(srv_sigv4_canonical(&r, &canon), -ENOENT);
    assert_null(canon);
    r.signed_headers = "host;;";
    assert_int_equal(srv_sigv4_canonical(&r, &canon), -ENOENT);
    char out[16];
    assert_int_equal(srv_sigv4_encode("a/b c", 5, true, out), 7);
    assert_string_equal(out, "a/b%20c");
    assert_int_equal(srv_sigv4_encode("\xff", 1, false, out), 3);
    assert_string_equal(out, "%FF");
    /* The scope and date must fit the string to sign. */
    char longscope[600], sig[65];
    uint8_t k[32] = {0};
    memset(longscope, 'a', sizeof(longscope) - 1);
    longscope[sizeof(longscope) - 1] = '\0';
    assert_int_equal(srv_sigv4_sign(k, SUITE_DATE, longscope, "x", sig), -EINVAL);
}

static void test_amz_date(void **state)
{
    (void)state;
    time_t t;
    char buf[17];
    assert_int_equal(srv_sigv4_date_parse(SUITE_DATE, &t), 0);
    assert_int_equal((long long)t, 1440938160LL);
    srv_sigv4_date_format(t, buf);
    assert_string_equal(buf, SUITE_DATE);
    assert_int_equal(srv_sigv4_date_parse("20150830T123600", &t), -EINVAL);
    assert_int_equal(srv_sigv4_date_parse("20150830 123600Z", &t), -EINVAL);
    assert_int_equal(srv_sigv4_date_parse("20151330T123600Z", &t), -EINVAL);
    assert_int_equal(srv_sigv4_date_parse("20150830T246000Z", &t), -EINVAL);
    assert_int_equal(srv_sigv4_date_parse("2015083OT123600Z", &t), -EINVAL);
    assert_int_equal(srv_sigv4_date_parse("", &t), -EINVAL);
    assert_int_equal(srv_sigv4_date_parse(NULL, &t), -EINVAL);
    assert_int_equal(srv_sigv4_date_parse("19691231T235959Z", &t), -EINVAL);
    /* the arithmetic agrees with timegm() over leap years, month ends (and
     * day 31 of short months rolling over, as timegm does), and far years */
    static const int years[] = {1970, 1999, 2000, 2024, 2026, 2100, 2400, 9999};
    for (size_t yi = 0; yi < sizeof(years) / sizeof(years[0]); yi++)
        for (int mo = 1; mo <= 12; mo++)
            for (int d = 1; d <= 31; d += 3) {
                char in[32];
                snprintf(in, sizeof(in), "%04d%02d%02dT%02d%02d%02dZ", years[yi], mo,
                         d == 31 ? 31 : d, (d * 7) % 24, (mo * 11) % 60, (d + mo) % 60);
                struct tm tm = {.tm_year = years[yi] - 1900, .tm_mon = mo - 1, .tm_mday = d,
                                .tm_hour = (d * 7) % 24, .tm_min = (mo * 11) % 60,
                                .tm_sec = (d + mo) % 60};
                assert_int_equal(srv_sigv4_date_parse(in, &t), 0);
                assert_int_equal((long long)t, (long long)timegm(&tm));
            }
}

/* The per-thread signing-key cache gives what the derivation gives, and a
 * different secret, date or region never gets another's key. */
static void test_key_cache(void **state)
{
    (void)state;
    static const char *const secrets[] = {SUITE_SECRET, "another/secret",
                                          "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEZ"};
    static const char *const dates[] = {"20261121", "20261122"};
    static const char *const regions[] = {"us-east-1", "eu-west-3"};
    for (int round = 0; round < 3; round++)
        for (size_t s = 0; s < 3; s++)
            for (size_t d = 0; d < 2; d++)
                for (size_t r = 0; r < 2; r++) {
                    uint8_t want[32], got[32];
                    srv_sigv4_key(secrets[s], dates[d], regions[r], "s3", want);
                    srv_sigv4_key_cached(secrets[s], dates[d], regions[r], "s3", got);
                    assert_memory_equal(got, want, 32);
                }
    /* the AWS documentation's example key, through the cache */
    uint8_t k[32];
    char hex[65];
    srv_sigv4_key_cached(SUITE_SECRET, "20120215", "us-east-1", "iam", k);
    srv_sigv4_hex(k, 32, hex);
    assert_string_equal(hex, "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
    /* a secret longer than the cache keeps works (derived each time) */
    char longsecret[400];
    memset(longsecret, 'k', sizeof(longsecret) - 1);
    longsecret[sizeof(longsecret) - 1] = '\0';
    uint8_t a[32], b[32];
    srv_sigv4_key(longsecret, "20261121", "us-east-1", "s3", a);
    srv_sigv4_key_cached(longsecret, "20261121", "us-east-1", "s3", b);
    assert_memory_equal(a, b, 32);
}

/* srv_sigv4_mac equals the plain HMAC, for more keys than it remembers, in
 * an order that makes it both hit and replace. */
static void test_mac_memo(void **state)
{
    (void)state;
    uint8_t keys[7][32];
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 32; j++)
            keys[i][j] = (uint8_t)(i * 37 + j);
    static const char *const msgs[] = {"", "a", "AWS4-HMAC-SHA256\n20261121T093000Z\n",
                                       "a message longer than one block of sixty-four bytes, "
                                       "so the inner digest takes two blocks and more"};
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 7; i++)
            for (size_t m = 0; m < 4; m++) {
                int k = (i * (round + 1)) % 7;
                uint8_t want[32], got[32];
                srv_sigv4_hmac(keys[k], 32, msgs[m], strlen(msgs[m]), want);
                srv_sigv4_mac(keys[k], msgs[m], strlen(msgs[m]), got);
                assert_memory_equal(got, want, 32);
            }
}

/* The caller-buffer form: -ENOSPC with the needed length, then the same text
 * as the allocating form; header names are written in lower case. */
static void test_canonical_into(void **state)
{
    (void)state;
    struct srv_sigv4_kv q[] = {{"b", 1, "2 3", 3}, {"a", 1, "x/y", 3}};
    struct srv_sigv4_kv h[] = {{"Host", 4, "example.com", 11}, {"X-Amz-Date", 10, SUITE_DATE, 16}};
    struct srv_sigv4_req r = {
        .method = "GET",
        .uri = "/k",
        .query = q,
        .nquery = 2,
        .hdrs = h,
        .nhdrs = 2,
        .signed_headers = "Host;x-amz-date",
        .payload_hash = EMPTY_SHA,
    };
    const char *want = "GET\n/k\na=x%2Fy&b=2%203\nhost:example.com\nx-amz-date:" SUITE_DATE
                       "\n\nHost;x-amz-date\n" EMPTY_SHA;
    char small[16], big[512];
    size_t len = 0;
    assert_int_equal(srv_sigv4_canonical_into(&r, small, sizeof(small), &len), -ENOSPC);
    assert_int_equal(len, strlen(want));
    assert_int_equal(srv_sigv4_canonical_into(&r, big, len, &len), -ENOSPC); /* no room for NUL */
    assert_int_equal(srv_sigv4_canonical_into(&r, big, len + 1, &len), 0);
    assert_string_equal(big, want);
    assert_int_equal(len, strlen(want));
    char *text = NULL;
    assert_int_equal(srv_sigv4_canonical(&r, &text), 0);
    assert_string_equal(text, want);
    free(text);
    r.signed_headers = "host;x-amz-content-sha256";
    assert_int_equal(srv_sigv4_canonical_into(&r, big, sizeof(big), &len), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hmac_rfc4231),
        cmocka_unit_test(test_signing_key),
        cmocka_unit_test(test_suite_vanilla),
        cmocka_unit_test(test_suite_query_order),
        cmocka_unit_test(test_suite_header_values),
        cmocka_unit_test(test_canonical_errors_and_encoding),
        cmocka_unit_test(test_amz_date),
        cmocka_unit_test(test_key_cache),
        cmocka_unit_test(test_mac_memo),
        cmocka_unit_test(test_canonical_into),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
