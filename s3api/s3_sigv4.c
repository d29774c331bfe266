/* SPDX-License-Identifier: Apache-2.0
 * s3_sigv4: AWS Signature Version 4 for S3 — the Authorization header form,
 * presigned query URLs, and the aws-chunked streaming body format
 * (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER], STREAMING-UNSIGNED-PAYLOAD-TRAILER).
 *
 * Canonicalization follows the AWS SigV4 rules: the path is decoded and
 * re-encoded (unreserved bytes and '/' kept, everything else %XX), query
 * parameters are decoded, re-encoded and sorted, signed headers are trimmed with
 * inner blank runs collapsed and repeated headers joined with ','. The
 * service-neutral pieces (digests, HMAC, the signing key and its per-thread
 * cache, the canonical request text, the string to sign) are srv_sigv4's,
 * shared with the admin API; this file maps S3 requests onto them.
 * Signatures are compared with CRYPTO_memcmp (constant time).
 * Every function works on byte buffers, so tests and the fuzz target use it directly.
 * Thread: reentrant. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "s3_internal.h"
#include "srv_err.h"
#include "srv_sigv4.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

bool s3__ct_equal(const char *a, const char *b, size_t n)
{
    return CRYPTO_memcmp(a, b, n) == 0;
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
        srv_sigv4_date_parse(out->amz_date, &out->when))
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

/* Canonical requests of ordinary size are built on the stack. */
#define CANON_STACK 2048
#define KV_STACK 32

/* Build @p r's canonical request into @p buf (cap bytes) or, when it does not
 * fit, into a new arena string. @return the text, or NULL (a signed header is
 * missing). */
static char *canonical_to(struct s3_arena *a, const struct s3_req *r, const struct s3_sigv4 *sig,
                          char *buf, size_t cap)
{
    size_t plen = 0, len = 0;
    const char *raw = r->raw_path ? r->raw_path : "/";
    char *path = s3__url_decode(a, raw, strlen(raw), &plen);
    if (!path)
        return NULL;
    char *epath = "/";
    if (plen) {
        epath = s3__arena_alloc(a, 3 * plen + 1);
        srv_sigv4_encode(path, plen, true, epath);
    }
    struct srv_sigv4_kv qs[KV_STACK], hs[KV_STACK];
    struct srv_sigv4_kv *q = r->nparams <= KV_STACK ? qs
                                                    : s3__arena_alloc(a, r->nparams * sizeof(*q));
    struct srv_sigv4_kv *h = r->nhdrs <= KV_STACK ? hs : s3__arena_alloc(a, r->nhdrs * sizeof(*h));
    size_t nq = 0;
    for (size_t i = 0; i < r->nparams; i++) {
        const struct s3_param *pr = &r->params[i];
        if (sig->presigned && strcmp(pr->name, "X-Amz-Signature") == 0)
            continue;
        q[nq++] = (struct srv_sigv4_kv){pr->name, strlen(pr->name), pr->val, pr->vlen};
    }
    for (size_t i = 0; i < r->nhdrs; i++)
        h[i] = (struct srv_sigv4_kv){r->hdrs[i].name, strlen(r->hdrs[i].name), r->hdrs[i].val,
                                     r->hdrs[i].vlen};
    struct srv_sigv4_req cr = {
        .method = r->method,
        .uri = epath,
        .query = q,
        .nquery = nq,
        .hdrs = h,
        .nhdrs = r->nhdrs,
        .signed_headers = sig->signed_headers,
        .payload_hash = sig->payload_hash,
    };
    int rc = srv_sigv4_canonical_into(&cr, buf, cap, &len);
    if (rc == -ENOSPC) {
        buf = s3__arena_alloc(a, len + 1);
        rc = srv_sigv4_canonical_into(&cr, buf, len + 1, &len);
    }
    return rc == 0 ? buf : NULL;
}

char *s3__sigv4_canonical(struct s3_arena *a, const struct s3_req *r, const struct s3_sigv4 *sig)
{
    return canonical_to(a, r, sig, NULL, 0);
}

/* "DATE/REGION/SERVICE/aws4_request": every field is bounded by its array in
 * struct s3_sigv4 (9 + 64 + 32 bytes), so @p out needs 160 bytes at most. */
static void scope_of(const struct s3_sigv4 *sig, char out[160])
{
    size_t dl = strnlen(sig->date, sizeof(sig->date) - 1);
    size_t rl = strnlen(sig->region, sizeof(sig->region) - 1);
    size_t sl = strnlen(sig->service, sizeof(sig->service) - 1);
    char *o = out;
    memcpy(o, sig->date, dl);
    o += dl;
    *o++ = '/';
    memcpy(o, sig->region, rl);
    o += rl;
    *o++ = '/';
    memcpy(o, sig->service, sl);
    o += sl;
    memcpy(o, "/aws4_request", 14); /* with the NUL */
}

void s3__sigv4_sign(const unsigned char key[32], const struct s3_sigv4 *sig, const char *canon,
                    char out[65])
{
    char scope[160];
    scope_of(sig, scope);
    if (srv_sigv4_sign(key, sig->amz_date, scope, canon, out) != 0)
        memset(out, 0, 65); /* cannot happen: the fields are bounded; never matches */
}

