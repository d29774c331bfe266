/* SPDX-License-Identifier: Apache-2.0
 * s3_op_bucket: service and bucket operations — ListBuckets, CreateBucket,
 * DeleteBucket, HeadBucket, GetBucketLocation, ListObjects (V1, V2) and the
 * defaults of bucket configuration subresources (ListObjectVersions and the
 * versioning ones are in s3_op_version.c).
 *
 * Listings come from the core's ordered key index (core_list), so keys come
 * back in S3 (binary UTF-8) order with prefix/delimiter roll-up. A page that
 * ends on a common prefix resumes after every key under it: the resume point is
 * the prefix followed by 0xFF, a byte that never occurs in UTF-8 keys.
 * Thread: the work functions run on workers and touch only their context. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "s3_internal.h"
#include "srv_err.h"

int s3__op_bucket(struct s3_ctx *x)
{
    const struct s3_op *op = x->rt.op;
    x->b.name = x->rt.bucket;
    x->b.namelen = x->rt.bucketlen;
    x->b.key = x->rt.key;
    x->b.keylen = x->rt.keylen;
    int rc = s3__bref_load(x, &x->b);
    if (rc) {
        s3__resp_err(x, rc, rc == SRV_ENOBUCKET ? "the specified bucket does not exist" : NULL);
        return rc;
    }
    x->bucket_ino = x->b.ino;
    /* object checks wait for the object; an op without an action decides itself; a
     * request on one version (?versionId) checks the action's version form */
    const char *action = op->action;
    if (action && x->rt.key && s3__req_has_param(x->req, "versionId"))
        action = s3__version_action(action);
    if (action && op->az < S3_AZ_O_READ && s3__authz(x, &x->b, action, op->az, NULL, NULL))
        return -EACCES;
    return 0;
}

void s3__owner_xml(struct s3_ctx *x, struct evbuffer *b, uint32_t uid, struct s3_owner_cache *oc)
{
    if (!oc->set || oc->uid != uid) {
        struct evbuffer *t = evbuffer_new();
        s3__acl_owner_xml(x, t, "Owner", uid);
        size_t n = evbuffer_get_length(t);
        char *s = s3__arena_alloc(x->a, n + 1);
        evbuffer_remove(t, s, n);
        evbuffer_free(t);
        *oc = (struct s3_owner_cache){true, uid, s};
    }
    evbuffer_add(b, oc->xml, strlen(oc->xml));
}

/* ---------------------------------------------------------------- ListBuckets */

/* A ListBuckets page: prefix, after (the continuation token's name), at most max. */
struct blist {
    struct s3_ctx *x;
    const char *prefix, *after;
    uint32_t max, n;
    char *last;
    bool truncated;
};

static int bucket_cb(void *arg, const char *name, size_t namelen, const struct core_attr *attr)
{
    struct blist *l = arg;
    struct s3_ctx *x = l->x;
    char iso[25];
    /* a user's buckets: those it owns (an admin: all of its tenant's) */
    if (!(x->id.flags & (CORE_P_SUPER | CORE_P_TADMIN)) && attr->uid != x->id.uid)
        return 0;
    size_t pl = l->prefix ? strlen(l->prefix) : 0;
    if (pl && (namelen < pl || memcmp(name, l->prefix, pl) != 0))
        return 0;
    char *nm = s3__arena_strndup(x->a, name, namelen);
    if (l->after && strcmp(nm, l->after) <= 0)
        return 0;
    if (l->n == l->max) {
        l->truncated = true;
        return 1;
    }
    l->n++;
    l->last = nm;
    s3__iso_date_fmt(attr->btime.tv_sec ? &attr->btime : &attr->ctime, iso);
    evbuffer_add_printf(x->out.body, "<Bucket>");
    s3__xml_elemn(x->out.body, "Name", name, namelen);
    s3__xml_elem(x->out.body, "CreationDate", iso);
    evbuffer_add_printf(x->out.body, "</Bucket>");
    return 0;
}

