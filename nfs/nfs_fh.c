/* SPDX-License-Identifier: Apache-2.0
 * nfs_fh: handle layout, signing and verification (see nfs_fh.h).
 * The MAC is SipHash-2-4 (Aumasson and Bernstein's keyed PRF for short
 * inputs), written here from its specification: every call verifies one or
 * two handles and READDIRPLUS makes one per entry, and a one-shot
 * HMAC-SHA256 costs microseconds where SipHash costs tens of nanoseconds.
 * The comparison runs in constant time so a client cannot learn a valid MAC
 * byte by byte from response timing. */
#include "nfs_fh.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "meta_schema.h"
#include "srv_err.h"

#define FH_MAGIC0 'S'
#define FH_MAGIC1 '3'
#define FH_BODY 24
#define FH_MACLEN 8

static uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = rotl(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = rotl(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = rotl(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = rotl(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = rotl(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = rotl(v2, 32);                                                                         \
    } while (0)

uint64_t nfs_fh_siphash(const uint8_t key[16], const void *msg, size_t len)
{
    const uint8_t *m = msg;
    uint64_t k0 = le64(key), k1 = le64(key + 8);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = le64(m + i);
        v3 ^= w;
        SIPROUND;
        SIPROUND;
        v0 ^= w;
    }
    uint64_t b = (uint64_t)len << 56;
    for (size_t j = 0; i + j < len; j++)
        b |= (uint64_t)m[i + j] << (8 * j);
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* The 32-byte store key folds into SipHash's 128-bit key. */
static void fh_mac(const uint8_t *key, const uint8_t *body, uint8_t *mac)
{
    uint8_t k[16];
    for (int i = 0; i < 16; i++)
        k[i] = key[i] ^ key[16 + i];
    uint64_t h = nfs_fh_siphash(k, body, FH_BODY);
    for (int i = 0; i < FH_MACLEN; i++)
        mac[i] = (uint8_t)(h >> (8 * i));
}

/* Constant-time comparison of two MACs. */
static bool mac_equal(const uint8_t *a, const uint8_t *b)
{
    uint8_t d = 0;
    for (int i = 0; i < FH_MACLEN; i++)
        d |= a[i] ^ b[i];
    return d == 0;
}

void nfs_fh_encode(const uint8_t key[NFS_FH_KEYLEN], const struct nfs_fh *fh,
                   uint8_t out[NFS_FH_LEN])
{
    out[0] = FH_MAGIC0;
    out[1] = FH_MAGIC1;
    out[2] = NFS_FH_VERSION;
    out[3] = 0;
    meta_be32_put(out + 4, fh->export_id);
    meta_be32_put(out + 8, fh->tenant);
    meta_be32_put(out + 12, (uint32_t)(fh->ino >> 32));
    meta_be32_put(out + 16, (uint32_t)fh->ino);
    meta_be32_put(out + 20, fh->gen);
    fh_mac(key, out, out + FH_BODY);
}

int nfs_fh_decode(const uint8_t key[NFS_FH_KEYLEN], const void *data, size_t len,
                  struct nfs_fh *out)
{
    const uint8_t *p = data;
    uint8_t mac[FH_MACLEN];
    if (len != NFS_FH_LEN || p[0] != FH_MAGIC0 || p[1] != FH_MAGIC1 || p[2] != NFS_FH_VERSION ||
        p[3] != 0)
        return -EBADMSG;
    fh_mac(key, p, mac);
    if (!mac_equal(mac, p + FH_BODY))
        return SRV_ESTALE;
    out->export_id = meta_be32_get(p + 4);
    out->tenant = meta_be32_get(p + 8);
    out->ino = (uint64_t)meta_be32_get(p + 12) << 32 | meta_be32_get(p + 16);
    out->gen = meta_be32_get(p + 20);
    return 0;
}
