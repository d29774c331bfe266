/* SPDX-License-Identifier: Apache-2.0
 * s3_op_object: object operations — PutObject and UploadPart (streamed into a
 * core upload), GetObject/HeadObject (ranges, conditionals, response-*
 * overrides; bodies streamed by s3_conn), DeleteObject, DeleteObjects,
 * CopyObject and UploadPartCopy, object tagging; each of them on a version of
 * a versioned bucket (?versionId, the copy source's ?versionId) with the
 * version headers of s3_op_version.c.
 *
 * Object metadata (stored headers, x-amz-meta-*, tags, additional checksum)
 * travels in the core's opaque meta blob (s3_meta.c). ETag = hex MD5 of the
 * content, computed while the body streams; Content-MD5, a signed
 * x-amz-content-sha256 and x-amz-checksum-* (header or aws-chunked trailer)
 * are verified before commit, so a mismatch leaves nothing visible.
 * Thread: the work functions run on workers and touch only their context. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <openssl/evp.h>

#include "s3_internal.h"
#include "tier_upload.h"
#include "srv_err.h"

#define USER_META_MAX 2048
#define TAGS_MAX 10
#define COPY_CHUNK (1u << 20)
#define GET_RETRIES 8 /* lookups of a GET whose object kept being replaced */
#define PRECOND_MSG "at least one of the preconditions you specified did not hold"

/* Stored response headers, in the case they are sent back. */
static const char *const STORED_HDRS[] = {
    "Content-Type",
    "Content-Encoding",
    "Content-Disposition",
    "Cache-Control",
    "Expires",
    "Content-Language",
    NULL,
};

static const char *lower_of(struct s3_arena *a, const char *s)
{
    char *l = s3__arena_strndup(a, s, strlen(s));
    for (char *c = l; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    return l;
}

/* ---------------------------------------------------------------- metadata <-> headers */

static bool tag_ok(const char *k, size_t kl, size_t vl)
{
    return kl >= 1 && kl <= 128 && vl <= 256 && !(kl >= 4 && strncmp(k, "aws:", 4) == 0);
}

int s3__tags_parse_query(struct s3_arena *a, const char *s, struct s3_meta *m, const char **why)
{
    struct s3_req tmp;
    memset(&tmp, 0, sizeof(tmp));
    tmp.raw_query = (char *)s;
    /* borrow the query splitter: parse into the caller's arena */
    size_t cnt = 1;
    for (const char *c = s; *c; c++)
        cnt += *c == '&';
    const char *p = s;
    size_t n = 0;
    while (*p) {
        const char *amp = strchr(p, '&');
        size_t len = amp ? (size_t)(amp - p) : strlen(p);
        if (len) {
            const char *eq = memchr(p, '=', len);
            size_t kl0 = eq ? (size_t)(eq - p) : len, kl = 0, vl = 0;
            char *k = s3__url_decode(a, p, kl0, &kl);
            char *v =
                eq ? s3__url_decode(a, eq + 1, len - kl0 - 1, &vl) : s3__arena_strndup(a, "", 0);
            if (!k || !v || !tag_ok(k, kl, vl)) {
                *why = "the tag set is malformed or a tag key/value is too long";
                return -EINVAL;
            }
            if (s3__meta_find(m, S3_M_TAG, k)) {
                *why = "cannot provide multiple tags with the same key";
                return -EINVAL;
            }
            s3__meta_add(m, a, S3_M_TAG, k, kl, v, vl);
            if (++n > TAGS_MAX) {
                *why = "object tags cannot be greater than 10";
                return -EINVAL;
            }
        }
        if (!amp)
            break;
        p = amp + 1;
    }
    (void)cnt;
    return 0;
}

/* "aws-chunked" in Content-Encoding describes the upload framing, not the
 * object: drop it (as S3 does). @return the remaining codings, or NULL if none. */
static const char *strip_aws_chunked(struct s3_arena *a, const char *v)
{
    if (!strcasestr(v, "aws-chunked"))
        return v; /* as sent: "deflate, gzip" stays "deflate, gzip" */
    char *out = s3__arena_alloc(a, 2 * strlen(v) + 1);
    size_t n = 0;
    const char *p = v;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        size_t l = (size_t)(e - p);
        while (l && p[l - 1] == ' ')
            l--;
        if (l && !(l == 11 && strncasecmp(p, "aws-chunked", 11) == 0)) {
            if (n) {
                out[n++] = ',';
                out[n++] = ' ';
            }
            memcpy(out + n, p, l);
            n += l;
        }
        p = e;
    }
    out[n] = '\0';
    return n ? out : NULL;
}

/* Request headers that ask for a protection this server does not give
 * (encryption at rest): accepting and dropping them would tell the client its
 * data is protected when it is not, so they are refused with 501. Returns 0 or
 * -1 with the response set. */
static int refuse_unbuilt(struct s3_ctx *x)
{
    const struct s3_req *r = x->req;
    const char *why = NULL;
    for (size_t i = 0; !why && i < r->nhdrs; i++) {
        const char *n = r->hdrs[i].name;
        if (strncmp(n, "x-amz-server-side-encryption", 28) == 0)
            why = "server-side encryption is not implemented (data is stored unencrypted)";
    }
    if (!why)
        return 0;
    s3__resp_err(x, SRV_ENOTSUPP, why);
    return -1;
}

/* The ACL and owner of the object a write makes (x-amz-acl, x-amz-grant-*,
 * the bucket's ownership controls): its grants into @p m, its mode and owner
 * into x->p. Returns 0 or -1 with the response set. */
static int object_acl_of_req(struct s3_ctx *x, struct s3_meta *m)
{
    const struct s3_bcfg *cfg = &x->b.cfg;
    struct s3_acl acl;
    bool given;
    if (s3__acl_from_req(x, false, x->b.attr.uid, &acl, &given))
        return -1;
    bool bofc = given && acl.n == 1 && acl.g[0].kind == S3_GT_USER &&
                acl.g[0].uid == x->b.attr.uid && acl.g[0].perm == S3_P_FULL;
    if (cfg->ownership == S3_OWN_ENFORCED && acl.n && !bofc) {
        /* ACLs are off: only bucket-owner-full-control (or none) is accepted */
        s3__resp_s3err(x, S3E_ACL_NOT_SUPPORTED, NULL);
        return -1;
    }
    struct core_attr asked = {.mode = s3__acl_mode(&acl, false)};
    if ((cfg->pab & S3_PAB_BLOCK_ACLS) && s3__acl_is_public(&asked, &acl, false)) {
        s3__resp_err(x, -EACCES, "Access Denied (public ACLs are blocked on this bucket)");
        return -1;
    }
    if (cfg->ownership == S3_OWN_ENFORCED || (cfg->ownership == S3_OWN_PREFERRED && bofc)) {
        /* the bucket's owner owns what is written: the write is decided already */
        x->p.uid = x->b.attr.uid;
        x->p.gid = x->b.attr.gid;
        x->p.flags |= CORE_P_SUPER;
        acl.n = 0;
    } else if (x->id.flags & CORE_P_ANON) {
        /* an unsigned write (a public-read-write bucket): the bucket's owner owns it */
        x->p.uid = x->b.attr.uid;
        x->p.gid = x->b.attr.gid;
    }
    x->p.fmode = s3__acl_mode(&acl, false);
    for (size_t i = 0; i < acl.n; i++)
        if (acl.g[i].kind == S3_GT_USER && acl.g[i].uid == x->p.uid)
            acl.g[i].perm = 0; /* the owner's grant is its bits */
    s3__acl_store(m, x->a, &acl);
    return 0;
}

int s3__op_meta_from_req(struct s3_ctx *x, struct s3_meta *m)
{
    const struct s3_req *r = x->req;
    size_t user = 0;
    memset(m, 0, sizeof(*m));
    if (refuse_unbuilt(x) || object_acl_of_req(x, m))
        return -ENOTSUP;
    for (size_t i = 0; STORED_HDRS[i]; i++) {
        const char *v = s3__req_header(r, lower_of(x->a, STORED_HDRS[i]));
        if (v && strcmp(STORED_HDRS[i], "Content-Encoding") == 0)
            v = strip_aws_chunked(x->a, v);
        if (v)
            s3__meta_add(m, x->a, S3_M_HDR, STORED_HDRS[i], strlen(STORED_HDRS[i]), v, strlen(v));
    }
    for (size_t i = 0; i < r->nhdrs; i++) {
        const struct s3_hdr *h = &r->hdrs[i];
        if (strncmp(h->name, "x-amz-meta-", 11) != 0 || !h->name[11])
            continue;
        const char *k = h->name + 11;
        user += strlen(k) + h->vlen;
        const struct s3_meta_ent *prev = s3__meta_find(m, S3_M_USER, k);
        if (prev) {
            /* repeated header: values join with ',' as HTTP does */
            char *j = s3__arena_printf(x->a, "%s,%s", prev->val, h->val);
            ((struct s3_meta_ent *)prev)->val = j;
            ((struct s3_meta_ent *)prev)->vlen = strlen(j);
        } else {
            s3__meta_add(m, x->a, S3_M_USER, k, strlen(k), h->val, h->vlen);
        }
    }
    if (user > USER_META_MAX) {
        s3__resp_s3err(x, S3E_METADATA_TOO_LARGE, NULL);
        return -EINVAL;
    }
    const char *tagging = s3__req_header(r, "x-amz-tagging");
    if (tagging) {
        const char *why = NULL;
        if (s3__tags_parse_query(x->a, tagging, m, &why)) {
            s3__resp_s3err(x, S3E_INVALID_TAG, why);
            return -EINVAL;
        }
    }
    return 0;
}

