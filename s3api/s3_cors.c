/* SPDX-License-Identifier: Apache-2.0
 * s3_cors: cross-origin resource sharing for buckets, as S3 does it —
 * Put/Get/DeleteBucketCors (the configuration lives in the bucket's blob,
 * record "cors", as the normalized XML), the preflight OPTIONS request, and
 * the CORS headers of actual requests that carry an Origin.
 *
 * A CORSConfiguration holds 1..100 CORSRule of AllowedOrigin (1+, at most one
 * '*' each), AllowedMethod (1+: GET, PUT, POST, DELETE, HEAD), AllowedHeader
 * (0+, at most one '*' each, matched case-insensitively), ExposeHeader,
 * MaxAgeSeconds and ID. The first rule whose origin, method and (preflight)
 * every requested header match applies: its answer is
 * Access-Control-Allow-Origin (the request's origin, or "*" for a rule whose
 * origin is "*"), -Allow-Methods, -Allow-Headers (preflight: the requested
 * ones), -Expose-Headers, -Max-Age, -Allow-Credentials (not for "*") and
 * Vary. A preflight that no rule matches, or on a bucket without CORS, is
 * 403 AccessForbidden; an actual request without a match gets no CORS
 * headers (the browser then refuses it). The preflight needs no signature:
 * browsers send none.
 * Thread: the work functions run on workers; s3__cors_actual on the loop
 * thread (no I/O). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "s3_internal.h"
#include "srv_err.h"

#define CORS_MAX_RULES 100
#define CORS_MAX_LIST 64

static const char *const METHODS[] = {"GET", "PUT", "POST", "DELETE", "HEAD"};

struct cors_rule {
    const char *id;
    const char *origins[CORS_MAX_LIST], *headers[CORS_MAX_LIST], *expose[CORS_MAX_LIST];
    size_t no, nh, ne;
    unsigned methods; /* bit i: METHODS[i] */
    long maxage;      /* -1: none */
};

static int method_bit(const char *m)
{
    for (int i = 0; i < 5; i++)
        if (strcmp(m, METHODS[i]) == 0)
            return 1 << i;
    return 0;
}

/* One '*' at most, anywhere; case-insensitive for headers. */
static bool wild_match(const char *pat, const char *s, bool icase)
{
    const char *star = strchr(pat, '*');
    if (!star)
        return icase ? strcasecmp(pat, s) == 0 : strcmp(pat, s) == 0;
    size_t pl = (size_t)(star - pat), sl = strlen(star + 1), n = strlen(s);
    if (n < pl + sl)
        return false;
    int (*cmp)(const char *, const char *, size_t) = icase ? strncasecmp : strncmp;
    return cmp(s, pat, pl) == 0 && cmp(s + n - sl, star + 1, sl) == 0;
}

/* Parse a CORSConfiguration. @return the rule count, or -1 with @p why set. */
static int parse(struct s3_arena *a, const char *doc, size_t len, struct cors_rule **out,
                 const char **why)
{
    struct s3_xnode *root = NULL;
    *why = S3_MSG_BAD_XML;
    if (!len || s3__xml_parse(a, doc, len, &root) || strcmp(root->name, "CORSConfiguration"))
        return -1;
    size_t n = 0;
    for (struct s3_xnode *r = root->child; r; r = r->next)
        n += strcmp(r->name, "CORSRule") == 0;
    if (n == 0 || n > CORS_MAX_RULES) {
        *why = "a CORS configuration has 1 to 100 CORSRule";
        return -1;
    }
    struct cors_rule *v = s3__arena_alloc(a, n * sizeof(*v));
    size_t i = 0;
    for (struct s3_xnode *r = root->child; r; r = r->next) {
        if (strcmp(r->name, "CORSRule") != 0)
            continue;
        struct cors_rule *c = &v[i++];
        c->maxage = -1;
        for (struct s3_xnode *f = r->child; f; f = f->next) {
            const char *t = f->text;
            bool stars = strchr(t, '*') && strchr(t, '*') != strrchr(t, '*');
            if (strcmp(f->name, "AllowedOrigin") == 0 && c->no < CORS_MAX_LIST && !stars)
                c->origins[c->no++] = t;
            else if (strcmp(f->name, "AllowedHeader") == 0 && c->nh < CORS_MAX_LIST && !stars)
                c->headers[c->nh++] = t;
            else if (strcmp(f->name, "ExposeHeader") == 0 && c->ne < CORS_MAX_LIST)
                c->expose[c->ne++] = t;
            else if (strcmp(f->name, "AllowedMethod") == 0 && method_bit(t))
                c->methods |= (unsigned)method_bit(t);
            else if (strcmp(f->name, "MaxAgeSeconds") == 0) {
                char *e = NULL;
                c->maxage = strtol(t, &e, 10);
                if (!*t || *e || c->maxage < 0)
                    return -1;
            } else if (strcmp(f->name, "ID") == 0 && f->textlen <= 255)
                c->id = t;
            else {
                *why = strcmp(f->name, "AllowedMethod") == 0
                           ? s3__arena_printf(a,
                                              "Found unsupported HTTP method in CORS config. "
                                              "Unsupported method is %s",
                                              t)
                           : S3_MSG_BAD_XML;
                return -1;
            }
        }
        if (!c->no || !c->methods) {
            *why = "a CORSRule needs at least one AllowedOrigin and one AllowedMethod";
            return -1;
        }
    }
    *out = v;
    return (int)n;
}

