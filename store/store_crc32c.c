/* SPDX-License-Identifier: Apache-2.0
 * store_crc32c: CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum every extent carries. Uses the SSE4.2 crc32 instruction when the
 * CPU has it (checked once at run time), else a table-driven software loop
 * (slicing by 8). Both give the same results; crc32c("123456789") = 0xE3069283.
 * The instruction's latency is three times its issue interval, so the hardware
 * path runs three independent lanes at once and joins them with the "append a
 * lane of zero bytes" operator (a 4 x 256 table per lane size): about three
 * times the speed of one chain. Lanes of LANE_BIG bytes (three fill a 16 KiB
 * block but 64 bytes, the core's block size), then of LANE_SMALL for the rest.
 * Thread: any; the tables are built once under pthread_once. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "store.h"
#include "store_int.h"

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define STORE_CRC_HAVE_SSE42 1
#endif

#define LANE_BIG 5440  /* bytes per lane of the three-lane hardware loop (3 x 5440 = 16320) */
#define LANE_SMALL 128 /* ... for what is left */

static uint32_t crc_table[8][256];
static uint32_t lane_big[4][256];   /* register byte k = b, shifted over LANE_BIG zeros */
static uint32_t lane_small[4][256]; /* ... over LANE_SMALL zeros */
static int crc_use_hw;
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void zeros_op(uint32_t *op, size_t len);
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec);

static void crc_setup(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
    uint32_t op[32], ops[32];
    zeros_op(op, LANE_BIG);
    zeros_op(ops, LANE_SMALL);
    for (uint32_t k = 0; k < 4; k++) {
        for (uint32_t b = 0; b < 256; b++) {
            lane_big[k][b] = gf2_times(op, b << (8 * k));
            lane_small[k][b] = gf2_times(ops, b << (8 * k));
        }
    }
#ifdef STORE_CRC_HAVE_SSE42
    __builtin_cpu_init();
    crc_use_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
}

/* Register @p c after one more lane of zero bytes (@p t: that lane size's table). */
static inline uint32_t lane_shift(const uint32_t (*t)[256], uint32_t c)
{
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
}

/* Software path on the inverted state; slicing by 8 over aligned words. */
static uint32_t crc_sw(uint32_t c, const unsigned char *p, size_t len)
{
    while (len >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
            crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
            crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        len -= 8;
    }
    while (len--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return c;
}

#ifdef STORE_CRC_HAVE_SSE42
#if defined(__x86_64__)
/* Rounds of three lanes of @p lane bytes in flight while 3 x @p lane remain:
 * lane 0 continues @p c, lanes 1 and 2 start at 0; the register is linear, so
 * c(A B) = shift_B(c(A)) ^ c0(B). Advances *p and *len. */
__attribute__((target("sse4.2"))) static inline uint32_t
crc_hw_lanes(uint32_t c, const unsigned char **pp, size_t *lenp, size_t lane,
             const uint32_t (*t)[256])
{
    const unsigned char *p = *pp;
    size_t len = *lenp;
    while (len >= 3 * lane) {
        uint64_t c0 = c, c1 = 0, c2 = 0;
        for (size_t i = 0; i < lane; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + lane + i, 8);
            memcpy(&w2, p + 2 * lane + i, 8);
            c0 = _mm_crc32_u64(c0, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        c = lane_shift(t, lane_shift(t, (uint32_t)c0) ^ (uint32_t)c1) ^ (uint32_t)c2;
        p += 3 * lane;
        len -= 3 * lane;
    }
    *pp = p;
    *lenp = len;
    return c;
}
#endif

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const unsigned char *p,
                                                         size_t len)
{
    while (len && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8(c, *p++);
        len--;
    }
#if defined(__x86_64__)
    c = crc_hw_lanes(c, &p, &len, LANE_BIG, lane_big);
    c = crc_hw_lanes(c, &p, &len, LANE_SMALL, lane_small);
    uint64_t c64 = c;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = _mm_crc32_u64(c64, w);
        p += 8;
        len -= 8;
    }
    c = (uint32_t)c64;
#endif
    while (len >= 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        c = _mm_crc32_u32(c, w);
        p += 4;
        len -= 4;
    }
    while (len--)
        c = _mm_crc32_u8(c, *p++);
    return c;
}
#endif

