/* SPDX-License-Identifier: Apache-2.0
 * srv_md5: MD5 with a multi-buffer kernel shared by concurrent callers (see
 * srv_md5.h for the contract).
 *
 * The 64 steps of the MD5 compression function are listed once (MD5_STEPS)
 * and expanded three times: scalar, AVX2 (8 lanes of 32 bits) and AVX-512
 * (16 lanes, with VPTERNLOGD for the boolean functions and VPROLD for the
 * rotations). The vector kernels read the message words of their lanes with
 * gathers from each lane's own pointer, so the streams need not be aligned
 * or near each other. The kernel is picked once from the CPU (a build for
 * x86-64 without these extensions, or another CPU, hashes scalar).
 *
 * The shared hasher (struct mb): callers that want at least SRV_MD5_MB_MIN
 * bytes hashed put a job in a queue; while no caller is hashing, the one that
 * comes takes the role (busy). The hasher moves queued jobs into free lanes,
 * runs one step of at most MB_STEP blocks on every busy lane (the scalar
 * code when only one is busy), writes back each lane's state and position,
 * retires the jobs that are done (waking their callers) and goes on until
 * its own job is done; it then gives up the role and wakes the callers, one
 * of which takes it. The lock is not held while a step runs; jobs and lanes
 * are only touched by the hasher (and the queue under the lock). */
#include "srv_md5.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MD5_X86 1
#endif

#define MB_LANES_MAX 16
#define MB_STEP 256u /* blocks per lane per step (16 KiB): new jobs join between steps */

static const uint32_t md5_init_h[4] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u};

/* The 64 steps: boolean function, the four state words in the order the step
 * sees them, message word, rotation and sine constant (RFC 1321 3.4). */
