/* SPDX-License-Identifier: Apache-2.0
 * s3_sigv4: S3 requests mapped onto the one SigV4 of sigv4/ (srv_sigv4.h):
 * presigned parameters from the request's query, the canonical request of an
 * S3 request (the path is decoded and re-encoded: unreserved bytes and '/'
 * kept, everything else %XX; the query without X-Amz-Signature when
 * presigned), the header-form date and payload hash from its headers, the
 * scope's service "s3"; and aws-chunked bodies that travel in HTTP chunks.
 * The key lookup (tenants) is the connection's (s3_conn.c).
 * Thread: reentrant. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "s3_internal.h"
#include "srv_err.h"
#include "srv_sigv4.h"

/* ---------------------------------------------------------------- requests */

#define KV_STACK 32

/* The decoded parameters of @p r as name/value pairs, on the stack (@p stack,
 * KV_STACK of them) or in the arena. @p skip_sig leaves X-Amz-Signature out. */
static struct srv_sigv4_kv *query_kv(struct s3_arena *a, const struct s3_req *r, bool skip_sig,
                                     struct srv_sigv4_kv *stack, size_t *n)
{
    struct srv_sigv4_kv *q =
        r->nparams <= KV_STACK ? stack : s3__arena_alloc(a, r->nparams * sizeof(*q));
    *n = 0;
    for (size_t i = 0; i < r->nparams; i++) {
        const struct s3_param *pr = &r->params[i];
        if (skip_sig && strcmp(pr->name, "X-Amz-Signature") == 0)
            continue;
        q[(*n)++] = (struct srv_sigv4_kv){pr->name, strlen(pr->name), pr->val, pr->vlen};
    }
    return q;
}

int s3__sigv4_parse_query(const struct s3_req *r, struct srv_sigv4_auth *out)
{
    struct srv_sigv4_kv stack[KV_STACK] = {{0}}, *q = stack;
    size_t n = 0;
    if (r->nparams > KV_STACK && !(q = malloc(r->nparams * sizeof(*q))))
        abort();
    for (size_t i = 0; i < r->nparams; i++)
        q[n++] = (struct srv_sigv4_kv){r->params[i].name, strlen(r->params[i].name),
                                       r->params[i].val, r->params[i].vlen};
    int rc = srv_sigv4_parse_query(q, n, out);
    if (q != stack)
        free(q);
    return rc;
}

/* The parts of @p r's canonical request (@p q and @p h: KV_STACK each on the
 * caller's stack, or arena memory); cr->uri is NULL when the path has a
 * malformed escape. */
static void request_of(struct s3_arena *a, const struct s3_req *r, const struct srv_sigv4_auth *sig,
                       struct srv_sigv4_kv *q, struct srv_sigv4_kv *h, struct srv_sigv4_req *cr)
{
    size_t plen = 0;
    const char *raw = r->raw_path ? r->raw_path : "/";
    char *path = s3__url_decode(a, raw, strlen(raw), &plen);
    char *epath = "/";
    if (path && plen) {
        epath = s3__arena_alloc(a, 3 * plen + 1);
        srv_sigv4_encode(path, plen, true, epath);
    }
    size_t nq = 0;
    q = query_kv(a, r, sig->presigned, q, &nq);
    if (r->nhdrs > KV_STACK)
        h = s3__arena_alloc(a, r->nhdrs * sizeof(*h));
    for (size_t i = 0; i < r->nhdrs; i++)
        h[i] = (struct srv_sigv4_kv){r->hdrs[i].name, strlen(r->hdrs[i].name), r->hdrs[i].val,
                                     r->hdrs[i].vlen};
    *cr = (struct srv_sigv4_req){
        .method = r->method,
        .uri = path ? epath : NULL,
        .query = q,
        .nquery = nq,
        .hdrs = h,
        .nhdrs = r->nhdrs,
        .signed_headers = sig->signed_headers,
        .payload_hash = sig->payload_hash,
    };
}

