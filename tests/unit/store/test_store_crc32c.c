/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for store/store_crc32c.c: standard vectors (RFC 3720
 * B.4), incremental use, and hardware/software paths agreeing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "store.h"
#include "store_int.h"

static void check_vectors(void)
{
    unsigned char buf[32];
    assert_int_equal(store_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(store_crc32c(0, "", 0), 0);
    memset(buf, 0, sizeof(buf));
    assert_int_equal(store_crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, sizeof(buf));
    assert_int_equal(store_crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)i;
    assert_int_equal(store_crc32c(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)(31 - i);
    assert_int_equal(store_crc32c(0, buf, 32), 0x113FDB5Cu);
}

static void test_vectors_default(void **state)
{
    (void)state;
    store__crc32c_hw(1);
    check_vectors();
}

static void test_vectors_software(void **state)
{
    (void)state;
    store__crc32c_hw(0);
    check_vectors();
    store__crc32c_hw(1);
}

static void test_incremental(void **state)
{
    (void)state;
    const char *s = "The quick brown fox jumps over the lazy dog";
    size_t n = strlen(s);
    uint32_t whole = store_crc32c(0, s, n);
    for (size_t cut = 0; cut <= n; cut++) {
        uint32_t c = store_crc32c(0, s, cut);
        c = store_crc32c(c, s + cut, n - cut);
        assert_int_equal(c, whole);
    }
}

static void test_hw_matches_sw(void **state)
{
    (void)state;
    size_t max = 9000;
    unsigned char *buf = malloc(max + 16);
    assert_non_null(buf);
    uint32_t x = 12345;
    for (size_t i = 0; i < max + 16; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (unsigned char)(x >> 16);
    }
    for (size_t len = 0; len < max; len += (len < 64 ? 1 : 997)) {
        for (size_t mis = 0; mis < 8; mis++) {
            store__crc32c_hw(0);
            uint32_t sw = store_crc32c(0, buf + mis, len);
            store__crc32c_hw(1);
            uint32_t hw = store_crc32c(0, buf + mis, len);
            assert_int_equal(sw, hw);
        }
    }
    free(buf);
}

/* The three-lane hardware loops (rounds of 3 x 5440 and 3 x 128 bytes) around their edges and on large
 * buffers, continuing a non-zero CRC, equals the software path. */
static void test_hw_lanes(void **state)
{
    (void)state;
    size_t max = (1u << 20) + 64;
    unsigned char *buf = malloc(max);
    assert_non_null(buf);
    uint32_t x = 777;
    for (size_t i = 0; i < max; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (unsigned char)(x >> 16);
    }
    static const size_t lens[] = {383,   384,   385,   3 * 5440 - 1, 3 * 5440, 3 * 5440 + 1,
                                  16384, 16384 + 385, 65536 + 3,    1u << 20};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        for (size_t mis = 0; mis < 8; mis += 3) {
            store__crc32c_hw(0);
            uint32_t sw = store_crc32c(0xdeadbeef, buf + mis, lens[i]);
            store__crc32c_hw(1);
            uint32_t hw = store_crc32c(0xdeadbeef, buf + mis, lens[i]);
            assert_int_equal(sw, hw);
        }
    }
    free(buf);
}

/* crc(A || B) from crc(A), crc(B) and len(B), for the 16 KiB fast path and
 * other lengths (0, 1, odd, large). */
static void test_combine(void **state)
{
    (void)state;
    static unsigned char buf[3 * 16384 + 777];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)(i * 2654435761u >> 13);
    const size_t splits[][2] = {{0, 5},     {5, 0},         {1, 1},         {100, 16384},
                                {16384, 16384}, {3, 40000}, {16384, 777},   {49152, 777},
                                {777, 3 * 16384}};
    for (size_t k = 0; k < sizeof(splits) / sizeof(splits[0]); k++) {
        size_t la = splits[k][0], lb = splits[k][1];
        uint32_t whole = store_crc32c(0, buf, la + lb);
        uint32_t a = store_crc32c(0, buf, la), b = store_crc32c(0, buf + la, lb);
        assert_int_equal(store_crc32c_combine(a, b, lb), whole);
    }
    /* every tail length of a block (the last block of an extent), against the CRC of
     * the whole, from several seeds */
    for (size_t lb = 1; lb <= 16384; lb += (lb < 64 ? 1 : 97)) {
        size_t la = (lb * 31) % 20000;
        uint32_t whole = store_crc32c(0, buf, la + lb);
        uint32_t a = store_crc32c(0, buf, la), b = store_crc32c(0, buf + la, lb);
        assert_int_equal(store_crc32c_combine(a, b, lb), whole);
        assert_int_equal(store_crc32c_combine(whole, b, lb),
                         store_crc32c(store_crc32c(0, buf, la + lb), buf + la, lb));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors_default),
        cmocka_unit_test(test_vectors_software),
        cmocka_unit_test(test_incremental),
        cmocka_unit_test(test_hw_matches_sw),
        cmocka_unit_test(test_hw_lanes),
        cmocka_unit_test(test_combine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