#define MD5_STEPS(X)                                                                               \
    X(F, a, b, c, d, 0, 7, 0xd76aa478u)                                                            \
    X(F, d, a, b, c, 1, 12, 0xe8c7b756u)                                                           \
    X(F, c, d, a, b, 2, 17, 0x242070dbu)                                                           \
    X(F, b, c, d, a, 3, 22, 0xc1bdceeeu)                                                           \
    X(F, a, b, c, d, 4, 7, 0xf57c0fafu)                                                            \
    X(F, d, a, b, c, 5, 12, 0x4787c62au)                                                           \
    X(F, c, d, a, b, 6, 17, 0xa8304613u)                                                           \
    X(F, b, c, d, a, 7, 22, 0xfd469501u)                                                           \
    X(F, a, b, c, d, 8, 7, 0x698098d8u)                                                            \
    X(F, d, a, b, c, 9, 12, 0x8b44f7afu)                                                           \
    X(F, c, d, a, b, 10, 17, 0xffff5bb1u)                                                          \
    X(F, b, c, d, a, 11, 22, 0x895cd7beu)                                                          \
    X(F, a, b, c, d, 12, 7, 0x6b901122u)                                                           \
    X(F, d, a, b, c, 13, 12, 0xfd987193u)                                                          \
    X(F, c, d, a, b, 14, 17, 0xa679438eu)                                                          \
    X(F, b, c, d, a, 15, 22, 0x49b40821u)                                                          \
    X(G, a, b, c, d, 1, 5, 0xf61e2562u)                                                            \
    X(G, d, a, b, c, 6, 9, 0xc040b340u)                                                            \
    X(G, c, d, a, b, 11, 14, 0x265e5a51u)                                                          \
    X(G, b, c, d, a, 0, 20, 0xe9b6c7aau)                                                           \
    X(G, a, b, c, d, 5, 5, 0xd62f105du)                                                            \
    X(G, d, a, b, c, 10, 9, 0x02441453u)                                                           \
    X(G, c, d, a, b, 15, 14, 0xd8a1e681u)                                                          \
    X(G, b, c, d, a, 4, 20, 0xe7d3fbc8u)                                                           \
    X(G, a, b, c, d, 9, 5, 0x21e1cde6u)                                                            \
    X(G, d, a, b, c, 14, 9, 0xc33707d6u)                                                           \
    X(G, c, d, a, b, 3, 14, 0xf4d50d87u)                                                           \
    X(G, b, c, d, a, 8, 20, 0x455a14edu)                                                           \
    X(G, a, b, c, d, 13, 5, 0xa9e3e905u)                                                           \
    X(G, d, a, b, c, 2, 9, 0xfcefa3f8u)                                                            \
    X(G, c, d, a, b, 7, 14, 0x676f02d9u)                                                           \
    X(G, b, c, d, a, 12, 20, 0x8d2a4c8au)                                                          \
    X(H, a, b, c, d, 5, 4, 0xfffa3942u)                                                            \
    X(H, d, a, b, c, 8, 11, 0x8771f681u)                                                           \
    X(H, c, d, a, b, 11, 16, 0x6d9d6122u)                                                          \
    X(H, b, c, d, a, 14, 23, 0xfde5380cu)                                                          \
    X(H, a, b, c, d, 1, 4, 0xa4beea44u)                                                            \
    X(H, d, a, b, c, 4, 11, 0x4bdecfa9u)                                                           \
    X(H, c, d, a, b, 7, 16, 0xf6bb4b60u)                                                           \
    X(H, b, c, d, a, 10, 23, 0xbebfbc70u)                                                          \
    X(H, a, b, c, d, 13, 4, 0x289b7ec6u)                                                           \
    X(H, d, a, b, c, 0, 11, 0xeaa127fau)                                                           \
    X(H, c, d, a, b, 3, 16, 0xd4ef3085u)                                                           \
    X(H, b, c, d, a, 6, 23, 0x04881d05u)                                                           \
    X(H, a, b, c, d, 9, 4, 0xd9d4d039u)                                                            \
    X(H, d, a, b, c, 12, 11, 0xe6db99e5u)                                                          \
    X(H, c, d, a, b, 15, 16, 0x1fa27cf8u)                                                          \
    X(H, b, c, d, a, 2, 23, 0xc4ac5665u)                                                           \
    X(I, a, b, c, d, 0, 6, 0xf4292244u)                                                            \
    X(I, d, a, b, c, 7, 10, 0x432aff97u)                                                           \
    X(I, c, d, a, b, 14, 15, 0xab9423a7u)                                                          \
    X(I, b, c, d, a, 5, 21, 0xfc93a039u)                                                           \
    X(I, a, b, c, d, 12, 6, 0x655b59c3u)                                                           \
    X(I, d, a, b, c, 3, 10, 0x8f0ccc92u)                                                           \
    X(I, c, d, a, b, 10, 15, 0xffeff47du)                                                          \
    X(I, b, c, d, a, 1, 21, 0x85845dd1u)                                                           \
    X(I, a, b, c, d, 8, 6, 0x6fa87e4fu)                                                            \
    X(I, d, a, b, c, 15, 10, 0xfe2ce6e0u)                                                          \
    X(I, c, d, a, b, 6, 15, 0xa3014314u)                                                           \
    X(I, b, c, d, a, 13, 21, 0x4e0811a1u)                                                          \
    X(I, a, b, c, d, 4, 6, 0xf7537e82u)                                                            \
    X(I, d, a, b, c, 11, 10, 0xbd3af235u)                                                          \
    X(I, c, d, a, b, 2, 15, 0x2ad7d2bbu)                                                           \
    X(I, b, c, d, a, 9, 21, 0xeb86d391u)

/* ---- scalar ---- */

#define S_F(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define S_G(x, y, z) ((y) ^ ((z) & ((x) ^ (y))))
#define S_H(x, y, z) ((x) ^ (y) ^ (z))
#define S_I(x, y, z) ((y) ^ ((x) | ~(z)))
#define S_STEP(f, a, b, c, d, k, s, t)                                                             \
    a += S_##f(b, c, d) + w[k] + (t);                                                              \
    a = ((a << s) | (a >> (32 - s))) + b;