char *s3__sigv4_canonical(struct s3_arena *a, const struct s3_req *r,
                          const struct srv_sigv4_auth *sig)
{
    struct srv_sigv4_kv qs[KV_STACK], hs[KV_STACK];
    struct srv_sigv4_req cr;
    size_t len = 0;
    request_of(a, r, sig, qs, hs, &cr);
    if (!cr.uri || srv_sigv4_canonical_into(&cr, NULL, 0, &len) != -ENOSPC)
        return NULL;
    char *buf = s3__arena_alloc(a, len + 1);
    return srv_sigv4_canonical_into(&cr, buf, len + 1, &len) == 0 ? buf : NULL;
}

/* ---------------------------------------------------------------- presigned memo */

/* The presigned requests this thread verified last (a loader reading its
 * shards through the same presigned URLs, again and again). A presigned
 * request's signature is a function of its method, its request target (path
 * and query: the scope, date, expiry, signed header names and payload hash
 * are all in the query), the values of its signed headers and the key's
 * secret. So a request with the same signature whose method, target, headers
 * (all of them, the signed ones among them) and secret (looked up again for
 * every request: a disabled or deleted key is refused before this, a rotated
 * one misses) are byte for byte those of a request verified here earlier
 * verifies the same: only the time checks (not valid yet, expired) depend on
 * when it comes, and they are made anew. Requests longer than an entry's
 * fields are verified every time. */
#define MEMO_N 4
#define MEMO_URL 1024
#define MEMO_HDRS 512
#define MEMO_SECRET 257

struct memo {
    bool used;
    char sig[64];
    char method[16];
    size_t urllen, hdrslen, secretlen;
    char url[MEMO_URL];
    char hdrs[MEMO_HDRS];
    char secret[MEMO_SECRET];
    uint8_t key[32];
};

static _Thread_local struct memo memos[MEMO_N];

/* Every header of @p r as "name\0value\0", in the request's order, into @p out
 * (MEMO_HDRS): the signed ones among them, whichever the signature names.
 * @return the length, or 0 when they do not fit. */
static size_t memo_hdrs(const struct s3_req *r, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < r->nhdrs; i++) {
        size_t nl = strlen(r->hdrs[i].name), vl = r->hdrs[i].vlen;
        if (n + nl + vl + 2 > MEMO_HDRS)
            return 0;
        memcpy(out + n, r->hdrs[i].name, nl + 1);
        n += nl + 1;
        memcpy(out + n, r->hdrs[i].val, vl);
        n += vl;
        out[n++] = '\0';
    }
    return n;
}

static struct memo *memo_slot(const struct srv_sigv4_auth *sig)
{
    unsigned h = 0;
    for (int i = 0; i < 8; i++)
        h = h * 16 + (unsigned)(sig->signature[i] & 15);
    return &memos[h % MEMO_N];
}

/* The entry that verified this very request, or NULL. */
static struct memo *memo_find(const struct s3_req *r, const struct srv_sigv4_auth *sig,
                              const char *secret, const char *hdrs, size_t hdrslen)
{
    struct memo *m = memo_slot(sig);
    size_t ul = strlen(r->url), sl = strlen(secret);
    if (!m->used || memcmp(m->sig, sig->signature, 64) != 0 || m->urllen != ul ||
        m->hdrslen != hdrslen || m->secretlen != sl || strcmp(m->method, r->method) != 0 ||
        memcmp(m->url, r->url, ul) != 0 || memcmp(m->hdrs, hdrs, hdrslen) != 0 ||
        CRYPTO_memcmp(m->secret, secret, sl) != 0)
        return NULL;
    return m;
}

