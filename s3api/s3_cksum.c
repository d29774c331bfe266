/* SPDX-License-Identifier: Apache-2.0
 * s3_cksum: the additional S3 checksums (x-amz-checksum-crc32, -crc32c,
 * -crc64nvme, -sha1, -sha256): streaming state, and their base64 wire form.
 * New SDKs send a CRC with every upload, so the CRCs run at memory speed:
 * CRC32 (IEEE, zlib's polynomial) is zlib's crc32; CRC32C (Castagnoli) is the
 * store's (SSE4.2, three lanes, store_crc32c); CRC-64/NVME has no library,
 * so it is computed here eight bytes per step from eight tables ("slicing by
 * 8"). All are reflected with init and xorout ~0, continue from the value
 * returned for the bytes before (so a body's checksum is the same however it
 * is split), and go on the wire as the base64 of their big-endian bytes.
 * Thread: reentrant; the CRC-64 tables are built once (pthread_once). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

#include "s3_internal.h"
#include "store.h"

#define CRC64NVME_POLY 0x9A6C9329AC4BC9B5ull /* reflected */

static uint64_t tab64[8][256]; /* tab64[k][b]: byte b followed by k zero bytes */
static pthread_once_t tab_once = PTHREAD_ONCE_INIT;

static void tab_build(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint64_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ CRC64NVME_POLY : c >> 1;
        tab64[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (uint32_t i = 0; i < 256; i++)
            tab64[k][i] = (tab64[k - 1][i] >> 8) ^ tab64[0][tab64[k - 1][i] & 0xff];
}

uint32_t s3__crc32(uint32_t crc, const void *buf, size_t len)
{
    return (uint32_t)crc32_z(crc, buf, len);
}

uint32_t s3__crc32c(uint32_t crc, const void *buf, size_t len)
{
    return store_crc32c(crc, buf, len);
}

uint64_t s3__crc64nvme(uint64_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    pthread_once(&tab_once, tab_build);
    uint64_t c = ~crc;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8); /* any alignment */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);
#endif
        w ^= c;
        c = tab64[7][w & 0xff] ^ tab64[6][(w >> 8) & 0xff] ^ tab64[5][(w >> 16) & 0xff] ^
            tab64[4][(w >> 24) & 0xff] ^ tab64[3][(w >> 32) & 0xff] ^
            tab64[2][(w >> 40) & 0xff] ^ tab64[1][(w >> 48) & 0xff] ^ tab64[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        c = tab64[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}

static const struct {
    enum s3_ck_algo a;
    const char *name, *hdr;
} ALGOS[] = {
    {S3_CK_CRC32, "CRC32", "x-amz-checksum-crc32"},
    {S3_CK_CRC32C, "CRC32C", "x-amz-checksum-crc32c"},
    {S3_CK_SHA1, "SHA1", "x-amz-checksum-sha1"},
    {S3_CK_SHA256, "SHA256", "x-amz-checksum-sha256"},
    {S3_CK_CRC64NVME, "CRC64NVME", "x-amz-checksum-crc64nvme"},
};

enum s3_ck_algo s3__ck_from_header(const char *name)
{
    for (size_t i = 0; i < sizeof(ALGOS) / sizeof(ALGOS[0]); i++)
        if (name && strcasecmp(name, ALGOS[i].hdr) == 0)
            return ALGOS[i].a;
    return S3_CK_NONE;
}

enum s3_ck_algo s3__ck_from_name(const char *name)
{
    for (size_t i = 0; i < sizeof(ALGOS) / sizeof(ALGOS[0]); i++)
        if (name && strcasecmp(name, ALGOS[i].name) == 0)
            return ALGOS[i].a;
    return S3_CK_NONE;
}

const char *s3__ck_header(enum s3_ck_algo a)
{
    for (size_t i = 0; i < sizeof(ALGOS) / sizeof(ALGOS[0]); i++)
        if (ALGOS[i].a == a)
            return ALGOS[i].hdr;
    return NULL;
}

const char *s3__ck_name(enum s3_ck_algo a)
{
    for (size_t i = 0; i < sizeof(ALGOS) / sizeof(ALGOS[0]); i++)
        if (ALGOS[i].a == a)
            return ALGOS[i].name;
    return NULL;
}

void s3__ck_init(struct s3_cksum *c, enum s3_ck_algo a)
{
    memset(c, 0, sizeof(*c));
    c->algo = a;
    if (a == S3_CK_SHA1 || a == S3_CK_SHA256) {
        c->md = EVP_MD_CTX_new();
        if (!c->md)
            abort();
        EVP_DigestInit_ex(c->md, a == S3_CK_SHA1 ? EVP_sha1() : EVP_sha256(), NULL);
    }
}

void s3__ck_update(struct s3_cksum *c, const void *buf, size_t len)
{
    switch (c->algo) {
    case S3_CK_CRC32: c->crc = s3__crc32(c->crc, buf, len); break;
    case S3_CK_CRC32C: c->crc = s3__crc32c(c->crc, buf, len); break;
    case S3_CK_CRC64NVME: c->crc64 = s3__crc64nvme(c->crc64, buf, len); break;
    case S3_CK_SHA1:
    case S3_CK_SHA256: EVP_DigestUpdate(c->md, buf, len); break;
    default: break;
    }
}

void s3__ck_final(struct s3_cksum *c, char *out)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    out[0] = '\0';
    if (c->algo == S3_CK_CRC32 || c->algo == S3_CK_CRC32C) {
        md[0] = (unsigned char)(c->crc >> 24);
        md[1] = (unsigned char)(c->crc >> 16);
        md[2] = (unsigned char)(c->crc >> 8);
        md[3] = (unsigned char)c->crc;
        s3__b64_encode(md, 4, out);
    } else if (c->algo == S3_CK_CRC64NVME) {
        for (int i = 0; i < 8; i++)
            md[i] = (unsigned char)(c->crc64 >> (56 - 8 * i));
        s3__b64_encode(md, 8, out);
    } else if (c->md) {
        EVP_DigestFinal_ex(c->md, md, &n);
        s3__b64_encode(md, n, out);
    }
    s3__ck_free(c);
}

void s3__ck_free(struct s3_cksum *c)
{
    if (c->md)
        EVP_MD_CTX_free(c->md);
    c->md = NULL;
}
