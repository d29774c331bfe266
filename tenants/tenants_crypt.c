/* SPDX-License-Identifier: Apache-2.0
 * tenants_crypt: secrets at rest (AES-256-GCM through OpenSSL EVP) and
 * random credentials.
 *
 * A stored secret is hex(nonce | ciphertext | tag) with a fresh 96-bit random
 * nonce per seal and the access key id as additional authenticated data, so a
 * sealed secret cannot be moved to another key's record unnoticed.
 * Thread: any (no shared state). */
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <string.h>

#include "srv_err.h"
#include "srv_sigv4.h"
#include "tenants_int.h"

#define NONCE_LEN 12
#define TAG_LEN 16
#define PLAIN_MAX 256

int tenants__random(void *buf, size_t n)
{
    return RAND_bytes(buf, (int)n) == 1 ? 0 : -EIO;
}

int tenants__random_string(char *out, size_t n, const char *alphabet)
{
    size_t alen = strlen(alphabet);
    size_t limit = 256 - (256 % alen); /* reject bytes >= limit: no modulo bias */
    size_t i = 0;
    unsigned char b[64];
    while (i < n) {
        if (tenants__random(b, sizeof(b)) < 0)
            return -EIO;
        for (size_t j = 0; j < sizeof(b) && i < n; j++)
            if (b[j] < limit)
                out[i++] = alphabet[b[j] % alen];
    }
    out[n] = '\0';
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int from_hex(const char *hex, unsigned char *out, size_t outcap, size_t *outlen)
{
    size_t n = strlen(hex);
    if (n % 2 || n / 2 > outcap)
        return -EINVAL;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -EINVAL;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    *outlen = n / 2;
    return 0;
}

int tenants__seal(const uint8_t key[TENANTS_MKEY_LEN], const char *aad, const char *plain,
                  char *hex, size_t hexlen)
{
    int rc = -EIO;
    unsigned char buf[NONCE_LEN + PLAIN_MAX + TAG_LEN];
    size_t plen = strlen(plain);
    int outl = 0, finl = 0;
    EVP_CIPHER_CTX *ctx = NULL;

    if (plen > PLAIN_MAX || hexlen < 2 * (NONCE_LEN + plen + TAG_LEN) + 1)
        return -ENAMETOOLONG;
    if (tenants__random(buf, NONCE_LEN) < 0)
        return -EIO;
    ctx = EVP_CIPHER_CTX_new();
    if (!ctx)
        goto out;
    if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) != 1 ||
        EVP_EncryptInit_ex(ctx, NULL, NULL, key, buf) != 1)
        goto out;
    if (EVP_EncryptUpdate(ctx, NULL, &outl, (const unsigned char *)aad, (int)strlen(aad)) != 1)
        goto out;
    if (EVP_EncryptUpdate(ctx, buf + NONCE_LEN, &outl, (const unsigned char *)plain,
                          (int)plen) != 1)
        goto out;
    if (EVP_EncryptFinal_ex(ctx, buf + NONCE_LEN + outl, &finl) != 1)
        goto out;
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_LEN,
                            buf + NONCE_LEN + outl + finl) != 1)
        goto out;
    srv_sigv4_hex(buf, NONCE_LEN + (size_t)(outl + finl) + TAG_LEN, hex);
    rc = 0;
out:
    EVP_CIPHER_CTX_free(ctx);
    OPENSSL_cleanse(buf, sizeof(buf));
    return rc;
}

int tenants__unseal(const uint8_t key[TENANTS_MKEY_LEN], const char *aad, const char *hex,
                    char *plain, size_t plainlen)
{
    int rc = SRV_ECORRUPT;
    unsigned char buf[NONCE_LEN + PLAIN_MAX + TAG_LEN];
    unsigned char out[PLAIN_MAX + 16];
    size_t n;
    int outl = 0, finl = 0;
    EVP_CIPHER_CTX *ctx = NULL;

    if (from_hex(hex, buf, sizeof(buf), &n) < 0 || n < NONCE_LEN + TAG_LEN)
        return SRV_ECORRUPT;
    size_t clen = n - NONCE_LEN - TAG_LEN;
    if (clen + 1 > plainlen)
        return -ENAMETOOLONG;
    ctx = EVP_CIPHER_CTX_new();
    if (!ctx)
        return -EIO;
    if (EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) != 1 ||
        EVP_DecryptInit_ex(ctx, NULL, NULL, key, buf) != 1)
        goto out;
    if (EVP_DecryptUpdate(ctx, NULL, &outl, (const unsigned char *)aad, (int)strlen(aad)) != 1)
        goto out;
    if (EVP_DecryptUpdate(ctx, out, &outl, buf + NONCE_LEN, (int)clen) != 1)
        goto out;
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_LEN, buf + NONCE_LEN + clen) != 1)
        goto out;
    if (EVP_DecryptFinal_ex(ctx, out + outl, &finl) != 1)
        goto out; /* authentication failed: wrong key or tampered record */
    memcpy(plain, out, (size_t)(outl + finl));
    plain[outl + finl] = '\0';
    rc = 0;
out:
    EVP_CIPHER_CTX_free(ctx);
    OPENSSL_cleanse(out, sizeof(out));
    return rc;
}

void tenants__sha256(const void *data, size_t len, uint8_t out[32])
{
    SHA256(data, len, out);
}
