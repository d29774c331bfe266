/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for common/srv_md5.c: the RFC 1321 test suite, random data in
 * random pieces against OpenSSL, every multi-buffer kernel this CPU can run
 * (AVX-512 16 lanes, AVX2 8 lanes, scalar) with every number of busy lanes
 * and lengths around the kernel's step, and threads hashing at once through
 * the shared hasher. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/evp.h>

#include "srv_md5.h"

static int default_lanes; /* what the CPU picked: tests that change it put it back */

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b[i] = (uint8_t)x;
    }
}

static void openssl_md5(const void *p, size_t n, uint8_t out[16])
{
    unsigned int l = 0;
    assert_int_equal(EVP_Digest(p, n, out, &l, EVP_md5(), NULL), 1);
    assert_int_equal(l, 16);
}

static void hex(const uint8_t d[16], char out[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void test_rfc1321_suite(void **state)
{
    (void)state;
    static const char *const in[] = {
        "",
        "a",
        "abc",
        "message digest",
        "abcdefghijklmnopqrstuvwxyz",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        "1234567890123456789012345678901234567890"
        "1234567890123456789012345678901234567890"};
    static const char *const want[] = {
        "d41d8cd98f00b204e9800998ecf8427e", "0cc175b9c0f1b6a831c399e269772661",
        "900150983cd24fb0d6963f7d28e17f72", "f96b697d7cb7938d525a2f31aaf161d0",
        "c3fcd3d76192e4007dfb496cca67e13b", "d174ab98d277d9f5a5611c2c9f419d9f",
        "57edf4a22be3c955ac49da2e2107b67a"};
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        uint8_t d[16];
        char h[33];
        srv_md5(in[i], strlen(in[i]), d);
        hex(d, h);
        assert_string_equal(h, want[i]);
    }
}

/* Random lengths, fed in random pieces (so the partial block and the shared
 * hasher's threshold are crossed every way), equal OpenSSL's digest. */
static void test_pieces_match_openssl(void **state)
{
    (void)state;
    size_t max = 300000;
    uint8_t *buf = malloc(max);
    uint32_t r = 12345;
    fill(buf, max, 7);
    for (int round = 0; round < 200; round++) {
        r = r * 1103515245u + 12345u;
        size_t len = round < 130 ? (size_t)round : r % max;
        struct srv_md5 m;
        srv_md5_init(&m);
        for (size_t off = 0; off < len;) {
            r = r * 1103515245u + 12345u;
            size_t k = (r >> 8) % (round % 3 == 0 ? 70 : 40000) + 1;
            if (k > len - off)
                k = len - off;
            srv_md5_update(&m, buf + off, k);
            off += k;
        }
        uint8_t got[16], want[16];
        srv_md5_final(&m, got);
        openssl_md5(buf, len, want);
        assert_memory_equal(got, want, 16);
    }
    free(buf);
}

/* Every kernel this CPU runs, with 1 .. lanes busy lanes (different data and
 * lengths in each) and block counts below, at and above the kernel's step. */
static void test_kernels(void **state)
{
    (void)state;
    static const int kinds[] = {16, 8, 1};
    static const size_t blocks[] = {1, 3, 255, 256, 257, 700};
    size_t nb = 700;
    uint8_t *data = malloc(16 * nb * 64);
    fill(data, 16 * nb * 64, 99);
    int ran = 0;
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        if (srv__md5_use_lanes(kinds[k]) != 0)
            continue;
        ran++;
        for (int lanes = 1; lanes <= 16; lanes++)
            for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++) {
                struct srv_md5 m[16];
                uint32_t *h[16];
                const uint8_t *p[16];
                for (int i = 0; i < lanes; i++) {
                    srv_md5_init(&m[i]);
                    h[i] = m[i].h;
                    p[i] = data + (size_t)i * nb * 64 + (size_t)i * 4; /* unaligned */
                    if ((size_t)i * nb * 64 + (size_t)i * 4 + blocks[b] * 64 > 16 * nb * 64)
                        p[i] = data;
                }
                srv__md5_kernel(h, p, lanes, blocks[b]);
                for (int i = 0; i < lanes; i++) {
                    uint8_t got[16], want[16];
                    m[i].nbytes = blocks[b] * 64;
                    srv_md5_final(&m[i], got);
                    openssl_md5(p[i], blocks[b] * 64, want);
                    assert_memory_equal(got, want, 16);
                }
            }
    }
    assert_true(ran >= 1); /* scalar always runs */
    assert_int_equal(srv__md5_use_lanes(default_lanes), 0);
    free(data);
}

struct hasher {
    const uint8_t *data;
    size_t len, piece;
    uint8_t got[16];
};

static void *hash_thread(void *arg)
{
    struct hasher *t = arg;
    struct srv_md5 m;
    srv_md5_init(&m);
    for (size_t off = 0; off < t->len; off += t->piece)
        srv_md5_update(&m, t->data + off, off + t->piece < t->len ? t->piece : t->len - off);
    srv_md5_final(&m, t->got);
    return NULL;
}

/* Threads hashing large pieces at once share the hasher: every digest is right
 * whichever lanes and steps they shared, with the default kernel and the
 * others this CPU runs. */
static void test_threads_share_the_hasher(void **state)
{
    (void)state;
    enum { NT = 12 };
    size_t len = 3u << 20;
    uint8_t *data = malloc(NT * len);
    fill(data, NT * len, 5);
    static const int kinds[] = {16, 8, 1};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        if (srv__md5_use_lanes(kinds[k]) != 0)
            continue;
        struct srv_md5_stats before, after;
        srv_md5_stats_get(&before);
        pthread_t th[NT];
        struct hasher t[NT];
        for (int i = 0; i < NT; i++) {
            t[i] = (struct hasher){data + (size_t)i * len,
                                   len - (size_t)i * 1000,
                                   (size_t)(64 << 10) + (size_t)i * 4096,
                                   {0}};
            assert_int_equal(pthread_create(&th[i], NULL, hash_thread, &t[i]), 0);
        }
        for (int i = 0; i < NT; i++) {
            uint8_t want[16];
            assert_int_equal(pthread_join(th[i], NULL), 0);
            openssl_md5(t[i].data, t[i].len, want);
            assert_memory_equal(t[i].got, want, 16);
        }
        srv_md5_stats_get(&after);
        if (kinds[k] == 1)
            assert_int_equal(after.steps, before.steps); /* no kernel: never shared */
    }
    assert_int_equal(srv__md5_use_lanes(default_lanes), 0);
    free(data);
}

int main(void)
{
    default_lanes = srv_md5_lanes();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc1321_suite),
        cmocka_unit_test(test_pieces_match_openssl),
        cmocka_unit_test(test_kernels),
        cmocka_unit_test(test_threads_share_the_hasher),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
