/* SPDX-License-Identifier: Apache-2.0
 * admin_sigv4: AWS Signature Version 4 (header form) for the admin API, the
 * alternative to the bearer token. The access key must belong to a user with
 * tenant_admin set: in the bootstrap tenant (id 1) that user is a system
 * admin; elsewhere it may manage only its own tenant.
 *
 * Parsing and verifying are sigv4/'s (srv_sigv4.h), as for S3; this file
 * maps an evhttp request onto them and adds the admin API's rules: the header
 * form only (no presigned URLs, no aws-chunked bodies), x-amz-date required
 * (within 15 minutes of our clock), SignedHeaders in lower case (at most 32),
 * the canonical URI is the path exactly as sent (S3 style, not encoded
 * twice), any region and service in the scope, and the payload hash is always
 * checked against the body (admin bodies are at most 1 MiB and are buffered).
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
    char secret[TENANT_SECRET_MAX + 1];
    struct srv_sigv4_auth sa;
    struct core_principal p;
    struct tenant_user u;
    struct srv_sigv4_kv query[QUERY_MAX];
    struct srv_sigv4_kv *hkv = NULL;
    size_t nhkv = 0;
    int nq = 0;
    int rc;

    secret[0] = '\0';
    if (!a->tenants)
        return fail(why, "tenants are not loaded");
    /* admin.c matched the scheme without case; the parser reads it as sent by AWS */
    char full[2048];
    int fl = snprintf(full, sizeof(full), SRV_SIGV4_ALGORITHM " %s", auth);
    if (fl < 0 || (size_t)fl >= sizeof(full) || srv_sigv4_parse_header(full, &sa) != 0)
        return fail(why, "malformed AWS4-HMAC-SHA256 authorization");
    struct evkeyvalq *hdrs = evhttp_request_get_input_headers(req);
    const char *amzdate = evhttp_find_header(hdrs, "x-amz-date");
    if (!amzdate)
        return fail(why, "x-amz-date missing, malformed or not the credential's date");
    rc = tenants_key_lookup(a->tenants, sa.akey, secret, &p);
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
    const char *bad = signed_list_error(sa.signed_headers);
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
    };
    struct srv_sigv4_verify_in vi = {
        .amz_date = amzdate,
        .http_date = -1,
        .payload_hash = ch ? ch : body_hash,
        .secret = secret,
        .now = time(NULL),
    };
    uint8_t k[32];
    rc = srv_sigv4_verify(&sa, &vi, &cr, k, why);
    OPENSSL_cleanse(k, sizeof(k));
    if (rc) {
        rc = -EACCES;
        goto out;
    }
    if (tenants_user_get(a->tenants, p.tenant, p.user, &u) < 0 || !u.tenant_admin) {
        rc = fail(why, "the key's user is not an admin (tenant_admin is false)");
        goto out;
    }
    memset(who, 0, sizeof(*who));
    who->tenant = p.tenant == ADMIN_SYSTEM_TENANT ? 0 : p.tenant;
    snprintf(who->name, sizeof(who->name), "key %s", sa.akey);
    rc = 0;
out:
    OPENSSL_cleanse(secret, sizeof(secret));
    for (int i = 0; i < nq; i++) {
        free((char *)query[i].name);
        free((char *)query[i].value);
    }
    free(hkv);
    return rc;
}