static void list_buckets(struct s3_ctx *x)
{
    struct blist l = {.x = x, .max = 10000};
    const char *mb = s3__req_param(x->req, "max-buckets");
    const char *tok = s3__req_param(x->req, "continuation-token");
    x->authz_done = true; /* decided here: a user lists what it owns */
    if (x->id.flags & CORE_P_ANON) {
        s3__resp_err(x, -EACCES, "Access Denied");
        return;
    }
    if (mb) {
        char *e = NULL;
        long v = strtol(mb, &e, 10);
        if (!*mb || *e || v < 1 || v > 10000) {
            s3__resp_err(x, -EINVAL, "max-buckets must be an integer from 1 to 10000");
            return;
        }
        l.max = (uint32_t)v;
    }
    if (tok && *tok) {
        unsigned char *dec = s3__arena_alloc(x->a, strlen(tok) + 4);
        long n = s3__b64_decode(tok, strlen(tok), dec);
        if (n <= 0) {
            s3__resp_err(x, -EINVAL, "the continuation token provided is incorrect");
            return;
        }
        l.after = s3__arena_strndup(x->a, (const char *)dec, (size_t)n);
    }
    l.prefix = s3__req_param(x->req, "prefix");
    s3__resp_xml(x);
    evbuffer_add_printf(x->out.body, "<ListAllMyBucketsResult xmlns=\"%s\">", S3_XMLNS);
    struct s3_owner_cache oc = {0};
    s3__owner_xml(x, x->out.body, x->id.uid, &oc);
    evbuffer_add_printf(x->out.body, "<Buckets>");
    int rc = core_bucket_list(x->core, &x->p, bucket_cb, &l);
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    evbuffer_add_printf(x->out.body, "</Buckets>");
    if (l.truncated && l.last) {
        char *t = s3__arena_alloc(x->a, 4 * (strlen(l.last) / 3 + 2) + 1);
        s3__b64_encode((const unsigned char *)l.last, strlen(l.last), t);
        s3__xml_elem(x->out.body, "ContinuationToken", t);
    }
    if (l.prefix)
        s3__xml_elem(x->out.body, "Prefix", l.prefix);
    evbuffer_add_printf(x->out.body, "</ListAllMyBucketsResult>\n");
}

/* ---------------------------------------------------------------- bucket CRUD */

/* x-amz-bucket-object-lock-enabled: any capitalisation of "true" (botocore sends
 * "True") makes the bucket with versioning and object lock, "false" without.
 * @return 0 (*@p lock set), or -1 with 400 InvalidArgument set. */
static int object_lock_of_req(struct s3_ctx *x, bool *lock)
{
    const char *v = s3__req_header(x->req, "x-amz-bucket-object-lock-enabled");
    *lock = v && strcasecmp(v, "true") == 0;
    if (v && !*lock && strcasecmp(v, "false") != 0) {
        s3__resp_err(x, -EINVAL, "x-amz-bucket-object-lock-enabled must be true or false");
        return -1;
    }
    return 0;
}

/* x-amz-object-ownership of a CreateBucket: @return 0 (*out set, *given),
 * or -1 with 400 set. */
static int ownership_of_req(struct s3_ctx *x, enum s3_own *out, bool *given)
{
    const char *v = s3__req_header(x->req, "x-amz-object-ownership");
    *given = v != NULL;
    *out = S3_OWN_WRITER;
    if (!v)
        return 0;
    if (strcmp(v, "BucketOwnerEnforced") == 0)
        *out = S3_OWN_ENFORCED;
    else if (strcmp(v, "BucketOwnerPreferred") == 0)
        *out = S3_OWN_PREFERRED;
    else if (strcmp(v, "ObjectWriter") != 0) {
        s3__resp_err(x, -EINVAL, "invalid x-amz-object-ownership header");
        return -1;
    }
    return 0;
}

static const char *const OWNERSHIP_NAMES[] = {"ObjectWriter", "BucketOwnerPreferred",
                                              "BucketOwnerEnforced"};