static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void md5_blocks(uint32_t h[4], const uint8_t *p, size_t n)
{
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    for (; n > 0; n--, p += 64) {
        uint32_t w[16];
        for (int i = 0; i < 16; i++)
            w[i] = le32(p + 4 * i);
        uint32_t a0 = a, b0 = b, c0 = c, d0 = d;
        MD5_STEPS(S_STEP)
        a += a0;
        b += b0;
        c += c0;
        d += d0;
    }
    h[0] = a;
    h[1] = b;
    h[2] = c;
    h[3] = d;
}

/* ---- multi-buffer kernels ---- */

typedef void (*md5_kernel_fn)(uint32_t *const h[], const uint8_t *const p[], size_t n);

#ifdef MD5_X86
/* Lane i's state (four words of h[i]) into four vectors of one word each. */
#define LOAD_STATE(T, L, set)                                                                      \
    uint32_t st[4][L];                                                                             \
    for (int i = 0; i < (L); i++)                                                                  \
        for (int j = 0; j < 4; j++)                                                                \
            st[j][i] = h[i][j];                                                                    \
    T a = set(st[0]), b = set(st[1]), c = set(st[2]), d = set(st[3]);
#define STORE_STATE(L, store)                                                                      \
    store(st[0], a);                                                                               \
    store(st[1], b);                                                                               \
    store(st[2], c);                                                                               \
    store(st[3], d);                                                                               \
    for (int i = 0; i < (L); i++)                                                                  \
        for (int j = 0; j < 4; j++)                                                                \
            h[i][j] = st[j][i];

/* Offsets of every lane's pointer from lane 0's, as gather indexes (lane 0's
 * pointer is the base: every other lane is reached from it). */
#define LANE_OFFSETS(L)                                                                            \
    int64_t off[L];                                                                                \
    for (int i = 0; i < (L); i++)                                                                  \
        off[i] = (int64_t)((uintptr_t)p[i] - (uintptr_t)p[0]);                                     \
    const uint8_t *base = p[0];