static void memo_put(const struct s3_req *r, const struct srv_sigv4_auth *sig, const char *secret,
                     const char *hdrs, size_t hdrslen, const unsigned char key[32])
{
    size_t ul = strlen(r->url), sl = strlen(secret), ml = strlen(r->method);
    if (!hdrslen || ul > MEMO_URL || sl >= MEMO_SECRET || ml >= sizeof(memos[0].method))
        return;
    struct memo *m = memo_slot(sig);
    OPENSSL_cleanse(m, sizeof(*m)); /* the secret and key it held */
    memcpy(m->sig, sig->signature, 64);
    memcpy(m->method, r->method, ml + 1);
    memcpy(m->url, r->url, ul);
    m->urllen = ul;
    memcpy(m->hdrs, hdrs, hdrslen);
    m->hdrslen = hdrslen;
    memcpy(m->secret, secret, sl);
    m->secretlen = sl;
    memcpy(m->key, key, 32);
    m->used = true;
}

int s3__sigv4_verify(struct s3_arena *a, const struct s3_req *r, struct srv_sigv4_auth *sig,
                     const char *secret, time_t now, unsigned char key_out[32], const char **why)
{
    if (strcmp(sig->service, "s3") != 0) {
        *why = "credential scope service must be s3";
        return -EINVAL;
    }
    char hdrs[MEMO_HDRS];
    size_t hdrslen = 0;
    if (sig->presigned && r->url) {
        hdrslen = memo_hdrs(r, hdrs);
        struct memo *m = hdrslen ? memo_find(r, sig, secret, hdrs, hdrslen) : NULL;
        if (m) { /* verified before: the time checks of srv_sigv4_verify only */
            *why = NULL;
            if (sig->when > now + SRV_SIGV4_SKEW_S) {
                *why = "request is not valid yet";
                return -EACCES;
            }
            if (now > sig->when + sig->expires) {
                *why = "request has expired";
                return -EACCES;
            }
            memcpy(key_out, m->key, 32);
            return 0;
        }
    }
    struct srv_sigv4_verify_in in = {.secret = secret, .now = now, .http_date = -1};
    if (!sig->presigned) {
        in.amz_date = s3__req_header(r, "x-amz-date");
        time_t t;
        if (!in.amz_date && srv_http_date_parse(s3__req_header(r, "date"), &t) == 0)
            in.http_date = t;
        in.payload_hash = s3__req_header(r, "x-amz-content-sha256");
    }
    struct srv_sigv4_kv qs[KV_STACK], hs[KV_STACK];
    struct srv_sigv4_req cr;
    request_of(a, r, sig, qs, hs, &cr);
    int rc = srv_sigv4_verify(sig, &in, &cr, key_out, why);
    if (rc == 0 && hdrslen)
        memo_put(r, sig, secret, hdrs, hdrslen, key_out);
    return rc;
}

/* ---------------------------------------------------------------- SigV2 (legacy) */

struct v2_sub {
    const struct s3_param *p;
};

static int v2_sub_cmp(const void *x, const void *y)
{
    const struct s3_param *a = ((const struct v2_sub *)x)->p, *b = ((const struct v2_sub *)y)->p;
    int r = strcmp(a->name, b->name);
    return r ? r : (a < b ? -1 : a > b); /* stable: keep the request's order */
}