/* A user metadata value as a header carries it: as stored when it is printable
 * US-ASCII, else RFC 2047-encoded ("=?UTF-8?B?...?="), as AWS returns it. */
static const char *meta_value(struct s3_arena *a, const struct s3_meta_ent *e)
{
    bool plain = true;
    for (size_t i = 0; i < e->vlen && plain; i++)
        plain = (unsigned char)e->val[i] >= 0x20 && (unsigned char)e->val[i] < 0x7f;
    if (plain)
        return e->val;
    char *b = s3__arena_alloc(a, 4 * (e->vlen / 3 + 2) + 16);
    memcpy(b, "=?UTF-8?B?", 10);
    s3__b64_encode((const unsigned char *)e->val, e->vlen, b + 10);
    strcat(b, "?=");
    return b;
}

/* x-amz-meta-* response headers of @p m. */
static void user_meta_resp(struct s3_ctx *x, const struct s3_meta *m)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->ents[i].type == S3_M_USER)
            evbuffer_add_printf(x->out.hdrs, "x-amz-meta-%s: %s\r\n", m->ents[i].key,
                                meta_value(x->a, &m->ents[i]));
}

void s3__op_meta_to_resp(struct s3_ctx *x, const struct s3_meta *m)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->ents[i].type == S3_M_HDR)
            s3__resp_header(x, m->ents[i].key, "%s", m->ents[i].val);
    user_meta_resp(x, m);
}

/* ---------------------------------------------------------------- conditionals */

/* Does entity-tag list @p list ("*", "\"a\", W/\"b\"") match @p etag (no quotes)? */
static bool etag_match(const char *list, const char *etag)
{
    size_t el = strlen(etag);
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\t')
            p++;
        if (!*p)
            break;
        if (*p == '*')
            return true;
        if (p[0] == 'W' && p[1] == '/')
            p += 2;
        bool q = *p == '"';
        if (q)
            p++;
        const char *s = p;
        while (*p && (q ? *p != '"' : (*p != ',' && *p != ' ')))
            p++;
        if ((size_t)(p - s) == el && memcmp(s, etag, el) == 0)
            return true;
        if (q && *p == '"')
            p++;
    }
    return false;
}

/* @return 0, 412 or 304 (GET/HEAD only). @p pfx is "" or "x-amz-copy-source-". */
static int cond_eval(struct s3_ctx *x, const char *pfx, const char *etag,
                     const struct timespec *mtime, bool allow_304)
{
    char b1[64], b2[64], b3[64], b4[64];
    const char *n1 = "if-match", *n2 = "if-none-match", *n3 = "if-unmodified-since",
               *n4 = "if-modified-since";
    if (*pfx) {
        snprintf(b1, sizeof(b1), "%s%s", pfx, n1);
        snprintf(b2, sizeof(b2), "%s%s", pfx, n2);
        snprintf(b3, sizeof(b3), "%s%s", pfx, n3);
        snprintf(b4, sizeof(b4), "%s%s", pfx, n4);
        n1 = b1;
        n2 = b2;
        n3 = b3;
        n4 = b4;
    }
    const char *im = s3__req_header(x->req, n1), *inm = s3__req_header(x->req, n2);
    const char *ius = s3__req_header(x->req, n3), *ims = s3__req_header(x->req, n4);
    time_t t;
    if (im) {
        if (!etag_match(im, etag))
            return 412;
    } else if (ius && srv_http_date_parse(ius, &t) == 0 && mtime->tv_sec > t) {
        return 412;
    }
    if (inm) {
        if (etag_match(inm, etag))
            return allow_304 ? 304 : 412;
    } else if (ims && srv_http_date_parse(ims, &t) == 0 && mtime->tv_sec <= t) {
        return allow_304 ? 304 : 412;
    }
    return 0;
}

static void cond_fail(struct s3_ctx *x, int st, const char *etag, const struct timespec *mtime)
{
    if (st == 304) {
        char d[32];
        x->out.status = 304;
        s3__http_date_fmt(mtime->tv_sec, d);
        s3__resp_header(x, "ETag", "\"%s\"", etag);
        s3__resp_header(x, "Last-Modified", "%s", d);
        x->out.err = SRV_EPRECOND;
        return;
    }
    s3__resp_err(x, SRV_EPRECOND, PRECOND_MSG);
}

/* ---------------------------------------------------------------- object lookup */

struct obj {
    struct core_objinfo info;
    struct s3_meta meta;
    const char *etag;
    bool dir;
};

/* The result @p rc of a key lookup in bucket @p b whose info is in o->info:
 * decode the metadata, apply the directory rules, then decide @p action
 * checked as @p az (an object check: on the object found; a missing key
 * answers 404 only to who may list the bucket). @return 0, or responds
 * (NoSuchKey, AccessDenied ...) and returns < 0. */
static int obj_found(struct s3_ctx *x, struct s3_bref *b, const char *key, size_t keylen,
                     struct obj *o, int rc, bool is_source, const char *action, enum s3_az az)
{
    if (rc == 0 && o->info.dmarker) {
        /* a version id naming a delete marker (decided as the version it names) */
        free(o->info.meta);
        o->info.meta = NULL;
        if (s3__authz(x, b, action, az >= S3_AZ_O_READ ? S3_AZ_B_READ : az, NULL, NULL))
            return -EACCES;
        if (is_source) {
            s3__resp_s3err(x, S3E_INVALID_REQUEST,
                           "the source of a copy request may not specifically refer to a delete "
                           "marker by version id");
            return -EINVAL;
        }
        char d[32];
        s3__resp_s3err(x, S3E_METHOD_NOT_ALLOWED,
                       "the specified method is not allowed against a delete marker");
        s3__http_date_fmt(o->info.attr.mtime.tv_sec, d);
        s3__resp_header(x, "Last-Modified", "%s", d);
        s3__resp_version(x, &o->info);
        return -EINVAL;
    }
    if (rc == 0) {
        o->dir = o->info.attr.type == CORE_DIR;
        if (o->dir && (keylen == 0 || key[keylen - 1] != '/'))
            rc = -ENOENT; /* "a" where only "a/..." exists */
        else if (!o->dir && o->info.attr.type != CORE_REG)
            rc = -ENOENT;
    }
    if (rc == 0 && s3__meta_decode(&o->meta, x->a, o->info.meta, o->info.metalen) != 0)
        memset(&o->meta, 0, sizeof(o->meta)); /* unreadable blob: serve the data, drop meta */
    free(o->info.meta);
    o->info.meta = NULL;
    if (rc == -ENOENT || rc == SRV_ESTALE || rc == -ENOTDIR) {
        struct core_principal keep = x->p;
        rc = s3__authz(x, b, "s3:ListBucket", S3_AZ_B_READ, NULL, NULL);
        x->p = keep;
        if (rc == 0) {
            s3__resp_err(x, -ENOENT,
                         is_source ? "the specified copy source key does not exist"
                                   : "the specified key does not exist");
            if (o->info.dmarker && !is_source)
                s3__resp_version(x, &o->info); /* its newest version is a delete marker */
        }
        return rc ? -EACCES : -ENOENT;
    }
    if (rc == SRV_ENOVERSION || rc == -EINVAL) {
        /* as a missing key: only to a requester who may list the bucket's versions */
        struct core_principal keep = x->p;
        int ok = s3__authz(x, b, "s3:ListBucketVersions", S3_AZ_B_READ, NULL, NULL);
        x->p = keep;
        if (ok)
            return -EACCES;
        s3__resp_err(x, rc, rc == -EINVAL ? "invalid version id specified" : NULL);
        return rc;
    }
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return rc;
    }
    if (az >= S3_AZ_O_READ && s3__authz(x, b, action, az, &o->info.attr, &o->meta))
        return -EACCES;
    o->etag = o->dir || !o->info.etag[0] ? S3_EMPTY_MD5 : o->info.etag;
    if (o->dir)
        o->info.attr.size = 0;
    return 0;
}

/* The ?versionId of the request, or NULL. */
static const char *req_vid(struct s3_ctx *x)
{
    return s3__req_param(x->req, "versionId");
}

/* Look version @p vid (NULL: the current one) of @p key up in bucket @p b (elevated:
 * obj_found decides, on @p action's version form for a version), then as obj_found.
 * @return 0, or responds (NoSuchKey, NoSuchVersion, 405 for a delete marker, ...) and
 * returns < 0. */
static int obj_lookup(struct s3_ctx *x, struct s3_bref *b, const char *key, size_t keylen,
                      const char *vid, struct obj *o, bool is_source, const char *action,
                      enum s3_az az, int64_t read_at)
{
    struct core_principal sp = s3__super(x);
    memset(o, 0, sizeof(*o));
    int rc = vid ? core_version_lookup(x->core, &sp, b->ino, key, keylen, vid, &o->info)
                 : core_key_lookup_at(x->core, &sp, b->ino, key, keylen, read_at, &o->info);
    if (vid)
        action = s3__version_action(action);
    return obj_found(x, b, key, keylen, o, rc, is_source, action, az);
}

/* The request's object (its ?versionId), for an operation checked on it (x->rt.op's
 * action). */
static int op_object_at(struct s3_ctx *x, struct obj *o, int64_t read_at)
{
    if (s3__op_bucket(x))
        return -1;
    return obj_lookup(x, &x->b, x->rt.key, x->rt.keylen, req_vid(x), o, false, x->rt.op->action,
                      x->rt.op->az, read_at);
}

static int op_object(struct s3_ctx *x, struct obj *o)
{
    return op_object_at(x, o, CORE_READ_NONE);
}

