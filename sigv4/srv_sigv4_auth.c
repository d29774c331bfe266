/* SPDX-License-Identifier: Apache-2.0
 * srv_sigv4_auth: the parser of SigV4 Authorization headers and presigned
 * query parameters, the verifier, and the signatures of aws-chunked streaming
 * bodies (see srv_sigv4.h). Signatures are compared with CRYPTO_memcmp
 * (constant time). Everything works on byte strings, so tests and the fuzz
 * targets use it directly.
 * Thread: reentrant (the key caches of srv_sigv4.c are per thread). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "srv_err.h"
#include "srv_sigv4.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

bool srv_sigv4_equal(const char *a, const char *b, size_t n)
{
    return CRYPTO_memcmp(a, b, n) == 0;
}

/* ---------------------------------------------------------------- parsing */

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Split signed_headers into signed_list: lower-cased copies in names, so
 * signed_headers stays as received for the canonical request. */
static int split_signed(struct srv_sigv4_auth *s)
{
    s->nsigned = 0;
    const char *p = s->signed_headers;
    if (!*p)
        return -EINVAL;
    size_t n = strlen(p);
    for (size_t i = 0; i <= n; i++)
        s->names[i] = lower(p[i]);
    for (char *t = s->names; *t;) {
        size_t len = strcspn(t, ";");
        if (len) {
            if (s->nsigned == SRV_SIGV4_MAX_SIGNED)
                return -EINVAL;
            s->signed_list[s->nsigned++] = t;
        }
        t += len;
        if (*t)
            *t++ = '\0';
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
static int parse_credential(struct srv_sigv4_auth *s, const char *cred, size_t n)
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

void srv_sigv4_auth_reset(struct srv_sigv4_auth *a)
{
    /* every field before signed_headers, and its first byte */
    memset(a, 0, offsetof(struct srv_sigv4_auth, signed_headers) + 1);
    a->nsigned = 0;
    a->names[0] = '\0';
    memset(a->payload_hash, 0, sizeof(a->payload_hash));
}

int srv_sigv4_parse_header(const char *authz, struct srv_sigv4_auth *out)
{
    static const char scheme[] = SRV_SIGV4_ALGORITHM;
    srv_sigv4_auth_reset(out);
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

/* The presigned parameters srv_sigv4_parse_query reads, by the index it
 * reads them at. */
static const struct {
    const char *name;
    size_t len;
} PRESIGNED[] = {
#define P_(s)                                                                                      \
    {                                                                                              \
        s, sizeof(s) - 1                                                                           \
    }
    P_("X-Amz-Algorithm"), P_("X-Amz-Credential"),    P_("X-Amz-Signature"),      P_("X-Amz-Date"),
    P_("X-Amz-Expires"),   P_("X-Amz-SignedHeaders"), P_("X-Amz-Content-Sha256"),
#undef P_
};
#define NPRESIGNED (sizeof(PRESIGNED) / sizeof(PRESIGNED[0]))

/* The value of the first parameter of each PRESIGNED name (NULL: absent),
 * in one pass over @p q: a request carries only its own few parameters, so
 * most are told apart by their length or "X-Amz-" alone. */
static void presigned_params(const struct srv_sigv4_kv *q, size_t n, const char *v[NPRESIGNED])
{
    for (size_t k = 0; k < NPRESIGNED; k++)
        v[k] = NULL;
    for (size_t i = 0; i < n; i++) {
        if (q[i].nlen < 10 || memcmp(q[i].name, "X-Amz-", 6) != 0)
            continue;
        for (size_t k = 0; k < NPRESIGNED; k++)
            if (!v[k] && q[i].nlen == PRESIGNED[k].len &&
                memcmp(q[i].name + 6, PRESIGNED[k].name + 6, q[i].nlen - 6) == 0) {
                v[k] = q[i].value;
                break;
            }
    }
}

int srv_sigv4_parse_query(const struct srv_sigv4_kv *q, size_t n, struct srv_sigv4_auth *out)
{
    srv_sigv4_auth_reset(out);
    const char *v[NPRESIGNED];
    presigned_params(q, n, v);
    const char *alg = v[0], *cred = v[1], *sig = v[2];
    if (!alg && !cred && !sig)
        return -ENOENT;
    const char *date = v[3], *exp = v[4], *sh = v[5];
    if (!alg || strcmp(alg, SRV_SIGV4_ALGORITHM) != 0 || !cred || !sig || !date || !exp || !sh)
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
    const char *ph = v[6];
    if (!ph)
        ph = SRV_SIGV4_UNSIGNED_PAYLOAD;
    size_t phl = strnlen(ph, sizeof(out->payload_hash) - 1);
    memcpy(out->payload_hash, ph, phl);
    out->payload_hash[phl] = '\0';
    return split_signed(out);
}

/* ---------------------------------------------------------------- signing */

/* "DATE/REGION/SERVICE/aws4_request": every field is bounded by its array in
 * struct srv_sigv4_auth (9 + 64 + 32 bytes), so @p out needs 160 bytes at most. */
static void scope_of(const struct srv_sigv4_auth *a, char out[160])
{
    size_t dl = strnlen(a->date, sizeof(a->date) - 1);
    size_t rl = strnlen(a->region, sizeof(a->region) - 1);
    size_t sl = strnlen(a->service, sizeof(a->service) - 1);
    char *o = out;
    memcpy(o, a->date, dl);
    o += dl;
    *o++ = '/';
    memcpy(o, a->region, rl);
    o += rl;
    *o++ = '/';
    memcpy(o, a->service, sl);
    o += sl;
    memcpy(o, "/aws4_request", 14); /* with the NUL */
}

void srv_sigv4_auth_sign(const uint8_t key[32], const struct srv_sigv4_auth *a,
                         const char *canonical, char out[65])
{
    char scope[160];
    scope_of(a, scope);
    if (srv_sigv4_sign(key, a->amz_date, scope, canonical, out) != 0)
        memset(out, 0, 65); /* cannot happen: the fields are bounded; never matches */
}

void srv_sigv4_chunk_sign(const uint8_t key[32], const struct srv_sigv4_auth *a,
                          const char *prev_sig, const uint8_t data_sha256[32], char out[65])
{
    char dh[65], scope[160], sts[512];
    uint8_t mac[32];
    srv_sigv4_hex(data_sha256, 32, dh);
    scope_of(a, scope);
    int n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-PAYLOAD\n%s\n%s\n%s\n%s\n%s", a->amz_date,
                     scope, prev_sig, EMPTY_SHA256, dh);
    srv_sigv4_mac(key, sts, (size_t)n, mac);
    srv_sigv4_hex(mac, 32, out);
}

void srv_sigv4_trailer_sign(const uint8_t key[32], const struct srv_sigv4_auth *a,
                            const char *prev_sig, const char *trailer, size_t len, char out[65])
{
    char th[65], scope[160], sts[512];
    uint8_t mac[32];
    srv_sigv4_sha256_hex(trailer, len, th);
    scope_of(a, scope);
    int n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-TRAILER\n%s\n%s\n%s\n%s", a->amz_date,
                     scope, prev_sig, th);
    srv_sigv4_mac(key, sts, (size_t)n, mac);
    srv_sigv4_hex(mac, 32, out);
}

/* ---------------------------------------------------------------- verifying */

/* Canonical requests of ordinary size are built on the stack. */
#define CANON_STACK 2048

/* The header form's time and payload hash, from the request's headers. */
static int take_headers(struct srv_sigv4_auth *a, const struct srv_sigv4_verify_in *in,
                        const char **why)
{
    if (in->amz_date) {
        if (copy_field(a->amz_date, sizeof(a->amz_date), in->amz_date, strlen(in->amz_date)) ||
            srv_sigv4_date_parse(a->amz_date, &a->when)) {
            *why = "X-Amz-Date is malformed";
            return -EINVAL;
        }
    } else {
        if (in->http_date < 0) {
            *why = "missing or malformed X-Amz-Date / Date header";
            return -EINVAL;
        }
        srv_sigv4_date_format(in->http_date, a->amz_date);
        a->when = in->http_date;
    }
    const char *ph = in->payload_hash;
    if (!ph) {
        *why = "missing required header x-amz-content-sha256";
        return -EINVAL;
    }
    if (copy_field(a->payload_hash, sizeof(a->payload_hash), ph, strlen(ph))) {
        *why = "x-amz-content-sha256 is malformed";
        return -EINVAL;
    }
    return 0;
}

int srv_sigv4_verify(struct srv_sigv4_auth *a, const struct srv_sigv4_verify_in *in,
                     struct srv_sigv4_req *r, uint8_t key_out[32], const char **why)
{
    char mine[65];
    int rc;
    *why = NULL;
    if (!a->presigned && (rc = take_headers(a, in, why)) != 0)
        return rc;
    if (strncmp(a->amz_date, a->date, 8) != 0) {
        *why = "credential scope date does not match the request date";
        return -EINVAL;
    }
    bool host_signed = false;
    for (size_t i = 0; i < a->nsigned; i++)
        if (strcmp(a->signed_list[i], "host") == 0)
            host_signed = true;
    if (!host_signed) {
        *why = "the host header must be signed";
        return -EINVAL;
    }
    if (a->presigned) {
        if (a->when > in->now + SRV_SIGV4_SKEW_S) {
            *why = "request is not valid yet";
            return -EACCES;
        }
        if (in->now > a->when + a->expires) {
            *why = "request has expired";
            return -EACCES;
        }
    } else if (a->when > in->now + SRV_SIGV4_SKEW_S || a->when < in->now - SRV_SIGV4_SKEW_S) {
        *why = "the difference between the request time and the server's time is too large";
        return -ETIMEDOUT;
    }
    r->signed_headers = a->signed_headers;
    r->payload_hash = a->payload_hash;
    char cbuf[CANON_STACK], *canon = cbuf;
    size_t len = 0;
    rc = r->uri ? srv_sigv4_canonical_into(r, cbuf, sizeof(cbuf), &len) : -ENOENT;
    if (rc == -ENOSPC) {
        canon = malloc(len + 1);
        rc = canon ? srv_sigv4_canonical_into(r, canon, len + 1, &len) : -ENOMEM;
    }
    if (rc) {
        if (canon != cbuf)
            free(canon);
        *why = "a signed header is missing from the request";
        return -EINVAL;
    }
    srv_sigv4_key_cached(in->secret, a->date, a->region, a->service, key_out);
    srv_sigv4_auth_sign(key_out, a, canon, mine);
    if (canon != cbuf)
        free(canon);
    if (!srv_sigv4_equal(mine, a->signature, 64)) {
        *why = "the request signature we calculated does not match the signature you provided";
        return SRV_EAUTH;
    }
    return 0;
}
