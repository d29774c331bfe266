/* SPDX-License-Identifier: Apache-2.0
 * srv_sigv4: SigV4 building blocks shared by the admin API and s3nfsctl
 * (see srv_sigv4.h). Everything works on byte strings; nothing here knows
 * an HTTP library.
 * Thread: any. */
#include "srv_sigv4.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

void srv_sigv4_hex(const uint8_t *d, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[2 * n] = '\0';
}

/* ---- SHA-256 and HMAC ---- */

/* EVP_sha256() makes OpenSSL 3 resolve the algorithm at every digest init;
 * fetching it once keeps a signature check to a handful of plain digests. */
static EVP_MD *md_fetched;
static pthread_once_t md_once = PTHREAD_ONCE_INIT;

static void md_fetch(void)
{
    md_fetched = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *md_sha256(void)
{
    pthread_once(&md_once, md_fetch);
    return md_fetched ? md_fetched : EVP_sha256();
}

/* SHA-256 of p1[0..n1) followed by p2[0..n2) (p2 may be NULL when n2 is 0). */
static void sha256_two(const void *p1, size_t n1, const void *p2, size_t n2, uint8_t out[32])
{
    unsigned int olen = 32;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx && EVP_DigestInit_ex(ctx, md_sha256(), NULL) &&
              EVP_DigestUpdate(ctx, p1, n1) && (n2 == 0 || EVP_DigestUpdate(ctx, p2, n2)) &&
              EVP_DigestFinal_ex(ctx, out, &olen);
    EVP_MD_CTX_free(ctx);
    if (!ok)
        abort(); /* out of memory or a broken libcrypto: a wrong digest is never an option */
}

void srv_sigv4_sha256(const void *data, size_t len, uint8_t out[32])
{
    sha256_two(data, len, NULL, 0, out);
}

void srv_sigv4_sha256_hex(const void *data, size_t len, char out[65])
{
    uint8_t d[32];
    sha256_two(data, len, NULL, 0, d);
    srv_sigv4_hex(d, 32, out);
}

void srv_sigv4_hmac(const void *key, size_t klen, const void *msg, size_t mlen, uint8_t out[32])
{
    enum { BLOCK = 64 };
    uint8_t k[BLOCK], pad[BLOCK], inner[32];
    memset(k, 0, sizeof(k));
    if (klen > BLOCK)
        sha256_two(key, klen, NULL, 0, k); /* long keys are hashed first */
    else if (klen)
        memcpy(k, key, klen);
    for (int i = 0; i < BLOCK; i++)
        pad[i] = k[i] ^ 0x36;
    sha256_two(pad, BLOCK, msg, mlen, inner);
    for (int i = 0; i < BLOCK; i++)
        pad[i] = k[i] ^ 0x5c;
    sha256_two(pad, BLOCK, inner, sizeof(inner), out);
    OPENSSL_cleanse(k, sizeof(k));
    OPENSSL_cleanse(pad, sizeof(pad));
    OPENSSL_cleanse(inner, sizeof(inner));
}

void srv_sigv4_key(const char *secret, const char *date, const char *region, const char *service,
                   uint8_t key[32])
{
    size_t slen = strlen(secret);
    uint8_t k[32];
    char *k0 = malloc(slen + 5);
    if (!k0)
        abort();
    memcpy(k0, "AWS4", 4);
    memcpy(k0 + 4, secret, slen + 1);
    srv_sigv4_hmac(k0, slen + 4, date, strlen(date), k);
    srv_sigv4_hmac(k, 32, region, strlen(region), k);
    srv_sigv4_hmac(k, 32, service, strlen(service), k);
    srv_sigv4_hmac(k, 32, "aws4_request", 12, key);
    OPENSSL_cleanse(k0, slen + 4);
    OPENSSL_cleanse(k, sizeof(k));
    free(k0);
}

/* ---- canonical request ---- */

size_t srv_sigv4_encode(const char *s, size_t n, bool keep_slash, char *out)
{
    static const char digits[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = digits[c >> 4];
            out[o++] = digits[c & 15];
        }
    }
    out[o] = '\0';
    return o;
}

struct qenc {
    char *k, *v; /* encoded; v points into k's allocation */
};

