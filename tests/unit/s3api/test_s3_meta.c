/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for s3api/s3_meta.c (metadata blob round trip, corrupt blobs)
 * and s3api/s3_cksum.c (CRC32/CRC32C check values, base64 wire form). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "s3_internal.h"

static void test_roundtrip(void **state)
{
    (void)state;
    struct s3_arena a;
    s3__arena_init(&a);
    struct s3_meta m = {0}, d;
    s3__meta_add(&m, &a, S3_M_HDR, "content-type", 12, "text/plain", 10);
    s3__meta_add(&m, &a, S3_M_USER, "color", 5, "blue", 4);
    s3__meta_add(&m, &a, S3_M_TAG, "k", 1, "", 0);
    s3__meta_add(&m, &a, S3_M_TAG, "k2", 2, "v2", 2);
    void *blob;
    size_t len;
    assert_int_equal(s3__meta_encode(&m, &blob, &len), 0);
    assert_int_equal(s3__meta_decode(&d, &a, blob, len), 0);
    assert_int_equal(d.n, 4);
    assert_string_equal(s3__meta_find(&d, S3_M_HDR, "content-type")->val, "text/plain");
    assert_string_equal(s3__meta_find(&d, S3_M_USER, "color")->val, "blue");
    assert_int_equal(s3__meta_count(&d, S3_M_TAG), 2);
    s3__meta_drop(&d, S3_M_TAG);
    assert_int_equal(s3__meta_count(&d, S3_M_TAG), 0);
    assert_int_equal(d.n, 2);
    /* every truncation is refused, never read past the end */
    for (size_t i = 1; i < len; i++) {
        struct s3_meta t;
        int rc = s3__meta_decode(&t, &a, blob, i);
        assert_true(rc == -EINVAL || (rc == 0 && i >= 4));
    }
    assert_int_equal(s3__meta_decode(&d, &a, "XXXX", 4), -EINVAL);
    assert_int_equal(s3__meta_decode(&d, &a, NULL, 0), 0);
    assert_int_equal(d.n, 0);
    free(blob);
    s3__arena_fini(&a);
}

static void test_crc(void **state)
{
    (void)state;
    assert_int_equal(s3__crc32(0, "123456789", 9), 0xCBF43926u);
    assert_int_equal(s3__crc32c(0, "123456789", 9), 0xE3069283u);
    assert_true(s3__crc64nvme(0, "123456789", 9) == 0xAE8B14860A799888ull);
    assert_true(s3__crc64nvme(s3__crc64nvme(0, "1234", 4), "56789", 5) == 0xAE8B14860A799888ull);
    /* streaming equals one shot */
    uint32_t c = s3__crc32c(0, "1234", 4);
    assert_int_equal(s3__crc32c(c, "56789", 5), 0xE3069283u);
    struct s3_cksum ck;
    char out[64];
    s3__ck_init(&ck, S3_CK_CRC32);
    s3__ck_update(&ck, "123456789", 9);
    s3__ck_final(&ck, out);
    assert_string_equal(out, "y/Q5Jg==");
    s3__ck_init(&ck, S3_CK_SHA256);
    s3__ck_final(&ck, out);
    assert_string_equal(out, "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
    s3__ck_init(&ck, S3_CK_SHA1);
    s3__ck_update(&ck, "abc", 3);
    s3__ck_final(&ck, out);
    assert_string_equal(out, "qZk+NkcGgWq6PiVxeFDCbJzQ2J0=");
    assert_int_equal(s3__ck_from_header("X-Amz-Checksum-CRC32C"), S3_CK_CRC32C);
    assert_int_equal(s3__ck_from_name("sha1"), S3_CK_SHA1);
    assert_int_equal(s3__ck_from_name("md5"), S3_CK_NONE);
    assert_int_equal(s3__ck_from_header("x-amz-checksum-crc64nvme"), S3_CK_CRC64NVME);
    s3__ck_init(&ck, S3_CK_CRC64NVME);
    s3__ck_update(&ck, "123456789", 9);
    s3__ck_final(&ck, out);
    assert_string_equal(out, "rosUhgp5mIg=");
    assert_string_equal(s3__ck_header(S3_CK_SHA256), "x-amz-checksum-sha256");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_crc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