/* The normalized XML of @p n rules. */
static void rules_xml(struct evbuffer *b, const struct cors_rule *v, size_t n)
{
    evbuffer_add_printf(b, "<CORSConfiguration xmlns=\"%s\">", S3_XMLNS);
    for (size_t i = 0; i < n; i++) {
        const struct cors_rule *c = &v[i];
        evbuffer_add_printf(b, "<CORSRule>");
        if (c->id)
            s3__xml_elem(b, "ID", c->id);
        for (size_t k = 0; k < c->nh; k++)
            s3__xml_elem(b, "AllowedHeader", c->headers[k]);
        for (int m = 0; m < 5; m++)
            if (c->methods & (1u << m))
                s3__xml_elem(b, "AllowedMethod", METHODS[m]);
        for (size_t k = 0; k < c->no; k++)
            s3__xml_elem(b, "AllowedOrigin", c->origins[k]);
        for (size_t k = 0; k < c->ne; k++)
            s3__xml_elem(b, "ExposeHeader", c->expose[k]);
        if (c->maxage >= 0)
            evbuffer_add_printf(b, "<MaxAgeSeconds>%ld</MaxAgeSeconds>", c->maxage);
        evbuffer_add_printf(b, "</CORSRule>");
    }
    evbuffer_add_printf(b, "</CORSConfiguration>\n");
}

/* Do all of @p hdrs (a comma list, may be NULL) match the rule's AllowedHeaders? */
static bool headers_ok(struct s3_arena *a, const struct cors_rule *c, const char *hdrs)
{
    if (!hdrs)
        return true;
    char *l = s3__arena_strndup(a, hdrs, strlen(hdrs)), *save = NULL;
    for (char *h = strtok_r(l, ", \t", &save); h; h = strtok_r(NULL, ", \t", &save)) {
        bool ok = false;
        for (size_t k = 0; k < c->nh && !ok; k++)
            ok = wild_match(c->headers[k], h, true);
        if (!ok)
            return false;
    }
    return true;
}

/* The first rule of bucket x->b matching @p origin, @p method and @p hdrs, or NULL. */
static const struct cors_rule *match(struct s3_ctx *x, const char *origin, const char *method,
                                     const char *hdrs, bool *star)
{
    const struct s3_bcfg *cfg = &x->b.cfg;
    struct cors_rule *v;
    const char *why;
    int n = cfg->cors ? parse(x->a, cfg->cors, cfg->corslen, &v, &why) : -1;
    for (int i = 0; i < n; i++) {
        if (!(v[i].methods & (unsigned)method_bit(method)) || !headers_ok(x->a, &v[i], hdrs))
            continue;
        for (size_t k = 0; k < v[i].no; k++)
            if (wild_match(v[i].origins[k], origin, false)) {
                *star = strcmp(v[i].origins[k], "*") == 0;
                return &v[i];
            }
    }
    return NULL;
}

/* The CORS answer headers of rule @p c. */
static void answer(struct s3_ctx *x, const struct cors_rule *c, const char *origin, bool star,
                   const char *hdrs)
{
    struct evbuffer *m = evbuffer_new();
    s3__resp_header(x, "Access-Control-Allow-Origin", "%s", star ? "*" : origin);
    for (int i = 0; i < 5; i++)
        if (c->methods & (1u << i))
            evbuffer_add_printf(m, "%s%s", evbuffer_get_length(m) ? ", " : "", METHODS[i]);
    evbuffer_add(m, "", 1);
    s3__resp_header(x, "Access-Control-Allow-Methods", "%s", (const char *)evbuffer_pullup(m, -1));
    evbuffer_free(m);
    if (hdrs && *hdrs)
        s3__resp_header(x, "Access-Control-Allow-Headers", "%s", hdrs);
    if (c->ne) {
        m = evbuffer_new();
        for (size_t k = 0; k < c->ne; k++)
            evbuffer_add_printf(m, "%s%s", k ? ", " : "", c->expose[k]);
        evbuffer_add(m, "", 1);
        s3__resp_header(x, "Access-Control-Expose-Headers", "%s",
                        (const char *)evbuffer_pullup(m, -1));
        evbuffer_free(m);
    }
    if (c->maxage >= 0)
        s3__resp_header(x, "Access-Control-Max-Age", "%ld", c->maxage);
    if (!star)
        s3__resp_header(x, "Access-Control-Allow-Credentials", "true");
    s3__resp_header(x, "Vary",
                    "Origin, Access-Control-Request-Headers, Access-Control-Request-Method");
}