char *s3__sigv2_string(struct s3_arena *a, const struct s3_req *r, const char *vhost_bucket,
                       const char *expires, bool slash)
{
    /* CanonicalizedResource: [/bucket] + the path as sent + the sub-resources */
    struct v2_sub *sub = s3__arena_alloc(a, (r->nparams + 1) * sizeof(*sub));
    size_t ns = 0, rl = 3 + (vhost_bucket ? strlen(vhost_bucket) : 0);
    const char *path = r->raw_path && *r->raw_path ? r->raw_path : "/";
    rl += strlen(path);
    for (size_t i = 0; i < r->nparams; i++)
        if (srv_sigv2_subresource(r->params[i].name)) {
            sub[ns++].p = &r->params[i];
            rl += strlen(r->params[i].name) + r->params[i].vlen + 2;
        }
    qsort(sub, ns, sizeof(*sub), v2_sub_cmp);
    char *res = s3__arena_alloc(a, rl + 1), *o = res;
    if (vhost_bucket)
        o += sprintf(o, "/%s", vhost_bucket);
    o += sprintf(o, "%s", path);
    if (slash && o[-1] != '/')
        *o++ = '/';
    for (size_t i = 0; i < ns; i++) {
        *o++ = i ? '&' : '?';
        o += sprintf(o, "%s", sub[i].p->name);
        if (sub[i].p->has_eq) {
            *o++ = '=';
            memcpy(o, sub[i].p->val, sub[i].p->vlen);
            o += sub[i].p->vlen;
        }
    }
    *o = '\0';
    struct srv_sigv4_kv *h = s3__arena_alloc(a, (r->nhdrs + 1) * sizeof(*h));
    for (size_t i = 0; i < r->nhdrs; i++)
        h[i] = (struct srv_sigv4_kv){r->hdrs[i].name, strlen(r->hdrs[i].name), r->hdrs[i].val,
                                     r->hdrs[i].vlen};
    const char *date = expires                           ? expires
                       : s3__req_header(r, "x-amz-date") ? ""
                                                         : s3__req_header(r, "date");
    size_t cap = 256 + rl + strlen(r->method);
    for (size_t i = 0; i < r->nhdrs; i++)
        cap += strlen(r->hdrs[i].name) + r->hdrs[i].vlen + 2;
    char *sts = s3__arena_alloc(a, cap);
    long n = srv_sigv2_string(r->method, s3__req_header(r, "content-md5"),
                              s3__req_header(r, "content-type"), date, h, r->nhdrs, res, sts, cap);
    return n < 0 ? NULL : sts;
}

int s3__sigv2_verify(struct s3_arena *a, const struct s3_req *r, const char *vhost_bucket,
                     bool bucket_level, const char *sig, const char *expires, const char *secret,
                     time_t now, const char **why)
{
    time_t when;
    if (expires) {
        char *e = NULL;
        long long ex = strtoll(expires, &e, 10);
        if (!*expires || *e) {
            *why = "Expires must be a number of seconds since the epoch";
            return -EINVAL;
        }
        if ((long long)now > ex) {
            *why = "Request has expired";
            return -EACCES;
        }
    } else {
        const char *d = s3__req_header(r, "x-amz-date");
        if (!d)
            d = s3__req_header(r, "date");
        if (!d || srv_http_date_parse(d, &when) != 0) {
            *why = "AWS authentication requires a valid Date or x-amz-date header";
            return -EACCES;
        }
        if (when > now + SRV_SIGV4_SKEW_S || when < now - SRV_SIGV4_SKEW_S) {
            *why = "the difference between the request time and the current time is too large";
            return -ETIMEDOUT;
        }
    }
    const char *sts = s3__sigv2_string(a, r, vhost_bucket, expires, false);
    if (!sts) {
        *why = "the request could not be canonicalized";
        return -EINVAL;
    }
    /* a bucket's resource is signed as "/bucket/" by most clients (botocore), as
     * sent ("/bucket") by others: both name the same resource */
    const char *alt = bucket_level ? s3__sigv2_string(a, r, vhost_bucket, expires, true) : NULL;
    if (!srv_sigv2_check(secret, sts, strlen(sts), sig) &&
        !(alt && srv_sigv2_check(secret, alt, strlen(alt), sig))) {
        *why = "the request signature we calculated does not match the signature you provided";
        return SRV_EAUTH;
    }
    return 0;
}

/* ---------------------------------------------------------------- aws-chunked */

void s3__chunked_init(struct s3_chunked *c, enum srv_sigv4_chunk_mode mode,
                      const unsigned char key[32], const struct srv_sigv4_auth *sig,
                      srv_sigv4_chunk_cb cb, void *arg)
{
    memset(c, 0, sizeof(*c));
    srv_sigv4_chunked_init(&c->d, mode, key, sig, cb, arg);
}