static int qenc_cmp(const void *x, const void *y)
{
    const struct qenc *a = x, *b = y;
    int c = strcmp(a->k, b->k);
    return c ? c : strcmp(a->v, b->v);
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Write a header value trimmed, inner blank runs made one space; @p out may
 * be NULL to only count. @return the length. */
static size_t canon_value(const char *v, size_t n, char *out)
{
    size_t o = 0;
    bool space = false;
    while (n && is_blank(*v)) {
        v++;
        n--;
    }
    while (n && is_blank(v[n - 1]))
        n--;
    for (size_t i = 0; i < n; i++) {
        if (is_blank(v[i])) {
            space = true;
            continue;
        }
        if (space && out)
            out[o] = ' ';
        o += space;
        space = false;
        if (out)
            out[o] = v[i];
        o++;
    }
    return o;
}

/* Append every signed header line of @p r at @p out (NULL: only count).
 * @return the length, or -ENOENT (a signed header is absent or unnamed). */
static long put_headers(const struct srv_sigv4_req *r, char *out)
{
    size_t o = 0;
    const char *p = r->signed_headers;
    while (*p) {
        size_t n = strcspn(p, ";");
        bool found = false;
        if (n == 0)
            return -ENOENT;
        if (out)
            memcpy(out + o, p, n);
        o += n;
        if (out)
            out[o] = ':';
        o++;
        for (size_t i = 0; i < r->nhdrs; i++) {
            const struct srv_sigv4_kv *h = &r->hdrs[i];
            if (h->nlen != n || strncasecmp(h->name, p, n) != 0)
                continue;
            if (found && out)
                out[o] = ',';
            o += found;
            o += canon_value(h->value, h->vlen, out ? out + o : NULL);
            found = true;
        }
        if (!found)
            return -ENOENT;
        if (out)
            out[o] = '\n';
        o++;
        p += n;
        if (*p == ';')
            p++;
    }
    return (long)o;
}

static char *put(char *o, const char *s, size_t n)
{
    memcpy(o, s, n);
    return o + n;
}

int srv_sigv4_canonical(const struct srv_sigv4_req *r, char **out)
{
    struct qenc *q = NULL;
    size_t nq = 0;
    char *text = NULL;
    int rc = -ENOMEM;

    *out = NULL;
    long hlen = put_headers(r, NULL);
    if (hlen < 0)
        return (int)hlen;
    size_t len = strlen(r->method) + strlen(r->uri) + (size_t)hlen + strlen(r->signed_headers) +
                 strlen(r->payload_hash) + 5;
    if (r->nquery && !(q = calloc(r->nquery, sizeof(*q))))
        goto out;
    for (; nq < r->nquery; nq++) {
        const struct srv_sigv4_kv *kv = &r->query[nq];
        char *k = malloc(3 * kv->nlen + 3 * kv->vlen + 2);
        if (!k)
            goto out;
        size_t kl = srv_sigv4_encode(kv->name, kv->nlen, false, k);
        q[nq].k = k;
        q[nq].v = k + kl + 1;
        len += kl + srv_sigv4_encode(kv->value, kv->vlen, false, q[nq].v) + 2;
    }
    if (nq > 1)
        qsort(q, nq, sizeof(*q), qenc_cmp);
    if (!(text = malloc(len + 1)))
        goto out;
    char *o = put(text, r->method, strlen(r->method));
    *o++ = '\n';
    o = put(o, r->uri, strlen(r->uri));
    *o++ = '\n';
    for (size_t i = 0; i < nq; i++) {
        if (i)
            *o++ = '&';
        o = put(o, q[i].k, strlen(q[i].k));
        *o++ = '=';
        o = put(o, q[i].v, strlen(q[i].v));
    }
    *o++ = '\n';
    o += put_headers(r, o);
    *o++ = '\n';
    o = put(o, r->signed_headers, strlen(r->signed_headers));
    *o++ = '\n';
    o = put(o, r->payload_hash, strlen(r->payload_hash));
    *o = '\0';
    *out = text;
    text = NULL;
    rc = 0;
out:
    for (size_t i = 0; i < nq; i++)
        free(q[i].k);
    free(q);
    free(text);
    return rc;
}

int srv_sigv4_sign(const uint8_t key[32], const char *amz_date, const char *scope,
                   const char *canonical, char out[65])
{
    char ch[65], sts[512];
    uint8_t mac[32];
    srv_sigv4_sha256_hex(canonical, strlen(canonical), ch);
    int n = snprintf(sts, sizeof(sts), SRV_SIGV4_ALGORITHM "\n%s\n%s\n%s", amz_date, scope, ch);
    if (n < 0 || (size_t)n >= sizeof(sts))
        return -EINVAL;
    srv_sigv4_hmac(key, 32, sts, (size_t)n, mac);
    srv_sigv4_hex(mac, 32, out);
    return 0;
}

/* ---- x-amz-date ---- */

/* The @p n digits at @p s as a number, or -1 if one is not a digit. */
static int digits_at(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

int srv_sigv4_date_parse(const char *s, time_t *out)
{
    if (!s || strlen(s) != 16 || s[8] != 'T' || s[15] != 'Z')
        return -EINVAL;
    int y = digits_at(s, 4), mo = digits_at(s + 4, 2), d = digits_at(s + 6, 2);
    int h = digits_at(s + 9, 2), mi = digits_at(s + 11, 2), sec = digits_at(s + 13, 2);
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 ||
        mi > 59 || sec < 0 || sec > 60)
        return -EINVAL;
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    *out = timegm(&tm);
    return 0;
}

void srv_sigv4_date_format(time_t t, char out[17])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}
