/* SPDX-License-Identifier: Apache-2.0
 * srv_sigv4: SigV4 building blocks shared by the S3 front end, the admin
 * API and s3nfsctl (see srv_sigv4.h). Everything works on byte strings; nothing here knows
 * an HTTP library.
 * Thread: any. */
#include "srv_sigv4.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The low-level SHA-256 calls are deprecated in OpenSSL 3 in favour of EVP,
 * but EVP costs a context allocation and a provider dispatch per digest and
 * cannot copy a midstate without another allocation. A request signature is a
 * handful of short digests, where that overhead was most of the cost (and the
 * HMAC pad states of a signing key are reused from a plain struct copy). Both
 * run the same block code (SHA-NI/AVX2 where the CPU has it). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/crypto.h>
#include <openssl/sha.h>

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

void srv_sigv4_sha256(const void *data, size_t len, uint8_t out[32])
{
    SHA256_CTX c;
    SHA256_Init(&c);
    SHA256_Update(&c, data, len);
    SHA256_Final(out, &c);
}

void srv_sigv4_sha256_hex(const void *data, size_t len, char out[65])
{
    uint8_t d[32];
    srv_sigv4_sha256(data, len, d);
    srv_sigv4_hex(d, 32, out);
}

/* An HMAC key made ready: the digest states after its inner and outer pad
 * blocks, so each MAC under it costs the message's blocks plus two. */
struct hkey {
    SHA256_CTX in, out;
};

static void hkey_init(struct hkey *h, const void *key, size_t klen)
{
    enum { BLOCK = 64 };
    uint8_t k[BLOCK], pad[BLOCK];
    memset(k, 0, sizeof(k));
    if (klen > BLOCK)
        srv_sigv4_sha256(key, klen, k); /* long keys are hashed first */
    else if (klen)
        memcpy(k, key, klen);
    for (int i = 0; i < BLOCK; i++)
        pad[i] = k[i] ^ 0x36;
    SHA256_Init(&h->in);
    SHA256_Update(&h->in, pad, BLOCK);
    for (int i = 0; i < BLOCK; i++)
        pad[i] = k[i] ^ 0x5c;
    SHA256_Init(&h->out);
    SHA256_Update(&h->out, pad, BLOCK);
    OPENSSL_cleanse(k, sizeof(k));
    OPENSSL_cleanse(pad, sizeof(pad));
}

static void hkey_mac(const struct hkey *h, const void *msg, size_t mlen, uint8_t out[32])
{
    SHA256_CTX c;
    uint8_t inner[32];
    c = h->in;
    SHA256_Update(&c, msg, mlen);
    SHA256_Final(inner, &c);
    c = h->out;
    SHA256_Update(&c, inner, sizeof(inner));
    SHA256_Final(out, &c);
    OPENSSL_cleanse(inner, sizeof(inner));
    OPENSSL_cleanse(&c, sizeof(c));
}

void srv_sigv4_hmac(const void *key, size_t klen, const void *msg, size_t mlen, uint8_t out[32])
{
    struct hkey h;
    hkey_init(&h, key, klen);
    hkey_mac(&h, msg, mlen, out);
    OPENSSL_cleanse(&h, sizeof(h));
}

/* The pad states of the signing keys this thread used last: a loop thread
 * signs with the same few keys all day (one per access key and day). */
#define MAC_MEMO 4
static _Thread_local struct {
    bool used;
    uint8_t key[32];
    struct hkey h;
} mac_memo[MAC_MEMO];
static _Thread_local unsigned mac_next;

void srv_sigv4_mac(const uint8_t key[32], const void *msg, size_t mlen, uint8_t out[32])
{
    for (int i = 0; i < MAC_MEMO; i++)
        if (mac_memo[i].used && CRYPTO_memcmp(mac_memo[i].key, key, 32) == 0) {
            hkey_mac(&mac_memo[i].h, msg, mlen, out);
            return;
        }
    unsigned i = mac_next++ % MAC_MEMO;
    OPENSSL_cleanse(&mac_memo[i], sizeof(mac_memo[i]));
    memcpy(mac_memo[i].key, key, 32);
    hkey_init(&mac_memo[i].h, key, 32);
    mac_memo[i].used = true;
    hkey_mac(&mac_memo[i].h, msg, mlen, out);
}

