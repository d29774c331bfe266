/* SPDX-License-Identifier: Apache-2.0
 * s3_sigv4: AWS Signature Version 4 for S3 — the Authorization header form,
 * presigned query URLs, and the aws-chunked streaming body format
 * (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER], STREAMING-UNSIGNED-PAYLOAD-TRAILER).
 *
 * Canonicalization follows the AWS SigV4 rules: the path is decoded and
 * re-encoded (unreserved bytes and '/' kept, everything else %XX), query
 * parameters are decoded, re-encoded and sorted, signed headers are trimmed with
 * inner blank runs collapsed and repeated headers joined with ','.
 * Signatures are compared with CRYPTO_memcmp (constant time).
 * Every function works on byte buffers, so tests and the fuzz target use it directly.
 * Thread: reentrant. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "s3_internal.h"
#include "srv_err.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

bool s3__ct_equal(const char *a, const char *b, size_t n)
{
    return CRYPTO_memcmp(a, b, n) == 0;
}

/* SHA-256 through a provider implementation fetched once: EVP_sha256() makes
 * OpenSSL 3 look the algorithm up again on every init (about half the cost
 * of a short digest), and HMAC() additionally builds and frees an EVP_MAC
 * context per call. Every request signature costs a handful of digests, so
 * these are hand-rolled on the fetched digest (RFC 2104 HMAC). */
static EVP_MD *sha256_fetched;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
    sha256_fetched = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *sha256_md(void)
{
    pthread_once(&sha256_once, sha256_fetch);
    return sha256_fetched ? sha256_fetched : EVP_sha256();
}

/* SHA-256 of a[0..al) || b[0..bl) (b may be NULL). */
static void sha256_2(const void *a, size_t al, const void *b, size_t bl, unsigned char out[32])
{
    unsigned int n = 32;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || !EVP_DigestInit_ex(ctx, sha256_md(), NULL) || !EVP_DigestUpdate(ctx, a, al) ||
        (bl && !EVP_DigestUpdate(ctx, b, bl)) || !EVP_DigestFinal_ex(ctx, out, &n))
        abort(); /* only on OOM or a broken libcrypto: never answer with a wrong digest */
    EVP_MD_CTX_free(ctx);
}

void s3__sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[32];
    sha256_2(data, len, NULL, 0, md);
    s3__hex(md, 32, out);
}

static void hmac(const void *key, size_t klen, const void *data, size_t dlen, unsigned char out[32])
{
    unsigned char k[64], pad[64], inner[32];
    memset(k, 0, sizeof(k));
    if (klen > sizeof(k))
        sha256_2(key, klen, NULL, 0, k);
    else
        memcpy(k, key, klen);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    sha256_2(pad, 64, data, dlen, inner);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    sha256_2(pad, 64, inner, 32, out);
    OPENSSL_cleanse(k, sizeof(k));
    OPENSSL_cleanse(pad, sizeof(pad));
}

void s3__sigv4_key(const char *secret, const char *date, const char *region, const char *service,
                   unsigned char key[32])
{
    char k0[8 + 256];
    unsigned char a[32], b[32], c[32];
    int n = snprintf(k0, sizeof(k0), "AWS4%s", secret);
    if (n < 0 || (size_t)n >= sizeof(k0))
        n = (int)sizeof(k0) - 1;
    hmac(k0, (size_t)n, date, strlen(date), a);
    hmac(a, 32, region, strlen(region), b);
    hmac(b, 32, service, strlen(service), c);
    hmac(c, 32, "aws4_request", 12, key);
    OPENSSL_cleanse(k0, sizeof(k0));
    OPENSSL_cleanse(a, sizeof(a));
    OPENSSL_cleanse(b, sizeof(b));
    OPENSSL_cleanse(c, sizeof(c));
}

/* The signing key depends only on (secret, date, region, service) and changes
 * once a day, so each thread keeps the keys it derived in a small
 * direct-mapped table (no lock: every loop thread has its own). An entry
 * matches only on all four inputs, so a rotated secret derives a new key. */
#define KEY_CACHE 16
struct key_entry {
    bool used;
    char secret[257];
    char date[9];
    char region[64];
    char service[32];
    unsigned char key[32];
};
static _Thread_local struct key_entry key_cache[KEY_CACHE];

static bool fits(const char *s, size_t cap)
{
    return strnlen(s, cap) < cap;
}