/* For the unit tests: force the software path (0) or the default (1). */
int store__crc32c_hw(int enable)
{
    pthread_once(&crc_once, crc_setup);
#ifdef STORE_CRC_HAVE_SSE42
    if (!enable)
        crc_use_hw = 0;
    else
        crc_use_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
    (void)enable;
#endif
    return crc_use_hw;
}

uint32_t store_crc32c(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&crc_once, crc_setup);
    uint32_t c = ~crc;
    if (len == 0)
        return crc;
#ifdef STORE_CRC_HAVE_SSE42
    if (crc_use_hw)
        return ~crc_hw(c, buf, len);
#endif
    return ~crc_sw(c, buf, len);
}

/* ---- combining: crc(A || B) from crc(A), crc(B) and len(B) ----
 * The CRC register is linear over GF(2): appending n zero bytes is a 32x32
 * matrix, built by repeated squaring of the one-zero-bit operator (as zlib's
 * crc32_combine). The 16 KiB operator (block CRCs of the core) is kept. */

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    while (vec) {
        if (vec & 1)
            sum ^= *mat;
        vec >>= 1;
        mat++;
    }
    return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat)
{
    for (int n = 0; n < 32; n++)
        sq[n] = gf2_times(mat, mat[n]);
}

/* The operator appending @p len zero bytes into @p op. */
static void zeros_op(uint32_t *op, size_t len)
{
    uint32_t odd[32], even[32], acc[32], tmp[32];
    odd[0] = 0x82F63B78u; /* one zero bit */
    for (int n = 1; n < 32; n++)
        odd[n] = 1u << (n - 1);
    gf2_square(even, odd); /* 2 bits */
    gf2_square(odd, even); /* 4 bits */
    for (int n = 0; n < 32; n++)
        acc[n] = 1u << n; /* identity */
    int have_odd = 1;
    while (len) {
        /* odd holds the operator of 4 * 2^k bits = 2^k bytes / 2 ... advance one square */
        if (have_odd) {
            gf2_square(even, odd);
            if (len & 1) {
                for (int n = 0; n < 32; n++)
                    tmp[n] = gf2_times(even, acc[n]);
                memcpy(acc, tmp, sizeof(acc));
            }
        } else {
            gf2_square(odd, even);
            if (len & 1) {
                for (int n = 0; n < 32; n++)
                    tmp[n] = gf2_times(odd, acc[n]);
                memcpy(acc, tmp, sizeof(acc));
            }
        }
        have_odd = !have_odd;
        len >>= 1;
    }
    memcpy(op, acc, sizeof(acc));
}

static uint32_t op16k[32];
static pthread_once_t op16k_once = PTHREAD_ONCE_INIT;

static void op16k_setup(void)
{
    zeros_op(op16k, 16384);
}

/* Other lengths (the last, partial block of an extent: once per extent written or
 * recalled): appending n zero bytes is multiplying the register by x^(8n) modulo the
 * polynomial, x^(8n) being a product of the kept powers x^(2^k) (zlib's multmodp and
 * x2nmodp): 0.4 µs a call here, against 34 µs squaring the matrix operator up from
 * one bit at each call (~2 % of the daemon's CPU recalling 150 KB files, issue 13). */
static uint32_t x2n[32]; /* x^(2^k) mod P, reflected */
static pthread_once_t x2n_once = PTHREAD_ONCE_INIT;

/* a * b mod P (reflected: x^0 is bit 31) */
static uint32_t multmodp(uint32_t a, uint32_t b)
{
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ 0x82F63B78u : b >> 1;
    }
    return p;
}

static void x2n_setup(void)
{
    uint32_t p = 1u << 30; /* x^1 */
    x2n[0] = p;
    for (int n = 1; n < 32; n++)
        x2n[n] = p = multmodp(p, p);
}

uint32_t store_crc32c_combine(uint32_t crc1, uint32_t crc2, size_t len2)
{
    if (len2 == 0)
        return crc1;
    if (len2 == 16384) {
        pthread_once(&op16k_once, op16k_setup);
        return gf2_times(op16k, crc1) ^ crc2;
    }
    pthread_once(&x2n_once, x2n_setup);
    uint32_t p = 1u << 31; /* x^0 */
    unsigned k = 3;        /* x^(8 len2): bit k of 8 * len2 */
    for (uint64_t n = len2; n; n >>= 1, k++)
        if (n & 1)
            p = multmodp(x2n[k & 31], p);
    return multmodp(p, crc1) ^ crc2;
}