void srv_sigv4_key(const char *secret, const char *date, const char *region, const char *service,
                   uint8_t key[32])
{
    size_t slen = strlen(secret);
    uint8_t k[32];
    char small[4 + 256];
    char *k0 = slen + 4 <= sizeof(small) ? small : malloc(slen + 4);
    if (!k0)
        abort();
    memcpy(k0, "AWS4", 4);
    memcpy(k0 + 4, secret, slen);
    srv_sigv4_hmac(k0, slen + 4, date, strlen(date), k);
    srv_sigv4_hmac(k, 32, region, strlen(region), k);
    srv_sigv4_hmac(k, 32, service, strlen(service), k);
    srv_sigv4_hmac(k, 32, "aws4_request", 12, key);
    OPENSSL_cleanse(k0, slen + 4);
    OPENSSL_cleanse(k, sizeof(k));
    if (k0 != small)
        free(k0);
}

/* The signing key depends only on (secret, date, region, service) and changes
 * once a day, so each thread keeps the keys it derived in a small
 * direct-mapped table (no lock: per thread). An entry matches only on all
 * four inputs, so a rotated secret derives a new key. */
#define KEY_CACHE 16
struct key_entry {
    bool used;
    char secret[257];
    char date[9];
    char region[64];
    char service[32];
    uint8_t key[32];
};
static _Thread_local struct key_entry key_cache[KEY_CACHE];

static bool fits(const char *s, size_t cap)
{
    return strnlen(s, cap) < cap;
}

