/* SPDX-License-Identifier: Apache-2.0
 * admin_sigv4: AWS Signature Version 4 (header form) for the admin API, the
 * alternative to the bearer token. The access key must belong to a user with
 * tenant_admin set: in the bootstrap tenant (id 1) that user is a system
 * admin; elsewhere it may manage only its own tenant.
 *
 * The service-neutral pieces (canonical request, signing key, signature,
 * x-amz-date) come from sigv4/srv_sigv4.c; the s3api's checker cannot be
 * called from here (libadmin links after libs3api). This file checks the
 * header form only: no presigned URLs, no aws-chunked bodies. The canonical URI is the path exactly as sent (S3 style,
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin_int.h"
#include "srv_err.h"
#include "srv_log.h"
#include "srv_sigv4.h"
#include "tenants.h"

#define SKEW_MAX_S (15 * 60)
#define HDRS_MAX 32
#define QUERY_MAX 64

/* Decode @p n bytes of a query name or value ('+' stays '+') into a heap string.
 * @return it (@p len its length, NULs included), or NULL (malformed, over 1 KiB, no memory). */
static char *query_decode(const char *s, size_t n, size_t *len)
{
    char raw[1024];
    if (n >= sizeof(raw))
        return NULL;
    memcpy(raw, s, n);
    raw[n] = '\0';
    return evhttp_uridecode(raw, 0, len);
}

/* The parameters of the raw query @p q, decoded into @p kv (at most QUERY_MAX).
 * @param[out] n how many entries of @p kv hold heap names and values (free
 * them, also on error). @return 0, -EINVAL (too many, too long, malformed or
 * no memory). */
static int query_pairs(const char *q, struct srv_sigv4_kv kv[QUERY_MAX], int *n)
{
    *n = 0;
    while (q && *q) {
        size_t len = strcspn(q, "&");
        if (len > 0) {
            if (*n == QUERY_MAX)
                return -EINVAL;
            struct srv_sigv4_kv *e = &kv[(*n)++];
            const char *eq = memchr(q, '=', len);
            size_t kl = eq ? (size_t)(eq - q) : len;
            e->vlen = 0;
            e->name = query_decode(q, kl, &e->nlen);
            e->value = eq ? query_decode(eq + 1, len - kl - 1, &e->vlen) : strdup("");
            if (!e->name || !e->value)
                return -EINVAL;
        }
        q += len;
        if (*q == '&')
            q++;
    }
    return 0;
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

static int fail(const char **why, const char *msg)
{
    *why = msg;
    return -EACCES;
}

/* The request's headers as name/value pairs (@p n of them; free() the array).
 * @return it, or NULL (no memory). */
static struct srv_sigv4_kv *header_pairs(struct evkeyvalq *hdrs, size_t *n)
{
    struct evkeyval *h;
    size_t cnt = 0;
    TAILQ_FOREACH(h, hdrs, next)
        cnt++;
    struct srv_sigv4_kv *kv = calloc(cnt ? cnt : 1, sizeof(*kv));
    if (!kv)
        return NULL;
    *n = 0;
    TAILQ_FOREACH(h, hdrs, next)
    {
        kv[*n] = (struct srv_sigv4_kv){h->key, strlen(h->key), h->value, strlen(h->value)};
        (*n)++;
    }
    return kv;
}

/* Check the SignedHeaders list: at most HDRS_MAX names, lower case, host among them.
 * @return NULL, or what is wrong. */
static const char *signed_list_error(const char *list)
{
    bool has_host = false;
    int nh = 0;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ";");
        if (n > 0) {
            if (++nh > HDRS_MAX)
                return "a signed header is missing from the request";
            for (size_t i = 0; i < n; i++)
                if (p[i] >= 'A' && p[i] <= 'Z')
                    return "SignedHeaders must be lower case";
            if (n == 4 && strncmp(p, "host", 4) == 0)
                has_host = true;
        }
        p += n;
        if (*p == ';')
            p++;
    }
    return has_host ? NULL : "the host header must be signed";
}

static const char *method_name(enum evhttp_cmd_type cmd)
{
    switch (cmd) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_PATCH: return "PATCH";
    default: return "OTHER";
    }
}

int admin__sigv4_check(struct admin *a, struct evhttp_request *req, const char *auth,
                       struct admin_caller *who, const char **why)
{
    char cred[300], signed_hdrs[1024], sig[80];
    char secret[TENANT_SECRET_MAX + 1];
    struct core_principal p;
    struct tenant_user u;
    struct srv_sigv4_kv query[QUERY_MAX];
    struct srv_sigv4_kv *hkv = NULL;
    size_t nhkv = 0;
    int nq = 0;
    char *canon = NULL;
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
    if (!amzdate || srv_sigv4_date_parse(amzdate, &t) < 0 || strncmp(amzdate, parts[1], 8) != 0)
        return fail(why, "x-amz-date missing, malformed or not the credential's date");
    time_t now = time(NULL);
    if (t > now + SKEW_MAX_S || t < now - SKEW_MAX_S)
        return fail(why, "x-amz-date is more than 15 minutes from the server's clock");

    rc = tenants_key_lookup(a->tenants, akey, secret, &p);
    if (rc == -ENOENT)
        return fail(why, "unknown access key");
    if (rc < 0)
        return fail(why, "access key or its user is disabled");

    /* Payload hash: the body's, and x-amz-content-sha256 must agree when sent. */
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t blen = evbuffer_get_length(in);
    char body_hash[65];
    srv_sigv4_sha256_hex(blen ? evbuffer_pullup(in, -1) : (const unsigned char *)"", blen,
                         body_hash);
    const char *ch = evhttp_find_header(hdrs, "x-amz-content-sha256");
    if (ch && strcmp(ch, body_hash) != 0) {
        rc = fail(why, "x-amz-content-sha256 does not match the body (the admin API needs a "
                       "signed payload)");
        goto out;
    }

    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (query_pairs(uri ? evhttp_uri_get_query(uri) : NULL, query, &nq) < 0) {
        rc = fail(why, "query string too long or malformed");
        goto out;
    }
    const char *bad = signed_list_error(signed_hdrs);
    if (bad) {
        rc = fail(why, bad);
        goto out;
    }
    if (!(hkv = header_pairs(hdrs, &nhkv))) {
        rc = fail(why, "out of memory");
        goto out;
    }
    struct srv_sigv4_req cr = {
        .method = method_name(evhttp_request_get_command(req)),
        .uri = path && *path ? path : "/", /* as sent: S3 style, not encoded twice */
        .query = query,
        .nquery = (size_t)nq,
        .hdrs = hkv,
        .nhdrs = nhkv,
        .signed_headers = signed_hdrs,
        .payload_hash = ch ? ch : body_hash,
    };
    rc = srv_sigv4_canonical(&cr, &canon);
    if (rc < 0) {
        rc = fail(why, rc == -ENOENT ? "a signed header is missing from the request"
                                     : "out of memory");
        goto out;
    }
    char scope[sizeof(cred) + 16], want[65];
    uint8_t k[32];
    snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", parts[1], parts[2], parts[3]);
    srv_sigv4_key(secret, parts[1], parts[2], parts[3], k);
    rc = srv_sigv4_sign(k, amzdate, scope, canon, want);
    OPENSSL_cleanse(k, sizeof(k));
    if (rc < 0) {
        rc = fail(why, "credential scope too long");
        goto out;
    }
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
    for (int i = 0; i < nq; i++) {
        free((char *)query[i].name);
        free((char *)query[i].value);
    }
    free(hkv);
    free(canon);
    return rc;
}