/* Store a new bucket's grants and ownership setting (none: nothing to store). */
static int create_config(struct s3_ctx *x, const struct s3_acl *acl, bool own_given,
                         enum s3_own own)
{
    if (!acl->n && !own_given)
        return 0;
    x->b.name = x->rt.bucket;
    x->b.namelen = x->rt.bucketlen;
    int rc = s3__bref_load(x, &x->b);
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return -1;
    }
    x->bucket_ino = x->b.ino;
    x->b.cfg.acl = *acl;
    if (own_given)
        s3__bcfg_set(x, "ownership", OWNERSHIP_NAMES[own], strlen(OWNERSHIP_NAMES[own]));
    return s3__bcfg_save(x, -1);
}

static void create_bucket(struct s3_ctx *x)
{
    size_t n = evbuffer_get_length(x->in.buf);
    x->authz_done = true; /* decided here: any user of the tenant may create a bucket */
    if (x->id.flags & CORE_P_ANON) {
        s3__resp_err(x, -EACCES, "Access Denied");
        return;
    }
    if (n) {
        struct s3_xnode *root;
        const char *doc = (const char *)evbuffer_pullup(x->in.buf, (ssize_t)n);
        if (s3__xml_parse(x->a, doc, n, &root) || strcmp(root->name, "CreateBucketConfiguration")) {
            s3__resp_err(x, SRV_EBADREQ, "the XML you provided was not well-formed");
            return;
        }
    }
    bool lock;
    if (object_lock_of_req(x, &lock))
        return;
    enum s3_own own;
    bool own_given, acl_given;
    struct s3_acl acl;
    if (ownership_of_req(x, &own, &own_given) ||
        s3__acl_from_req(x, true, x->id.uid, &acl, &acl_given))
        return;
    if (own == S3_OWN_ENFORCED && acl_given && acl.n) {
        s3__resp_s3err(x, S3E_INVALID_BUCKET_ACL_OWNERSHIP, NULL);
        return;
    }
    x->p.fmode = s3__acl_mode(&acl, true) & 0666;
    struct core_attr attr;
    int rc = core_bucket_create(x->core, &x->p, x->rt.bucket, x->rt.bucketlen, &attr);
    if (rc == 0 && lock) {
        /* versioning and object lock on for good; a bucket that cannot have them goes */
        struct core_bucket_vcfg vc = {.versioning = CORE_VERS_ENABLED};
        rc = core_bucket_objlock_set(x->core, &x->p, attr.ino, &vc);
        if (rc)
            core_bucket_delete(x->core, &x->p, x->rt.bucket, x->rt.bucketlen);
    }
    if (rc == -EEXIST) {
        struct core_objinfo bi;
        rc = core_bucket_get(x->core, &x->p, x->rt.bucket, x->rt.bucketlen, &bi);
        free(bi.meta);
        if (rc == 0 && bi.attr.uid != x->id.uid) {
            s3__resp_s3err(x, S3E_BUCKET_EXISTS,
                           "the requested bucket name is not available: another user of this "
                           "tenant owns it");
            return;
        }
        if (rc == 0 && strcmp(x->region, "us-east-1") == 0) {
            /* us-east-1 answers a bucket its owner creates again with 200 and the
             * ACL the request asks for (the default one: private) */
            x->b.name = x->rt.bucket;
            x->b.namelen = x->rt.bucketlen;
            if (s3__bref_load(x, &x->b) == 0) {
                x->bucket_ino = x->b.ino;
                x->b.cfg.acl = acl;
                if (s3__bcfg_save(x, (int)s3__acl_mode(&acl, true)))
                    return;
            }
            x->out.status = 200;
            s3__resp_header(x, "Location", "/%s", x->rt.bucket);
            return;
        }
        s3__resp_err(x, -EEXIST,
                     "your previous request to create the named bucket succeeded and you "
                     "already own it");
        return;
    }
    if (rc == SRV_EBADNAME || rc == -EINVAL || rc == -ENAMETOOLONG) {
        s3__resp_err(x, SRV_EBADNAME, "the specified bucket is not valid");
        return;
    }
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    if (create_config(x, &acl, own_given, own))
        return;
    x->out.status = 200;
    s3__resp_header(x, "Location", "/%s", x->rt.bucket);
}