int s3__op_object(struct s3_ctx *x, struct core_objinfo *info, struct s3_meta *meta)
{
    struct obj o;
    int rc = op_object(x, &o);
    if (rc == 0) {
        *info = o.info;
        *meta = o.meta;
        info->meta = NULL;
    }
    return rc;
}

/* ---------------------------------------------------------------- GET / HEAD */

/* Parse "bytes=a-b" / "bytes=a-" / "bytes=-n" against @p size.
 * @return 1 (range set), 0 (no usable range: whole object), -1 (unsatisfiable). */
static int range_parse(const char *h, uint64_t size, uint64_t *off, uint64_t *end)
{
    if (!h || strncmp(h, "bytes=", 6) != 0 || strchr(h, ','))
        return 0;
    const char *p = h + 6;
    char *e = NULL;
    if (*p == '-') {
        unsigned long long n = strtoull(p + 1, &e, 10);
        if (e == p + 1 || *e)
            return 0;
        if (n == 0)
            return -1;
        *off = n >= size ? 0 : size - n;
        *end = size;
        return size ? 1 : -1;
    }
    unsigned long long a = strtoull(p, &e, 10);
    if (e == p || *e != '-')
        return 0;
    const char *q = e + 1;
    unsigned long long b = UINT64_MAX;
    if (*q) {
        b = strtoull(q, &e, 10);
        if (e == q || *e || b < a)
            return 0;
    }
    if (a >= size)
        return -1;
    *off = a;
    *end = b >= size ? size : b + 1;
    return 1;
}

/* Offset and end of part @p n in run-length coded sizes "size*count,size,...".
 * @return 0, -ERANGE (no such part, or the sizes do not add up to @p total). */
static int part_bounds(const char *sizes, uint32_t n, uint64_t total, uint64_t *off, uint64_t *end)
{
    uint64_t pos = 0;
    uint32_t part = 1;
    const char *p = sizes;
    while (*p) {
        char *e = NULL;
        unsigned long long sz = strtoull(p, &e, 10), run = 1;
        if (e == p)
            return -ERANGE;
        if (*e == '*') {
            p = e + 1;
            run = strtoull(p, &e, 10);
            if (e == p || run == 0)
                return -ERANGE;
        }
        if (*e != ',' && *e != '\0')
            return -ERANGE;
        if (n < part + run) {
            *off = pos + (uint64_t)(n - part) * sz;
            *end = *off + sz;
            return *end <= total && *end > *off ? 0 : -ERANGE;
        }
        pos += run * sz;
        part += (uint32_t)run;
        p = *e ? e + 1 : e;
    }
    return -ERANGE;
}

/* GET/HEAD with ?partNumber: the byte range of that part of a multipart
 * object (its sizes are recorded at completion, tied to its ETag), or the
 * whole object as its only part. @return 1 (range set), 0 (whole object),
 * or responds and returns -1. */
static int part_range(struct s3_ctx *x, const struct obj *o, const char *pn, uint64_t *off,
                      uint64_t *end)
{
    char *e = NULL;
    long n = strtol(pn, &e, 10);
    if (!*pn || *e || n < 1 || n > 10000) {
        s3__resp_err(x, -EINVAL, "part number must be an integer between 1 and 10000, inclusive");
        return -1;
    }
    if (s3__req_header(x->req, "range")) {
        s3__resp_s3err(x, S3E_INVALID_REQUEST,
                       "cannot specify both Range header and partNumber query parameter");
        return -1;
    }
    const struct s3_meta_ent *cnt = s3__meta_find(&o->meta, S3_M_PARTS, "count");
    const struct s3_meta_ent *sizes = s3__meta_find(&o->meta, S3_M_PARTS, "sizes");
    const struct s3_meta_ent *petag = s3__meta_find(&o->meta, S3_M_PARTS, "etag");
    /* parts recorded for another ETag: the content was rewritten (NFS) since */
    bool multipart = cnt && strchr(o->etag, '-') && (!petag || strcmp(petag->val, o->etag) == 0);
    if (!multipart) {
        if (n == 1)
            return 0;
        s3__resp_s3err(x, S3E_INVALID_PART_NUMBER, NULL);
        return -1;
    }
    if (!sizes || !petag) {
        s3__resp_err(x, SRV_ENOTSUPP,
                     "this multipart object was completed before part sizes were recorded; "
                     "GET by partNumber is not available for it");
        return -1;
    }
    if (n > strtol(cnt->val, NULL, 10) ||
        part_bounds(sizes->val, (uint32_t)n, o->info.attr.size, off, end) != 0) {
        s3__resp_s3err(x, S3E_INVALID_PART_NUMBER, NULL);
        return -1;
    }
    return 1;
}

/* x-s3nfs-tier-state (local, uploading, uploaded, evicted) of a file of a tiered bucket,
 * and for an uploaded or evicted one the remote's ETag and when it was confirmed (tiering.md). */
static void tier_state_resp(struct s3_ctx *x, const struct obj *o)
{
    struct tier_upload *u = tier_upload_default();
    struct tier_file_info ti;
    if (!u || o->dir || o->info.attr.type != CORE_REG || !x->b.key ||
        s3__req_param(x->req, "versionId") ||
        tier_upload_state(u, x->b.ino, o->info.attr.ino, o->info.attr.change, x->b.key, x->b.keylen,
                          &ti) != 0 ||
        ti.state == TIER_STATE_NONE)
        return;
    s3__resp_hdr(x, "x-s3nfs-tier-state", tier_file_state_name(ti.state));
    if (ti.state == TIER_STATE_UPLOADED || (ti.state == TIER_STATE_EVICTED && ti.etag[0])) {
        char d[32];
        s3__http_date_fmt((time_t)ti.time_s, d);
        s3__resp_header(x, "x-s3nfs-tier-etag", "\"%s\"", ti.etag);
        s3__resp_header(x, "x-s3nfs-tier-time", "%s", d);
    }
}

/* Forget a half-built GET/HEAD response (before looking the key up again). */
static void get_reset(struct s3_ctx *x)
{
    evbuffer_drain(x->out.hdrs, evbuffer_get_length(x->out.hdrs));
    evbuffer_drain(x->out.body, evbuffer_get_length(x->out.body));
    x->out.status = 0;
    x->out.err = 0;
    x->get.stream = false;
    x->get.need_data = false;
}

/* Headers of a GET/HEAD of @p o and the plan for its body: from @p data
 * (the whole content, when the lookup brought it) or, with x->get.need_data
 * set, from a data step (get_data). Errors and 304/412 are responded. */
static void get_respond(struct s3_ctx *x, const struct obj *o, const char *data)
{
    const struct core_attr *at = &o->info.attr;
    int st = cond_eval(x, "", o->etag, &at->mtime, true);
    if (st) {
        cond_fail(x, st, o->etag, &at->mtime);
        return;
    }
    uint64_t size = at->size, off = 0, end = size;
    int rr;
    const char *pn = s3__req_param(x->req, "partNumber");
    if (pn) {
        rr = part_range(x, o, pn, &off, &end);
        if (rr < 0)
            return;
    } else {
        rr = range_parse(s3__req_header(x->req, "range"), size, &off, &end);
    }
    if (rr < 0) {
        s3__resp_err(x, -ERANGE, "the requested range is not satisfiable");
        s3__resp_header(x, "Content-Range", "bytes */%" PRIu64, size);
        return;
    }
    char d[32];
    s3__http_date_fmt(at->mtime.tv_sec, d);
    x->out.status = rr ? 206 : 200;
    char qetag[CORE_ETAG_MAX + 3];
    size_t el = strnlen(o->etag, CORE_ETAG_MAX);
    qetag[0] = '"';
    memcpy(qetag + 1, o->etag, el);
    memcpy(qetag + 1 + el, "\"", 2);
    s3__resp_hdr(x, "ETag", qetag);
    s3__resp_header(x, "Last-Modified", "%s", d);
    s3__resp_header(x, "Accept-Ranges", "bytes");
    s3__resp_version(x, &o->info);
    if (rr)
        s3__resp_header(x, "Content-Range", "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, end - 1,
                        size);
    /* stored headers, unless a response-* parameter overrides them */
    static const struct {
        const char *param, *hdr;
    } over[] = {
        {"response-content-type", "Content-Type"},
        {"response-content-language", "Content-Language"},
        {"response-expires", "Expires"},
        {"response-cache-control", "Cache-Control"},
        {"response-content-disposition", "Content-Disposition"},
        {"response-content-encoding", "Content-Encoding"},
    };
    bool have_ct = false;
    for (size_t i = 0; i < o->meta.n; i++) {
        const struct s3_meta_ent *e = &o->meta.ents[i];
        if (e->type != S3_M_HDR)
            continue;
        bool overridden = false;
        for (size_t j = 0; j < sizeof(over) / sizeof(over[0]); j++)
            if (strcasecmp(e->key, over[j].hdr) == 0 && s3__req_param(x->req, over[j].param))
                overridden = true;
        if (strcasecmp(e->key, "Content-Type") == 0)
            have_ct = true;
        if (!overridden)
            s3__resp_header(x, e->key, "%s", e->val);
    }
    for (size_t j = 0; j < sizeof(over) / sizeof(over[0]); j++) {
        const char *v = s3__req_param(x->req, over[j].param);
        if (v) {
            s3__resp_header(x, over[j].hdr, "%s", v);
            if (j == 0)
                have_ct = true;
        }
    }
    if (!have_ct)
        s3__resp_header(x, "Content-Type", "%s",
                        o->dir ? "application/x-directory" : "binary/octet-stream");
    user_meta_resp(x, &o->meta);
    tier_state_resp(x, o);
    if (o->info.attr.flags & CORE_A_EVICTED) {
        /* AWS sends it for every class but STANDARD */
        const char *sc = s3__storage_class(x, x->b.ino, &o->info.attr, NULL);
        if (strcmp(sc, "STANDARD") != 0)
            s3__resp_header(x, "x-amz-storage-class", "%s", sc);
    }
    size_t ntags = s3__meta_count(&o->meta, S3_M_TAG);
    if (ntags)
        s3__resp_header(x, "x-amz-tagging-count", "%zu", ntags);
    const char *cm = s3__req_header(x->req, "x-amz-checksum-mode");
    /* a checksum belongs to the content it was computed over: after an NFS
     * rewrite (new ETag) it is stale and not sent */
    const struct s3_meta_ent *ck_etag = s3__meta_find(&o->meta, S3_M_CKSUM, "etag");
    bool ck_valid = !ck_etag || strcmp(ck_etag->val, o->etag) == 0;
    if (cm && strcasecmp(cm, "ENABLED") == 0 && !rr && ck_valid)
        for (size_t i = 0; i < o->meta.n; i++)
            if (o->meta.ents[i].type == S3_M_CKSUM) {
                enum s3_ck_algo al = s3__ck_from_name(o->meta.ents[i].key);
                if (al)
                    s3__resp_header(x, s3__ck_header(al), "%s", o->meta.ents[i].val);
            }
    const struct s3_meta_ent *parts = s3__meta_find(&o->meta, S3_M_PARTS, "count");
    if (parts && strchr(o->etag, '-'))
        s3__resp_header(x, "x-amz-mp-parts-count", "%s", parts->val);
    x->get.stream = true;
    x->get.ino = at->ino;
    x->get.off = off;
    x->get.next = off;
    x->get.end = end;
    if (x->out.head || end == off)
        return;
    if (data) {
        evbuffer_add(x->out.body, data + off, (size_t)(end - off));
        x->get.stream = false;
        return;
    }
    x->get.need_data = true;
}

