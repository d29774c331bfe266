/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for s3api/s3_cksum.c: the additional checksums against the
 * example values of the AWS SDKs and the CRC catalogue's check values, and
 * the CRCs of random buffers, whole and split at every kind of boundary and
 * alignment, against bit-at-a-time references written here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "s3_internal.h"

/* ---- references: one bit at a time, straight from the definitions ---- */

static uint32_t ref_crc32(uint32_t poly, const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ ((c & 1) ? poly : 0);
    }
    return ~c;
}

static uint64_t ref_crc64(const unsigned char *p, size_t n)
{
    uint64_t c = ~0ull;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ ((c & 1) ? 0x9A6C9329AC4BC9B5ull : 0);
    }
    return ~c;
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static unsigned char *random_buf(size_t n)
{
    unsigned char *b = malloc(n + 8);
    assert_non_null(b);
    for (size_t i = 0; i < n + 8; i++)
        b[i] = (unsigned char)rnd();
    return b;
}

static void wire(enum s3_ck_algo a, const void *p, size_t n, char *out)
{
    struct s3_cksum c;
    s3__ck_init(&c, a);
    s3__ck_update(&c, p, n);
    s3__ck_final(&c, out);
}

/* The example values the AWS SDKs test their checksums with ("Hello world"),
 * the CRC catalogue's check values ("123456789"), and the empty body. */
static void test_known_values(void **state)
{
    (void)state;
    static const struct {
        enum s3_ck_algo a;
        const char *in, *want;
    } V[] = {
        {S3_CK_CRC32, "Hello world", "i9aeUg=="},
        {S3_CK_CRC32C, "Hello world", "crUfeA=="},
        {S3_CK_CRC64NVME, "Hello world", "OOJZ0D8xKts="},
        {S3_CK_SHA1, "Hello world", "e1AsOh9IyGCa4hLN+2Od7jlnP14="},
        {S3_CK_SHA256, "Hello world", "ZOyIygCyaOW6GjVnihtTFtIS9PNmskdyMlNKiuyjfzw="},
        {S3_CK_CRC32, "", "AAAAAA=="},
        {S3_CK_CRC32C, "", "AAAAAA=="},
        {S3_CK_CRC64NVME, "", "AAAAAAAAAAA="},
        {S3_CK_SHA256, "", "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="},
        {S3_CK_CRC32, "123456789", "y/Q5Jg=="},
        {S3_CK_CRC32C, "123456789", "4waSgw=="},
        {S3_CK_CRC64NVME, "123456789", "rosUhgp5mIg="},
    };
    for (size_t i = 0; i < sizeof(V) / sizeof(V[0]); i++) {
        char out[64];
        wire(V[i].a, V[i].in, strlen(V[i].in), out);
        assert_string_equal(out, V[i].want);
    }
    assert_int_equal(s3__crc32(0, "123456789", 9), 0xCBF43926u);
    assert_int_equal(s3__crc32c(0, "123456789", 9), 0xE3069283u);
    assert_true(s3__crc64nvme(0, "123456789", 9) == 0xAE8B14860A799888ull);
    assert_int_equal(s3__crc32(0, NULL, 0), 0);
    assert_true(s3__crc64nvme(0, NULL, 0) == 0);
}

/* Random buffers of every small length at every alignment, and large ones. */
static void test_random_against_reference(void **state)
{
    (void)state;
    unsigned char *b = random_buf(1 << 20);
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n <= 300; n++) {
            const unsigned char *p = b + off;
            assert_int_equal(s3__crc32(0, p, n), ref_crc32(0xEDB88320u, p, n));
            assert_int_equal(s3__crc32c(0, p, n), ref_crc32(0x82F63B78u, p, n));
            assert_true(s3__crc64nvme(0, p, n) == ref_crc64(p, n));
        }
    size_t big[] = {4096, 16384, 65536 + 7, (1 << 20) - 3};
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
        const unsigned char *p = b + (i & 3);
        assert_int_equal(s3__crc32(0, p, big[i]), ref_crc32(0xEDB88320u, p, big[i]));
        assert_int_equal(s3__crc32c(0, p, big[i]), ref_crc32(0x82F63B78u, p, big[i]));
        assert_true(s3__crc64nvme(0, p, big[i]) == ref_crc64(p, big[i]));
    }
    free(b);
}

/* A body's checksum does not depend on how it arrived: split anywhere. */
static void test_split_bodies(void **state)
{
    (void)state;
    size_t n = 5 * 65536 + 123;
    unsigned char *b = random_buf(n);
    uint32_t w32 = s3__crc32(0, b, n), w32c = s3__crc32c(0, b, n);
    uint64_t w64 = s3__crc64nvme(0, b, n);
    /* every split point of a small prefix */
    for (size_t cut = 0; cut <= 100; cut++) {
        assert_int_equal(s3__crc32(s3__crc32(0, b, cut), b + cut, 100 - cut),
                         s3__crc32(0, b, 100));
        assert_int_equal(s3__crc32c(s3__crc32c(0, b, cut), b + cut, 100 - cut),
                         s3__crc32c(0, b, 100));
        assert_true(s3__crc64nvme(s3__crc64nvme(0, b, cut), b + cut, 100 - cut) ==
                    s3__crc64nvme(0, b, 100));
    }
    /* random pieces, as a streamed upload feeds them, through the wire form too */
    enum s3_ck_algo algos[] = {S3_CK_CRC32, S3_CK_CRC32C, S3_CK_CRC64NVME, S3_CK_SHA1,
                               S3_CK_SHA256};
    for (int round = 0; round < 20; round++) {
        uint32_t c32 = 0, c32c = 0;
        uint64_t c64 = 0;
        struct s3_cksum ck[5];
        for (int a = 0; a < 5; a++)
            s3__ck_init(&ck[a], algos[a]);
        for (size_t off = 0; off < n;) {
            size_t k = rnd() % (round < 10 ? 17 : 70000);
            if (k > n - off)
                k = n - off;
            c32 = s3__crc32(c32, b + off, k);
            c32c = s3__crc32c(c32c, b + off, k);
            c64 = s3__crc64nvme(c64, b + off, k);
            for (int a = 0; a < 5; a++)
                s3__ck_update(&ck[a], b + off, k);
            off += k;
        }
        assert_int_equal(c32, w32);
        assert_int_equal(c32c, w32c);
        assert_true(c64 == w64);
        for (int a = 0; a < 5; a++) {
            char got[64], want[64];
            s3__ck_final(&ck[a], got);
            wire(algos[a], b, n, want);
            assert_string_equal(got, want);
        }
    }
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_values),
        cmocka_unit_test(test_random_against_reference),
        cmocka_unit_test(test_split_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