#define V8_F(x, y, z) _mm256_xor_si256(z, _mm256_and_si256(x, _mm256_xor_si256(y, z)))
#define V8_G(x, y, z) _mm256_xor_si256(y, _mm256_and_si256(z, _mm256_xor_si256(x, y)))
#define V8_H(x, y, z) _mm256_xor_si256(_mm256_xor_si256(x, y), z)
#define V8_I(x, y, z) _mm256_xor_si256(y, _mm256_or_si256(x, _mm256_xor_si256(z, ones)))
#define V8_STEP(f, a, b, c, d, k, s, t)                                                            \
    a = _mm256_add_epi32(                                                                          \
        a,                                                                                         \
        _mm256_add_epi32(V8_##f(b, c, d), _mm256_add_epi32(w[k], _mm256_set1_epi32((int)(t)))));   \
    a = _mm256_add_epi32(_mm256_or_si256(_mm256_slli_epi32(a, s), _mm256_srli_epi32(a, 32 - s)), b);

#define LOADU256(v) _mm256_loadu_si256((const __m256i *)(v))
#define STOREU256(v, x) _mm256_storeu_si256((__m256i *)(v), x)

__attribute__((target("avx2"))) static void md5_x8(uint32_t *const h[], const uint8_t *const p[],
                                                   size_t n)
{
    LOAD_STATE(__m256i, 8, LOADU256)
    LANE_OFFSETS(8)
    const __m256i ones = _mm256_set1_epi32(-1);
    __m256i ilo = _mm256_loadu_si256((const __m256i *)&off[0]);
    __m256i ihi = _mm256_loadu_si256((const __m256i *)&off[4]);
    for (size_t blk = 0; blk < n; blk++, base += 64) {
        __m256i w[16];
        for (int k = 0; k < 16; k++) {
            const int *q = (const int *)(const void *)(base + 4 * k);
            __m128i lo = _mm256_i64gather_epi32(q, ilo, 1);
            __m128i hi = _mm256_i64gather_epi32(q, ihi, 1);
            w[k] = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
        }
        __m256i a0 = a, b0 = b, c0 = c, d0 = d;
        MD5_STEPS(V8_STEP)
        a = _mm256_add_epi32(a, a0);
        b = _mm256_add_epi32(b, b0);
        c = _mm256_add_epi32(c, c0);
        d = _mm256_add_epi32(d, d0);
    }
    STORE_STATE(8, STOREU256)
}

/* VPTERNLOGD truth tables of F, G, H, I (operands b, c, d). */
#define V16_F(x, y, z) _mm512_ternarylogic_epi32(x, y, z, 0xca)
#define V16_G(x, y, z) _mm512_ternarylogic_epi32(x, y, z, 0xe4)
#define V16_H(x, y, z) _mm512_ternarylogic_epi32(x, y, z, 0x96)
#define V16_I(x, y, z) _mm512_ternarylogic_epi32(x, y, z, 0x39)
#define V16_STEP(f, a, b, c, d, k, s, t)                                                           \
    a = _mm512_add_epi32(                                                                          \
        a,                                                                                         \
        _mm512_add_epi32(V16_##f(b, c, d), _mm512_add_epi32(w[k], _mm512_set1_epi32((int)(t)))));  \
    a = _mm512_add_epi32(_mm512_rol_epi32(a, s), b);

#define LOADU512(v) _mm512_loadu_si512((const void *)(v))
#define STOREU512(v, x) _mm512_storeu_si512((void *)(v), x)

/* The message words of 16 lanes: lane i's block is row i of a 16 x 16 matrix
 * of 32-bit words, and w[k] must be its column k. Transposed in four rounds
 * of shuffles (64 instructions), much cheaper than 32 gathers of 8. */
__attribute__((target("avx512f"))) static void load_x16(__m512i w[16], const uint8_t *const q[16])
{
    __m512i r[16], t[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_si512((const void *)q[i]);
    for (int i = 0; i < 16; i += 2) { /* 128-bit lane k: r_i[4k], r_i+1[4k], r_i[4k+1], ... */
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* r[i + m], lane k: word 4k+m of rows i .. i+3 */
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int m = 0; m < 4; m++) { /* gather lane k of rows 0-3, 4-7, 8-11, 12-15 */
        __m512i ab_lo = _mm512_shuffle_i32x4(r[m], r[4 + m], 0x44);
        __m512i ab_hi = _mm512_shuffle_i32x4(r[m], r[4 + m], 0xee);
        __m512i cd_lo = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0x44);
        __m512i cd_hi = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0xee);
        w[m] = _mm512_shuffle_i32x4(ab_lo, cd_lo, 0x88);
        w[4 + m] = _mm512_shuffle_i32x4(ab_lo, cd_lo, 0xdd);
        w[8 + m] = _mm512_shuffle_i32x4(ab_hi, cd_hi, 0x88);
        w[12 + m] = _mm512_shuffle_i32x4(ab_hi, cd_hi, 0xdd);
    }
}

__attribute__((target("avx512f"))) static void md5_x16(uint32_t *const h[],
                                                       const uint8_t *const p[], size_t n)
{
    LOAD_STATE(__m512i, 16, LOADU512)
    const uint8_t *q[16];
    for (int i = 0; i < 16; i++)
        q[i] = p[i];
    for (size_t blk = 0; blk < n; blk++) {
        __m512i w[16];
        load_x16(w, q);
        for (int i = 0; i < 16; i++)
            q[i] += 64;
        __m512i a0 = a, b0 = b, c0 = c, d0 = d;
        MD5_STEPS(V16_STEP)
        a = _mm512_add_epi32(a, a0);
        b = _mm512_add_epi32(b, b0);
        c = _mm512_add_epi32(c, c0);
        d = _mm512_add_epi32(d, d0);
    }
    STORE_STATE(16, STOREU512)
}
#endif /* MD5_X86 */

/* ---- the shared hasher ---- */

struct mb_job {
    uint32_t *h;
    const uint8_t *p;
    size_t left; /* blocks */
    struct mb_job *next;
    bool done;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct mb_job *head, *tail;        /* waiting for a lane */
    struct mb_job *lane[MB_LANES_MAX]; /* NULL: free */
    bool busy;                         /* a caller is the hasher */
    int lanes;                         /* 16, 8, or 1 (no kernel) */
    md5_kernel_fn kernel;
    uint64_t steps, lane_blocks, solo_blocks;
} mb = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static pthread_once_t mb_once = PTHREAD_ONCE_INIT;
static uint32_t idle_h[4];           /* state of a free lane (discarded) */
static uint8_t idle_p[MB_STEP * 64]; /* message of a free lane */

static void mb_pick(void)
{
    mb.lanes = 1;
    mb.kernel = NULL;
#ifdef MD5_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        mb.lanes = 16;
        mb.kernel = md5_x16;
    } else if (__builtin_cpu_supports("avx2")) {
        mb.lanes = 8;
        mb.kernel = md5_x8;
    }
#endif
}

int srv_md5_lanes(void)
{
    pthread_once(&mb_once, mb_pick);
    return mb.lanes;
}

int srv__md5_use_lanes(int lanes)
{
    pthread_once(&mb_once, mb_pick);
    if (lanes == 1) {
        mb.lanes = 1;
        mb.kernel = NULL;
        return 0;
    }
#ifdef MD5_X86
    if (lanes == 16 && __builtin_cpu_supports("avx512f")) {
        mb.lanes = 16;
        mb.kernel = md5_x16;
        return 0;
    }
    if (lanes == 8 && __builtin_cpu_supports("avx2")) {
        mb.lanes = 8;
        mb.kernel = md5_x8;
        return 0;
    }
#endif
    return -1;
}

void srv__md5_kernel(uint32_t *const h[], const uint8_t *const p[], int lanes, size_t n)
{
    pthread_once(&mb_once, mb_pick);
    for (int g = 0; g < lanes; g += mb.lanes) { /* a group of at most mb.lanes */
        uint32_t *hh[MB_LANES_MAX];
        const uint8_t *pp[MB_LANES_MAX];
        int ng = lanes - g < mb.lanes ? lanes - g : mb.lanes;
        for (int i = 0; i < mb.lanes; i++) {
            hh[i] = i < ng ? h[g + i] : idle_h;
            pp[i] = i < ng ? p[g + i] : idle_p;
        }
        for (size_t left = n; left > 0;) { /* in steps: an idle lane's message is MB_STEP long */
            size_t k = left < MB_STEP ? left : MB_STEP;
            if (mb.kernel)
                mb.kernel(hh, pp, k);
            else
                md5_blocks(hh[0], pp[0], k);
            for (int i = 0; i < ng; i++)
                pp[i] += k * 64;
            left -= k;
        }
    }
}

/* One step of the hasher on every busy lane (lock not held). */
static void mb_step(void)
{
    uint32_t *h[MB_LANES_MAX];
    const uint8_t *p[MB_LANES_MAX];
    size_t n = MB_STEP;
    int busy = 0, only = -1;
    for (int i = 0; i < mb.lanes; i++) {
        struct mb_job *j = mb.lane[i];
        if (!j)
            continue;
        busy++;
        only = i;
        if (j->left < n)
            n = j->left;
    }
    if (busy == 0)
        return;
    if (busy == 1) {
        struct mb_job *j = mb.lane[only];
        md5_blocks(j->h, j->p, n);
        __atomic_add_fetch(&mb.solo_blocks, n, __ATOMIC_RELAXED);
    } else {
        for (int i = 0; i < mb.lanes; i++) {
            struct mb_job *j = mb.lane[i];
            h[i] = j ? j->h : idle_h;
            p[i] = j ? j->p : idle_p;
        }
        mb.kernel(h, p, n);
        __atomic_add_fetch(&mb.steps, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&mb.lane_blocks, (uint64_t)n * (uint64_t)busy, __ATOMIC_RELAXED);
    }
    for (int i = 0; i < mb.lanes; i++) {
        struct mb_job *j = mb.lane[i];
        if (j) {
            j->p += n * 64;
            j->left -= n;
        }
    }
}

/* Hash @p n blocks at @p p into @p h, sharing the kernel with whoever else is hashing. */
static void mb_hash(uint32_t h[4], const uint8_t *p, size_t n)
{
    struct mb_job job = {h, p, n, NULL, false};
    pthread_mutex_lock(&mb.mu);
    if (mb.tail)
        mb.tail->next = &job;
    else
        mb.head = &job;
    mb.tail = &job;
    while (!job.done) {
        if (mb.busy) {
            pthread_cond_wait(&mb.cv, &mb.mu);
            continue;
        }
        mb.busy = true; /* the hasher, until this job is done */
        while (!job.done) {
            for (int i = 0; i < mb.lanes && mb.head; i++)
                if (!mb.lane[i]) {
                    mb.lane[i] = mb.head;
                    mb.head = mb.head->next;
                    if (!mb.head)
                        mb.tail = NULL;
                }
            pthread_mutex_unlock(&mb.mu);
            mb_step();
            pthread_mutex_lock(&mb.mu);
            bool retired = false;
            for (int i = 0; i < mb.lanes; i++)
                if (mb.lane[i] && mb.lane[i]->left == 0) {
                    mb.lane[i]->done = true;
                    mb.lane[i] = NULL;
                    retired = true;
                }
            if (job.done)
                mb.busy = false; /* one of the others, woken below, hashes on */
            if (retired)
                pthread_cond_broadcast(&mb.cv);
        }
    }
    pthread_mutex_unlock(&mb.mu);
}

/* ---- the running hash ---- */

void srv_md5_init(struct srv_md5 *m)
{
    memcpy(m->h, md5_init_h, sizeof(m->h));
    m->nbytes = 0;
    m->nbuf = 0;
}

void srv_md5_update(struct srv_md5 *m, const void *data, size_t len)
{
    const uint8_t *p = data;
    m->nbytes += len;
    if (m->nbuf) {
        size_t k = 64 - m->nbuf < len ? 64 - m->nbuf : len;
        memcpy(m->buf + m->nbuf, p, k);
        m->nbuf += (uint32_t)k;
        p += k;
        len -= k;
        if (m->nbuf < 64)
            return;
        md5_blocks(m->h, m->buf, 1);
        m->nbuf = 0;
    }
    size_t n = len / 64;
    if (n > 0) {
        if (len >= SRV_MD5_MB_MIN && srv_md5_lanes() > 1)
            mb_hash(m->h, p, n);
        else
            md5_blocks(m->h, p, n);
        p += n * 64;
        len -= n * 64;
    }
    memcpy(m->buf, p, len);
    m->nbuf = (uint32_t)len;
}

void srv_md5_final(struct srv_md5 *m, uint8_t out[SRV_MD5_LEN])
{
    uint64_t bits = m->nbytes * 8;
    uint8_t pad[72] = {0x80};
    size_t padlen = (m->nbuf < 56 ? 56 : 120) - m->nbuf;
    for (int i = 0; i < 8; i++)
        pad[padlen + (size_t)i] = (uint8_t)(bits >> (8 * i));
    uint64_t keep = m->nbytes;
    srv_md5_update(m, pad, padlen + 8);
    m->nbytes = keep;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            out[4 * i + j] = (uint8_t)(m->h[i] >> (8 * j));
}

void srv_md5(const void *data, size_t len, uint8_t out[SRV_MD5_LEN])
{
    struct srv_md5 m;
    srv_md5_init(&m);
    srv_md5_update(&m, data, len);
    srv_md5_final(&m, out);
}

void srv_md5_stats_get(struct srv_md5_stats *out)
{
    out->steps = __atomic_load_n(&mb.steps, __ATOMIC_RELAXED);
    out->lane_blocks = __atomic_load_n(&mb.lane_blocks, __ATOMIC_RELAXED);
    out->solo_blocks = __atomic_load_n(&mb.solo_blocks, __ATOMIC_RELAXED);
}
