/* SPDX-License-Identifier: Apache-2.0
 * nfs_fh: handle layout, signing and verification (see nfs_fh.h).
 * The MAC comparison runs in constant time so a client cannot learn a
 * valid MAC byte by byte from response timing. */
#include "nfs_fh.h"

#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "srv_err.h"

#define FH_MAGIC0 'S'
#define FH_MAGIC1 '3'
#define FH_BODY 24
#define FH_MACLEN 8

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void fh_mac(const uint8_t *key, const uint8_t *body, uint8_t *mac)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    HMAC(EVP_sha256(), key, NFS_FH_KEYLEN, body, FH_BODY, md, &mdlen);
    memcpy(mac, md, FH_MACLEN);
}

void nfs_fh_encode(const uint8_t key[NFS_FH_KEYLEN], const struct nfs_fh *fh,
                   uint8_t out[NFS_FH_LEN])
{
    out[0] = FH_MAGIC0;
    out[1] = FH_MAGIC1;
    out[2] = NFS_FH_VERSION;
    out[3] = 0;
    put32(out + 4, fh->export_id);
    put32(out + 8, fh->tenant);
    put32(out + 12, (uint32_t)(fh->ino >> 32));
    put32(out + 16, (uint32_t)fh->ino);
    put32(out + 20, fh->gen);
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
    if (CRYPTO_memcmp(mac, p + FH_BODY, FH_MACLEN) != 0)
        return SRV_ESTALE;
    out->export_id = get32(p + 4);
    out->tenant = get32(p + 8);
    out->ino = (uint64_t)get32(p + 12) << 32 | get32(p + 16);
    out->gen = get32(p + 20);
    return 0;
}