static void delete_bucket(struct s3_ctx *x)
{
    if (s3__op_bucket(x))
        return;
    int rc = core_bucket_delete(x->core, &x->p, x->rt.bucket, x->rt.bucketlen);
    if (rc == -ENOENT)
        rc = SRV_ENOBUCKET;
    if (rc == -ENOTEMPTY) {
        s3__resp_err(x, rc, "the bucket you tried to delete is not empty");
        return;
    }
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    x->out.status = 204;
}

static void head_bucket(struct s3_ctx *x)
{
    if (s3__op_bucket(x))
        return;
    x->out.status = 200;
    s3__resp_header(x, "x-amz-bucket-region", "%s", x->region);
}

static void bucket_location(struct s3_ctx *x)
{
    if (s3__op_bucket(x))
        return;
    s3__resp_xml(x);
    /* us-east-1 is reported as an empty constraint, as AWS does */
    const char *region = x->region;
    evbuffer_add_printf(x->out.body, "<LocationConstraint xmlns=\"%s\">", S3_XMLNS);
    if (strcmp(region, "us-east-1") != 0)
        s3__xml_esc(x->out.body, region, strlen(region));
    evbuffer_add_printf(x->out.body, "</LocationConstraint>\n");
}

/* The IAM action of GET ?SUB (every one its owner's, but ?acl: READ_ACP). */
static const struct {
    const char *sub, *action;
} CONFIG_ACTIONS[] = {
    {"versioning", "s3:GetBucketVersioning"},
    {"acl", "s3:GetBucketAcl"},
    {"policy", "s3:GetBucketPolicy"},
    {"policyStatus", "s3:GetBucketPolicyStatus"},
    {"lifecycle", "s3:GetLifecycleConfiguration"},
    {"cors", "s3:GetBucketCORS"},
    {"encryption", "s3:GetEncryptionConfiguration"},
    {"object-lock", "s3:GetBucketObjectLockConfiguration"},
    {"website", "s3:GetBucketWebsite"},
    {"logging", "s3:GetBucketLogging"},
    {"notification", "s3:GetBucketNotification"},
    {"replication", "s3:GetReplicationConfiguration"},
    {"ownershipControls", "s3:GetBucketOwnershipControls"},
    {"publicAccessBlock", "s3:GetBucketPublicAccessBlock"},
    {"accelerate", "s3:GetAccelerateConfiguration"},
    {"requestPayment", "s3:GetBucketRequestPayment"},
    {"tagging", "s3:GetBucketTagging"},
};

const char *s3__bucket_config_action(const char *sub)
{
    for (size_t i = 0; i < sizeof(CONFIG_ACTIONS) / sizeof(CONFIG_ACTIONS[0]); i++)
        if (strcmp(sub, CONFIG_ACTIONS[i].sub) == 0)
            return CONFIG_ACTIONS[i].action;
    return NULL;
}

/* Defaults for configuration subresources: what an unconfigured AWS bucket
 * answers, or the configuration the bucket holds. */