void s3__sigv4_chunk_sign(const unsigned char key[32], const struct s3_sigv4 *sig,
                          const char *prev_sig, const unsigned char data_sha256[32], char out[65])
{
    char dh[65], scope[160], sts[512];
    unsigned char mac[32];
    srv_sigv4_hex(data_sha256, 32, dh);
    scope_of(sig, scope);
    int n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-PAYLOAD\n%s\n%s\n%s\n%s\n%s",
                     sig->amz_date, scope, prev_sig, EMPTY_SHA256, dh);
    srv_sigv4_mac(key, sts, (size_t)n, mac);
    srv_sigv4_hex(mac, 32, out);
}

void s3__sigv4_trailer_sign(const unsigned char key[32], const struct s3_sigv4 *sig,
                            const char *prev_sig, const char *trailer, size_t len, char out[65])
{
    char th[65], scope[160], sts[512];
    unsigned char mac[32];
    srv_sigv4_sha256_hex(trailer, len, th);
    scope_of(sig, scope);
    int n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-TRAILER\n%s\n%s\n%s\n%s", sig->amz_date,
                     scope, prev_sig, th);
    srv_sigv4_mac(key, sts, (size_t)n, mac);
    srv_sigv4_hex(mac, 32, out);
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
                srv_sigv4_date_parse(sig->amz_date, &sig->when)) {
                *why = "X-Amz-Date is malformed";
                return -EINVAL;
            }
        } else {
            time_t t;
            if (s3__http_date_parse(s3__req_header(r, "date"), &t)) {
                *why = "missing or malformed X-Amz-Date / Date header";
                return -EINVAL;
            }
            srv_sigv4_date_format(t, sig->amz_date);
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
    char cbuf[CANON_STACK];
    char *canon = canonical_to(a, r, sig, cbuf, sizeof(cbuf));
    if (!canon) {
        *why = "a signed header is missing from the request";
        return -EINVAL;
    }
    srv_sigv4_key_cached(secret, sig->date, sig->region, sig->service, key_out);
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

/* ---------------------------------------------------------------- aws-chunked in HTTP chunks */

enum { CKF_UNKNOWN = 0, CKF_SAME, CKF_NESTED };

/* Feed the decoder a line of the aws-chunked stream rebuilt from HTTP framing. */
static int feed_text(struct s3_chunked *d, const char *a, const char *b, const char *c)
{
    char line[sizeof(d->line) + 8];
    int n = snprintf(line, sizeof(line), "%s%s%s\r\n", a, b, c);
    if (n < 0 || (size_t)n >= sizeof(line))
        return fail(d, -EINVAL, "chunk header or trailer line too long");
    return s3__chunked_feed(d, line, (size_t)n);
}

static int feed_chunk_line(struct s3_chunked *d, uint64_t size, const char *ext)
{
    char hex[24];
    snprintf(hex, sizeof(hex), "%" PRIx64, size);
    return feed_text(d, hex, ext, "");
}

/* An aws chunk-size line without extension at the start of @p p[0..n)? */
static bool size_line_at(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && i < 16 && isxdigit((unsigned char)p[i]))
        i++;
    return i > 0 && i + 2 <= n && p[i] == '\r' && p[i + 1] == '\n';
}

/* The first chunk's data (held back in peek) decides how the stream travels;
 * then what was held back goes to the decoder. */
static int framing_decide(struct s3_chunked *d, bool chunk_ended)
{
    int rc;
    if (size_line_at(d->peek, d->peeklen)) {
        d->framing = CKF_NESTED;
        return s3__chunked_feed(d, d->peek, d->peeklen);
    }
    d->framing = CKF_SAME;
    if ((rc = feed_chunk_line(d, d->first_size, d->first_ext)) != 0 ||
        (rc = s3__chunked_feed(d, d->peek, d->peeklen)) != 0)
        return rc;
    return chunk_ended ? s3__chunked_feed(d, "\r\n", 2) : 0;
}

int s3__chunked_http_frame(struct s3_chunked *d, const struct s3_http_frame *f)
{
    if (d->framing == CKF_NESTED)
        return 0;
    if (d->framing == CKF_UNKNOWN) {
        if (f->kind == S3_FRAME_CHUNK_END)
            return framing_decide(d, true);
        if (f->kind != S3_FRAME_CHUNK)
            return fail(d, -EINVAL, "trailer before the final chunk");
        if (signed_mode(d)) {
            d->framing = strstr(f->ext, "chunk-signature=") ? CKF_SAME : CKF_NESTED;
        } else if (f->size == 0) {
            d->framing = CKF_SAME;
        } else {
            d->first_size = f->size;
            snprintf(d->first_ext, sizeof(d->first_ext), "%s", f->ext);
            d->peeklen = 0;
            return 0;
        }
        if (d->framing == CKF_NESTED)
            return 0;
    }
    switch (f->kind) {
    case S3_FRAME_CHUNK: return feed_chunk_line(d, f->size, f->ext);
    case S3_FRAME_CHUNK_END: return s3__chunked_feed(d, "\r\n", 2);
    default: return feed_text(d, f->name, ":", f->value);
    }
}

int s3__chunked_http_data(struct s3_chunked *d, const char *buf, size_t len)
{
    if (d->framing == CKF_UNKNOWN) {
        size_t k = sizeof(d->peek) - d->peeklen;
        if (k > len)
            k = len;
        memcpy(d->peek + d->peeklen, buf, k);
        d->peeklen += k;
        buf += k;
        len -= k;
        if (d->peeklen < sizeof(d->peek))
            return 0;
        int rc = framing_decide(d, false);
        if (rc)
            return rc;
    }
    return len ? s3__chunked_feed(d, buf, len) : 0;
}