void s3__cors_actual(struct s3_ctx *x)
{
    const char *origin;
    bool star = false;
    if (!x->b.cfg.cors || !x->req || !(origin = s3__req_header(x->req, "origin")))
        return;
    const struct cors_rule *c = match(x, origin, x->req->method, NULL, &star);
    if (c)
        answer(x, c, origin, star, NULL);
}

bool s3__cors_get(struct s3_ctx *x)
{
    struct cors_rule *v;
    const char *why;
    int n = x->b.cfg.cors ? parse(x->a, x->b.cfg.cors, x->b.cfg.corslen, &v, &why) : -1;
    if (n < 0)
        return false;
    s3__resp_xml(x);
    rules_xml(x->out.body, v, (size_t)n);
    return true;
}

/* ---------------------------------------------------------------- operations */

static void put_cors(struct s3_ctx *x)
{
    struct cors_rule *v;
    const char *why;
    if (s3__op_bucket(x))
        return;
    size_t n = evbuffer_get_length(x->in.buf);
    const char *doc = (const char *)evbuffer_pullup(x->in.buf, (ssize_t)n);
    int nr = parse(x->a, doc, n, &v, &why);
    if (nr < 0) {
        s3__resp_err(x, SRV_EBADREQ, why);
        return;
    }
    struct evbuffer *b = evbuffer_new();
    rules_xml(b, v, (size_t)nr);
    size_t l = evbuffer_get_length(b);
    char *xml = s3__arena_alloc(x->a, l + 1);
    evbuffer_remove(b, xml, l);
    evbuffer_free(b);
    s3__bcfg_set(x, "cors", xml, l);
    if (s3__bcfg_save(x, -1) == 0)
        x->out.status = 200;
}

static void delete_cors(struct s3_ctx *x)
{
    if (s3__op_bucket(x))
        return;
    s3__bcfg_set(x, "cors", NULL, 0);
    if (s3__bcfg_save(x, -1) == 0)
        x->out.status = 204;
}

static void preflight(struct s3_ctx *x)
{
    const char *origin = s3__req_header(x->req, "origin");
    const char *method = s3__req_header(x->req, "access-control-request-method");
    const char *hdrs = s3__req_header(x->req, "access-control-request-headers");
    bool star = false;
    x->authz_done = true; /* a preflight is answered by the CORS rules alone */
    if (!origin || !method) {
        s3__resp_s3err(x, S3E_BAD_REQUEST,
                       "Insufficient information. Origin and Access-Control-Request-Method "
                       "request headers needed.");
        return;
    }
    if (s3__op_bucket(x))
        return;
    if (!x->b.cfg.cors) {
        s3__resp_s3err(x, S3E_ACCESS_FORBIDDEN,
                       "CORSResponse: CORS is not enabled for this "
                       "bucket.");
        return;
    }
    const struct cors_rule *c = match(x, origin, method, hdrs, &star);
    if (!c) {
        s3__resp_s3err(x, S3E_ACCESS_FORBIDDEN,
                       "CORSResponse: This CORS request is not allowed. This is usually because "
                       "the evaluation of Origin, request method / Access-Control-Request-Method "
                       "or Access-Control-Request-Headers are not whitelisted by the resource's "
                       "CORS spec.");
        return;
    }
    x->out.status = 200;
    answer(x, c, origin, star, hdrs);
}

const struct s3_op s3_op_put_cors = {.name = "PutBucketCors",
                                     .action = "s3:PutBucketCORS",
                                     .az = S3_AZ_B_OWNER,
                                     .body = S3_BODY_XML,
                                     .qos = QOS_META,
                                     .work = put_cors};
const struct s3_op s3_op_delete_cors = {.name = "DeleteBucketCors",
                                        .action = "s3:PutBucketCORS",
                                        .az = S3_AZ_B_OWNER,
                                        .qos = QOS_META,
                                        .work = delete_cors};
const struct s3_op s3_op_cors_preflight = {
    .name = "PreflightCors", .qos = QOS_META, .work = preflight};