static void bucket_config(struct s3_ctx *x)
{
    const char *s = x->rt.sub;
    if (s3__op_bucket(x))
        return;
    const char *action = s3__bucket_config_action(s);
    bool acl = strcmp(s, "acl") == 0;
    if (s3__authz(x, &x->b, action ? action : "s3:GetBucketConfiguration",
                  acl ? S3_AZ_B_READ_ACP : S3_AZ_B_OWNER, NULL, NULL))
        return;
    if (s3__bcfg_get(x, s))
        return; /* a configuration it holds: answered */
    struct evbuffer *b = x->out.body;
    static const struct {
        const char *sub;
        enum s3_err err;
    } missing[] = {
        {"policy", S3E_NO_SUCH_BUCKET_POLICY},
        {"policyStatus", S3E_NO_SUCH_BUCKET_POLICY},
        {"cors", S3E_NO_SUCH_CORS},
        {"encryption", S3E_NO_SSE_CONFIG},
        {"website", S3E_NO_SUCH_WEBSITE},
        {"replication", S3E_NO_REPLICATION_CONFIG},
        {"ownershipControls", S3E_NO_OWNERSHIP_CONTROLS},
        {"publicAccessBlock", S3E_NO_PUBLIC_ACCESS_BLOCK},
        {"tagging", S3E_NO_SUCH_TAG_SET},
    };
    for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++)
        if (strcmp(s, missing[i].sub) == 0) {
            s3__resp_s3err(x, missing[i].err, NULL);
            return;
        }
    s3__resp_xml(x);
    if (strcmp(s, "logging") == 0)
        evbuffer_add_printf(b, "<BucketLoggingStatus xmlns=\"%s\"/>\n", S3_XMLNS);
    else if (strcmp(s, "notification") == 0)
        evbuffer_add_printf(b, "<NotificationConfiguration xmlns=\"%s\"/>\n", S3_XMLNS);
    else if (strcmp(s, "accelerate") == 0)
        evbuffer_add_printf(b, "<AccelerateConfiguration xmlns=\"%s\"/>\n", S3_XMLNS);
    else if (strcmp(s, "requestPayment") == 0)
        evbuffer_add_printf(b,
                            "<RequestPaymentConfiguration xmlns=\"%s\"><Payer>BucketOwner"
                            "</Payer></RequestPaymentConfiguration>\n",
                            S3_XMLNS);
    else
        s3__resp_err(x, SRV_ENOTSUPP,
                     s3__arena_printf(x->a, "GET Bucket ?%s is not implemented", s));
}

/* ---------------------------------------------------------------- listings */

enum list_kind { L_V1, L_V2 };

struct list_state {
    struct s3_ctx *x;
    enum list_kind kind;
    bool url; /* encoding-type=url */
    bool owner;
    struct evbuffer *contents, *prefixes;
    const char *after;
    size_t afterlen;
    uint32_t count;
    char *last; /* last key or prefix given */
    size_t lastlen;
    bool last_is_prefix;
    struct s3_owner_cache oc;
    const char *sclass; /* the bucket's tier class, once looked up */
};

void s3__list_text(bool url, struct evbuffer *b, const char *tag, const char *s, size_t n)
{
    evbuffer_add_printf(b, "<%s>", tag);
    if (url)
        s3__url_encode_buf(b, s, n, true);
    else
        s3__xml_esc(b, s, n);
    evbuffer_add_printf(b, "</%s>", tag);
}

static void list_text(struct list_state *st, struct evbuffer *b, const char *tag, const char *s,
                      size_t n)
{
    s3__list_text(st->url, b, tag, s, n);
}

static int list_cb(void *arg, const struct core_listent *e)
{
    struct list_state *st = arg;
    struct s3_ctx *x = st->x;
    /* belt and braces: never repeat what the previous page ended on */
    if (st->after && e->keylen <= st->afterlen && memcmp(e->key, st->after, e->keylen) == 0 &&
        e->keylen == st->afterlen)
        return 0;
    st->count++;
    st->last = s3__arena_strndup(x->a, e->key, e->keylen);
    st->lastlen = e->keylen;
    st->last_is_prefix = e->is_prefix;
    if (e->is_prefix) {
        evbuffer_add_printf(st->prefixes, "<CommonPrefixes>");
        list_text(st, st->prefixes, "Prefix", e->key, e->keylen);
        evbuffer_add_printf(st->prefixes, "</CommonPrefixes>");
        return 0;
    }
    const struct core_objinfo *oi = e->info;
    char iso[25];
    s3__iso_date_fmt(&oi->attr.mtime, iso);
    bool dir = oi->attr.type == CORE_DIR;
    struct evbuffer *b = st->contents;
    evbuffer_add_printf(b, "<Contents>");
    list_text(st, b, "Key", e->key, e->keylen);
    evbuffer_add_printf(b,
                        "<LastModified>%s</LastModified><ETag>&quot;%s&quot;</ETag>"
                        "<Size>%" PRIu64 "</Size>",
                        iso, dir || !oi->etag[0] ? S3_EMPTY_MD5 : oi->etag,
                        dir ? 0 : oi->attr.size);
    if (st->owner)
        s3__owner_xml(x, b, x->b.cfg.ownership == S3_OWN_ENFORCED ? x->b.attr.uid : oi->attr.uid,
                      &st->oc);
    s3__xml_elem(b, "StorageClass", s3__storage_class(x, x->bucket_ino, &oi->attr, &st->sclass));
    evbuffer_add_printf(b, "</Contents>");
    return 0;
}

