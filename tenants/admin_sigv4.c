/* SPDX-License-Identifier: Apache-2.0
 * admin_sigv4: AWS Signature Version 4 (header form) for the admin API, the
 * alternative to the bearer token. The access key must belong to a user with
 * tenant_admin set: in the bootstrap tenant (id 1) that user is a system
 * admin; elsewhere it may manage only its own tenant.
 *
 * The s3api's SigV4 code cannot be called from here (libadmin links after
 * libs3api), so this file checks the header form only: no presigned URLs, no
 * aws-chunked bodies. The canonical URI is the path exactly as sent (S3 style,
 * not encoded twice); any region and service in the scope are accepted; the
 * payload hash is always checked against the body (admin bodies are at most
 * 1 MiB and are buffered); x-amz-date must be within 15 minutes of our clock.
 * Thread: the admin thread. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "admin_int.h"
#include "srv_err.h"
#include "srv_log.h"
#include "tenants.h"

#define SKEW_MAX_S (15 * 60)
#define HDRS_MAX 32

static void hex(const uint8_t *d, size_t n, char *out)
{
    static const char h[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = h[d[i] >> 4];
        out[2 * i + 1] = h[d[i] & 15];
    }
    out[2 * n] = '\0';
}

static void hmac(const uint8_t *key, size_t klen, const char *msg, size_t mlen, uint8_t out[32])
{
    unsigned int olen = 32;
    HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, mlen, out, &olen);
}

/* Append @p s to @p b percent-encoded as SigV4 wants (unreserved kept). */
static void add_encoded(struct evbuffer *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '_' || ch == '.' || ch == '~')
            evbuffer_add(b, &s[i], 1);
        else
            evbuffer_add_printf(b, "%%%02X", ch);
    }
}

struct qpair {
    char *k, *v; /* encoded */
};

static int qpair_cmp(const void *x, const void *y)
{
    const struct qpair *a = x, *b = y;
    int c = strcmp(a->k, b->k);
    return c ? c : strcmp(a->v, b->v);
}

static char *encoded_dup(const char *s, size_t n)
{
    struct evbuffer *b = evbuffer_new();
    char *out = NULL;
    if (!b)
        return NULL;
    size_t raw_len = 0;
    char raw[1024];
    if (n >= sizeof(raw))
        goto out;
    memcpy(raw, s, n);
    raw[n] = '\0';
    /* Decode first ('+' stays '+'), then encode the SigV4 way. */
    char *dec = evhttp_uridecode(raw, 0, &raw_len);
    if (!dec)
        goto out;
    add_encoded(b, dec, raw_len);
    free(dec);
    size_t len = evbuffer_get_length(b);
    out = malloc(len + 1);
    if (out) {
        evbuffer_remove(b, out, len);
        out[len] = '\0';
    }
out:
    evbuffer_free(b);
    return out;
}

/* The canonical query string of the raw query @p q. @return 0, -EINVAL, -ENOMEM. */
static int canon_query(struct evbuffer *out, const char *q)
{
    struct qpair pairs[64];
    size_t n = 0;
    int rc = 0;
    while (q && *q) {
        size_t len = strcspn(q, "&");
        if (len > 0) {
            if (n == sizeof(pairs) / sizeof(pairs[0])) {
                rc = -EINVAL;
                goto out;
            }
            const char *eq = memchr(q, '=', len);
            size_t kl = eq ? (size_t)(eq - q) : len;
            pairs[n].k = encoded_dup(q, kl);
            pairs[n].v = eq ? encoded_dup(eq + 1, len - kl - 1) : strdup("");
            n++;
            if (!pairs[n - 1].k || !pairs[n - 1].v) {
                rc = -EINVAL;
                goto out;
            }
        }
        q += len;
        if (*q == '&')
            q++;
    }
    qsort(pairs, n, sizeof(pairs[0]), qpair_cmp);
    for (size_t i = 0; i < n; i++)
        evbuffer_add_printf(out, "%s%s=%s", i ? "&" : "", pairs[i].k, pairs[i].v);
out:
    for (size_t i = 0; i < n; i++) {
        free(pairs[i].k);
        free(pairs[i].v);
    }
    return rc;
}

/* Append "name:value\n" with the value trimmed and inner blank runs squeezed;
 * repeated headers are joined with ','. @return 0, -ENOENT (not sent). */
