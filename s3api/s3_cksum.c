/* SPDX-License-Identifier: Apache-2.0
 * s3_cksum: the additional S3 checksums (x-amz-checksum-crc32, -crc32c,
 * -sha1, -sha256): streaming state, and their base64 wire form.
 * CRC32 is the IEEE/zlib polynomial, CRC32C the Castagnoli one, both reflected,
 * sent as the base64 of the 4 big-endian bytes (as AWS does).
 * Thread: reentrant; tables are built once (pthread_once). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "s3_internal.h"

static uint32_t tab32[256], tab32c[256];
static uint64_t tab64[256];
static pthread_once_t tab_once = PTHREAD_ONCE_INIT;

static void tab_build(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t a = i, b = i;
        for (int k = 0; k < 8; k++) {
            a = (a & 1) ? (a >> 1) ^ 0xEDB88320u : a >> 1;
            b = (b & 1) ? (b >> 1) ^ 0x82F63B78u : b >> 1;
        }
        tab32[i] = a;
        tab32c[i] = b;
        uint64_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x9A6C9329AC4BC9B5ull : c >> 1;
        tab64[i] = c;
    }
}

static uint32_t crc_run(const uint32_t *t, uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    crc = ~crc;
    while (len--)
        crc = t[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

uint32_t s3__crc32(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&tab_once, tab_build);
    return crc_run(tab32, crc, buf, len);
}

uint32_t s3__crc32c(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&tab_once, tab_build);
    return crc_run(tab32c, crc, buf, len);
}

uint64_t s3__crc64nvme(uint64_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    pthread_once(&tab_once, tab_build);
    crc = ~crc;
    while (len--)
        crc = tab64[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
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