void srv_sigv4_key_cached(const char *secret, const char *date, const char *region,
                          const char *service, uint8_t key[32])
{
    uint32_t h = 2166136261u;
    for (const char *s = secret; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    for (const char *s = date; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    struct key_entry *e = &key_cache[h % KEY_CACHE];
    if (e->used && strcmp(e->secret, secret) == 0 && strcmp(e->date, date) == 0 &&
        strcmp(e->region, region) == 0 && strcmp(e->service, service) == 0) {
        memcpy(key, e->key, 32);
        return;
    }
    srv_sigv4_key(secret, date, region, service, key);
    if (!fits(secret, sizeof(e->secret)) || !fits(date, sizeof(e->date)) ||
        !fits(region, sizeof(e->region)) || !fits(service, sizeof(e->service)))
        return;
    OPENSSL_cleanse(e, sizeof(*e));
    strcpy(e->secret, secret);
    strcpy(e->date, date);
    strcpy(e->region, region);
    strcpy(e->service, service);
    memcpy(e->key, key, 32);
    e->used = true;
}

/* ---- canonical request ---- */

/* Bytes SigV4 keeps as they are: A-Z a-z 0-9 - _ . ~ (1), and '/' (2: kept
 * only on request). */
static const uint8_t keep_tab[256] = {
    ['-'] = 1, ['_'] = 1, ['.'] = 1, ['~'] = 1, ['/'] = 2,
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
    ['8'] = 1, ['9'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1,
    ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1,
    ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
    ['Y'] = 1, ['Z'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
    ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1,
};

size_t srv_sigv4_encode(const char *s, size_t n, bool keep_slash, char *out)
{
    static const char digits[] = "0123456789ABCDEF";
    uint8_t keep = keep_slash ? 3 : 1;
    size_t o = 0, i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && (keep_tab[(unsigned char)s[j]] & keep))
            j++;
        memcpy(out + o, s + i, j - i); /* a run of bytes kept as they are */
        o += j - i;
        if (j == n)
            break;
        unsigned char c = (unsigned char)s[j];
        out[o++] = '%';
        out[o++] = digits[c >> 4];
        out[o++] = digits[c & 15];
        i = j + 1;
    }
    out[o] = '\0';
    return o;
}

struct qenc {
    const char *k, *v; /* encoded, NUL-terminated, in the scratch area */
    size_t kl, vl;
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

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Append every signed header line of @p r at @p out (NULL: only count); the
 * names are written in lower case. @return the length, or -ENOENT (a signed
 * header is absent or unnamed). */
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
            for (size_t i = 0; i < n; i++)
                out[o + i] = lower(p[i]);
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

/* Stack room for the encoded query of a typical (presigned) request. */
#define QSTACK 32
#define QSCRATCH 4096

int srv_sigv4_canonical_into(const struct srv_sigv4_req *r, char *buf, size_t cap, size_t *len)
{
    struct qenc qs[QSTACK], *q = qs;
    char scratch_s[QSCRATCH], *scratch = scratch_s;
    int rc = -ENOMEM;

    *len = 0;
    long hlen = put_headers(r, NULL);
    if (hlen < 0)
        return (int)hlen;
    size_t ml = strlen(r->method), ul = strlen(r->uri), sl = strlen(r->signed_headers);
    size_t pl = strlen(r->payload_hash);
    size_t need = ml + ul + (size_t)hlen + sl + pl + 5;
    size_t room = 0;
    for (size_t i = 0; i < r->nquery; i++)
        room += 3 * (r->query[i].nlen + r->query[i].vlen) + 2;
    if (r->nquery > QSTACK && !(q = malloc(r->nquery * sizeof(*q))))
        goto out;
    if (room > QSCRATCH && !(scratch = malloc(room)))
        goto out;
    char *sp = scratch;
    for (size_t i = 0; i < r->nquery; i++) {
        const struct srv_sigv4_kv *kv = &r->query[i];
        q[i].k = sp;
        q[i].kl = srv_sigv4_encode(kv->name, kv->nlen, false, sp);
        sp += q[i].kl + 1;
        q[i].v = sp;
        q[i].vl = srv_sigv4_encode(kv->value, kv->vlen, false, sp);
        sp += q[i].vl + 1;
        need += q[i].kl + q[i].vl + 2;
    }
    if (r->nquery > QSTACK) {
        qsort(q, r->nquery, sizeof(*q), qenc_cmp);
    } else {
        for (size_t i = 1; i < r->nquery; i++) { /* a few pairs: insertion sort */
            struct qenc t = q[i];
            size_t j = i;
            for (; j > 0 && qenc_cmp(&q[j - 1], &t) > 0; j--)
                q[j] = q[j - 1];
            q[j] = t;
        }
    }
    if (r->nquery)
        need--; /* n pairs take n '=' and n - 1 '&' */
    *len = need;
    if (need + 1 > cap) {
        rc = -ENOSPC;
        goto out;
    }
    char *o = put(buf, r->method, ml);
    *o++ = '\n';
    o = put(o, r->uri, ul);
    *o++ = '\n';
    for (size_t i = 0; i < r->nquery; i++) {
        if (i)
            *o++ = '&';
        o = put(o, q[i].k, q[i].kl);
        *o++ = '=';
        o = put(o, q[i].v, q[i].vl);
    }
    *o++ = '\n';
    o += put_headers(r, o);
    *o++ = '\n';
    o = put(o, r->signed_headers, sl);
    *o++ = '\n';
    o = put(o, r->payload_hash, pl);
    *o = '\0';
    *len = (size_t)(o - buf);
    rc = 0;
out:
    if (q != qs)
        free(q);
    if (scratch != scratch_s)
        free(scratch);
    return rc;
}

int srv_sigv4_canonical(const struct srv_sigv4_req *r, char **out)
{
    size_t len = 0;
    *out = NULL;
    int rc = srv_sigv4_canonical_into(r, NULL, 0, &len);
    if (rc != -ENOSPC)
        return rc;
    char *text = malloc(len + 1);
    if (!text)
        return -ENOMEM;
    rc = srv_sigv4_canonical_into(r, text, len + 1, &len);
    if (rc) {
        free(text);
        return rc;
    }
    *out = text;
    return 0;
}

int srv_sigv4_sign(const uint8_t key[32], const char *amz_date, const char *scope,
                   const char *canonical, char out[65])
{
    char sts[512];
    uint8_t mac[32], ch[32];
    size_t al = strlen(amz_date), sl = strlen(scope);
    static const char alg[] = SRV_SIGV4_ALGORITHM "\n";
    size_t n = sizeof(alg) - 1 + al + 1 + sl + 1 + 64;
    if (n >= sizeof(sts))
        return -EINVAL;
    srv_sigv4_sha256(canonical, strlen(canonical), ch);
    char *o = put(sts, alg, sizeof(alg) - 1);
    o = put(o, amz_date, al);
    *o++ = '\n';
    o = put(o, scope, sl);
    *o++ = '\n';
    srv_sigv4_hex(ch, 32, o);
    srv_sigv4_mac(key, sts, n, mac);
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

/* Days since 1970-01-01 of a proleptic Gregorian date (the era arithmetic
 * of H. Hinnant's days_from_civil; timegm() would consult the time zone
 * machinery on every call). Day numbers past a month's end roll over, as
 * timegm() does. */
static int64_t days_from_civil(int y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
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
    *out = (time_t)(days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec);
    return 0;
}

void srv_sigv4_date_format(time_t t, char out[17])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}