/* The data step of a GET: a small body is read here; a larger one streams,
 * zero-copy (no TLS) in one window when it fits, which needs no hold (the
 * window's store read token keeps its extents), else held with core_ref
 * across its windows or reads. @return 0 (done, or an error was responded),
 * SRV_ESTALE: the object went away since its lookup (look it up again). */
static bool zc_one(const struct s3_ctx *x)
{
    return !x->tls && x->get.end - x->get.off > S3_ZC_MIN && x->get.end - x->get.off <= S3_ZC_ONE;
}

static int get_data(struct s3_ctx *x)
{
    uint64_t off = x->get.off, end = x->get.end;
    x->get.need_data = false;
    /* under QoS every byte is admitted before it is read: a GET then streams,
     * held, in pieces (s3_get.c), whatever its size */
    if (zc_one(x) && !x->qos.applies)
        return 0; /* streamed in one zero-copy window (s3_conn.c) */
    if (end - off <= COPY_CHUNK && !x->qos.applies) {
        /* small: one read here, no inode hold needed */
        size_t n = (size_t)(end - off), got = 0;
        bool eof = false;
        struct evbuffer_iovec v;
        if (evbuffer_reserve_space(x->out.body, (ssize_t)n, &v, 1) < 1) {
            s3__resp_err(x, -ENOMEM, NULL);
            return 0;
        }
        int rc = core_read(x->core, &x->p, x->get.ino, off, v.iov_base, n, &got, &eof);
        if (rc == SRV_ESTALE || rc == -ENOENT || (rc == 0 && got != n))
            return SRV_ESTALE; /* replaced, removed or cut meanwhile */
        if (rc) {
            s3__resp_err(x, rc, NULL);
            return 0;
        }
        v.iov_len = n;
        evbuffer_commit_space(x->out.body, &v, 1);
        x->get.stream = false;
        return 0;
    }
    int rc = core_ref(x->core, x->get.ino);
    if (rc == SRV_ESTALE || rc == -ENOENT)
        return SRV_ESTALE;
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return 0;
    }
    x->get.ref_held = true;
    return 0;
}

/* Where a GET's bytes start, for its lookup (core_key_lookup_at: an object of a cache
 * bucket whose metadata was never asked takes it from the recall of that byte's chunk,
 * not from a HEAD): the Range's first byte (negative: a suffix of that many bytes), 0 for
 * the whole object or its first part, CORE_READ_NONE for a HEAD or a later part. */
static int64_t get_read_at(struct s3_ctx *x)
{
    if (x->out.head)
        return CORE_READ_NONE;
    const char *pn = s3__req_param(x->req, "partNumber");
    if (pn)
        return strcmp(pn, "1") == 0 ? 0 : CORE_READ_NONE;
    const char *h = s3__req_header(x->req, "range");
    if (!h || strncmp(h, "bytes=", 6) != 0 || strchr(h, ','))
        return 0;
    const char *p = h + (h[6] == '-' ? 7 : 6);
    char *e = NULL;
    unsigned long long v = strtoull(p, &e, 10);
    if (e == p || v > (unsigned long long)INT64_MAX)
        return 0;
    if (h[6] == '-')
        return v ? -(int64_t)v : 0;
    return *e == '-' ? (int64_t)v : 0;
}

/* Worker: the whole GET/HEAD. An object replaced between its lookup and the
 * read of its data (an NFS rename over it, a PUT) is looked up again, so the
 * client always gets one whole version. */
static void get_or_head(struct s3_ctx *x)
{
    for (int tries = 0; tries < GET_RETRIES; tries++) {
        struct obj o;
        if (tries)
            get_reset(x);
        if (op_object_at(x, &o, get_read_at(x)))
            return;
        x->p = s3__super(x); /* decided on the object: its reads need no other check */
        get_respond(x, &o, NULL);
        if (!x->get.need_data || get_data(x) != SRV_ESTALE)
            return;
    }
    get_reset(x);
    s3__resp_s3err(x, S3E_SERVICE_UNAVAILABLE, NULL);
}

void s3__get_again_work(struct s3_ctx *x)
{
    get_reset(x);
    get_or_head(x);
}

void s3__get_data_work(struct s3_ctx *x)
{
    if (get_data(x) == SRV_ESTALE) {
        get_reset(x);
        get_or_head(x);
    }
}

enum s3_fast s3__get_fast(struct s3_ctx *x)
{
    char buf[S3_PEEK_MAX];
    struct core_peek pk;
    struct obj o;
    if (req_vid(x))
        return S3_FAST_NO; /* a version: the worker looks it up */
    memset(&o, 0, sizeof(o));
    struct core_principal sp = s3__super(x); /* obj_found decides */
    /* under QoS no content comes with the lookup: it is read once admitted */
    int rc = core_key_peek(x->core, &sp, x->rt.bucket, x->rt.bucketlen, x->rt.key, x->rt.keylen,
                           buf, x->out.head || x->qos.applies ? 0 : sizeof(buf), &pk);
    if (rc == -EAGAIN) {
        free(pk.bmeta);
        return S3_FAST_NO;
    }
    if (rc == SRV_ENOBUCKET) {
        s3__resp_err(x, rc, "the specified bucket does not exist");
        return S3_FAST_DONE;
    }
    x->b.name = x->rt.bucket;
    x->b.namelen = x->rt.bucketlen;
    x->b.key = x->rt.key;
    x->b.keylen = x->rt.keylen;
    s3__bref_peeked(x, &pk);
    free(pk.bmeta);
    x->bucket_ino = pk.bucket;
    o.info = pk.info;
    if (obj_found(x, &x->b, x->rt.key, x->rt.keylen, &o, rc, false, "s3:GetObject", S3_AZ_O_READ))
        return S3_FAST_DONE;
    x->p = sp;
    get_respond(x, &o, pk.data ? buf : NULL);
    if (x->get.need_data && zc_one(x) && !x->qos.applies)
        x->get.need_data = false; /* its one window is the only worker step */
    return x->get.need_data ? S3_FAST_DATA : S3_FAST_DONE;
}

/* ---------------------------------------------------------------- uploads (PutObject, UploadPart)
 */

struct put_st {
    struct s3_meta meta;
    struct core_lock lock; /* x-amz-object-lock-* (with has_lock) */
    bool has_lock;
    char vid[CORE_VID_MAX + 1];
    char md5_expect[33];
    const char *if_match;
    bool if_none_match;
    enum s3_ck_algo ck;
    bool ck_trailer;
    uint32_t partno;
    const char *upload_id;
};

/* Headers shared by PutObject and UploadPart: Content-MD5 and checksums. */
static int upload_prepare(struct s3_ctx *x, struct put_st *st)
{
    const struct s3_req *r = x->req;
    const char *cmd5 = s3__req_header(r, "content-md5");
    if (cmd5) {
        unsigned char raw[64];
        size_t l = strlen(cmd5);
        if (l > 80 || s3__b64_decode(cmd5, l, raw) != 16) {
            s3__resp_s3err(x, S3E_INVALID_DIGEST, NULL);
            return -1;
        }
        srv_sigv4_hex(raw, 16, st->md5_expect);
    }
    for (size_t i = 0; i < r->nhdrs; i++) {
        enum s3_ck_algo a = s3__ck_from_header(r->hdrs[i].name);
        if (!a)
            continue;
        if (st->ck) {
            s3__resp_s3err(x, S3E_INVALID_REQUEST, "expecting a single x-amz-checksum- header");
            return -1;
        }
        st->ck = a;
        snprintf(x->in.cks_expect, sizeof(x->in.cks_expect), "%s", r->hdrs[i].val);
    }
    const char *trailer = s3__req_header(r, "x-amz-trailer");
    if (trailer && !st->ck) {
        enum s3_ck_algo a = s3__ck_from_header(trailer);
        if (!a || !x->in.aws_chunked) {
            s3__resp_s3err(x, S3E_INVALID_REQUEST,
                           "x-amz-trailer names an unsupported checksum or the body is not "
                           "aws-chunked");
            return -1;
        }
        st->ck = a;
        st->ck_trailer = true;
    }
    if (!st->ck) {
        const char *alg = s3__req_header(r, "x-amz-sdk-checksum-algorithm");
        if (alg && !s3__ck_from_name(alg)) {
            s3__resp_err(x, SRV_ENOTSUPP,
                         s3__arena_printf(x->a, "checksum algorithm %s is not implemented", alg));
            return -1;
        }
    }
    if (st->ck)
        s3__ck_init(&x->in.cks, st->ck);
    return 0;
}

