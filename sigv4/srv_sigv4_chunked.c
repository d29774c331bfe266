/* SPDX-License-Identifier: Apache-2.0
 * srv_sigv4_chunked: the aws-chunked body decoder of SigV4 streaming uploads
 * (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER],
 * STREAMING-UNSIGNED-PAYLOAD-TRAILER): chunk framing, each chunk's signature
 * chained from the request's (the seed), trailer fields and the trailer
 * signature. A pure state machine (see srv_sigv4.h); how the bytes travel
 * (a Content-Length body, HTTP chunks) is the caller's business.
 * Thread: reentrant. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "srv_err.h"
#include "srv_sigv4.h"

enum { CK_HDR = 0, CK_DATA, CK_DATA_CR, CK_DATA_LF, CK_TRAILER, CK_DONE };

void srv_sigv4_chunked_init(struct srv_sigv4_chunked *d, enum srv_sigv4_chunk_mode mode,
                            const uint8_t key[32], const struct srv_sigv4_auth *auth,
                            srv_sigv4_chunk_cb cb, void *arg)
{
    memset(d, 0, sizeof(*d));
    d->mode = mode;
    if (key)
        memcpy(d->key, key, 32);
    d->auth = auth;
    if (auth)
        snprintf(d->prev_sig, sizeof(d->prev_sig), "%s", auth->signature);
    d->cb = cb;
    d->arg = arg;
    d->state = CK_HDR;
    if (mode != SRV_SIGV4_CHUNK_UNSIGNED_TRAILER) {
        d->sha = EVP_MD_CTX_new();
        if (!d->sha)
            abort();
    }
}

void srv_sigv4_chunked_fini(struct srv_sigv4_chunked *d)
{
    if (d->sha)
        EVP_MD_CTX_free(d->sha);
    d->sha = NULL;
}

int srv_sigv4_chunked_fail(struct srv_sigv4_chunked *d, int err, const char *msg)
{
    if (!d->err)
        d->err = msg;
    d->state = CK_DONE;
    d->done = false;
    return err;
}

static bool signed_mode(const struct srv_sigv4_chunked *d)
{
    return d->mode == SRV_SIGV4_CHUNK_SIGNED || d->mode == SRV_SIGV4_CHUNK_SIGNED_TRAILER;
}

static int chunk_verify(struct srv_sigv4_chunked *d)
{
    uint8_t md[32];
    unsigned int n = 32;
    char want[65];
    EVP_DigestFinal_ex(d->sha, md, &n);
    srv_sigv4_chunk_sign(d->key, d->auth, d->prev_sig, md, want);
    if (!srv_sigv4_equal(want, d->chunk_sig, 64))
        return srv_sigv4_chunked_fail(d, SRV_EAUTH, "chunk signature does not match");
    memcpy(d->prev_sig, want, 65);
    return 0;
}

static int parse_chunk_header(struct srv_sigv4_chunked *d)
{
    char *l = d->line;
    char *semi = strchr(l, ';');
    if (semi)
        *semi = '\0';
    if (!*l || strlen(l) > 16)
        return srv_sigv4_chunked_fail(d, -EINVAL, "malformed chunk size");
    uint64_t v = 0;
    for (char *c = l; *c; c++) {
        int h = isxdigit((unsigned char)*c)
                    ? (isdigit((unsigned char)*c) ? *c - '0' : (tolower(*c) - 'a' + 10))
                    : -1;
        if (h < 0)
            return srv_sigv4_chunked_fail(d, -EINVAL, "malformed chunk size");
        v = v * 16 + (uint64_t)h;
    }
    d->remaining = v;
    if (signed_mode(d)) {
        const char *k = "chunk-signature=";
        if (!semi || strncmp(semi + 1, k, strlen(k)) != 0 || strlen(semi + 1 + strlen(k)) != 64)
            return srv_sigv4_chunked_fail(d, -EINVAL, "missing chunk-signature");
        memcpy(d->chunk_sig, semi + 1 + strlen(k), 64);
        d->chunk_sig[64] = '\0';
        EVP_DigestInit_ex(d->sha, EVP_sha256(), NULL);
    }
    if (v == 0) {
        if (signed_mode(d)) {
            int rc = chunk_verify(d);
            if (rc)
                return rc;
        }
        d->state = CK_TRAILER;
    } else {
        d->state = CK_DATA;
    }
    return 0;
}

static int trailer_line(struct srv_sigv4_chunked *d)
{
    char *l = d->line;
    if (d->linelen == 0) {
        if (d->mode == SRV_SIGV4_CHUNK_SIGNED_TRAILER) {
            char want[65];
            if (!d->trailer_sig[0])
                return srv_sigv4_chunked_fail(d, -EINVAL, "missing x-amz-trailer-signature");
            srv_sigv4_trailer_sign(d->key, d->auth, d->prev_sig, d->trailer, d->trailerlen, want);
            if (!srv_sigv4_equal(want, d->trailer_sig, 64))
                return srv_sigv4_chunked_fail(d, SRV_EAUTH, "trailer signature does not match");
        }
        d->state = CK_DONE;
        d->done = true;
        return 0;
    }
    if (d->mode == SRV_SIGV4_CHUNK_SIGNED)
        return srv_sigv4_chunked_fail(d, -EINVAL, "unexpected data after the final chunk");
    char *colon = strchr(l, ':');
    if (!colon)
        return srv_sigv4_chunked_fail(d, -EINVAL, "malformed trailer");
    *colon = '\0';
    for (char *c = l; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    char *v = colon + 1;
    while (*v == ' ')
        v++;
    if (strcmp(l, "x-amz-trailer-signature") == 0) {
        if (strlen(v) != 64)
            return srv_sigv4_chunked_fail(d, -EINVAL, "malformed trailer signature");
        memcpy(d->trailer_sig, v, 65);
        return 0;
    }
    int n =
        snprintf(d->trailer + d->trailerlen, sizeof(d->trailer) - d->trailerlen, "%s:%s\n", l, v);
    if (n < 0 || (size_t)n >= sizeof(d->trailer) - d->trailerlen)
        return srv_sigv4_chunked_fail(d, -EINVAL, "trailer too long");
    d->trailerlen += (size_t)n;
    if (strncmp(l, "x-amz-checksum-", 15) == 0) {
        size_t ln = strlen(l), vn = strlen(v);
        if (ln >= sizeof(d->ck_name) || vn >= sizeof(d->ck_value))
            return srv_sigv4_chunked_fail(d, -EINVAL, "malformed checksum trailer");
        memcpy(d->ck_name, l, ln + 1);
        memcpy(d->ck_value, v, vn + 1);
    }
    return 0;
}

int srv_sigv4_chunked_feed(struct srv_sigv4_chunked *d, const char *buf, size_t len)
{
    size_t i = 0;
    int rc;
    while (i < len) {
        switch (d->state) {
        case CK_HDR:
        case CK_TRAILER: {
            char c = buf[i++];
            if (c == '\n') {
                if (d->linelen == 0 || d->line[d->linelen - 1] != '\r')
                    return srv_sigv4_chunked_fail(d, -EINVAL, "chunk line not terminated by CRLF");
                d->line[--d->linelen] = '\0';
                rc = d->state == CK_HDR ? parse_chunk_header(d) : trailer_line(d);
                d->linelen = 0;
                if (rc)
                    return rc;
                continue;
            }
            if (d->linelen + 2 > sizeof(d->line))
                return srv_sigv4_chunked_fail(d, -EINVAL, "chunk header line too long");
            d->line[d->linelen++] = c;
            break;
        }
        case CK_DATA: {
            size_t n = len - i;
            if (n > d->remaining)
                n = (size_t)d->remaining;
            if (d->sha)
                EVP_DigestUpdate(d->sha, buf + i, n);
            d->decoded += n;
            if (d->cb && (rc = d->cb(d->arg, buf + i, n)) != 0)
                return srv_sigv4_chunked_fail(d, rc, "payload rejected");
            i += n;
            d->remaining -= n;
            if (d->remaining == 0)
                d->state = CK_DATA_CR;
            break;
        }
        case CK_DATA_CR:
            if (buf[i++] != '\r')
                return srv_sigv4_chunked_fail(d, -EINVAL,
                                              "chunk data longer than its declared size");
            d->state = CK_DATA_LF;
            break;
        case CK_DATA_LF:
            if (buf[i++] != '\n')
                return srv_sigv4_chunked_fail(d, -EINVAL, "chunk data not terminated by CRLF");
            if (signed_mode(d) && (rc = chunk_verify(d)) != 0)
                return rc;
            d->state = CK_HDR;
            break;
        default:
            return srv_sigv4_chunked_fail(d, -EINVAL, "data after the end of the aws-chunked body");
        }
    }
    return 0;
}