void s3__sigv4_key_cached(const char *secret, const char *date, const char *region,
                          const char *service, unsigned char key[32])
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
    s3__sigv4_key(secret, date, region, service, key);
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

/* ---------------------------------------------------------------- parsing */

static int split_signed(struct s3_sigv4 *s)
{
    s->nsigned = 0;
    char *p = s->signed_headers;
    if (!*p)
        return -EINVAL;
    /* signed_list points into a copy so signed_headers stays intact for the canonical form. */
    char *copy = s->arena ? s3__arena_strndup(s->arena, p, strlen(p)) : NULL;
    if (!copy)
        return -EINVAL;
    char *save = NULL;
    for (char *t = strtok_r(copy, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        if (s->nsigned == S3_SIGV4_MAX_SIGNED)
            return -EINVAL;
        for (char *c = t; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        s->signed_list[s->nsigned++] = t;
    }
    return s->nsigned ? 0 : -EINVAL;
}

static int copy_field(char *dst, size_t cap, const char *src, size_t n)
{
    if (n == 0 || n >= cap)
        return -EINVAL;
    memcpy(dst, src, n);
    dst[n] = '\0';
    return 0;
}

/* "AKID/20130524/us-east-1/s3/aws4_request" */
static int parse_credential(struct s3_sigv4 *s, const char *cred, size_t n)
{
    const char *end = cred + n;
    const char *parts[5];
    size_t lens[5];
    /* the access key is everything before the last four '/'-separated fields */
    const char *p = end;
    for (int i = 4; i >= 1; i--) {
        const char *q = p;
        while (q > cred && q[-1] != '/')
            q--;
        if (q == cred)
            return -EINVAL;
        parts[i] = q;
        lens[i] = (size_t)(p - q);
        p = q - 1;
    }
    parts[0] = cred;
    lens[0] = (size_t)(p - cred);
    if (lens[4] != 12 || memcmp(parts[4], "aws4_request", 12) != 0)
        return -EINVAL;
    if (copy_field(s->akey, sizeof(s->akey), parts[0], lens[0]) ||
        copy_field(s->date, sizeof(s->date), parts[1], lens[1]) ||
        copy_field(s->region, sizeof(s->region), parts[2], lens[2]) ||
        copy_field(s->service, sizeof(s->service), parts[3], lens[3]))
        return -EINVAL;
    if (strlen(s->date) != 8)
        return -EINVAL;
    return 0;
}

int s3__sigv4_parse_header(const char *authz, struct s3_sigv4 *out)
{
    static const char scheme[] = "AWS4-HMAC-SHA256";
    struct s3_arena *a = out->arena;
    memset(out, 0, sizeof(*out));
    out->arena = a;
    if (!authz)
        return -EINVAL;
    size_t sl = sizeof(scheme) - 1;
    if (strncmp(authz, scheme, sl) != 0 || (authz[sl] != ' ' && authz[sl] != '\t'))
        return strncmp(authz, "AWS ", 4) == 0 ? SRV_ENOTSUPP : -EINVAL;
    const char *p = authz + sl;
    bool have_cred = false, have_sh = false, have_sig = false;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (!*p)
            break;
        const char *eq = strchr(p, '=');
        if (!eq)
            return -EINVAL;
        const char *v = eq + 1;
        const char *e = strchr(v, ',');
        if (!e)
            e = v + strlen(v);
        size_t vl = (size_t)(e - v);
        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        size_t kl = (size_t)(eq - p);
        if (kl == 10 && memcmp(p, "Credential", 10) == 0) {
            if (parse_credential(out, v, vl))
                return -EINVAL;
            have_cred = true;
        } else if (kl == 13 && memcmp(p, "SignedHeaders", 13) == 0) {
            if (copy_field(out->signed_headers, sizeof(out->signed_headers), v, vl))
                return -EINVAL;
            have_sh = true;
        } else if (kl == 9 && memcmp(p, "Signature", 9) == 0) {
            if (vl != 64 || copy_field(out->signature, sizeof(out->signature), v, vl))
                return -EINVAL;
            have_sig = true;
        } else {
            return -EINVAL;
        }
        p = e;
    }
    if (!have_cred || !have_sh || !have_sig)
        return -EINVAL;
    return split_signed(out);
}

int s3__sigv4_parse_query(const struct s3_req *r, struct s3_sigv4 *out)
{
    struct s3_arena *a = out->arena;
    memset(out, 0, sizeof(*out));
    out->arena = a;
    const char *alg = s3__req_param(r, "X-Amz-Algorithm");
    const char *cred = s3__req_param(r, "X-Amz-Credential");
    const char *sig = s3__req_param(r, "X-Amz-Signature");
    if (!alg && !cred && !sig)
        return -ENOENT;
    const char *date = s3__req_param(r, "X-Amz-Date");
    const char *exp = s3__req_param(r, "X-Amz-Expires");
    const char *sh = s3__req_param(r, "X-Amz-SignedHeaders");
    if (!alg || strcmp(alg, "AWS4-HMAC-SHA256") != 0 || !cred || !sig || !date || !exp || !sh)
        return -EINVAL;
    out->presigned = true;
    if (parse_credential(out, cred, strlen(cred)))
        return -EINVAL;
    if (strlen(sig) != 64 || copy_field(out->signature, sizeof(out->signature), sig, 64))
        return -EINVAL;
    if (copy_field(out->signed_headers, sizeof(out->signed_headers), sh, strlen(sh)))
        return -EINVAL;
    if (copy_field(out->amz_date, sizeof(out->amz_date), date, strlen(date)) ||
        s3__amz_date_parse(out->amz_date, &out->when))
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    long e = strtol(exp, &end, 10);
    if (errno || !end || *end || e < 1 || e > 604800)
        return -EINVAL;
    out->expires = e;
    const char *ph = s3__req_param(r, "X-Amz-Content-Sha256");
    if (!ph)
        ph = S3_UNSIGNED_PAYLOAD;
    size_t phl = strnlen(ph, sizeof(out->payload_hash) - 1);
    memcpy(out->payload_hash, ph, phl);
    out->payload_hash[phl] = '\0';
    return split_signed(out);
}

/* ---------------------------------------------------------------- canonical request */

struct qent {
    char *k, *v;
};

static int qent_cmp(const void *a, const void *b)
{
    const struct qent *x = a, *y = b;
    int c = strcmp(x->k, y->k);
    return c ? c : strcmp(x->v, y->v);
}

/* A bounded output string: the canonical request is sized first, then filled
 * without reallocation or printf. */
struct sbuf {
    char *p;
    size_t n, cap;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (n > b->cap - b->n) /* cannot happen: the size was computed first */
        abort();
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void sb_str(struct sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

static void canon_value(struct sbuf *o, const char *v, size_t n)
{
    bool space = false;
    while (n && (*v == ' ' || *v == '\t')) {
        v++;
        n--;
    }
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    for (size_t i = 0; i < n; i++) {
        if (v[i] == ' ' || v[i] == '\t') {
            space = true;
            continue;
        }
        if (space)
            sb_add(o, " ", 1);
        space = false;
        sb_add(o, &v[i], 1);
    }
}

char *s3__sigv4_canonical(struct s3_arena *a, const struct s3_req *r, const struct s3_sigv4 *sig)
{
    size_t plen = 0;
    const char *raw = r->raw_path ? r->raw_path : "/";
    char *path = s3__url_decode(a, raw, strlen(raw), &plen);
    if (!path)
        return NULL;
    const char *epath = plen ? s3__url_encode(a, path, plen, true) : "/";
    struct qent *q = s3__arena_alloc(a, (r->nparams + 1) * sizeof(*q));
    size_t nq = 0, cap = strlen(r->method) + strlen(epath) + 8;
    for (size_t i = 0; i < r->nparams; i++) {
        if (sig->presigned && strcmp(r->params[i].name, "X-Amz-Signature") == 0)
            continue;
        q[nq].k = s3__url_encode(a, r->params[i].name, strlen(r->params[i].name), false);
        q[nq].v = s3__url_encode(a, r->params[i].val, r->params[i].vlen, false);
        cap += strlen(q[nq].k) + strlen(q[nq].v) + 2;
        nq++;
    }
    if (nq > 1)
        qsort(q, nq, sizeof(*q), qent_cmp);
    for (size_t i = 0; i < sig->nsigned; i++) {
        cap += strlen(sig->signed_list[i]) + 2;
        for (size_t j = 0; j < r->nhdrs; j++)
            if (strcmp(r->hdrs[j].name, sig->signed_list[i]) == 0)
                cap += r->hdrs[j].vlen + 1;
    }
    cap += strlen(sig->signed_headers) + strlen(sig->payload_hash) + 2;
    struct sbuf o = {s3__arena_alloc(a, cap + 1), 0, cap};
    sb_str(&o, r->method);
    sb_add(&o, "\n", 1);
    sb_str(&o, epath);
    sb_add(&o, "\n", 1);
    for (size_t i = 0; i < nq; i++) {
        if (i)
            sb_add(&o, "&", 1);
        sb_str(&o, q[i].k);
        sb_add(&o, "=", 1);
        sb_str(&o, q[i].v);
    }
    sb_add(&o, "\n", 1);
    for (size_t i = 0; i < sig->nsigned; i++) {
        const char *name = sig->signed_list[i];
        bool found = false;
        sb_str(&o, name);
        sb_add(&o, ":", 1);
        for (size_t j = 0; j < r->nhdrs; j++) {
            if (strcmp(r->hdrs[j].name, name) != 0)
                continue;
            if (found)
                sb_add(&o, ",", 1);
            canon_value(&o, r->hdrs[j].val, r->hdrs[j].vlen);
            found = true;
        }
        if (!found)
            return NULL;
        sb_add(&o, "\n", 1);
    }
    sb_add(&o, "\n", 1);
    sb_str(&o, sig->signed_headers);
    sb_add(&o, "\n", 1);
    sb_str(&o, sig->payload_hash);
    o.p[o.n] = '\0';
    return o.p;
}

static void scope_of(const struct s3_sigv4 *sig, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s/%s/aws4_request", sig->date, sig->region, sig->service);
}

void s3__sigv4_sign(const unsigned char key[32], const struct s3_sigv4 *sig, const char *canon,
                    char out[65])
{
    char ch[65], sts[400];
    unsigned char mac[32];
    s3__sha256_hex(canon, strlen(canon), ch);
    /* "AWS4-HMAC-SHA256\n" amz_date "\n" date/region/service/aws4_request "\n" hash; every
     * field is bounded by its array in struct s3_sigv4, so this fits in sts */
    struct sbuf b = {sts, 0, sizeof(sts) - 1};
    sb_str(&b, "AWS4-HMAC-SHA256\n");
    sb_str(&b, sig->amz_date);
    sb_add(&b, "\n", 1);
    sb_str(&b, sig->date);
    sb_add(&b, "/", 1);
    sb_str(&b, sig->region);
    sb_add(&b, "/", 1);
    sb_str(&b, sig->service);
    sb_str(&b, "/aws4_request\n");
    sb_add(&b, ch, 64);
    hmac(key, 32, sts, b.n, mac);
    s3__hex(mac, 32, out);
}

void s3__sigv4_chunk_sign(const unsigned char key[32], const struct s3_sigv4 *sig,
                          const char *prev_sig, const unsigned char data_sha256[32], char out[65])
{
    char dh[65], scope[160], sts[512];
    unsigned char mac[32];
    s3__hex(data_sha256, 32, dh);
    scope_of(sig, scope, sizeof(scope));
    int n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-PAYLOAD\n%s\n%s\n%s\n%s\n%s",
                     sig->amz_date, scope, prev_sig, EMPTY_SHA256, dh);
    hmac(key, 32, sts, (size_t)n, mac);
    s3__hex(mac, 32, out);
}

void s3__sigv4_trailer_sign(const unsigned char key[32], const struct s3_sigv4 *sig,
                            const char *prev_sig, const char *trailer, size_t len, char out[65])
{
    char th[65], scope[160], sts[512];
    unsigned char mac[32];
    s3__sha256_hex(trailer, len, th);
    scope_of(sig, scope, sizeof(scope));
    int n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-TRAILER\n%s\n%s\n%s\n%s", sig->amz_date,
                     scope, prev_sig, th);
    hmac(key, 32, sts, (size_t)n, mac);
    s3__hex(mac, 32, out);
}

int s3__sigv4_verify(struct s3_arena *a, const struct s3_req *r, struct s3_sigv4 *sig,
                     const char *secret, time_t now, unsigned char key_out[32], const char **why)
{
    char mine[65];
    *why = NULL;
    if (strcmp(sig->service, "s3") != 0) {
        *why = "credential scope service must be s3";
        return -EINVAL;
    }
    if (!sig->presigned) {
        const char *d = s3__req_header(r, "x-amz-date");
        if (d) {
            if (copy_field(sig->amz_date, sizeof(sig->amz_date), d, strlen(d)) ||
                s3__amz_date_parse(sig->amz_date, &sig->when)) {
                *why = "X-Amz-Date is malformed";
                return -EINVAL;
            }
        } else {
            time_t t;
            struct tm tm;
            if (s3__http_date_parse(s3__req_header(r, "date"), &t)) {
                *why = "missing or malformed X-Amz-Date / Date header";
                return -EINVAL;
            }
            gmtime_r(&t, &tm);
            strftime(sig->amz_date, sizeof(sig->amz_date), "%Y%m%dT%H%M%SZ", &tm);
            sig->when = t;
        }
        const char *ph = s3__req_header(r, "x-amz-content-sha256");
        if (!ph) {
            *why = "missing required header x-amz-content-sha256";
            return -EINVAL;
        }
        if (copy_field(sig->payload_hash, sizeof(sig->payload_hash), ph, strlen(ph))) {
            *why = "x-amz-content-sha256 is malformed";
            return -EINVAL;
        }
    }
    if (strncmp(sig->amz_date, sig->date, 8) != 0) {
        *why = "credential scope date does not match the request date";
        return -EINVAL;
    }
    bool host_signed = false;
    for (size_t i = 0; i < sig->nsigned; i++)
        if (strcmp(sig->signed_list[i], "host") == 0)
            host_signed = true;
    if (!host_signed) {
        *why = "the host header must be signed";
        return -EINVAL;
    }
    if (sig->presigned) {
        if (sig->when > now + S3_SKEW_SECONDS) {
            *why = "request is not valid yet";
            return -EACCES;
        }
        if (now > sig->when + sig->expires) {
            *why = "request has expired";
            return -EACCES;
        }
    } else if (sig->when > now + S3_SKEW_SECONDS || sig->when < now - S3_SKEW_SECONDS) {
        *why = "the difference between the request time and the server's time is too large";
        return -ETIMEDOUT;
    }
    char *canon = s3__sigv4_canonical(a, r, sig);
    if (!canon) {
        *why = "a signed header is missing from the request";
        return -EINVAL;
    }
    s3__sigv4_key_cached(secret, sig->date, sig->region, sig->service, key_out);
    s3__sigv4_sign(key_out, sig, canon, mine);
    if (!s3__ct_equal(mine, sig->signature, 64)) {
        *why = "the request signature we calculated does not match the signature you provided";
        return SRV_EAUTH;
    }
    return 0;
}

/* ---------------------------------------------------------------- aws-chunked */

enum { CK_HDR = 0, CK_DATA, CK_DATA_CR, CK_DATA_LF, CK_TRAILER, CK_DONE };

void s3__chunked_init(struct s3_chunked *d, enum s3_chunk_mode mode, const unsigned char key[32],
                      const struct s3_sigv4 *sig, s3_chunk_data_cb cb, void *arg)
{
    memset(d, 0, sizeof(*d));
    d->mode = mode;
    if (key)
        memcpy(d->key, key, 32);
    d->sig = sig;
    if (sig)
        snprintf(d->prev_sig, sizeof(d->prev_sig), "%s", sig->signature);
    d->cb = cb;
    d->arg = arg;
    d->state = CK_HDR;
    if (mode != S3_CHUNK_UNSIGNED_TRAILER) {
        d->sha = EVP_MD_CTX_new();
        if (!d->sha)
            abort();
    }
}

void s3__chunked_fini(struct s3_chunked *d)
{
    if (d->sha)
        EVP_MD_CTX_free(d->sha);
    d->sha = NULL;
}

static int fail(struct s3_chunked *d, int err, const char *msg)
{
    if (!d->err)
        d->err = msg;
    d->state = CK_DONE;
    d->done = false;
    return err;
}

static bool signed_mode(const struct s3_chunked *d)
{
    return d->mode == S3_CHUNK_SIGNED || d->mode == S3_CHUNK_SIGNED_TRAILER;
}

static int chunk_verify(struct s3_chunked *d)
{
    unsigned char md[32];
    unsigned int n = 32;
    char want[65];
    EVP_DigestFinal_ex(d->sha, md, &n);
    s3__sigv4_chunk_sign(d->key, d->sig, d->prev_sig, md, want);
    if (!s3__ct_equal(want, d->chunk_sig, 64))
        return fail(d, SRV_EAUTH, "chunk signature does not match");
    memcpy(d->prev_sig, want, 65);
    return 0;
}

static int parse_chunk_header(struct s3_chunked *d)
{
    char *l = d->line;
    char *semi = strchr(l, ';');
    if (semi)
        *semi = '\0';
    if (!*l || strlen(l) > 16)
        return fail(d, -EINVAL, "malformed chunk size");
    uint64_t v = 0;
    for (char *c = l; *c; c++) {
        int h = isxdigit((unsigned char)*c)
                    ? (isdigit((unsigned char)*c) ? *c - '0' : (tolower(*c) - 'a' + 10))
                    : -1;
        if (h < 0)
            return fail(d, -EINVAL, "malformed chunk size");
        v = v * 16 + (uint64_t)h;
    }
    d->remaining = v;
    if (signed_mode(d)) {
        const char *k = "chunk-signature=";
        if (!semi || strncmp(semi + 1, k, strlen(k)) != 0 || strlen(semi + 1 + strlen(k)) != 64)
            return fail(d, -EINVAL, "missing chunk-signature");
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

static int trailer_line(struct s3_chunked *d)
{
    char *l = d->line;
    if (d->linelen == 0) {
        if (d->mode == S3_CHUNK_SIGNED_TRAILER) {
            char want[65];
            if (!d->trailer_sig[0])
                return fail(d, -EINVAL, "missing x-amz-trailer-signature");
            s3__sigv4_trailer_sign(d->key, d->sig, d->prev_sig, d->trailer, d->trailerlen, want);
            if (!s3__ct_equal(want, d->trailer_sig, 64))
                return fail(d, SRV_EAUTH, "trailer signature does not match");
        }
        d->state = CK_DONE;
        d->done = true;
        return 0;
    }
    if (d->mode == S3_CHUNK_SIGNED)
        return fail(d, -EINVAL, "unexpected data after the final chunk");
    char *colon = strchr(l, ':');
    if (!colon)
        return fail(d, -EINVAL, "malformed trailer");
    *colon = '\0';
    for (char *c = l; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    char *v = colon + 1;
    while (*v == ' ')
        v++;
    if (strcmp(l, "x-amz-trailer-signature") == 0) {
        if (strlen(v) != 64)
            return fail(d, -EINVAL, "malformed trailer signature");
        memcpy(d->trailer_sig, v, 65);
        return 0;
    }
    int n =
        snprintf(d->trailer + d->trailerlen, sizeof(d->trailer) - d->trailerlen, "%s:%s\n", l, v);
    if (n < 0 || (size_t)n >= sizeof(d->trailer) - d->trailerlen)
        return fail(d, -EINVAL, "trailer too long");
    d->trailerlen += (size_t)n;
    if (strncmp(l, "x-amz-checksum-", 15) == 0) {
        size_t ln = strlen(l), vn = strlen(v);
        if (ln >= sizeof(d->ck_name) || vn >= sizeof(d->ck_value))
            return fail(d, -EINVAL, "malformed checksum trailer");
        memcpy(d->ck_name, l, ln + 1);
        memcpy(d->ck_value, v, vn + 1);
    }
    return 0;
}

int s3__chunked_feed(struct s3_chunked *d, const char *buf, size_t len)
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
                    return fail(d, -EINVAL, "chunk line not terminated by CRLF");
                d->line[--d->linelen] = '\0';
                rc = d->state == CK_HDR ? parse_chunk_header(d) : trailer_line(d);
                d->linelen = 0;
                if (rc)
                    return rc;
                continue;
            }
            if (d->linelen + 2 > sizeof(d->line))
                return fail(d, -EINVAL, "chunk header line too long");
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
                return fail(d, rc, "payload rejected");
            i += n;
            d->remaining -= n;
            if (d->remaining == 0)
                d->state = CK_DATA_CR;
            break;
        }
        case CK_DATA_CR:
            if (buf[i++] != '\r')
                return fail(d, -EINVAL, "chunk data longer than its declared size");
            d->state = CK_DATA_LF;
            break;
        case CK_DATA_LF:
            if (buf[i++] != '\n')
                return fail(d, -EINVAL, "chunk data not terminated by CRLF");
            if (signed_mode(d) && (rc = chunk_verify(d)) != 0)
                return rc;
            d->state = CK_HDR;
            break;
        default: return fail(d, -EINVAL, "data after the end of the aws-chunked body");
        }
    }
    return 0;
}