void s3__chunked_fini(struct s3_chunked *c)
{
    srv_sigv4_chunked_fini(&c->d);
}

/* ---------------------------------------------------------------- aws-chunked in HTTP chunks */

enum { CKF_UNKNOWN = 0, CKF_SAME, CKF_NESTED };

/* Feed the decoder a line of the aws-chunked stream rebuilt from HTTP framing. */
static int feed_text(struct s3_chunked *c, const char *a, const char *b, const char *d)
{
    char line[sizeof(c->d.line) + 8];
    int n = snprintf(line, sizeof(line), "%s%s%s\r\n", a, b, d);
    if (n < 0 || (size_t)n >= sizeof(line))
        return srv_sigv4_chunked_fail(&c->d, -EINVAL, "chunk header or trailer line too long");
    return srv_sigv4_chunked_feed(&c->d, line, (size_t)n);
}

static int feed_chunk_line(struct s3_chunked *c, uint64_t size, const char *ext)
{
    char hex[24];
    snprintf(hex, sizeof(hex), "%" PRIx64, size);
    return feed_text(c, hex, ext, "");
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
static int framing_decide(struct s3_chunked *c, bool chunk_ended)
{
    int rc;
    if (size_line_at(c->peek, c->peeklen)) {
        c->framing = CKF_NESTED;
        return srv_sigv4_chunked_feed(&c->d, c->peek, c->peeklen);
    }
    c->framing = CKF_SAME;
    if ((rc = feed_chunk_line(c, c->first_size, c->first_ext)) != 0 ||
        (rc = srv_sigv4_chunked_feed(&c->d, c->peek, c->peeklen)) != 0)
        return rc;
    return chunk_ended ? srv_sigv4_chunked_feed(&c->d, "\r\n", 2) : 0;
}

int s3__chunked_http_frame(struct s3_chunked *c, const struct s3_http_frame *f)
{
    if (c->framing == CKF_NESTED)
        return 0;
    if (c->framing == CKF_UNKNOWN) {
        if (f->kind == S3_FRAME_CHUNK_END)
            return framing_decide(c, true);
        if (f->kind != S3_FRAME_CHUNK)
            return srv_sigv4_chunked_fail(&c->d, -EINVAL, "trailer before the final chunk");
        if (c->d.mode != SRV_SIGV4_CHUNK_UNSIGNED_TRAILER) {
            c->framing = strstr(f->ext, "chunk-signature=") ? CKF_SAME : CKF_NESTED;
        } else if (f->size == 0) {
            c->framing = CKF_SAME;
        } else {
            c->first_size = f->size;
            snprintf(c->first_ext, sizeof(c->first_ext), "%s", f->ext);
            c->peeklen = 0;
            return 0;
        }
        if (c->framing == CKF_NESTED)
            return 0;
    }
    switch (f->kind) {
    case S3_FRAME_CHUNK:
        return feed_chunk_line(c, f->size, f->ext);
    case S3_FRAME_CHUNK_END:
        return srv_sigv4_chunked_feed(&c->d, "\r\n", 2);
    default:
        return feed_text(c, f->name, ":", f->value);
    }
}

int s3__chunked_http_data(struct s3_chunked *c, const char *buf, size_t len)
{
    if (c->framing == CKF_UNKNOWN) {
        size_t k = sizeof(c->peek) - c->peeklen;
        if (k > len)
            k = len;
        memcpy(c->peek + c->peeklen, buf, k);
        c->peeklen += k;
        buf += k;
        len -= k;
        if (c->peeklen < sizeof(c->peek))
            return 0;
        int rc = framing_decide(c, false);
        if (rc)
            return rc;
    }
    return len ? srv_sigv4_chunked_feed(&c->d, buf, len) : 0;
}