static void put_begin(struct s3_ctx *x)
{
    struct put_st *st = s3__arena_alloc(x->a, sizeof(*st));
    x->opdata = st;
    if (s3__op_bucket(x) || s3__op_meta_from_req(x, &st->meta) ||
        s3__lock_from_req(x, &st->lock, &st->has_lock) || upload_prepare(x, st))
        return;
    const char *im = s3__req_header(x->req, "if-match");
    const char *inm = s3__req_header(x->req, "if-none-match");
    if (inm && strcmp(inm, "*") != 0) {
        s3__resp_err(x, SRV_ENOTSUPP, "If-None-Match on PUT supports only '*'");
        return;
    }
    st->if_none_match = inm != NULL;
    if (im) {
        /* strip quotes: the core compares bare hex */
        size_t l = strlen(im);
        if (l >= 2 && im[0] == '"' && im[l - 1] == '"')
            im = s3__arena_strndup(x->a, im + 1, l - 2);
        st->if_match = im;
    }
    uint64_t hint = x->in.decoded_len >= 0 ? (uint64_t)x->in.decoded_len
                    : x->req->has_clen     ? x->req->content_length
                                           : UINT64_MAX;
    int rc = core_upload_begin(x->core, &x->p, x->bucket_ino, hint, &x->wr.up);
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    struct core_putopt opt = {st->has_lock ? &st->lock : NULL, st->vid};
    core_upload_set_opt(x->wr.up, &opt);
}

/* After the last byte: verify digests. @return 0 or responds and returns < 0. */
static int upload_verify(struct s3_ctx *x, struct put_st *st, char etag[33], char *ckval)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    srv_md5_final(&x->in.md5, md);
    srv_sigv4_hex(md, 16, etag);
    if (x->in.sha256) {
        char hex[65];
        EVP_DigestFinal_ex(x->in.sha256, md, &n);
        srv_sigv4_hex(md, 32, hex);
        if (!srv_sigv4_equal(hex, x->auth.sig.payload_hash, 64)) {
            s3__resp_s3err(x, S3E_CONTENT_SHA256_MISMATCH,
                           "the provided x-amz-content-sha256 header does not match what was "
                           "computed");
            return -1;
        }
    }
    if (st->md5_expect[0] && strcmp(st->md5_expect, etag) != 0) {
        s3__resp_s3err(x, S3E_BAD_DIGEST, NULL);
        return -1;
    }
    ckval[0] = '\0';
    if (st->ck) {
        s3__ck_final(&x->in.cks, ckval);
        const char *want = st->ck_trailer ? x->in.ck->d.ck_value : x->in.cks_expect;
        if (st->ck_trailer && strcasecmp(x->in.ck->d.ck_name, s3__ck_header(st->ck)) != 0) {
            s3__resp_s3err(x, S3E_INVALID_REQUEST,
                           "the trailer did not carry the announced checksum");
            return -1;
        }
        if (strcmp(want, ckval) != 0) {
            s3__resp_s3err(x, S3E_BAD_DIGEST,
                           s3__arena_printf(x->a,
                                            "the %s you specified did not match the "
                                            "calculated checksum",
                                            s3__ck_header(st->ck)));
            return -1;
        }
    }
    return 0;
}

static void put_finish(struct s3_ctx *x)
{
    struct put_st *st = x->opdata;
    char etag[33], ckval[100];
    if (upload_verify(x, st, etag, ckval))
        return;
    if (st->ck) {
        s3__meta_add(&st->meta, x->a, S3_M_CKSUM, s3__ck_name(st->ck), strlen(s3__ck_name(st->ck)),
                     ckval, strlen(ckval));
        s3__meta_add(&st->meta, x->a, S3_M_CKSUM, "etag", 4, etag, strlen(etag));
    }
    void *blob = NULL;
    size_t bloblen = 0;
    int rc = s3__meta_encode(&st->meta, &blob, &bloblen);
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    struct core_attr attr;
    struct core_upload *up = x->wr.up;
    x->wr.up = NULL; /* commit frees it whatever the result */
    rc = core_upload_commit(up, x->rt.key, x->rt.keylen, etag, blob, bloblen, st->if_match,
                            st->if_none_match, &attr);
    free(blob);
    if (rc == SRV_EPRECOND) {
        s3__resp_err(x, rc, PRECOND_MSG);
        return;
    }
    if (rc == SRV_ECLASH) {
        s3__resp_err(x, rc, "the key would make a file where a directory is, or the reverse");
        return;
    }
    if (rc == -ENOENT && st->if_match) {
        s3__resp_err(x, -ENOENT, "the specified key does not exist (If-Match)");
        return;
    }
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    x->out.status = 200;
    s3__resp_header(x, "ETag", "\"%s\"", etag);
    if (st->vid[0])
        s3__resp_hdr(x, "x-amz-version-id", st->vid);
    if (st->ck)
        s3__resp_header(x, s3__ck_header(st->ck), "%s", ckval);
}