int s3__parse_max_keys(struct s3_ctx *x, uint32_t *out)
{
    const char *name = "max-keys";
    const char *v = s3__req_param(x->req, name);
    *out = 1000;
    if (!v)
        return 0;
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (!*v || !end || *end || n < 0) {
        s3__resp_err(x, -EINVAL, s3__arena_printf(x->a, "%s must be a non-negative integer", name));
        return -1;
    }
    *out = n > 1000 ? 1000 : (uint32_t)n;
    return 0;
}

static void list_common(struct s3_ctx *x, enum list_kind kind)
{
    const struct s3_req *r = x->req;
    struct list_state st = {.x = x, .kind = kind};
    const char *prefix = s3__req_param(r, "prefix");
    const char *delim = s3__req_param(r, "delimiter");
    const char *enc = s3__req_param(r, "encoding-type");
    uint32_t max;
    if (enc && strcmp(enc, "url") != 0) {
        s3__resp_err(x, -EINVAL, "invalid encoding type");
        return;
    }
    st.url = enc != NULL;
    if (s3__parse_max_keys(x, &max))
        return;
    if (s3__op_bucket(x))
        return;
    const char *after = NULL, *token = NULL;
    if (kind == L_V1) {
        after = s3__req_param(r, "marker");
        st.owner = true;
    } else {
        token = s3__req_param(r, "continuation-token");
        if (token && !*token)
            token = NULL; /* an empty token: from the start, as AWS */
        const char *fo = s3__req_param(r, "fetch-owner");
        st.owner = fo && strcmp(fo, "true") == 0;
        if (token) {
            size_t tl = strlen(token);
            unsigned char *dec = s3__arena_alloc(x->a, tl + 4);
            long n = s3__b64_decode(token, tl, dec);
            if (n <= 0) {
                s3__resp_err(x, -EINVAL, "the continuation token provided is incorrect");
                return;
            }
            after = s3__arena_strndup(x->a, (const char *)dec, (size_t)n);
        } else {
            after = s3__req_param(r, "start-after");
        }
    }
    if (after && !*after)
        after = NULL;
    size_t afterlen = after ? strlen(after) : 0;
    const char *core_after = after;
    size_t core_afterlen = afterlen;
    if (after && delim && *delim) {
        size_t dl = strlen(delim);
        size_t pl = prefix ? strlen(prefix) : 0;
        if (afterlen >= dl && afterlen >= pl + dl &&
            memcmp(after + afterlen - dl, delim, dl) == 0 &&
            (!prefix || strncmp(after, prefix, pl) == 0)) {
            char *skip = s3__arena_alloc(x->a, afterlen + 2);
            memcpy(skip, after, afterlen);
            skip[afterlen] = (char)0xFF;
            core_after = skip;
            core_afterlen = afterlen + 1;
        }
    }
    st.after = after;
    st.afterlen = afterlen;
    st.contents = evbuffer_new();
    st.prefixes = evbuffer_new();
    bool truncated = false;
    int rc = 0;
    if (max > 0)
        rc = core_list(x->core, &x->p, x->bucket_ino, prefix, prefix ? strlen(prefix) : 0,
                       core_after, core_afterlen, delim && *delim ? delim : NULL,
                       delim ? strlen(delim) : 0, max, list_cb, &st, &truncated);
    if (rc) {
        s3__resp_err(x, rc, NULL);
        goto out;
    }
    struct evbuffer *b = x->out.body;
    s3__resp_xml(x);
    const char *root = "ListBucketResult";
    evbuffer_add_printf(b, "<%s xmlns=\"%s\">", root, S3_XMLNS);
    s3__xml_elem(b, "Name", x->rt.bucket);
    list_text(&st, b, "Prefix", prefix ? prefix : "", prefix ? strlen(prefix) : 0);
    if (kind == L_V1) {
        list_text(&st, b, "Marker", after ? after : "", afterlen);
        if (truncated && st.last)
            list_text(&st, b, "NextMarker", st.last, st.lastlen);
    } else {
        if (token)
            s3__xml_elem(b, "ContinuationToken", token);
        const char *sa = s3__req_param(r, "start-after");
        if (sa)
            list_text(&st, b, "StartAfter", sa, strlen(sa));
        s3__xml_elem_u64(b, "KeyCount", st.count);
        if (truncated && st.last) {
            char *tok = s3__arena_alloc(x->a, 4 * (st.lastlen / 3 + 2) + 1);
            s3__b64_encode((const unsigned char *)st.last, st.lastlen, tok);
            s3__xml_elem(b, "NextContinuationToken", tok);
        }
    }
    s3__xml_elem_u64(b, "MaxKeys", max);
    if (delim && *delim) /* an empty delimiter is none, and not echoed (AWS) */
        list_text(&st, b, "Delimiter", delim, strlen(delim));
    if (st.url)
        s3__xml_elem(b, "EncodingType", "url");
    s3__xml_elem(b, "IsTruncated", truncated ? "true" : "false");
    evbuffer_add_buffer(b, st.contents);
    evbuffer_add_buffer(b, st.prefixes);
    evbuffer_add_printf(b, "</%s>\n", root);
out:
    evbuffer_free(st.contents);
    evbuffer_free(st.prefixes);
}