static int canon_header(struct evbuffer *out, struct evkeyvalq *hdrs, const char *name)
{
    bool found = false;
    struct evkeyval *h;
    evbuffer_add_printf(out, "%s:", name);
    TAILQ_FOREACH(h, hdrs, next)
    {
        if (strcasecmp(h->key, name) != 0)
            continue;
        if (found)
            evbuffer_add(out, ",", 1);
        found = true;
        const char *v = h->value;
        while (*v == ' ' || *v == '\t')
            v++;
        bool space = false;
        for (; *v; v++) {
            if (*v == ' ' || *v == '\t') {
                space = true;
                continue;
            }
            if (space)
                evbuffer_add(out, " ", 1);
            space = false;
            evbuffer_add(out, v, 1);
        }
    }
    evbuffer_add(out, "\n", 1);
    return found ? 0 : -ENOENT;
}

/* Copy "field=VALUE" (up to ',' or end) out of the Authorization header. */
static bool auth_field(const char *auth, const char *field, char *out, size_t outlen)
{
    size_t fl = strlen(field);
    const char *p = auth;
    while ((p = strstr(p, field)) != NULL) {
        bool start = p == auth || p[-1] == ' ' || p[-1] == ',';
        if (start && p[fl] == '=') {
            p += fl + 1;
            size_t len = strcspn(p, ", ");
            if (len == 0 || len >= outlen)
                return false;
            memcpy(out, p, len);
            out[len] = '\0';
            return true;
        }
        p += fl;
    }
    return false;
}

static bool parse_amz_date(const char *s, time_t *out)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    if (strlen(s) != 16 || s[8] != 'T' || s[15] != 'Z')
        return false;
    const char *end = strptime(s, "%Y%m%dT%H%M%SZ", &tm);
    if (!end || *end)
        return false;
    *out = timegm(&tm);
    return true;
}

static int fail(const char **why, const char *msg)
{
    *why = msg;
    return -EACCES;
}

int admin__sigv4_check(struct admin *a, struct evhttp_request *req, const char *auth,
                       struct admin_caller *who, const char **why)
{
    char cred[300], signed_hdrs[1024], sig[80], date[32];
    char secret[TENANT_SECRET_MAX + 1];
    struct core_principal p;
    struct tenant_user u;
    struct evbuffer *cr = NULL;
    int rc;

    *why = "malformed AWS4-HMAC-SHA256 authorization";
    secret[0] = '\0';
    if (!a->tenants)
        return fail(why, "tenants are not loaded");
    if (!auth_field(auth, "Credential", cred, sizeof(cred)) ||
        !auth_field(auth, "SignedHeaders", signed_hdrs, sizeof(signed_hdrs)) ||
        !auth_field(auth, "Signature", sig, sizeof(sig)) || strlen(sig) != 64)
        return -EACCES;
    /* Credential = AKEY/YYYYMMDD/REGION/SERVICE/aws4_request */
    char *parts[5];
    int np = 0;
    for (char *s = cred, *save = NULL; np < 5 && (s = strtok_r(s, "/", &save)); s = NULL)
        parts[np++] = s;
    if (np != 5 || strcmp(parts[4], "aws4_request") != 0 || strlen(parts[1]) != 8)
        return -EACCES;
    const char *akey = parts[0];
    struct evkeyvalq *hdrs = evhttp_request_get_input_headers(req);
    const char *amzdate = evhttp_find_header(hdrs, "x-amz-date");
    time_t t;
    if (!amzdate || !parse_amz_date(amzdate, &t) || strncmp(amzdate, parts[1], 8) != 0)
        return fail(why, "x-amz-date missing, malformed or not the credential's date");
    time_t now = time(NULL);
    if (t > now + SKEW_MAX_S || t < now - SKEW_MAX_S)
        return fail(why, "x-amz-date is more than 15 minutes from the server's clock");
    snprintf(date, sizeof(date), "%s", amzdate);

    rc = tenants_key_lookup(a->tenants, akey, secret, &p);
    if (rc == -ENOENT)
        return fail(why, "unknown access key");
    if (rc < 0)
        return fail(why, "access key or its user is disabled");