static int parse_partno(struct s3_ctx *x, uint32_t *out)
{
    const char *pn = s3__req_param(x->req, "partNumber");
    char *e = NULL;
    long v = pn ? strtol(pn, &e, 10) : 0;
    if (!pn || !*pn || *e || v < 1 || v > 10000) {
        s3__resp_err(x, -EINVAL, "part number must be an integer between 1 and 10000, inclusive");
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static void part_begin(struct s3_ctx *x)
{
    struct put_st *st = s3__arena_alloc(x->a, sizeof(*st));
    x->opdata = st;
    if (parse_partno(x, &st->partno) || s3__op_bucket(x) || upload_prepare(x, st))
        return;
    st->upload_id = s3__req_param(x->req, "uploadId");
    uint64_t hint = x->in.decoded_len >= 0 ? (uint64_t)x->in.decoded_len
                    : x->req->has_clen     ? x->req->content_length
                                           : UINT64_MAX;
    int rc = core_upload_begin(x->core, &x->p, x->bucket_ino, hint, &x->wr.up);
    if (rc)
        s3__resp_err(x, rc, NULL);
}

static void part_result(struct s3_ctx *x, int rc, const char *etag)
{
    if (rc == -ENOENT) {
        s3__resp_s3err(x, S3E_NO_SUCH_UPLOAD, NULL);
        return;
    }
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    x->out.status = 200;
    s3__resp_header(x, "ETag", "\"%s\"", etag);
}

static void part_finish(struct s3_ctx *x)
{
    struct put_st *st = x->opdata;
    char etag[33], ckval[100];
    if (upload_verify(x, st, etag, ckval))
        return;
    struct core_upload *up = x->wr.up;
    x->wr.up = NULL;
    /* the part's checksum is kept for the object's composite checksum */
    char *ck = st->ck ? s3__arena_printf(x->a, "%d:%s", (int)st->ck, ckval) : NULL;
    int rc = core_mpu_part_commit(up, st->upload_id, st->partno, etag, ck);
    part_result(x, rc, etag);
    if (!rc && st->ck)
        s3__resp_header(x, s3__ck_header(st->ck), "%s", ckval);
}

/* ---------------------------------------------------------------- delete */

/* Delete @p key (version @p vid, or NULL) into @p dr. A version that does not exist is
 * deleted already (204, as S3 answers). @return 0 or the core's error. */
static int delete_one(struct s3_ctx *x, const char *key, size_t keylen, const char *vid,
                      unsigned flags, struct core_delres *dr)
{
    int rc = core_key_delete_v(x->core, &x->p, x->bucket_ino, key, keylen, vid, flags, dr);
    if (rc == -ENOENT)
        rc = 0;
    if (rc == SRV_ENOVERSION) {
        snprintf(dr->vid, sizeof(dr->vid), "%s", vid);
        rc = 0;
    }
    return rc;
}

static void delete_object(struct s3_ctx *x)
{
    struct core_delres dr;
    const char *vid = req_vid(x);
    if (s3__op_bucket(x))
        return;
    int flags = s3__bypass_flags(x);
    if (flags < 0)
        return;
    int rc = delete_one(x, x->rt.key, x->rt.keylen, vid, (unsigned)flags, &dr);
    if (rc == -EINVAL && vid) {
        s3__resp_err(x, rc, "invalid version id specified");
        return;
    }
    if (rc == SRV_ELOCKED) {
        s3__resp_err(x, rc,
                     "access denied because the object version is protected by object "
                     "lock (retention or legal hold)");
        return;
    }
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    x->out.status = 204;
    if (dr.vid[0])
        s3__resp_hdr(x, "x-amz-version-id", dr.vid);
    if (dr.dmarker)
        s3__resp_hdr(x, "x-amz-delete-marker", "true");
}

/* DeleteObjects: does the bucket policy deny s3:DeleteObject (of a version:
 * s3:DeleteObjectVersion) on this key? */
static bool key_denied(struct s3_ctx *x, const char *key, size_t keylen, bool version)
{
    if (s3__tier_readonly(x, x->b.ino, key, keylen))
        return true; /* a read-only tier policy covers it */
    if (!x->b.cfg.policy)
        return false;
    x->b.key = key;
    x->b.keylen = keylen;
    return s3__policy_decide(x, &x->b, version ? "s3:DeleteObjectVersion" : "s3:DeleteObject",
                             NULL) == S3_POL_DENY;
}

static void delete_objects(struct s3_ctx *x)
{
    size_t n = evbuffer_get_length(x->in.buf);
    struct s3_xnode *root = NULL;
    const char *doc = (const char *)evbuffer_pullup(x->in.buf, (ssize_t)n);
    if (!n || s3__xml_parse(x->a, doc, n, &root) || strcmp(root->name, "Delete") != 0) {
        s3__resp_err(x, SRV_EBADREQ, S3_MSG_BAD_XML);
        return;
    }
    size_t count = 0;
    for (struct s3_xnode *c = root->child; c; c = c->next)
        if (strcmp(c->name, "Object") == 0) {
            struct s3_xnode *k = s3__xml_child(c, "Key");
            if (!k || !k->textlen) {
                s3__resp_err(x, SRV_EBADREQ, "an Object has no Key");
                return;
            }
            count++;
        }
    if (count == 0 || count > 1000) {
        s3__resp_err(x, SRV_EBADREQ, "a Delete request names between 1 and 1000 objects");
        return;
    }
    struct s3_xnode *q = s3__xml_child(root, "Quiet");
    bool quiet = q && strcasecmp(q->text, "true") == 0;
    if (s3__op_bucket(x))
        return;
    int flags = s3__bypass_flags(x);
    if (flags < 0)
        return;
    s3__resp_xml(x);
    struct evbuffer *b = x->out.body;
    evbuffer_add_printf(b, "<DeleteResult xmlns=\"%s\">", S3_XMLNS);
    for (struct s3_xnode *c = root->child; c; c = c->next) {
        if (strcmp(c->name, "Object") != 0)
            continue;
        struct s3_xnode *k = s3__xml_child(c, "Key");
        struct s3_xnode *v = s3__xml_child(c, "VersionId");
        struct core_delres dr;
        int rc;
        if (k->textlen > CORE_KEY_MAX)
            rc = -ENAMETOOLONG;
        else if (key_denied(x, k->text, k->textlen, v != NULL))
            rc = -EACCES;
        else
            rc = delete_one(x, k->text, k->textlen, v ? v->text : NULL, (unsigned)flags, &dr);
        if (rc == 0) {
            if (!quiet) {
                evbuffer_add_printf(b, "<Deleted>");
                s3__xml_elemn(b, "Key", k->text, k->textlen);
                if (v)
                    s3__xml_elem(b, "VersionId", v->text);
                if (dr.dmarker) {
                    evbuffer_add_printf(b, "<DeleteMarker>true</DeleteMarker>");
                    s3__xml_elem(b, "DeleteMarkerVersionId", dr.vid);
                }
                evbuffer_add_printf(b, "</Deleted>");
            }
            continue;
        }
        const char *code;
        int status;
        s3__error_map(rc, true, &code, &status);
        evbuffer_add_printf(b, "<Error>");
        s3__xml_elemn(b, "Key", k->text, k->textlen);
        if (v)
            s3__xml_elem(b, "VersionId", v->text);
        s3__xml_elem(b, "Code", code);
        s3__xml_elem(b, "Message", srv_strerror(rc));
        evbuffer_add_printf(b, "</Error>");
    }
    evbuffer_add_printf(b, "</DeleteResult>\n");
}

/* ---------------------------------------------------------------- copy */

struct copy_src {
    char *bucket, *key;
    size_t bucketlen, keylen;
    const char *vid; /* ?versionId of the source, or NULL */
    struct s3_bref b;
    struct obj o;
};

/* Parse x-amz-copy-source and look the source up, checking x-amz-copy-source-if-*. */
static int copy_source(struct s3_ctx *x, struct copy_src *s)
{
    const char *h = s3__req_header(x->req, "x-amz-copy-source");
    size_t hl = strlen(h);
    const char *q = strchr(h, '?');
    s->vid = NULL;
    if (q) {
        if (strncmp(q, "?versionId=", 11) != 0) {
            s3__resp_err(x, -EINVAL, "the copy source may name a version only: ?versionId=ID");
            return -1;
        }
        s->vid = q + 11;
        hl = (size_t)(q - h);
    }
    size_t dl = 0;
    char *d = s3__url_decode(x->a, h, hl, &dl);
    if (d && *d == '/') {
        d++;
        dl--;
    }
    char *slash = d ? memchr(d, '/', dl) : NULL;
    if (!slash || slash == d || (size_t)(slash - d) + 1 >= dl) {
        s3__resp_err(x, -EINVAL, "copy source must be of the form bucket/key");
        return -1;
    }
    s->bucket = d;
    s->bucketlen = (size_t)(slash - d);
    *slash = '\0';
    s->key = slash + 1;
    s->keylen = dl - s->bucketlen - 1;
    memset(&s->b, 0, sizeof(s->b));
    s->b.name = s->bucket;
    s->b.namelen = s->bucketlen;
    s->b.key = s->key;
    s->b.keylen = s->keylen;
    if (s3__bref_load(x, &s->b)) {
        s3__resp_err(x, SRV_ENOBUCKET, "the copy source bucket does not exist");
        return -1;
    }
    if (obj_lookup(x, &s->b, s->key, s->keylen, s->vid, &s->o, true, "s3:GetObject", S3_AZ_O_READ,
                   CORE_READ_NONE))
        return -1;
    int st = cond_eval(x, "x-amz-copy-source-", s->o.etag, &s->o.info.attr.mtime, false);
    if (st) {
        cond_fail(x, 412, s->o.etag, &s->o.info.attr.mtime);
        return -1;
    }
    return 0;
}

/* A copy's data (CopyObject, UploadPartCopy) moves in steps (x->copy): the
 * op looks the source up, begins the upload and holds the source here; then
 * the loop admits each step's bytes as a read and as a write (s3_req.c) and a
 * worker copies them (s3__copy_step_work); the last step commits
 * (s3__copy_end_work). While the data moves, the upload is x->wr.up and the
 * source is held (x->get.ino, ref_held), so a client that goes away leaves
 * nothing behind (ctx_cleanup_work). The op's own state: */
struct s3_copy {
    struct copy_src s;
    const char *range; /* x-amz-copy-source-range (UploadPartCopy), or NULL */
    bool part;         /* UploadPartCopy of part partno */
    uint32_t partno;
    /* CopyObject: what its commit needs */
    struct s3_meta req_meta;
    struct core_lock lk;
    bool has_lock, replace, treplace, in_place;
    struct srv_md5 md5;
    uint64_t in0;
    int tries;
    char etag[33];
};

/* Worker: the source range, a fresh upload and a hold on the source. A source
 * replaced since its lookup (an NFS rename over it, a PUT) is looked up again
 * (conditions included), so the copy is always one whole version.
 * @return 0, or responds and returns < 0 with nothing held. */
static int copy_begin(struct s3_ctx *x, struct s3_copy *k)
{
    struct copy_src *s = &k->s;
    k->in0 = x->bytes_in;
    for (;; k->tries++) {
        if (k->tries && copy_source(x, s))
            return -1;
        uint64_t size = s->o.info.attr.size, off = 0, end = size;
        if (k->range) {
            const char *range = k->range;
            unsigned long long first, last;
            int n = -1;
            if (sscanf(range, "bytes=%llu-%llu%n", &first, &last, &n) != 2 ||
                (size_t)n != strlen(range) || range[6] == '-' || first > last) {
                s3__resp_err(x, -EINVAL,
                             "the x-amz-copy-source-range value must be of the form "
                             "bytes=first-last where first and last are the zero-based offsets "
                             "of the first and last bytes to copy");
                return -1;
            }
            if (last >= size) {
                s3__resp_err(x, -EINVAL,
                             s3__arena_printf(x->a,
                                              "Range specified is not valid for source object "
                                              "of size: %" PRIu64,
                                              size));
                return -1;
            }
            off = first;
            end = last + 1;
        }
        x->bytes_in = k->in0;
        int rc = core_upload_begin(x->core, &x->p, x->bucket_ino, end - off, &x->wr.up);
        if (rc == 0) {
            rc = core_ref(x->core, s->o.info.attr.ino);
            if (rc == -ENOENT)
                rc = SRV_ESTALE;
        }
        if (rc == 0) {
            x->get.ino = s->o.info.attr.ino;
            x->get.ref_held = true;
            memset(&x->copy, 0, sizeof(x->copy));
            x->copy.off = off;
            x->copy.end = end;
            x->copy.r_left = x->copy.w_left = end - off;
            x->copy.op = k;
            x->copy.src_bucket = s->bucket;
            x->copy.src_bucketlen = s->bucketlen;
            x->copy.src_key = s->key;
            x->copy.src_keylen = s->keylen;
            srv_md5_init(&k->md5);
            return 0;
        }
        core_upload_abort(x->wr.up);
        x->wr.up = NULL;
        if (rc == SRV_ESTALE && k->tries + 1 < GET_RETRIES)
            continue;
        if (rc == SRV_ESTALE)
            s3__resp_s3err(x, S3E_SERVICE_UNAVAILABLE,
                           "the copy source kept changing while it was read; please retry");
        else
            s3__resp_err(x, rc, NULL);
        return -1;
    }
}

/* Worker: copy the step's bytes (read as the source was decided: copy_source). */
void s3__copy_step_work(struct s3_ctx *x)
{
    struct s3_copy *k = x->copy.op;
    struct core_principal rp = s3__super(x);
    uint64_t left = x->copy.step;
    char *buf = malloc(left < COPY_CHUNK ? (size_t)left : COPY_CHUNK);
    if (!buf) {
        x->copy.rc = -ENOMEM;
        return;
    }
    while (left) {
        size_t n = left > COPY_CHUNK ? COPY_CHUNK : (size_t)left, got = 0;
        bool eof = false;
        int rc = core_read(x->core, &rp, x->get.ino, x->copy.off, buf, n, &got, &eof);
        if (rc == 0 && got == 0)
            rc = -EIO;
        if (rc == 0) {
            srv_md5_update(&k->md5, buf, got);
            rc = core_upload_write(x->wr.up, buf, got);
        }
        if (rc) {
            x->copy.rc = rc;
            break;
        }
        x->copy.off += got;
        left -= got;
        x->bytes_in += got;
    }
    free(buf);
}

static void copy_object_commit(struct s3_ctx *x, struct s3_copy *k);
static void part_copy_commit(struct s3_ctx *x, struct s3_copy *k);

/* Worker: the copy's last step: commit (the metadata and the response), or,
 * after a failure, drop the upload and the hold. */
void s3__copy_end_work(struct s3_ctx *x)
{
    struct s3_copy *k = x->copy.op;
    x->copy.finished = true;
    if (x->get.ref_held)
        core_unref(x->core, x->get.ino);
    x->get.ref_held = false;
    if (x->copy.failed) {
        core_upload_abort(x->wr.up);
        x->wr.up = NULL;
        return;
    }
    unsigned char md[SRV_MD5_LEN];
    srv_md5_final(&k->md5, md);
    srv_sigv4_hex(md, 16, k->etag);
    if (k->part)
        part_copy_commit(x, k);
    else
        copy_object_commit(x, k);
}

/* CopyObject's metadata and commit (after its data, or in place). */
static void copy_object_commit(struct s3_ctx *x, struct s3_copy *k)
{
    struct copy_src *s = &k->s;
    struct s3_meta meta;
    struct core_upload *up = x->wr.up;
    x->wr.up = NULL; /* committed or dropped below */
    char vid[CORE_VID_MAX + 1] = "";
    char etag[33];
    snprintf(etag, sizeof(etag), "%s", k->etag);
    if (up) {
        struct core_putopt opt = {k->has_lock ? &k->lk : NULL, vid};
        core_upload_set_opt(up, &opt);
    }
    memset(&meta, 0, sizeof(meta));
    const struct s3_meta *from = k->replace ? &k->req_meta : &s->o.meta;
    for (size_t i = 0; i < from->n; i++)
        if (from->ents[i].type != S3_M_TAG && from->ents[i].type != S3_M_PARTS &&
            from->ents[i].type != S3_M_ACL)
            s3__meta_add(&meta, x->a, from->ents[i].type, from->ents[i].key, from->ents[i].klen,
                         from->ents[i].val, from->ents[i].vlen);
    /* the copy's ACL is the request's (default: private), never the source's */
    for (size_t i = 0; i < k->req_meta.n; i++)
        if (k->req_meta.ents[i].type == S3_M_ACL)
            s3__meta_add(&meta, x->a, S3_M_ACL, k->req_meta.ents[i].key, k->req_meta.ents[i].klen,
                         k->req_meta.ents[i].val, k->req_meta.ents[i].vlen);
    const struct s3_meta *tfrom = k->treplace ? &k->req_meta : &s->o.meta;
    for (size_t i = 0; i < tfrom->n; i++)
        if (tfrom->ents[i].type == S3_M_TAG)
            s3__meta_add(&meta, x->a, S3_M_TAG, tfrom->ents[i].key, tfrom->ents[i].klen,
                         tfrom->ents[i].val, tfrom->ents[i].vlen);
    void *blob = NULL;
    size_t bloblen = 0;
    int rc = s3__meta_encode(&meta, &blob, &bloblen);
    if (rc) {
        core_upload_abort(up);
        s3__resp_err(x, rc, NULL);
        return;
    }
    struct core_attr attr;
    memset(&attr, 0, sizeof(attr));
    if (k->in_place) {
        rc = core_key_set_meta(x->core, &x->p, x->bucket_ino, x->rt.key, x->rt.keylen, blob,
                               bloblen);
        snprintf(etag, sizeof(etag), "%s", s->o.etag);
        clock_gettime(CLOCK_REALTIME, &attr.mtime);
    } else {
        const char *inm = s3__req_header(x->req, "if-none-match");
        rc = core_upload_commit(up, x->rt.key, x->rt.keylen, etag, blob, bloblen, NULL,
                                inm && strcmp(inm, "*") == 0, &attr);
    }
    free(blob);
    if (rc == SRV_EPRECOND) {
        s3__resp_err(x, rc, PRECOND_MSG);
        return;
    }
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    char iso[25];
    s3__iso_date_fmt(&attr.mtime, iso);
    s3__resp_xml(x);
    if (vid[0])
        s3__resp_hdr(x, "x-amz-version-id", vid);
    if (s->o.info.vid[0])
        s3__resp_hdr(x, "x-amz-copy-source-version-id", s->o.info.vid);
    evbuffer_add_printf(x->out.body,
                        "<CopyObjectResult xmlns=\"%s\"><LastModified>%s</LastModified>"
                        "<ETag>&quot;%s&quot;</ETag></CopyObjectResult>\n",
                        S3_XMLNS, iso, etag);
}

static void copy_object(struct s3_ctx *x)
{
    struct s3_copy *k = s3__arena_alloc(x->a, sizeof(*k));
    memset(k, 0, sizeof(*k));
    struct copy_src *s = &k->s;
    if (s3__op_bucket(x) || copy_source(x, s))
        return;
    if (s->o.dir) {
        s3__resp_s3err(x, S3E_INVALID_REQUEST, "a directory marker cannot be copied");
        return;
    }
    const char *md = s3__req_header(x->req, "x-amz-metadata-directive");
    const char *td = s3__req_header(x->req, "x-amz-tagging-directive");
    k->replace = md && strcasecmp(md, "REPLACE") == 0;
    k->treplace = td && strcasecmp(td, "REPLACE") == 0;
    if ((md && !k->replace && strcasecmp(md, "COPY") != 0) ||
        (td && !k->treplace && strcasecmp(td, "COPY") != 0)) {
        s3__resp_err(x, -EINVAL, "unknown metadata or tagging directive");
        return;
    }
    if (s3__op_meta_from_req(x, &k->req_meta) || s3__lock_from_req(x, &k->lk, &k->has_lock))
        return;
    /* onto itself: only the metadata changes, in place, unless the bucket is versioned
     * (then, as S3 does, the copy is a new version) */
    struct core_bucket_vcfg vc;
    bool same = s->b.ino == x->bucket_ino && s->keylen == x->rt.keylen &&
                memcmp(s->key, x->rt.key, s->keylen) == 0 && !s->vid;
    k->in_place = same && !k->has_lock &&
                  core_bucket_vcfg_get(x->core, &x->p, x->bucket_ino, &vc) == 0 &&
                  vc.versioning == CORE_VERS_NONE;
    if (same && !k->replace && !k->treplace) {
        s3__resp_s3err(x, S3E_INVALID_REQUEST,
                       "this copy request is illegal because it is trying to copy an object "
                       "to itself without changing the object's metadata");
        return;
    }
    if (k->in_place) {
        copy_object_commit(x, k);
        return;
    }
    /* the data first (on the loop, admitted step by step: copy_pump); a source
     * replaced meanwhile is looked up again, and the metadata copied at the
     * end is then that version's */
    if (copy_begin(x, k))
        return;
    x->copy.active = true;
}

static void part_copy_commit(struct s3_ctx *x, struct s3_copy *k)
{
    struct core_upload *up = x->wr.up;
    x->wr.up = NULL; /* the commit frees it */
    int rc = core_mpu_part_commit(up, s3__req_param(x->req, "uploadId"), k->partno, k->etag, NULL);
    if (rc) {
        part_result(x, rc, k->etag);
        return;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char iso[25];
    s3__iso_date_fmt(&now, iso);
    s3__resp_xml(x);
    if (k->s.o.info.vid[0])
        s3__resp_hdr(x, "x-amz-copy-source-version-id", k->s.o.info.vid);
    evbuffer_add_printf(x->out.body,
                        "<CopyPartResult xmlns=\"%s\"><LastModified>%s</LastModified>"
                        "<ETag>&quot;%s&quot;</ETag></CopyPartResult>\n",
                        S3_XMLNS, iso, k->etag);
}

static void part_copy(struct s3_ctx *x)
{
    struct s3_copy *k = s3__arena_alloc(x->a, sizeof(*k));
    memset(k, 0, sizeof(*k));
    if (parse_partno(x, &k->partno) || s3__op_bucket(x) || copy_source(x, &k->s))
        return;
    k->part = true;
    k->range = s3__req_header(x->req, "x-amz-copy-source-range");
    if (copy_begin(x, k))
        return;
    x->copy.active = true;
}

/* ---------------------------------------------------------------- tagging */

static void get_tagging(struct s3_ctx *x)
{
    struct obj o;
    if (op_object(x, &o))
        return;
    s3__resp_xml(x);
    if (o.info.vid[0])
        s3__resp_hdr(x, "x-amz-version-id", o.info.vid);
    struct evbuffer *b = x->out.body;
    evbuffer_add_printf(b, "<Tagging xmlns=\"%s\"><TagSet>", S3_XMLNS);
    for (size_t i = 0; i < o.meta.n; i++)
        if (o.meta.ents[i].type == S3_M_TAG) {
            evbuffer_add_printf(b, "<Tag>");
            s3__xml_elemn(b, "Key", o.meta.ents[i].key, o.meta.ents[i].klen);
            s3__xml_elemn(b, "Value", o.meta.ents[i].val, o.meta.ents[i].vlen);
            evbuffer_add_printf(b, "</Tag>");
        }
    evbuffer_add_printf(b, "</TagSet></Tagging>\n");
}

static void set_tags(struct s3_ctx *x, struct s3_meta *tags, bool clear)
{
    struct obj o;
    if (op_object(x, &o))
        return;
    s3__meta_drop(&o.meta, S3_M_TAG);
    if (!clear)
        for (size_t i = 0; i < tags->n; i++)
            s3__meta_add(&o.meta, x->a, S3_M_TAG, tags->ents[i].key, tags->ents[i].klen,
                         tags->ents[i].val, tags->ents[i].vlen);
    void *blob = NULL;
    size_t len = 0;
    int rc = s3__meta_encode(&o.meta, &blob, &len);
    if (!rc)
        rc = core_version_set_meta(x->core, &x->p, x->bucket_ino, x->rt.key, x->rt.keylen,
                                   req_vid(x), blob, len);
    free(blob);
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    x->out.status = clear ? 204 : 200;
    if (o.info.vid[0])
        s3__resp_hdr(x, "x-amz-version-id", o.info.vid);
}

static void put_tagging(struct s3_ctx *x)
{
    size_t n = evbuffer_get_length(x->in.buf);
    struct s3_xnode *root = NULL, *set;
    const char *doc = (const char *)evbuffer_pullup(x->in.buf, (ssize_t)n);
    if (!n || s3__xml_parse(x->a, doc, n, &root) || strcmp(root->name, "Tagging") != 0 ||
        !(set = s3__xml_child(root, "TagSet"))) {
        s3__resp_err(x, SRV_EBADREQ, S3_MSG_BAD_XML);
        return;
    }
    struct s3_meta tags;
    memset(&tags, 0, sizeof(tags));
    for (struct s3_xnode *t = set->child; t; t = t->next) {
        if (strcmp(t->name, "Tag") != 0)
            continue;
        struct s3_xnode *k = s3__xml_child(t, "Key"), *v = s3__xml_child(t, "Value");
        if (!k || !v || !tag_ok(k->text, k->textlen, v->textlen) ||
            s3__meta_find(&tags, S3_M_TAG, k->text)) {
            s3__resp_s3err(x, S3E_INVALID_TAG, NULL);
            return;
        }
        s3__meta_add(&tags, x->a, S3_M_TAG, k->text, k->textlen, v->text, v->textlen);
    }
    if (tags.n > TAGS_MAX) {
        s3__resp_s3err(x, S3E_INVALID_TAG, "object tags cannot be greater than 10");
        return;
    }
    set_tags(x, &tags, false);
}

static void delete_tagging(struct s3_ctx *x)
{
    set_tags(x, NULL, true);
}

/* ---------------------------------------------------------------- GetObjectAttributes */

static void get_attributes(struct s3_ctx *x)
{
    static const char *const NAMES[] = {"ETag", "Checksum", "ObjectParts", "StorageClass",
                                        "ObjectSize"};
    const char *want = s3__req_header(x->req, "x-amz-object-attributes");
    unsigned mask = 0;
    for (const char *p = want ? want : ""; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t l = strcspn(p, ", ");
        if (!l)
            break;
        size_t i = 0;
        while (i < 5 && !(strlen(NAMES[i]) == l && strncmp(p, NAMES[i], l) == 0))
            i++;
        if (i == 5) {
            s3__resp_err(x, -EINVAL, "Invalid attribute name specified.");
            return;
        }
        mask |= 1u << i;
        p += l;
    }
    if (!mask) {
        s3__resp_err(x, -EINVAL,
                     "the x-amz-object-attributes header specifying the attributes to be "
                     "retrieved is either missing or empty");
        return;
    }
    struct obj o;
    if (op_object(x, &o))
        return;
    int st = cond_eval(x, "", o.etag, &o.info.attr.mtime, false);
    if (st) {
        cond_fail(x, 412, o.etag, &o.info.attr.mtime);
        return;
    }
    char d[32];
    s3__http_date_fmt(o.info.attr.mtime.tv_sec, d);
    s3__resp_header(x, "Last-Modified", "%s", d);
    if (o.info.vid[0])
        s3__resp_hdr(x, "x-amz-version-id", o.info.vid);
    s3__resp_xml(x);
    struct evbuffer *b = x->out.body;
    evbuffer_add_printf(b, "<GetObjectAttributesResponse xmlns=\"%s\">", S3_XMLNS);
    if (mask & 1)
        s3__xml_elem(b, "ETag", o.etag);
    const struct s3_meta_ent *ck_etag = s3__meta_find(&o.meta, S3_M_CKSUM, "etag");
    bool ck_valid = !ck_etag || strcmp(ck_etag->val, o.etag) == 0;
    for (size_t i = 0; (mask & 2) && ck_valid && i < o.meta.n; i++) {
        enum s3_ck_algo al =
            o.meta.ents[i].type == S3_M_CKSUM ? s3__ck_from_name(o.meta.ents[i].key) : S3_CK_NONE;
        if (al) {
            evbuffer_add_printf(b, "<Checksum>");
            s3__xml_elem(b, s3__arena_printf(x->a, "Checksum%s", s3__ck_name(al)),
                         o.meta.ents[i].val);
            evbuffer_add_printf(b, "</Checksum>");
            break;
        }
    }
    const struct s3_meta_ent *cnt = s3__meta_find(&o.meta, S3_M_PARTS, "count");
    const struct s3_meta_ent *petag = s3__meta_find(&o.meta, S3_M_PARTS, "etag");
    if ((mask & 4) && cnt && strchr(o.etag, '-') && (!petag || strcmp(petag->val, o.etag) == 0))
        evbuffer_add_printf(b, "<ObjectParts><PartsCount>%s</PartsCount></ObjectParts>", cnt->val);
    if (mask & 8)
        s3__xml_elem(b, "StorageClass", s3__storage_class(x, x->b.ino, &o.info.attr, NULL));
    if (mask & 16)
        s3__xml_elem_u64(b, "ObjectSize", o.info.attr.size);
    evbuffer_add_printf(b, "</GetObjectAttributesResponse>\n");
}

const struct s3_op s3_op_get_attributes = {.name = "GetObjectAttributes",
                                           .action = "s3:GetObjectAttributes",
                                           .az = S3_AZ_O_READ,
                                           .qos = QOS_META,
                                           .work = get_attributes};
const struct s3_op s3_op_put_object = {.name = "PutObject",
                                       .action = "s3:PutObject",
                                       .az = S3_AZ_B_WRITE,
                                       .body = S3_BODY_STREAM,
                                       .qos = QOS_WRITE,
                                       .work = put_begin,
                                       .finish = put_finish};
const struct s3_op s3_op_mpu_upload_part = {.name = "UploadPart",
                                            .action = "s3:PutObject",
                                            .az = S3_AZ_B_WRITE,
                                            .body = S3_BODY_STREAM,
                                            .qos = QOS_WRITE,
                                            .work = part_begin,
                                            .finish = part_finish};
const struct s3_op s3_op_get_object = {.name = "GetObject",
                                       .action = "s3:GetObject",
                                       .az = S3_AZ_O_READ,
                                       .qos = QOS_READ,
                                       .flags = S3_OPF_READ_AFTER,
                                       .fast = s3__get_fast,
                                       .work = get_or_head};
const struct s3_op s3_op_head_object = {.name = "HeadObject",
                                        .action = "s3:GetObject",
                                        .az = S3_AZ_O_READ,
                                        .qos = QOS_META,
                                        .fast = s3__get_fast,
                                        .work = get_or_head};
const struct s3_op s3_op_delete_object = {.name = "DeleteObject",
                                          .action = "s3:DeleteObject",
                                          .az = S3_AZ_B_WRITE,
                                          .qos = QOS_META,
                                          .work = delete_object};
const struct s3_op s3_op_delete_objects = {.name = "DeleteObjects",
                                           .action = "s3:DeleteObject",
                                           .az = S3_AZ_B_WRITE,
                                           .body = S3_BODY_XML,
                                           .qos = QOS_META,
                                           .work = delete_objects};
const struct s3_op s3_op_copy_object = {.name = "CopyObject",
                                        .action = "s3:PutObject",
                                        .az = S3_AZ_B_WRITE,
                                        .qos = QOS_WRITE,
                                        .work = copy_object};
const struct s3_op s3_op_mpu_upload_part_copy = {.name = "UploadPartCopy",
                                                 .action = "s3:PutObject",
                                                 .az = S3_AZ_B_WRITE,
                                                 .qos = QOS_WRITE,
                                                 .work = part_copy};
const struct s3_op s3_op_get_tagging = {.name = "GetObjectTagging",
                                        .action = "s3:GetObjectTagging",
                                        .az = S3_AZ_O_READ,
                                        .qos = QOS_META,
                                        .work = get_tagging};
const struct s3_op s3_op_put_tagging = {.name = "PutObjectTagging",
                                        .action = "s3:PutObjectTagging",
                                        .az = S3_AZ_B_WRITE,
                                        .body = S3_BODY_XML,
                                        .qos = QOS_META,
                                        .work = put_tagging};
const struct s3_op s3_op_delete_tagging = {.name = "DeleteObjectTagging",
                                           .action = "s3:DeleteObjectTagging",
                                           .az = S3_AZ_B_WRITE,
                                           .qos = QOS_META,
                                           .work = delete_tagging};