static void list_v1(struct s3_ctx *x)
{
    list_common(x, L_V1);
}

static void list_v2(struct s3_ctx *x)
{
    list_common(x, L_V2);
}

const struct s3_op s3_op_list_buckets = {
    .name = "ListBuckets", .qos = QOS_META, .work = list_buckets};
const struct s3_op s3_op_create_bucket = {
    .name = "CreateBucket", .body = S3_BODY_XML, .qos = QOS_META, .work = create_bucket};
const struct s3_op s3_op_delete_bucket = {.name = "DeleteBucket",
                                          .action = "s3:DeleteBucket",
                                          .az = S3_AZ_B_OWNER,
                                          .qos = QOS_META,
                                          .work = delete_bucket};
const struct s3_op s3_op_head_bucket = {.name = "HeadBucket",
                                        .action = "s3:ListBucket",
                                        .az = S3_AZ_B_READ,
                                        .qos = QOS_META,
                                        .work = head_bucket};
const struct s3_op s3_op_bucket_location = {.name = "GetBucketLocation",
                                            .action = "s3:GetBucketLocation",
                                            .az = S3_AZ_B_OWNER,
                                            .qos = QOS_META,
                                            .work = bucket_location};
const struct s3_op s3_op_bucket_config = {
    .name = "GetBucketConfig", .qos = QOS_META, .work = bucket_config};
const struct s3_op s3_op_list_objects = {.name = "ListObjects",
                                         .action = "s3:ListBucket",
                                         .az = S3_AZ_B_READ,
                                         .qos = QOS_META,
                                         .work = list_v1};
const struct s3_op s3_op_list_objects_v2 = {.name = "ListObjectsV2",
                                            .action = "s3:ListBucket",
                                            .az = S3_AZ_B_READ,
                                            .qos = QOS_META,
                                            .work = list_v2};