    /* Payload hash: the body's, and x-amz-content-sha256 must agree when sent. */
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t blen = evbuffer_get_length(in);
    uint8_t d[32];
    char body_hash[65];
    SHA256(blen ? evbuffer_pullup(in, -1) : (const unsigned char *)"", blen, d);
    hex(d, 32, body_hash);
    const char *ch = evhttp_find_header(hdrs, "x-amz-content-sha256");
    if (ch && strcmp(ch, body_hash) != 0) {
        rc = fail(why, "x-amz-content-sha256 does not match the body (the admin API needs a "
                       "signed payload)");
        goto out;
    }

    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const char *method;
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET: method = "GET"; break;
    case EVHTTP_REQ_HEAD: method = "HEAD"; break;
    case EVHTTP_REQ_POST: method = "POST"; break;
    case EVHTTP_REQ_PUT: method = "PUT"; break;
    case EVHTTP_REQ_DELETE: method = "DELETE"; break;
    case EVHTTP_REQ_PATCH: method = "PATCH"; break;
    default: method = "OTHER"; break;
    }
    cr = evbuffer_new();
    if (!cr) {
        rc = fail(why, "out of memory");
        goto out;
    }
    evbuffer_add_printf(cr, "%s\n%s\n", method, path && *path ? path : "/");
    rc = canon_query(cr, uri ? evhttp_uri_get_query(uri) : NULL);
    if (rc < 0) {
        rc = fail(why, "query string too long or malformed");
        goto out;
    }
    evbuffer_add(cr, "\n", 1);
    bool has_host = false;
    char sh[sizeof(signed_hdrs)];
    snprintf(sh, sizeof(sh), "%s", signed_hdrs);
    int nh = 0;
    for (char *s = sh, *save = NULL, *h; (h = strtok_r(s, ";", &save)); s = NULL) {
        if (++nh > HDRS_MAX || canon_header(cr, hdrs, h) < 0) {
            rc = fail(why, "a signed header is missing from the request");
            goto out;
        }
        for (char *c = h; *c; c++)
            if (*c >= 'A' && *c <= 'Z') {
                rc = fail(why, "SignedHeaders must be lower case");
                goto out;
            }
        if (strcmp(h, "host") == 0)
            has_host = true;
    }
    if (!has_host) {
        rc = fail(why, "the host header must be signed");
        goto out;
    }
    evbuffer_add_printf(cr, "\n%s\n%s", signed_hdrs, ch ? ch : body_hash);

    size_t crlen = evbuffer_get_length(cr);
    SHA256(evbuffer_pullup(cr, -1), crlen, d);
    char cr_hash[65];
    hex(d, 32, cr_hash);
    char sts[512];
    int stslen = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s",
                          date, parts[1], parts[2], parts[3], cr_hash);
    if (stslen < 0 || (size_t)stslen >= sizeof(sts)) {
        rc = fail(why, "credential scope too long");
        goto out;
    }
    char k0[TENANT_SECRET_MAX + 8];
    int k0len = snprintf(k0, sizeof(k0), "AWS4%s", secret);
    uint8_t k[32];
    hmac((const uint8_t *)k0, (size_t)k0len, parts[1], strlen(parts[1]), k);
    hmac(k, 32, parts[2], strlen(parts[2]), k);
    hmac(k, 32, parts[3], strlen(parts[3]), k);
    hmac(k, 32, "aws4_request", 12, k);
    hmac(k, 32, sts, (size_t)stslen, d);
    OPENSSL_cleanse(k0, sizeof(k0));
    OPENSSL_cleanse(k, sizeof(k));
    char want[65];
    hex(d, 32, want);
    if (CRYPTO_memcmp(want, sig, 64) != 0) {
        rc = fail(why, "signature does not match");
        goto out;
    }
    if (tenants_user_get(a->tenants, p.tenant, p.user, &u) < 0 || !u.tenant_admin) {
        rc = fail(why, "the key's user is not an admin (tenant_admin is false)");
        goto out;
    }
    memset(who, 0, sizeof(*who));
    who->tenant = p.tenant == ADMIN_SYSTEM_TENANT ? 0 : p.tenant;
    snprintf(who->name, sizeof(who->name), "key %s", akey);
    rc = 0;
out:
    OPENSSL_cleanse(secret, sizeof(secret));
    if (cr)
        evbuffer_free(cr);
    return rc;
}
